-- Reset (spec §3.9): the one documented clear of the append-only ledger.
-- SECURITY DEFINER because neither service role may DELETE ledger rows; it
-- refuses any tenant other than the transaction's own, and refuses while a
-- live lease is held (a tick is mid-flight).
CREATE OR REPLACE FUNCTION public.genesis_reset_instance(p_tenant uuid, p_instance uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
DECLARE
    inst agent_instances;
    ev agent_event_queue;
    v_turns bigint;
    v_drained bigint;
BEGIN
    IF p_tenant IS DISTINCT FROM nullif(current_setting('genesis.tenant_id', true), '')::uuid THEN
        RAISE EXCEPTION 'reset outside the tenant scope' USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT * INTO inst FROM agent_instances WHERE id = p_instance AND tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF inst.lease_session IS NOT NULL AND inst.lease_expires_at >= now() THEN
        RETURN jsonb_build_object('outcome', 'lease_held');
    END IF;
    DELETE FROM agent_state_ledger_actions
     WHERE tenant_id = p_tenant
       AND ledger_id IN (SELECT id FROM agent_state_ledger WHERE instance_id = p_instance AND tenant_id = p_tenant);
    DELETE FROM agent_state_ledger WHERE instance_id = p_instance AND tenant_id = p_tenant;
    GET DIAGNOSTICS v_turns = ROW_COUNT;
    UPDATE agent_event_queue SET consumed_at = now()
     WHERE instance_id = p_instance AND tenant_id = p_tenant AND consumed_at IS NULL AND dead_lettered_at IS NULL;
    GET DIAGNOSTICS v_drained = ROW_COUNT;
    UPDATE agent_instances SET
        phase = 'idle', next_tick_at = NULL, consecutive_idle_ticks = 0, consecutive_blocked_turns = 0,
        consecutive_provider_failures = 0, consecutive_exhausted_turns = 0,
        idle_ticks_since_replan = 0, plan_input_hash = NULL, last_decision_kind = NULL,
        lease_session = NULL, lease_expires_at = NULL, updated_at = now()
     WHERE id = p_instance;
    ev := genesis_insert_event(p_tenant, p_instance, 'AgentInitialized', '{}'::jsonb, now(), NULL);
    RETURN jsonb_build_object('outcome', 'reset', 'cleared_turns', v_turns, 'drained_events', v_drained,
                              'event_id', ev.id);
END
$function$;
