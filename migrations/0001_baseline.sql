-- The Genesis schema as one baseline: roles, domains, tables with their
-- constraints, indexes, row-level security, policies and grants, the
-- server-side functions (each in its own file under services/store/sql/,
-- so the file is always the definition a reader finds), triggers, foreign
-- keys and the seed catalogue.
--
-- Forward-only from here: a schema change is a new migration; a change to a
-- server-side function edits its file under services/store/sql/ and adds a
-- migration that includes that file again
-- (`\ir ../services/store/sql/<name>.sql`), so databases
-- already past this baseline receive the new body. The function-file test
-- in genesis-store compares every function of a migrated database with its
-- file.
--
-- Tenant tables force row-level security: the services connect as a login
-- that is a member of genesis_app (the tenant path, scoped by
-- genesis.tenant_id) and genesis_system (the platform loops, which reach only
-- what the system_* policies name); neither bypasses RLS and neither owns a
-- table.

-- Roles. Cluster-wide, so several databases migrating at once (parallel test
-- databases) may race on CREATE ROLE: the loser's duplicate is swallowed.
DO $$
BEGIN
    BEGIN
        CREATE ROLE genesis_app NOLOGIN NOBYPASSRLS;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    BEGIN
        CREATE ROLE genesis_system NOLOGIN NOBYPASSRLS;
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

-- The role attribute is cluster-wide: every database on the server shares
-- genesis_system, and several may migrate at once (parallel test databases).
-- Only a role that still bypasses is altered, so a second run is a no-op; two
-- concurrent ALTERs of the same role may fail one with "tuple concurrently
-- updated" (internal_error), which is harmless when the other one has
-- already made the change, and re-raised otherwise.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'genesis_system' AND rolbypassrls) THEN
        BEGIN
            ALTER ROLE genesis_system NOBYPASSRLS;
        EXCEPTION WHEN internal_error OR unique_violation THEN
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'genesis_system' AND rolbypassrls) THEN
                RAISE;
            END IF;
        END;
    END IF;
END
$$;

-- Closed vocabularies as domains, so a bad enum value is refused by the
-- database as well as by the domain types in genesis-core.
CREATE DOMAIN agent_event_kind AS text
    CONSTRAINT agent_event_kind_check CHECK ((VALUE = ANY (ARRAY['AgentInitialized'::text, 'AgentTick'::text, 'OperatorMessage'::text, 'OperatorAnsweredEscalation'::text, 'MissionStateChanged'::text, 'DecisionResolved'::text, 'DependencyCompleted'::text, 'ExternalSignalReceived'::text])));

CREATE DOMAIN agent_instance_status AS text
    CONSTRAINT agent_instance_status_check CHECK ((VALUE = ANY (ARRAY['active'::text, 'paused'::text, 'closed'::text])));

CREATE DOMAIN agent_instance_type AS text
    CONSTRAINT agent_instance_type_check CHECK ((VALUE = ANY (ARRAY['Soa'::text, 'Compliance'::text, 'PromptRedactor'::text, 'MissionDevelopment'::text, 'MissionResearch'::text, 'MissionOperations'::text])));

CREATE DOMAIN json_object AS jsonb
    CONSTRAINT json_object_check CHECK ((jsonb_typeof(VALUE) = 'object'::text));

CREATE DOMAIN llm_call_outcome AS text
    CONSTRAINT llm_call_outcome_check CHECK ((VALUE = ANY (ARRAY['success'::text, 'rate_limited'::text, 'unauthorized'::text, 'server_error'::text, 'timeout'::text, 'error'::text])));

CREATE DOMAIN llm_call_tag AS text
    CONSTRAINT llm_call_tag_check CHECK ((VALUE = 'AgentPlanning'::text));

CREATE DOMAIN llm_invocation_id AS text
    CONSTRAINT llm_invocation_id_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 200)));

CREATE DOMAIN llm_pricing_source AS text
    CONSTRAINT llm_pricing_source_check CHECK ((VALUE = ANY (ARRAY['exact'::text, 'prefix'::text, 'fallback'::text, 'free'::text])));

CREATE DOMAIN nonnegative_bigint AS bigint
    CONSTRAINT nonnegative_bigint_check CHECK ((VALUE >= 0));

CREATE DOMAIN nonnegative_integer AS integer
    CONSTRAINT nonnegative_integer_check CHECK ((VALUE >= 0));

CREATE DOMAIN sha256_hex AS text
    CONSTRAINT sha256_hex_check CHECK ((VALUE ~ '^[0-9a-f]{64}$'::text));

CREATE DOMAIN usd_amount AS double precision
    CONSTRAINT usd_amount_check CHECK ((VALUE >= (0)::double precision));

CREATE SEQUENCE windows_hold_revisions
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- --------------------------------------------------------------------------
-- A tenant: the unit of isolation. Every tenant table below carries
-- tenant_id and is guarded by row-level security; standing_agents_enabled is
-- the switch the bootstrap census reads, feature_flags the per-tenant features
-- (prompt-redactor, windows-pool).
CREATE TABLE tenants (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    standing_agents_enabled boolean DEFAULT false NOT NULL,
    feature_flags jsonb DEFAULT '{"windows-pool": false, "prompt-redactor": false}'::jsonb NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenants_feature_flags_check CHECK ((jsonb_typeof(feature_flags) = 'object'::text)),
    CONSTRAINT tenants_name_check CHECK ((length(btrim(name)) > 0)),
    CONSTRAINT tenants_status_check CHECK ((status = ANY (ARRAY['active'::text, 'suspended'::text])))
);

ALTER TABLE ONLY tenants FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY tenants
    ADD CONSTRAINT tenants_name_key UNIQUE (name);
