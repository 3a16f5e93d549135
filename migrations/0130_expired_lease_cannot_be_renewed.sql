-- An expired lease is a lost lease for renewal too.
--
-- genesis_renew_lease compared only lease_session with the caller's
-- session, so a pod whose lease had already run out could renew it and
-- carry on, although the claim treats that lease as free (another pod may
-- already have reclaimed the instance and its event, or may at any moment).
-- Renewal now uses the claim's boundary, as RecordCallAttempt and InvokeTool
-- do: the session must hold the lease AND the lease must not have expired,
-- else nothing is written and the answer is false (LEASE_LOST).
--
-- A renewal racing a reclaim is decided by the row lock: whichever UPDATE
-- commits first wins; the other re-reads the row and finds it no longer
-- matches (a new session, or an expiry already in the future for another
-- holder).

CREATE OR REPLACE FUNCTION genesis_renew_lease(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    UPDATE agent_instances SET lease_expires_at = now() + p_ttl
     WHERE id = p_instance AND tenant_id = p_tenant AND lease_session = p_session
       AND NOT coalesce(lease_expires_at < now(), false);
    RETURN FOUND;
END
$$;
