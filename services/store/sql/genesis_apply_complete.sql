-- CompleteTick's single passivation write, under the instance's row lock:
-- the session guard (the lease is still this session's, the event still
-- its claim), the instance's phase, counters and next tick, the consumed
-- event, the episode's last attempts, the ledger turn and its actions, on a
-- STUCK halt the closed instance, drained heartbeats and the attention
-- request, otherwise exactly one pending heartbeat, the released lease and
-- the turn's NOTIFY.
--
-- Everything it writes was decided before the call by genesis-core's
-- AgentTickSupervisor (the decision, phase, counters, halt, heartbeat delay
-- and the halt notice's words) and arrives as typed parameters; what stays
-- here is only what must run under the lock: the guard, the turn number,
-- the heartbeat's time on the database's clock, and the ledger id the
-- notice's metadata links.
--
-- p_expecting: the caller computed the turn from counters it read without
-- the lock (p_expect_*). The write happens only if the locked instance and
-- event still hold them; otherwise nothing is written and the answer is
-- stale_prior, so the caller recomputes under the lock. A refusal reads why
-- under the lock and names the first check that failed (not_found,
-- lease_lost, event_not_claimed) without writing anything. The consumed
-- event is named by id alone: the guard already proved, on the locked row,
-- that it is this session's pending claim.
CREATE OR REPLACE FUNCTION public.genesis_apply_complete(p_tenant uuid, p_instance uuid, p_session uuid, p_event uuid, p_decision_kind text, p_phase text, p_plan_input_hash text, p_consecutive_idle_ticks integer, p_idle_ticks_since_replan integer, p_consecutive_blocked_turns integer, p_consecutive_exhausted_turns integer, p_halt boolean, p_next_tick_delay_ms bigint, p_attention_title text, p_attention_body text, p_decision_payload jsonb, p_wait_condition text, p_reasoning_summary text, p_llm_call_snapshot_id uuid, p_served_model text, p_cost_usd numeric, p_input_tokens bigint, p_output_tokens bigint, p_actions jsonb, p_expecting boolean, p_expect_event_kind text, p_expect_plan_input_hash text, p_expect_idle_ticks integer, p_expect_idle_since_replan integer, p_expect_blocked_turns integer, p_expect_exhausted_turns integer, p_attempts jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    inst agent_instances;
    ev agent_event_queue;
    hb agent_event_queue;
    v_turn bigint;
    v_ledger uuid;
    v_next timestamptz := now() + p_next_tick_delay_ms * interval '1 millisecond';
    v_set_next timestamptz;
    v_attention uuid;
    v_i integer;
    v_snap jsonb;
    v_locked boolean := false;
BEGIN
    IF p_event IS NULL OR p_decision_kind IS NULL OR p_phase IS NULL OR p_halt IS NULL
       OR p_next_tick_delay_ms IS NULL OR p_expecting IS NULL THEN
        RAISE EXCEPTION 'genesis_apply_complete: event, decision kind, phase, halt, delay and expecting are required';
    END IF;
    IF p_halt AND (p_attention_title IS NULL OR p_attention_body IS NULL) THEN
        RAISE EXCEPTION 'genesis_apply_complete: a halt of instance % needs its attention request''s title and body',
            p_instance;
    END IF;
    PERFORM genesis_set_tenant(p_tenant);
    LOOP
        UPDATE agent_instances i SET
            status = CASE WHEN p_halt THEN 'closed' ELSE i.status END,
            phase = p_phase,
            next_tick_at = CASE WHEN p_halt THEN NULL ELSE coalesce(
                (SELECT h.visible_at FROM agent_event_queue h
                  WHERE h.instance_id = p_instance AND h.event_kind = 'AgentTick'
                    AND h.consumed_at IS NULL AND h.dead_lettered_at IS NULL AND h.id <> p_event),
                v_next) END,
            consecutive_idle_ticks = p_consecutive_idle_ticks,
            idle_ticks_since_replan = p_idle_ticks_since_replan,
            consecutive_blocked_turns = p_consecutive_blocked_turns,
            consecutive_provider_failures = 0,
            consecutive_exhausted_turns = p_consecutive_exhausted_turns,
            last_decision_kind = p_decision_kind,
            plan_input_hash = coalesce(p_plan_input_hash, i.plan_input_hash),
            lease_session = NULL,
            lease_expires_at = NULL,
            updated_at = now()
         WHERE i.id = p_instance AND i.tenant_id = p_tenant AND i.lease_session = p_session
           AND (NOT p_expecting OR (
                    i.plan_input_hash IS NOT DISTINCT FROM p_expect_plan_input_hash
                AND i.consecutive_idle_ticks IS NOT DISTINCT FROM p_expect_idle_ticks
                AND i.idle_ticks_since_replan IS NOT DISTINCT FROM p_expect_idle_since_replan
                AND i.consecutive_blocked_turns IS NOT DISTINCT FROM p_expect_blocked_turns
                AND i.consecutive_exhausted_turns IS NOT DISTINCT FROM p_expect_exhausted_turns))
           AND EXISTS (SELECT 1 FROM agent_event_queue e
                        WHERE e.id = p_event AND e.instance_id = p_instance AND e.claimed_session = p_session
                          AND e.consumed_at IS NULL AND e.dead_lettered_at IS NULL
                          AND (NOT p_expecting OR e.event_kind IS NOT DISTINCT FROM p_expect_event_kind))
        RETURNING i.next_tick_at INTO v_set_next;
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
         WHERE id = p_event AND instance_id = p_instance AND claimed_session = p_session
           AND consumed_at IS NULL AND dead_lettered_at IS NULL;
        IF NOT FOUND THEN
            RETURN jsonb_build_object('outcome', 'event_not_claimed');
        END IF;
        IF p_expecting AND (
               inst.plan_input_hash IS DISTINCT FROM p_expect_plan_input_hash
            OR inst.consecutive_idle_ticks IS DISTINCT FROM p_expect_idle_ticks
            OR inst.idle_ticks_since_replan IS DISTINCT FROM p_expect_idle_since_replan
            OR inst.consecutive_blocked_turns IS DISTINCT FROM p_expect_blocked_turns
            OR inst.consecutive_exhausted_turns IS DISTINCT FROM p_expect_exhausted_turns
            OR ev.event_kind IS DISTINCT FROM p_expect_event_kind) THEN
            RETURN jsonb_build_object('outcome', 'stale_prior');
        END IF;
        v_locked := true;
    END LOOP;

    -- The lease was this session's on the locked row: the event is still
    -- its claim, pending.
    UPDATE agent_event_queue SET consumed_at = now()
     WHERE id = p_event AND claimed_session = p_session
    RETURNING * INTO ev;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'genesis_apply_complete: claimed event % of instance % vanished under its lease',
            p_event, p_instance;
    END IF;

    -- The episode's last attempts, in order, in the turn's own transaction;
    -- the turn links the snapshot the last one was written under.
    IF jsonb_typeof(p_attempts) = 'array' THEN
        FOR v_i IN 0 .. jsonb_array_length(p_attempts) - 1 LOOP
            v_snap := genesis_write_call_attempt(p_tenant, p_instance, p_attempts->v_i)->'snapshot';
        END LOOP;
        IF v_snap IS NOT NULL THEN
            p_llm_call_snapshot_id := (v_snap->>'id')::uuid;
            p_served_model := v_snap->>'served_model';
            p_cost_usd := (v_snap->>'cost_usd')::numeric;
            p_input_tokens := (v_snap->>'input_tokens')::bigint;
            p_output_tokens := (v_snap->>'output_tokens')::bigint;
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
        p_decision_kind, p_phase, coalesce(p_decision_payload, '{}'::jsonb),
        p_wait_condition, p_reasoning_summary, p_plan_input_hash,
        p_llm_call_snapshot_id, p_served_model, p_cost_usd, p_input_tokens, p_output_tokens)
    RETURNING id INTO v_ledger;

    IF jsonb_typeof(p_actions) = 'array' AND jsonb_array_length(p_actions) > 0 THEN
        INSERT INTO agent_state_ledger_actions (tenant_id, ledger_id, ordinal, tool_name, arguments, result,
                                                side_effecting, blocked)
        SELECT p_tenant, v_ledger, (a.ord - 1)::integer, a.v->>'tool_name', coalesce(a.v->'arguments', '{}'::jsonb),
               a.v->'result', coalesce((a.v->>'side_effecting')::boolean, false),
               coalesce((a.v->>'blocked')::boolean, false)
          FROM jsonb_array_elements(p_actions) WITH ORDINALITY AS a(v, ord);
    END IF;

    IF p_halt THEN
        -- STUCK halt: no heartbeat survives, the queue drains, an operator is
        -- asked with the words genesis-core composed; only the turn's id,
        -- known here, is added to the request's metadata.
        UPDATE agent_event_queue SET consumed_at = now()
         WHERE instance_id = p_instance AND event_kind = 'AgentTick'
           AND consumed_at IS NULL AND dead_lettered_at IS NULL;
        INSERT INTO attention_requests (tenant_id, instance_id, kind, title, body, metadata)
        VALUES (p_tenant, p_instance, 'stuck_halt', p_attention_title, p_attention_body,
                jsonb_build_object('source', 'supervisor', 'instanceId', p_instance,
                                   'consecutiveBlockedTurns', p_consecutive_blocked_turns,
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
        'ledger_id', v_ledger, 'decision_kind', p_decision_kind)::text);

    RETURN jsonb_build_object('outcome', 'completed', 'ledger_id', v_ledger, 'turn_number', v_turn,
        'halted', p_halt, 'next_tick_at', v_next, 'heartbeat_event_id', hb.id,
        'attention_request_id', v_attention);
END
$function$;
