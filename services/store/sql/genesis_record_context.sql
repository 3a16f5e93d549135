-- The supervisor's price read: the instance's type, the configuration and
-- every price row whose model name begins one of the two names, so the
-- supervisor picks the row by the one matching rule it shares with
-- control (exact, else the longest base name the served one extends by a
-- date or version stamp). The candidates are few: only names that prefix
-- the served or the requested model.
CREATE OR REPLACE FUNCTION public.genesis_record_context(p_tenant uuid, p_instance uuid, p_served text, p_requested text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    RETURN (
        SELECT jsonb_build_object(
            'agent_type', i.agent_type,
            'configs', genesis_effective_configs(p_tenant),
            'prices', coalesce(
                (SELECT jsonb_agg(to_jsonb(p)) FROM llm_pricing p
                  WHERE starts_with(p_served, p.model) OR starts_with(p_requested, p.model)),
                '[]'::jsonb),
            'catalogue_epoch', (SELECT c.epoch FROM catalogue_epoch c))
          FROM agent_instances i WHERE i.id = p_instance);
END
$function$;
