//! Replays of a recorded turn against another preset (`agent_replays`,
//! genesis_core::replay): asking for one (the turn must be the tenant's and
//! still have its journal, the preset the tenant's), marking it published
//! on the pods' stream and sweeping those that were not, a pod's claim of
//! it (never the instance's lease: a replay runs beside the agent's own
//! ticks), its credit holds and its priced attempts under the call tag
//! Replay (`genesis_record_replay_attempt`), its one completion, and the
//! operator's read of it with what its calls cost. Must never write to the
//! agent's own tables (ledger, events, messages, decisions, missions): a
//! replay changes nothing but its own row, its snapshots and the credit
//! window.

use chrono::{DateTime, Utc};
use genesis_core::replay::{ReplayOutcome, ReplayStatus};
use serde::Deserialize;
use uuid::Uuid;

use crate::credit::Reservation;
use crate::error::StoreError;
use crate::llm::{CallSnapshotRow, CreditDraw, NewCallAttempt, attempt_object};
use crate::rows::decode;
use crate::store::Store;

/// The `genesis_due` payload a new replay notifies with (the outbox
/// publisher's channel): it wakes the publisher to carry the replay to the
/// pods.
pub const REPLAY_NOTICE: &str = "replay";

/// An `agent_replays` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReplayRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub turn_number: i64,
    pub event_id: Uuid,
    pub preset_id: Uuid,
    pub status: ReplayStatus,
    pub session: Option<Uuid>,
    pub claimed_until: Option<DateTime<Utc>>,
    pub outcome: Option<serde_json::Value>,
    pub error: String,
    pub created_at: DateTime<Utc>,
    pub published_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A replay as the operator reads it: the row and what its calls cost.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReplayView {
    #[serde(flatten)]
    pub row: ReplayRow,
    /// The priced cost of every attempt of its calls (call tag Replay).
    pub cost_usd: f64,
    pub attempts: i64,
}

/// What [`Replays::claim`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplayClaim {
    /// Claimed under a new session until `claimed_until`.
    Claimed(Box<ReplayRow>),
    /// Another live claim runs it, until then.
    Held(DateTime<Utc>),
    /// Done or failed already.
    Settled(ReplayStatus),
}

/// An unpublished replay, for the publisher's sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct UnpublishedReplay {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
}

/// What [`Replays::record_attempt`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedReplayAttempt {
    pub snapshot: CallSnapshotRow,
    pub cost_usd: f64,
    /// Whether the session still runs the replay.
    pub current: bool,
}

/// Repository handle, from [`Store::replays`].
pub struct Replays<'a> {
    store: &'a Store,
}

impl Store {
    /// Turn replays.
    pub fn replays(&self) -> Replays<'_> {
        Replays { store: self }
    }
}

