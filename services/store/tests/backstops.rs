//! The unique indexes behind DESIGN §5.2 (at most one pending heartbeat per
//! instance) and §5.6 (resuming an escalation is idempotent), tested on their
//! own: the store's functions lock the instance row and look before they
//! insert, so their tests would still pass with the indexes dropped. Here a
//! service-role transaction inserts the forbidden row directly, alone and
//! racing a second one, and the database must refuse it.

mod common;

use common::*;
use genesis_core::{AgentEventKind, AttentionKind};
use genesis_store::{NewAttentionRequest, Store, StoreError};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

/// Insert an event row the way no store function does: straight into the
/// table, through a tenant transaction of the service role, next sequence
/// number, no lock on the instance.
const RAW_INSERT: &str = "INSERT INTO agent_event_queue
        (tenant_id, instance_id, sequence_number, event_kind, attention_request_id)
     SELECT $1, $2, coalesce(max(sequence_number), 0) + 1, $3, $4
       FROM agent_event_queue WHERE instance_id = $2
     RETURNING id";

async fn raw_insert(
    store: &Store,
    t: Uuid,
    instance: Uuid,
    kind: &str,
    request: Option<Uuid>,
) -> Result<Uuid, StoreError> {
    let mut tx = store.tenant_tx(t).await?;
    let id = sqlx::query_scalar(RAW_INSERT)
        .bind(t)
        .bind(instance)
        .bind(kind)
        .bind(request)
        .fetch_one(tx.conn())
        .await?;
    tx.commit().await?;
    Ok(id)
}

fn is_conflict_on(err: &StoreError, index: &str) -> bool {
    matches!(err, StoreError::Conflict { what } if what.contains(index))
}

async fn pending_heartbeats(pool: &PgPool, instance: Uuid) -> anyhow::Result<i64> {
    count(
        pool,
        "SELECT count(*) FROM agent_event_queue WHERE instance_id = $1 AND event_kind = 'AgentTick'
            AND consumed_at IS NULL AND dead_lettered_at IS NULL",
        instance,
    )
    .await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_second_pending_heartbeat_is_refused_by_the_database_itself(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let first = store
        .events()
        .enqueue(t, inst.id, AgentEventKind::AgentTick, &json!({}), None)
        .await?;
    assert!(first.created);

    let err = raw_insert(&store, t, inst.id, "AgentTick", None)
        .await
        .expect_err("a second pending heartbeat inserted");
    assert!(
        is_conflict_on(&err, "agent_event_queue_one_pending_heartbeat"),
        "{err:?}"
    );
    assert_eq!(pending_heartbeats(&pool, inst.id).await?, 1);

    // Any other kind is not limited, and a dead-lettered heartbeat is no
    // longer pending: its successor goes in.
    raw_insert(&store, t, inst.id, "OperatorMessage", None).await?;
    sqlx::query("UPDATE agent_event_queue SET dead_lettered_at = now() WHERE id = $1")
        .bind(first.event.id)
        .execute(&pool)
        .await?;
    raw_insert(&store, t, inst.id, "AgentTick", None).await?;
    assert_eq!(pending_heartbeats(&pool, inst.id).await?, 1);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn two_racing_heartbeat_inserts_leave_one_pending(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    // The first insert holds its index entry uncommitted; the second, with a
    // different sequence number and no instance lock, must wait on it and
    // fail once it commits.
    let mut first = store.tenant_tx(t).await?;
    sqlx::query(RAW_INSERT)
        .bind(t)
        .bind(inst.id)
        .bind("AgentTick")
        .bind(None::<Uuid>)
        .execute(first.conn())
        .await?;
    let racer = tokio::spawn({
        let store = store.clone();
        async move {
            let mut tx = store.tenant_tx(t).await?;
            let out = sqlx::query(
                "INSERT INTO agent_event_queue (tenant_id, instance_id, sequence_number, event_kind)
                 VALUES ($1, $2, 1000, 'AgentTick')",
            )
            .bind(t)
            .bind(inst.id)
            .execute(tx.conn())
            .await;
            out.map_err(StoreError::from)?;
            tx.commit().await
        }
    });
    // Wait until the racer is blocked on the first insert's index entry.
    let mut waited = 0;
    loop {
        let blocked: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND datname = current_database()
                AND query LIKE '%VALUES ($1, $2, 1000, ''AgentTick'')%'",
        )
        .fetch_one(&pool)
        .await?;
        if blocked > 0 {
            break;
        }
        waited += 1;
        assert!(waited < 500, "the racing insert never waited on the first");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    first.commit().await?;
    let err = racer.await?.expect_err("both racing heartbeats committed");
    assert!(
        is_conflict_on(&err, "agent_event_queue_one_pending_heartbeat"),
        "{err:?}"
    );
    assert_eq!(pending_heartbeats(&pool, inst.id).await?, 1);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_second_resume_of_one_escalation_is_refused_by_the_database_itself(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let request = |title: &str| NewAttentionRequest {
        instance_id: Some(inst.id),
        kind: AttentionKind::Decision,
        title: title.into(),
        body: "two options".into(),
        options: json!(["yes", "no"]),
        metadata: json!({"source": "soa", "soaInstanceId": inst.id}),
    };
    let ar = store.attention().create(t, request("Ship it?")).await?;
    let resumed = store
        .events()
        .enqueue_answered_escalation(t, inst.id, ar.id, &json!({"resolution": "yes"}))
        .await?;
    assert!(resumed.created);

    let second_resume_is_refused = || async {
        let err = raw_insert(
            &store,
            t,
            inst.id,
            "OperatorAnsweredEscalation",
            Some(ar.id),
        )
        .await
        .expect_err("a second resume of one escalation inserted");
        assert!(
            is_conflict_on(&err, "agent_event_queue_resume_dedup"),
            "{err:?}"
        );
    };
    second_resume_is_refused().await;
    // Consumption does not free the key: an escalation resumes once, ever.
    sqlx::query("UPDATE agent_event_queue SET consumed_at = now() WHERE id = $1")
        .bind(resumed.event.id)
        .execute(&pool)
        .await?;
    second_resume_is_refused().await;
    // Another escalation's resume is its own key.
    let other = store.attention().create(t, request("Roll back?")).await?;
    raw_insert(
        &store,
        t,
        inst.id,
        "OperatorAnsweredEscalation",
        Some(other.id),
    )
    .await?;
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM agent_event_queue WHERE attention_request_id = $1",
            ar.id
        )
        .await?,
        1
    );
    Ok(())
}
