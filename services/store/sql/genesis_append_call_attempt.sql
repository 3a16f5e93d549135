-- Append one priced attempt to its snapshot with the next ordinal and draw
-- its cost from the tenant's weekly window: the one write of an attempt,
-- after the snapshot upsert of an agent's call (genesis_write_call_attempt)
-- or of a coder's (genesis_record_coder_attempt). Returns {"ordinal": n,
-- "credit": the window after the draw}.
CREATE OR REPLACE FUNCTION public.genesis_append_call_attempt(p_tenant uuid, p_snapshot uuid, a jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    ord integer;
    win credit_windows;
BEGIN
    INSERT INTO llm_call_attempts
        (tenant_id, snapshot_id, ordinal, provider, credential_name, requested_model, served_model,
         outcome, usage, latency_ms, cost_usd, error_message, priced_as, pricing_source)
    SELECT p_tenant, p_snapshot, coalesce(max(ordinal) + 1, 0), a->>'provider', a->>'credential_name',
           a->>'requested_model', coalesce(a->>'served_model', ''), a->>'outcome', a->'usage',
           (a->>'latency_ms')::bigint, (a->>'cost_usd')::double precision, a->>'error_message',
           a->>'priced_as', a->>'pricing_source'
      FROM llm_call_attempts WHERE snapshot_id = p_snapshot
    RETURNING ordinal INTO ord;
    win := genesis_credit_draw_down(p_tenant, (a->>'week_start')::timestamptz,
                                    (a->>'limit_usd')::double precision,
                                    (a->>'cost_usd')::double precision);
    RETURN jsonb_build_object('ordinal', ord, 'credit', to_jsonb(win));
END
$function$;
