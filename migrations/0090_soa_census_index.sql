-- The bootstrap re-scan reads every tenant with its SOA in one statement
-- (genesis_store::tenants::Tenants::census) instead of a tenant read, an
-- advisory lock and an instance list per tenant. This partial index holds
-- one entry per SOA, so finding a tenant's SOA reads one index entry however
-- many instances the tenant has. None of its columns (tenant_id, created_at,
-- id, agent_type) is ever updated, so the tick's updates of agent_instances
-- stay HOT.
CREATE INDEX agent_instances_soa
    ON agent_instances (tenant_id, created_at, id)
    WHERE agent_type = 'Soa';
