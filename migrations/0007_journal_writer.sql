-- The episode journal's writers: an LLM turn is journaled with its last
-- call attempt, in that attempt's transaction (RecordCallAttempt's, the
-- completion's or the deferral's), and a tool call with its effect. The
-- write itself, shared by every writer, checks that the step's event is the
-- one its session claimed.

-- The system prompts of journaled turns, once per tenant and text: a turn's
-- step names its system prompt by SHA-256 instead of repeating the same
-- few kilobytes in every episode of an instance, and the journal's readers
-- put the text back. Rows are kept (one per distinct prompt a tenant's
-- agents ran with, bounded by its catalogue edits).
CREATE TABLE agent_prompt_texts (
    tenant_id uuid NOT NULL,
    sha256 text NOT NULL,
    text text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_prompt_texts_sha256_check CHECK (sha256 ~ '^[0-9a-f]{64}$')
);
ALTER TABLE ONLY agent_prompt_texts FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY agent_prompt_texts
    ADD CONSTRAINT agent_prompt_texts_pkey PRIMARY KEY (tenant_id, sha256);
ALTER TABLE ONLY agent_prompt_texts
    ADD CONSTRAINT agent_prompt_texts_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE agent_prompt_texts ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_prompt_texts USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
-- Append-only, as the journal that names them.
GRANT SELECT,INSERT ON TABLE agent_prompt_texts TO genesis_app;

-- No reader looks a journal up by instance (the trace and a resumed
-- episode read by event); one index fewer for every step written.
DROP INDEX agent_episode_journal_instance;

\ir ../services/store/sql/genesis_journal_write.sql
\ir ../services/store/sql/genesis_journal_append.sql
\ir ../services/store/sql/genesis_write_call_attempt.sql
