-- A turn is found by its tenant, instance and number in one index.
--
-- Every read of agent_state_ledger runs under row-level security, so each
-- carries the policy's "tenant_id = <the transaction's tenant>" beside its
-- own "instance_id = ...". With the ledger's indexes on (instance_id,
-- turn_number) and (tenant_id, id), PostgreSQL planned those reads as a
-- BitmapAnd of both: every ledger entry of the instance and of the whole
-- tenant, then a sort. That cost grows with the tenant's history on every
-- tick. genesis_apply_complete's next turn number took 0.35 ms a tick in the
-- benchmark at a few hundred turns per instance (BENCHMARKS.md 0l); the
-- bundle's ledger tail and its delta check read the same way.
--
-- The unique key becomes (tenant_id, instance_id, turn_number). It is the
-- same rule: an instance belongs to one tenant (the foreign key
-- (tenant_id, instance_id) to agent_instances (tenant_id, id)), so a turn
-- number is still unique per instance. Under the policy each of those reads
-- is now one backward scan of that index. Building it blocks writes to the
-- ledger for the build's duration (seconds per million turns).
--
-- genesis_apply_complete also numbered the turn with max(turn_number), which
-- aggregates every entry of the instance under some plans; it now reads the
-- newest entry (ORDER BY turn_number DESC LIMIT 1), and names the tenant
-- itself, so the plan does not depend on the policy. The function is
-- otherwise migration 0082's; the four-argument form still calls it.

ALTER TABLE agent_state_ledger
    ADD CONSTRAINT agent_state_ledger_tenant_instance_turn_key UNIQUE (tenant_id, instance_id, turn_number);
ALTER TABLE agent_state_ledger DROP CONSTRAINT agent_state_ledger_instance_id_turn_number_key;

