//! The services' database login, read from the catalog: after the migrate
//! step hands it `genesis_app` and `genesis_system` it owns nothing, has no
//! superuser or BYPASSRLS attribute and no `pg_auth_members` path to a role
//! that has one or owns the schema, cannot `SET ROLE` to the owner, and
//! `PUBLIC` has no `CONNECT` on the database. Through that login the tenant
//! path still cannot see or write another tenant's rows and the system path
//! still runs the platform loops, without bypassing row-level security. An
//! unsafe role fails the step with every violation named and nothing granted.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use common::*;
use genesis_core::{MessageDirection, TokenScope};
use genesis_store::roles::{self, RoleError, RoleViolation};
use genesis_store::{Store, StoreError};
use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

/// The login role these tests hand the services. Roles are cluster-wide and
/// shared by every test database on the server, so it is created once,
/// never dropped, and created race-safely.
const SERVICE: &str = "genesis_store_test_service";

/// Create `name` with `attributes` unless it exists; a concurrent test
/// creating it first is not an error.
async fn ensure_role(pool: &PgPool, name: &str, attributes: &str) -> anyhow::Result<()> {
    let sql = format!(
        "DO $$ BEGIN CREATE ROLE {name} {attributes};
         EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql)).execute(pool).await?;
    Ok(())
}

/// The URL of the test database as `user` (the server trusts 127.0.0.1).
fn url_as(pool: &PgPool, user: &str) -> String {
    let o = pool.connect_options();
    format!(
        "postgres://{user}@{}:{}/{}",
        o.get_host(),
        o.get_port(),
        o.get_database().unwrap()
    )
}

/// The database owner's login (who ran the migrations).
fn owner(pool: &PgPool) -> String {
    pool.connect_options().get_username().to_owned()
}

/// A store whose both pools log in as the service role.
async fn service_store(pool: &PgPool) -> anyhow::Result<(Store, PgPool)> {
    let login = PgPoolOptions::new()
        .max_connections(2)
        .connect(&url_as(pool, SERVICE))
        .await?;
    Ok((store(&login), login))
}

/// Whether `PUBLIC` has `CONNECT` on the test database.
async fn public_may_connect(pool: &PgPool) -> anyhow::Result<bool> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
                         WHERE d.datname = current_database() AND a.grantee = 0 AND a.privilege_type = 'CONNECT')",
    )
    .fetch_one(pool)
    .await?)
}

