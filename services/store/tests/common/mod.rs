//! Shared fixtures of the store's database tests: a store on the sqlx::test
//! database, tenants, instances and a one-call tick helper. Must never mock
//! the database: every helper goes through the real store.
#![allow(dead_code)]

use std::time::Duration;

use genesis_core::{
    AgentDecisionKind, AgentDispatcherOptions, AgentEventKind, AgentType, InstanceStatus, Phase,
};
use genesis_store::{
    ClaimOutcome, CompletedTurn, EnqueueOutcome, InstanceRow, NewInstance, Store, StoreError,
    StoreOptions, TickClaim, TickCompletion, TickDecision,
};
use sqlx::PgPool;
use uuid::Uuid;

pub fn store(pool: &PgPool) -> Store {
    Store::from_pool_with(
        pool,
        StoreOptions {
            tenant_pool_size: 20,
            system_pool_size: 4,
            ..StoreOptions::default()
        },
    )
}

pub async fn tenant(store: &Store, name: &str) -> anyhow::Result<Uuid> {
    Ok(store.tenants().create(name).await?.id)
}

/// An active SOA with no seeded event.
pub async fn soa(store: &Store, tenant: Uuid) -> anyhow::Result<InstanceRow> {
    let mut new = NewInstance::foundational(AgentType::Soa, InstanceStatus::Active);
    new.seed_initialized = false;
    Ok(store.instances().create(tenant, new).await?)
}

/// An operator message to `instance`, visible now.
pub async fn message(
    store: &Store,
    tenant: Uuid,
    instance: Uuid,
    payload: serde_json::Value,
) -> anyhow::Result<EnqueueOutcome> {
    Ok(store
        .events()
        .enqueue(
            tenant,
            instance,
            AgentEventKind::OperatorMessage,
            &payload,
            None,
        )
        .await?)
}

/// Run one statement as the service role `genesis_system` on a connection
/// of `pool` (`id`: its one uuid parameter, if any) and give back its
/// outcome; the role is reset either way.
pub async fn as_system(
    pool: &PgPool,
    sql: &str,
    id: Option<Uuid>,
) -> anyhow::Result<Result<(), genesis_store::StoreError>> {
    let mut conn = pool.acquire().await?;
    sqlx::query("SET ROLE genesis_system")
        .execute(&mut *conn)
        .await?;
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()));
    if let Some(id) = id {
        query = query.bind(id);
    }
    let out = query
        .execute(&mut *conn)
        .await
        .map(|_| ())
        .map_err(genesis_store::StoreError::from);
    sqlx::query("RESET ROLE").execute(&mut *conn).await?;
    Ok(out)
}

pub const TTL: Duration = Duration::from_secs(60);

pub async fn claim(store: &Store, tenant: Uuid, instance: Uuid) -> anyhow::Result<TickClaim> {
    match store
        .claim_tick(tenant, instance, Uuid::new_v4(), TTL, 5)
        .await?
    {
        ClaimOutcome::Claimed(c) => Ok(*c),
        other => anyhow::bail!("expected a claim, got {other:?}"),
    }
}

pub fn derived(kind: AgentDecisionKind, phase: Phase, planned: bool) -> TickDecision {
    TickDecision::Derived {
        kind,
        phase,
        planned,
    }
}

pub async fn complete_planned(
    store: &Store,
    tenant: Uuid,
    claim: &TickClaim,
) -> anyhow::Result<CompletedTurn> {
    let completion = TickCompletion::new(
        claim.event.id,
        derived(AgentDecisionKind::Planned, Phase::Idle, true),
    );
    Ok(store
        .complete_tick(
            tenant,
            claim.instance.id,
            claim.session,
            completion,
            &AgentDispatcherOptions::default(),
        )
        .await?)
}

/// Count rows as the superuser (bypasses RLS): the test's view of the truth.
/// `sql` takes one parameter, `bind`.
pub async fn count<'q, B>(pool: &PgPool, sql: &'static str, bind: B) -> anyhow::Result<i64>
where
    B: 'q + Send + sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    Ok(sqlx::query_scalar(sql).bind(bind).fetch_one(pool).await?)
}

/// Run one statement (`binds`: its uuid parameters, in order) in a tenant
/// transaction of `tenant`, rolled back after; the rows it touched, or the
/// store's reading of its error.
pub async fn in_tenant_tx(
    store: &Store,
    tenant: Uuid,
    sql: &str,
    binds: &[Uuid],
) -> anyhow::Result<Result<u64, StoreError>> {
    let mut tx = store.tenant_tx(tenant).await?;
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()));
    for id in binds {
        query = query.bind(*id);
    }
    let out = query
        .execute(tx.conn())
        .await
        .map(|r| r.rows_affected())
        .map_err(StoreError::from);
    tx.rollback().await?;
    Ok(out)
}

/// What a `count(*)` query (`binds`: its uuid parameters, in order) counts
/// in a tenant transaction of `tenant`, rolled back after.
pub async fn count_in_tenant_tx(
    store: &Store,
    tenant: Uuid,
    sql: &str,
    binds: &[Uuid],
) -> anyhow::Result<i64> {
    let mut tx = store.tenant_tx(tenant).await?;
    let mut query = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()));
    for id in binds {
        query = query.bind(*id);
    }
    let n = query.fetch_one(tx.conn()).await?;
    tx.rollback().await?;
    Ok(n)
}

/// What a `count(*)` query counts on a connection of `pool` that has set
/// its role to `role` (reset after).
pub async fn count_as(pool: &PgPool, role: &str, sql: &str) -> anyhow::Result<i64> {
    let mut conn = pool.acquire().await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("SET ROLE {role}")))
        .execute(&mut *conn)
        .await?;
    let n = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(&mut *conn)
        .await?;
    sqlx::query("RESET ROLE").execute(&mut *conn).await?;
    Ok(n)
}

/// `instance` is not `tenant`'s: scoped to `tenant`, the repositories find
/// no such instance to read or to enqueue an event to.
pub async fn assert_instance_hidden(store: &Store, tenant: Uuid, instance: Uuid) {
    assert!(matches!(
        store.instances().get(tenant, instance).await,
        Err(StoreError::NotFound { .. })
    ));
    let enqueued = message(store, tenant, instance, serde_json::json!({})).await;
    assert!(matches!(
        enqueued
            .as_ref()
            .map_err(|e| e.downcast_ref::<StoreError>()),
        Err(Some(StoreError::NotFound { .. }))
    ));
}

/// The `AgentDispatcher:TickMaxTurns` setting as `tenant` reads it (its own
/// layer, else the global one; `None`: the global layer alone).
pub async fn tick_max_turns(store: &Store, tenant: Option<Uuid>) -> anyhow::Result<Option<String>> {
    Ok(store
        .config()
        .get(tenant, "AgentDispatcher:TickMaxTurns")
        .await?)
}

/// A bare provenance record (`llm_call_snapshots`) of `instance`, written
/// directly (superuser, so the keys and checks alone stand), for tests of
/// the rows below it; its id.
pub async fn snapshot_row(pool: &PgPool, tenant: Uuid, instance: Uuid) -> anyhow::Result<Uuid> {
    Ok(sqlx::query_scalar(
        "INSERT INTO llm_call_snapshots (tenant_id, instance_id, invocation_id, site_id, requested_model)
         VALUES ($1, $2, 'inv-1', 'Agent:Planning', 'scripted') RETURNING id",
    )
    .bind(tenant)
    .bind(instance)
    .fetch_one(pool)
    .await?)
}
