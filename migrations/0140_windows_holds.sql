-- Windows-lane holds shared by every control replica.
--
-- A coder holds one Windows machine per (tenant, holder) from its first
-- Windows verb until it releases it, its task settles, the lease expires or
-- the pool evicts the session. The hold lived in one control process's
-- memory, so with two replicas a coder whose next call reached the other one
-- leased a second machine, its release answered not_held, and a restart lost
-- every hold. Here the hold is a row every replica reads.
--
-- A row is first claimed in state 'leasing' (no lease yet) by the one replica
-- whose insert wins the primary key; the others wait for it to become 'held'.
-- A claim whose claimer died (claim_expires_at passed) or a hold whose lease
-- expired (lease_expires_at passed, by the pool's word) may be taken over by
-- the next claim. Every claim draws a new revision from one sequence, so a
-- revision never repeats: a replica that fills, releases or drops a hold
-- names the revision it saw, and a stale one changes nothing of a newer hold.
CREATE SEQUENCE windows_hold_revisions AS bigint;

CREATE TABLE windows_holds (
    tenant_id        uuid NOT NULL REFERENCES tenants (id),
    holder           text NOT NULL CHECK (length(btrim(holder)) > 0 AND length(holder) <= 256),
    revision         bigint NOT NULL,
    state            text NOT NULL CHECK (state IN ('leasing', 'held')),
    -- While 'leasing': when a waiter may take the claim over.
    claim_expires_at timestamptz,
    lease_id         text CHECK (length(lease_id) BETWEEN 1 AND 512),
    session_id       text CHECK (length(session_id) BETWEEN 1 AND 512),
    host             text CHECK (length(host) <= 512),
    -- NULL: the pool named no expiry.
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, holder),
    CHECK (
        (state = 'leasing' AND claim_expires_at IS NOT NULL AND lease_id IS NULL
            AND session_id IS NULL AND host IS NULL AND lease_expires_at IS NULL)
        OR (state = 'held' AND claim_expires_at IS NULL AND lease_id IS NOT NULL
            AND session_id IS NOT NULL AND host IS NOT NULL)
    )
);

ALTER TABLE windows_holds ENABLE ROW LEVEL SECURITY;
ALTER TABLE windows_holds FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON windows_holds
    USING (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = nullif(current_setting('genesis.tenant_id', true), '')::uuid);

GRANT SELECT, INSERT, UPDATE, DELETE ON windows_holds TO genesis_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON windows_holds TO genesis_system;
GRANT USAGE ON SEQUENCE windows_hold_revisions TO genesis_app;
GRANT USAGE ON SEQUENCE windows_hold_revisions TO genesis_system;
