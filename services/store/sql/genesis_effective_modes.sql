-- The catalogue of one type as p_tenant sees it: per name, the tenant's
-- row over the platform's; with a NULL tenant, the platform rows. Runs as
-- the caller, so row-level security applies too.
CREATE OR REPLACE FUNCTION public.genesis_effective_modes(p_tenant uuid, p_agent_type text)
 RETURNS SETOF agent_modes
 LANGUAGE sql
 STABLE
AS $function$
    SELECT DISTINCT ON (m.name) m.* FROM agent_modes m
     WHERE m.agent_type = p_agent_type AND (m.tenant_id IS NULL OR m.tenant_id = p_tenant)
     ORDER BY m.name, m.tenant_id NULLS LAST;
$function$;
