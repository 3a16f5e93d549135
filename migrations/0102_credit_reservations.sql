-- The weekly credit ceiling holds before a call, not only after it.
--
-- A turn's cost is known only once the provider answered, and the window
-- was drawn down then: a tenant one dollar under its ceiling could start
-- any number of turns at once (one per instance, one per pod slot), and
-- the last turn of each could cross the ceiling by its whole cost.
--
-- Before each LLM turn of a real provider, the pod now reserves the turn's
-- worst case (every prompt token at the dearest prompt price of its chain,
-- the whole output cap at the output price) and the supervisor grants it
-- only if what the window has spent, plus every live reservation of the
-- tenant's other sessions, plus this one stays within the ceiling. The
-- window row is locked by each reservation, so two sessions can never both
-- take the last dollars. A session holds one reservation at a time (each
-- turn's replaces the previous one's), and a reservation counts only while
-- its session holds the instance's lease: the completion or deferral that
-- draws the turn's real cost down releases the lease in the same
-- transaction, and a session that died stops counting when its lease
-- expires. Rows that no longer count are removed by the next reservation.

CREATE TABLE credit_reservations (
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    -- The lease session that reserved.
    session    uuid NOT NULL,
    instance_id uuid NOT NULL,
    week_start timestamptz NOT NULL,
    amount_usd double precision NOT NULL CHECK (amount_usd >= 0),
    PRIMARY KEY (tenant_id, session)
);

ALTER TABLE credit_reservations ENABLE ROW LEVEL SECURITY;
ALTER TABLE credit_reservations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON credit_reservations
    USING (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid);
GRANT SELECT, INSERT, UPDATE, DELETE ON credit_reservations TO genesis_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON credit_reservations TO genesis_system;

-- Reserve p_amount of the tenant's window for p_session's next turn.
-- Returns {"outcome": "not_found" | "lease_lost"} with nothing written, or
-- {"outcome": "granted" | "refused", "spent_usd", "held_usd" (the other
-- sessions' live reservations), "limit_usd"}; a refusal writes nothing
-- either (the session's earlier reservation, if any, stands).
CREATE FUNCTION genesis_reserve_credit(p_tenant uuid, p_instance uuid, p_session uuid,
                                       p_week_start timestamptz, p_limit_usd double precision,
                                       p_amount double precision)
RETURNS jsonb
LANGUAGE plpgsql AS $$
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
$$;
