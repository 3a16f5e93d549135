-- LLM presets, call-site bindings, call snapshots and attempts, and the
-- global pricing table (spec §3.5, §3.7; DESIGN §3, §7).
--
-- Presets name credentials, never hold secrets: `credentials` is a JSON array
-- of credential names in priority order. Cost is never written by an agent
-- pod: the supervisor computes it from provider-reported usage and
-- llm_pricing (DESIGN invariant 12).

CREATE TABLE llm_presets (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid NOT NULL REFERENCES tenants (id),
    name        text NOT NULL CHECK (length(btrim(name)) > 0),
    model       text NOT NULL CHECK (length(btrim(model)) > 0),
    provider    text NOT NULL CHECK (length(btrim(provider)) > 0),
    backend     text NOT NULL DEFAULT '',
    credentials jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(credentials) = 'array'),
    -- [{model, provider, backend, credentials: [name, ...]}, ...] tried in order.
    fallback    jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(fallback) = 'array'),
    overlays    jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(overlays) = 'object'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, name)
);

CREATE TABLE llm_site_bindings (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    site_id    text NOT NULL CHECK (length(site_id) > 0),
    preset_id  uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, site_id),
    FOREIGN KEY (tenant_id, preset_id) REFERENCES llm_presets (tenant_id, id)
);

-- One provenance-recorded LLM call (AgentPlanning), keyed by invocation id.
CREATE TABLE llm_call_snapshots (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id       uuid NOT NULL REFERENCES tenants (id),
    instance_id     uuid NOT NULL,
    invocation_id   text NOT NULL CHECK (length(invocation_id) BETWEEN 1 AND 200),
    site_id         text NOT NULL,
    call_tag        text NOT NULL DEFAULT 'AgentPlanning' CHECK (call_tag = 'AgentPlanning'),
    requested_model text NOT NULL,
    served_model    text,
    input_tokens    bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens   bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cost_usd        double precision NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, instance_id, invocation_id),
    FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances (tenant_id, id)
);
CREATE INDEX llm_call_snapshots_instance ON llm_call_snapshots (instance_id, created_at);

CREATE TABLE llm_call_attempts (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id       uuid NOT NULL REFERENCES tenants (id),
    snapshot_id     uuid NOT NULL,
    ordinal         integer NOT NULL CHECK (ordinal >= 0),
    provider        text NOT NULL,
    credential_name text NOT NULL DEFAULT '',
    requested_model text NOT NULL,
    served_model    text NOT NULL DEFAULT '',
    outcome         text NOT NULL CHECK (outcome IN ('success', 'rate_limited', 'unauthorized',
                        'server_error', 'timeout', 'error')),
    -- {input_tokens, output_tokens, cache_read_tokens} as the provider reported them.
    usage           jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(usage) = 'object'),
    latency_ms      bigint NOT NULL DEFAULT 0 CHECK (latency_ms >= 0),
    cost_usd        double precision NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    error_message   text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (snapshot_id, ordinal),
    FOREIGN KEY (tenant_id, snapshot_id) REFERENCES llm_call_snapshots (tenant_id, id)
);

-- Global: dollars per million tokens. Readable by every tenant, written only
-- by the platform (genesis_system).
CREATE TABLE llm_pricing (
    model                   text PRIMARY KEY CHECK (length(btrim(model)) > 0),
    input_usd_per_mtok      double precision NOT NULL CHECK (input_usd_per_mtok >= 0),
    output_usd_per_mtok     double precision NOT NULL CHECK (output_usd_per_mtok >= 0),
    cache_read_usd_per_mtok double precision NOT NULL DEFAULT 0 CHECK (cache_read_usd_per_mtok >= 0),
    updated_at              timestamptz NOT NULL DEFAULT now()
);

-- Public list prices of the models the default presets name. scripted-1 (the
-- offline provider) is priced like a mid-size model so the demo shows a
-- realistic cost.
INSERT INTO llm_pricing (model, input_usd_per_mtok, output_usd_per_mtok, cache_read_usd_per_mtok) VALUES
    ('claude-opus-4-8',   15.0, 75.0, 1.50),
    ('claude-sonnet-4-5',  3.0, 15.0, 0.30),
    ('claude-haiku-4-5',   1.0,  5.0, 0.10),
    ('gpt-4o',             2.5, 10.0, 1.25),
    ('gpt-4o-mini',        0.15, 0.60, 0.075),
    ('scripted-1',         3.0, 15.0, 0.30);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['llm_presets', 'llm_site_bindings', 'llm_call_snapshots', 'llm_call_attempts']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
            WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)$p$, t);
    END LOOP;
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON llm_presets, llm_site_bindings TO genesis_app;
GRANT SELECT, INSERT, UPDATE ON llm_call_snapshots TO genesis_app;
GRANT SELECT, INSERT ON llm_call_attempts TO genesis_app;
GRANT SELECT ON llm_pricing TO genesis_app;

GRANT SELECT, INSERT, UPDATE, DELETE ON llm_presets, llm_site_bindings, llm_pricing TO genesis_system;
GRANT SELECT, INSERT, UPDATE ON llm_call_snapshots TO genesis_system;
GRANT SELECT, INSERT ON llm_call_attempts TO genesis_system;
