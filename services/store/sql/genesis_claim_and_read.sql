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
