//! `agent_messages`: the operator↔agent chat transcript. Must never enqueue
//! the `OperatorMessage` event itself: control does that (via `events`), in
//! its own call, so the transcript and the wake-up stay separately testable.

use chrono::{DateTime, Utc};
use genesis_core::MessageDirection;
use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{check_text, decode, decode_all};
use crate::store::Store;

/// Longest message body accepted, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;

/// An `agent_messages` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MessageRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub direction: MessageDirection,
    pub body: String,
    pub created_at: DateTime<Utc>,
}

/// Repository handle, from [`Store::messages`].
pub struct Messages<'a> {
    store: &'a Store,
}

impl Store {
    /// The chat transcript.
    pub fn messages(&self) -> Messages<'_> {
        Messages { store: self }
    }
}

impl Messages<'_> {
    /// Append a message to the transcript.
    pub async fn append(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        direction: MessageDirection,
        body: &str,
    ) -> Result<MessageRow, StoreError> {
        check_text("body", body, MAX_MESSAGE_BYTES)?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        crate::instances::get_in(tx.conn(), instance_id).await?;
        let row: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO agent_messages (tenant_id, instance_id, direction, body) VALUES ($1, $2, $3, $4)
             RETURNING to_jsonb(agent_messages.*)",
        )
        .bind(tenant_id)
        .bind(instance_id)
        .bind(direction.as_str())
        .bind(body)
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        decode(row)
    }

    /// The last `limit` messages of an instance, oldest first.
    pub async fn list(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        limit: i64,
    ) -> Result<Vec<MessageRow>, StoreError> {
        if limit <= 0 {
            return Err(StoreError::invalid("limit", "must be positive"));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT row FROM (SELECT to_jsonb(m) AS row, created_at, id FROM agent_messages m
               WHERE instance_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2) t
             ORDER BY created_at, id",
        )
        .bind(instance_id)
        .bind(limit)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// SendMessage: append an `operator_to_agent` message and enqueue the
    /// `OperatorMessage` event (visible now, payload `{messageId, body}`) in
    /// ONE transaction, so the transcript never shows a message the agent
    /// was not woken for, nor the reverse.
    pub async fn send_operator_message(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        body: &str,
    ) -> Result<(MessageRow, crate::events::EventRow), StoreError> {
        check_text("body", body, MAX_MESSAGE_BYTES)?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        crate::instances::get_in(tx.conn(), instance_id).await?;
        let row: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO agent_messages (tenant_id, instance_id, direction, body) VALUES ($1, $2, $3, $4)
             RETURNING to_jsonb(agent_messages.*)",
        )
        .bind(tenant_id)
        .bind(instance_id)
        .bind(MessageDirection::OperatorToAgent.as_str())
        .bind(body)
        .fetch_one(tx.conn())
        .await?;
        let message: MessageRow = decode(row)?;
        let payload = serde_json::json!({"messageId": message.id, "body": body});
        let raw: serde_json::Value = sqlx::query_scalar(
            "SELECT genesis_enqueue_event($1, $2, 'OperatorMessage', $3, NULL, NULL)->'event'",
        )
        .bind(tenant_id)
        .bind(instance_id)
        .bind(&payload)
        .fetch_one(tx.conn())
        .await?;
        let event: crate::events::EventRow = decode(raw)?;
        tx.commit().await?;
        Ok((message, event))
    }
}
