-- Insert one event with the instance's next sequence number and notify the
-- outbox. The caller must hold the instance row lock. Returns the event id.
CREATE OR REPLACE FUNCTION public.genesis_insert_event(p_tenant uuid, p_instance uuid, p_kind text, p_payload jsonb, p_visible_at timestamp with time zone, p_attention_request_id uuid)
 RETURNS agent_event_queue
 LANGUAGE plpgsql
AS $function$
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
$function$;
