-- RecordCallAttempt's read and write, and CompleteTick's read, as one
-- server-side call each (DESIGN §4: one round trip per transaction). The
-- record's write was a tenant transaction of seven round trips:
-- BEGIN, set_config, the session guard, the snapshot upsert, the attempt
-- insert, the credit draw-down, COMMIT. The statements are the same, in
-- the same order and the same transaction; the function sets the tenant
-- itself and runs as the caller (SECURITY INVOKER), so row-level security
-- applies unchanged. Validation and the cost stay in Rust
-- (genesis_store::llm::Llm::record_call_attempt); this only applies them.
--
-- Returns {"outcome": "not_found"}, {"outcome": "lease_lost"} (nothing
-- written), or {"outcome": "recorded", "snapshot": …, "ordinal": n,
-- "credit": …}.
-- Draw an amount from the tenant's weekly credit window (created at the
-- first draw), on the caller's tenant-scoped transaction. The one
-- statement of the draw-down, for the record below and for
-- genesis_store::credit::draw_down_in.
CREATE FUNCTION genesis_credit_draw_down(p_tenant uuid, p_week_start timestamptz,
                                         p_limit_usd double precision, p_amount double precision)
RETURNS credit_windows
LANGUAGE sql AS $$
    INSERT INTO credit_windows (tenant_id, week_start, limit_usd, spent_usd)
    VALUES (p_tenant, p_week_start, p_limit_usd, p_amount)
    ON CONFLICT (tenant_id, week_start) DO UPDATE
       SET spent_usd = credit_windows.spent_usd + EXCLUDED.spent_usd,
           limit_usd = EXCLUDED.limit_usd, updated_at = now()
    RETURNING *;
$$;

CREATE FUNCTION genesis_record_call_attempt(
    p_tenant uuid, p_instance uuid, p_session uuid, p_invocation text, p_site text,
    p_requested text, p_served text, p_provider text, p_credential text, p_outcome text,
    p_input bigint, p_output bigint, p_usage jsonb, p_latency_ms bigint, p_cost double precision,
    p_error text, p_overlay_sha256 text, p_week_start timestamptz, p_limit_usd double precision)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    holder uuid;
    found_instance boolean;
    snap llm_call_snapshots;
    ord integer;
    win credit_windows;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT lease_session, true INTO holder, found_instance
      FROM agent_instances WHERE id = p_instance FOR SHARE;
    IF found_instance IS NULL THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF holder IS DISTINCT FROM p_session THEN
        RETURN jsonb_build_object('outcome', 'lease_lost');
    END IF;
    INSERT INTO llm_call_snapshots
        (tenant_id, instance_id, invocation_id, site_id, requested_model, served_model,
         input_tokens, output_tokens, cost_usd, prompt_overlay_sha256)
    VALUES (p_tenant, p_instance, p_invocation, p_site, p_requested, p_served,
            p_input, p_output, p_cost, p_overlay_sha256)
    ON CONFLICT (tenant_id, instance_id, invocation_id) DO UPDATE SET
        served_model = coalesce(EXCLUDED.served_model, llm_call_snapshots.served_model),
        prompt_overlay_sha256 = coalesce(llm_call_snapshots.prompt_overlay_sha256,
                                         EXCLUDED.prompt_overlay_sha256),
        input_tokens = llm_call_snapshots.input_tokens + EXCLUDED.input_tokens,
        output_tokens = llm_call_snapshots.output_tokens + EXCLUDED.output_tokens,
        cost_usd = llm_call_snapshots.cost_usd + EXCLUDED.cost_usd,
        updated_at = now()
    RETURNING * INTO snap;
    INSERT INTO llm_call_attempts
        (tenant_id, snapshot_id, ordinal, provider, credential_name, requested_model, served_model,
         outcome, usage, latency_ms, cost_usd, error_message)
    SELECT p_tenant, snap.id, coalesce(max(ordinal) + 1, 0), p_provider, p_credential, p_requested,
           coalesce(p_served, ''), p_outcome, p_usage, p_latency_ms, p_cost, p_error
      FROM llm_call_attempts WHERE snapshot_id = snap.id
    RETURNING ordinal INTO ord;
    win := genesis_credit_draw_down(p_tenant, p_week_start, p_limit_usd, p_cost);
    RETURN jsonb_build_object('outcome', 'recorded', 'snapshot', to_jsonb(snap),
                              'ordinal', ord, 'credit', to_jsonb(win));
END
$$;

-- What RecordCallAttempt reads before pricing an attempt, as one
-- autocommit call: the instance's type, the DB-first configuration (tenant
-- row over global) and the price of the served model, else of the requested
-- one (providers report dated or suffixed ids for the model they served).
-- NULL when the instance is not the tenant's.
CREATE FUNCTION genesis_record_context(p_tenant uuid, p_instance uuid, p_served text, p_requested text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    RETURN (
        SELECT jsonb_build_object(
            'agent_type', i.agent_type,
            'configs', genesis_effective_configs(p_tenant),
            'price', coalesce(
                (SELECT to_jsonb(p) FROM llm_pricing p WHERE p.model = p_served),
                (SELECT to_jsonb(p) FROM llm_pricing p WHERE p.model = nullif(p_requested, ''))))
          FROM agent_instances i WHERE i.id = p_instance);
END
$$;

-- What CompleteTick reads before the mapper runs, as one autocommit call:
-- the event's kind (NULL when it is not this instance's), the instance's
-- active mode and type, the back-linked call snapshot (NULL when absent or
-- another instance's) and the DB-first configuration.
CREATE FUNCTION genesis_complete_context(p_tenant uuid, p_event uuid, p_instance uuid, p_snapshot uuid)
RETURNS jsonb
LANGUAGE plpgsql AS $$
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
            'agent_type', i.agent_type)
          FROM (SELECT 1) one LEFT JOIN agent_instances i ON i.id = p_instance);
END
$$;
