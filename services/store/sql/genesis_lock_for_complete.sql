-- First statement of CompleteTick: lock the instance row and check the session
-- guard; return the locked pre-tick snapshot and the claimed event so the
-- caller can compute the rules before genesis_apply_complete.
CREATE OR REPLACE FUNCTION public.genesis_lock_for_complete(p_tenant uuid, p_instance uuid, p_session uuid, p_event uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
$function$;
