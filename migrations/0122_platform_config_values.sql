-- Platform-only ceilings: the configuration keys that bound a tenant's
-- spend or load (genesis-core's ceilings::CEILINGS) are the platform's.
-- A tenant operator may only move them the safe way (lower a ceiling, raise
-- a floor, turn a guard on), checked against the platform's value for the
-- tenant; and every reader keeps the tenant within that value, so a tenant
-- row written before the platform lowered its own can never raise anything.
--
-- The platform's value for a tenant is the platform's row for that tenant,
-- else the global row, else the code default. A tenant row so far held one
-- value, written by whichever token came last. It now also holds the
-- platform's: platform_value is set by a platform token's write at tenant
-- scope (value and platform_value both take the written value, clearing the
-- tenant's own choice), and left alone by a tenant operator's write (value
-- only). Rows written before this release have no platform value: the
-- global row or the default bounds them, so a platform that raised a tenant
-- through a tenant row writes it again.
ALTER TABLE system_configs ADD COLUMN platform_value text;
ALTER TABLE system_configs ADD CONSTRAINT system_configs_platform_value_tenant_only
    CHECK (tenant_id IS NOT NULL OR platform_value IS NULL);

-- The readers (the claim's bundle, the call record's context, the
-- completion's context, control) all read genesis_effective_configs. Its
-- object keeps every key's effective value as before (the tenant's row over
-- the global one), so a reader of the previous release reads what it read;
-- beside them, under '@platform:' || key, the platform's value of every key
-- that has one, which such a reader ignores as an unknown key. A stored key
-- with that prefix (none can be written any more: unknown keys are refused)
-- is left out of both.
CREATE OR REPLACE FUNCTION genesis_effective_configs(p_tenant uuid)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
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
$$;