ALTER TABLE ONLY tenants
    ADD CONSTRAINT tenants_pkey PRIMARY KEY (id);
ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
CREATE POLICY system_insert ON tenants FOR INSERT TO genesis_system WITH CHECK (true);
CREATE POLICY system_read ON tenants FOR SELECT TO genesis_system USING (true);
CREATE POLICY system_update ON tenants FOR UPDATE TO genesis_system USING (true) WITH CHECK (true);
CREATE POLICY tenant_isolation ON tenants USING ((id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT ON TABLE tenants TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE tenants TO genesis_system;

-- --------------------------------------------------------------------------
-- DB-first configuration (spec §3.6): tenant_id NULL is the global layer,
-- a tenant's rows override it key by key. The system path may touch only the
-- global layer.
CREATE TABLE system_configs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid,
    key text NOT NULL,
    value text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    -- Platform-only ceilings: the configuration keys that bound a tenant's
    -- spend or load (genesis-core's ceilings::CEILINGS) are the platform's.
    -- A tenant operator may only move them the safe way (lower a ceiling, raise
    -- a floor, turn a guard on), checked against the platform's value for the
    -- tenant; and every reader keeps the tenant within that value, so a tenant
    -- row written before the platform lowered its own can never raise anything.
    --
    -- The platform's value for a tenant is the platform's row for that tenant,
    -- else the global row, else the code default. A tenant row so far held one
    -- value, written by whichever token came last. It now also holds the
    -- platform's: platform_value is set by a platform token's write at tenant
    -- scope (value and platform_value both take the written value, clearing the
    -- tenant's own choice), and left alone by a tenant operator's write (value
    -- only). Rows written before this release have no platform value: the
    -- global row or the default bounds them, so a platform that raised a tenant
    -- through a tenant row writes it again.
    platform_value text,
    CONSTRAINT system_configs_key_check CHECK ((length(key) > 0)),
    CONSTRAINT system_configs_platform_value_tenant_only CHECK (((tenant_id IS NOT NULL) OR (platform_value IS NULL)))
);

ALTER TABLE ONLY system_configs FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY system_configs
    ADD CONSTRAINT system_configs_pkey PRIMARY KEY (id);
CREATE UNIQUE INDEX system_configs_scope_key ON system_configs USING btree (COALESCE(tenant_id, '00000000-0000-0000-0000-000000000000'::uuid), key);
ALTER TABLE system_configs ENABLE ROW LEVEL SECURITY;
CREATE POLICY system_global_layer ON system_configs TO genesis_system USING ((tenant_id IS NULL)) WITH CHECK ((tenant_id IS NULL));
CREATE POLICY tenant_isolation ON system_configs USING (((tenant_id IS NULL) OR (tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid))) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE system_configs TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE system_configs TO genesis_system;

-- --------------------------------------------------------------------------
-- Bearer tokens, stored as SHA-256 hex only. tenant_id NULL is a
-- platform-wide operator token; pod tokens list the tenants they may serve
-- (pod_tenants, kept by a trigger). A NOTIFY on change lets every replica drop
-- its cached lookups at once.
CREATE TABLE api_tokens (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid,
    scope text NOT NULL,
    token_sha256 text NOT NULL,
    label text DEFAULT ''::text NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    pod_tenants uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    CONSTRAINT api_tokens_pod_tenants_agent_pod_only CHECK (((scope = 'agent-pod'::text) OR (cardinality(pod_tenants) = 0))),
    CONSTRAINT api_tokens_pod_tenants_bounded CHECK (((cardinality(pod_tenants) <= 256) AND (array_position(pod_tenants, NULL::uuid) IS NULL))),
    CONSTRAINT api_tokens_scope_check CHECK ((scope = ANY (ARRAY['operator'::text, 'agent-pod'::text]))),
    CONSTRAINT api_tokens_token_sha256_check CHECK ((token_sha256 ~ '^[0-9a-f]{64}$'::text))
);

ALTER TABLE ONLY api_tokens FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);
ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_token_sha256_key UNIQUE (token_sha256);
ALTER TABLE api_tokens ENABLE ROW LEVEL SECURITY;
CREATE POLICY system_insert ON api_tokens FOR INSERT TO genesis_system WITH CHECK (true);
CREATE POLICY system_read ON api_tokens FOR SELECT TO genesis_system USING (true);
CREATE POLICY system_update ON api_tokens FOR UPDATE TO genesis_system USING (true) WITH CHECK (true);
CREATE POLICY tenant_isolation ON api_tokens USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT ON TABLE api_tokens TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE api_tokens TO genesis_system;

-- --------------------------------------------------------------------------
-- Dashboard sign-in sessions (the operator web UI served by control). An
-- operator token is exchanged once for a random session secret that lives in
-- an HttpOnly, SameSite=Strict cookie; only its SHA-256 is stored. A session
-- is usable while it is neither expired nor signed out AND the operator token
-- it came from is still usable: revoking the token ends its sessions at once.
-- tenant_id is the one tenant the session shows (the token's own, or the one a
-- platform-wide token chose at sign-in). csrf_token is the synchronizer token
-- every form of the session carries.
CREATE TABLE dashboard_sessions (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    token_id uuid NOT NULL,
    session_sha256 text NOT NULL,
    csrf_token text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT dashboard_sessions_check CHECK ((expires_at > created_at)),
    CONSTRAINT dashboard_sessions_csrf_token_check CHECK (((length(csrf_token) >= 32) AND (length(csrf_token) <= 128))),
    CONSTRAINT dashboard_sessions_session_sha256_check CHECK ((session_sha256 ~ '^[0-9a-f]{64}$'::text))
);

ALTER TABLE ONLY dashboard_sessions FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY dashboard_sessions
    ADD CONSTRAINT dashboard_sessions_pkey PRIMARY KEY (id);
ALTER TABLE ONLY dashboard_sessions
    ADD CONSTRAINT dashboard_sessions_session_sha256_key UNIQUE (session_sha256);
CREATE INDEX dashboard_sessions_token ON dashboard_sessions USING btree (token_id);
ALTER TABLE dashboard_sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY system_insert ON dashboard_sessions FOR INSERT TO genesis_system WITH CHECK (true);
CREATE POLICY system_read ON dashboard_sessions FOR SELECT TO genesis_system USING (true);
CREATE POLICY system_update ON dashboard_sessions FOR UPDATE TO genesis_system USING (true) WITH CHECK (true);
CREATE POLICY tenant_isolation ON dashboard_sessions USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE dashboard_sessions TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE dashboard_sessions TO genesis_system;

-- --------------------------------------------------------------------------
-- A standing agent (spec §3.1): the durable row a tick claims. The lease
-- (lease_session, lease_expires_at) makes exactly one session its writer;
-- phase, next_tick_at and the counters change only in the completion write
-- made under that lease.
CREATE TABLE agent_instances (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    agent_type agent_instance_type NOT NULL,
    status agent_instance_status NOT NULL,
    active_mode text,
    phase text DEFAULT 'idle'::text NOT NULL,
    next_tick_at timestamp with time zone,
    consecutive_idle_ticks integer DEFAULT 0 NOT NULL,
    consecutive_blocked_turns integer DEFAULT 0 NOT NULL,
    idle_ticks_since_replan integer DEFAULT 0 NOT NULL,
    plan_input_hash text,
    last_decision_kind text,
    is_building_starting_workset boolean DEFAULT false NOT NULL,
    workset_deadline_utc timestamp with time zone,
    lease_session uuid,
    lease_expires_at timestamp with time zone,
    call_site_id text,
    -- Last sequence number handed to this instance's events: incremented under
    -- the row lock, so concurrent enqueues get distinct, increasing numbers.
    event_sequence bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    -- A domain, not a table CHECK: a tick updates this row several times, and
    -- each update would re-check every table CHECK of it.
    consecutive_provider_failures nonnegative_integer DEFAULT 0 NOT NULL,
    -- A domain, not a table CHECK: a tick updates this row several times.
    consecutive_exhausted_turns nonnegative_integer DEFAULT 0 NOT NULL
);

ALTER TABLE ONLY agent_instances FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY agent_instances
    ADD CONSTRAINT agent_instances_pkey PRIMARY KEY (id);
ALTER TABLE ONLY agent_instances
    ADD CONSTRAINT agent_instances_tenant_id_id_key UNIQUE (tenant_id, id);
CREATE INDEX agent_instances_soa ON agent_instances USING btree (tenant_id, created_at, id) WHERE ((agent_type)::text = 'Soa'::text);
CREATE INDEX agent_instances_tenant ON agent_instances USING btree (tenant_id, status);
ALTER TABLE agent_instances ENABLE ROW LEVEL SECURITY;
CREATE POLICY system_census ON agent_instances FOR SELECT TO genesis_system USING (true);
CREATE POLICY tenant_isolation ON agent_instances USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE agent_instances TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE agent_instances TO genesis_system;

-- --------------------------------------------------------------------------
-- The per-instance event queue and outbox (spec §3.2). An event is
-- published to NATS once (published_at, publish_epoch), claimed by one session
-- (claimed_session, attempts), then consumed by exactly one completion or
-- dead-lettered after the attempt limit. At most one pending heartbeat
-- (AgentTick) per instance.
CREATE TABLE agent_event_queue (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    instance_id uuid NOT NULL,
    sequence_number bigint NOT NULL,
    event_kind agent_event_kind NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    visible_at timestamp with time zone DEFAULT now() NOT NULL,
    published_at timestamp with time zone,
    claimed_session uuid,
    attempts integer DEFAULT 0 NOT NULL,
    consumed_at timestamp with time zone,
    dead_lettered_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    attention_request_id uuid,
    -- Re-arming events a paused instance left behind (DESIGN §4, spec §3.9).
    --
    -- An event published while its instance is paused is claimed as
    -- `not_active` and its message acknowledged, so the row keeps
    -- `published_at` and no message for it remains on the stream. When the
    -- instance becomes active again (StartAgent, StartCompliance, the
    -- prompt-redactor feature turned on), `Instances::set_status` clears
    -- `published_at` on every such unconsumed event and bumps its
    -- `publish_epoch`, so the outbox publishes it again. The epoch is part of
    -- the message id (`<event id>` at epoch 0, `<event id>.<epoch>` after), so
    -- JetStream's duplicate window cannot drop the re-publish as a copy of the
    -- first one, while a publish whose mark was lost (same epoch) still is.
    publish_epoch nonnegative_integer DEFAULT 0 NOT NULL,
    CONSTRAINT agent_event_queue_check CHECK ((((event_kind)::text = 'OperatorAnsweredEscalation'::text) = (attention_request_id IS NOT NULL)))
);

ALTER TABLE ONLY agent_event_queue FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY agent_event_queue
    ADD CONSTRAINT agent_event_queue_instance_id_sequence_number_key UNIQUE (instance_id, sequence_number);
ALTER TABLE ONLY agent_event_queue
    ADD CONSTRAINT agent_event_queue_pkey PRIMARY KEY (id);
CREATE INDEX agent_event_queue_due ON agent_event_queue USING btree (instance_id, visible_at, sequence_number) WHERE ((consumed_at IS NULL) AND (dead_lettered_at IS NULL));
CREATE UNIQUE INDEX agent_event_queue_one_pending_heartbeat ON agent_event_queue USING btree (instance_id) WHERE (((event_kind)::text = 'AgentTick'::text) AND (consumed_at IS NULL) AND (dead_lettered_at IS NULL));
CREATE INDEX agent_event_queue_outbox ON agent_event_queue USING btree (visible_at) WHERE ((published_at IS NULL) AND (consumed_at IS NULL) AND (dead_lettered_at IS NULL));
CREATE UNIQUE INDEX agent_event_queue_resume_dedup ON agent_event_queue USING btree (attention_request_id) WHERE ((event_kind)::text = 'OperatorAnsweredEscalation'::text);
ALTER TABLE agent_event_queue ENABLE ROW LEVEL SECURITY;
CREATE POLICY system_outbox_mark ON agent_event_queue FOR UPDATE TO genesis_system USING (true) WITH CHECK (true);
CREATE POLICY system_outbox_read ON agent_event_queue FOR SELECT TO genesis_system USING (true);
CREATE POLICY tenant_isolation ON agent_event_queue USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE agent_event_queue TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE agent_event_queue TO genesis_system;

-- --------------------------------------------------------------------------
-- Escalations to a human (spec §3.8): decisions to approve, and the STUCK
-- request raised after repeated blocked turns. Answering one enqueues
-- OperatorAnsweredEscalation for its instance, once.
CREATE TABLE attention_requests (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    instance_id uuid,
    kind text NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    title text NOT NULL,
    body text DEFAULT ''::text NOT NULL,
    options jsonb DEFAULT '[]'::jsonb NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    resolution text,
    resolution_notes text,
    resolved_by text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    resolved_at timestamp with time zone,
    CONSTRAINT attention_requests_check CHECK (((status = 'resolved'::text) = (resolved_at IS NOT NULL))),
    CONSTRAINT attention_requests_kind_check CHECK ((kind = ANY (ARRAY['decision'::text, 'mode_change'::text, 'stuck_halt'::text, 'dead_letter'::text, 'mission_question'::text, 'redaction'::text, 'provider_failure'::text]))),
    CONSTRAINT attention_requests_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    CONSTRAINT attention_requests_status_check CHECK ((status = ANY (ARRAY['open'::text, 'resolved'::text])))
);

ALTER TABLE ONLY attention_requests FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY attention_requests
    ADD CONSTRAINT attention_requests_pkey PRIMARY KEY (id);
CREATE INDEX attention_requests_open ON attention_requests USING btree (tenant_id, status, created_at);
CREATE INDEX attention_requests_soa_instance ON attention_requests USING btree (((metadata ->> 'soaInstanceId'::text)));
ALTER TABLE attention_requests ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON attention_requests USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE attention_requests TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE attention_requests TO genesis_system;

-- --------------------------------------------------------------------------
-- The append-only ledger: one row per completed turn, numbered per instance,
-- with its decision, reasoning summary and the context it was claimed with.
-- Neither service role may update or delete it.
CREATE TABLE agent_state_ledger (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    instance_id uuid NOT NULL,
    turn_number bigint NOT NULL,
    event_id uuid,
    event_kind text NOT NULL,
    event_payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    decision_kind text NOT NULL,
    phase text NOT NULL,
    decision_payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    wait_condition text,
    reasoning_summary text,
    plan_input_hash text,
    llm_call_snapshot_id uuid,
    served_model text,
    cost_usd numeric(14,6),
    input_tokens bigint,
    output_tokens bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY agent_state_ledger FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY agent_state_ledger
    ADD CONSTRAINT agent_state_ledger_event_id_key UNIQUE (event_id);
ALTER TABLE ONLY agent_state_ledger
    ADD CONSTRAINT agent_state_ledger_pkey PRIMARY KEY (id);
ALTER TABLE ONLY agent_state_ledger
    ADD CONSTRAINT agent_state_ledger_tenant_id_id_key UNIQUE (tenant_id, id);
ALTER TABLE ONLY agent_state_ledger
    ADD CONSTRAINT agent_state_ledger_tenant_instance_turn_key UNIQUE (tenant_id, instance_id, turn_number);
CREATE INDEX agent_state_ledger_search ON agent_state_ledger USING gin (to_tsvector('simple'::regconfig, ((COALESCE(reasoning_summary, ''::text) || ' '::text) || COALESCE(wait_condition, ''::text))));
ALTER TABLE agent_state_ledger ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_state_ledger USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT ON TABLE agent_state_ledger TO genesis_app;
GRANT SELECT,INSERT ON TABLE agent_state_ledger TO genesis_system;

-- --------------------------------------------------------------------------
-- The tool calls of a ledger turn, in order, as the model made them.
CREATE TABLE agent_state_ledger_actions (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    ledger_id uuid NOT NULL,
    ordinal integer NOT NULL,
    tool_name text NOT NULL,
    arguments jsonb DEFAULT '{}'::jsonb NOT NULL,
    result jsonb,
    side_effecting boolean DEFAULT false NOT NULL,
    blocked boolean DEFAULT false NOT NULL,
    CONSTRAINT agent_state_ledger_actions_ordinal_check CHECK ((ordinal >= 0)),
    CONSTRAINT agent_state_ledger_actions_tool_name_check CHECK ((length(tool_name) > 0))
);

ALTER TABLE ONLY agent_state_ledger_actions FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY agent_state_ledger_actions
    ADD CONSTRAINT agent_state_ledger_actions_ledger_id_ordinal_key UNIQUE (ledger_id, ordinal);
ALTER TABLE ONLY agent_state_ledger_actions
    ADD CONSTRAINT agent_state_ledger_actions_pkey PRIMARY KEY (id);
ALTER TABLE agent_state_ledger_actions ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_state_ledger_actions USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT ON TABLE agent_state_ledger_actions TO genesis_app;
GRANT SELECT,INSERT ON TABLE agent_state_ledger_actions TO genesis_system;

-- --------------------------------------------------------------------------
-- Each governed tool call as it ran (InvokeTool): arguments, result, whether
-- it was blocked by governance or had a side effect. Keyed by (session,
-- call_id) so a retried call is answered from its row instead of running twice.
CREATE TABLE tool_invocations (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    instance_id uuid NOT NULL,
    session uuid NOT NULL,
    call_id text NOT NULL,
    tool_name text NOT NULL,
    arguments jsonb NOT NULL,
    result jsonb NOT NULL,
    blocked boolean DEFAULT false NOT NULL,
    side_effecting boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tool_invocations_call_id_check CHECK (((length(call_id) >= 1) AND (length(call_id) <= 200))),
    CONSTRAINT tool_invocations_tool_name_check CHECK (((length(tool_name) >= 1) AND (length(tool_name) <= 200)))
);

ALTER TABLE ONLY tool_invocations FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY tool_invocations
    ADD CONSTRAINT tool_invocations_pkey PRIMARY KEY (id);
ALTER TABLE ONLY tool_invocations
    ADD CONSTRAINT tool_invocations_session_call_id_key UNIQUE (session, call_id);
CREATE INDEX tool_invocations_instance ON tool_invocations USING btree (instance_id, created_at);
ALTER TABLE tool_invocations ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tool_invocations USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT ON TABLE tool_invocations TO genesis_app;
GRANT SELECT,INSERT ON TABLE tool_invocations TO genesis_system;

-- --------------------------------------------------------------------------
-- The conversation between an operator and an agent, both directions. An
-- insert notifies listeners so the dashboard and SendMessage see replies at
-- once.
CREATE TABLE agent_messages (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    instance_id uuid NOT NULL,
    direction text NOT NULL,
    body text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_messages_direction_check CHECK ((direction = ANY (ARRAY['operator_to_agent'::text, 'agent_to_operator'::text])))
);

ALTER TABLE ONLY agent_messages FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY agent_messages
    ADD CONSTRAINT agent_messages_pkey PRIMARY KEY (id);
CREATE INDEX agent_messages_instance ON agent_messages USING btree (instance_id, created_at);
ALTER TABLE agent_messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_messages USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE agent_messages TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE agent_messages TO genesis_system;

-- --------------------------------------------------------------------------
-- Missions the standing agents propose and steer (spec §3.7).
CREATE TABLE missions (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    steering_instance_id uuid,
    kind text NOT NULL,
    title text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    status text DEFAULT 'proposed'::text NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT missions_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    CONSTRAINT missions_status_check CHECK ((status = ANY (ARRAY['proposed'::text, 'active'::text, 'blocked'::text, 'completed'::text, 'cancelled'::text])))
);

ALTER TABLE ONLY missions FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY missions
    ADD CONSTRAINT missions_pkey PRIMARY KEY (id);
CREATE INDEX missions_soa_instance ON missions USING btree (((metadata ->> 'soaInstanceId'::text)));
ALTER TABLE missions ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON missions USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE missions TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE missions TO genesis_system;

-- --------------------------------------------------------------------------
-- The mode catalogue per agent type (spec §3.5): the platform's seeded rows
-- (tenant_id NULL), visible to every tenant, and a tenant's own overrides
-- (tenant_id set) that replace a platform row of the same name for that tenant
-- only. A NULL toolset means "the in-code seed toolset of genesis-core's mode
-- catalogue". Any change bumps catalogue_epoch.
CREATE TABLE agent_modes (
    agent_type text NOT NULL,
    name text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    prompt_fragment text DEFAULT ''::text NOT NULL,
    toolset jsonb,
    preset_id text,
    budget_override jsonb,
    system_seed boolean DEFAULT true NOT NULL,
    is_default boolean DEFAULT false NOT NULL,
    tenant_id uuid
);

ALTER TABLE ONLY agent_modes FORCE ROW LEVEL SECURITY;
CREATE UNIQUE INDEX agent_modes_one_default ON agent_modes USING btree (agent_type) WHERE (is_default AND (tenant_id IS NULL));
CREATE UNIQUE INDEX agent_modes_one_tenant_default ON agent_modes USING btree (tenant_id, agent_type) WHERE (is_default AND (tenant_id IS NOT NULL));
CREATE UNIQUE INDEX agent_modes_platform_key ON agent_modes USING btree (agent_type, name) WHERE (tenant_id IS NULL);
CREATE UNIQUE INDEX agent_modes_tenant_key ON agent_modes USING btree (tenant_id, agent_type, name) WHERE (tenant_id IS NOT NULL);
ALTER TABLE agent_modes ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_modes USING (((tenant_id IS NULL) OR (tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid))) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT ON TABLE agent_modes TO genesis_app;
GRANT SELECT ON TABLE agent_modes TO genesis_system;
GRANT UPDATE(prompt_fragment) ON TABLE agent_modes TO genesis_app;
GRANT UPDATE(toolset) ON TABLE agent_modes TO genesis_app;
GRANT UPDATE(preset_id) ON TABLE agent_modes TO genesis_app;
GRANT UPDATE(budget_override) ON TABLE agent_modes TO genesis_app;

-- --------------------------------------------------------------------------
-- The audit trail of mode switches and catalogue edits: who changed what,
-- from which source (operator, agent, decision).
CREATE TABLE agent_mode_change_events (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    instance_id uuid,
    from_mode text,
    to_mode text NOT NULL,
    source text NOT NULL,
    actor text NOT NULL,
    attention_request_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    agent_type text,
    changes jsonb,
    CONSTRAINT agent_mode_change_events_catalogue_shape CHECK (
CASE
    WHEN (source = 'catalogue'::text) THEN ((instance_id IS NULL) AND (agent_type IS NOT NULL) AND (jsonb_typeof(changes) = 'object'::text))
    ELSE ((instance_id IS NOT NULL) AND (agent_type IS NULL) AND (changes IS NULL))
END),
    CONSTRAINT agent_mode_change_events_source_check CHECK ((source = ANY (ARRAY['ui'::text, 'approval'::text, 'catalogue'::text])))
);

ALTER TABLE ONLY agent_mode_change_events FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY agent_mode_change_events
    ADD CONSTRAINT agent_mode_change_events_pkey PRIMARY KEY (id);
CREATE INDEX agent_mode_change_events_catalogue ON agent_mode_change_events USING btree (tenant_id, agent_type, to_mode, created_at) WHERE (source = 'catalogue'::text);
CREATE INDEX agent_mode_change_events_instance ON agent_mode_change_events USING btree (instance_id, created_at);
ALTER TABLE agent_mode_change_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agent_mode_change_events USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE agent_mode_change_events TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE agent_mode_change_events TO genesis_system;

-- --------------------------------------------------------------------------
-- One platform-wide counter, bumped by a statement trigger on every table a
-- claim's catalogue is read from (agent_modes, llm_presets, llm_site_bindings,
-- llm_pricing, system_configs). A claim that names the epoch it already holds
-- is spared the catalogue read; no service role may set it directly.
CREATE TABLE catalogue_epoch (
    singleton boolean DEFAULT true NOT NULL,
    epoch bigint NOT NULL,
    CONSTRAINT catalogue_epoch_epoch_check CHECK ((epoch > 0)),
    CONSTRAINT catalogue_epoch_singleton_check CHECK (singleton)
);
ALTER TABLE ONLY catalogue_epoch
    ADD CONSTRAINT catalogue_epoch_pkey PRIMARY KEY (singleton);
GRANT SELECT ON TABLE catalogue_epoch TO genesis_app;
GRANT SELECT ON TABLE catalogue_epoch TO genesis_system;

-- --------------------------------------------------------------------------
-- LLM presets (spec §4): model, provider, backend, the credential names to
-- use (never the secrets), the fallback chain and per-call-site prompt
-- overlays.
CREATE TABLE llm_presets (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    name text NOT NULL,
    model text NOT NULL,
    provider text NOT NULL,
    backend text DEFAULT ''::text NOT NULL,
    credentials jsonb DEFAULT '[]'::jsonb NOT NULL,
    -- [{model, provider, backend, credentials: [name, ...]}, ...] tried in order.
    fallback jsonb DEFAULT '[]'::jsonb NOT NULL,
    overlays jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT llm_presets_credentials_check CHECK ((jsonb_typeof(credentials) = 'array'::text)),
    CONSTRAINT llm_presets_fallback_check CHECK ((jsonb_typeof(fallback) = 'array'::text)),
    CONSTRAINT llm_presets_model_check CHECK ((length(btrim(model)) > 0)),
    CONSTRAINT llm_presets_name_check CHECK ((length(btrim(name)) > 0)),
    CONSTRAINT llm_presets_overlays_check CHECK ((jsonb_typeof(overlays) = 'object'::text)),
    CONSTRAINT llm_presets_provider_check CHECK ((length(btrim(provider)) > 0))
);

ALTER TABLE ONLY llm_presets FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY llm_presets
    ADD CONSTRAINT llm_presets_pkey PRIMARY KEY (id);
ALTER TABLE ONLY llm_presets
    ADD CONSTRAINT llm_presets_tenant_id_id_key UNIQUE (tenant_id, id);
ALTER TABLE ONLY llm_presets
    ADD CONSTRAINT llm_presets_tenant_id_name_key UNIQUE (tenant_id, name);
ALTER TABLE llm_presets ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON llm_presets USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE llm_presets TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE llm_presets TO genesis_system;

-- --------------------------------------------------------------------------
-- Which preset a call-site (e.g. Agent:Planning) uses, per tenant.
CREATE TABLE llm_site_bindings (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    site_id text NOT NULL,
    preset_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT llm_site_bindings_site_id_check CHECK ((length(site_id) > 0))
);

ALTER TABLE ONLY llm_site_bindings FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY llm_site_bindings
    ADD CONSTRAINT llm_site_bindings_pkey PRIMARY KEY (id);
ALTER TABLE ONLY llm_site_bindings
    ADD CONSTRAINT llm_site_bindings_tenant_id_site_id_key UNIQUE (tenant_id, site_id);
ALTER TABLE llm_site_bindings ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON llm_site_bindings USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE llm_site_bindings TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE llm_site_bindings TO genesis_system;

-- --------------------------------------------------------------------------
-- One row per tenant the default seeder has run for. Its primary key is
-- what makes seeding idempotent across control replicas (the second
-- concurrent seeder waits on the key, then finds it taken and does nothing)
-- and what keeps an operator's later detach or replacement of the seeded
-- binding from being undone by the next bootstrap scan.
CREATE TABLE llm_default_seeds (
    tenant_id uuid NOT NULL,
    -- NULL when a preset named Default already existed and was left alone.
    preset_id uuid,
    seeded_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY llm_default_seeds FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY llm_default_seeds
    ADD CONSTRAINT llm_default_seeds_pkey PRIMARY KEY (tenant_id);
ALTER TABLE llm_default_seeds ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON llm_default_seeds USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,UPDATE ON TABLE llm_default_seeds TO genesis_app;
GRANT SELECT,INSERT,UPDATE ON TABLE llm_default_seeds TO genesis_system;

-- --------------------------------------------------------------------------
-- One provenance-recorded LLM call (AgentPlanning), keyed by invocation id:
-- the preset chain and prompt it was made with.
CREATE TABLE llm_call_snapshots (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    instance_id uuid NOT NULL,
    invocation_id llm_invocation_id NOT NULL,
    site_id text NOT NULL,
    call_tag llm_call_tag DEFAULT 'AgentPlanning'::text NOT NULL,
    requested_model text NOT NULL,
    served_model text,
    input_tokens nonnegative_bigint DEFAULT 0 NOT NULL,
    output_tokens nonnegative_bigint DEFAULT 0 NOT NULL,
    cost_usd usd_amount DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    -- Presets applied in full (spec §3.5, §3.7): the overlay provenance of a
    -- call snapshot, and the once-per-tenant marker of the default seeder.
    --
    -- A snapshot records the SHA-256 of the prompt overlay its invocation
    -- appended, never the overlay text (an overlay may hold the very secrets the
    -- Prompt Engineer removes). NULL means no overlay was applied.
    prompt_overlay_sha256 sha256_hex
);

ALTER TABLE ONLY llm_call_snapshots FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY llm_call_snapshots
    ADD CONSTRAINT llm_call_snapshots_pkey PRIMARY KEY (id);
ALTER TABLE ONLY llm_call_snapshots
    ADD CONSTRAINT llm_call_snapshots_tenant_id_id_key UNIQUE (tenant_id, id);
ALTER TABLE ONLY llm_call_snapshots
    ADD CONSTRAINT llm_call_snapshots_tenant_id_instance_id_invocation_id_key UNIQUE (tenant_id, instance_id, invocation_id);
CREATE INDEX llm_call_snapshots_instance ON llm_call_snapshots USING btree (instance_id, created_at);
ALTER TABLE llm_call_snapshots ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON llm_call_snapshots USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,UPDATE ON TABLE llm_call_snapshots TO genesis_app;
GRANT SELECT,INSERT,UPDATE ON TABLE llm_call_snapshots TO genesis_system;

-- --------------------------------------------------------------------------
-- Each attempt of a call (a fallback is a second attempt): requested and
-- served model, provider, tokens and usage as the provider reported them,
-- latency, outcome, and the cost the server computed from llm_pricing.
CREATE TABLE llm_call_attempts (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    snapshot_id uuid NOT NULL,
    ordinal nonnegative_integer NOT NULL,
    provider text NOT NULL,
    credential_name text DEFAULT ''::text NOT NULL,
    requested_model text NOT NULL,
    served_model text DEFAULT ''::text NOT NULL,
    outcome llm_call_outcome NOT NULL,
    -- {input_tokens, output_tokens, cache_read_tokens} as the provider reported them.
    usage json_object DEFAULT '{}'::jsonb NOT NULL,
    latency_ms nonnegative_bigint DEFAULT 0 NOT NULL,
    cost_usd usd_amount DEFAULT 0 NOT NULL,
    error_message text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    priced_as text,
    pricing_source llm_pricing_source
);

ALTER TABLE ONLY llm_call_attempts FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY llm_call_attempts
    ADD CONSTRAINT llm_call_attempts_pkey PRIMARY KEY (id);
ALTER TABLE ONLY llm_call_attempts
    ADD CONSTRAINT llm_call_attempts_snapshot_id_ordinal_key UNIQUE (snapshot_id, ordinal);
ALTER TABLE llm_call_attempts ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON llm_call_attempts USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT ON TABLE llm_call_attempts TO genesis_app;
GRANT SELECT,INSERT ON TABLE llm_call_attempts TO genesis_system;

-- --------------------------------------------------------------------------
-- Platform prices in USD per million tokens, readable by every tenant and
-- written only by the platform. A model without a row is refused, never
-- priced at $0.
CREATE TABLE llm_pricing (
    model text NOT NULL,
    input_usd_per_mtok double precision NOT NULL,
    output_usd_per_mtok double precision NOT NULL,
    cache_read_usd_per_mtok double precision DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    -- Exact bills: cache writes priced, dated model names priced by their base
    -- name, the row that priced each attempt recorded, the scripted provider
    -- free.
    --
    -- Anthropic bills prompt tokens written to its cache at a surcharge over
    -- plain input (1.25x for the five-minute cache), so a price row needs a
    -- cache-write price beside the cache-read one. OpenAI never reports cache
    -- writes; its rows carry the plain input price there, which no attempt uses.
    cache_write_usd_per_mtok double precision DEFAULT 0 NOT NULL,
    CONSTRAINT llm_pricing_cache_read_usd_per_mtok_check CHECK ((cache_read_usd_per_mtok >= (0)::double precision)),
    CONSTRAINT llm_pricing_cache_write_usd_per_mtok_check CHECK ((cache_write_usd_per_mtok >= (0)::double precision)),
    CONSTRAINT llm_pricing_input_usd_per_mtok_check CHECK ((input_usd_per_mtok >= (0)::double precision)),
    CONSTRAINT llm_pricing_model_check CHECK ((length(btrim(model)) > 0)),
    CONSTRAINT llm_pricing_output_usd_per_mtok_check CHECK ((output_usd_per_mtok >= (0)::double precision))
);
ALTER TABLE ONLY llm_pricing
    ADD CONSTRAINT llm_pricing_pkey PRIMARY KEY (model);
GRANT SELECT ON TABLE llm_pricing TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE llm_pricing TO genesis_system;

-- --------------------------------------------------------------------------
-- The tenant's weekly spending ceiling (spec §3.4): limit and spend per ISO
-- week, drawn down by each priced attempt.
CREATE TABLE credit_windows (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    -- Monday 00:00 UTC of the window's ISO week.
    week_start timestamp with time zone NOT NULL,
    limit_usd usd_amount NOT NULL,
    spent_usd usd_amount DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY credit_windows FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY credit_windows
    ADD CONSTRAINT credit_windows_pkey PRIMARY KEY (id);
ALTER TABLE ONLY credit_windows
    ADD CONSTRAINT credit_windows_tenant_id_week_start_key UNIQUE (tenant_id, week_start);
ALTER TABLE credit_windows ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON credit_windows USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,UPDATE ON TABLE credit_windows TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE credit_windows TO genesis_system;

-- --------------------------------------------------------------------------
-- Credit held by a session for the worst case of the call it is about to
-- make, so concurrent calls cannot together pass the weekly ceiling; released
-- or settled by the attempt's real cost.
CREATE TABLE credit_reservations (
    tenant_id uuid NOT NULL,
    -- The lease session that reserved.
    session uuid NOT NULL,
    instance_id uuid NOT NULL,
    week_start timestamp with time zone NOT NULL,
    amount_usd double precision NOT NULL,
    CONSTRAINT credit_reservations_amount_usd_check CHECK ((amount_usd >= (0)::double precision))
);

ALTER TABLE ONLY credit_reservations FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY credit_reservations
    ADD CONSTRAINT credit_reservations_pkey PRIMARY KEY (tenant_id, session);
ALTER TABLE credit_reservations ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON credit_reservations USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE credit_reservations TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE credit_reservations TO genesis_system;

-- --------------------------------------------------------------------------
-- The tenant's constitution (spec §3.8): rules that block or escalate tool
-- calls before they run.
CREATE TABLE constitution_rules (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    name text NOT NULL,
    kind text NOT NULL,
    -- The kind's parameters, as genesis-core's RuleKind serialises them
    -- (term | pattern | tool, maxPerTick, maxPerDay | allowedPrefixes, forbiddenScopes).
    params jsonb NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    -- Governed tools the rule applies to; [] = every governed tool.
    tools jsonb DEFAULT '[]'::jsonb NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT constitution_rules_kind_check CHECK ((kind = ANY (ARRAY['ForbiddenTerm'::text, 'ForbiddenPattern'::text, 'ActionLimit'::text, 'ScopeBoundary'::text]))),
    CONSTRAINT constitution_rules_name_check CHECK (((length(btrim(name)) >= 1) AND (length(btrim(name)) <= 128))),
    CONSTRAINT constitution_rules_params_check CHECK ((jsonb_typeof(params) = 'object'::text)),
    CONSTRAINT constitution_rules_tools_check CHECK ((jsonb_typeof(tools) = 'array'::text))
);

ALTER TABLE ONLY constitution_rules FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY constitution_rules
    ADD CONSTRAINT constitution_rules_pkey PRIMARY KEY (id);
ALTER TABLE ONLY constitution_rules
    ADD CONSTRAINT constitution_rules_tenant_id_name_key UNIQUE (tenant_id, name);
CREATE INDEX constitution_rules_enabled ON constitution_rules USING btree (tenant_id) WHERE enabled;
ALTER TABLE constitution_rules ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON constitution_rules USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE constitution_rules TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE constitution_rules TO genesis_system;

-- --------------------------------------------------------------------------
-- The tenant's knowledge base, searchable by the agents' read tools.
CREATE TABLE knowledge_documents (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    project_id uuid,
    kind text NOT NULL,
    title text NOT NULL,
    body text NOT NULL,
    source text DEFAULT ''::text NOT NULL,
    search tsvector GENERATED ALWAYS AS ((setweight(to_tsvector('english'::regconfig, title), 'A'::"char") || setweight(to_tsvector('english'::regconfig, body), 'B'::"char"))) STORED,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT knowledge_documents_body_check CHECK ((length(btrim(body)) > 0)),
    CONSTRAINT knowledge_documents_kind_check CHECK ((kind = ANY (ARRAY['intelligence'::text, 'compliance'::text]))),
    CONSTRAINT knowledge_documents_title_check CHECK (((length(btrim(title)) >= 1) AND (length(btrim(title)) <= 500)))
);

ALTER TABLE ONLY knowledge_documents FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY knowledge_documents
    ADD CONSTRAINT knowledge_documents_pkey PRIMARY KEY (id);
CREATE INDEX knowledge_documents_scope ON knowledge_documents USING btree (tenant_id, kind, project_id);
CREATE INDEX knowledge_documents_search ON knowledge_documents USING gin (search);
ALTER TABLE knowledge_documents ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON knowledge_documents USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE knowledge_documents TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE knowledge_documents TO genesis_system;

-- --------------------------------------------------------------------------
-- Source files of the tenant's projects, searchable by the agents' read
-- tools.
CREATE TABLE source_files (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    project_id uuid NOT NULL,
    path text NOT NULL,
    language text DEFAULT ''::text NOT NULL,
    content text NOT NULL,
    -- 'simple': identifiers are not stemmed or stop-listed.
    search tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, ((path || ' '::text) || regexp_replace(content, '[^[:alnum:]_]+'::text, ' '::text, 'g'::text)))) STORED,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT source_files_path_check CHECK (((length(path) >= 1) AND (length(path) <= 1024)))
);

ALTER TABLE ONLY source_files FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY source_files
    ADD CONSTRAINT source_files_pkey PRIMARY KEY (id);
ALTER TABLE ONLY source_files
    ADD CONSTRAINT source_files_tenant_id_project_id_path_key UNIQUE (tenant_id, project_id, path);
CREATE INDEX source_files_search ON source_files USING gin (search);
ALTER TABLE source_files ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON source_files USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE source_files TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE source_files TO genesis_system;

-- --------------------------------------------------------------------------
-- Findings recorded by research agents, with their sources.
CREATE TABLE research_records (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    instance_id uuid,
    project_id uuid,
    title text NOT NULL,
    question text DEFAULT ''::text NOT NULL,
    findings text NOT NULL,
    sources jsonb DEFAULT '[]'::jsonb NOT NULL,
    tags jsonb DEFAULT '[]'::jsonb NOT NULL,
    search tsvector GENERATED ALWAYS AS ((setweight(to_tsvector('english'::regconfig, title), 'A'::"char") || setweight(to_tsvector('english'::regconfig, ((question || ' '::text) || findings)), 'B'::"char"))) STORED,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT research_records_findings_check CHECK ((length(btrim(findings)) > 0)),
    CONSTRAINT research_records_sources_check CHECK ((jsonb_typeof(sources) = 'array'::text)),
    CONSTRAINT research_records_tags_check CHECK ((jsonb_typeof(tags) = 'array'::text)),
    CONSTRAINT research_records_title_check CHECK (((length(btrim(title)) >= 1) AND (length(btrim(title)) <= 500)))
);

ALTER TABLE ONLY research_records FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY research_records
    ADD CONSTRAINT research_records_pkey PRIMARY KEY (id);
CREATE INDEX research_records_recent ON research_records USING btree (tenant_id, created_at DESC);
CREATE INDEX research_records_search ON research_records USING gin (search);
ALTER TABLE research_records ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON research_records USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE research_records TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE research_records TO genesis_system;

-- --------------------------------------------------------------------------
-- Compliance dossiers authored by the Compliance agent, chapter by chapter.
CREATE TABLE compliance_dossiers (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    project_id uuid,
    framework text NOT NULL,
    control_id text NOT NULL,
    title text NOT NULL,
    body text NOT NULL,
    status text NOT NULL,
    language text DEFAULT 'en'::text NOT NULL,
    version integer DEFAULT 1 NOT NULL,
    recorded_by uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT compliance_dossiers_body_check CHECK ((length(btrim(body)) > 0)),
    CONSTRAINT compliance_dossiers_control_id_check CHECK (((length(btrim(control_id)) >= 1) AND (length(btrim(control_id)) <= 128))),
    CONSTRAINT compliance_dossiers_framework_check CHECK (((length(btrim(framework)) >= 1) AND (length(btrim(framework)) <= 128))),
    CONSTRAINT compliance_dossiers_status_check CHECK ((status = ANY (ARRAY['compliant'::text, 'partial'::text, 'gap'::text, 'not_applicable'::text]))),
    CONSTRAINT compliance_dossiers_title_check CHECK (((length(btrim(title)) >= 1) AND (length(btrim(title)) <= 500))),
    CONSTRAINT compliance_dossiers_version_check CHECK ((version >= 1))
);

ALTER TABLE ONLY compliance_dossiers FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY compliance_dossiers
    ADD CONSTRAINT compliance_dossiers_pkey PRIMARY KEY (id);
ALTER TABLE ONLY compliance_dossiers
    ADD CONSTRAINT compliance_dossiers_tenant_id_id_key UNIQUE (tenant_id, id);
CREATE UNIQUE INDEX compliance_dossiers_control ON compliance_dossiers USING btree (tenant_id, COALESCE(project_id, '00000000-0000-0000-0000-000000000000'::uuid), framework, control_id);
ALTER TABLE compliance_dossiers ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON compliance_dossiers USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE compliance_dossiers TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE compliance_dossiers TO genesis_system;

-- --------------------------------------------------------------------------
-- Translations of a compliance dossier.
CREATE TABLE compliance_dossier_translations (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    dossier_id uuid NOT NULL,
    language text NOT NULL,
    title text NOT NULL,
    body text NOT NULL,
    -- The dossier version this translation was made from.
    source_version integer NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT compliance_dossier_translations_body_check CHECK ((length(btrim(body)) > 0)),
    CONSTRAINT compliance_dossier_translations_language_check CHECK ((language ~ '^[a-z]{2,3}(-[A-Za-z0-9]{2,8})?$'::text)),
    CONSTRAINT compliance_dossier_translations_title_check CHECK (((length(btrim(title)) >= 1) AND (length(btrim(title)) <= 500)))
);

ALTER TABLE ONLY compliance_dossier_translations FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY compliance_dossier_translations
    ADD CONSTRAINT compliance_dossier_translations_dossier_id_language_key UNIQUE (dossier_id, language);
ALTER TABLE ONLY compliance_dossier_translations
    ADD CONSTRAINT compliance_dossier_translations_pkey PRIMARY KEY (id);
ALTER TABLE compliance_dossier_translations ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON compliance_dossier_translations USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE compliance_dossier_translations TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE compliance_dossier_translations TO genesis_system;

-- --------------------------------------------------------------------------
-- Coding tasks (spec §2.3): the unit of work an on-demand coder executes. The
-- couple is resolved at creation (a preset overrides the explicit triple) and
-- stored as it was resolved, so a later preset edit never changes a task
-- already handed out. steering_instance_id is the standing agent told with a
-- DependencyCompleted event when the task settles.
CREATE TABLE coding_tasks (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    title text NOT NULL,
    instructions text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    coder_id text,
    preset_id uuid,
    model text NOT NULL,
    provider text NOT NULL,
    backend text DEFAULT ''::text NOT NULL,
    credential_names jsonb DEFAULT '[]'::jsonb NOT NULL,
    repository text DEFAULT ''::text NOT NULL,
    branch text DEFAULT ''::text NOT NULL,
    steering_instance_id uuid,
    result_summary text DEFAULT ''::text NOT NULL,
    result jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    CONSTRAINT coding_tasks_check CHECK (((status = ANY (ARRAY['completed'::text, 'failed'::text])) = (completed_at IS NOT NULL))),
    CONSTRAINT coding_tasks_credential_names_check CHECK ((jsonb_typeof(credential_names) = 'array'::text)),
    CONSTRAINT coding_tasks_instructions_check CHECK ((length(btrim(instructions)) > 0)),
    CONSTRAINT coding_tasks_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'running'::text, 'completed'::text, 'failed'::text]))),
    CONSTRAINT coding_tasks_title_check CHECK ((length(btrim(title)) > 0))
);

