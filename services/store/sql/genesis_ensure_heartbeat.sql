-- Seed the heartbeat unless one is pending; returns the pending heartbeat
-- (new or existing). The caller must hold the instance row lock.
CREATE OR REPLACE FUNCTION public.genesis_ensure_heartbeat(p_tenant uuid, p_instance uuid, p_at timestamp with time zone)
 RETURNS agent_event_queue
 LANGUAGE plpgsql
AS $function$
DECLARE
    ev agent_event_queue;
BEGIN
    SELECT * INTO ev FROM agent_event_queue
     WHERE instance_id = p_instance AND event_kind = 'AgentTick'
       AND consumed_at IS NULL AND dead_lettered_at IS NULL;
    IF FOUND THEN
        RETURN ev;
    END IF;
    RETURN genesis_insert_event(p_tenant, p_instance, 'AgentTick', '{}'::jsonb, p_at, NULL);
END
$function$;
