-- RecordCoderAttempt: one priced attempt of a coder's call, recorded
-- against its coding task (call tag Coder) under the invocation's
-- snapshot, then appended and drawn down like an agent's
-- (genesis_append_call_attempt). A settled task's cost is final. Returns
-- {"outcome": "not_found" | "settled"} with nothing written, or
-- {"outcome": "recorded", "snapshot": …, "ordinal": n, "credit": …}.
CREATE OR REPLACE FUNCTION public.genesis_record_coder_attempt(p_tenant uuid, p_task uuid, a jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    t coding_tasks;
    snap llm_call_snapshots;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT * INTO t FROM coding_tasks WHERE id = p_task AND tenant_id = p_tenant FOR SHARE;
    IF t.id IS NULL THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF t.status NOT IN ('pending', 'running') THEN
        RETURN jsonb_build_object('outcome', 'settled');
    END IF;
    INSERT INTO llm_call_snapshots
        (tenant_id, coding_task_id, invocation_id, site_id, call_tag, requested_model,
         served_model, input_tokens, output_tokens, cost_usd)
    VALUES (p_tenant, p_task, a->>'invocation_id', a->>'site_id', 'Coder', a->>'requested_model',
            a->>'served_model', (a->>'input_tokens')::bigint, (a->>'output_tokens')::bigint,
            (a->>'cost_usd')::double precision)
    ON CONFLICT (tenant_id, coding_task_id, invocation_id) WHERE coding_task_id IS NOT NULL
    DO UPDATE SET
        served_model = coalesce(EXCLUDED.served_model, llm_call_snapshots.served_model),
        input_tokens = llm_call_snapshots.input_tokens + EXCLUDED.input_tokens,
        output_tokens = llm_call_snapshots.output_tokens + EXCLUDED.output_tokens,
        cost_usd = llm_call_snapshots.cost_usd + EXCLUDED.cost_usd,
        updated_at = now()
    RETURNING * INTO snap;
    RETURN jsonb_build_object('outcome', 'recorded', 'snapshot', to_jsonb(snap))
        || genesis_append_call_attempt(p_tenant, snap.id, a);
END
$function$;
