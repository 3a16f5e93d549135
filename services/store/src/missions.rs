//! `missions` (DESIGN §3, minimal): what `soa_propose_task` creates and what
//! the operator moves through its lifecycle. Owns create, get, list and the
//! status change that, in ONE transaction, updates the mission and enqueues
//! `MissionStateChanged {missionId, from, to}` to its steering instance
//! through the schema's single enqueue function (`genesis_enqueue_event`);
//! and the steering lookups of the decision transaction (whom a resolved
//! mission decision signals, whether a SOA steers a mission).
//! Must never start a mission agent, and never write a status outside the
//! transition table of [`MissionStatus::can_become`].

use chrono::{DateTime, Utc};
use genesis_core::signals::SteeringTarget;
use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::events::EventRow;
use crate::rows::{check_text, decode, decode_all};
use crate::store::Store;

/// Longest title accepted.
pub const MAX_TITLE_BYTES: usize = 500;
/// Longest description accepted.
pub const MAX_DESCRIPTION_BYTES: usize = 16 * 1024;
/// Longest kind accepted.
pub const MAX_KIND_BYTES: usize = 100;

/// A mission's status and its lifecycle rule live in genesis-core, beside
/// the other stored enumerations.
pub use genesis_core::MissionStatus;

/// A `missions` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MissionRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    /// The instance that proposed it and receives `MissionStateChanged`.
    pub steering_instance_id: Option<Uuid>,
    pub kind: String,
    pub title: String,
    pub description: String,
    pub status: MissionStatus,
    pub metadata: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A mission to create (status `proposed`).
#[derive(Debug, Clone, PartialEq)]
pub struct NewMission {
    pub steering_instance_id: Option<Uuid>,
    pub kind: String,
    pub title: String,
    pub description: String,
    /// A JSON object (e.g. `{source, soaInstanceId, target}`).
    pub metadata: serde_json::Value,
}

/// The filters of [`Missions::list`]; `None` matches everything.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MissionFilter {
    pub status: Option<MissionStatus>,
    pub steering_instance_id: Option<Uuid>,
}

/// The result of [`Missions::set_status`]: the mission after the call, and
/// the `MissionStateChanged` event it enqueued (`None` when the status was
/// already the requested one, or the mission has no steering instance).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusChange {
    pub mission: MissionRow,
    pub event: Option<EventRow>,
}

/// Repository handle, from [`Store::missions`].
pub struct Missions<'a> {
    store: &'a Store,
}

impl Store {
    /// Missions.
    pub fn missions(&self) -> Missions<'_> {
        Missions { store: self }
    }
}

/// Insert a proposed mission on a connection whose tenant is already set (a
/// tenant transaction). Shared by [`Missions::create`] and callers that
/// create a mission inside a transaction of their own (the tool runtime).
pub async fn create_in(
    conn: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    new: &NewMission,
) -> Result<MissionRow, StoreError> {
    check_text("kind", &new.kind, MAX_KIND_BYTES)?;
    check_text("title", &new.title, MAX_TITLE_BYTES)?;
    if new.description.len() > MAX_DESCRIPTION_BYTES {
        return Err(StoreError::invalid(
            "description",
            format!(
                "must be at most {MAX_DESCRIPTION_BYTES} bytes, got {}",
                new.description.len()
            ),
        ));
    }
    if !new.metadata.is_object() {
        return Err(StoreError::invalid("metadata", "must be a JSON object"));
    }
    if let Some(steering) = new.steering_instance_id {
        crate::instances::get_in(&mut *conn, steering).await?;
    }
    let row: serde_json::Value = sqlx::query_scalar(
        "INSERT INTO missions (tenant_id, steering_instance_id, kind, title, description, status, metadata)
         VALUES ($1, $2, $3, $4, $5, 'proposed', $6)
         RETURNING to_jsonb(missions.*)",
    )
    .bind(tenant_id)
    .bind(new.steering_instance_id)
    .bind(&new.kind)
    .bind(&new.title)
    .bind(&new.description)
    .bind(&new.metadata)
    .fetch_one(conn)
    .await?;
    decode(row)
}

