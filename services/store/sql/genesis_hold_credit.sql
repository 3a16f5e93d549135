-- Hold p_amount of the tenant's weekly window for p_session's next LLM turn,
-- after its caller's guard: the one rule of a credit hold, shared by an
-- agent's turn (genesis_reserve_credit, p_instance set, the session its
-- lease), a coder's turn (genesis_reserve_coder_credit, p_instance NULL,
-- the session its coding task) and a replay's turn (p_instance NULL, the
-- session its replay claim's). Lapsed holds of other sessions are swept
-- first: an agent's when its session no longer holds a live lease, a
-- coder's when its task settled or lost its coder, a replay's when its
-- claim settled or lapsed. Returns
-- {"outcome": "granted" | "refused", "spent_usd", "held_usd" (the other
-- sessions' live holds), "limit_usd"}; a refusal writes nothing (the
-- session's earlier hold, if any, stands).
CREATE OR REPLACE FUNCTION public.genesis_hold_credit(p_tenant uuid, p_instance uuid, p_session uuid, p_week_start timestamp with time zone, p_limit_usd double precision, p_amount double precision)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    w credit_windows;
    v_held double precision;
BEGIN
    -- The window row, created if absent and locked either way: every
    -- hold of this tenant and week queues here.
    INSERT INTO credit_windows (tenant_id, week_start, limit_usd, spent_usd)
    VALUES (p_tenant, p_week_start, p_limit_usd, 0)
    ON CONFLICT (tenant_id, week_start) DO UPDATE SET limit_usd = EXCLUDED.limit_usd
    RETURNING * INTO w;
    DELETE FROM credit_reservations r
     WHERE r.tenant_id = p_tenant AND r.session <> p_session
       AND CASE WHEN r.instance_id IS NULL THEN
                NOT EXISTS (SELECT 1 FROM coding_tasks t
                             WHERE t.id = r.session AND t.coder_id IS NOT NULL
                               AND t.status IN ('pending', 'running'))
                AND NOT EXISTS (SELECT 1 FROM agent_replays x
                                 WHERE x.session = r.session AND x.status = 'running'
                                   AND x.claimed_until > now())
           ELSE
                NOT EXISTS (SELECT 1 FROM agent_instances i
                             WHERE i.id = r.instance_id AND i.lease_session = r.session
                               AND i.lease_expires_at > now())
           END;
    SELECT coalesce(sum(r.amount_usd), 0) INTO v_held
      FROM credit_reservations r
     WHERE r.tenant_id = p_tenant AND r.week_start = p_week_start AND r.session <> p_session;
    IF w.spent_usd + v_held + p_amount > p_limit_usd THEN
        RETURN jsonb_build_object('outcome', 'refused', 'spent_usd', w.spent_usd, 'held_usd', v_held,
                                  'limit_usd', p_limit_usd);
    END IF;
    INSERT INTO credit_reservations (tenant_id, session, instance_id, week_start, amount_usd)
    VALUES (p_tenant, p_session, p_instance, p_week_start, p_amount)
    ON CONFLICT (tenant_id, session) DO UPDATE
       SET amount_usd = EXCLUDED.amount_usd, week_start = EXCLUDED.week_start,
           instance_id = EXCLUDED.instance_id;
    RETURN jsonb_build_object('outcome', 'granted', 'spent_usd', w.spent_usd, 'held_usd', v_held,
                              'limit_usd', p_limit_usd);
END
$function$;
