-- Dashboard sign-in sessions (the operator web UI served by control). An
-- operator token is exchanged once for a random session secret that lives in
-- an HttpOnly, SameSite=Strict cookie; only its SHA-256 is stored. A session
-- is usable while it is neither expired nor signed out AND the operator token
-- it came from is still usable: revoking the token ends its sessions at once.
-- tenant_id is the one tenant the session shows (the token's own, or the one a
-- platform-wide token chose at sign-in). csrf_token is the synchronizer token
-- every form of the session carries.
CREATE TABLE dashboard_sessions (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id      uuid NOT NULL REFERENCES tenants (id),
    token_id       uuid NOT NULL REFERENCES api_tokens (id),
    session_sha256 text NOT NULL UNIQUE CHECK (session_sha256 ~ '^[0-9a-f]{64}$'),
    csrf_token     text NOT NULL CHECK (length(csrf_token) BETWEEN 32 AND 128),
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    revoked_at     timestamptz,
    CHECK (expires_at > created_at)
);
CREATE INDEX dashboard_sessions_token ON dashboard_sessions (token_id);

-- Sessions are found by their hash before the tenant is known, so lookups run
-- on the system role; the policy still confines the application role.
ALTER TABLE dashboard_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE dashboard_sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON dashboard_sessions
    USING (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid);

GRANT SELECT, INSERT, UPDATE, DELETE ON dashboard_sessions TO genesis_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON dashboard_sessions TO genesis_system;
