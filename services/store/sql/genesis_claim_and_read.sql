-- The claim and the bundle read in one call: when genesis_claim_tick
-- claims an event for an instance of the caller's type, the bundle is read
-- exactly as genesis_read_bundle does, in the same transaction after the
-- claim, and returned under 'bundle'. Any other answer (lease held, nothing
-- due, not active, not found, or an instance of another type) carries no
-- 'bundle', and the caller reads it separately. The caller still checks the
-- site chain it named against the one the claimed instance yields. This
-- function only composes the two: one definition of each.
CREATE OR REPLACE FUNCTION public.genesis_claim_and_read(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval, p_max_attempts integer, p_tail bigint, p_agent_type text, p_sites text[], p_week_start timestamp with time zone, p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
$function$;
