-- Defer the claimed event of a tick whose every provider failed. Returns
-- {"outcome": "not_found" | "lease_lost" | "event_not_claimed"} with nothing
-- written, or {"outcome": "deferred", "consecutive_provider_failures": n,
-- "visible_at": t, "attention_request_id": id-or-null}.
CREATE OR REPLACE FUNCTION public.genesis_defer_tick(p_tenant uuid, p_instance uuid, p_session uuid, p_event uuid, p_attempts jsonb, p_base_ms bigint, p_max_ms bigint, p_attention_after integer, p_reason text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    inst agent_instances;
    ev agent_event_queue;
    v_failures integer;
    v_delay_ms bigint;
    v_attention uuid;
    v_i integer;
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
     WHERE id = p_event AND instance_id = p_instance AND claimed_session = p_session
       AND consumed_at IS NULL AND dead_lettered_at IS NULL
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('outcome', 'event_not_claimed');
    END IF;

    IF jsonb_typeof(p_attempts) = 'array' THEN
        FOR v_i IN 0 .. jsonb_array_length(p_attempts) - 1 LOOP
            PERFORM genesis_write_call_attempt(p_tenant, p_instance, p_attempts->v_i);
        END LOOP;
    END IF;

    v_failures := inst.consecutive_provider_failures + 1;
    -- base * 2^(n-1), capped; the exponent is capped first so it cannot overflow.
    v_delay_ms := least(p_max_ms, p_base_ms * (2::bigint ^ least(v_failures - 1, 40))::bigint);

    UPDATE agent_event_queue
       SET claimed_session = NULL,
           attempts = greatest(attempts - 1, 0),
           visible_at = now() + v_delay_ms * interval '1 millisecond',
           published_at = NULL,
           publish_epoch = publish_epoch + 1
     WHERE id = ev.id
    RETURNING * INTO ev;

    IF v_failures = p_attention_after THEN
        INSERT INTO attention_requests (tenant_id, instance_id, kind, title, body, metadata)
        VALUES (p_tenant, p_instance, 'provider_failure',
                format('Agent %s cannot reach its LLM providers', inst.agent_type),
                format('Every provider of agent instance %s''s preset chain failed on %s consecutive ticks. '
                       'Its events are kept and retried with a growing delay; the agent stays active. '
                       'Last error: %s', p_instance, v_failures, left(coalesce(p_reason, ''), 1000)),
                jsonb_build_object('source', 'supervisor', 'instanceId', p_instance, 'eventId', ev.id,
                                   'consecutiveProviderFailures', v_failures))
        RETURNING id INTO v_attention;
    END IF;

    UPDATE agent_instances
       SET consecutive_provider_failures = v_failures,
           lease_session = NULL,
           lease_expires_at = NULL,
           updated_at = now()
     WHERE id = p_instance;

    PERFORM pg_notify('genesis_due', json_build_object('tenant_id', p_tenant, 'instance_id', p_instance,
        'event_id', ev.id, 'visible_at', ev.visible_at)::text);

    RETURN jsonb_build_object('outcome', 'deferred', 'consecutive_provider_failures', v_failures,
        'visible_at', ev.visible_at, 'attention_request_id', v_attention);
END
$function$;
