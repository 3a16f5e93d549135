-- The readers (the claim's bundle, the call record's context, the
-- completion's context, control) all read genesis_effective_configs. Its
-- object keeps every key's effective value as before (the tenant's row over
-- the global one), so a reader of the previous release reads what it read;
-- beside them, under '@platform:' || key, the platform's value of every key
-- that has one, which such a reader ignores as an unknown key. A stored key
-- with that prefix (none can be written any more: unknown keys are refused)
-- is left out of both.
CREATE OR REPLACE FUNCTION public.genesis_effective_configs(p_tenant uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    RETURN (SELECT coalesce(jsonb_object_agg(c.key, c.value), '{}'::jsonb) FROM (
        SELECT DISTINCT ON (key) key, value FROM system_configs
         WHERE (tenant_id IS NULL OR tenant_id = p_tenant) AND NOT starts_with(key, '@platform:')
         ORDER BY key, tenant_id NULLS LAST) c)
        || (SELECT coalesce(jsonb_object_agg('@platform:' || p.key, p.value), '{}'::jsonb) FROM (
        SELECT DISTINCT ON (key) key, coalesce(platform_value, value) AS value FROM system_configs
         WHERE (tenant_id IS NULL OR (tenant_id = p_tenant AND platform_value IS NOT NULL))
           AND NOT starts_with(key, '@platform:')
         ORDER BY key, tenant_id NULLS LAST) p);
END
$function$;
