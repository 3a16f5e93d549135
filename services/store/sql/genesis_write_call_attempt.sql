-- One priced attempt of an agent's call: the invocation's snapshot upserted,
-- then the attempt appended and drawn down (genesis_append_call_attempt).
-- The last attempt of an LLM turn carries the turn's journal step
-- (a->'journal': event_id, session, entry, bytes, max_bytes, and the system
-- prompt's text and SHA-256 when the turn sent one): it is written here,
-- in the attempt's own transaction, with the invocation's snapshot and cost so far, so
-- a turn that was paid for is a turn a resumed episode replays. The caller
-- has checked the session guard.
CREATE OR REPLACE FUNCTION public.genesis_write_call_attempt(p_tenant uuid, p_instance uuid, a jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    snap llm_call_snapshots;
    v_out jsonb;
    j jsonb := a->'journal';
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
    v_out := jsonb_build_object('snapshot', to_jsonb(snap))
        || genesis_append_call_attempt(p_tenant, snap.id, a);
    IF jsonb_typeof(j) = 'object' THEN
        IF j ? 'system_text' THEN
            INSERT INTO agent_prompt_texts (tenant_id, sha256, text)
            VALUES (p_tenant, j->>'system_sha256', j->>'system_text')
            ON CONFLICT DO NOTHING;
        END IF;
        v_out := v_out || jsonb_build_object('journal', genesis_journal_write(
            p_tenant, p_instance, (j->>'event_id')::uuid, (j->>'session')::uuid, 'llm_turn',
            (j->'entry') || jsonb_build_object('snapshot_cost_usd', snap.cost_usd, 'snapshot_id', snap.id),
            (j->>'max_bytes')::integer, (j->>'bytes')::integer));
    END IF;
    RETURN v_out;
END
$function$;
