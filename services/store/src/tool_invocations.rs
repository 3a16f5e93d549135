//! `tool_invocations`: the record of every governed tool call an agent pod
//! made, whose `(session, call_id)` is the idempotency key of InvokeTool
//! (DESIGN §4). Owns the lease check a tool call runs under, the lookup of a
//! prior call and the insert that lands in the same transaction as the
//! handler's own writes. Must never update or delete a recorded call: a
//! replay returns the stored result.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{check_text, decode, decode_all};
use crate::store::Store;

/// A recorded tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ToolInvocationRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub session: Uuid,
    pub call_id: String,
    pub tool_name: String,
    pub arguments: serde_json::Value,
    pub result: serde_json::Value,
    pub blocked: bool,
    pub side_effecting: bool,
    pub created_at: DateTime<Utc>,
}

/// A tool call to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewToolInvocation {
    pub instance_id: Uuid,
    pub session: Uuid,
    pub call_id: String,
    pub tool_name: String,
    pub arguments: serde_json::Value,
    pub result: serde_json::Value,
    pub blocked: bool,
    pub side_effecting: bool,
}

/// Whether `session` holds the instance's tick lease and the lease has not
/// expired, taking a share lock on the instance row so the lease cannot be
/// completed or taken over before the caller's transaction ends. An expired
/// lease is not held even while no other session has claimed the instance
/// yet: the claim's boundary (`lease_expires_at < now()` is free) and
/// RecordCallAttempt's are the same. An unknown instance is
/// `NotFound`.
pub async fn lease_held_in(
    conn: &mut sqlx::PgConnection,
    instance_id: Uuid,
    session: Uuid,
) -> Result<bool, StoreError> {
    let held: Option<bool> = sqlx::query_scalar(
        "SELECT lease_session IS NOT DISTINCT FROM $2
                AND NOT coalesce(lease_expires_at < now(), false)
           FROM agent_instances WHERE id = $1 FOR SHARE",
    )
    .bind(instance_id)
    .bind(session)
    .fetch_optional(conn)
    .await?;
    held.ok_or_else(|| StoreError::not_found("agent instance"))
}

/// The call recorded under `(session, call_id)`, if any.
pub async fn find_in(
    conn: &mut sqlx::PgConnection,
    session: Uuid,
    call_id: &str,
) -> Result<Option<ToolInvocationRow>, StoreError> {
    let row: Option<serde_json::Value> = sqlx::query_scalar(
        "SELECT to_jsonb(t) FROM tool_invocations t WHERE session = $1 AND call_id = $2",
    )
    .bind(session)
    .bind(call_id)
    .fetch_optional(conn)
    .await?;
    row.map(decode).transpose()
}

/// Record a call in the caller's transaction. A concurrent call with the same
/// key makes this fail with `Conflict { what: "tool_invocations_session_call_id_key" }`;
/// the caller rolls back and replays the stored row.
pub async fn insert_in(
    conn: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    new: &NewToolInvocation,
) -> Result<ToolInvocationRow, StoreError> {
    check_text("call_id", &new.call_id, 200)?;
    check_text("tool_name", &new.tool_name, 200)?;
    let row: serde_json::Value = sqlx::query_scalar(
        "INSERT INTO tool_invocations
             (tenant_id, instance_id, session, call_id, tool_name, arguments, result, blocked, side_effecting)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING to_jsonb(tool_invocations.*)",
    )
    .bind(tenant_id)
    .bind(new.instance_id)
    .bind(new.session)
    .bind(&new.call_id)
    .bind(&new.tool_name)
    .bind(&new.arguments)
    .bind(&new.result)
    .bind(new.blocked)
    .bind(new.side_effecting)
    .fetch_one(conn)
    .await?;
    decode(row)
}

/// Repository handle, from [`Store::tool_invocations`].
pub struct ToolInvocations<'a> {
    store: &'a Store,
}

impl Store {
    /// Recorded tool calls.
    pub fn tool_invocations(&self) -> ToolInvocations<'_> {
        ToolInvocations { store: self }
    }
}

impl ToolInvocations<'_> {
    /// The call recorded under `(session, call_id)`, if any.
    pub async fn find(
        &self,
        tenant_id: Uuid,
        session: Uuid,
        call_id: &str,
    ) -> Result<Option<ToolInvocationRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row = find_in(tx.conn(), session, call_id).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Every call an instance made, oldest first.
    pub async fn list(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
    ) -> Result<Vec<ToolInvocationRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(t) FROM tool_invocations t WHERE instance_id = $1 ORDER BY created_at, id",
        )
        .bind(instance_id)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }
}
