-- Reserve p_amount of the tenant's window for p_session's next turn.
-- Returns {"outcome": "not_found" | "lease_lost"} with nothing written, or
-- genesis_hold_credit's answer ("granted" | "refused").
CREATE OR REPLACE FUNCTION public.genesis_reserve_credit(p_tenant uuid, p_instance uuid, p_session uuid, p_week_start timestamp with time zone, p_limit_usd double precision, p_amount double precision)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    holder uuid;
    found_instance boolean;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT lease_session, true INTO holder, found_instance
      FROM agent_instances WHERE id = p_instance AND tenant_id = p_tenant FOR SHARE;
    IF found_instance IS NULL THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF holder IS DISTINCT FROM p_session THEN
        RETURN jsonb_build_object('outcome', 'lease_lost');
    END IF;
    RETURN genesis_hold_credit(p_tenant, p_instance, p_session, p_week_start, p_limit_usd, p_amount);
END
$function$;
