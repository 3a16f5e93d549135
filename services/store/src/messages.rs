//! `agent_messages`: the operator↔agent chat transcript, and the bounded
//! tail of it a reply is planned with ([`Messages::chat_tail`]). Must never
//! enqueue the `OperatorMessage` event itself: control does that (via
//! `events`), in its own call, so the transcript and the wake-up stay
//! separately testable.

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

/// One message of a [`ChatTail`]: its body cut to the asked length.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChatTailMessage {
    pub direction: MessageDirection,
    /// At most the asked number of characters of the body.
    pub body: String,
    /// The whole body's length in characters: more than `body`'s when it
    /// was cut.
    pub body_chars: i64,
    pub created_at: DateTime<Utc>,
}

impl ChatTailMessage {
    /// Whether `body` is only the start of the message.
    pub fn truncated(&self) -> bool {
        usize::try_from(self.body_chars).unwrap_or(usize::MAX) > self.body.chars().count()
    }
}

/// The newest messages of an instance's chat, oldest first
/// ([`Messages::chat_tail`]).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct ChatTail {
    pub messages: Vec<ChatTailMessage>,
    /// Older messages exist than those listed.
    pub earlier_omitted: bool,
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

/// Append a message on a connection whose tenant is already set (a tenant
/// transaction: [`Messages::append`]'s, or a tool's, where it lands with the
/// invocation record or not at all). Refuses a blank body or one over
/// [`MAX_MESSAGE_BYTES`] (`InvalidArgument`, nothing written); an unknown
/// instance is refused by the database (`NotFound`). Never enqueues an
/// event: the table's insert trigger notifies `genesis_messages`.
pub async fn append_in(
    conn: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    instance_id: Uuid,
    direction: MessageDirection,
    body: &str,
) -> Result<MessageRow, StoreError> {
    check_text("body", body, MAX_MESSAGE_BYTES)?;
    let row: serde_json::Value = sqlx::query_scalar(
        "INSERT INTO agent_messages (tenant_id, instance_id, direction, body) VALUES ($1, $2, $3, $4)
         RETURNING to_jsonb(agent_messages.*)",
    )
    .bind(tenant_id)
    .bind(instance_id)
    .bind(direction.as_str())
    .bind(body)
    .fetch_one(conn)
    .await?;
    decode(row)
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
        let row = append_in(tx.conn(), tenant_id, instance_id, direction, body).await?;
        tx.commit().await?;
        Ok(row)
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

    /// The newest `limit` messages of an instance's chat, both directions,
    /// oldest first, each body cut to `max_chars` characters — up to and
    /// including the message `upto` when given (the one the tick answers,
    /// so a reply never runs ahead of its question; an id that is not this
    /// instance's message bounds nothing). One autocommit round trip
    /// (`genesis_read_chat_tail`, which sets the tenant itself).
    pub async fn chat_tail(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        upto: Option<Uuid>,
        limit: u32,
        max_chars: u32,
    ) -> Result<ChatTail, StoreError> {
        let limit = i32::try_from(limit)
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| StoreError::invalid("limit", "must be between 1 and 2^31-1"))?;
        let max_chars = i32::try_from(max_chars)
            .ok()
            .filter(|m| *m > 0)
            .ok_or_else(|| StoreError::invalid("max_chars", "must be between 1 and 2^31-1"))?;
        let raw: serde_json::Value =
            sqlx::query_scalar("SELECT genesis_read_chat_tail($1, $2, $3, $4, $5)")
                .bind(tenant_id)
                .bind(instance_id)
                .bind(upto)
                .bind(limit)
                .bind(max_chars)
                .fetch_one(self.store.tenant_pool())
                .await?;
        decode(raw)
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
