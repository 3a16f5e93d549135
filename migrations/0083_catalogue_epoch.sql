-- The catalogue part of the claim's bundle, sent only when it changed. A
-- profile after migration 0082 left genesis_read_bundle second among a
-- tick's database costs, and most of what it still rebuilds on every claim
-- is the catalogue: the type's mode rows, the site bindings with their
-- presets, the presets the modes name, and the effective configuration.
-- These change only by admin writes.
--
-- catalogue_epoch is one row, one number. A statement trigger on each of
-- the four source tables (agent_modes, llm_presets, llm_site_bindings,
-- system_configs) raises it in the writing transaction, so a committed
-- change and its new epoch become visible together. The bundle read returns
-- the epoch it saw; a caller that names that epoch is sent no catalogue
-- (it holds the one read at that epoch), any other caller gets it all. The
-- epoch and the catalogue are read in one statement, one snapshot (the
-- configuration helper is STABLE and shares it). So a held catalogue is
-- used only while no change to any of the four tables has committed since
-- it was read: exact, with no time-to-live and no notification to miss.
-- The epoch is global: any tenant's admin write makes every holder read the
-- catalogue once more, which is cheap at the rate admins write.
--
-- The eight-argument function of migration 0081 stays for a supervisor of
-- the previous release, now as this one with no epoch held (one definition
-- of the bundle; that reader ignores the extra 'catalogue_epoch' key).

CREATE TABLE catalogue_epoch (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch     bigint NOT NULL CHECK (epoch > 0)
);
INSERT INTO catalogue_epoch (epoch) VALUES (1);
GRANT SELECT ON catalogue_epoch TO genesis_app, genesis_system;

-- SECURITY DEFINER: the service roles may read the epoch but never set it;
-- only a write to a catalogue table moves it.
CREATE FUNCTION genesis_bump_catalogue_epoch() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE catalogue_epoch SET epoch = epoch + 1;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION genesis_bump_catalogue_epoch() FROM PUBLIC;

CREATE TRIGGER agent_modes_catalogue_epoch AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON agent_modes
    FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER llm_presets_catalogue_epoch AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON llm_presets
    FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER llm_site_bindings_catalogue_epoch AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON llm_site_bindings
    FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER system_configs_catalogue_epoch AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON system_configs
    FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();

CREATE FUNCTION genesis_read_bundle(p_tenant uuid, p_instance uuid, p_tail bigint, p_agent_type text,
                                    p_sites text[], p_week_start timestamptz,
                                    p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    RETURN (
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
) || CASE WHEN c.epoch = p_catalogue_epoch THEN '{}'::jsonb ELSE jsonb_build_object(
  'configs', genesis_effective_configs(p_tenant),
  'modes', (SELECT coalesce(jsonb_agg(to_jsonb(md) ORDER BY md.name), '[]'::jsonb)
      FROM agent_modes md WHERE md.agent_type = p_agent_type),
  'bindings', (SELECT coalesce(jsonb_agg(jsonb_build_object('site_id', b.site_id, 'preset', to_jsonb(p))), '[]'::jsonb)
      FROM llm_site_bindings b JOIN llm_presets p ON p.id = b.preset_id WHERE b.site_id = ANY(p_sites)),
  'mode_presets', (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.name), '[]'::jsonb)
      FROM llm_presets p WHERE EXISTS (SELECT 1 FROM agent_modes md WHERE md.agent_type = p_agent_type
        AND (md.preset_id = p.id::text OR md.preset_id = p.name)))
) END
  FROM (SELECT CASE WHEN p_after_turn > 0 AND p_after_id IS NOT NULL AND EXISTS (
            SELECT 1 FROM agent_state_ledger h
             WHERE h.instance_id = p_instance AND h.turn_number = p_after_turn AND h.id = p_after_id)
        THEN p_after_turn ELSE 0 END AS after) k,
       catalogue_epoch c
    );
END
$$;

REVOKE EXECUTE ON FUNCTION genesis_read_bundle(uuid, uuid, bigint, text, text[], timestamptz, bigint, uuid, bigint)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION genesis_read_bundle(uuid, uuid, bigint, text, text[], timestamptz, bigint, uuid, bigint)
    TO genesis_app, genesis_system;

CREATE OR REPLACE FUNCTION genesis_read_bundle(p_tenant uuid, p_instance uuid, p_tail bigint, p_agent_type text,
                                               p_sites text[], p_week_start timestamptz,
                                               p_after_turn bigint, p_after_id uuid)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RETURN genesis_read_bundle(p_tenant, p_instance, p_tail, p_agent_type, p_sites, p_week_start,
                               p_after_turn, p_after_id, 0);
END
$$;