ALTER TABLE ONLY coding_tasks FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY coding_tasks
    ADD CONSTRAINT coding_tasks_pkey PRIMARY KEY (id);
CREATE INDEX coding_tasks_tenant_created ON coding_tasks USING btree (tenant_id, created_at DESC);
ALTER TABLE coding_tasks ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON coding_tasks USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE coding_tasks TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE coding_tasks TO genesis_system;

-- --------------------------------------------------------------------------
-- The Windows machine each (tenant, holder) holds (spec §2.3), a row every
-- control replica reads. A row is first claimed in state 'leasing' by the one
-- replica whose insert wins the key; the others wait for it to become 'held'.
-- A claim whose claimer died (claim_expires_at) or a hold whose lease expired
-- may be taken over. Every claim draws a new revision from
-- windows_hold_revisions, so a replica acting on an old read changes nothing
-- of a newer hold.
CREATE TABLE windows_holds (
    tenant_id uuid NOT NULL,
    holder text NOT NULL,
    revision bigint NOT NULL,
    state text NOT NULL,
    -- While 'leasing': when a waiter may take the claim over.
    claim_expires_at timestamp with time zone,
    lease_id text,
    session_id text,
    host text,
    -- NULL: the pool named no expiry.
    lease_expires_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT windows_holds_check CHECK ((((state = 'leasing'::text) AND (claim_expires_at IS NOT NULL) AND (lease_id IS NULL) AND (session_id IS NULL) AND (host IS NULL) AND (lease_expires_at IS NULL)) OR ((state = 'held'::text) AND (claim_expires_at IS NULL) AND (lease_id IS NOT NULL) AND (session_id IS NOT NULL) AND (host IS NOT NULL)))),
    CONSTRAINT windows_holds_holder_check CHECK (((length(btrim(holder)) > 0) AND (length(holder) <= 256))),
    CONSTRAINT windows_holds_host_check CHECK ((length(host) <= 512)),
    CONSTRAINT windows_holds_lease_id_check CHECK (((length(lease_id) >= 1) AND (length(lease_id) <= 512))),
    CONSTRAINT windows_holds_session_id_check CHECK (((length(session_id) >= 1) AND (length(session_id) <= 512))),
    CONSTRAINT windows_holds_state_check CHECK ((state = ANY (ARRAY['leasing'::text, 'held'::text])))
);