impl Missions<'_> {
    /// Create a `proposed` mission. An unknown (or other tenant's) steering
    /// instance → `NotFound`; bad fields → `InvalidArgument`; nothing written.
    pub async fn create(
        &self,
        tenant_id: Uuid,
        new: &NewMission,
    ) -> Result<MissionRow, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row = create_in(tx.conn(), tenant_id, new).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// One mission of the tenant; another tenant's is `NotFound`.
    pub async fn get(&self, tenant_id: Uuid, mission_id: Uuid) -> Result<MissionRow, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(m) FROM missions m WHERE id = $1")
                .bind(mission_id)
                .fetch_optional(tx.conn())
                .await?;
        tx.commit().await?;
        decode(row.ok_or_else(|| StoreError::not_found("mission"))?)
    }

    /// The tenant's missions, newest first, filtered by status and steering
    /// instance.
    pub async fn list(
        &self,
        tenant_id: Uuid,
        filter: MissionFilter,
    ) -> Result<Vec<MissionRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(m) FROM missions m
             WHERE ($1::text IS NULL OR status = $1)
               AND ($2::uuid IS NULL OR steering_instance_id = $2)
             ORDER BY created_at DESC, id DESC",
        )
        .bind(filter.status.map(MissionStatus::as_str))
        .bind(filter.steering_instance_id)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// Move a mission to `to`. In ONE transaction (the mission row locked):
    /// update the status and enqueue `MissionStateChanged {missionId, from,
    /// to}` to the steering instance, so the agent is woken exactly for the
    /// changes that happened. The same status changes nothing and enqueues
    /// nothing; a transition the lifecycle refuses (e.g. completed → active)
    /// → `FailedPrecondition`, nothing written; unknown or other tenant's
    /// mission → `NotFound`.
    pub async fn set_status(
        &self,
        tenant_id: Uuid,
        mission_id: Uuid,
        to: MissionStatus,
    ) -> Result<StatusChange, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(m) FROM missions m WHERE id = $1 FOR UPDATE")
                .bind(mission_id)
                .fetch_optional(tx.conn())
                .await?;
        let current: MissionRow = decode(row.ok_or_else(|| StoreError::not_found("mission"))?)?;
        let from = current.status;
        if from == to {
            tx.commit().await?;
            return Ok(StatusChange {
                mission: current,
                event: None,
            });
        }
        if !from.can_become(to) {
            tx.rollback().await?;
            return Err(StoreError::precondition(format!(
                "a {from} mission cannot become {to}"
            )));
        }
        let row: serde_json::Value = sqlx::query_scalar(
            "UPDATE missions SET status = $2, updated_at = now() WHERE id = $1
             RETURNING to_jsonb(missions.*)",
        )
        .bind(mission_id)
        .bind(to.as_str())
        .fetch_one(tx.conn())
        .await?;
        let mission: MissionRow = decode(row)?;
        let event = match mission.steering_instance_id {
            Some(instance_id) => {
                let payload = serde_json::json!({
                    "missionId": mission.id,
                    "from": from.as_str(),
                    "to": to.as_str(),
                });
                let raw: serde_json::Value = sqlx::query_scalar(
                    "SELECT genesis_enqueue_event($1, $2, 'MissionStateChanged', $3, NULL, NULL)",
                )
                .bind(tenant_id)
                .bind(instance_id)
                .bind(&payload)
                .fetch_one(tx.conn())
                .await?;
                Some(enqueued_event(raw)?)
            }
            None => None,
        };
        tx.commit().await?;
        Ok(StatusChange { mission, event })
    }
}

/// The steering instance a `DecisionResolved` goes to, on the caller's
/// tenant transaction (RLS confines both reads to its tenant): the named
/// mission's `steering_instance_id`, or the tenant's SOA (the first
/// created, as coding tasks pick it). `None` when the mission is not the
/// tenant's, has no steering instance, or the tenant has no SOA.
pub(crate) async fn steering_instance_in(
    conn: &mut sqlx::PgConnection,
    target: SteeringTarget,
) -> Result<Option<Uuid>, StoreError> {
    let steering: Option<Option<Uuid>> = match target {
        SteeringTarget::Mission(mission_id) => {
            sqlx::query_scalar("SELECT steering_instance_id FROM missions WHERE id = $1")
                .bind(mission_id)
                .fetch_optional(conn)
                .await?
        }
        SteeringTarget::TenantSoa => {
            sqlx::query_scalar(
                "SELECT id FROM agent_instances WHERE agent_type = 'Soa'
                 ORDER BY created_at, id LIMIT 1",
            )
            .fetch_optional(conn)
            .await?
        }
    };
    Ok(steering.flatten())
}

/// Whether `mission_id` is a mission of the caller's tenant steered by
/// `instance_id` (what `soa_propose_decision` requires of a decision raised
/// on behalf of a mission), on the caller's tenant transaction.
pub async fn is_steered_by_in(
    conn: &mut sqlx::PgConnection,
    mission_id: Uuid,
    instance_id: Uuid,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM missions WHERE id = $1 AND steering_instance_id = $2)",
    )
    .bind(mission_id)
    .bind(instance_id)
    .fetch_one(conn)
    .await?)
}

/// Read the event out of `genesis_enqueue_event`'s answer; an instance the
/// function could not see is `NotFound` (the caller's transaction is then
/// dropped, so the status update rolls back with it).
fn enqueued_event(raw: serde_json::Value) -> Result<EventRow, StoreError> {
    #[derive(Deserialize)]
    struct Raw {
        outcome: String,
        what: Option<String>,
        event: Option<EventRow>,
    }
    let raw: Raw = decode(raw)?;
    match (raw.outcome.as_str(), raw.event) {
        ("created" | "existing", Some(event)) => Ok(event),
        ("not_found", _) => Err(StoreError::not_found(
            raw.what.unwrap_or_else(|| "steering instance".to_owned()),
        )),
        (other, _) => Err(StoreError::Database(format!(
            "unexpected enqueue outcome {other:?}"
        ))),
    }
}
