-- Server-side tick primitives (DESIGN §4): each tick transaction is one round
-- trip. The functions run as the caller (SECURITY INVOKER), so row-level
-- security applies to them exactly as to plain statements; each sets the
-- transaction-local tenant itself so a single autocommit call is a complete,
-- tenant-scoped transaction. Rules (decision mapping, cadence, counters) are
-- computed by the caller from genesis-core and passed in; these functions only
-- apply them atomically. The one exception to SECURITY INVOKER is
-- genesis_reset_instance, the single documented clear of the append-only ledger.

CREATE FUNCTION genesis_set_tenant(p_tenant uuid) RETURNS void
LANGUAGE sql AS $$
    SELECT set_config('genesis.tenant_id', p_tenant::text, true);
$$;

-- Insert one event with the instance's next sequence number and notify the
-- outbox. The caller must hold the instance row lock. Returns the event id.
CREATE FUNCTION genesis_insert_event(p_tenant uuid, p_instance uuid, p_kind text, p_payload jsonb,
                                     p_visible_at timestamptz, p_attention_request_id uuid)
RETURNS agent_event_queue
LANGUAGE plpgsql AS $$
DECLARE
    seq bigint;
    ev agent_event_queue;
BEGIN
    UPDATE agent_instances SET event_sequence = event_sequence + 1
     WHERE id = p_instance AND tenant_id = p_tenant
    RETURNING event_sequence INTO seq;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'agent instance % not found', p_instance USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO agent_event_queue (tenant_id, instance_id, sequence_number, event_kind, payload, visible_at,
                                   attention_request_id)
    VALUES (p_tenant, p_instance, seq, p_kind, coalesce(p_payload, '{}'::jsonb), coalesce(p_visible_at, now()),
            p_attention_request_id)
    RETURNING * INTO ev;
    PERFORM pg_notify('genesis_due', json_build_object('tenant_id', p_tenant, 'instance_id', p_instance,
        'event_id', ev.id, 'visible_at', ev.visible_at)::text);
    RETURN ev;
END
$$;

-- Seed the heartbeat unless one is pending; returns the pending heartbeat
-- (new or existing). The caller must hold the instance row lock.
CREATE FUNCTION genesis_ensure_heartbeat(p_tenant uuid, p_instance uuid, p_at timestamptz)
RETURNS agent_event_queue
LANGUAGE plpgsql AS $$
DECLARE
    ev agent_event_queue;
BEGIN
    SELECT * INTO ev FROM agent_event_queue
     WHERE instance_id = p_instance AND event_kind = 'AgentTick'
       AND consumed_at IS NULL AND dead_lettered_at IS NULL;
    IF FOUND THEN
        RETURN ev;
    END IF;
    RETURN genesis_insert_event(p_tenant, p_instance, 'AgentTick', '{}'::jsonb, p_at, NULL);
END
$$;

-- Enqueue (control). Locks the instance row, so concurrent enqueues to one
-- instance get distinct increasing sequence numbers. A heartbeat while one is
-- pending and an answered escalation already enqueued for the same attention
-- request return the existing event ('existing') instead of a second one.
CREATE FUNCTION genesis_enqueue_event(p_tenant uuid, p_instance uuid, p_kind text, p_payload jsonb,
                                      p_visible_at timestamptz, p_attention_request_id uuid)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    ev agent_event_queue;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    PERFORM 1 FROM agent_instances WHERE id = p_instance AND tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('outcome', 'not_found', 'what', 'agent instance');
    END IF;
    IF p_attention_request_id IS NOT NULL THEN
        PERFORM 1 FROM attention_requests WHERE id = p_attention_request_id AND tenant_id = p_tenant;
        IF NOT FOUND THEN
            RETURN jsonb_build_object('outcome', 'not_found', 'what', 'attention request');
        END IF;
        SELECT * INTO ev FROM agent_event_queue
         WHERE attention_request_id = p_attention_request_id AND event_kind = 'OperatorAnsweredEscalation';
        IF FOUND THEN
            RETURN jsonb_build_object('outcome', 'existing', 'event', to_jsonb(ev));
        END IF;
    END IF;
    IF p_kind = 'AgentTick' THEN
        SELECT * INTO ev FROM agent_event_queue
         WHERE instance_id = p_instance AND event_kind = 'AgentTick'
           AND consumed_at IS NULL AND dead_lettered_at IS NULL;
        IF FOUND THEN
            RETURN jsonb_build_object('outcome', 'existing', 'event', to_jsonb(ev));
        END IF;
    END IF;
    ev := genesis_insert_event(p_tenant, p_instance, p_kind, p_payload, p_visible_at, p_attention_request_id);
    RETURN jsonb_build_object('outcome', 'created', 'event', to_jsonb(ev));