ALTER TABLE ONLY windows_holds FORCE ROW LEVEL SECURITY;
ALTER TABLE ONLY windows_holds
    ADD CONSTRAINT windows_holds_pkey PRIMARY KEY (tenant_id, holder);
ALTER TABLE windows_holds ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON windows_holds USING ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid)) WITH CHECK ((tenant_id = (NULLIF(current_setting('genesis.tenant_id'::text, true), ''::text))::uuid));
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE windows_holds TO genesis_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE windows_holds TO genesis_system;

--
-- PostgreSQL database dump complete
--

GRANT USAGE ON SEQUENCE windows_hold_revisions TO genesis_app;
GRANT USAGE ON SEQUENCE windows_hold_revisions TO genesis_system;

-- --------------------------------------------------------------------------
-- Server-side functions, after the tables their bodies name: each lives in
-- its own file, the one definition to read and to change.
\ir ../services/store/sql/genesis_api_tokens_pod_tenants.sql
\ir ../services/store/sql/genesis_append_event.sql
\ir ../services/store/sql/genesis_apply_complete.sql
\ir ../services/store/sql/genesis_bump_catalogue_epoch.sql
\ir ../services/store/sql/genesis_claim_and_read.sql
\ir ../services/store/sql/genesis_claim_tick.sql
\ir ../services/store/sql/genesis_complete_context.sql
\ir ../services/store/sql/genesis_credit_draw_down.sql
\ir ../services/store/sql/genesis_defer_tick.sql
\ir ../services/store/sql/genesis_effective_configs.sql
\ir ../services/store/sql/genesis_effective_modes.sql
\ir ../services/store/sql/genesis_enqueue_event.sql
\ir ../services/store/sql/genesis_ensure_heartbeat.sql
\ir ../services/store/sql/genesis_guard_mode_write.sql
\ir ../services/store/sql/genesis_insert_event.sql
\ir ../services/store/sql/genesis_lock_for_complete.sql
\ir ../services/store/sql/genesis_notify_api_tokens.sql
\ir ../services/store/sql/genesis_notify_message.sql
\ir ../services/store/sql/genesis_notify_tenant.sql
\ir ../services/store/sql/genesis_read_bundle.sql
\ir ../services/store/sql/genesis_read_chat_tail.sql
\ir ../services/store/sql/genesis_record_call_attempt.sql
\ir ../services/store/sql/genesis_record_context.sql
\ir ../services/store/sql/genesis_renew_lease.sql
\ir ../services/store/sql/genesis_reserve_credit.sql
\ir ../services/store/sql/genesis_reset_instance.sql
\ir ../services/store/sql/genesis_set_tenant.sql
\ir ../services/store/sql/genesis_write_call_attempt.sql

