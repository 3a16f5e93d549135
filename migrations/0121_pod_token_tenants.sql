-- Agent-pod tokens scoped to tenants.
--
-- Until now one agent-pod token could claim, act on and complete any
-- tenant's instance. `pod_tenants` is the set of tenants an agent-pod token
-- may act for; empty (every existing token) admits every tenant, the shared
-- pool's token. The supervisor refuses any AgentPod call naming a tenant
-- outside its token's set. Operator tokens never carry one (their tenant is
-- `tenant_id`).
--
-- The set is stored sorted and without duplicates, and every member must be
-- a tenant when it is written (a trigger: an array cannot hold a foreign
-- key); the unknown one is named with no_data_found. A change to the set is
-- an UPDATE, which migration 0079's statement trigger already notifies on
-- `genesis_api_tokens`, so every token cache forgets the old set at once.

ALTER TABLE api_tokens
    ADD COLUMN pod_tenants uuid[] NOT NULL DEFAULT '{}';

ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_pod_tenants_agent_pod_only
        CHECK (scope = 'agent-pod' OR cardinality(pod_tenants) = 0),
    ADD CONSTRAINT api_tokens_pod_tenants_bounded
        CHECK (cardinality(pod_tenants) <= 256 AND array_position(pod_tenants, NULL) IS NULL);

CREATE FUNCTION genesis_api_tokens_pod_tenants() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    missing uuid;
BEGIN
    NEW.pod_tenants := ARRAY(SELECT DISTINCT x FROM unnest(NEW.pod_tenants) x ORDER BY x);
    SELECT x INTO missing
      FROM unnest(NEW.pod_tenants) x
     WHERE NOT EXISTS (SELECT 1 FROM tenants n WHERE n.id = x)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'tenant %', missing USING ERRCODE = 'no_data_found';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER api_tokens_pod_tenants
BEFORE INSERT OR UPDATE OF pod_tenants ON api_tokens
FOR EACH ROW WHEN (cardinality(NEW.pod_tenants) > 0)
EXECUTE FUNCTION genesis_api_tokens_pod_tenants();
