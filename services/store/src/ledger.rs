//! `agent_state_ledger` (+ `_actions`): reads of the append-only turn record.
//! Turns are written only by `tick::complete_tick`, and cleared only by the
//! documented Reset. Must never grow an UPDATE or DELETE path.

use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{check_text, decode_all};
use crate::store::Store;

/// The row types live with the rules that read them, in genesis-core.
pub use genesis_core::instance::{LedgerActionRow, LedgerTurn};

/// Repository handle, from [`Store::ledger`].
pub struct Ledger<'a> {
    store: &'a Store,
}

impl Store {
    /// Reads of the append-only ledger.
    pub fn ledger(&self) -> Ledger<'_> {
        Ledger { store: self }
    }
}

impl Ledger<'_> {
    /// The last `n` turns of an instance, oldest first (the re-inject tail).
    pub async fn tail(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        n: i64,
    ) -> Result<Vec<LedgerTurn>, StoreError> {
        if n <= 0 {
            return Err(StoreError::invalid("n", "must be positive"));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT row || jsonb_build_object('requested_model',
                    (SELECT s.requested_model FROM llm_call_snapshots s WHERE s.id = t.snapshot))
               FROM (SELECT to_jsonb(l) AS row, turn_number, l.llm_call_snapshot_id AS snapshot
                       FROM agent_state_ledger l
                      WHERE instance_id = $1 ORDER BY turn_number DESC LIMIT $2) t
              ORDER BY turn_number",
        )
        .bind(instance_id)
        .bind(n)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// The action rows of one turn, in ordinal order.
    pub async fn actions(
        &self,
        tenant_id: Uuid,
        ledger_id: Uuid,
    ) -> Result<Vec<LedgerActionRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(a) FROM agent_state_ledger_actions a WHERE ledger_id = $1 ORDER BY ordinal",
        )
        .bind(ledger_id)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// Full-text search over reasoning summaries and wait conditions (the
    /// `agent_query_memory` backend), newest first.
    pub async fn search(
        &self,
        tenant_id: Uuid,
        instance_id: Option<Uuid>,
        query: &str,
        limit: i64,
    ) -> Result<Vec<LedgerTurn>, StoreError> {
        check_text("query", query, 1000)?;
        if limit <= 0 {
            return Err(StoreError::invalid("limit", "must be positive"));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(l) FROM agent_state_ledger l
             WHERE ($1::uuid IS NULL OR instance_id = $1)
               AND to_tsvector('simple', coalesce(reasoning_summary, '') || ' ' || coalesce(wait_condition, ''))
                   @@ plainto_tsquery('simple', $2)
             ORDER BY created_at DESC, turn_number DESC LIMIT $3",
        )
        .bind(instance_id)
        .bind(query)
        .bind(limit)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// Number of turns recorded for an instance.
    pub async fn count(&self, tenant_id: Uuid, instance_id: Uuid) -> Result<i64, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let n: i64 =
            sqlx::query_scalar("SELECT count(*) FROM agent_state_ledger WHERE instance_id = $1")
                .bind(instance_id)
                .fetch_one(tx.conn())
                .await?;
        tx.commit().await?;
        Ok(n)
    }
}

/// Longest query [`memory_search_in`] accepts, in bytes (1024 characters of
/// any script).
pub const MAX_MEMORY_QUERY_BYTES: usize = 4096;

/// Full-text search over one instance's own turns (reasoning summaries and
/// wait conditions, served by the ledger's GIN expression index), newest
/// turn first, on the caller's tenant transaction (the `agent_query_memory`
/// tool's). Each hit is the JSON object the tool shows: `{turnNumber,
/// createdAt, eventKind, decisionKind, phase, reasoningSummary,
/// waitCondition}`. Reads only, and never another instance's turns; a
/// blank or oversized query or a non-positive limit → `InvalidArgument`.
pub async fn memory_search_in(
    conn: &mut sqlx::PgConnection,
    instance_id: Uuid,
    query: &str,
    limit: i64,
) -> Result<Vec<serde_json::Value>, StoreError> {
    check_text("query", query, MAX_MEMORY_QUERY_BYTES)?;
    if limit <= 0 {
        return Err(StoreError::invalid("limit", "must be positive"));
    }
    Ok(sqlx::query_scalar(
        "SELECT jsonb_build_object('turnNumber', turn_number, 'createdAt', created_at,
                'eventKind', event_kind, 'decisionKind', decision_kind, 'phase', phase,
                'reasoningSummary', reasoning_summary, 'waitCondition', wait_condition)
           FROM agent_state_ledger
          WHERE instance_id = $1
            AND to_tsvector('simple', coalesce(reasoning_summary, '') || ' ' || coalesce(wait_condition, ''))
                @@ plainto_tsquery('simple', $2)
          ORDER BY turn_number DESC LIMIT $3",
    )
    .bind(instance_id)
    .bind(query)
    .bind(limit)
    .fetch_all(conn)
    .await?)
}
