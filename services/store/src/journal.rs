//! The episode journal (`agent_episode_journal`): each claimed event's
//! episode as an ordered list of steps — LLM turns and tool calls — that
//! the session holding the instance's lease appends before the episode
//! moves on, read back in order by a session resuming the episode and by an
//! operator reading it as a trace, and pruned after its retention by the
//! platform loop. Owns the append under the session guard and the episode's
//! byte cap (`genesis_journal_append`), the ordered read and the prune.
//! Must never update or delete a step on the tenant path (the table is
//! append-only to it), nor decide what a step holds: the episode's writer
//! redacts it first.

use std::time::Duration;

use chrono::{DateTime, Utc};
use genesis_core::journal::JournalKind;
use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::{decode, decode_all};
use crate::store::Store;

/// One step of an episode, as stored.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JournalEntry {
    pub tenant_id: Uuid,
    pub event_id: Uuid,
    /// 0, 1, 2, … in the order the steps were appended.
    pub seq: i32,
    pub instance_id: Uuid,
    /// The session that appended it (a resumed episode changes session).
    pub session: Uuid,
    pub kind: JournalKind,
    /// The step (for [`JournalKind::Truncated`]: what was dropped, the
    /// journal's size and the cap).
    pub entry: serde_json::Value,
    /// The entry's JSON text size, as the cap counts it.
    pub bytes: i32,
    pub created_at: DateTime<Utc>,
}

/// What [`Journal::append`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The step is journaled at this sequence number.
    At(i32),
    /// The step would pass the episode's cap: the truncation marker was
    /// written at this sequence number in its place.
    Truncated(i32),
    /// The journal was already truncated: nothing was written.
    Dropped,
}

/// One step to append.
#[derive(Debug, Clone, Copy)]
pub struct NewStep<'a> {
    /// The claimed event whose episode this is.
    pub event_id: Uuid,
    pub instance_id: Uuid,
    /// The lease session appending it.
    pub session: Uuid,
    pub kind: JournalKind,
    /// A JSON object, already redacted.
    pub entry: &'a serde_json::Value,
}

/// Repository handle, from [`Store::journal`].
pub struct Journal<'a> {
    store: &'a Store,
}

impl Store {
    /// The episode journal.
    pub fn journal(&self) -> Journal<'_> {
        Journal { store: self }
    }
}

impl Journal<'_> {
    /// Append `step` to its episode's journal, at most `max_episode_bytes`
    /// of steps per episode. `LeaseLost` when `step.session` no longer holds
    /// the instance's live lease, `NotFound` for another tenant's instance,
    /// `InvalidArgument` for a marker or a non-object entry; nothing is
    /// written then.
    pub async fn append(
        &self,
        tenant_id: Uuid,
        step: NewStep<'_>,
        max_episode_bytes: u32,
    ) -> Result<Appended, StoreError> {
        let (cap, entry) = checked(&step, max_episode_bytes)?;
        let raw: serde_json::Value =
            sqlx::query_scalar("SELECT genesis_journal_append($1, $2, $3, $4, $5, $6, $7)")
                .bind(tenant_id)
                .bind(step.instance_id)
                .bind(step.event_id)
                .bind(step.session)
                .bind(step.kind.as_str())
                .bind(entry)
                .bind(cap)
                .fetch_one(self.store.tenant_pool())
                .await?;
        appended(raw)
    }

    /// The journal of `event_id`'s episode, in order (empty when it has
    /// none, or it is another tenant's, or it was pruned).
    pub async fn episode(
        &self,
        tenant_id: Uuid,
        event_id: Uuid,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows = episode_in(tx.conn(), tenant_id, event_id).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// Delete, across tenants, up to `batch` journal steps written more
    /// than `retention` ago by the database's clock; returns how many went.
    /// The retention loop calls it until it returns less than `batch`, so
    /// one pass never holds a long transaction. Ledger turns are untouched.
    pub async fn prune(&self, retention: Duration, batch: i64) -> Result<u64, StoreError> {
        let secs = i64::try_from(retention.as_secs())
            .map_err(|_| StoreError::invalid("retention", "too long"))?;
        if batch < 1 {
            return Err(StoreError::invalid("batch", "must be at least 1"));
        }
        let done = sqlx::query(
            "DELETE FROM agent_episode_journal
              WHERE (tenant_id, event_id, seq) IN (
                    SELECT tenant_id, event_id, seq FROM agent_episode_journal
                     WHERE created_at < now() - make_interval(secs => $1)
                     ORDER BY created_at LIMIT $2)",
        )
        .bind(secs as f64)
        .bind(batch)
        .execute(self.store.system_pool())
        .await?;
        Ok(done.rows_affected())
    }
}

