-- Foundation schema: tenants, config, standing-agent tables, decision queue,
-- missions, API tokens; the two service roles and row-level security on every
-- tenant table. Forward-only: never edit a migration that has shipped.

-- Roles. Cluster-wide, so several databases migrating at once (parallel test
-- databases) may race on CREATE ROLE: the loser's duplicate is swallowed.
DO $$
BEGIN
    BEGIN
        CREATE ROLE genesis_app NOLOGIN NOBYPASSRLS;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    BEGIN
        CREATE ROLE genesis_system NOLOGIN BYPASSRLS;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    -- The login user must be able to SET ROLE to both; superusers already can.
    BEGIN
        IF NOT pg_has_role(current_user, 'genesis_app', 'MEMBER') THEN
            EXECUTE format('GRANT genesis_app TO %I', current_user);
        END IF;
        IF NOT pg_has_role(current_user, 'genesis_system', 'MEMBER') THEN
            EXECUTE format('GRANT genesis_system TO %I', current_user);
        END IF;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
END
$$;

CREATE TABLE tenants (
    id                      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name                    text NOT NULL UNIQUE CHECK (length(btrim(name)) > 0),
    standing_agents_enabled boolean NOT NULL DEFAULT false,
    feature_flags           jsonb NOT NULL DEFAULT '{"prompt-redactor": false, "windows-pool": false}'::jsonb
                            CHECK (jsonb_typeof(feature_flags) = 'object'),
    status                  text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    created_at              timestamptz NOT NULL DEFAULT now()
);

-- DB-first configuration (spec §3.6): tenant_id NULL is the global layer.
CREATE TABLE system_configs (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id  uuid REFERENCES tenants (id),
    key        text NOT NULL CHECK (length(key) > 0),
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX system_configs_scope_key
    ON system_configs (coalesce(tenant_id, '00000000-0000-0000-0000-000000000000'::uuid), key);

CREATE TABLE agent_instances (
    id                           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id                    uuid NOT NULL REFERENCES tenants (id),
    agent_type                   text NOT NULL CHECK (agent_type IN ('Soa', 'Compliance', 'PromptRedactor',
                                     'MissionDevelopment', 'MissionResearch', 'MissionOperations')),
    status                       text NOT NULL CHECK (status IN ('active', 'paused', 'closed')),
    active_mode                  text,
    phase                        text NOT NULL DEFAULT 'idle',
    next_tick_at                 timestamptz,
    consecutive_idle_ticks       integer NOT NULL DEFAULT 0,
    consecutive_blocked_turns    integer NOT NULL DEFAULT 0,
    idle_ticks_since_replan      integer NOT NULL DEFAULT 0,
    plan_input_hash              text,
    last_decision_kind           text,
    is_building_starting_workset boolean NOT NULL DEFAULT false,
    workset_deadline_utc         timestamptz,
    lease_session                uuid,
    lease_expires_at             timestamptz,
    call_site_id                 text,
    -- Last sequence number handed to this instance's events: incremented under
    -- the row lock, so concurrent enqueues get distinct, increasing numbers.
    event_sequence               bigint NOT NULL DEFAULT 0,
    created_at                   timestamptz NOT NULL DEFAULT now(),
    updated_at                   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, id)
);
CREATE INDEX agent_instances_tenant ON agent_instances (tenant_id, status);

CREATE TABLE attention_requests (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id        uuid NOT NULL REFERENCES tenants (id),
    instance_id      uuid,
    kind             text NOT NULL CHECK (kind IN ('decision', 'mode_change', 'stuck_halt', 'dead_letter',
                         'mission_question', 'redaction')),
    status           text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
    title            text NOT NULL,
    body             text NOT NULL DEFAULT '',
    options          jsonb NOT NULL DEFAULT '[]'::jsonb,
    metadata         jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    resolution       text,
    resolution_notes text,
    resolved_by      text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    resolved_at      timestamptz,
    FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances (tenant_id, id),
    CHECK ((status = 'resolved') = (resolved_at IS NOT NULL))
);
CREATE INDEX attention_requests_open ON attention_requests (tenant_id, status, created_at);
CREATE INDEX attention_requests_soa_instance ON attention_requests ((metadata->>'soaInstanceId'));

