-- A coder's LLM calls are recorded and billed like an agent's, against its
-- coding task rather than an agent instance: a call snapshot names exactly
-- one of the two, under the call tag Coder for a coder's; a credit hold
-- without an instance is a coder's, its session the task. The hold rule
-- and the attempt write each get one function both kinds of caller use.
ALTER DOMAIN llm_call_tag DROP CONSTRAINT llm_call_tag_check;
ALTER DOMAIN llm_call_tag ADD CONSTRAINT llm_call_tag_check
    CHECK (VALUE IN ('AgentPlanning', 'Coder'));

ALTER TABLE llm_call_snapshots ALTER COLUMN instance_id DROP NOT NULL;
ALTER TABLE llm_call_snapshots ADD COLUMN coding_task_id uuid;
ALTER TABLE llm_call_snapshots ADD CONSTRAINT llm_call_snapshots_one_subject
    CHECK ((instance_id IS NULL) <> (coding_task_id IS NULL));
-- One snapshot per coder invocation; partial, so an agent's snapshot (the
-- hot insert of every tick) maintains no entry in it.
CREATE UNIQUE INDEX llm_call_snapshots_task_invocation
    ON llm_call_snapshots (tenant_id, coding_task_id, invocation_id)
    WHERE coding_task_id IS NOT NULL;
-- The snapshot's tenant is proven through whichever parent it names, as
-- an agent's always was through its instance: no direct key to tenants is
-- checked on the hot insert.
ALTER TABLE llm_call_snapshots ADD CONSTRAINT llm_call_snapshots_tenant_id_coding_task_id_fkey
    FOREIGN KEY (tenant_id, coding_task_id) REFERENCES coding_tasks(tenant_id, id);

ALTER TABLE credit_reservations ALTER COLUMN instance_id DROP NOT NULL;

\ir ../services/store/sql/genesis_hold_credit.sql
\ir ../services/store/sql/genesis_reserve_credit.sql
\ir ../services/store/sql/genesis_reserve_coder_credit.sql
\ir ../services/store/sql/genesis_append_call_attempt.sql
\ir ../services/store/sql/genesis_write_call_attempt.sql
\ir ../services/store/sql/genesis_record_coder_attempt.sql
