-- One priced attempt of an agent's call: the invocation's snapshot upserted,
-- then the attempt appended and drawn down (genesis_append_call_attempt).
CREATE OR REPLACE FUNCTION public.genesis_write_call_attempt(p_tenant uuid, p_instance uuid, a jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    snap llm_call_snapshots;
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
    RETURN jsonb_build_object('snapshot', to_jsonb(snap))
        || genesis_append_call_attempt(p_tenant, snap.id, a);
END
$function$;
