//! `agent_instances`: create (entering the foundational phase), read, list,
//! status changes, the workset-complete terminator and the release of a
//! lease whose claim cannot run. Must never write
//! `active_mode` (only `modes::set_active_mode` does) nor the tick counters,
//! phase or next tick (only `tick::complete_tick` does).

use std::time::Duration;

use genesis_core::{AgentEventKind, AgentType, InstanceStatus};
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{decode, decode_all};
use crate::store::Store;

/// The row type lives with the rules that read it, in genesis-core.
pub use genesis_core::instance::InstanceRow;

/// What [`Instances::create`] needs.
#[derive(Debug, Clone)]
pub struct NewInstance {
    pub agent_type: AgentType,
    pub status: InstanceStatus,
    /// The redactor's bound call-site, if any.
    pub call_site_id: Option<String>,
    /// Foundational phase length (spec §3.6, default 24 h); `None` creates
    /// the instance outside the foundational phase.
    pub workset_deadline: Option<Duration>,
    /// Seed an `AgentInitialized` event in the same transaction.
    pub seed_initialized: bool,
}

impl NewInstance {
    /// A new instance of `agent_type` in the foundational phase with the
    /// default deadline, seeded `AgentInitialized` when active.
    pub fn foundational(agent_type: AgentType, status: InstanceStatus) -> Self {
        Self {
            agent_type,
            status,
            call_site_id: None,
            workset_deadline: Some(
                genesis_core::AgentDispatcherOptions::default().workset_deadline,
            ),
            seed_initialized: status == InstanceStatus::Active,
        }
    }
}

/// Repository handle, from [`Store::instances`].
pub struct Instances<'a> {
    store: &'a Store,
}

impl Store {
    /// Agent instances of one tenant.
    pub fn instances(&self) -> Instances<'_> {
        Instances { store: self }
    }
}

/// One instance, on a connection whose tenant is already set (a tenant
/// transaction, e.g. a governed tool's). Another tenant's or an unknown
/// instance → `NotFound`.
pub async fn get_in(
    conn: &mut sqlx::PgConnection,
    instance_id: Uuid,
) -> Result<InstanceRow, StoreError> {
    let row: Option<serde_json::Value> =
        sqlx::query_scalar("SELECT to_jsonb(i) FROM agent_instances i WHERE id = $1")
            .bind(instance_id)
            .fetch_optional(conn)
            .await?;
    decode(row.ok_or_else(|| StoreError::not_found("agent instance"))?)
}

impl Instances<'_> {
    /// Create an instance (in the foundational phase when asked), optionally
    /// seeding `AgentInitialized`, in one transaction.
    pub async fn create(
        &self,
        tenant_id: Uuid,
        new: NewInstance,
    ) -> Result<InstanceRow, StoreError> {
        if let Some(site) = &new.call_site_id {
            crate::rows::check_text("call_site_id", site, 200)?;
        }
        let deadline_ms = match new.workset_deadline {
            Some(d) => Some(
                i64::try_from(d.as_millis())
                    .map_err(|_| StoreError::invalid("workset_deadline", "too large"))?,
            ),
            None => None,
        };
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO agent_instances (tenant_id, agent_type, status, call_site_id,
                 is_building_starting_workset, workset_deadline_utc)
             VALUES ($1, $2, $3, $4, $5::bigint IS NOT NULL, now() + $5::bigint * interval '1 millisecond')
             RETURNING to_jsonb(agent_instances.*)",
        )
        .bind(tenant_id)
        .bind(new.agent_type.as_str())
        .bind(new.status.as_str())
        .bind(new.call_site_id.as_deref())
        .bind(deadline_ms)
        .fetch_one(tx.conn())
        .await?;
        let mut inst: InstanceRow = decode(row)?;
        if new.seed_initialized {
            sqlx::query("SELECT genesis_insert_event($1, $2, $3, '{}'::jsonb, now(), NULL)")
                .bind(tenant_id)
                .bind(inst.id)
                .bind(AgentEventKind::AgentInitialized.as_str())
                .execute(tx.conn())
                .await?;
            inst = get_in(tx.conn(), inst.id).await?;
        }
        tx.commit().await?;
        Ok(inst)
    }

    /// Read one instance of the tenant.
    pub async fn get(&self, tenant_id: Uuid, instance_id: Uuid) -> Result<InstanceRow, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let inst = get_in(tx.conn(), instance_id).await?;
        tx.commit().await?;
        Ok(inst)
    }

    /// Every instance of the tenant, optionally of one type, oldest first.
    pub async fn list(
        &self,
        tenant_id: Uuid,
        agent_type: Option<AgentType>,
    ) -> Result<Vec<InstanceRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(i) FROM agent_instances i
             WHERE $1::text IS NULL OR agent_type = $1 ORDER BY created_at, id",
        )
        .bind(agent_type.map(|t| t.as_str()))
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// Set the lifecycle status (Start/Stop). Starting (→ active) from
    /// another status also seeds `AgentInitialized`, as the spec's Start does.
    pub async fn set_status(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        status: InstanceStatus,
    ) -> Result<InstanceRow, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let before = lock_in(tx.conn(), instance_id).await?;
        sqlx::query("UPDATE agent_instances SET status = $2, updated_at = now() WHERE id = $1")
            .bind(instance_id)
            .bind(status.as_str())
            .execute(tx.conn())
            .await?;
        if status == InstanceStatus::Active && before.status != InstanceStatus::Active {
            rearm_stranded_in(tx.conn(), instance_id).await?;
            sqlx::query(
                "SELECT genesis_insert_event($1, $2, 'AgentInitialized', '{}'::jsonb, now(), NULL)",
            )
            .bind(tenant_id)
            .bind(instance_id)
            .execute(tx.conn())
            .await?;
        }
        let inst = get_in(tx.conn(), instance_id).await?;
        tx.commit().await?;
        Ok(inst)
    }

    /// Give back the lease `session` took by a claim that cannot run (its
    /// mode did not resolve), in a transaction of its own: the event stays
    /// unconsumed for a later claim. Clears only the lease columns, and only
    /// while `session` still holds the lease (a lease that moved on is left
    /// alone); returns whether it released one.
    pub async fn release_lease(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        session: Uuid,
    ) -> Result<bool, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let released = sqlx::query(
            "UPDATE agent_instances SET lease_session = NULL, lease_expires_at = NULL
              WHERE id = $1 AND lease_session = $2",
        )
        .bind(instance_id)
        .bind(session)
        .execute(tx.conn())
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(released > 0)
    }

    /// End the foundational phase (the `agent_workset_complete` terminator).
    pub async fn complete_workset(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
    ) -> Result<InstanceRow, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> = sqlx::query_scalar(
            "UPDATE agent_instances SET is_building_starting_workset = false, updated_at = now()
             WHERE id = $1 RETURNING to_jsonb(agent_instances.*)",
        )
        .bind(instance_id)
        .fetch_optional(tx.conn())
        .await?;
        tx.commit().await?;
        decode(row.ok_or_else(|| StoreError::not_found("agent instance"))?)
    }
}

