-- ClaimTick in one round trip. After migration 0084 a tick's service
-- statements were the claim (genesis_claim_tick), the bundle read
-- (genesis_read_bundle), the attempt write and the turn write: the claim and
-- its read were two autocommit statements because the read needs the
-- instance's agent type (its modes, its site chain), which only the claim
-- returned. A supervisor that has claimed the instance before knows both
-- (they do not change for an instance), so it can ask for the read with the
-- claim.
--
-- genesis_claim_and_read runs the claim exactly as genesis_claim_tick does
-- and, only when it claimed an instance of the named agent type, the bundle
-- read exactly as genesis_read_bundle does, in the same transaction after
-- the claim, and returns the claim's answer with the read under 'bundle'.
-- Any other answer (lease held, nothing due, not active, not found, or an
-- instance of another type) carries no 'bundle', and the caller reads it as
-- before. The caller still checks the site chain it named against the one
-- the claimed instance yields, and reads again when they differ. This
-- function only composes the two: one definition of each.

CREATE FUNCTION genesis_claim_and_read(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval,
                                       p_max_attempts integer, p_tail bigint, p_agent_type text,
                                       p_sites text[], p_week_start timestamptz,
                                       p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    claim jsonb;
BEGIN
    claim := genesis_claim_tick(p_tenant, p_instance, p_session, p_ttl, p_max_attempts);
    IF claim->>'outcome' = 'claimed' AND claim->'instance'->>'agent_type' = p_agent_type THEN
        claim := claim || jsonb_build_object('bundle',
            genesis_read_bundle(p_tenant, p_instance, p_tail, p_agent_type, p_sites, p_week_start,
                                p_after_turn, p_after_id, p_catalogue_epoch));
    END IF;
    RETURN claim;
END
$$;

REVOKE EXECUTE ON FUNCTION genesis_claim_and_read(uuid, uuid, uuid, interval, integer, bigint, text, text[],
                                                  timestamptz, bigint, uuid, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION genesis_claim_and_read(uuid, uuid, uuid, interval, integer, bigint, text, text[],
                                                 timestamptz, bigint, uuid, bigint) TO genesis_app, genesis_system;
