-- The enqueue and the claim write each row once.
--
-- Both took a row lock first and then updated the row they had locked:
-- a lock written to the heap and the WAL, then the update that takes the
-- lock anyway (BENCHMARKS.md 0o).
--
-- The enqueue: genesis_enqueue_event locked the instance row
-- (SELECT ... FOR UPDATE) and genesis_insert_event then updated its
-- event_sequence. The lock first is needed only where the enqueue looks for
-- an event it must not duplicate (a heartbeat while one is pending, an
-- answered escalation already enqueued): the look and the insert must see
-- the same queue. Every other enqueue (an operator message, a mission
-- change, an external signal: one per tick in the benchmark) now takes the
-- lock with the sequence update itself. Sequence numbers, the answers and
-- the genesis_due notice are unchanged. The insert is split out so both
-- paths share it: genesis_append_event writes the event with a sequence
-- number its caller drew by the update.
--
-- The claim: genesis_claim_tick selected the next due event FOR UPDATE and
-- then stamped it. Once the lease is taken no other claim reads this
-- instance's events, so the next due event under its attempts is now
-- stamped by one UPDATE. An event at its attempts (to be dead-lettered),
-- or none due, falls to migration 0088's loop, unchanged. The due check
-- still reads the clock once the lease is held.

CREATE FUNCTION genesis_append_event(p_tenant uuid, p_instance uuid, p_sequence bigint, p_kind text,
                                     p_payload jsonb, p_visible_at timestamptz, p_attention_request_id uuid)
RETURNS agent_event_queue
LANGUAGE plpgsql AS $$
DECLARE
    ev agent_event_queue;
BEGIN
    INSERT INTO agent_event_queue (tenant_id, instance_id, sequence_number, event_kind, payload, visible_at,
                                   attention_request_id)
    VALUES (p_tenant, p_instance, p_sequence, p_kind, coalesce(p_payload, '{}'::jsonb),
            coalesce(p_visible_at, now()), p_attention_request_id)
    RETURNING * INTO ev;
    PERFORM pg_notify('genesis_due', json_build_object('tenant_id', p_tenant, 'instance_id', p_instance,
        'event_id', ev.id, 'visible_at', ev.visible_at)::text);
    RETURN ev;
END
$$;

CREATE OR REPLACE FUNCTION genesis_insert_event(p_tenant uuid, p_instance uuid, p_kind text, p_payload jsonb,
                                                p_visible_at timestamptz, p_attention_request_id uuid)
RETURNS agent_event_queue
LANGUAGE plpgsql AS $$
DECLARE
    seq bigint;
BEGIN
    UPDATE agent_instances SET event_sequence = event_sequence + 1
     WHERE id = p_instance AND tenant_id = p_tenant
    RETURNING event_sequence INTO seq;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'agent instance % not found', p_instance USING ERRCODE = 'no_data_found';
    END IF;
    RETURN genesis_append_event(p_tenant, p_instance, seq, p_kind, p_payload, p_visible_at,
                                p_attention_request_id);
END
$$;

CREATE OR REPLACE FUNCTION genesis_enqueue_event(p_tenant uuid, p_instance uuid, p_kind text, p_payload jsonb,
                                                 p_visible_at timestamptz, p_attention_request_id uuid)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    ev agent_event_queue;
    seq bigint;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    IF p_attention_request_id IS NULL AND p_kind IS DISTINCT FROM 'AgentTick' THEN
        -- Nothing to look for first: the sequence update is the lock.
        UPDATE agent_instances SET event_sequence = event_sequence + 1
         WHERE id = p_instance AND tenant_id = p_tenant
        RETURNING event_sequence INTO seq;
        IF NOT FOUND THEN
            RETURN jsonb_build_object('outcome', 'not_found', 'what', 'agent instance');
        END IF;
        ev := genesis_append_event(p_tenant, p_instance, seq, p_kind, p_payload, p_visible_at, NULL);
        RETURN jsonb_build_object('outcome', 'created', 'event', to_jsonb(ev));
    END IF;
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

CREATE OR REPLACE FUNCTION genesis_claim_tick(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval,
                                   p_max_attempts integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    inst agent_instances;
    ev agent_event_queue;
    hb agent_event_queue;
    dead integer := 0;
    v_due timestamptz;
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

    -- Due by the clock when the lease is taken, not by now() (0088).
    v_due := clock_timestamp();
    -- The next due event, stamped in one statement. The held lease keeps
    -- every other consumer of this instance's events out (another claim,
    -- a completion, a reset, a dead-lettering), so the event the subquery
    -- found is still unconsumed when it is stamped. The outer condition
    -- names only the id and the attempts: restating "unconsumed" there
    -- lets the planner answer it from the partial due index, which it then
    -- scans whole (every pending heartbeat of the fleet) for one id.
    UPDATE agent_event_queue e SET claimed_session = p_session, attempts = e.attempts + 1
     WHERE e.id = (SELECT q.id FROM agent_event_queue q
                    WHERE q.instance_id = p_instance AND q.consumed_at IS NULL AND q.dead_lettered_at IS NULL
                      AND q.visible_at <= v_due
                    ORDER BY q.sequence_number
                    LIMIT 1)
       AND e.attempts < p_max_attempts
    RETURNING * INTO ev;
    IF FOUND THEN
        RETURN jsonb_build_object('outcome', 'claimed', 'instance', to_jsonb(inst), 'event', to_jsonb(ev),
                                  'dead_lettered', 0);
    END IF;
    -- An event at its attempts (dead-lettered here, then the next one is
    -- tried), or none due.
    LOOP
        SELECT * INTO ev FROM agent_event_queue
         WHERE instance_id = p_instance AND consumed_at IS NULL AND dead_lettered_at IS NULL
           AND visible_at <= v_due
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
