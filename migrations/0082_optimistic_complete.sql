-- CompleteTick in one statement. Until now the supervisor's completion ran
-- as BEGIN, genesis_lock_for_complete (lock the instance, check the session,
-- return the instance row), the genesis-core counter rules in Rust, then
-- genesis_apply_complete and COMMIT: five round trips and three plpgsql
-- entries per tick, beside the genesis_complete_context read it already
-- made before them.
--
-- The counter rules need only four values of the instance (the plan-input
-- hash and the idle, re-plan and blocked counters) and the claimed event's
-- kind. genesis_complete_context now returns them as 'prior'. The supervisor
-- computes the counters from that unlocked read and sends them with the
-- values it computed them from as p_expect. Under the row lock this function
-- compares: when the instance still holds those values (always, in practice:
-- only the lease holder writes them, and the lease is checked in the same
-- statement) the turn is written at once, in one autocommit statement;
-- otherwise it writes nothing and answers 'stale_prior', and the caller
-- falls back to the locked read of migration 0002. So a stale read can cost
-- a retry, never a wrong counter.
--
-- The four-argument function stays for a supervisor of the previous release
-- during a rolling upgrade, now as this one without p_expect (one definition
-- of the turn write). That caller has already locked the row and checked the
-- session; the 'not_found' answer added here cannot reach it.

CREATE OR REPLACE FUNCTION genesis_complete_context(p_tenant uuid, p_event uuid, p_instance uuid, p_snapshot uuid)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    RETURN (
        SELECT jsonb_build_object(
            'event_kind', (SELECT e.event_kind FROM agent_event_queue e
                            WHERE e.id = p_event AND e.instance_id = p_instance),
            'active_mode', i.active_mode,
            'snapshot', (SELECT to_jsonb(s) FROM llm_call_snapshots s
                          WHERE s.id = p_snapshot AND s.instance_id = p_instance),
            'configs', genesis_effective_configs(p_tenant),
            'agent_type', i.agent_type,
            'prior', CASE WHEN i.id IS NOT NULL THEN jsonb_build_object(
                'plan_input_hash', i.plan_input_hash,
                'consecutive_idle_ticks', i.consecutive_idle_ticks,
                'idle_ticks_since_replan', i.idle_ticks_since_replan,
                'consecutive_blocked_turns', i.consecutive_blocked_turns) END)
          FROM (SELECT 1) one LEFT JOIN agent_instances i ON i.id = p_instance);
END
$$;

CREATE FUNCTION genesis_apply_complete(p_tenant uuid, p_instance uuid, p_session uuid, p jsonb, p_expect jsonb)
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

    SELECT coalesce(max(turn_number), 0) + 1 INTO v_turn FROM agent_state_ledger WHERE instance_id = p_instance;
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

CREATE OR REPLACE FUNCTION genesis_apply_complete(p_tenant uuid, p_instance uuid, p_session uuid, p jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RETURN genesis_apply_complete(p_tenant, p_instance, p_session, p, NULL::jsonb);
END
$$;
