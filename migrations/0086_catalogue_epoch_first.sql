-- Take the catalogue epoch's row lock before any catalogue row, not after.
-- Migration 0083 raised catalogue_epoch in AFTER STATEMENT triggers, so a
-- writing transaction locked the epoch row only once its statement had
-- written (and locked) its rows. Two transactions that each write two
-- catalogue rows could then deadlock: the default-preset seeder (presets,
-- then bindings with ON CONFLICT DO NOTHING) held the epoch and waited for
-- the binding an operator's AttachPreset had just inserted, while that
-- transaction waited for the epoch; PostgreSQL broke the cycle by failing
-- one of them, which control reported as UNAVAILABLE.
--
-- As BEFORE STATEMENT triggers, every statement on a catalogue table queues
-- for the epoch before it touches a row, so catalogue writers are ordered by
-- the epoch and never hold a catalogue row another writer waits for while
-- waiting for the epoch themselves. What a reader sees is unchanged: the
-- raised epoch commits with the rows, and a statement that fails rolls its
-- raise back with it.

DROP TRIGGER agent_modes_catalogue_epoch ON agent_modes;
DROP TRIGGER llm_presets_catalogue_epoch ON llm_presets;
DROP TRIGGER llm_site_bindings_catalogue_epoch ON llm_site_bindings;
DROP TRIGGER system_configs_catalogue_epoch ON system_configs;
DROP TRIGGER llm_pricing_catalogue_epoch ON llm_pricing;

CREATE TRIGGER agent_modes_catalogue_epoch BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON agent_modes
    FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER llm_presets_catalogue_epoch BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON llm_presets
    FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER llm_site_bindings_catalogue_epoch BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON llm_site_bindings
    FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER system_configs_catalogue_epoch BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON system_configs
    FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER llm_pricing_catalogue_epoch BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON llm_pricing
    FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
