//! `credit_windows`: the tenant's weekly agent-planning dollar window (spec
//! §3.4 step 9, DESIGN invariant 11). Owns reading the current window and
//! drawing cost down from it. Must never compute a cost itself (the
//! supervisor prices usage) and never let `spent_usd` go negative.

use chrono::{DateTime, Datelike as _, Duration, TimeZone as _, Utc};
use serde::Deserialize;
use uuid::Uuid;

use crate::error::StoreError;
use crate::rows::decode;
use crate::store::Store;

/// One tenant's credit window for one ISO week.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CreditWindow {
    pub tenant_id: Uuid,
    /// Monday 00:00 UTC.
    pub week_start: DateTime<Utc>,
    pub limit_usd: f64,
    pub spent_usd: f64,
}

impl CreditWindow {
    /// End of the window (exclusive): the next Monday 00:00 UTC.
    pub fn week_end(&self) -> DateTime<Utc> {
        self.week_start + Duration::days(7)
    }

    /// `max(limit - spent, 0)`.
    pub fn remaining_usd(&self) -> f64 {
        (self.limit_usd - self.spent_usd).max(0.0)
    }

    /// The ceiling is reached (spent ≥ limit).
    pub fn exhausted(&self) -> bool {
        self.spent_usd >= self.limit_usd
    }
}

/// Monday 00:00 UTC of the ISO week containing `now`: the key of the window
/// a cost incurred at `now` is drawn from.
pub fn week_start(now: DateTime<Utc>) -> DateTime<Utc> {
    let date = now.date_naive() - Duration::days(i64::from(now.weekday().num_days_from_monday()));
    Utc.from_utc_datetime(&date.and_hms_opt(0, 0, 0).unwrap_or_default())
}

pub(crate) fn check_amount(field: &str, v: f64) -> Result<(), StoreError> {
    if !v.is_finite() || v < 0.0 {
        return Err(StoreError::invalid(
            field,
            "must be a finite, non-negative amount",
        ));
    }
    Ok(())
}

/// Draw `amount` from the window at `week_start` inside the caller's tenant
/// transaction, creating the window with `limit_usd` if it does not exist
/// yet. The window's limit is set to `limit_usd` (the currently configured
/// ceiling), so a config change applies to the running week.
pub async fn draw_down_in(
    conn: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    week_start: DateTime<Utc>,
    limit_usd: f64,
    amount: f64,
) -> Result<CreditWindow, StoreError> {
    check_amount("limit_usd", limit_usd)?;
    check_amount("amount", amount)?;
    let row: serde_json::Value =
        sqlx::query_scalar("SELECT to_jsonb(genesis_credit_draw_down($1, $2, $3, $4))")
            .bind(tenant_id)
            .bind(week_start)
            .bind(limit_usd)
            .bind(amount)
            .fetch_one(conn)
            .await?;
    decode(row)
}

/// Repository handle, from [`Store::credit`].
pub struct Credit<'a> {
    store: &'a Store,
}

impl Store {
    /// Weekly credit windows.
    pub fn credit(&self) -> Credit<'_> {
        Credit { store: self }
    }
}

