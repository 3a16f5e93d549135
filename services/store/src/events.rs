//! `agent_event_queue`: enqueue (the control side's only way in), the
//! idempotent escalation resume, reads, and the outbox batch the publisher
//! uses. Events are consumed, never deleted. Must never be called on behalf
//! of an agent: the agent never enqueues.

use chrono::{DateTime, Utc};
use genesis_core::AgentEventKind;
use serde::Deserialize;
use sqlx::{PgConnection, Postgres, Transaction};
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{decode, decode_all};
use crate::store::Store;

/// An `agent_event_queue` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EventRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub sequence_number: i64,
    pub event_kind: AgentEventKind,
    pub payload: serde_json::Value,
    pub visible_at: DateTime<Utc>,
    pub published_at: Option<DateTime<Utc>>,
    pub claimed_session: Option<Uuid>,
    pub attempts: i32,
    pub consumed_at: Option<DateTime<Utc>>,
    pub dead_lettered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub attention_request_id: Option<Uuid>,
    /// How many times the event was re-armed after its instance was
    /// resumed; part of the outbox message id.
    #[serde(default)]
    pub publish_epoch: i32,
}

impl EventRow {
    /// The JetStream `Nats-Msg-Id` of this event's publish: the event id,
    /// suffixed with `.<epoch>` once re-armed, so a re-publish after a
    /// resume is never dropped as a duplicate of the first publish while a
    /// re-publish of the same epoch (a lost mark) still is.
    pub fn message_id(&self) -> String {
        if self.publish_epoch == 0 {
            self.id.to_string()
        } else {
            format!("{}.{}", self.id, self.publish_epoch)
        }
    }
}

/// The result of an enqueue: the event, and whether this call created it
/// (`false`: a pending heartbeat or the escalation's resume already existed).
#[derive(Debug, Clone, PartialEq)]
pub struct EnqueueOutcome {
    pub event: EventRow,
    pub created: bool,
}

#[derive(Deserialize)]
struct RawEnqueue {
    outcome: String,
    what: Option<String>,
    event: Option<EventRow>,
}

/// Repository handle, from [`Store::events`].
pub struct Events<'a> {
    store: &'a Store,
}

impl Store {
    /// The per-instance event queue.
    pub fn events(&self) -> Events<'_> {
        Events { store: self }
    }
}

