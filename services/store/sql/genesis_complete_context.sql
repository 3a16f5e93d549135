-- What CompleteTick reads before the mapper runs, as one autocommit call:
-- the event's kind (NULL when it is not this instance's), the instance's
-- active mode and type, the back-linked call snapshot (NULL when absent or
-- another instance's) and the DB-first configuration.
CREATE OR REPLACE FUNCTION public.genesis_complete_context(p_tenant uuid, p_event uuid, p_instance uuid, p_snapshot uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    RETURN (
        SELECT jsonb_build_object(
            'event_kind', (SELECT e.event_kind FROM agent_event_queue e
                            WHERE e.id = p_event AND e.instance_id = p_instance),
            'active_mode', i.active_mode,
            'snapshot', (SELECT to_jsonb(s) FROM llm_call_snapshots s
                          WHERE s.id = p_snapshot AND s.instance_id = p_instance),
            'configs', genesis_effective_configs(p_tenant),
            'agent_type', i.agent_type,
            'prior', CASE WHEN i.id IS NOT NULL THEN jsonb_build_object(
                'plan_input_hash', i.plan_input_hash,
                'consecutive_idle_ticks', i.consecutive_idle_ticks,
                'idle_ticks_since_replan', i.idle_ticks_since_replan,
                'consecutive_blocked_turns', i.consecutive_blocked_turns,
                'consecutive_exhausted_turns', i.consecutive_exhausted_turns) END)
          FROM (SELECT 1) one LEFT JOIN agent_instances i ON i.id = p_instance);
END
$function$;
