-- ClaimTick (spec §3.3): CAS lease, dequeue with dead-lettering, heartbeat seed.
CREATE OR REPLACE FUNCTION public.genesis_claim_tick(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval, p_max_attempts integer)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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

    -- Due by the clock when the lease is taken, not by now(): now() is the
    -- start of the transaction, and claims share batched statements. An
    -- event enqueued while this claim waited (for the row lock, or behind
    -- other calls) is in its snapshot with a visible_at later than now();
    -- judged by now() it was answered nothing_due, its wake-up was spent,
    -- and it waited for the next heartbeat (a day by default).
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
$function$;