impl Credit<'_> {
    /// The window at `week_start` as it stands, with `limit_usd` as its
    /// ceiling; a week with no spend yet reads as spent 0 (nothing is
    /// written).
    pub async fn current(
        &self,
        tenant_id: Uuid,
        week_start: DateTime<Utc>,
        limit_usd: f64,
    ) -> Result<CreditWindow, StoreError> {
        check_amount("limit_usd", limit_usd)?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let spent: Option<f64> = sqlx::query_scalar(
            "SELECT spent_usd FROM credit_windows WHERE tenant_id = $1 AND week_start = $2",
        )
        .bind(tenant_id)
        .bind(week_start)
        .fetch_optional(tx.conn())
        .await?;
        tx.commit().await?;
        Ok(CreditWindow {
            tenant_id,
            week_start,
            limit_usd,
            spent_usd: spent.unwrap_or(0.0),
        })
    }

    /// Reserve `amount` of the window at `week_start` for the next LLM turn
    /// of `session` (`genesis_reserve_credit`): granted only while the
    /// window's spend, the reservations of the tenant's other sessions that
    /// still hold their lease, and `amount` stay within `limit_usd`, under
    /// the window's row lock so concurrent sessions cannot both take the
    /// last dollars. The session's earlier reservation is replaced; it
    /// stops counting when the session's lease ends (the completion that
    /// draws the real cost down releases it). A session that no longer
    /// holds the lease reserves nothing ([`StoreError::LeaseLost`]).
    pub async fn reserve(
        &self,
        (tenant_id, instance_id, session): (Uuid, Uuid, Uuid),
        week_start: DateTime<Utc>,
        limit_usd: f64,
        amount: f64,
    ) -> Result<Reservation, StoreError> {
        check_amount("limit_usd", limit_usd)?;
        check_amount("amount_usd", amount)?;
        let raw: serde_json::Value =
            sqlx::query_scalar("SELECT genesis_reserve_credit($1, $2, $3, $4, $5, $6)")
                .bind(tenant_id)
                .bind(instance_id)
                .bind(session)
                .bind(week_start)
                .bind(limit_usd)
                .bind(amount)
                .fetch_one(self.store.tenant_pool())
                .await?;
        reservation(decode(raw)?, limit_usd, "agent instance")
    }

    /// Reserve `amount` for the next LLM turn of the coder running
    /// `task_id` (`genesis_reserve_coder_credit`), under the same hold rule
    /// as [`Credit::reserve`]: agents' and coders' holds count against each
    /// other. The task is the hold's session; the hold lapses when the task
    /// settles or loses its coder. `NotFound` for another tenant's task,
    /// `FailedPrecondition` for a settled task or one no coder runs.
    pub async fn reserve_coder(
        &self,
        (tenant_id, task_id): (Uuid, Uuid),
        week_start: DateTime<Utc>,
        limit_usd: f64,
        amount: f64,
    ) -> Result<Reservation, StoreError> {
        check_amount("limit_usd", limit_usd)?;
        check_amount("amount_usd", amount)?;
        let raw: serde_json::Value =
            sqlx::query_scalar("SELECT genesis_reserve_coder_credit($1, $2, $3, $4, $5)")
                .bind(tenant_id)
                .bind(task_id)
                .bind(week_start)
                .bind(limit_usd)
                .bind(amount)
                .fetch_one(self.store.tenant_pool())
                .await?;
        reservation(decode(raw)?, limit_usd, "coding task")
    }

    /// Draw `amount` from the window (see [`draw_down_in`]) in its own
    /// transaction.
    pub async fn draw_down(
        &self,
        tenant_id: Uuid,
        week_start: DateTime<Utc>,
        limit_usd: f64,
        amount: f64,
    ) -> Result<CreditWindow, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let w = draw_down_in(tx.conn(), tenant_id, week_start, limit_usd, amount).await?;
        tx.commit().await?;
        Ok(w)
    }
}

/// What [`Credit::reserve`] answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    /// The turn may run: its worst case is held against the window.
    pub granted: bool,
    /// What the window had spent when asked.
    pub spent_usd: f64,
    /// The tenant's other sessions' live reservations.
    pub held_usd: f64,
    /// The ceiling it was checked against.
    pub limit_usd: f64,
}

/// A reserve function's answer as [`Reservation`] or the refusal it names.
pub(crate) fn reservation(
    r: RawReservation,
    limit_usd: f64,
    subject: &str,
) -> Result<Reservation, StoreError> {
    match r.outcome.as_str() {
        "granted" | "refused" => Ok(Reservation {
            granted: r.outcome == "granted",
            spent_usd: r.spent_usd.unwrap_or(0.0),
            held_usd: r.held_usd.unwrap_or(0.0),
            limit_usd,
        }),
        "lease_lost" => Err(StoreError::LeaseLost),
        "not_found" => Err(StoreError::not_found(subject)),
        "settled" => Err(StoreError::precondition("the coding task is settled")),
        "no_coder" => Err(StoreError::precondition("no coder runs the coding task")),
        other => Err(StoreError::Database(format!(
            "unexpected reserve outcome {other:?}"
        ))),
    }
}

#[derive(Deserialize)]
pub(crate) struct RawReservation {
    outcome: String,
    #[serde(default)]
    spent_usd: Option<f64>,
    #[serde(default)]
    held_usd: Option<f64>,
}

/// What one agent spent on one UTC day (the dashboard's spend chart).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DailySpend {
    /// Midnight UTC of the day.
    pub day: DateTime<Utc>,
    pub instance_id: Uuid,
    pub agent_type: String,
    pub cost_usd: f64,
    /// Planning calls (snapshots) that day.
    pub calls: i64,
}

impl Credit<'_> {
    /// Server-priced spend since `since`, per UTC day and agent, from the
    /// call snapshots the supervisor priced (the same figures the credit
    /// window draws down), oldest day first.
    pub async fn daily_spend(
        &self,
        tenant_id: Uuid,
        since: DateTime<Utc>,
    ) -> Result<Vec<DailySpend>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT jsonb_build_object('day', day, 'instance_id', instance_id,
                    'agent_type', agent_type, 'cost_usd', cost_usd, 'calls', calls)
               FROM (SELECT date_trunc('day', s.created_at, 'UTC') AS day, s.instance_id,
                            i.agent_type, sum(s.cost_usd) AS cost_usd, count(*) AS calls
                       FROM llm_call_snapshots s
                       JOIN agent_instances i ON i.tenant_id = s.tenant_id AND i.id = s.instance_id
                      WHERE s.tenant_id = $1 AND s.created_at >= $2
                      GROUP BY 1, 2, 3) d
              ORDER BY day, instance_id",
        )
        .bind(tenant_id)
        .bind(since)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        crate::rows::decode_all(rows)
    }
}