END
$$;

-- ClaimTick (spec §3.3): CAS lease, dequeue with dead-lettering, heartbeat seed.
CREATE FUNCTION genesis_claim_tick(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval,
                                   p_max_attempts integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    inst agent_instances;
    ev agent_event_queue;
    hb agent_event_queue;
    dead integer := 0;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    UPDATE agent_instances
       SET lease_session = p_session, lease_expires_at = now() + p_ttl, updated_at = now()
     WHERE id = p_instance AND tenant_id = p_tenant AND status = 'active'
       AND (lease_session IS NULL OR lease_expires_at < now())
    RETURNING * INTO inst;
    IF NOT FOUND THEN
        SELECT * INTO inst FROM agent_instances WHERE id = p_instance AND tenant_id = p_tenant;
        IF NOT FOUND THEN
            RETURN jsonb_build_object('outcome', 'not_found');
        ELSIF inst.status <> 'active' THEN
            RETURN jsonb_build_object('outcome', 'not_active', 'status', inst.status);
        END IF;
        RETURN jsonb_build_object('outcome', 'lease_held');
    END IF;

    LOOP
        SELECT * INTO ev FROM agent_event_queue
         WHERE instance_id = p_instance AND consumed_at IS NULL AND dead_lettered_at IS NULL
           AND visible_at <= now()
         ORDER BY sequence_number
         LIMIT 1
         FOR UPDATE;
        EXIT WHEN NOT FOUND;
        IF ev.attempts >= p_max_attempts THEN
            UPDATE agent_event_queue SET dead_lettered_at = now() WHERE id = ev.id;
            INSERT INTO attention_requests (tenant_id, instance_id, kind, title, body, metadata)
            VALUES (p_tenant, p_instance, 'dead_letter',
                    format('Event %s dead-lettered', ev.event_kind),
                    format('Event %s (sequence %s) of agent instance %s failed %s deliveries and was set aside.',
                           ev.id, ev.sequence_number, p_instance, ev.attempts),
                    jsonb_build_object('source', 'supervisor', 'instanceId', p_instance, 'eventId', ev.id,
                                       'eventKind', ev.event_kind, 'attempts', ev.attempts));
            dead := dead + 1;
            CONTINUE;
        END IF;
        UPDATE agent_event_queue SET claimed_session = p_session, attempts = attempts + 1
         WHERE id = ev.id
        RETURNING * INTO ev;
        RETURN jsonb_build_object('outcome', 'claimed', 'instance', to_jsonb(inst), 'event', to_jsonb(ev),
                                  'dead_lettered', dead);
    END LOOP;

    hb := genesis_ensure_heartbeat(p_tenant, p_instance, greatest(coalesce(inst.next_tick_at, now()), now()));
    UPDATE agent_instances SET lease_session = NULL, lease_expires_at = NULL
     WHERE id = p_instance AND lease_session = p_session;
    RETURN jsonb_build_object('outcome', 'nothing_due', 'heartbeat', to_jsonb(hb), 'dead_lettered', dead);
END
$$;

CREATE FUNCTION genesis_renew_lease(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    UPDATE agent_instances SET lease_expires_at = now() + p_ttl
     WHERE id = p_instance AND tenant_id = p_tenant AND lease_session = p_session;
    RETURN FOUND;
END
$$;

-- First statement of CompleteTick: lock the instance row and check the session
-- guard; return the locked pre-tick snapshot and the claimed event so the
-- caller can compute the rules before genesis_apply_complete.
CREATE FUNCTION genesis_lock_for_complete(p_tenant uuid, p_instance uuid, p_session uuid, p_event uuid)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    inst agent_instances;
    ev agent_event_queue;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT * INTO inst FROM agent_instances WHERE id = p_instance AND tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('outcome', 'not_found', 'what', 'agent instance');
    END IF;
    IF inst.lease_session IS DISTINCT FROM p_session THEN
        RETURN jsonb_build_object('outcome', 'lease_lost');
    END IF;
    SELECT * INTO ev FROM agent_event_queue
     WHERE id = p_event AND instance_id = p_instance AND claimed_session = p_session
       AND consumed_at IS NULL AND dead_lettered_at IS NULL;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('outcome', 'event_not_claimed');
    END IF;
    RETURN jsonb_build_object('outcome', 'locked', 'instance', to_jsonb(inst), 'event', to_jsonb(ev));
END
$$;

-- Second statement of CompleteTick, same transaction: the single passivation
-- write. p carries everything the caller computed (see genesis-store's
-- tick module for the field list).
CREATE FUNCTION genesis_apply_complete(p_tenant uuid, p_instance uuid, p_session uuid, p jsonb)
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
    IF NOT FOUND OR inst.lease_session IS DISTINCT FROM p_session THEN
        RETURN jsonb_build_object('outcome', 'lease_lost');
    END IF;
    SELECT * INTO ev FROM agent_event_queue
     WHERE id = (p->>'event_id')::uuid AND instance_id = p_instance AND claimed_session = p_session
       AND consumed_at IS NULL AND dead_lettered_at IS NULL
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('outcome', 'event_not_claimed');
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

-- Reset (spec §3.9): the one documented clear of the append-only ledger.
-- SECURITY DEFINER because neither service role may DELETE ledger rows; it
-- refuses any tenant other than the transaction's own, and refuses while a
-- live lease is held (a tick is mid-flight).
CREATE FUNCTION genesis_reset_instance(p_tenant uuid, p_instance uuid)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    inst agent_instances;
    ev agent_event_queue;
    v_turns bigint;
    v_drained bigint;
BEGIN
    IF p_tenant IS DISTINCT FROM nullif(current_setting('genesis.tenant_id', true), '')::uuid THEN
        RAISE EXCEPTION 'reset outside the tenant scope' USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT * INTO inst FROM agent_instances WHERE id = p_instance AND tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF inst.lease_session IS NOT NULL AND inst.lease_expires_at >= now() THEN
        RETURN jsonb_build_object('outcome', 'lease_held');
    END IF;
    DELETE FROM agent_state_ledger_actions
     WHERE tenant_id = p_tenant
       AND ledger_id IN (SELECT id FROM agent_state_ledger WHERE instance_id = p_instance AND tenant_id = p_tenant);
    DELETE FROM agent_state_ledger WHERE instance_id = p_instance AND tenant_id = p_tenant;
    GET DIAGNOSTICS v_turns = ROW_COUNT;
    UPDATE agent_event_queue SET consumed_at = now()
     WHERE instance_id = p_instance AND tenant_id = p_tenant AND consumed_at IS NULL AND dead_lettered_at IS NULL;
    GET DIAGNOSTICS v_drained = ROW_COUNT;
    UPDATE agent_instances SET
        phase = 'idle', next_tick_at = NULL, consecutive_idle_ticks = 0, consecutive_blocked_turns = 0,
        idle_ticks_since_replan = 0, plan_input_hash = NULL, last_decision_kind = NULL,
        lease_session = NULL, lease_expires_at = NULL, updated_at = now()
     WHERE id = p_instance;
    ev := genesis_insert_event(p_tenant, p_instance, 'AgentInitialized', '{}'::jsonb, now(), NULL);
    RETURN jsonb_build_object('outcome', 'reset', 'cleared_turns', v_turns, 'drained_events', v_drained,
                              'event_id', ev.id);
END
$$;
REVOKE EXECUTE ON FUNCTION genesis_reset_instance(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION genesis_reset_instance(uuid, uuid) TO genesis_app, genesis_system;