CREATE OR REPLACE FUNCTION genesis_apply_complete(p_tenant uuid, p_instance uuid, p_session uuid, p jsonb, p_expect jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    inst agent_instances;
    ev agent_event_queue;
    hb agent_event_queue;
    v_turn bigint;
    v_ledger uuid;
    v_halt boolean := coalesce((p->>'halt')::boolean, false);
    v_next timestamptz := now() + coalesce((p->>'next_tick_delay_ms')::bigint, 0) * interval '1 millisecond';
    v_attention uuid;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT * INTO inst FROM agent_instances WHERE id = p_instance AND tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF inst.lease_session IS DISTINCT FROM p_session THEN
        RETURN jsonb_build_object('outcome', 'lease_lost');
    END IF;
    SELECT * INTO ev FROM agent_event_queue
     WHERE id = (p->>'event_id')::uuid AND instance_id = p_instance AND claimed_session = p_session
       AND consumed_at IS NULL AND dead_lettered_at IS NULL
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('outcome', 'event_not_claimed');
    END IF;
    IF p_expect IS NOT NULL AND (
           inst.plan_input_hash IS DISTINCT FROM p_expect->>'plan_input_hash'
        OR inst.consecutive_idle_ticks IS DISTINCT FROM (p_expect->>'consecutive_idle_ticks')::integer
        OR inst.idle_ticks_since_replan IS DISTINCT FROM (p_expect->>'idle_ticks_since_replan')::integer
        OR inst.consecutive_blocked_turns IS DISTINCT FROM (p_expect->>'consecutive_blocked_turns')::integer
        OR ev.event_kind IS DISTINCT FROM p_expect->>'event_kind') THEN
        RETURN jsonb_build_object('outcome', 'stale_prior');
    END IF;

    -- The newest turn: one entry of (tenant_id, instance_id, turn_number).
    SELECT coalesce((SELECT l.turn_number FROM agent_state_ledger l
                      WHERE l.tenant_id = p_tenant AND l.instance_id = p_instance
                      ORDER BY l.turn_number DESC LIMIT 1), 0) + 1
      INTO v_turn;
    INSERT INTO agent_state_ledger (tenant_id, instance_id, turn_number, event_id, event_kind, event_payload,
        decision_kind, phase, decision_payload, wait_condition, reasoning_summary, plan_input_hash,
        llm_call_snapshot_id, served_model, cost_usd, input_tokens, output_tokens)
    VALUES (p_tenant, p_instance, v_turn, ev.id, ev.event_kind, ev.payload,
        p->>'decision_kind', p->>'phase', coalesce(p->'decision_payload', '{}'::jsonb),
        p->>'wait_condition', p->>'reasoning_summary', p->>'plan_input_hash',
        (p->>'llm_call_snapshot_id')::uuid, p->>'served_model', (p->>'cost_usd')::numeric,
        (p->>'input_tokens')::bigint, (p->>'output_tokens')::bigint)
    RETURNING id INTO v_ledger;

    INSERT INTO agent_state_ledger_actions (tenant_id, ledger_id, ordinal, tool_name, arguments, result,
                                            side_effecting, blocked)
    SELECT p_tenant, v_ledger, (a.ord - 1)::integer, a.v->>'tool_name', coalesce(a.v->'arguments', '{}'::jsonb),
           a.v->'result', coalesce((a.v->>'side_effecting')::boolean, false),
           coalesce((a.v->>'blocked')::boolean, false)
      FROM jsonb_array_elements(coalesce(p->'actions', '[]'::jsonb)) WITH ORDINALITY AS a(v, ord);

    UPDATE agent_event_queue SET consumed_at = now() WHERE id = ev.id;

    IF v_halt THEN
        -- STUCK halt: no heartbeat survives, the queue drains, an operator is asked.
        UPDATE agent_event_queue SET consumed_at = now()
         WHERE instance_id = p_instance AND event_kind = 'AgentTick'
           AND consumed_at IS NULL AND dead_lettered_at IS NULL;
        INSERT INTO attention_requests (tenant_id, instance_id, kind, title, body, metadata)
        VALUES (p_tenant, p_instance, 'stuck_halt',
                format('Agent %s halted: stuck', inst.agent_type),
                format('Agent instance %s was blocked for %s consecutive turns and has been closed.',
                       p_instance, p->>'consecutive_blocked_turns'),
                jsonb_build_object('source', 'supervisor', 'instanceId', p_instance,
                                   'consecutiveBlockedTurns', (p->>'consecutive_blocked_turns')::integer,
                                   'ledgerId', v_ledger))
        RETURNING id INTO v_attention;
        v_next := NULL;
    ELSE
        -- Exactly one pending heartbeat. An already pending one is kept where it is.
        hb := genesis_ensure_heartbeat(p_tenant, p_instance, v_next);
        v_next := hb.visible_at;
    END IF;

    UPDATE agent_instances SET
        status = CASE WHEN v_halt THEN 'closed' ELSE status END,
        phase = p->>'phase',
        next_tick_at = v_next,
        consecutive_idle_ticks = (p->>'consecutive_idle_ticks')::integer,
        idle_ticks_since_replan = (p->>'idle_ticks_since_replan')::integer,
        consecutive_blocked_turns = (p->>'consecutive_blocked_turns')::integer,
        last_decision_kind = p->>'decision_kind',
        plan_input_hash = coalesce(p->>'plan_input_hash', plan_input_hash),
        lease_session = NULL,
        lease_expires_at = NULL,
        updated_at = now()
     WHERE id = p_instance;

    PERFORM pg_notify('genesis_turns', json_build_object('tenant_id', p_tenant, 'instance_id', p_instance,
        'ledger_id', v_ledger, 'decision_kind', p->>'decision_kind')::text);

    RETURN jsonb_build_object('outcome', 'completed', 'ledger_id', v_ledger, 'turn_number', v_turn,
        'halted', v_halt, 'next_tick_at', v_next, 'heartbeat_event_id', hb.id,
        'attention_request_id', v_attention);
END
$$;