impl Events<'_> {
    async fn call(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        kind: AgentEventKind,
        payload: &serde_json::Value,
        visible_at: Option<DateTime<Utc>>,
        attention_request_id: Option<Uuid>,
    ) -> Result<EnqueueOutcome, StoreError> {
        // Checked before a connection is taken, so an oversized payload
        // costs no round trip.
        check_payload(self.store.options().max_event_payload_bytes, payload)?;
        let mut conn = self.store.tenant_pool().acquire().await?;
        enqueue_in(
            &mut conn,
            self.store.options().max_event_payload_bytes,
            tenant_id,
            instance_id,
            kind,
            payload,
            visible_at,
            attention_request_id,
        )
        .await
    }

    /// Enqueue an event with the instance's next sequence number and notify
    /// `genesis_due`, in one transaction. `visible_at` `None` means now. An
    /// `AgentTick` while one is pending returns the pending one
    /// (`created: false`). `OperatorAnsweredEscalation` must go through
    /// [`Events::enqueue_answered_escalation`].
    pub async fn enqueue(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        kind: AgentEventKind,
        payload: &serde_json::Value,
        visible_at: Option<DateTime<Utc>>,
    ) -> Result<EnqueueOutcome, StoreError> {
        if kind == AgentEventKind::OperatorAnsweredEscalation {
            return Err(StoreError::invalid(
                "event_kind",
                "OperatorAnsweredEscalation needs its attention request: use enqueue_answered_escalation",
            ));
        }
        self.call(tenant_id, instance_id, kind, payload, visible_at, None)
            .await
    }

    /// Enqueue the resume of an answered escalation, visible now. Idempotent
    /// on `attention_request_id`: a second call (even concurrent) returns the
    /// first event with `created: false`.
    pub async fn enqueue_answered_escalation(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        attention_request_id: Uuid,
        payload: &serde_json::Value,
    ) -> Result<EnqueueOutcome, StoreError> {
        self.call(
            tenant_id,
            instance_id,
            AgentEventKind::OperatorAnsweredEscalation,
            payload,
            None,
            Some(attention_request_id),
        )
        .await
    }

    /// Every event of an instance, in sequence order.
    pub async fn list(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
    ) -> Result<Vec<EventRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(e) FROM agent_event_queue e WHERE instance_id = $1 ORDER BY sequence_number",
        )
        .bind(instance_id)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// The unconsumed, un-dead-lettered events of an instance.
    pub async fn pending(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
    ) -> Result<Vec<EventRow>, StoreError> {
        Ok(self
            .list(tenant_id, instance_id)
            .await?
            .into_iter()
            .filter(|e| e.consumed_at.is_none() && e.dead_lettered_at.is_none())
            .collect())
    }

    /// Open an outbox batch (system pool, all tenants): up to `limit` due,
    /// unpublished events, locked `FOR UPDATE SKIP LOCKED` until the batch is
    /// marked or dropped, so several publishers never publish one event twice
    /// in the same round.
    pub async fn begin_outbox_batch(&self, limit: i64) -> Result<OutboxBatch, StoreError> {
        if limit <= 0 {
            return Err(StoreError::invalid("limit", "must be positive"));
        }
        let mut tx = self.store.system_pool().begin().await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(e) FROM agent_event_queue e
             WHERE published_at IS NULL AND consumed_at IS NULL AND dead_lettered_at IS NULL
               AND visible_at <= now()
             ORDER BY visible_at
             LIMIT $1
             FOR UPDATE SKIP LOCKED",
        )
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        Ok(OutboxBatch {
            tx,
            events: decode_all(rows)?,
        })
    }

    /// The earliest future `visible_at` of an unpublished event (the
    /// publisher's timer), across tenants.
    pub async fn next_unpublished_visible_at(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let at: Option<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT min(visible_at) FROM agent_event_queue
             WHERE published_at IS NULL AND consumed_at IS NULL AND dead_lettered_at IS NULL",
        )
        .fetch_one(self.store.system_pool())
        .await?;
        Ok(at)
    }
}

fn check_payload(limit: usize, payload: &serde_json::Value) -> Result<(), StoreError> {
    let size = serde_json::to_vec(payload)?.len();
    if size > limit {
        return Err(StoreError::PayloadTooLarge { size, limit });
    }
    Ok(())
}

/// `genesis_enqueue_event` on the caller's connection: standalone it is one
/// autocommit statement; inside a tenant transaction (the decision
/// transaction of [`crate::decisions`]) the event commits or rolls back with
/// everything else. The payload limit is checked first.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn enqueue_in(
    conn: &mut PgConnection,
    max_payload_bytes: usize,
    tenant_id: Uuid,
    instance_id: Uuid,
    kind: AgentEventKind,
    payload: &serde_json::Value,
    visible_at: Option<DateTime<Utc>>,
    attention_request_id: Option<Uuid>,
) -> Result<EnqueueOutcome, StoreError> {
    check_payload(max_payload_bytes, payload)?;
    let raw: serde_json::Value =
        sqlx::query_scalar("SELECT genesis_enqueue_event($1, $2, $3, $4, $5, $6)")
            .bind(tenant_id)
            .bind(instance_id)
            .bind(kind.as_str())
            .bind(payload)
            .bind(visible_at)
            .bind(attention_request_id)
            .fetch_one(&mut *conn)
            .await?;
    let raw: RawEnqueue = decode(raw)?;
    match (raw.outcome.as_str(), raw.event) {
        ("created", Some(event)) => Ok(EnqueueOutcome {
            event,
            created: true,
        }),
        ("existing", Some(event)) => Ok(EnqueueOutcome {
            event,
            created: false,
        }),
        ("not_found", _) => Err(StoreError::not_found(
            raw.what.unwrap_or_else(|| "agent instance".to_owned()),
        )),
        (other, _) => Err(StoreError::Database(format!(
            "unexpected enqueue outcome {other:?}"
        ))),
    }
}

