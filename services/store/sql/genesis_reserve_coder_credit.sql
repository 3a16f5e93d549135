-- Reserve p_amount of the tenant's window for the next turn of the coder
-- running p_task: the task is the hold's session (one coder runs a task at
-- a time; a new coder's hold replaces the stopped one's). Returns
-- {"outcome": "not_found" | "settled" | "no_coder"} with nothing written,
-- or genesis_hold_credit's answer ("granted" | "refused").
CREATE OR REPLACE FUNCTION public.genesis_reserve_coder_credit(p_tenant uuid, p_task uuid, p_week_start timestamp with time zone, p_limit_usd double precision, p_amount double precision)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    t coding_tasks;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT * INTO t FROM coding_tasks WHERE id = p_task AND tenant_id = p_tenant FOR SHARE;
    IF t.id IS NULL THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF t.status NOT IN ('pending', 'running') THEN
        RETURN jsonb_build_object('outcome', 'settled');
    END IF;
    IF t.coder_id IS NULL THEN
        RETURN jsonb_build_object('outcome', 'no_coder');
    END IF;
    RETURN genesis_hold_credit(p_tenant, NULL, p_task, p_week_start, p_limit_usd, p_amount);
END
$function$;
