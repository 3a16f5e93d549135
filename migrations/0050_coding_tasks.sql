-- Coding tasks (spec 2.3): the unit of work an on-demand coder executes. The
-- couple is resolved at creation (a preset overrides the explicit triple) and
-- stored as it was resolved, so a later preset edit never changes a task
-- already handed out. steering_instance_id is the standing agent told with a
-- DependencyCompleted event when the task settles.
CREATE TABLE coding_tasks (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id            uuid NOT NULL REFERENCES tenants (id),
    title                text NOT NULL CHECK (length(btrim(title)) > 0),
    instructions         text NOT NULL CHECK (length(btrim(instructions)) > 0),
    status               text NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'running', 'completed', 'failed')),
    coder_id             text,
    preset_id            uuid,
    model                text NOT NULL,
    provider             text NOT NULL,
    backend              text NOT NULL DEFAULT '',
    credential_names     jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(credential_names) = 'array'),
    repository           text NOT NULL DEFAULT '',
    branch               text NOT NULL DEFAULT '',
    steering_instance_id uuid,
    result_summary       text NOT NULL DEFAULT '',
    result               jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    completed_at         timestamptz,
    FOREIGN KEY (tenant_id, steering_instance_id) REFERENCES agent_instances (tenant_id, id),
    CHECK ((status IN ('completed', 'failed')) = (completed_at IS NOT NULL))
);
CREATE INDEX coding_tasks_tenant_created ON coding_tasks (tenant_id, created_at DESC);

ALTER TABLE coding_tasks ENABLE ROW LEVEL SECURITY;
ALTER TABLE coding_tasks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON coding_tasks
    USING (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid);

GRANT SELECT, INSERT, UPDATE, DELETE ON coding_tasks TO genesis_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON coding_tasks TO genesis_system;
