//! The mode catalogue (`agent_modes`, platform-wide) and THE one chokepoint
//! that writes `agent_instances.active_mode`: [`Modes::set_active_mode`],
//! which validates against the agent type's own catalogue and appends the
//! `agent_mode_change_events` audit row in the same transaction (its
//! statements, `set_active_mode_in`, also run inside the decision
//! transaction of [`crate::decisions`]). Nothing else in the system may write
//! `active_mode`; the agent can only propose.

use chrono::{DateTime, Utc};
use genesis_core::{AgentType, ModeChangeSource};
use serde::Deserialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::StoreError;
use crate::instances::lock_in;
use crate::rows::{check_text, decode, decode_all};
use crate::store::Store;

/// An `agent_modes` catalogue row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ModeRow {
    pub agent_type: AgentType,
    pub name: String,
    pub description: String,
    pub prompt_fragment: String,
    /// `None`: use genesis-core's in-code seed toolset for this mode.
    pub toolset: Option<Vec<String>>,
    pub preset_id: Option<String>,
    pub budget_override: Option<serde_json::Value>,
    pub system_seed: bool,
    pub is_default: bool,
}

/// An `agent_mode_change_events` audit row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ModeChange {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub from_mode: Option<String>,
    pub to_mode: String,
    pub source: ModeChangeSource,
    pub actor: String,
    pub attention_request_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
}

/// Repository handle, from [`Store::modes`].
pub struct Modes<'a> {
    store: &'a Store,
}

impl Store {
    /// Mode catalogue and the mode-write chokepoint.
    pub fn modes(&self) -> Modes<'_> {
        Modes { store: self }
    }
}

impl Modes<'_> {
    /// The catalogue of one agent type, default mode first. Empty for types
    /// without modes (the mission types).
    pub async fn catalogue(&self, agent_type: AgentType) -> Result<Vec<ModeRow>, StoreError> {
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(m) FROM agent_modes m WHERE agent_type = $1 ORDER BY is_default DESC, name",
        )
        .bind(agent_type.as_str())
        .fetch_all(self.store.tenant_pool())
        .await?;
        decode_all(rows)
    }

    /// Set an instance's active mode: the single chokepoint (UI source `ui`,
    /// approved proposal source `approval`). Refuses a mode outside the
    /// instance type's catalogue with [`StoreError::InvalidArgument`] (field
    /// `mode`) and writes nothing; otherwise updates `active_mode` and
    /// appends the audit row atomically, even when the mode is unchanged.
    pub async fn set_active_mode(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        to_mode: &str,
        source: ModeChangeSource,
        actor: &str,
        attention_request_id: Option<Uuid>,
    ) -> Result<ModeChange, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let change = set_active_mode_in(
            tx.conn(),
            tenant_id,
            instance_id,
            to_mode,
            source,
            actor,
            attention_request_id,
        )
        .await?;
        tx.commit().await?;
        Ok(change)
    }

    /// The audit trail of one instance, oldest first.
    pub async fn history(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
    ) -> Result<Vec<ModeChange>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(m) FROM agent_mode_change_events m WHERE instance_id = $1 ORDER BY created_at, id",
        )
        .bind(instance_id)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }
}

/// The chokepoint's statements inside the caller's tenant transaction (also
/// the mode step of the decision transaction of [`crate::decisions`]):
/// input checks, the instance row lock, the catalogue check, the
/// `active_mode` write and the audit row. An error leaves the caller's
/// transaction to be rolled back.
pub(crate) async fn set_active_mode_in(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
    to_mode: &str,
    source: ModeChangeSource,
    actor: &str,
    attention_request_id: Option<Uuid>,
) -> Result<ModeChange, StoreError> {
    check_text("actor", actor, 200)?;
    check_text("mode", to_mode, 100)?;
    if source == ModeChangeSource::Approval && attention_request_id.is_none() {
        return Err(StoreError::invalid(
            "attention_request_id",
            "an approval-sourced mode change must name the approved attention request",
        ));
    }
    let inst = lock_in(&mut *conn, instance_id).await?;
    let known: Option<bool> =
        sqlx::query_scalar("SELECT true FROM agent_modes WHERE agent_type = $1 AND name = $2")
            .bind(inst.agent_type.as_str())
            .bind(to_mode)
            .fetch_optional(&mut *conn)
            .await?;
    if known.is_none() {
        return Err(genesis_core::CoreError::UnknownMode {
            agent_type: inst.agent_type,
            mode: to_mode.to_owned(),
        }
        .into());
    }
    // The chokepoint's mark for this instance, which the guard trigger of
    // migration 0089 requires of any service-role change to active_mode;
    // cleared right after the write, so nothing later in the caller's
    // transaction rides on it. The chokepoint is not on the tick path.
    sqlx::query("SELECT set_config('genesis.mode_chokepoint', $1::text, true)")
        .bind(instance_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query("UPDATE agent_instances SET active_mode = $2, updated_at = now() WHERE id = $1")
        .bind(instance_id)
        .bind(to_mode)
        .execute(&mut *conn)
        .await?;
    sqlx::query("SELECT set_config('genesis.mode_chokepoint', '', true)")
        .execute(&mut *conn)
        .await?;
    let row: serde_json::Value = sqlx::query_scalar(
        "INSERT INTO agent_mode_change_events
             (tenant_id, instance_id, from_mode, to_mode, source, actor, attention_request_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         RETURNING to_jsonb(agent_mode_change_events.*)",
    )
    .bind(tenant_id)
    .bind(instance_id)
    .bind(inst.active_mode.as_deref())
    .bind(to_mode)
    .bind(source.as_str())
    .bind(actor)
    .bind(attention_request_id)
    .fetch_one(&mut *conn)
    .await?;
    decode(row)
}