/// Write `step` inside a tenant transaction whose caller has already
/// checked, and still holds, the session guard: InvokeTool journals a tool
/// call in the transaction of its effect, so the two commit together or not
/// at all. `InvalidArgument` when the step's event is not the one its
/// session claimed.
pub async fn write_in(
    conn: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    step: NewStep<'_>,
    max_episode_bytes: u32,
) -> Result<Appended, StoreError> {
    let (cap, entry) = checked(&step, max_episode_bytes)?;
    let bytes = entry_bytes(entry)?;
    let raw: serde_json::Value =
        sqlx::query_scalar("SELECT genesis_journal_write($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(tenant_id)
            .bind(step.instance_id)
            .bind(step.event_id)
            .bind(step.session)
            .bind(step.kind.as_str())
            .bind(entry)
            .bind(cap)
            .bind(bytes)
            .fetch_one(conn)
            .await?;
    appended(raw)
}

/// The steps of `event_id`'s episode in order, as a reader wants them: a
/// turn's system prompt, stored once per tenant and named by its SHA-256,
/// put back in `request.system`. The one read of a journal (a resumed
/// episode's and the trace's), inside the caller's tenant transaction.
pub async fn episode_in(
    conn: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    event_id: Uuid,
) -> Result<Vec<JournalEntry>, StoreError> {
    let rows: Vec<serde_json::Value> = sqlx::query_scalar(
        "SELECT CASE WHEN p.text IS NULL THEN to_jsonb(j)
                     ELSE jsonb_set(to_jsonb(j), '{entry,request,system}', to_jsonb(p.text)) END
           FROM agent_episode_journal j
           LEFT JOIN agent_prompt_texts p
                  ON p.tenant_id = j.tenant_id
                 AND p.sha256 = j.entry->'request'->>'system_sha256'
          WHERE j.tenant_id = $1 AND j.event_id = $2 ORDER BY j.seq",
    )
    .bind(tenant_id)
    .bind(event_id)
    .fetch_all(conn)
    .await?;
    decode_all(rows)
}

/// An entry's size as the cap counts it: its JSON text as serialized here
/// (the writer has it; the database would print the value again).
pub(crate) fn entry_bytes(entry: &serde_json::Value) -> Result<i32, StoreError> {
    let text = serde_json::to_string(entry)
        .map_err(|e| StoreError::invalid("journal entry", e.to_string()))?;
    i32::try_from(text.len()).map_err(|_| StoreError::invalid("journal entry", "too large"))
}

/// Whether `s` is a SHA-256 as the journal names a prompt: 64 lowercase
/// hex digits.
pub(crate) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A step the journal accepts: no marker (the journal writes its own), an
/// object, a cap that fits the column.
fn checked<'a>(
    step: &NewStep<'a>,
    max_episode_bytes: u32,
) -> Result<(i32, &'a serde_json::Value), StoreError> {
    if step.kind == JournalKind::Truncated {
        return Err(StoreError::invalid(
            "kind",
            "the truncation marker is written by the journal itself",
        ));
    }
    if !step.entry.is_object() {
        return Err(StoreError::invalid("entry", "must be a JSON object"));
    }
    let cap = i32::try_from(max_episode_bytes)
        .map_err(|_| StoreError::invalid("max_episode_bytes", "must fit in 31 bits"))?;
    Ok((cap, step.entry))
}

/// The journal functions' answer as [`Appended`].
fn appended(raw: serde_json::Value) -> Result<Appended, StoreError> {
    #[derive(Deserialize)]
    struct Raw {
        outcome: String,
        seq: Option<i32>,
    }
    let raw: Raw = decode(raw)?;
    match (raw.outcome.as_str(), raw.seq) {
        ("appended", Some(seq)) => Ok(Appended::At(seq)),
        ("truncated", Some(seq)) => Ok(Appended::Truncated(seq)),
        ("truncated", None) => Ok(Appended::Dropped),
        ("lease_lost", _) => Err(StoreError::LeaseLost),
        ("not_found", _) => Err(StoreError::not_found("agent instance")),
        (other, _) => Err(StoreError::Database(format!(
            "unexpected journal outcome {other:?}"
        ))),
    }
}
