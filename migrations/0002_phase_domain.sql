-- The phase an instance stands in after its last turn, as a domain holding
-- genesis-core's `Phase` list, so a value outside it is refused by the
-- database as well as by the type the services write and read it with.
-- A domain rather than a table CHECK: the completion write updates
-- agent_instances on every tick, and a table CHECK carrying the list would
-- be re-checked on each such update; the domain's check runs only when a
-- phase value is assigned. The ledger's column shares the domain, so its
-- turns carry the same vocabulary.
CREATE DOMAIN agent_phase AS text
    CONSTRAINT agent_phase_check CHECK (VALUE IN ('idle','idle:blocked','idle:exhausted','acted','escalated','halted:stuck'));

ALTER TABLE agent_instances ALTER COLUMN phase TYPE agent_phase;

ALTER TABLE agent_state_ledger ALTER COLUMN phase TYPE agent_phase;