/// The `agent_workset_complete` terminator on the caller's tenant
/// transaction (the tool's): clear `is_building_starting_workset` and
/// return what it was before, or `None` for an unknown (or other tenant's)
/// instance, where nothing is written. Touches only that flag and
/// `updated_at`: never the tick counters, phase or lease.
pub async fn complete_workset_in(
    conn: &mut sqlx::PgConnection,
    instance_id: Uuid,
) -> Result<Option<bool>, StoreError> {
    Ok(sqlx::query_scalar(
        "UPDATE agent_instances i SET is_building_starting_workset = false, updated_at = now()
           FROM (SELECT id, is_building_starting_workset AS was FROM agent_instances WHERE id = $1) p
          WHERE i.id = p.id RETURNING p.was",
    )
    .bind(instance_id)
    .fetch_optional(conn)
    .await?)
}

/// Lock the instance row for the rest of the transaction.
pub(crate) async fn lock_in(
    conn: &mut sqlx::PgConnection,
    instance_id: Uuid,
) -> Result<InstanceRow, StoreError> {
    let row: Option<serde_json::Value> =
        sqlx::query_scalar("SELECT to_jsonb(i) FROM agent_instances i WHERE id = $1 FOR UPDATE")
            .bind(instance_id)
            .fetch_optional(conn)
            .await?;
    decode(row.ok_or_else(|| StoreError::not_found("agent instance"))?)
}

/// Re-arm the events an instance left stranded while it was not active: a
/// message published for a paused instance is claimed as `not_active` and
/// acknowledged, so its unconsumed event keeps `published_at` with no
/// message left on the stream. Clearing the mark and bumping
/// `publish_epoch` (a fresh `Nats-Msg-Id`, see `EventRow::message_id`) makes
/// the outbox publish it again; the `AgentInitialized` opener `set_status`
/// inserts next notifies `genesis_due` in the same transaction, which wakes
/// the publisher for both. An event
/// whose message is in fact still on the stream gets a second message,
/// which claims nothing (`nothing_due`) — an extra claim, never a lost event.
/// Returns how many events were re-armed.
pub(crate) async fn rearm_stranded_in(
    conn: &mut sqlx::PgConnection,
    instance_id: Uuid,
) -> Result<u64, StoreError> {
    let rearmed = sqlx::query(
        "UPDATE agent_event_queue SET published_at = NULL, publish_epoch = publish_epoch + 1
          WHERE instance_id = $1 AND published_at IS NOT NULL
            AND consumed_at IS NULL AND dead_lettered_at IS NULL",
    )
    .bind(instance_id)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    Ok(rearmed)
}
