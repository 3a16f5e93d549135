-- The platform role genesis_system stops bypassing row-level security. Until
-- now it carried BYPASSRLS, so the login that may SET ROLE to it (the
-- services' login) was one statement away from every tenant's rows, and
-- nothing in the schema said which rows the platform loops actually touch.
-- From here on every RLS-protected table states, per command, what the
-- system path may see and write; a table without such a policy is closed to
-- it (only the tenant_isolation policy applies, which matches nothing while
-- genesis.tenant_id is unset, as it always is on the system pool).
--
-- What the system path does, and the policies below that allow exactly it:
--   tenants              create, read, list, the bootstrap census, the gate and
--                        feature-flag updates; the api_tokens pod-tenants
--                        trigger and dashboard sign-in read it too.
--   agent_instances      read by the bootstrap census (the oldest SOA of each
--                        tenant); never written on the system path.
--   agent_event_queue    the outbox publisher: read due, unpublished events of
--                        every tenant and set published_at.
--   api_tokens           mint, look up by hash (every authenticated call),
--                        list, revoke.
--   dashboard_sessions   open, authenticate, sign out.
--   system_configs       the global layer only (tenant_id IS NULL): a tenant's
--                        own layer is written on the tenant path, never here.
-- llm_pricing and catalogue_epoch are platform tables without RLS.
--
-- The two SECURITY DEFINER functions stay definer, each for one write the
-- service roles may not make themselves, and neither reaches beyond the
-- caller's own scope: genesis_reset_instance (the ledger is append-only for
-- both service roles; it refuses any tenant but the transaction's own and
-- filters every statement by it) and genesis_bump_catalogue_epoch (moves the
-- platform-wide counter that no service role may set; touches no tenant row).
-- The role test in genesis-store pins that list, so a new definer function
-- fails it until it is justified here.

-- Policies first, so the moment genesis_system loses BYPASSRLS this database
-- already grants it what it needs.
CREATE POLICY system_read ON tenants FOR SELECT TO genesis_system USING (true);
CREATE POLICY system_insert ON tenants FOR INSERT TO genesis_system WITH CHECK (true);
CREATE POLICY system_update ON tenants FOR UPDATE TO genesis_system USING (true) WITH CHECK (true);

CREATE POLICY system_census ON agent_instances FOR SELECT TO genesis_system USING (true);

CREATE POLICY system_outbox_read ON agent_event_queue FOR SELECT TO genesis_system USING (true);
CREATE POLICY system_outbox_mark ON agent_event_queue FOR UPDATE TO genesis_system
    USING (true) WITH CHECK (true);

CREATE POLICY system_read ON api_tokens FOR SELECT TO genesis_system USING (true);
CREATE POLICY system_insert ON api_tokens FOR INSERT TO genesis_system WITH CHECK (true);
CREATE POLICY system_update ON api_tokens FOR UPDATE TO genesis_system USING (true) WITH CHECK (true);

CREATE POLICY system_read ON dashboard_sessions FOR SELECT TO genesis_system USING (true);
CREATE POLICY system_insert ON dashboard_sessions FOR INSERT TO genesis_system WITH CHECK (true);
CREATE POLICY system_update ON dashboard_sessions FOR UPDATE TO genesis_system
    USING (true) WITH CHECK (true);

CREATE POLICY system_global_layer ON system_configs FOR ALL TO genesis_system
    USING (tenant_id IS NULL) WITH CHECK (tenant_id IS NULL);

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
