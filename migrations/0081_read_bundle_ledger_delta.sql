-- The claim's bundle read, sending only the ledger turns the caller does not
-- already hold. The supervisor keeps each instance's last ledger tail
-- (GENESIS_LEDGER_CACHE_MB) and names the newest turn it holds by number AND
-- id. A benchmark profile showed migration 0077's read rebuilding and
-- re-serialising the whole tail (12 turns with their actions, about 14 KB
-- of JSON) on every claim, although at most one turn is new: it was the
-- largest single cost of a tick in the database.
--
-- The ledger is append-only: a turn is never updated, and rows go only all
-- at once (an instance reset deletes its whole ledger, after which numbering
-- starts again at 1). So while the named turn still exists with the named
-- id, every turn up to it is exactly what the caller read, and the turns
-- after it are all it lacks. The id makes the check exact across a reset: a
-- turn of the same number written afterwards has a new random id. When the
-- check fails (reset, never read, or no turn named) the whole tail is sent.
-- 'ledger_after' says which: the named turn number when only later turns
-- follow, 0 when 'ledger' is the whole tail. The check and the read are one
-- statement, so they see one snapshot.
--
-- Migration 0077's six-argument function stays for a supervisor of the
-- previous release during a rolling upgrade, now as this one asked for the
-- whole tail (one definition of the bundle; the extra 'ledger_after' key is
-- ignored by that reader).
CREATE FUNCTION genesis_read_bundle(p_tenant uuid, p_instance uuid, p_tail bigint, p_agent_type text,
                                    p_sites text[], p_week_start timestamptz,
                                    p_after_turn bigint, p_after_id uuid)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    RETURN (
SELECT jsonb_build_object(
  'configs', genesis_effective_configs(p_tenant),
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
  'modes', (SELECT coalesce(jsonb_agg(to_jsonb(md) ORDER BY md.name), '[]'::jsonb)
      FROM agent_modes md WHERE md.agent_type = p_agent_type),
  'bindings', (SELECT coalesce(jsonb_agg(jsonb_build_object('site_id', b.site_id, 'preset', to_jsonb(p))), '[]'::jsonb)
      FROM llm_site_bindings b JOIN llm_presets p ON p.id = b.preset_id WHERE b.site_id = ANY(p_sites)),
  'mode_presets', (SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.name), '[]'::jsonb)
      FROM llm_presets p WHERE EXISTS (SELECT 1 FROM agent_modes md WHERE md.agent_type = p_agent_type
        AND (md.preset_id = p.id::text OR md.preset_id = p.name))),
  'credit_spent', (SELECT w.spent_usd FROM credit_windows w WHERE w.tenant_id = p_tenant AND w.week_start = p_week_start)
)
  FROM (SELECT CASE WHEN p_after_turn > 0 AND p_after_id IS NOT NULL AND EXISTS (
            SELECT 1 FROM agent_state_ledger h
             WHERE h.instance_id = p_instance AND h.turn_number = p_after_turn AND h.id = p_after_id)
        THEN p_after_turn ELSE 0 END AS after) k
    );
END
$$;

REVOKE EXECUTE ON FUNCTION genesis_read_bundle(uuid, uuid, bigint, text, text[], timestamptz, bigint, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION genesis_read_bundle(uuid, uuid, bigint, text, text[], timestamptz, bigint, uuid)
    TO genesis_app, genesis_system;

CREATE OR REPLACE FUNCTION genesis_read_bundle(p_tenant uuid, p_instance uuid, p_tail bigint, p_agent_type text,
                                               p_sites text[], p_week_start timestamptz)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RETURN genesis_read_bundle(p_tenant, p_instance, p_tail, p_agent_type, p_sites, p_week_start, 0, NULL);
END
$$;