async fn prepare(pool: &PgPool) -> anyhow::Result<()> {
    ensure_role(pool, SERVICE, "LOGIN").await?;
    roles::check_service_role(&url_as(pool, &owner(pool)), SERVICE).await?;
    roles::grant_service_role(&url_as(pool, &owner(pool)), SERVICE).await?;
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_service_login_owns_nothing_reaches_no_bypass_and_cannot_become_the_owner(
    pool: PgPool,
) -> anyhow::Result<()> {
    prepare(&pool).await?;
    let owner = owner(&pool);

    let (sup, bypass, createrole): (bool, bool, bool) = sqlx::query_as(
        "SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = $1",
    )
    .bind(SERVICE)
    .fetch_one(&pool)
    .await?;
    assert!(!sup && !bypass && !createrole);

    // Owns nothing: no relation, function, type or schema of this database.
    let owned = count(
        &pool,
        "SELECT (SELECT count(*) FROM pg_class WHERE relowner = r.oid)
              + (SELECT count(*) FROM pg_proc WHERE proowner = r.oid)
              + (SELECT count(*) FROM pg_type WHERE typowner = r.oid)
              + (SELECT count(*) FROM pg_namespace WHERE nspowner = r.oid)
              + (SELECT count(*) FROM pg_database WHERE datdba = r.oid)
           FROM pg_roles r WHERE r.rolname = $1",
        SERVICE,
    )
    .await?;
    assert_eq!(owned, 0);

    // Every role reachable through pg_auth_members: exactly the two service
    // roles, neither a superuser, a BYPASSRLS role nor the owner.
    let reach: Vec<(String, bool, bool)> = sqlx::query_as(
        "WITH RECURSIVE reach(oid) AS (
             SELECT m.roleid FROM pg_auth_members m JOIN pg_roles s ON s.oid = m.member WHERE s.rolname = $1
             UNION SELECT m.roleid FROM pg_auth_members m JOIN reach r ON m.member = r.oid)
         SELECT r.rolname::text, r.rolsuper, r.rolbypassrls FROM reach x JOIN pg_roles r ON r.oid = x.oid
          ORDER BY 1",
    )
    .bind(SERVICE)
    .fetch_all(&pool)
    .await?;
    assert_eq!(
        reach,
        vec![
            ("genesis_app".to_owned(), false, false),
            ("genesis_system".to_owned(), false, false),
        ]
    );
    assert!(reach.iter().all(|(name, ..)| *name != owner));

    // No privilege granted to the login by name on any object of the schema.
    let direct = count(
        &pool,
        "SELECT count(*) FROM pg_class c, aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee
          WHERE r.rolname = $1",
        SERVICE,
    )
    .await?;
    assert_eq!(direct, 0);

    // PUBLIC has no CONNECT; the login and the owner have it.
    let public_connect = public_may_connect(&pool).await?;
    assert!(!public_connect);
    let (svc_connect, owner_connect): (bool, bool) = sqlx::query_as(
        "SELECT has_database_privilege($1, current_database(), 'CONNECT'),
                has_database_privilege($2, current_database(), 'CONNECT')",
    )
    .bind(SERVICE)
    .bind(&owner)
    .fetch_one(&pool)
    .await?;
    assert!(svc_connect && owner_connect);

    // No service role bypasses RLS any more, and every RLS table forces it.
    let bypassing: Vec<String> = sqlx::query_scalar(
        "SELECT rolname::text FROM pg_roles WHERE rolname IN ('genesis_app', 'genesis_system') AND rolbypassrls",
    )
    .fetch_all(&pool)
    .await?;
    assert_eq!(bypassing, Vec::<String>::new());
    let unforced: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relrowsecurity AND NOT c.relforcerowsecurity",
    )
    .fetch_all(&pool)
    .await?;
    assert_eq!(unforced, Vec::<String>::new());

    // The definer functions are the two justified in the migration, no more.
    let definers: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT p.proname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = 'public' AND p.prosecdef ORDER BY 1",
    )
    .fetch_all(&pool)
    .await?;
    assert_eq!(
        definers,
        vec!["genesis_bump_catalogue_epoch", "genesis_reset_instance"]
    );

    // Logged in as the service role: SET ROLE to the owner is refused.
    let (_, login) = service_store(&pool).await?;
    let mut conn = login.acquire().await?;
    let err = sqlx::query(sqlx::AssertSqlSafe(format!("SET ROLE {owner}")))
        .execute(&mut *conn)
        .await
        .unwrap_err();
    assert_eq!(
        err.as_database_error().and_then(|e| e.code()).as_deref(),
        Some("42501"),
        "{err}"
    );
    // ... and so is switching to a role it was never given.
    for role in ["genesis_app", "genesis_system"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("SET ROLE {role}")))
            .execute(&mut *conn)
            .await?;
        sqlx::query("RESET ROLE").execute(&mut *conn).await?;
    }

    // The store's own reading of the catalog agrees: the login is safe.
    let facts = roles::check_login(&url_as(&pool, SERVICE)).await?;
    assert_eq!(facts.violations(), vec![]);
    assert_eq!(facts.schema_owner.as_deref(), Some(owner.as_str()));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn through_the_service_login_rls_holds_and_the_system_path_still_runs(
    pool: PgPool,
) -> anyhow::Result<()> {
    prepare(&pool).await?;
    let (store, login) = service_store(&pool).await?;

    // System path: tenant administration and the bootstrap census.
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    let a_inst = soa(&store, a).await?.id;
    let b_inst = soa(&store, b).await?.id;
    message(&store, a, a_inst, json!({"text": "a"})).await?;
    message(&store, b, b_inst, json!({"text": "b"})).await?;
    for (t, i) in [(a, a_inst), (b, b_inst)] {
        store
            .messages()
            .append(t, i, MessageDirection::OperatorToAgent, "hello")
            .await?;
    }
    let census = store.tenants().census().await?;
    assert_eq!(
        census.iter().map(|c| (c.id, c.soa_id)).collect::<Vec<_>>(),
        vec![(a, Some(a_inst)), (b, Some(b_inst))]
    );
    // The outbox publisher sees both tenants' due events and marks them.
    let batch = store.events().begin_outbox_batch(10).await?;
    let mut tenants: Vec<Uuid> = batch.events.iter().map(|e| e.tenant_id).collect();
    tenants.sort();
    tenants.dedup();
    let mut both = vec![a, b];
    both.sort();
    assert_eq!(tenants, both);
    let ids: Vec<Uuid> = batch.events.iter().map(|e| e.id).collect();
    assert_eq!(batch.mark_published(&ids).await?, ids.len() as u64);
    // Token lookup and the global config layer.
    let hash = genesis_store::tokens::hash_token("service-login-token");
    store
        .tokens()
        .insert(Some(a), TokenScope::Operator, &hash, "op", None)
        .await?;
    assert_eq!(
        store.tokens().find_by_hash(&hash).await?.unwrap().tenant_id,
        Some(a)
    );
    store
        .config()
        .set(None, "AgentDispatcher:TickMaxTurns", "9")
        .await?;
    assert_eq!(tick_max_turns(&store, Some(b)).await?.as_deref(), Some("9"));

    // Tenant path: A sees nothing of B and cannot write as B.
    let seen: Vec<Uuid> = store
        .instances()
        .list(a, None)
        .await?
        .iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(seen, vec![a_inst]);
    assert_instance_hidden(&store, a, b_inst).await;
    assert_eq!(store.events().list(a, b_inst).await?.len(), 0);
    let err = in_tenant_tx(
        &store,
        a,
        "INSERT INTO agent_messages (tenant_id, instance_id, direction, body)
         VALUES ($1, $2, 'operator_to_agent', 'forged')",
        &[b, b_inst],
    )
    .await?
    .unwrap_err();
    assert!(
        matches!(err, StoreError::PermissionDenied { .. }),
        "{err:?}"
    );
    // A tenant transaction of A cannot read B's events even by id.
    let b_events = count_in_tenant_tx(
        &store,
        a,
        "SELECT count(*) FROM agent_event_queue WHERE tenant_id = $1",
        &[b],
    )
    .await?;
    assert_eq!(b_events, 0);

    // The system role no longer bypasses RLS: a table it has no policy for
    // shows it nothing, though both tenants have rows there.
    let events_seen = count_as(
        &login,
        "genesis_system",
        "SELECT count(*) FROM agent_event_queue",
    )
    .await?;
    assert!(events_seen >= 2, "the outbox policy lets it read the queue");
    let messages_seen = count_as(
        &login,
        "genesis_system",
        "SELECT count(*) FROM agent_messages",
    )
    .await?;
    assert_eq!(messages_seen, 0);
    let messages_there: i64 = sqlx::query_scalar("SELECT count(*) FROM agent_messages")
        .fetch_one(&pool)
        .await?;
    assert_eq!(messages_there, 2);
    let err = as_system(
        &login,
        "INSERT INTO system_configs (tenant_id, key, value) VALUES ($1, 'AgentDispatcher:TickMaxTurns', '1')",
        Some(a),
    )
    .await?
    .unwrap_err();
    assert!(
        matches!(err, StoreError::PermissionDenied { .. }),
        "the system path writes the global layer only: {err:?}"
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_unsafe_role_fails_the_migrate_step_naming_the_violation_and_gains_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let owner_url = url_as(&pool, &owner(&pool));

    // The owner itself, a superuser here.
    match roles::grant_service_role(&owner_url, &owner(&pool)).await {
        Err(RoleError::Unsafe { violations, .. }) => {
            assert_eq!(violations, vec![RoleViolation::IsSchemaOwner])
        }
        other => panic!("{other:?}"),
    }
    // A BYPASSRLS role.
    let bypass = "genesis_store_test_bypassrls";
    ensure_role(&pool, bypass, "NOLOGIN BYPASSRLS").await?;
    let err = roles::grant_service_role(&owner_url, bypass)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RoleError::Unsafe { violations, .. } if violations == &vec![RoleViolation::BypassRls]),
        "{err}"
    );
    assert!(err.to_string().contains("has BYPASSRLS"), "{err}");
    // The check migrate makes before any migration runs refuses it too.
    assert!(matches!(
        roles::check_service_role(&owner_url, bypass).await,
        Err(RoleError::Unsafe { .. })
    ));
    // A role owning a table of this database.
    let owning = "genesis_store_test_owning";
    ensure_role(&pool, owning, "NOLOGIN").await?;
    sqlx::query("CREATE TABLE stray (id int)")
        .execute(&pool)
        .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER TABLE stray OWNER TO {owning}"
    )))
    .execute(&pool)
    .await?;
    let err = roles::grant_service_role(&owner_url, owning)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("owns 1 object(s)") && err.to_string().contains("stray"),
        "{err}"
    );
    // A member of that owning role, through it.
    let member = "genesis_store_test_owning_member";
    ensure_role(&pool, member, "LOGIN").await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("GRANT {owning} TO {member}")))
        .execute(&pool)
        .await?;
    let err = roles::grant_service_role(&owner_url, member)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "it can SET ROLE to \"{owning}\", which owns objects"
        )),
        "{err}"
    );

    // None of them was given a service role, and PUBLIC's CONNECT stands.
    let granted = count(
        &pool,
        "SELECT count(*) FROM pg_auth_members m JOIN pg_roles s ON s.oid = m.member
          WHERE s.rolname = ANY($1) AND m.roleid IN ('genesis_app'::regrole, 'genesis_system'::regrole)",
        vec![bypass, owning, member],
    )
    .await?;
    assert_eq!(granted, 0);
    let public_connect = public_may_connect(&pool).await?;
    assert!(public_connect);

    // A role that does not exist, and names the platform may not use.
    let err = roles::grant_service_role(&owner_url, "genesis_store_test_absent")
        .await
        .unwrap_err();
    assert!(matches!(err, RoleError::Missing(_)), "{err}");
    assert!(matches!(
        roles::grant_service_role(&owner_url, "genesis_system").await,
        Err(RoleError::InvalidName { .. })
    ));

    // The services' start-up check refuses the owner's (superuser) login.
    match roles::check_login(&owner_url).await {
        Err(RoleError::Unsafe { role, violations }) => {
            assert_eq!(role, owner(&pool));
            assert!(
                violations.contains(&RoleViolation::Superuser),
                "{violations:?}"
            );
            assert!(
                violations.contains(&RoleViolation::IsSchemaOwner),
                "{violations:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    Ok(())
}