/// A locked batch of due, unpublished events (see
/// [`Events::begin_outbox_batch`]).
pub struct OutboxBatch {
    tx: Transaction<'static, Postgres>,
    /// The events to publish.
    pub events: Vec<EventRow>,
}

impl OutboxBatch {
    /// Set `published_at` on the given events of this batch (the ones whose
    /// JetStream ack arrived) and release the locks.
    ///
    /// The statement is planned afresh on every call (not kept prepared):
    /// a generic plan made while the queue was a few pages long is a
    /// sequential scan, and a kept statement would go on scanning the whole
    /// queue after it grew, until the table's next ANALYZE (it once took
    /// 5.5 s of a 50 s run). A plan with the batch's ids is a primary
    /// key lookup at every size.
    pub async fn mark_published(mut self, event_ids: &[Uuid]) -> Result<u64, StoreError> {
        let done =
            sqlx::query("UPDATE agent_event_queue SET published_at = now() WHERE id = ANY($1)")
                .persistent(false)
                .bind(event_ids)
                .execute(&mut *self.tx)
                .await?
                .rows_affected();
        self.tx.commit().await?;
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use genesis_core::{AgentType, InstanceStatus};
    use serde_json::json;
    use sqlx::PgPool;

    use super::*;
    use crate::instances::NewInstance;
    use crate::store::StoreOptions;

    /// The publisher marks a batch every few milliseconds on the same
    /// connection while the queue grows from empty: the mark must not be
    /// a statement the server keeps (and may freeze a small table's plan
    /// for), so no call of it has a kept, generically planned statement.
    #[sqlx::test(migrator = "crate::MIGRATOR")]
    async fn the_outbox_mark_is_never_kept_with_a_frozen_plan(pool: PgPool) -> anyhow::Result<()> {
        let store = Store::from_pool_with(
            &pool,
            StoreOptions {
                system_pool_size: 1,
                ..StoreOptions::default()
            },
        );
        let tenant = store.tenants().create("outbox-plan").await?.id;
        let mut new = NewInstance::foundational(AgentType::Soa, InstanceStatus::Active);
        new.seed_initialized = false;
        let instance = store.instances().create(tenant, new).await?.id;
        let mut marked = 0;
        for n in 0..8 {
            store
                .events()
                .enqueue(
                    tenant,
                    instance,
                    AgentEventKind::OperatorMessage,
                    &json!({"message": n}),
                    None,
                )
                .await?;
            let batch = store.events().begin_outbox_batch(10).await?;
            let ids: Vec<Uuid> = batch.events.iter().map(|e| e.id).collect();
            marked += batch.mark_published(&ids).await?;
        }
        assert_eq!(marked, 8, "each round marked its one new event");
        // The same (only) system connection the marks ran on.
        let kept: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements
              WHERE statement LIKE 'UPDATE agent_event_queue SET published_at%'",
        )
        .fetch_all(store.system_pool())
        .await?;
        assert_eq!(kept, vec![], "the mark was kept as a prepared statement");
        // The control: a kept statement on that connection is listed.
        sqlx::query("SELECT count(*) FROM agent_event_queue WHERE id = ANY($1)")
            .bind(Vec::<Uuid>::new())
            .fetch_one(store.system_pool())
            .await?;
        let listed: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_prepared_statements
              WHERE statement LIKE 'SELECT count(*) FROM agent_event_queue WHERE id = ANY%'",
        )
        .fetch_one(store.system_pool())
        .await?;
        assert_eq!(listed, 1, "the view sees this connection's kept statements");
        Ok(())
    }
}