CREATE TABLE agent_event_queue (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id            uuid NOT NULL REFERENCES tenants (id),
    instance_id          uuid NOT NULL,
    sequence_number      bigint NOT NULL,
    event_kind           text NOT NULL CHECK (event_kind IN ('AgentInitialized', 'AgentTick', 'OperatorMessage',
                             'OperatorAnsweredEscalation', 'MissionStateChanged', 'DecisionResolved',
                             'DependencyCompleted', 'ExternalSignalReceived')),
    payload              jsonb NOT NULL DEFAULT '{}'::jsonb,
    visible_at           timestamptz NOT NULL DEFAULT now(),
    published_at         timestamptz,
    claimed_session      uuid,
    attempts             integer NOT NULL DEFAULT 0,
    consumed_at          timestamptz,
    dead_lettered_at     timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    attention_request_id uuid REFERENCES attention_requests (id),
    FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances (tenant_id, id),
    UNIQUE (instance_id, sequence_number),
    CHECK ((event_kind = 'OperatorAnsweredEscalation') = (attention_request_id IS NOT NULL))
);
-- At most one pending heartbeat per instance (DESIGN §5.2). A dead-lettered
-- heartbeat is no longer pending, so it does not block its successor.
CREATE UNIQUE INDEX agent_event_queue_one_pending_heartbeat
    ON agent_event_queue (instance_id)
    WHERE event_kind = 'AgentTick' AND consumed_at IS NULL AND dead_lettered_at IS NULL;
-- Resuming an escalation is idempotent (DESIGN §5.6).
CREATE UNIQUE INDEX agent_event_queue_resume_dedup
    ON agent_event_queue (attention_request_id)
    WHERE event_kind = 'OperatorAnsweredEscalation';
CREATE INDEX agent_event_queue_due
    ON agent_event_queue (instance_id, visible_at, sequence_number)
    WHERE consumed_at IS NULL AND dead_lettered_at IS NULL;
CREATE INDEX agent_event_queue_outbox
    ON agent_event_queue (visible_at)
    WHERE published_at IS NULL AND consumed_at IS NULL AND dead_lettered_at IS NULL;

CREATE TABLE agent_state_ledger (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id            uuid NOT NULL REFERENCES tenants (id),
    instance_id          uuid NOT NULL,
    turn_number          bigint NOT NULL,
    event_id             uuid UNIQUE REFERENCES agent_event_queue (id),
    event_kind           text NOT NULL,
    event_payload        jsonb NOT NULL DEFAULT '{}'::jsonb,
    decision_kind        text NOT NULL,
    phase                text NOT NULL,
    decision_payload     jsonb NOT NULL DEFAULT '{}'::jsonb,
    wait_condition       text,
    reasoning_summary    text,
    plan_input_hash      text,
    llm_call_snapshot_id uuid,
    served_model         text,
    cost_usd             numeric(14, 6),
    input_tokens         bigint,
    output_tokens        bigint,
    created_at           timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances (tenant_id, id),
    UNIQUE (instance_id, turn_number),
    UNIQUE (tenant_id, id)
);
CREATE INDEX agent_state_ledger_search ON agent_state_ledger
    USING gin (to_tsvector('simple', coalesce(reasoning_summary, '') || ' ' || coalesce(wait_condition, '')));

CREATE TABLE agent_state_ledger_actions (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id     uuid NOT NULL REFERENCES tenants (id),
    ledger_id     uuid NOT NULL,
    ordinal       integer NOT NULL CHECK (ordinal >= 0),
    tool_name     text NOT NULL CHECK (length(tool_name) > 0),
    arguments     jsonb NOT NULL DEFAULT '{}'::jsonb,
    result        jsonb,
    side_effecting boolean NOT NULL DEFAULT false,
    blocked       boolean NOT NULL DEFAULT false,
    FOREIGN KEY (tenant_id, ledger_id) REFERENCES agent_state_ledger (tenant_id, id),
    UNIQUE (ledger_id, ordinal)
);

-- The per-type mode catalogue is platform-wide, not tenant data: one row per
-- (agent_type, name), seeded below, identical for every tenant. It carries no
-- tenant_id and so is not a tenant table (RLS does not apply); both service
-- roles may only read it. A NULL toolset means "the in-code seed toolset of
-- genesis-core's mode catalogue".
CREATE TABLE agent_modes (
    agent_type      text NOT NULL,
    name            text NOT NULL,
    description     text NOT NULL DEFAULT '',
    prompt_fragment text NOT NULL DEFAULT '',
    toolset         jsonb,
    preset_id       text,
    budget_override jsonb,
    system_seed     boolean NOT NULL DEFAULT true,
    is_default      boolean NOT NULL DEFAULT false,
    PRIMARY KEY (agent_type, name)
);
CREATE UNIQUE INDEX agent_modes_one_default ON agent_modes (agent_type) WHERE is_default;

