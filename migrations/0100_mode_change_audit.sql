-- A tenant's edits of its mode catalogue, and their audit.
--
-- 1. Tenant overrides. agent_modes held one platform-wide row per (agent
-- type, mode name), readable by every tenant and written by nobody but the
-- migrations. An operator may now change a mode's prompt fragment, toolset,
-- preset and budget override (AgentService EditMode, genesisctl agent mode
-- edit), but only for its own tenant: the first edit copies the platform
-- row into a row of the tenant (tenant_id set, system_seed false) and
-- changes that copy; later edits change the copy. The platform row never
-- changes, so no other tenant's catalogue does. This is system_configs'
-- model: platform rows have tenant_id NULL, a tenant's layer shadows them,
-- the row-level security policy lets a tenant read the platform rows and its
-- own and write only its own. Mode names stay the platform's: an override
-- shadows a platform row of the same type and name, and the store creates
-- one only by copying that row.
--
-- A tenant-scoped read sees the platform row and its override side by side,
-- so every reader takes the catalogue through genesis_effective_modes: per
-- name, the tenant's row over the platform's (with a NULL tenant, the
-- platform rows only). The bundle read below, the supervisor's InvokeTool
-- toolset check and genesis_store::modes read it so. The tenant role may
-- INSERT rows and UPDATE only the four editable columns: a row cannot be
-- moved to another tenant or renamed, and the policy's WITH CHECK refuses
-- any write of a platform row (tenant_id NULL) by it. The system role (it
-- bypasses row-level security) is given no write at all.
--
-- An edit raises catalogue_epoch through agent_modes' BEFORE STATEMENT
-- trigger (migration 0086), as every catalogue write does, so a supervisor
-- holding the old catalogue is sent the new one on its next claim.
--
-- 2. The audit. agent_mode_change_events, the mode-change audit trail
-- (spec §3.1), records a catalogue edit as a row of source 'catalogue':
-- no instance (nothing was switched), to_mode the edited mode, agent_type
-- its type, actor the token that edited it, and changes the old and new
-- value of each field the edit changed ({field: {old, new}}). An instance
-- switch (source ui or approval) keeps its instance and has neither.

ALTER TABLE agent_modes ADD COLUMN tenant_id uuid REFERENCES tenants (id);
ALTER TABLE agent_modes DROP CONSTRAINT agent_modes_pkey;
CREATE UNIQUE INDEX agent_modes_platform_key ON agent_modes (agent_type, name) WHERE tenant_id IS NULL;
CREATE UNIQUE INDEX agent_modes_tenant_key ON agent_modes (tenant_id, agent_type, name)
    WHERE tenant_id IS NOT NULL;
DROP INDEX agent_modes_one_default;
CREATE UNIQUE INDEX agent_modes_one_default ON agent_modes (agent_type) WHERE is_default AND tenant_id IS NULL;
CREATE UNIQUE INDEX agent_modes_one_tenant_default ON agent_modes (tenant_id, agent_type)
    WHERE is_default AND tenant_id IS NOT NULL;

ALTER TABLE agent_modes ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_modes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_modes
    USING (tenant_id IS NULL OR tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid);
GRANT INSERT ON agent_modes TO genesis_app;
GRANT UPDATE (prompt_fragment, toolset, preset_id, budget_override) ON agent_modes TO genesis_app;

-- The catalogue of one type as p_tenant sees it: per name, the tenant's
-- row over the platform's; with a NULL tenant, the platform rows. Runs as
-- the caller, so row-level security applies too.
CREATE FUNCTION genesis_effective_modes(p_tenant uuid, p_agent_type text)
RETURNS SETOF agent_modes
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT ON (m.name) m.* FROM agent_modes m
     WHERE m.agent_type = p_agent_type AND (m.tenant_id IS NULL OR m.tenant_id = p_tenant)
     ORDER BY m.name, m.tenant_id NULLS LAST;
