-- The coder contract: a coder Job carries a token of scope 'coder' bound to
-- exactly one coding task of one tenant, short-lived, revoked when the task
-- settles. The binding lives on the token row so the admin gate learns the
-- task with the same lookup that admits the token.
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_scope_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_scope_check
    CHECK (scope = ANY (ARRAY['operator'::text, 'agent-pod'::text, 'coder'::text]));

-- A task is named with its tenant, so a row can only point at a task of its
-- own tenant.
ALTER TABLE ONLY coding_tasks
    ADD CONSTRAINT coding_tasks_tenant_id_id_key UNIQUE (tenant_id, id);

ALTER TABLE api_tokens ADD COLUMN coding_task_id uuid;
ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_tenant_id_coding_task_id_fkey FOREIGN KEY (tenant_id, coding_task_id)
    REFERENCES coding_tasks (tenant_id, id) ON DELETE CASCADE;
-- A coder token names its task, its tenant and an expiry; no other token
-- names a task.
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_coder_binding CHECK (
    (scope = 'coder') = (coding_task_id IS NOT NULL)
    AND (scope <> 'coder' OR (tenant_id IS NOT NULL AND expires_at IS NOT NULL))
);
CREATE INDEX api_tokens_coding_task ON api_tokens (coding_task_id)
    WHERE coding_task_id IS NOT NULL;

-- The latest progress a coder reported on its task.
ALTER TABLE coding_tasks
    ADD COLUMN progress_message text DEFAULT ''::text NOT NULL,
    ADD COLUMN progress_percent smallint,
    ADD COLUMN progress_at timestamp with time zone,
    ADD CONSTRAINT coding_tasks_progress_percent_check
        CHECK (progress_percent IS NULL OR (progress_percent >= 0 AND progress_percent <= 100));

-- What a coder attached to its task: patches, logs and summaries, as text.
-- Bounded per artifact and per task by control's settings; the size is kept
-- so the per-task totals are one indexed sum.
CREATE TABLE coding_task_artifacts (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    task_id uuid NOT NULL,
    kind text NOT NULL,
    name text NOT NULL,
    content text NOT NULL,
    size_bytes integer NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT coding_task_artifacts_kind_check CHECK ((kind = ANY (ARRAY['patch'::text, 'log'::text, 'summary'::text]))),
    CONSTRAINT coding_task_artifacts_name_check CHECK (((length(btrim(name)) > 0) AND (length(name) <= 256))),
    CONSTRAINT coding_task_artifacts_size_check CHECK ((size_bytes = octet_length(content)))
);

ALTER TABLE ONLY coding_task_artifacts FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY coding_task_artifacts
    ADD CONSTRAINT coding_task_artifacts_pkey PRIMARY KEY (id);
ALTER TABLE ONLY coding_task_artifacts
    ADD CONSTRAINT coding_task_artifacts_tenant_id_task_id_fkey FOREIGN KEY (tenant_id, task_id)
    REFERENCES coding_tasks (tenant_id, id) ON DELETE CASCADE;
CREATE INDEX coding_task_artifacts_task ON coding_task_artifacts USING btree (tenant_id, task_id, created_at);
ALTER TABLE coding_task_artifacts ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON coding_task_artifacts USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE coding_task_artifacts TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE coding_task_artifacts TO genesis_system;