INSERT INTO agent_modes (agent_type, name, description, is_default) VALUES
    ('Soa', 'Strategic', 'Default SOA focus: steer missions toward tenant goals.', true),
    ('Soa', 'Incident', 'Operational incident: triage, ground in telemetry, escalate.', false),
    ('Soa', 'Dialogue', 'Conversation with the operator.', false),
    ('Soa', 'Housekeeping', 'Tidy open items, close stale work.', false),
    ('Soa', 'Idle', 'Quiet: observe only.', false),
    ('Soa', 'Discovery', 'Survey the tenant and its knowledge.', false),
    ('Compliance', 'Cadence', 'Default compliance cadence review.', true),
    ('Compliance', 'GateReview', 'Review a gate before it passes.', false),
    ('Compliance', 'Research', 'Whole-chapter dossier authoring.', false),
    ('PromptRedactor', 'Redact', 'Rework a call-site prompt.', true);

CREATE TABLE agent_mode_change_events (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id            uuid NOT NULL REFERENCES tenants (id),
    instance_id          uuid NOT NULL,
    from_mode            text,
    to_mode              text NOT NULL,
    source               text NOT NULL CHECK (source IN ('ui', 'approval')),
    actor                text NOT NULL,
    attention_request_id uuid REFERENCES attention_requests (id),
    created_at           timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances (tenant_id, id)
);
CREATE INDEX agent_mode_change_events_instance ON agent_mode_change_events (instance_id, created_at);

CREATE TABLE agent_messages (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid NOT NULL REFERENCES tenants (id),
    instance_id uuid NOT NULL,
    direction   text NOT NULL CHECK (direction IN ('operator_to_agent', 'agent_to_operator')),
    body        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances (tenant_id, id)
);
CREATE INDEX agent_messages_instance ON agent_messages (instance_id, created_at);

CREATE TABLE missions (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id            uuid NOT NULL REFERENCES tenants (id),
    steering_instance_id uuid,
    kind                 text NOT NULL,
    title                text NOT NULL,
    description          text NOT NULL DEFAULT '',
    status               text NOT NULL DEFAULT 'proposed'
                         CHECK (status IN ('proposed', 'active', 'blocked', 'completed', 'cancelled')),
    metadata             jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, steering_instance_id) REFERENCES agent_instances (tenant_id, id)
);
CREATE INDEX missions_soa_instance ON missions ((metadata->>'soaInstanceId'));

-- Tokens: SHA-256 hex only. tenant_id NULL = platform-wide operator token.
CREATE TABLE api_tokens (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id    uuid REFERENCES tenants (id),
    scope        text NOT NULL CHECK (scope IN ('operator', 'agent-pod')),
    token_sha256 text NOT NULL UNIQUE CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
    label        text NOT NULL DEFAULT '',
    expires_at   timestamptz,
    revoked_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- Row-level security: every table with a tenant_id column. A tenant-scoped
-- transaction sets genesis.tenant_id (transaction-local); without it nothing
-- is visible to genesis_app.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['agent_instances', 'attention_requests', 'agent_event_queue',
        'agent_state_ledger', 'agent_state_ledger_actions', 'agent_mode_change_events',
        'agent_messages', 'missions', 'api_tokens']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
            WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)$p$, t);
    END LOOP;
END
$$;

-- Global config rows (tenant_id NULL) are readable by every tenant; a tenant
-- writes only its own layer.
ALTER TABLE system_configs ENABLE ROW LEVEL SECURITY;
ALTER TABLE system_configs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON system_configs
    USING (tenant_id IS NULL OR tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid);

-- A tenant-scoped transaction sees its own tenant row only.
ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenants
    USING (id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
    WITH CHECK (id = nullif(current_setting('genesis.tenant_id', true), '')::uuid);

-- Privileges. Neither role owns a table. The ledger is append-only for both:
-- SELECT and INSERT only; the one documented clear (Reset) is the SECURITY
-- DEFINER function genesis_reset_instance in the next migration.
GRANT SELECT ON tenants, agent_modes TO genesis_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON system_configs, agent_instances, attention_requests,
    agent_event_queue, agent_mode_change_events, agent_messages, missions TO genesis_app;
GRANT SELECT ON api_tokens TO genesis_app;
GRANT SELECT, INSERT ON agent_state_ledger, agent_state_ledger_actions TO genesis_app;

GRANT SELECT ON agent_modes TO genesis_system;
GRANT SELECT, INSERT, UPDATE, DELETE ON tenants, system_configs, agent_instances, attention_requests,
    agent_event_queue, agent_mode_change_events, agent_messages, missions, api_tokens TO genesis_system;
GRANT SELECT, INSERT ON agent_state_ledger, agent_state_ledger_actions TO genesis_system;
