-- Model prices join the catalogue epoch, so the supervisor can price a
-- tick's call attempts without a read per attempt. After migration 0083 a
-- completion that carries its last call attempt still ran four statements:
-- genesis_record_context (the instance's type, the configuration, the
-- price), genesis_record_call_attempt, genesis_complete_context and
-- genesis_apply_complete. The supervisor now remembers what its claim read
-- (event, type, mode, counters, configuration) until the tick completes;
-- only the price was not part of any claim.
--
-- A statement trigger on llm_pricing raises catalogue_epoch in the writing
-- transaction, as for the four catalogue tables, and genesis_record_context
-- returns the epoch it read the price at, in the same statement (one
-- snapshot). A supervisor holds a price only for that epoch, and uses it
-- only for a tick claimed at that same epoch: the price in force when the
-- tick was claimed, never one older than the claim. A price write therefore
-- makes every holder read prices and catalogues once more, which is cheap
-- at the rate prices change. A supervisor of the previous release ignores
-- the extra 'catalogue_epoch' key.

CREATE TRIGGER llm_pricing_catalogue_epoch AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON llm_pricing
    FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();

CREATE OR REPLACE FUNCTION genesis_record_context(p_tenant uuid, p_instance uuid, p_served text, p_requested text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    RETURN (
        SELECT jsonb_build_object(
            'agent_type', i.agent_type,
            'configs', genesis_effective_configs(p_tenant),
            'price', coalesce(
                (SELECT to_jsonb(p) FROM llm_pricing p WHERE p.model = p_served),
                (SELECT to_jsonb(p) FROM llm_pricing p WHERE p.model = nullif(p_requested, ''))),
            'catalogue_epoch', (SELECT c.epoch FROM catalogue_epoch c))
          FROM agent_instances i WHERE i.id = p_instance);
END
$$;
