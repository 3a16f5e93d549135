-- The range and shape checks of the rows a tick writes besides its event
-- and instance rows (the call snapshot, the call attempt, the credit
-- window) and the event row's publish epoch are domains, not table CHECK
-- constraints: migration 0092's change, for the checks it left.
--
-- PostgreSQL re-reads a table's CHECK constraints from their stored text at
-- the start of every INSERT and UPDATE statement on the table, and checks
-- all of them on every UPDATE whatever columns it sets. A tick's completion
-- inserts a snapshot (six CHECKs), inserts an attempt (four) and updates
-- the tenant's credit window (two), and every update of the event row
-- re-checked its publish epoch. On one client (scripts/bench-tick-sql.sh,
-- BENCHMARKS.md 0s) that was 15 µs of genesis_write_call_attempt's 150 and
-- 4 µs of genesis_credit_draw_down's 27 per tick.
--
-- A domain's check is parsed once per connection (the type cache) and runs
-- only when a value is written to the column. The rules are the same, with
-- the same SQLSTATE (23514, check_violation), which the store maps to
-- InvalidArgument; the error now names the domain's constraint. NOT NULL
-- stays on the columns, and each domain passes NULL as its CHECK did.
--
-- As in 0092: each domain is created without its check, the columns are
-- switched to it (the same base type, so no table rewrite, and the
-- invocation key's index is kept), and the check is added NOT VALID. The
-- stored rows were checked by the table constraints dropped in the same
-- transaction. "ALTER DOMAIN <domain> VALIDATE CONSTRAINT <domain>_check"
-- marks a check validated; it scans every table using the domain.
--
-- The event row keeps one table CHECK, the pairing of
-- OperatorAnsweredEscalation with its attention request: it spans two
-- columns, which a domain cannot.

CREATE DOMAIN nonnegative_bigint AS bigint;
CREATE DOMAIN nonnegative_integer AS integer;
CREATE DOMAIN usd_amount AS double precision;
CREATE DOMAIN llm_invocation_id AS text;
CREATE DOMAIN llm_call_tag AS text;
CREATE DOMAIN sha256_hex AS text;
CREATE DOMAIN json_object AS jsonb;

ALTER TABLE llm_call_snapshots
    ALTER COLUMN invocation_id TYPE llm_invocation_id,
    ALTER COLUMN call_tag TYPE llm_call_tag,
    ALTER COLUMN input_tokens TYPE nonnegative_bigint,
    ALTER COLUMN output_tokens TYPE nonnegative_bigint,
    ALTER COLUMN cost_usd TYPE usd_amount,
    ALTER COLUMN prompt_overlay_sha256 TYPE sha256_hex;
ALTER TABLE llm_call_attempts
    ALTER COLUMN ordinal TYPE nonnegative_integer,
    ALTER COLUMN usage TYPE json_object,
    ALTER COLUMN latency_ms TYPE nonnegative_bigint,
    ALTER COLUMN cost_usd TYPE usd_amount;
ALTER TABLE credit_windows
    ALTER COLUMN limit_usd TYPE usd_amount,
    ALTER COLUMN spent_usd TYPE usd_amount;
ALTER TABLE agent_event_queue
    ALTER COLUMN publish_epoch TYPE nonnegative_integer;

ALTER DOMAIN nonnegative_bigint ADD CONSTRAINT nonnegative_bigint_check CHECK (VALUE >= 0) NOT VALID;
ALTER DOMAIN nonnegative_integer ADD CONSTRAINT nonnegative_integer_check CHECK (VALUE >= 0) NOT VALID;
ALTER DOMAIN usd_amount ADD CONSTRAINT usd_amount_check CHECK (VALUE >= 0) NOT VALID;
ALTER DOMAIN llm_invocation_id ADD CONSTRAINT llm_invocation_id_check
    CHECK (length(VALUE) BETWEEN 1 AND 200) NOT VALID;
ALTER DOMAIN llm_call_tag ADD CONSTRAINT llm_call_tag_check CHECK (VALUE = 'AgentPlanning') NOT VALID;
ALTER DOMAIN sha256_hex ADD CONSTRAINT sha256_hex_check CHECK (VALUE ~ '^[0-9a-f]{64}$') NOT VALID;
ALTER DOMAIN json_object ADD CONSTRAINT json_object_check CHECK (jsonb_typeof(VALUE) = 'object') NOT VALID;

ALTER TABLE llm_call_snapshots
    DROP CONSTRAINT llm_call_snapshots_invocation_id_check,
    DROP CONSTRAINT llm_call_snapshots_call_tag_check,
    DROP CONSTRAINT llm_call_snapshots_input_tokens_check,
    DROP CONSTRAINT llm_call_snapshots_output_tokens_check,
    DROP CONSTRAINT llm_call_snapshots_cost_usd_check,
    DROP CONSTRAINT llm_call_snapshots_prompt_overlay_sha256_check;
ALTER TABLE llm_call_attempts
    DROP CONSTRAINT llm_call_attempts_ordinal_check,
    DROP CONSTRAINT llm_call_attempts_usage_check,
    DROP CONSTRAINT llm_call_attempts_latency_ms_check,
    DROP CONSTRAINT llm_call_attempts_cost_usd_check;
ALTER TABLE credit_windows
    DROP CONSTRAINT credit_windows_limit_usd_check,
    DROP CONSTRAINT credit_windows_spent_usd_check;
ALTER TABLE agent_event_queue
    DROP CONSTRAINT agent_event_queue_publish_epoch_check;
