-- Enqueue (control). Locks the instance row, so concurrent enqueues to one
-- instance get distinct increasing sequence numbers. A heartbeat while one is
-- pending and an answered escalation already enqueued for the same attention
-- request return the existing event ('existing') instead of a second one.
CREATE OR REPLACE FUNCTION public.genesis_enqueue_event(p_tenant uuid, p_instance uuid, p_kind text, p_payload jsonb, p_visible_at timestamp with time zone, p_attention_request_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
$function$;
