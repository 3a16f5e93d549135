-- Appends one event to an instance's queue with the sequence number its
-- caller drew under the instance's row lock (genesis_insert_event,
-- genesis_enqueue_event), so concurrent enqueues get distinct, increasing
-- numbers.
CREATE OR REPLACE FUNCTION public.genesis_append_event(p_tenant uuid, p_instance uuid, p_sequence bigint, p_kind text, p_payload jsonb, p_visible_at timestamp with time zone, p_attention_request_id uuid)
 RETURNS agent_event_queue
 LANGUAGE plpgsql
AS $function$
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
$function$;
