-- An expired lease is a lost lease for tool calls and call attempts.
--
-- RecordCallAttempt (and InvokeTool, whose check is the store's
-- lease_held_in) compared only lease_session with the caller's session, so
-- a pod whose lease had run out kept writing attempts and drawing credit
-- down until another pod happened to claim the instance. The claim treats a
-- lease as free once lease_expires_at < now(); the guard now uses the same
-- boundary: the session must hold the lease AND the lease must not have
-- expired, else {"outcome": "lease_lost"} and nothing is written.
--
-- The nineteen-argument form (a supervisor of the previous release) calls
-- this one and inherits the check.

CREATE OR REPLACE FUNCTION genesis_record_call_attempt(p_tenant uuid, p_instance uuid, p_session uuid, a jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    holder uuid;
    expires timestamptz;
    found_instance boolean;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT lease_session, lease_expires_at, true INTO holder, expires, found_instance
      FROM agent_instances WHERE id = p_instance FOR SHARE;
    IF found_instance IS NULL THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF holder IS DISTINCT FROM p_session OR expires < now() THEN
        RETURN jsonb_build_object('outcome', 'lease_lost');
    END IF;
    RETURN jsonb_build_object('outcome', 'recorded')
        || genesis_write_call_attempt(p_tenant, p_instance, a);
END
$$;
