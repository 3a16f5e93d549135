-- The weekly agent-planning credit window (spec §3.4 step 9; DESIGN
-- invariant 11) and the governed tool-call record whose (session, call_id)
-- is the idempotency key of InvokeTool (DESIGN §4).

CREATE TABLE credit_windows (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    -- Monday 00:00 UTC of the window's ISO week.
    week_start timestamptz NOT NULL,
    limit_usd  double precision NOT NULL CHECK (limit_usd >= 0),
    spent_usd  double precision NOT NULL DEFAULT 0 CHECK (spent_usd >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, week_start)
);

CREATE TABLE tool_invocations (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid NOT NULL REFERENCES tenants (id),
    instance_id uuid NOT NULL,
    session     uuid NOT NULL,
    call_id     text NOT NULL CHECK (length(call_id) BETWEEN 1 AND 200),
    tool_name   text NOT NULL CHECK (length(tool_name) BETWEEN 1 AND 200),
    arguments   jsonb NOT NULL,
    result      jsonb NOT NULL,
    blocked     boolean NOT NULL DEFAULT false,
    side_effecting boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (session, call_id),
    FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances (tenant_id, id)
);
CREATE INDEX tool_invocations_instance ON tool_invocations (instance_id, created_at);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['credit_windows', 'tool_invocations']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
            WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)$p$, t);
    END LOOP;
END
$$;

GRANT SELECT, INSERT, UPDATE ON credit_windows TO genesis_app;
GRANT SELECT, INSERT ON tool_invocations TO genesis_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON credit_windows TO genesis_system;
GRANT SELECT, INSERT ON tool_invocations TO genesis_system;
