-- The episode's last call attempts are written by the completion itself.
--
-- A tick whose episode ended with an LLM call sent that call's attempts
-- with CompleteTick. The supervisor wrote them first, as a call of its own
-- (genesis_record_call_attempt: set the tenant, take the instance FOR
-- SHARE, check the session, write), and only then submitted the
-- completion, which set the tenant again and took the same row FOR UPDATE.
-- In the benchmark every tick did both: two function calls, two tenant
-- settings and two row locks where one of each does (BENCHMARKS.md 0o).
--
-- genesis_apply_complete now takes them as p_attempts (a JSON array of the
-- objects genesis_write_call_attempt reads; SQL or JSON null for none) and
-- writes them after its own session guard, event check and prior check, in
-- the same statement and transaction as the turn, which links the last
-- attempt's snapshot. So the
-- rule stays "recorded exactly when the session still holds the lease",
-- and attempts and turn are now written together or not at all.
-- A completion refused for anything but a lost lease (a bad completion,
-- an event not claimed) leaves the lease held; the store then records its
-- attempts alone through genesis_record_call_attempt, as before.
--
-- genesis_record_call_attempt keeps its guard and now writes through the
-- same genesis_write_call_attempt, so the snapshot upsert, the attempt's
-- ordinal and the credit draw-down have one definition. Its
-- nineteen-argument form stays for a supervisor of the previous release
-- during a rolling upgrade, as do the four- and five-argument forms of
-- genesis_apply_complete (now this one without attempts).

-- Write one priced attempt for the caller's tenant-scoped transaction,
-- which has already checked the session: the invocation's AgentPlanning
-- snapshot (created at its first attempt, usage and cost added after),
-- the attempt with the next ordinal, and the credit draw-down. Returns
-- {"snapshot": …, "ordinal": n, "credit": …}.
CREATE FUNCTION genesis_write_call_attempt(p_tenant uuid, p_instance uuid, a jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
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
         outcome, usage, latency_ms, cost_usd, error_message)
    SELECT p_tenant, snap.id, coalesce(max(ordinal) + 1, 0), a->>'provider', a->>'credential_name',
           a->>'requested_model', coalesce(a->>'served_model', ''), a->>'outcome', a->'usage',
           (a->>'latency_ms')::bigint, (a->>'cost_usd')::double precision, a->>'error_message'
      FROM llm_call_attempts WHERE snapshot_id = snap.id
    RETURNING ordinal INTO ord;
    win := genesis_credit_draw_down(p_tenant, (a->>'week_start')::timestamptz,
                                    (a->>'limit_usd')::double precision,
                                    (a->>'cost_usd')::double precision);
    RETURN jsonb_build_object('snapshot', to_jsonb(snap), 'ordinal', ord, 'credit', to_jsonb(win));
END
$$;

-- RecordCallAttempt: the session guard, then the write above. Returns
-- {"outcome": "not_found"}, {"outcome": "lease_lost"} (nothing written),
-- or {"outcome": "recorded", "snapshot": …, "ordinal": n, "credit": …}.
CREATE FUNCTION genesis_record_call_attempt(p_tenant uuid, p_instance uuid, p_session uuid, a jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    holder uuid;
    found_instance boolean;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT lease_session, true INTO holder, found_instance
      FROM agent_instances WHERE id = p_instance FOR SHARE;
    IF found_instance IS NULL THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF holder IS DISTINCT FROM p_session THEN
        RETURN jsonb_build_object('outcome', 'lease_lost');
    END IF;
    RETURN jsonb_build_object('outcome', 'recorded')
        || genesis_write_call_attempt(p_tenant, p_instance, a);
END
$$;

CREATE OR REPLACE FUNCTION genesis_record_call_attempt(
    p_tenant uuid, p_instance uuid, p_session uuid, p_invocation text, p_site text,
    p_requested text, p_served text, p_provider text, p_credential text, p_outcome text,
    p_input bigint, p_output bigint, p_usage jsonb, p_latency_ms bigint, p_cost double precision,
    p_error text, p_overlay_sha256 text, p_week_start timestamptz, p_limit_usd double precision)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RETURN genesis_record_call_attempt(p_tenant, p_instance, p_session, jsonb_build_object(
        'invocation_id', p_invocation, 'site_id', p_site, 'requested_model', p_requested,
        'served_model', p_served, 'provider', p_provider, 'credential_name', p_credential,
        'outcome', p_outcome, 'input_tokens', p_input, 'output_tokens', p_output,
        'usage', p_usage, 'latency_ms', p_latency_ms, 'cost_usd', p_cost,
        'error_message', p_error, 'prompt_overlay_sha256', p_overlay_sha256,
        'week_start', p_week_start, 'limit_usd', p_limit_usd));
END
$$;

CREATE FUNCTION genesis_apply_complete(p_tenant uuid, p_instance uuid, p_session uuid, p jsonb, p_expect jsonb,
                                       p_attempts jsonb)
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
    v_i integer;
    v_snap jsonb;
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

    -- The episode's last attempts, in order; the turn links the snapshot
    -- the last one was written under.
    -- (Indexed rather than a FOR over jsonb_array_elements: that loop is a
    -- query of its own, and costs as much as the guard this saves.)
    IF jsonb_typeof(p_attempts) = 'array' THEN
        FOR v_i IN 0 .. jsonb_array_length(p_attempts) - 1 LOOP
            v_snap := genesis_write_call_attempt(p_tenant, p_instance, p_attempts->v_i)->'snapshot';
        END LOOP;
        -- The turn links that snapshot in place of any p names.
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

CREATE OR REPLACE FUNCTION genesis_apply_complete(p_tenant uuid, p_instance uuid, p_session uuid, p jsonb, p_expect jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RETURN genesis_apply_complete(p_tenant, p_instance, p_session, p, p_expect, NULL::jsonb);
END
$$;