impl Replays<'_> {
    /// Ask for a replay of turn `turn_number` of `instance_id` against
    /// `preset_id`, pending until a pod claims it. `NotFound` when the turn
    /// or the preset is not the tenant's; `FailedPrecondition` when the
    /// turn has no journal (pruned after its retention, or never written);
    /// `InvalidArgument` for a turn number below 1. Nothing is written on
    /// any refusal.
    pub async fn create(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        turn_number: i64,
        preset_id: Uuid,
    ) -> Result<ReplayRow, StoreError> {
        if turn_number < 1 {
            return Err(StoreError::invalid("turn_number", "must be at least 1"));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let found: Option<(Option<Uuid>, bool, bool)> = sqlx::query_as(
            "SELECT l.event_id,
                    EXISTS (SELECT 1 FROM agent_episode_journal j
                             WHERE j.tenant_id = l.tenant_id AND j.event_id = l.event_id
                               AND j.kind = 'llm_turn'),
                    EXISTS (SELECT 1 FROM llm_presets p WHERE p.tenant_id = $1 AND p.id = $4)
               FROM agent_state_ledger l
              WHERE l.tenant_id = $1 AND l.instance_id = $2 AND l.turn_number = $3",
        )
        .bind(tenant_id)
        .bind(instance_id)
        .bind(turn_number)
        .bind(preset_id)
        .fetch_optional(tx.conn())
        .await?;
        let (event_id, journaled, preset) =
            found.ok_or_else(|| StoreError::not_found("ledger turn"))?;
        if !preset {
            return Err(StoreError::not_found("llm preset"));
        }
        let event_id = match (event_id, journaled) {
            (Some(e), true) => e,
            _ => {
                return Err(StoreError::precondition(
                    "the turn has no journal to replay (pruned after its retention, or never written)",
                ));
            }
        };
        let row: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO agent_replays (tenant_id, instance_id, turn_number, event_id, preset_id)
             VALUES ($1, $2, $3, $4, $5) RETURNING to_jsonb(agent_replays)",
        )
        .bind(tenant_id)
        .bind(instance_id)
        .bind(turn_number)
        .bind(event_id)
        .bind(preset_id)
        .fetch_one(tx.conn())
        .await?;
        // Delivered at commit: the publisher sends it then.
        sqlx::query("SELECT pg_notify('genesis_due', $1)")
            .bind(REPLAY_NOTICE)
            .execute(tx.conn())
            .await?;
        tx.commit().await?;
        decode(row)
    }

    /// Mark the replays whose message the pods' stream acknowledged.
    pub async fn mark_published(&self, ids: &[Uuid]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE agent_replays SET published_at = now()
              WHERE id = ANY($1) AND published_at IS NULL",
        )
        .bind(ids)
        .execute(self.store.system_pool())
        .await?;
        Ok(())
    }

    /// Up to `limit` replays, across tenants, asked for at least `age` ago
    /// and never acknowledged by the stream (control stopped between the
    /// insert and the publish, or the stream refused it): the publisher
    /// sends them again.
    pub async fn unpublished(
        &self,
        age: std::time::Duration,
        limit: i64,
    ) -> Result<Vec<UnpublishedReplay>, StoreError> {
        let rows: Vec<(Uuid, Uuid, Uuid)> = sqlx::query_as(
            "SELECT id, tenant_id, instance_id FROM agent_replays
              WHERE published_at IS NULL AND status = 'pending'
                AND created_at < now() - make_interval(secs => $1)
              ORDER BY created_at LIMIT $2",
        )
        .bind(age.as_secs_f64())
        .bind(limit)
        .fetch_all(self.store.system_pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, tenant_id, instance_id)| UnpublishedReplay {
                id,
                tenant_id,
                instance_id,
            })
            .collect())
    }

    /// Claim `replay_id` for a pod under a new session for `ttl`: a pending
    /// replay, or a running one whose claim lapsed (its pod died). `NotFound`
    /// for another tenant's.
    pub async fn claim(
        &self,
        tenant_id: Uuid,
        replay_id: Uuid,
        ttl: std::time::Duration,
    ) -> Result<ReplayClaim, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let claimed: Option<serde_json::Value> = sqlx::query_scalar(
            "UPDATE agent_replays SET status = 'running', session = s.id,
                    sessions = sessions || s.id,
                    claimed_until = now() + make_interval(secs => $3)
               FROM (SELECT gen_random_uuid() AS id) s
              WHERE agent_replays.tenant_id = $1 AND agent_replays.id = $2
                AND (status = 'pending' OR (status = 'running' AND claimed_until <= now()))
            RETURNING to_jsonb(agent_replays)",
        )
        .bind(tenant_id)
        .bind(replay_id)
        .bind(ttl.as_secs_f64())
        .fetch_optional(tx.conn())
        .await?;
        let answer = match claimed {
            Some(row) => ReplayClaim::Claimed(Box::new(decode(row)?)),
            None => {
                let row: Option<(String, Option<DateTime<Utc>>)> = sqlx::query_as(
                    "SELECT status, claimed_until FROM agent_replays
                      WHERE tenant_id = $1 AND id = $2",
                )
                .bind(tenant_id)
                .bind(replay_id)
                .fetch_optional(tx.conn())
                .await?;
                let (status, until) = row.ok_or_else(|| StoreError::not_found("replay"))?;
                let status = status
                    .parse::<ReplayStatus>()
                    .map_err(|e| StoreError::Database(e.to_string()))?;
                match (status, until) {
                    (ReplayStatus::Running, Some(until)) => ReplayClaim::Held(until),
                    (status, _) => ReplayClaim::Settled(status),
                }
            }
        };
        tx.commit().await?;
        Ok(answer)
    }

    /// Whether `session` still runs the replay: `NotFound` for no such
    /// replay of the tenant's, `LeaseLost` when it is settled, claimed by
    /// another session, or its claim lapsed.
    pub async fn check_session(
        &self,
        (tenant_id, replay_id, session): (Uuid, Uuid, Uuid),
    ) -> Result<(), StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let current: Option<bool> = sqlx::query_scalar(
            "SELECT status = 'running' AND session = $3 AND claimed_until > now()
               FROM agent_replays WHERE tenant_id = $1 AND id = $2",
        )
        .bind(tenant_id)
        .bind(replay_id)
        .bind(session)
        .fetch_optional(tx.conn())
        .await?;
        tx.commit().await?;
        match current {
            None => Err(StoreError::not_found("replay")),
            Some(true) => Ok(()),
            Some(false) => Err(StoreError::LeaseLost),
        }
    }

    /// Hold `amount` of the tenant's weekly window for the replay's next
    /// turn, under the one hold rule every caller shares: agents', coders'
    /// and replays' holds count against each other. `LeaseLost` when
    /// `session` no longer runs the replay.
    pub async fn reserve_credit(
        &self,
        (tenant_id, replay_id, session): (Uuid, Uuid, Uuid),
        draw: CreditDraw,
        amount: f64,
    ) -> Result<Reservation, StoreError> {
        crate::credit::check_amount("limit_usd", draw.limit_usd)?;
        crate::credit::check_amount("amount_usd", amount)?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let raw: serde_json::Value = sqlx::query_scalar(
            "SELECT CASE WHEN EXISTS (
                        SELECT 1 FROM agent_replays
                         WHERE tenant_id = $1 AND id = $2 AND status = 'running'
                           AND session = $3 AND claimed_until > now())
                    THEN genesis_hold_credit($1, NULL, $3, $4, $5, $6)
                    ELSE jsonb_build_object('outcome', 'lease_lost') END",
        )
        .bind(tenant_id)
        .bind(replay_id)
        .bind(session)
        .bind(draw.week_start)
        .bind(draw.limit_usd)
        .bind(amount)
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        crate::credit::reservation(decode(raw)?, draw.limit_usd, "replay")
    }

    /// Record one priced attempt of a replay's call (call tag Replay)
    /// against the replay, drawn from the credit window. Any session that
    /// ever claimed the replay may record (the provider billed the call
    /// whether or not the claim still stands); `NotFound` for any other
    /// session or another tenant's replay, with nothing written.
    /// `attempt`'s instance and session are not read.
    pub async fn record_attempt(
        &self,
        (tenant_id, replay_id, session): (Uuid, Uuid, Uuid),
        attempt: &NewCallAttempt,
        credit: CreditDraw,
    ) -> Result<RecordedReplayAttempt, StoreError> {
        let object = attempt_object(attempt, credit, None)?;
        let raw: serde_json::Value =
            sqlx::query_scalar("SELECT genesis_record_replay_attempt($1, $2, $3, $4)")
                .bind(tenant_id)
                .bind(replay_id)
                .bind(session)
                .bind(object)
                .fetch_one(self.store.tenant_pool())
                .await?;
        #[derive(Deserialize)]
        struct Raw {
            outcome: String,
            snapshot: Option<CallSnapshotRow>,
            #[serde(default)]
            current: bool,
        }
        let raw: Raw = decode(raw)?;
        match (raw.outcome.as_str(), raw.snapshot) {
            ("recorded", Some(snapshot)) => Ok(RecordedReplayAttempt {
                snapshot,
                cost_usd: attempt.cost_usd,
                current: raw.current,
            }),
            ("not_found", _) => Err(StoreError::not_found("replay")),
            (other, _) => Err(StoreError::Database(format!(
                "unexpected record outcome {other:?}"
            ))),
        }
    }

    /// Settle the replay `session` runs: done with `outcome`, or failed
    /// with the error. `LeaseLost` when the session no longer runs it
    /// (claimed again after its claim lapsed, or already settled): nothing
    /// is written then. Its credit hold lapses with the settle.
    pub async fn complete(
        &self,
        (tenant_id, replay_id, session): (Uuid, Uuid, Uuid),
        result: Result<&ReplayOutcome, &str>,
    ) -> Result<ReplayStatus, StoreError> {
        let (status, outcome, error) = match result {
            Ok(o) => (
                ReplayStatus::Done,
                Some(serde_json::to_value(o).map_err(|e| StoreError::Database(e.to_string()))?),
                String::new(),
            ),
            Err(e) => {
                if e.trim().is_empty() {
                    return Err(StoreError::invalid("error", "a failed replay says why"));
                }
                (ReplayStatus::Failed, None, e.chars().take(4_000).collect())
            }
        };
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let done = sqlx::query(
            "UPDATE agent_replays
                SET status = $4, outcome = $5, error = $6, finished_at = now(),
                    claimed_until = NULL
              WHERE tenant_id = $1 AND id = $2 AND session = $3 AND status = 'running'",
        )
        .bind(tenant_id)
        .bind(replay_id)
        .bind(session)
        .bind(status.as_str())
        .bind(outcome)
        .bind(error)
        .execute(tx.conn())
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::LeaseLost);
        }
        sqlx::query("DELETE FROM credit_reservations WHERE tenant_id = $1 AND session = $2")
            .bind(tenant_id)
            .bind(session)
            .execute(tx.conn())
            .await?;
        tx.commit().await?;
        Ok(status)
    }

    /// One replay with what its calls cost. `NotFound` when it is not the
    /// tenant's.
    pub async fn get(&self, tenant_id: Uuid, replay_id: Uuid) -> Result<ReplayView, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(r) || jsonb_build_object(
                    'cost_usd', coalesce((SELECT sum(s.cost_usd) FROM llm_call_snapshots s
                                           WHERE s.tenant_id = r.tenant_id AND s.replay_id = r.id), 0),
                    'attempts', (SELECT count(*) FROM llm_call_attempts a
                                   JOIN llm_call_snapshots s
                                     ON s.tenant_id = a.tenant_id AND s.id = a.snapshot_id
                                  WHERE s.tenant_id = r.tenant_id AND s.replay_id = r.id))
               FROM agent_replays r WHERE r.tenant_id = $1 AND r.id = $2",
        )
        .bind(tenant_id)
        .bind(replay_id)
        .fetch_optional(tx.conn())
        .await?;
        tx.commit().await?;
        decode(row.ok_or_else(|| StoreError::not_found("replay"))?)
    }
}
