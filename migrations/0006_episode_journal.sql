-- The episode journal (DESIGN's durable episodes): for each claimed event,
-- the episode's steps in order (each LLM turn with its attempts, each tool
-- call with its result), appended before the episode moves on, so a
-- reclaimed tick can resume instead of repeating effects and spend, and an
-- operator can read the turn as a trace. Append-only for the tenant path;
-- bounded per episode by the writer's cap (one `truncated` marker, then
-- nothing more); pruned after its retention by the platform loop, while the
-- ledger turn it explains is kept forever.
CREATE TABLE agent_episode_journal (
    tenant_id uuid NOT NULL,
    -- The claimed event whose episode this is (a resumed episode appends
    -- to the same journal under its new session).
    event_id uuid NOT NULL,
    seq integer NOT NULL,
    instance_id uuid NOT NULL,
    -- The lease session that appended the step.
    session uuid NOT NULL,
    kind text NOT NULL,
    entry jsonb NOT NULL,
    -- The entry's size as stored (its JSON text), what the cap counts.
    bytes integer NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_episode_journal_kind_check
        CHECK (kind IN ('llm_turn', 'tool_call', 'truncated')),
    CONSTRAINT agent_episode_journal_seq_check CHECK (seq >= 0),
    CONSTRAINT agent_episode_journal_entry_check CHECK (jsonb_typeof(entry) = 'object')
);

ALTER TABLE ONLY agent_episode_journal FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY agent_episode_journal
    ADD CONSTRAINT agent_episode_journal_pkey PRIMARY KEY (tenant_id, event_id, seq);
ALTER TABLE ONLY agent_episode_journal
    ADD CONSTRAINT agent_episode_journal_tenant_id_instance_id_fkey
    FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances(tenant_id, id);
CREATE INDEX agent_episode_journal_created ON agent_episode_journal USING btree (created_at);
CREATE INDEX agent_episode_journal_instance ON agent_episode_journal USING btree (instance_id, created_at);
ALTER TABLE agent_episode_journal ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_episode_journal USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
-- The retention loop reads and deletes across tenants; nothing else of the
-- platform touches a journal.
CREATE POLICY system_read ON agent_episode_journal FOR SELECT TO genesis_system USING (true);
CREATE POLICY system_prune ON agent_episode_journal FOR DELETE TO genesis_system USING (true);
-- Append-only: the tenant path may never rewrite or drop a step.
GRANT SELECT,INSERT ON TABLE agent_episode_journal TO genesis_app;
GRANT SELECT,DELETE ON TABLE agent_episode_journal TO genesis_system;

\ir ../services/store/sql/genesis_journal_append.sql
