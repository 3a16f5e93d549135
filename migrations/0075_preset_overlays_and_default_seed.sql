-- Presets applied in full (spec §3.5, §3.7): the overlay provenance of a
-- call snapshot, and the once-per-tenant marker of the default seeder.
--
-- A snapshot records the SHA-256 of the prompt overlay its invocation
-- appended, never the overlay text (an overlay may hold the very secrets the
-- Prompt Engineer removes). NULL means no overlay was applied.
ALTER TABLE llm_call_snapshots
    ADD COLUMN prompt_overlay_sha256 text
        CHECK (prompt_overlay_sha256 IS NULL OR prompt_overlay_sha256 ~ '^[0-9a-f]{64}$');

-- One row per tenant the default seeder has run for. Its primary key is
-- what makes seeding idempotent across control replicas (the second
-- concurrent seeder waits on the key, then finds it taken and does nothing)
-- and what keeps an operator's later detach or replacement of the seeded
-- binding from being undone by the next bootstrap scan.
CREATE TABLE llm_default_seeds (
    tenant_id  uuid PRIMARY KEY REFERENCES tenants (id),
    -- NULL when a preset named Default already existed and was left alone.
    preset_id  uuid,
    seeded_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE llm_default_seeds ENABLE ROW LEVEL SECURITY;
ALTER TABLE llm_default_seeds FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON llm_default_seeds
    USING (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid);

GRANT SELECT, INSERT, UPDATE ON llm_default_seeds TO genesis_app;
GRANT SELECT, INSERT, UPDATE ON llm_default_seeds TO genesis_system;
