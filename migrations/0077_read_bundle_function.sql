-- The claim's bundle read as one server-side call (DESIGN §4: every tick
-- transaction one round trip). It was one statement inside a tenant
-- transaction: BEGIN, set_config, the statement, COMMIT — four round trips
-- on every claim. The function sets the transaction-local tenant itself, so
-- a single autocommit call is a complete, tenant-scoped read; it runs as
-- the caller (SECURITY INVOKER), so row-level security applies exactly as
-- to the plain statement. A Compliance claim calls it inside its tenant
-- transaction, beside the corpus discovery.
-- The DB-first configuration a tenant's tick reads (spec §3.6): every
-- system_configs key, the tenant's row over the global one, as a JSON
-- object of text values. The one statement of that rule, for the bundle,
-- the record and complete contexts and genesis_store::config. With a NULL
-- tenant, the global rows only. Row-level security applies (the caller's
-- role and tenant).
CREATE FUNCTION genesis_effective_configs(p_tenant uuid)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_object_agg(c.key, c.value), '{}'::jsonb) FROM (
        SELECT DISTINCT ON (key) key, value FROM system_configs
         WHERE tenant_id IS NULL OR tenant_id = p_tenant ORDER BY key, tenant_id NULLS LAST) c;
$$;

CREATE FUNCTION genesis_read_bundle(p_tenant uuid, p_instance uuid, p_tail bigint, p_agent_type text,
                                    p_sites text[], p_week_start timestamptz)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    RETURN (
SELECT jsonb_build_object(
  'configs', genesis_effective_configs(p_tenant),
  'ledger', (SELECT coalesce(jsonb_agg(t.j ORDER BY t.turn_number), '[]'::jsonb) FROM (
      SELECT l.turn_number, to_jsonb(l) || jsonb_build_object('actions',
          (SELECT coalesce(jsonb_agg(to_jsonb(a) ORDER BY a.ordinal), '[]'::jsonb)
             FROM agent_state_ledger_actions a WHERE a.ledger_id = l.id)) AS j
        FROM agent_state_ledger l WHERE l.instance_id = p_instance
       ORDER BY l.turn_number DESC LIMIT p_tail) t),
  'missions', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'title', m.title,
        'status', m.status, 'created_at', m.created_at) ORDER BY m.created_at, m.id), '[]'::jsonb)
      FROM missions m WHERE m.metadata->>'soaInstanceId' = (p_instance::uuid)::text
       AND m.status NOT IN ('completed', 'cancelled')),
  'escalations', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', r.id, 'kind', r.kind,
        'title', r.title, 'created_at', r.created_at) ORDER BY r.created_at, r.id), '[]'::jsonb)
      FROM attention_requests r WHERE r.metadata->>'soaInstanceId' = (p_instance::uuid)::text AND r.status = 'open'),
  'modes', (SELECT coalesce(jsonb_agg(to_jsonb(md) ORDER BY md.name), '[]'::jsonb)
      FROM agent_modes md WHERE md.agent_type = p_agent_type),
  'bindings', (SELECT coalesce(jsonb_agg(jsonb_build_object('site_id', b.site_id, 'preset', to_jsonb(p))), '[]'::jsonb)
      FROM llm_site_bindings b JOIN llm_presets p ON p.id = b.preset_id WHERE b.site_id = ANY(p_sites)),
  'mode_presets', (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.name), '[]'::jsonb)
      FROM llm_presets p WHERE EXISTS (SELECT 1 FROM agent_modes md WHERE md.agent_type = p_agent_type
        AND (md.preset_id = p.id::text OR md.preset_id = p.name))),
  'credit_spent', (SELECT w.spent_usd FROM credit_windows w WHERE w.tenant_id = p_tenant AND w.week_start = p_week_start)
)
    );
END
$$;

REVOKE EXECUTE ON FUNCTION genesis_read_bundle(uuid, uuid, bigint, text, text[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION genesis_read_bundle(uuid, uuid, bigint, text, text[], timestamptz)
    TO genesis_app, genesis_system;
