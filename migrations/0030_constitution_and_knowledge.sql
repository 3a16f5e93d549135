-- Governance rail and the read/record tool backends (spec §3.8): the tenant
-- constitution, knowledge documents and source files with full-text search,
-- compliance dossiers (+ translations) from which the posture is derived,
-- and research records. Every table is a tenant table: tenant_id, ENABLE +
-- FORCE row-level security, policy tenant_isolation, grants as in 0001.

CREATE TABLE constitution_rules (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid NOT NULL REFERENCES tenants (id),
    name        text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 128),
    kind        text NOT NULL CHECK (kind IN ('ForbiddenTerm', 'ForbiddenPattern', 'ActionLimit', 'ScopeBoundary')),
    -- The kind's parameters, as genesis-core's RuleKind serialises them
    -- (term | pattern | tool, maxPerTick, maxPerDay | allowedPrefixes, forbiddenScopes).
    params      jsonb NOT NULL CHECK (jsonb_typeof(params) = 'object'),
    description text NOT NULL DEFAULT '',
    -- Governed tools the rule applies to; [] = every governed tool.
    tools       jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(tools) = 'array'),
    enabled     boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);
CREATE INDEX constitution_rules_enabled ON constitution_rules (tenant_id) WHERE enabled;

CREATE TABLE knowledge_documents (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    project_id uuid,
    kind       text NOT NULL CHECK (kind IN ('intelligence', 'compliance')),
    title      text NOT NULL CHECK (length(btrim(title)) BETWEEN 1 AND 500),
    body       text NOT NULL CHECK (length(btrim(body)) > 0),
    source     text NOT NULL DEFAULT '',
    search     tsvector GENERATED ALWAYS AS (
                   setweight(to_tsvector('english', title), 'A') ||
                   setweight(to_tsvector('english', body), 'B')) STORED,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX knowledge_documents_search ON knowledge_documents USING gin (search);
CREATE INDEX knowledge_documents_scope ON knowledge_documents (tenant_id, kind, project_id);

CREATE TABLE source_files (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    project_id uuid NOT NULL,
    path       text NOT NULL CHECK (length(path) BETWEEN 1 AND 1024),
    language   text NOT NULL DEFAULT '',
    content    text NOT NULL,
    -- 'simple': identifiers are not stemmed or stop-listed.
    search     tsvector GENERATED ALWAYS AS (
                   to_tsvector('simple', path || ' ' || regexp_replace(content, '[^[:alnum:]_]+', ' ', 'g'))) STORED,
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, project_id, path)
);
CREATE INDEX source_files_search ON source_files USING gin (search);

CREATE TABLE compliance_dossiers (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    project_id uuid,
    framework  text NOT NULL CHECK (length(btrim(framework)) BETWEEN 1 AND 128),
    control_id text NOT NULL CHECK (length(btrim(control_id)) BETWEEN 1 AND 128),
    title      text NOT NULL CHECK (length(btrim(title)) BETWEEN 1 AND 500),
    body       text NOT NULL CHECK (length(btrim(body)) > 0),
    status     text NOT NULL CHECK (status IN ('compliant', 'partial', 'gap', 'not_applicable')),
    language   text NOT NULL DEFAULT 'en',
    version    integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    recorded_by uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, id)
);
-- One dossier per control of a framework (per project; NULL project = tenant-wide).
CREATE UNIQUE INDEX compliance_dossiers_control ON compliance_dossiers
    (tenant_id, coalesce(project_id, '00000000-0000-0000-0000-000000000000'::uuid), framework, control_id);

CREATE TABLE compliance_dossier_translations (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    dossier_id uuid NOT NULL,
    language   text NOT NULL CHECK (language ~ '^[a-z]{2,3}(-[A-Za-z0-9]{2,8})?$'),
    title      text NOT NULL CHECK (length(btrim(title)) BETWEEN 1 AND 500),
    body       text NOT NULL CHECK (length(btrim(body)) > 0),
    -- The dossier version this translation was made from.
    source_version integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, dossier_id) REFERENCES compliance_dossiers (tenant_id, id),
    UNIQUE (dossier_id, language)
);

CREATE TABLE research_records (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid NOT NULL REFERENCES tenants (id),
    instance_id uuid,
    project_id  uuid,
    title       text NOT NULL CHECK (length(btrim(title)) BETWEEN 1 AND 500),
    question    text NOT NULL DEFAULT '',
    findings    text NOT NULL CHECK (length(btrim(findings)) > 0),
    sources     jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(sources) = 'array'),
    tags        jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(tags) = 'array'),
    search      tsvector GENERATED ALWAYS AS (
                    setweight(to_tsvector('english', title), 'A') ||
                    setweight(to_tsvector('english', question || ' ' || findings), 'B')) STORED,
    created_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, instance_id) REFERENCES agent_instances (tenant_id, id)
);
CREATE INDEX research_records_search ON research_records USING gin (search);
CREATE INDEX research_records_recent ON research_records (tenant_id, created_at DESC);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['constitution_rules', 'knowledge_documents', 'source_files',
        'compliance_dossiers', 'compliance_dossier_translations', 'research_records']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
            WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)$p$, t);
    END LOOP;
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON constitution_rules, knowledge_documents, source_files,
    compliance_dossiers, compliance_dossier_translations, research_records TO genesis_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON constitution_rules, knowledge_documents, source_files,
    compliance_dossiers, compliance_dossier_translations, research_records TO genesis_system;