-- Triggers: catalogue epoch bumps, NOTIFY for listeners, the mode-write
-- chokepoint and the pod-tenants list of api_tokens.
CREATE TRIGGER tenants_notify_gate AFTER UPDATE OF standing_agents_enabled, status ON tenants FOR EACH ROW WHEN (((old.standing_agents_enabled IS DISTINCT FROM new.standing_agents_enabled) OR (old.status IS DISTINCT FROM new.status))) EXECUTE FUNCTION genesis_notify_tenant();
CREATE TRIGGER tenants_notify_insert AFTER INSERT ON tenants FOR EACH ROW EXECUTE FUNCTION genesis_notify_tenant();
CREATE TRIGGER system_configs_catalogue_epoch BEFORE INSERT OR DELETE OR UPDATE OR TRUNCATE ON system_configs FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER api_tokens_notify AFTER DELETE OR UPDATE OR TRUNCATE ON api_tokens FOR EACH STATEMENT EXECUTE FUNCTION genesis_notify_api_tokens();
CREATE TRIGGER api_tokens_pod_tenants BEFORE INSERT OR UPDATE OF pod_tenants ON api_tokens FOR EACH ROW WHEN ((cardinality(new.pod_tenants) > 0)) EXECUTE FUNCTION genesis_api_tokens_pod_tenants();
CREATE TRIGGER agent_instances_mode_chokepoint BEFORE UPDATE OF active_mode ON agent_instances FOR EACH ROW WHEN ((old.active_mode IS DISTINCT FROM new.active_mode)) EXECUTE FUNCTION genesis_guard_mode_write();
CREATE TRIGGER agent_messages_notify AFTER INSERT ON agent_messages FOR EACH ROW EXECUTE FUNCTION genesis_notify_message();
CREATE TRIGGER agent_modes_catalogue_epoch BEFORE INSERT OR DELETE OR UPDATE OR TRUNCATE ON agent_modes FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER llm_presets_catalogue_epoch BEFORE INSERT OR DELETE OR UPDATE OR TRUNCATE ON llm_presets FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER llm_site_bindings_catalogue_epoch BEFORE INSERT OR DELETE OR UPDATE OR TRUNCATE ON llm_site_bindings FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();
CREATE TRIGGER llm_pricing_catalogue_epoch BEFORE INSERT OR DELETE OR UPDATE OR TRUNCATE ON llm_pricing FOR EACH STATEMENT EXECUTE FUNCTION genesis_bump_catalogue_epoch();

