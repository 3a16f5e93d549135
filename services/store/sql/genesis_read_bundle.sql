-- The bundle a claim is planned from: the ledger tail after the turn the
-- caller already holds, open missions, pending escalations, the week's
-- credit and the catalogue epoch; and, only for a caller that does not hold
-- the current epoch, the catalogue (effective configuration, modes, site
-- bindings, mode presets).
--
-- Two statements, because PostgreSQL initialises every subquery of a
-- statement when it starts it, whether or not a CASE then evaluates it: a
-- single statement set up the catalogue's aggregates and joins on every
-- claim to send nothing. The catalogue is read by the second statement, at
-- a later snapshot than the epoch it is sent with, so a catalogue write
-- committed between the two leaves the caller holding an epoch that is no
-- longer current, and its next read is sent the catalogue again: a
-- catalogue is never sent with an epoch newer than itself.
CREATE OR REPLACE FUNCTION public.genesis_read_bundle(p_tenant uuid, p_instance uuid, p_tail bigint, p_agent_type text, p_sites text[], p_week_start timestamp with time zone, p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
    -- Read at a later snapshot than the epoch: never newer than the epoch sent.
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
$function$;
