-- Drop the tenant foreign keys that a composite key already implies.
--
-- Each table below has two foreign keys that check its tenant:
--   * tenant_id -> tenants(id), and
--   * a NOT NULL composite key (tenant_id, <parent>) -> <parent>(tenant_id, id).
-- The parent (agent_instances, agent_state_ledger or llm_call_snapshots) has
-- a tenant foreign key of its own, directly or through its own composite key.
-- So the composite key alone proves the row's tenant exists and owns the
-- parent. No key here cascades, so a tenant that has rows below it cannot be
-- deleted either way.
--
-- The direct key cost every insert into these tables a referential-integrity
-- query. It also took a FOR KEY SHARE lock on the tenant's row. Those locks
-- write WAL, and when concurrent transactions of one tenant hold them they
-- turn into multixacts. A tick inserts into four of these tables
-- (agent_event_queue, agent_state_ledger, llm_call_snapshots and
-- llm_call_attempts), and into agent_state_ledger_actions when its turn acts,
-- so every tick paid this for nothing. BENCHMARKS 0d has the measurement.
--
-- The other tenant tables keep their direct key: agent_instances,
-- credit_windows and the catalogue tables have no composite key, and the rest
-- (attention_requests, missions and the like) are not written on every tick.
-- The store test tenant_keys.rs checks that every tenant_id column still reaches
-- tenants(id) through foreign keys whose other columns are NOT NULL.

ALTER TABLE agent_event_queue DROP CONSTRAINT agent_event_queue_tenant_id_fkey;
ALTER TABLE agent_state_ledger DROP CONSTRAINT agent_state_ledger_tenant_id_fkey;
ALTER TABLE agent_state_ledger_actions DROP CONSTRAINT agent_state_ledger_actions_tenant_id_fkey;
ALTER TABLE agent_messages DROP CONSTRAINT agent_messages_tenant_id_fkey;
ALTER TABLE llm_call_snapshots DROP CONSTRAINT llm_call_snapshots_tenant_id_fkey;
ALTER TABLE llm_call_attempts DROP CONSTRAINT llm_call_attempts_tenant_id_fkey;
ALTER TABLE tool_invocations DROP CONSTRAINT tool_invocations_tenant_id_fkey;