-- Who may execute what: the tick functions are for the service roles only.
REVOKE ALL ON FUNCTION genesis_bump_catalogue_epoch() FROM PUBLIC;
REVOKE ALL ON FUNCTION genesis_claim_and_read(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval, p_max_attempts integer, p_tail bigint, p_agent_type text, p_sites text[], p_week_start timestamp with time zone, p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION genesis_claim_and_read(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval, p_max_attempts integer, p_tail bigint, p_agent_type text, p_sites text[], p_week_start timestamp with time zone, p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint) TO genesis_app;
GRANT ALL ON FUNCTION genesis_claim_and_read(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval, p_max_attempts integer, p_tail bigint, p_agent_type text, p_sites text[], p_week_start timestamp with time zone, p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint) TO genesis_system;
REVOKE ALL ON FUNCTION genesis_effective_modes(p_tenant uuid, p_agent_type text) FROM PUBLIC;
GRANT ALL ON FUNCTION genesis_effective_modes(p_tenant uuid, p_agent_type text) TO genesis_app;
GRANT ALL ON FUNCTION genesis_effective_modes(p_tenant uuid, p_agent_type text) TO genesis_system;
REVOKE ALL ON FUNCTION genesis_read_bundle(p_tenant uuid, p_instance uuid, p_tail bigint, p_agent_type text, p_sites text[], p_week_start timestamp with time zone, p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION genesis_read_bundle(p_tenant uuid, p_instance uuid, p_tail bigint, p_agent_type text, p_sites text[], p_week_start timestamp with time zone, p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint) TO genesis_app;
GRANT ALL ON FUNCTION genesis_read_bundle(p_tenant uuid, p_instance uuid, p_tail bigint, p_agent_type text, p_sites text[], p_week_start timestamp with time zone, p_after_turn bigint, p_after_id uuid, p_catalogue_epoch bigint) TO genesis_system;
REVOKE ALL ON FUNCTION genesis_read_chat_tail(p_tenant uuid, p_instance uuid, p_upto uuid, p_limit integer, p_max_chars integer) FROM PUBLIC;
GRANT ALL ON FUNCTION genesis_read_chat_tail(p_tenant uuid, p_instance uuid, p_upto uuid, p_limit integer, p_max_chars integer) TO genesis_app;
GRANT ALL ON FUNCTION genesis_read_chat_tail(p_tenant uuid, p_instance uuid, p_upto uuid, p_limit integer, p_max_chars integer) TO genesis_system;
REVOKE ALL ON FUNCTION genesis_reset_instance(p_tenant uuid, p_instance uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION genesis_reset_instance(p_tenant uuid, p_instance uuid) TO genesis_app;
GRANT ALL ON FUNCTION genesis_reset_instance(p_tenant uuid, p_instance uuid) TO genesis_system;

-- Foreign keys, after every table exists.
ALTER TABLE ONLY agent_event_queue
    ADD CONSTRAINT agent_event_queue_attention_request_id_fkey FOREIGN KEY (attention_request_id) REFERENCES attention_requests(id);
ALTER TABLE ONLY agent_event_queue
    ADD CONSTRAINT agent_event_queue_tenant_id_instance_id_fkey FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances(tenant_id, id);
ALTER TABLE ONLY agent_instances
    ADD CONSTRAINT agent_instances_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY agent_messages
    ADD CONSTRAINT agent_messages_tenant_id_instance_id_fkey FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances(tenant_id, id);
ALTER TABLE ONLY agent_mode_change_events
    ADD CONSTRAINT agent_mode_change_events_attention_request_id_fkey FOREIGN KEY (attention_request_id) REFERENCES attention_requests(id);
ALTER TABLE ONLY agent_mode_change_events
    ADD CONSTRAINT agent_mode_change_events_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY agent_mode_change_events
    ADD CONSTRAINT agent_mode_change_events_tenant_id_instance_id_fkey FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances(tenant_id, id);
ALTER TABLE ONLY agent_modes
    ADD CONSTRAINT agent_modes_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY agent_state_ledger_actions
    ADD CONSTRAINT agent_state_ledger_actions_tenant_id_ledger_id_fkey FOREIGN KEY (tenant_id, ledger_id) REFERENCES agent_state_ledger(tenant_id, id);
ALTER TABLE ONLY agent_state_ledger
    ADD CONSTRAINT agent_state_ledger_event_id_fkey FOREIGN KEY (event_id) REFERENCES agent_event_queue(id);
ALTER TABLE ONLY agent_state_ledger
    ADD CONSTRAINT agent_state_ledger_tenant_id_instance_id_fkey FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances(tenant_id, id);
ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY attention_requests
    ADD CONSTRAINT attention_requests_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY attention_requests
    ADD CONSTRAINT attention_requests_tenant_id_instance_id_fkey FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances(tenant_id, id);
ALTER TABLE ONLY coding_tasks
    ADD CONSTRAINT coding_tasks_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY coding_tasks
    ADD CONSTRAINT coding_tasks_tenant_id_steering_instance_id_fkey FOREIGN KEY (tenant_id, steering_instance_id) REFERENCES agent_instances(tenant_id, id);
ALTER TABLE ONLY compliance_dossier_translations
    ADD CONSTRAINT compliance_dossier_translations_tenant_id_dossier_id_fkey FOREIGN KEY (tenant_id, dossier_id) REFERENCES compliance_dossiers(tenant_id, id);
ALTER TABLE ONLY compliance_dossier_translations
    ADD CONSTRAINT compliance_dossier_translations_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY compliance_dossiers
    ADD CONSTRAINT compliance_dossiers_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY constitution_rules
    ADD CONSTRAINT constitution_rules_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY credit_reservations
    ADD CONSTRAINT credit_reservations_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY credit_windows
    ADD CONSTRAINT credit_windows_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY dashboard_sessions
    ADD CONSTRAINT dashboard_sessions_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY dashboard_sessions
    ADD CONSTRAINT dashboard_sessions_token_id_fkey FOREIGN KEY (token_id) REFERENCES api_tokens(id);
ALTER TABLE ONLY knowledge_documents
    ADD CONSTRAINT knowledge_documents_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY llm_call_attempts
    ADD CONSTRAINT llm_call_attempts_tenant_id_snapshot_id_fkey FOREIGN KEY (tenant_id, snapshot_id) REFERENCES llm_call_snapshots(tenant_id, id);
ALTER TABLE ONLY llm_call_snapshots
    ADD CONSTRAINT llm_call_snapshots_tenant_id_instance_id_fkey FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances(tenant_id, id);
ALTER TABLE ONLY llm_default_seeds
    ADD CONSTRAINT llm_default_seeds_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY llm_presets
    ADD CONSTRAINT llm_presets_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY llm_site_bindings
    ADD CONSTRAINT llm_site_bindings_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY llm_site_bindings
    ADD CONSTRAINT llm_site_bindings_tenant_id_preset_id_fkey FOREIGN KEY (tenant_id, preset_id) REFERENCES llm_presets(tenant_id, id);
ALTER TABLE ONLY missions
    ADD CONSTRAINT missions_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY missions
    ADD CONSTRAINT missions_tenant_id_steering_instance_id_fkey FOREIGN KEY (tenant_id, steering_instance_id) REFERENCES agent_instances(tenant_id, id);
ALTER TABLE ONLY research_records
    ADD CONSTRAINT research_records_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY research_records
    ADD CONSTRAINT research_records_tenant_id_instance_id_fkey FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances(tenant_id, id);
ALTER TABLE ONLY source_files
    ADD CONSTRAINT source_files_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY system_configs
    ADD CONSTRAINT system_configs_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);
ALTER TABLE ONLY tool_invocations
    ADD CONSTRAINT tool_invocations_tenant_id_instance_id_fkey FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances(tenant_id, id);
ALTER TABLE ONLY windows_holds
    ADD CONSTRAINT windows_holds_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id);

-- The seeded mode catalogue (spec §3.5): the platform rows every tenant
-- sees until it overrides a mode of its own.
INSERT INTO agent_modes (agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override, system_seed, is_default, tenant_id) VALUES ('Soa', 'Strategic', 'Steady-state orchestration: survey the tenant, steer missions, escalate forks.', 'MODE: Strategic — steady-state orchestration. Move the tenant''s goals forward with the fewest well-grounded actions.
1. Ground first: the objective gives you the open items, the event and your recent turns. Query agent_query_memory, soa_query_telemetry, intelligence_knowledge_query, intelligence_code_search, orchestrator_research_get or compliance_query_posture only for what you still need to decide.
2. Check the open-items roster: a mission or escalation already listed is in hand; do not raise it again.
3. Act on at most one or two things. Propose a mission with soa_propose_task when the work is clear, within the tenant''s goals and reversible; record a finding worth keeping with orchestrator_research_create; escalate with soa_propose_decision when the work is consequential, costly, irreversible or a genuine choice between options.
4. Message the operator with soa_send_message only when there is something they need to know; do not narrate routine heartbeats.
5. When the situation is an incident, a conversation or open exploration, propose the matching mode (Incident, Dialogue, Discovery) with soa_propose_mode_change instead of stretching this one. Call agent_workset_complete once your starting workset is built.', NULL, NULL, NULL, true, true, NULL);
INSERT INTO agent_modes (agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override, system_seed, is_default, tenant_id) VALUES ('Soa', 'Incident', 'An operational incident is under way: diagnose, contain, escalate.', 'MODE: Incident — an operational incident is under way. Containment comes before any progress on goals.
1. Read the OPS DIGEST in the objective, then soa_query_telemetry: what is failing, since when, and how widely.
2. Look for the cause and for a similar past incident with agent_query_memory and intelligence_code_search.
3. Propose only containment work with soa_propose_task: small, reversible steps (pause, roll back, isolate the failing part), each naming how to undo it. No speculative fixes, no feature work.
4. Anything irreversible, customer-visible or costly goes to the operator with soa_propose_decision, with the evidence and your recommendation.
5. Keep the operator informed with one short soa_send_message per episode: what you see, what you proposed, what you need from them.
6. When telemetry shows the incident is over, propose returning to Strategic with soa_propose_mode_change. End with phase_blocked when you cannot see enough to act.', NULL, NULL, NULL, true, false, NULL);
INSERT INTO agent_modes (agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override, system_seed, is_default, tenant_id) VALUES ('Soa', 'Dialogue', 'Conversation with the operator: answer, clarify, propose next steps.', 'MODE: Dialogue — a conversation with the operator.
1. Read the operator''s latest message and the conversation before it in the objective, and answer what they actually asked.
2. Ground the answer: use agent_query_memory, intelligence_knowledge_query or soa_query_telemetry when it depends on facts you do not have, and say plainly when you do not know.
3. Reply with one soa_send_message per operator message: direct, specific and short. When the request is ambiguous, ask one clarifying question instead of guessing. Do not repeat what you already said in the conversation.
4. Start no work in this mode. When the operator asks for something to be done, put it to them as a soa_propose_decision with the options, or propose Strategic with soa_propose_mode_change.
5. End with phase_complete once you have replied.', NULL, NULL, NULL, true, false, NULL);
INSERT INTO agent_modes (agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override, system_seed, is_default, tenant_id) VALUES ('Soa', 'Housekeeping', 'Tidy the open-items roster and the starting workset.', 'MODE: Housekeeping — tidy up; create nothing new.
1. Walk the open-items roster: find missions that look stalled, blocked or superseded and escalations that have waited long.
2. Check the facts with agent_query_memory, soa_query_telemetry and orchestrator_research_get before calling anything stale.
3. Report in one concise soa_send_message: each stale item by id, with the action you recommend (close it, re-scope it, or chase the operator). You cannot close or create work in this mode.
4. If your starting workset is built, say so with agent_workset_complete.
5. Once the roster is tidy, propose Strategic with soa_propose_mode_change.', NULL, NULL, NULL, true, false, NULL);
INSERT INTO agent_modes (agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override, system_seed, is_default, tenant_id) VALUES ('Soa', 'Idle', 'Quiet: only answer the operator.', 'MODE: Idle — stay quiet; the operator has asked you to do nothing on your own.
1. On a heartbeat, or any event other than an operator message, end at once with phase_complete: no queries, no messages.
2. On an operator message, answer briefly with soa_send_message, using agent_query_memory only if the answer needs it.
3. If the operator asks you to resume work, propose the mode they want with soa_propose_mode_change. Start no work in this mode.', NULL, NULL, NULL, true, false, NULL);
INSERT INTO agent_modes (agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override, system_seed, is_default, tenant_id) VALUES ('Soa', 'Discovery', 'Explore the tenant''s knowledge and code to find opportunities.', 'MODE: Discovery — explore the tenant''s knowledge and code for opportunities.
1. Research broadly: intelligence_knowledge_query for knowledge, intelligence_code_search for code, orchestrator_research_get for earlier findings, agent_query_memory and soa_query_telemetry for context.
2. Record each real finding with orchestrator_research_create: what you found, the evidence, and why it matters. Check orchestrator_research_get first so the same finding is never recorded twice.
3. Surface at most one or two opportunities per episode to the operator with soa_propose_decision, each with its expected value, cost and risk. You create no missions in this mode.
4. When your findings are recorded and surfaced, propose Strategic with soa_propose_mode_change. End with phase_blocked when the knowledge you need is not there.', NULL, NULL, NULL, true, false, NULL);
INSERT INTO agent_modes (agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override, system_seed, is_default, tenant_id) VALUES ('Compliance', 'Cadence', 'The regular compliance sweep: posture, dossiers, drift.', 'MODE: Cadence — the regular compliance sweep.
1. The COMPLIANCE CORPUS line in the objective names what to sweep: the projects, or the tenant-wide knowledge.
2. Check the posture with compliance_query_posture and the dossiers with compliance_dossier_list; query compliance_knowledge_query for the controls whose evidence may have changed.
3. Keep dossiers current: record an update with compliance_dossier_record only when the evidence changed a control''s status or content. Never re-record an unchanged dossier.
4. Escalate every gap or regression (a control that lost its evidence, a status that fell from compliant) with soa_propose_decision, naming the framework, the control and what would close it. You fix nothing yourself.
5. For whole-chapter authoring propose Research, for a release or change gate GateReview, with soa_propose_mode_change. Call agent_workset_complete once your baseline dossiers exist.', NULL, NULL, NULL, true, true, NULL);
INSERT INTO agent_modes (agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override, system_seed, is_default, tenant_id) VALUES ('Compliance', 'GateReview', 'Review a release or change gate against the compliance posture.', 'MODE: GateReview — assess one release or change gate against the compliance posture.
1. Identify the gate from the event or the operator''s message. If it is unclear which gate is meant, ask with soa_send_message and end with phase_blocked.
2. Check it against the posture (compliance_query_posture), the dossiers (compliance_dossier_list) and the corpus (compliance_knowledge_query): which controls the change touches, and whether their evidence still holds.
3. Your verdict is a recommendation, never a decision: escalate it with soa_propose_decision, options Pass / Fail / Pass with conditions, listing each finding with its control and evidence.
4. Record nothing in this mode. Send the operator a short summary with soa_send_message if they asked for the review, and end with phase_complete once the verdict is escalated.', NULL, NULL, NULL, true, false, NULL);
INSERT INTO agent_modes (agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override, system_seed, is_default, tenant_id) VALUES ('Compliance', 'Research', 'Whole-chapter dossier authoring with a widened budget.', 'MODE: Research — author whole dossier chapters; this mode runs on a widened budget.
1. Work one chapter (one framework section) at a time. List the existing dossiers first with compliance_dossier_list, so you extend rather than duplicate.
2. Gather the evidence with compliance_knowledge_query, intelligence_knowledge_query, orchestrator_research_get and agent_query_memory. Ingest a source the corpus lacks with compliance_knowledge_ingest.
3. Write each control''s dossier completely with compliance_dossier_record: the control, the evidence and its source, the status (compliant, partial, gap or not_applicable) and what is missing. Translate it with compliance_dossier_translate when the tenant needs another language.
4. State only what the evidence supports; mark a control as a gap rather than guess.
5. You cannot escalate in this mode: report gaps and progress with soa_send_message, and propose Cadence with soa_propose_mode_change when the chapter is done. End with phase_blocked when the corpus lacks the evidence.', NULL, NULL, '{"maxTurns": 24, "maxTokens": 48000, "maxDollars": 4.00, "maxToolCalls": 24, "maxWallSeconds": 600}', true, false, NULL);
INSERT INTO agent_modes (agent_type, name, description, prompt_fragment, toolset, preset_id, budget_override, system_seed, is_default, tenant_id) VALUES ('PromptRedactor', 'Redact', 'Rework one call-site''s prompt from the signal that triggered it.', 'MODE: Redact — rework one call-site''s prompt overlay.
1. Read the signal in the objective and the REDACTION TARGET block: the bound call-site, its preset, and its overlay with every detected secret and personal datum already masked as [REDACTED:<kind>].
2. If there is no overlay, or nothing in it to redact, end with phase_complete without messaging.
3. Otherwise draft the redaction: keep the overlay''s intent and instructions, keep every [REDACTED:<kind>] placeholder exactly as it is, and remove any further secret or personal datum the detectors missed.
4. Route it to the operator for review with redactor_propose_overlay, with a rationale naming what was masked, by kind. Never repeat, reconstruct or guess a masked value, anywhere.
5. Use soa_propose_decision only for a question the proposal cannot carry, and soa_send_message only to answer the operator.', NULL, NULL, NULL, true, true, NULL);

-- List prices in USD per million tokens (input, output, cache read, cache
-- write). A model without a row is refused at reservation, never priced at
-- $0; `scripted-1` is the offline stand-in and is free by design.
INSERT INTO llm_pricing (model, input_usd_per_mtok, output_usd_per_mtok, cache_read_usd_per_mtok, cache_write_usd_per_mtok) VALUES
    ('claude-haiku-4-5', 1, 5, 0.1, 1.25),
    ('claude-opus-4-8', 15, 75, 1.5, 18.75),
    ('claude-sonnet-4-5', 3, 15, 0.3, 3.75),
    ('gpt-4o', 2.5, 10, 1.25, 2.5),
    ('gpt-4o-mini', 0.15, 0.6, 0.075, 0.15),
    ('claude-opus-4-1', 15, 75, 1.5, 18.75),
    ('claude-sonnet-4', 3, 15, 0.3, 3.75),
    ('gpt-4.1', 2, 8, 0.5, 2),
    ('gpt-4.1-mini', 0.4, 1.6, 0.1, 0.4),
    ('gpt-5', 1.25, 10, 0.125, 1.25),
    ('gpt-5-codex', 1.25, 10, 0.125, 1.25),
    ('gpt-5-mini', 0.25, 2, 0.025, 0.25),
    ('o3', 2, 8, 0.5, 2),
    ('o4-mini', 1.1, 4.4, 0.275, 1.1),
    ('scripted-1', 0, 0, 0, 0);

INSERT INTO catalogue_epoch (singleton, epoch) VALUES (true, 1);
