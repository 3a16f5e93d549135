-- RecordReplayAttempt: one priced attempt of a replay's call, recorded
-- against the replay (call tag Replay) under the invocation's snapshot,
-- then appended and drawn down like an agent's (genesis_append_call_attempt).
-- Any session that ever claimed the replay may record: the provider billed
-- the call whether or not the claim still stands. Returns
-- {"outcome": "not_found"} with nothing written, or {"outcome": "recorded",
-- "current": whether p_session still runs the replay, "snapshot": …,
-- "ordinal": n, "credit": …}.
CREATE OR REPLACE FUNCTION public.genesis_record_replay_attempt(p_tenant uuid, p_replay uuid, p_session uuid, a jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    r agent_replays;
    snap llm_call_snapshots;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT * INTO r FROM agent_replays
     WHERE id = p_replay AND tenant_id = p_tenant AND p_session = ANY (sessions) FOR SHARE;
    IF r.id IS NULL THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    INSERT INTO llm_call_snapshots
        (tenant_id, replay_id, invocation_id, site_id, call_tag, requested_model,
         served_model, input_tokens, output_tokens, cost_usd)
    VALUES (p_tenant, p_replay, a->>'invocation_id', a->>'site_id', 'Replay', a->>'requested_model',
            a->>'served_model', (a->>'input_tokens')::bigint, (a->>'output_tokens')::bigint,
            (a->>'cost_usd')::double precision)
    ON CONFLICT (tenant_id, replay_id, invocation_id) WHERE replay_id IS NOT NULL
    DO UPDATE SET
        served_model = coalesce(EXCLUDED.served_model, llm_call_snapshots.served_model),
        input_tokens = llm_call_snapshots.input_tokens + EXCLUDED.input_tokens,
        output_tokens = llm_call_snapshots.output_tokens + EXCLUDED.output_tokens,
        cost_usd = llm_call_snapshots.cost_usd + EXCLUDED.cost_usd,
        updated_at = now()
    RETURNING * INTO snap;
    RETURN jsonb_build_object('outcome', 'recorded', 'snapshot', to_jsonb(snap),
                              'current', r.status = 'running' AND r.session = p_session)
        || genesis_append_call_attempt(p_tenant, snap.id, a);
END
$function$;
