-- One priced attempt, as before, now with the price it was billed at.
CREATE OR REPLACE FUNCTION public.genesis_write_call_attempt(p_tenant uuid, p_instance uuid, a jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    snap llm_call_snapshots;
    ord integer;
    win credit_windows;
BEGIN
    INSERT INTO llm_call_snapshots
        (tenant_id, instance_id, invocation_id, site_id, requested_model, served_model,
         input_tokens, output_tokens, cost_usd, prompt_overlay_sha256)
    VALUES (p_tenant, p_instance, a->>'invocation_id', a->>'site_id', a->>'requested_model',
            a->>'served_model', (a->>'input_tokens')::bigint, (a->>'output_tokens')::bigint,
            (a->>'cost_usd')::double precision, a->>'prompt_overlay_sha256')
    ON CONFLICT (tenant_id, instance_id, invocation_id) DO UPDATE SET
        served_model = coalesce(EXCLUDED.served_model, llm_call_snapshots.served_model),
        prompt_overlay_sha256 = coalesce(llm_call_snapshots.prompt_overlay_sha256,
                                         EXCLUDED.prompt_overlay_sha256),
        input_tokens = llm_call_snapshots.input_tokens + EXCLUDED.input_tokens,
        output_tokens = llm_call_snapshots.output_tokens + EXCLUDED.output_tokens,
        cost_usd = llm_call_snapshots.cost_usd + EXCLUDED.cost_usd,
        updated_at = now()
    RETURNING * INTO snap;
    INSERT INTO llm_call_attempts
        (tenant_id, snapshot_id, ordinal, provider, credential_name, requested_model, served_model,
         outcome, usage, latency_ms, cost_usd, error_message, priced_as, pricing_source)
    SELECT p_tenant, snap.id, coalesce(max(ordinal) + 1, 0), a->>'provider', a->>'credential_name',
           a->>'requested_model', coalesce(a->>'served_model', ''), a->>'outcome', a->'usage',
           (a->>'latency_ms')::bigint, (a->>'cost_usd')::double precision, a->>'error_message',
           a->>'priced_as', a->>'pricing_source'
      FROM llm_call_attempts WHERE snapshot_id = snap.id
    RETURNING ordinal INTO ord;
    win := genesis_credit_draw_down(p_tenant, (a->>'week_start')::timestamptz,
                                    (a->>'limit_usd')::double precision,
                                    (a->>'cost_usd')::double precision);
    RETURN jsonb_build_object('snapshot', to_jsonb(snap), 'ordinal', ord, 'credit', to_jsonb(win));
END
$function$;
