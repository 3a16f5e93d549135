-- Reserve p_amount of the tenant's window for p_session's next turn.
-- Returns {"outcome": "not_found" | "lease_lost"} with nothing written, or
-- {"outcome": "granted" | "refused", "spent_usd", "held_usd" (the other
-- sessions' live reservations), "limit_usd"}; a refusal writes nothing
-- either (the session's earlier reservation, if any, stands).
CREATE OR REPLACE FUNCTION public.genesis_reserve_credit(p_tenant uuid, p_instance uuid, p_session uuid, p_week_start timestamp with time zone, p_limit_usd double precision, p_amount double precision)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    holder uuid;
    found_instance boolean;
    w credit_windows;
    v_held double precision;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT lease_session, true INTO holder, found_instance
      FROM agent_instances WHERE id = p_instance AND tenant_id = p_tenant FOR SHARE;
    IF found_instance IS NULL THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF holder IS DISTINCT FROM p_session THEN
        RETURN jsonb_build_object('outcome', 'lease_lost');
    END IF;
    -- The window row, created if absent and locked either way: every
    -- reservation of this tenant and week queues here.
    INSERT INTO credit_windows (tenant_id, week_start, limit_usd, spent_usd)
    VALUES (p_tenant, p_week_start, p_limit_usd, 0)
    ON CONFLICT (tenant_id, week_start) DO UPDATE SET limit_usd = EXCLUDED.limit_usd
    RETURNING * INTO w;
    -- Lapsed reservations (their session no longer holds a live lease) go.
    DELETE FROM credit_reservations r
     WHERE r.tenant_id = p_tenant AND r.session <> p_session
       AND NOT EXISTS (SELECT 1 FROM agent_instances i
                        WHERE i.id = r.instance_id AND i.lease_session = r.session
                          AND i.lease_expires_at > now());
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
