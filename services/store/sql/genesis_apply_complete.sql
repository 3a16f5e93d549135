-- Second statement of CompleteTick, same transaction: the single passivation
-- write. p carries everything the caller computed (see genesis-store's
-- tick module for the field list).
CREATE OR REPLACE FUNCTION public.genesis_apply_complete(p_tenant uuid, p_instance uuid, p_session uuid, p jsonb, p_expect jsonb, p_attempts jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    inst agent_instances;
    ev agent_event_queue;
    hb agent_event_queue;
    v_event uuid := (p->>'event_id')::uuid;
    v_turn bigint;
    v_ledger uuid;
    v_halt boolean := coalesce((p->>'halt')::boolean, false);
    v_next timestamptz := now() + coalesce((p->>'next_tick_delay_ms')::bigint, 0) * interval '1 millisecond';
    v_set_next timestamptz;
    v_agent_type text;
    v_attention uuid;
    v_i integer;
    v_snap jsonb;
    v_locked boolean := false;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    LOOP
        UPDATE agent_instances i SET
            status = CASE WHEN v_halt THEN 'closed' ELSE i.status END,
            phase = p->>'phase',
            next_tick_at = CASE WHEN v_halt THEN NULL ELSE coalesce(
                (SELECT h.visible_at FROM agent_event_queue h
                  WHERE h.instance_id = p_instance AND h.event_kind = 'AgentTick'
                    AND h.consumed_at IS NULL AND h.dead_lettered_at IS NULL AND h.id <> v_event),
                v_next) END,
            consecutive_idle_ticks = (p->>'consecutive_idle_ticks')::integer,
            idle_ticks_since_replan = (p->>'idle_ticks_since_replan')::integer,
            consecutive_blocked_turns = (p->>'consecutive_blocked_turns')::integer,
            consecutive_provider_failures = 0,
            -- A supervisor of the previous release sends no streak: 0.
            consecutive_exhausted_turns = coalesce((p->>'consecutive_exhausted_turns')::integer, 0),
            last_decision_kind = p->>'decision_kind',
            plan_input_hash = coalesce(p->>'plan_input_hash', i.plan_input_hash),
            lease_session = NULL,
            lease_expires_at = NULL,
            updated_at = now()
         WHERE i.id = p_instance AND i.tenant_id = p_tenant AND i.lease_session = p_session
           AND (p_expect IS NULL OR (
                    i.plan_input_hash IS NOT DISTINCT FROM p_expect->>'plan_input_hash'
                AND i.consecutive_idle_ticks IS NOT DISTINCT FROM (p_expect->>'consecutive_idle_ticks')::integer
                AND i.idle_ticks_since_replan IS NOT DISTINCT FROM (p_expect->>'idle_ticks_since_replan')::integer
                AND i.consecutive_blocked_turns IS NOT DISTINCT FROM
                    (p_expect->>'consecutive_blocked_turns')::integer
                AND i.consecutive_exhausted_turns IS NOT DISTINCT FROM
                    coalesce((p_expect->>'consecutive_exhausted_turns')::integer, i.consecutive_exhausted_turns)))
           AND EXISTS (SELECT 1 FROM agent_event_queue e
                        WHERE e.id = v_event AND e.instance_id = p_instance AND e.claimed_session = p_session
                          AND e.consumed_at IS NULL AND e.dead_lettered_at IS NULL
                          AND (p_expect IS NULL OR e.event_kind IS NOT DISTINCT FROM p_expect->>'event_kind'))
        RETURNING i.agent_type, i.next_tick_at INTO v_agent_type, v_set_next;
        EXIT WHEN FOUND;
        IF v_locked THEN
            RAISE EXCEPTION 'genesis_apply_complete: guard of instance % failed with no reason under its lock',
                p_instance;
        END IF;

        -- Refused: read why under the row lock, checking in the guard's order
        -- (instance, lease, event), so the answer names the first that failed;
        -- nothing is written.
        SELECT * INTO inst FROM agent_instances WHERE id = p_instance AND tenant_id = p_tenant FOR UPDATE;
        IF NOT FOUND THEN
            RETURN jsonb_build_object('outcome', 'not_found');
        END IF;
        IF inst.lease_session IS DISTINCT FROM p_session THEN
            RETURN jsonb_build_object('outcome', 'lease_lost');
        END IF;
        SELECT * INTO ev FROM agent_event_queue
         WHERE id = v_event AND instance_id = p_instance AND claimed_session = p_session
           AND consumed_at IS NULL AND dead_lettered_at IS NULL;
        IF NOT FOUND THEN
            RETURN jsonb_build_object('outcome', 'event_not_claimed');
        END IF;
        IF p_expect IS NOT NULL AND (
               inst.plan_input_hash IS DISTINCT FROM p_expect->>'plan_input_hash'
            OR inst.consecutive_idle_ticks IS DISTINCT FROM (p_expect->>'consecutive_idle_ticks')::integer
            OR inst.idle_ticks_since_replan IS DISTINCT FROM (p_expect->>'idle_ticks_since_replan')::integer
            OR inst.consecutive_blocked_turns IS DISTINCT FROM (p_expect->>'consecutive_blocked_turns')::integer
            OR inst.consecutive_exhausted_turns IS DISTINCT FROM
               coalesce((p_expect->>'consecutive_exhausted_turns')::integer, inst.consecutive_exhausted_turns)
            OR ev.event_kind IS DISTINCT FROM p_expect->>'event_kind') THEN
            RETURN jsonb_build_object('outcome', 'stale_prior');
        END IF;
        v_locked := true;
    END LOOP;

    -- The lease was this session's on the locked row: the event is still
    -- its claim, pending (see the header on why only the id is named).
    UPDATE agent_event_queue SET consumed_at = now()
     WHERE id = v_event AND claimed_session = p_session
    RETURNING * INTO ev;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'genesis_apply_complete: claimed event % of instance % vanished under its lease',
            v_event, p_instance;
    END IF;

    -- The episode's last attempts, in order, in the turn's own transaction;
    -- the turn links the snapshot the last one was written under.
    IF jsonb_typeof(p_attempts) = 'array' THEN
        FOR v_i IN 0 .. jsonb_array_length(p_attempts) - 1 LOOP
            v_snap := genesis_write_call_attempt(p_tenant, p_instance, p_attempts->v_i)->'snapshot';
        END LOOP;
        IF v_snap IS NOT NULL THEN
            p := p || jsonb_build_object('llm_call_snapshot_id', v_snap->'id',
                                         'served_model', v_snap->'served_model', 'cost_usd', v_snap->'cost_usd',
                                         'input_tokens', v_snap->'input_tokens',
                                         'output_tokens', v_snap->'output_tokens');
        END IF;
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

    IF jsonb_typeof(p->'actions') = 'array' AND jsonb_array_length(p->'actions') > 0 THEN
        INSERT INTO agent_state_ledger_actions (tenant_id, ledger_id, ordinal, tool_name, arguments, result,
                                                side_effecting, blocked)
        SELECT p_tenant, v_ledger, (a.ord - 1)::integer, a.v->>'tool_name', coalesce(a.v->'arguments', '{}'::jsonb),
               a.v->'result', coalesce((a.v->>'side_effecting')::boolean, false),
               coalesce((a.v->>'blocked')::boolean, false)
          FROM jsonb_array_elements(p->'actions') WITH ORDINALITY AS a(v, ord);
    END IF;

    IF v_halt THEN
        -- STUCK halt: no heartbeat survives, the queue drains, an operator is asked.
        UPDATE agent_event_queue SET consumed_at = now()
         WHERE instance_id = p_instance AND event_kind = 'AgentTick'
           AND consumed_at IS NULL AND dead_lettered_at IS NULL;
        INSERT INTO attention_requests (tenant_id, instance_id, kind, title, body, metadata)
        VALUES (p_tenant, p_instance, 'stuck_halt',
                format('Agent %s halted: stuck', v_agent_type),
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
        IF v_next IS DISTINCT FROM v_set_next THEN
            UPDATE agent_instances SET next_tick_at = v_next WHERE id = p_instance;
        END IF;
    END IF;

    PERFORM pg_notify('genesis_turns', json_build_object('tenant_id', p_tenant, 'instance_id', p_instance,
        'ledger_id', v_ledger, 'decision_kind', p->>'decision_kind')::text);

    RETURN jsonb_build_object('outcome', 'completed', 'ledger_id', v_ledger, 'turn_number', v_turn,
        'halted', v_halt, 'next_tick_at', v_next, 'heartbeat_event_id', hb.id,
        'attention_request_id', v_attention);
END
$function$;
