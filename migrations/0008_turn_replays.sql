-- Replays of a recorded turn against another preset (a dry run): the
-- operator asks for one, a pod runs the turn's episode again under the
-- chosen preset's chain with every effectful tool answered "not executed
-- (replay)" and every read-only tool answered from the journal, and the
-- alternative decision is kept here beside the original turn. Its calls
-- are recorded under the call tag Replay against the replay itself, not
-- the instance: they draw on the tenant's credit window, and count toward
-- none of the agent's turns or budgets.
CREATE TABLE agent_replays (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    instance_id uuid NOT NULL,
    -- The ledger turn replayed, and the event whose journal it reads.
    turn_number bigint NOT NULL,
    event_id uuid NOT NULL,
    -- The preset the turn is replayed against (its couples are read at
    -- claim, so a preset edited in between is replayed as it is then).
    preset_id uuid NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    -- The session of the claim running it, every session that ever claimed
    -- it (an attempt a superseded session paid is still recorded), and
    -- when the running claim lapses unless completed.
    session uuid,
    sessions uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    claimed_until timestamp with time zone,
    -- The alternative episode (genesis_core::replay::ReplayOutcome), once done.
    outcome jsonb,
    error text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    -- When the pods' stream accepted its message; NULL until then.
    published_at timestamp with time zone,
    finished_at timestamp with time zone,
    CONSTRAINT agent_replays_status_check
        CHECK (status IN ('pending', 'running', 'done', 'failed')),
    CONSTRAINT agent_replays_finished_check
        CHECK ((status IN ('done', 'failed')) = (finished_at IS NOT NULL)),
    CONSTRAINT agent_replays_outcome_check
        CHECK ((status = 'done') = (outcome IS NOT NULL)),
    CONSTRAINT agent_replays_turn_check CHECK (turn_number >= 1)
);
ALTER TABLE ONLY agent_replays FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY agent_replays ADD CONSTRAINT agent_replays_pkey PRIMARY KEY (id);
ALTER TABLE ONLY agent_replays
    ADD CONSTRAINT agent_replays_tenant_id_id_key UNIQUE (tenant_id, id);
ALTER TABLE ONLY agent_replays
    ADD CONSTRAINT agent_replays_tenant_id_instance_id_fkey
    FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances(tenant_id, id);
CREATE INDEX agent_replays_turn ON agent_replays USING btree (instance_id, turn_number, created_at DESC);
-- The publisher's sweep of replays whose message never reached the stream.
CREATE INDEX agent_replays_unpublished ON agent_replays USING btree (created_at)
    WHERE published_at IS NULL;
ALTER TABLE agent_replays ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_replays USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
-- The publisher reads unpublished replays across tenants, as it does events.
CREATE POLICY system_read ON agent_replays FOR SELECT TO genesis_system USING (true);
CREATE POLICY system_publish ON agent_replays FOR UPDATE TO genesis_system USING (true) WITH CHECK (true);
GRANT SELECT,INSERT,UPDATE ON TABLE agent_replays TO genesis_app;
GRANT SELECT,UPDATE ON TABLE agent_replays TO genesis_system;

ALTER DOMAIN llm_call_tag DROP CONSTRAINT llm_call_tag_check;
ALTER DOMAIN llm_call_tag ADD CONSTRAINT llm_call_tag_check
    CHECK (VALUE IN ('AgentPlanning', 'Coder', 'Replay'));

-- A replay's snapshot names the replay: never the instance, so nothing
-- that sums an agent's calls sees it.
ALTER TABLE llm_call_snapshots ADD COLUMN replay_id uuid;
ALTER TABLE llm_call_snapshots DROP CONSTRAINT llm_call_snapshots_one_subject;
ALTER TABLE llm_call_snapshots ADD CONSTRAINT llm_call_snapshots_one_subject
    CHECK (num_nonnulls(instance_id, coding_task_id, replay_id) = 1);
CREATE UNIQUE INDEX llm_call_snapshots_replay_invocation
    ON llm_call_snapshots (tenant_id, replay_id, invocation_id)
    WHERE replay_id IS NOT NULL;
ALTER TABLE llm_call_snapshots ADD CONSTRAINT llm_call_snapshots_tenant_id_replay_id_fkey
    FOREIGN KEY (tenant_id, replay_id) REFERENCES agent_replays(tenant_id, id);

\ir ../services/store/sql/genesis_hold_credit.sql
\ir ../services/store/sql/genesis_record_replay_attempt.sql
