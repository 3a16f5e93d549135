-- The value lists of the tick's hot rows are checked by domains, not by
-- table CHECK constraints.
--
-- PostgreSQL re-reads a table's CHECK constraints from their stored text at
-- the start of every INSERT and UPDATE statement on it, and checks all of
-- them on every UPDATE, whether or not the statement changed the column. An
-- IN list is stored as an array constant, so each re-read parses the array
-- byte by byte. A tick updates its event row three times (publish mark,
-- claim, consumption) and its instance row three times (enqueue sequence,
-- lease, passivation), so it re-read and re-checked event_kind, status and
-- agent_type six times for columns it never writes (BENCHMARKS.md 0m: the
-- constraint checks were 4.4 % of the machine under load).
--
-- A domain's check is parsed once per connection (PostgreSQL's type cache)
-- and runs only when a value is written to the column. The rules are the
-- same: the same lists, the same SQLSTATE (23514, check_violation), which
-- the store maps to InvalidArgument as before; the error now names the
-- domain's constraint. genesis-core's enums hold the same lists.
--
-- Each domain is created without its check, the column is switched to it
-- (a domain over text without a check is a relabelling: no table rewrite;
-- the indexes are kept, except the partial indexes whose predicate names the
-- column: the pending-heartbeat, resume-dedup and SOA census indexes are
-- rebuilt, each over a sliver of the rows), and the check is then added
-- NOT VALID. The rows already stored were checked by the table constraint
-- this migration drops in the same transaction, so they need no re-scan, and
-- a re-scan of agent_event_queue and llm_call_attempts (both grow with every
-- tick) would hold their locks for its length. New values are checked from
-- here on. To have the catalogue show the checks validated, run
-- "ALTER DOMAIN <domain> VALIDATE CONSTRAINT <domain>_check" at a quiet time:
-- it scans every table using the domain and blocks writes to it meanwhile.

CREATE DOMAIN agent_event_kind AS text;
ALTER TABLE agent_event_queue ALTER COLUMN event_kind TYPE agent_event_kind;
ALTER DOMAIN agent_event_kind ADD CONSTRAINT agent_event_kind_check
    CHECK (VALUE IN ('AgentInitialized', 'AgentTick', 'OperatorMessage', 'OperatorAnsweredEscalation',
                     'MissionStateChanged', 'DecisionResolved', 'DependencyCompleted',
                     'ExternalSignalReceived')) NOT VALID;
ALTER TABLE agent_event_queue DROP CONSTRAINT agent_event_queue_event_kind_check;

CREATE DOMAIN agent_instance_status AS text;
ALTER TABLE agent_instances ALTER COLUMN status TYPE agent_instance_status;
ALTER DOMAIN agent_instance_status ADD CONSTRAINT agent_instance_status_check
    CHECK (VALUE IN ('active', 'paused', 'closed')) NOT VALID;
ALTER TABLE agent_instances DROP CONSTRAINT agent_instances_status_check;

CREATE DOMAIN agent_instance_type AS text;
ALTER TABLE agent_instances ALTER COLUMN agent_type TYPE agent_instance_type;
ALTER DOMAIN agent_instance_type ADD CONSTRAINT agent_instance_type_check
    CHECK (VALUE IN ('Soa', 'Compliance', 'PromptRedactor', 'MissionDevelopment', 'MissionResearch',
                     'MissionOperations')) NOT VALID;
ALTER TABLE agent_instances DROP CONSTRAINT agent_instances_agent_type_check;

CREATE DOMAIN llm_call_outcome AS text;
ALTER TABLE llm_call_attempts ALTER COLUMN outcome TYPE llm_call_outcome;
ALTER DOMAIN llm_call_outcome ADD CONSTRAINT llm_call_outcome_check
    CHECK (VALUE IN ('success', 'rate_limited', 'unauthorized', 'server_error', 'timeout', 'error')) NOT VALID;
ALTER TABLE llm_call_attempts DROP CONSTRAINT llm_call_attempts_outcome_check;