$$;
REVOKE EXECUTE ON FUNCTION genesis_effective_modes(uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION genesis_effective_modes(uuid, text) TO genesis_app, genesis_system;

ALTER TABLE agent_mode_change_events ALTER COLUMN instance_id DROP NOT NULL;
ALTER TABLE agent_mode_change_events ADD COLUMN agent_type text;
ALTER TABLE agent_mode_change_events ADD COLUMN changes jsonb;
ALTER TABLE agent_mode_change_events DROP CONSTRAINT agent_mode_change_events_source_check;
ALTER TABLE agent_mode_change_events ADD CONSTRAINT agent_mode_change_events_source_check
    CHECK (source IN ('ui', 'approval', 'catalogue'));
ALTER TABLE agent_mode_change_events ADD CONSTRAINT agent_mode_change_events_catalogue_shape
    CHECK (CASE WHEN source = 'catalogue'
                THEN instance_id IS NULL AND agent_type IS NOT NULL AND jsonb_typeof(changes) = 'object'
                ELSE instance_id IS NOT NULL AND agent_type IS NULL AND changes IS NULL END);
CREATE INDEX agent_mode_change_events_catalogue ON agent_mode_change_events (tenant_id, agent_type, to_mode, created_at)
    WHERE source = 'catalogue';

-- The bundle read of migration 0096, unchanged but for where the modes and
-- the mode presets come from: the tenant's effective catalogue.
CREATE OR REPLACE FUNCTION genesis_read_bundle(p_tenant uuid, p_instance uuid, p_tail bigint, p_agent_type text,
                                               p_sites text[], p_week_start timestamptz,
                                               p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_read jsonb;
    v_epoch bigint;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT jsonb_build_object(
      'catalogue_epoch', c.epoch,
      'ledger_after', k.after,
      'ledger', (SELECT coalesce(jsonb_agg(t.j ORDER BY t.turn_number), '[]'::jsonb) FROM (
          SELECT l.turn_number, to_jsonb(l) || jsonb_build_object('actions',
              (SELECT coalesce(jsonb_agg(to_jsonb(a) ORDER BY a.ordinal), '[]'::jsonb)
                 FROM agent_state_ledger_actions a WHERE a.ledger_id = l.id)) AS j
            FROM agent_state_ledger l WHERE l.instance_id = p_instance AND l.turn_number > k.after
           ORDER BY l.turn_number DESC LIMIT p_tail) t),
      'missions', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', m.id, 'title', m.title,
            'status', m.status, 'created_at', m.created_at) ORDER BY m.created_at, m.id), '[]'::jsonb)
          FROM missions m WHERE m.metadata->>'soaInstanceId' = (p_instance::uuid)::text
           AND m.status NOT IN ('completed', 'cancelled')),
      'escalations', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', r.id, 'kind', r.kind,
            'title', r.title, 'created_at', r.created_at) ORDER BY r.created_at, r.id), '[]'::jsonb)
          FROM attention_requests r WHERE r.metadata->>'soaInstanceId' = (p_instance::uuid)::text AND r.status = 'open'),
      'credit_spent', (SELECT w.spent_usd FROM credit_windows w WHERE w.tenant_id = p_tenant AND w.week_start = p_week_start)
    ), c.epoch
      INTO v_read, v_epoch
      FROM (SELECT CASE WHEN p_after_turn > 0 AND p_after_id IS NOT NULL AND EXISTS (
                SELECT 1 FROM agent_state_ledger h
                 WHERE h.instance_id = p_instance AND h.turn_number = p_after_turn AND h.id = p_after_id)
            THEN p_after_turn ELSE 0 END AS after) k,
           catalogue_epoch c;
    IF v_epoch = p_catalogue_epoch THEN
        RETURN v_read;
    END IF;
    -- Read at or after the epoch's snapshot: see migration 0096's header.
    RETURN v_read || (SELECT jsonb_build_object(
          'configs', genesis_effective_configs(p_tenant),
          'modes', (SELECT coalesce(jsonb_agg(to_jsonb(md) ORDER BY md.name), '[]'::jsonb)
              FROM genesis_effective_modes(p_tenant, p_agent_type) md),
          'bindings', (SELECT coalesce(jsonb_agg(jsonb_build_object('site_id', b.site_id, 'preset', to_jsonb(p))), '[]'::jsonb)
              FROM llm_site_bindings b JOIN llm_presets p ON p.id = b.preset_id WHERE b.site_id = ANY(p_sites)),
          'mode_presets', (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.name), '[]'::jsonb)
              FROM llm_presets p WHERE EXISTS (SELECT 1 FROM genesis_effective_modes(p_tenant, p_agent_type) md
                WHERE md.preset_id = p.id::text OR md.preset_id = p.name))
    ));
END
$$;
