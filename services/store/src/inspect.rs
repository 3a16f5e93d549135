//! Read-only and fixture statements for the services' tests, the bench and
//! operator diagnostics: row counts, the columns an assertion compares, and
//! the few writes that force a row into a state a test needs (a lease
//! already expired, an event due now). Keeping them here keeps every SQL
//! statement of the workspace in this crate, where a schema change finds
//! them.
//!
//! Everything here runs on the pool or connection it is handed (a test's
//! own database, the bench's), outside the store's role switching and
//! tenant transactions, so it reads across every tenant unless it takes a
//! tenant. That is what makes it a fixture path: it must never be called on
//! the tick path or behind an RPC, and a function that writes says so by
//! its name (`force_…`, `fixture_…`). It offers no way to run a statement
//! its caller wrote: each function is the one statement it is named for.

use chrono::{DateTime, Utc};
use genesis_core::Phase;
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor, PgPool};
use uuid::Uuid;

use crate::error::StoreError;

pub mod fleet;

/// `count(*)` of `table`, every row the executor can see (all tenants on a
/// test's pool; one tenant's inside a tenant transaction).
pub async fn count_rows<'c>(db: impl PgExecutor<'c>, table: &str) -> Result<i64, StoreError> {
    let table = crate::rows::quoted_identifier("table", table)?;
    Ok(
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(db)
            .await?,
    )
}

// --- agent_instances -------------------------------------------------------

/// An instance's lease: `(lease_session, lease_expires_at)`.
pub async fn instance_lease(
    pool: &PgPool,
    instance: Uuid,
) -> Result<(Option<Uuid>, Option<DateTime<Utc>>), StoreError> {
    Ok(
        sqlx::query_as("SELECT lease_session, lease_expires_at FROM agent_instances WHERE id = $1")
            .bind(instance)
            .fetch_one(pool)
            .await?,
    )
}

/// Every instance's lease as `(id, lease_session, lease_expires_at as
/// text)`, by id: what a "nothing was written" snapshot compares.
pub async fn all_instance_leases(
    pool: &PgPool,
) -> Result<Vec<(Uuid, Option<Uuid>, Option<String>)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, lease_session, lease_expires_at::text FROM agent_instances ORDER BY id",
    )
    .fetch_all(pool)
    .await?)
}

/// Instances holding a lease, across every tenant.
pub async fn count_leased_instances(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_instances WHERE lease_session IS NOT NULL")
            .fetch_one(pool)
            .await?,
    )
}

/// Instances of `agent_type`, across every tenant.
pub async fn count_instances_of_type(pool: &PgPool, agent_type: &str) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_instances WHERE agent_type = $1")
            .bind(agent_type)
            .fetch_one(pool)
            .await?,
    )
}

/// An instance's status and the streak counters the tick path keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceCounters {
    pub status: String,
    pub consecutive_blocked_turns: i32,
    pub consecutive_exhausted_turns: i32,
    pub consecutive_provider_failures: i32,
    /// A lease session is recorded.
    pub leased: bool,
}

/// The status and streak counters of `instance`.
pub async fn instance_counters(
    pool: &PgPool,
    instance: Uuid,
) -> Result<InstanceCounters, StoreError> {
    let (status, blocked, exhausted, failures, leased): (String, i32, i32, i32, bool) =
        sqlx::query_as(
            "SELECT status, consecutive_blocked_turns, consecutive_exhausted_turns,
                    consecutive_provider_failures, lease_session IS NOT NULL
               FROM agent_instances WHERE id = $1",
        )
        .bind(instance)
        .fetch_one(pool)
        .await?;
    Ok(InstanceCounters {
        status,
        consecutive_blocked_turns: blocked,
        consecutive_exhausted_turns: exhausted,
        consecutive_provider_failures: failures,
        leased,
    })
}

/// The mode recorded as active on `instance` (`None`: the type's default).
pub async fn active_mode(pool: &PgPool, instance: Uuid) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT active_mode FROM agent_instances WHERE id = $1")
            .bind(instance)
            .fetch_one(pool)
            .await?,
    )
}

/// Whether `instance` is still building its starting workset.
pub async fn building_starting_workset(pool: &PgPool, instance: Uuid) -> Result<bool, StoreError> {
    Ok(
        sqlx::query_scalar(
            "SELECT is_building_starting_workset FROM agent_instances WHERE id = $1",
        )
        .bind(instance)
        .fetch_one(pool)
        .await?,
    )
}

/// Fixture: put `instance`'s lease a second in the past, its session
/// unchanged, so the next claim finds it lapsed without waiting.
pub async fn force_lease_expired(pool: &PgPool, instance: Uuid) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agent_instances SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(instance)
    .execute(pool)
    .await?;
    Ok(())
}

/// Fixture: date every journal step of `event` `age` in the past, as a
/// journal written that long ago would be (the tenant path cannot rewrite
/// a step).
pub async fn force_journal_age(
    pool: &PgPool,
    event: Uuid,
    age: std::time::Duration,
) -> Result<(), StoreError> {
    let secs = i64::try_from(age.as_secs()).unwrap_or(i64::MAX);
    sqlx::query(
        "UPDATE agent_episode_journal SET created_at = now() - make_interval(secs => $2::float8)
          WHERE event_id = $1",
    )
    .bind(event)
    .bind(secs as f64)
    .execute(pool)
    .await?;
    Ok(())
}

/// Fixture: clear `instance`'s lease whoever holds it, as a lapsed lease
/// the next claim took over would leave it.
pub async fn force_lease_released(pool: &PgPool, instance: Uuid) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agent_instances SET lease_session = NULL, lease_expires_at = NULL WHERE id = $1",
    )
    .bind(instance)
    .execute(pool)
    .await?;
    Ok(())
}

/// Fixture: record `mode` as `instance`'s active mode without an approved
/// change (no audit row).
pub async fn force_active_mode(
    pool: &PgPool,
    instance: Uuid,
    mode: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE agent_instances SET active_mode = $2 WHERE id = $1")
        .bind(instance)
        .bind(mode)
        .execute(pool)
        .await?;
    Ok(())
}

/// Fixture: point `instance` at another LLM call site.
pub async fn force_call_site(pool: &PgPool, instance: Uuid, site: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE agent_instances SET call_site_id = $2 WHERE id = $1")
        .bind(instance)
        .bind(site)
        .execute(pool)
        .await?;
    Ok(())
}

// --- agent_event_queue -----------------------------------------------------

/// Consumed events, across every tenant.
pub async fn count_consumed_events(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_event_queue WHERE consumed_at IS NOT NULL")
            .fetch_one(pool)
            .await?,
    )
}

/// Events of `kind` in the queue (any state), across every tenant.
pub async fn count_events_of_kind(pool: &PgPool, kind: &str) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_event_queue WHERE event_kind = $1")
            .bind(kind)
            .fetch_one(pool)
            .await?,
    )
}

/// `(event_kind, payload)` of `instance`'s events of `kind`, any state.
pub async fn events_of_kind(
    pool: &PgPool,
    instance: Uuid,
    kind: &str,
) -> Result<Vec<(String, Value)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT event_kind, payload FROM agent_event_queue WHERE instance_id = $1 AND event_kind = $2",
    )
    .bind(instance)
    .bind(kind)
    .fetch_all(pool)
    .await?)
}

/// The ids of `instance`'s events of `kind`, any state, oldest first.
pub async fn event_ids_of_kind(
    pool: &PgPool,
    instance: Uuid,
    kind: &str,
) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM agent_event_queue WHERE instance_id = $1 AND event_kind = $2
          ORDER BY sequence_number",
    )
    .bind(instance)
    .bind(kind)
    .fetch_all(pool)
    .await?)
}

/// Every event's claim and consumption as one `|`-joined line, by id: what
/// a "nothing was written" snapshot compares.
pub async fn all_event_claim_lines(pool: &PgPool) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT concat_ws('|', id, claimed_session, attempts, consumed_at, visible_at)
           FROM agent_event_queue ORDER BY id",
    )
    .fetch_all(pool)
    .await?)
}

/// Where one event stands after a provider failure gave it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventRedelivery {
    pub attempts: i32,
    pub consumed: bool,
    pub published: bool,
    /// `visible_at` lies more than the given delay after the database's now.
    pub visible_later: bool,
}

/// The delivery state of event `id`; `visible_later` compares its
/// `visible_at` with the database's clock plus `delay`.
pub async fn event_redelivery(
    pool: &PgPool,
    id: Uuid,
    delay: std::time::Duration,
) -> Result<EventRedelivery, StoreError> {
    let (attempts, consumed, published, visible_later): (i32, bool, bool, bool) = sqlx::query_as(
        "SELECT attempts, consumed_at IS NOT NULL, published_at IS NOT NULL,
                visible_at > now() + make_interval(secs => $2)
           FROM agent_event_queue WHERE id = $1",
    )
    .bind(id)
    .bind(delay.as_secs_f64())
    .fetch_one(pool)
    .await?;
    Ok(EventRedelivery {
        attempts,
        consumed,
        published,
        visible_later,
    })
}

/// `(the event's instance's consecutive provider failures, the event is
/// visible now)` of event `id`.
pub async fn event_due_and_instance_failures(
    pool: &PgPool,
    id: Uuid,
) -> Result<(i32, bool), StoreError> {
    Ok(sqlx::query_as(
        "SELECT i.consecutive_provider_failures, e.visible_at <= now()
           FROM agent_instances i JOIN agent_event_queue e ON e.instance_id = i.id
          WHERE e.id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await?)
}

/// Fixture: make every unconsumed event of `kind` due now, as if its
/// deferral had run out.
pub async fn force_pending_events_due(pool: &PgPool, kind: &str) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agent_event_queue SET visible_at = now() WHERE consumed_at IS NULL AND event_kind = $1",
    )
    .bind(kind)
    .execute(pool)
    .await?;
    Ok(())
}

/// Fixture: make event `id` due now.
pub async fn force_event_due(pool: &PgPool, id: Uuid) -> Result<(), StoreError> {
    sqlx::query("UPDATE agent_event_queue SET visible_at = now() WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Fixture: `n` `ExternalSignalReceived` events for `instance`, due now,
/// enqueued by ONE statement on `db` (one commit, so `n` notices at once);
/// their ids.
pub async fn fixture_enqueue_signals_at_once<'c>(
    db: impl PgExecutor<'c>,
    tenant: Uuid,
    instance: Uuid,
    n: i64,
) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT (genesis_enqueue_event($1, $2, 'ExternalSignalReceived',
                     jsonb_build_object('n', g), NULL, NULL)->'event'->>'id')::uuid
           FROM generate_series(1, $3) g",
    )
    .bind(tenant)
    .bind(instance)
    .bind(n)
    .fetch_all(db)
    .await?)
}

// --- agent_state_ledger ----------------------------------------------------

/// Ledger turns of `instance`.
pub async fn count_ledger_turns(pool: &PgPool, instance: Uuid) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_state_ledger WHERE instance_id = $1")
            .bind(instance)
            .fetch_one(pool)
            .await?,
    )
}

/// `(tenant, ledger turns)` of every tenant with a turn, by tenant.
pub async fn ledger_turns_per_tenant(pool: &PgPool) -> Result<Vec<(Uuid, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT tenant_id, count(*) FROM agent_state_ledger GROUP BY tenant_id ORDER BY tenant_id",
    )
    .fetch_all(pool)
    .await?)
}

/// The turn numbers of `instance`'s ledger, in order.
pub async fn ledger_turn_numbers(pool: &PgPool, instance: Uuid) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT turn_number FROM agent_state_ledger WHERE instance_id = $1 ORDER BY turn_number",
    )
    .bind(instance)
    .fetch_all(pool)
    .await?)
}

/// `instance`'s newest `tail` turns as `(turn_number, reasoning summary or
/// '')`, oldest first.
pub async fn ledger_tail(
    pool: &PgPool,
    instance: Uuid,
    tail: i64,
) -> Result<Vec<(i64, String)>, StoreError> {
    let mut rows: Vec<(i64, String)> = sqlx::query_as(
        "SELECT turn_number, coalesce(reasoning_summary, '') FROM agent_state_ledger
          WHERE instance_id = $1 ORDER BY turn_number DESC LIMIT $2",
    )
    .bind(instance)
    .bind(tail)
    .fetch_all(pool)
    .await?;
    rows.reverse();
    Ok(rows)
}

/// `(reasoning_summary, the payload's activeMode)` of each of `instance`'s
/// turns, in turn order.
pub async fn ledger_summaries_and_modes(
    pool: &PgPool,
    instance: Uuid,
) -> Result<Vec<(Option<String>, Option<String>)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT reasoning_summary, decision_payload->>'activeMode' FROM agent_state_ledger
          WHERE instance_id = $1 ORDER BY turn_number",
    )
    .bind(instance)
    .fetch_all(pool)
    .await?)
}

/// The decision payload of the first ledger row the database returns (for
/// a test that has written exactly one).
pub async fn one_ledger_payload(pool: &PgPool) -> Result<Value, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT decision_payload FROM agent_state_ledger")
            .fetch_one(pool)
            .await?,
    )
}

/// What one ledger turn recorded about its cost and mode.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerTurnCost {
    pub llm_call_snapshot_id: Option<Uuid>,
    pub cost_usd: Option<f64>,
    pub active_mode: Option<String>,
}

/// The snapshot, cost and mode of ledger turn `id`.
pub async fn ledger_turn_cost(pool: &PgPool, id: Uuid) -> Result<LedgerTurnCost, StoreError> {
    let (snapshot, cost, mode): (Option<Uuid>, Option<f64>, Option<String>) = sqlx::query_as(
        "SELECT llm_call_snapshot_id, cost_usd::float8, decision_payload->>'activeMode'
           FROM agent_state_ledger WHERE id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await?;
    Ok(LedgerTurnCost {
        llm_call_snapshot_id: snapshot,
        cost_usd: cost,
        active_mode: mode,
    })
}

/// One turn a fixture writes straight into a ledger.
#[derive(Debug, Clone, Copy)]
pub struct FixtureTurn<'a> {
    pub turn_number: i64,
    pub event_kind: &'a str,
    pub decision_kind: &'a str,
    pub phase: Phase,
    pub reasoning_summary: &'a str,
}

/// Fixture: append `turns` to `instance`'s ledger on `conn` (the caller's
/// tenant transaction), without a tick, for tools that read the ledger.
pub async fn fixture_ledger_turns(
    conn: &mut PgConnection,
    tenant: Uuid,
    instance: Uuid,
    turns: &[FixtureTurn<'_>],
) -> Result<(), StoreError> {
    for t in turns {
        sqlx::query(
            "INSERT INTO agent_state_ledger
                    (tenant_id, instance_id, turn_number, event_kind, decision_kind, phase, reasoning_summary)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(tenant)
        .bind(instance)
        .bind(t.turn_number)
        .bind(t.event_kind)
        .bind(t.decision_kind)
        .bind(t.phase.as_str())
        .bind(t.reasoning_summary)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Fixture, and the one ledger change outside a reset: give `instance`'s
/// turn `turn_number` a new id and `summary`, so a test sees what a reset
/// followed by new turns would leave at that number while every other turn
/// stays as it was. Nothing but a test may call it.
pub async fn fixture_replace_ledger_turn(
    pool: &PgPool,
    instance: Uuid,
    turn_number: i64,
    summary: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agent_state_ledger SET id = gen_random_uuid(), reasoning_summary = $3
          WHERE instance_id = $1 AND turn_number = $2",
    )
    .bind(instance)
    .bind(turn_number)
    .bind(summary)
    .execute(pool)
    .await?;
    Ok(())
}

// --- messages, attention, missions, research -------------------------------

/// The direction of the first message the database returns (for a test
/// that has written exactly one).
pub async fn one_message_direction(pool: &PgPool) -> Result<String, StoreError> {
    Ok(sqlx::query_scalar("SELECT direction FROM agent_messages")
        .fetch_one(pool)
        .await?)
}

/// The columns of an attention request that tests compare.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionFields {
    pub kind: String,
    pub body: String,
    pub options: Value,
    pub metadata: Value,
}

/// The first attention request the database returns, of `kind` when given
/// (for a test that has written exactly one such).
pub async fn one_attention_request(
    pool: &PgPool,
    kind: Option<&str>,
) -> Result<AttentionFields, StoreError> {
    let (kind, body, options, metadata): (String, String, Value, Value) = sqlx::query_as(
        "SELECT kind, body, options, metadata FROM attention_requests
          WHERE $1::text IS NULL OR kind = $1",
    )
    .bind(kind)
    .fetch_one(pool)
    .await?;
    Ok(AttentionFields {
        kind,
        body,
        options,
        metadata,
    })
}

/// Attention requests of `kind`, across every tenant.
pub async fn count_attention_requests_of_kind(
    pool: &PgPool,
    kind: &str,
) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM attention_requests WHERE kind = $1")
            .bind(kind)
            .fetch_one(pool)
            .await?,
    )
}

/// `(steering_instance_id, status, metadata)` of the first mission the
/// database returns (for a test that has written exactly one).
pub async fn one_mission(pool: &PgPool) -> Result<(Uuid, String, Value), StoreError> {
    Ok(
        sqlx::query_as("SELECT steering_instance_id, status, metadata FROM missions")
            .fetch_one(pool)
            .await?,
    )
}

/// Research records of `tenant`, or only the one with `id` when given.
pub async fn count_research_records(
    pool: &PgPool,
    tenant: Uuid,
    id: Option<Uuid>,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM research_records WHERE tenant_id = $1 AND ($2::uuid IS NULL OR id = $2)",
    )
    .bind(tenant)
    .bind(id)
    .fetch_one(pool)
    .await?)
}

/// The two tables whose rows name their steering SOA in
/// `metadata->>'soaInstanceId'`, each with an expression index on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SoaLinked {
    Missions,
    AttentionRequests,
}

impl SoaLinked {
    /// The table's name.
    pub fn table(self) -> &'static str {
        match self {
            SoaLinked::Missions => "missions",
            SoaLinked::AttentionRequests => "attention_requests",
        }
    }
}

/// Fixture: `n` rows of `table` for `tenant`, each naming a random SOA,
/// then ANALYZE the table so its plans see their number.
pub async fn fixture_soa_linked_rows(
    pool: &PgPool,
    table: SoaLinked,
    tenant: Uuid,
    n: i32,
) -> Result<(), StoreError> {
    match table {
        SoaLinked::Missions => {
            sqlx::query(
                "INSERT INTO missions (tenant_id, kind, title, metadata)
                 SELECT $1, 'MissionResearch', 'm' || g,
                        jsonb_build_object('soaInstanceId', gen_random_uuid()::text)
                   FROM generate_series(1, $2) g",
            )
            .bind(tenant)
            .bind(n)
            .execute(pool)
            .await?;
            sqlx::query("ANALYZE missions").execute(pool).await?;
        }
        SoaLinked::AttentionRequests => {
            sqlx::query(
                "INSERT INTO attention_requests (tenant_id, kind, title, metadata)
                 SELECT $1, 'decision', 'd' || g,
                        jsonb_build_object('soaInstanceId', gen_random_uuid()::text)
                   FROM generate_series(1, $2) g",
            )
            .bind(tenant)
            .bind(n)
            .execute(pool)
            .await?;
            sqlx::query("ANALYZE attention_requests")
                .execute(pool)
                .await?;
        }
    }
    Ok(())
}

/// The lines of `EXPLAIN` for the rows of `table` that name `soa`.
pub async fn explain_rows_of_soa(
    pool: &PgPool,
    table: SoaLinked,
    soa: Uuid,
) -> Result<Vec<String>, StoreError> {
    // The value is written into the text (a Uuid cannot carry a quote) so
    // the plan is the one a literal gets, not a generic parameter's.
    let table = table.table();
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN SELECT * FROM {table} WHERE metadata->>'soaInstanceId' = '{soa}'"
    )))
    .fetch_all(pool)
    .await?)
}

// --- LLM pricing, attempts, snapshots, credit ------------------------------

/// `spent_usd` of the first credit window the database returns (for a test
/// with one tenant and one week).
pub async fn one_credit_window_spent(pool: &PgPool) -> Result<f64, StoreError> {
    Ok(sqlx::query_scalar("SELECT spent_usd FROM credit_windows")
        .fetch_one(pool)
        .await?)
}

/// Fixture: drop every credit reservation, as if each had been settled.
pub async fn force_credit_reservations_cleared(pool: &PgPool) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM credit_reservations")
        .execute(pool)
        .await?;
    Ok(())
}

/// `(served_model, priced_as, pricing_source)` of every call attempt, in
/// ordinal order.
pub async fn attempt_pricing(
    pool: &PgPool,
) -> Result<Vec<(String, Option<String>, Option<String>)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT served_model, priced_as, pricing_source FROM llm_call_attempts ORDER BY ordinal",
    )
    .fetch_all(pool)
    .await?)
}

/// `(count, summed cost in USD)` of the call attempts with `outcome`.
pub async fn attempts_with_outcome(pool: &PgPool, outcome: &str) -> Result<(i64, f64), StoreError> {
    Ok(sqlx::query_as(
        "SELECT count(*), coalesce(sum(cost_usd), 0)::float8 FROM llm_call_attempts WHERE outcome = $1",
    )
    .bind(outcome)
    .fetch_one(pool)
    .await?)
}

/// `(id, cost in USD)` of the first call snapshot the database returns
/// (for a test that has written exactly one).
pub async fn one_call_snapshot_cost(pool: &PgPool) -> Result<(Uuid, f64), StoreError> {
    Ok(
        sqlx::query_as("SELECT id, cost_usd::float8 FROM llm_call_snapshots")
            .fetch_one(pool)
            .await?,
    )
}

/// The whole first call snapshot row as JSON text (for a test that checks
/// what a snapshot never stores).
pub async fn one_call_snapshot_text(pool: &PgPool) -> Result<String, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT to_jsonb(s)::text FROM llm_call_snapshots s")
            .fetch_one(pool)
            .await?,
    )
}

/// Fixture: set the prompt price of `model` without the pricing path's
/// checks.
pub async fn force_input_price(
    pool: &PgPool,
    model: &str,
    input_usd_per_mtok: f64,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE llm_pricing SET input_usd_per_mtok = $2 WHERE model = $1")
        .bind(model)
        .bind(input_usd_per_mtok)
        .execute(pool)
        .await?;
    Ok(())
}

/// Fixture: remove `model`'s pricing row.
pub async fn force_pricing_removed(pool: &PgPool, model: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM llm_pricing WHERE model = $1")
        .bind(model)
        .execute(pool)
        .await?;
    Ok(())
}

/// The Default-preset seed records of `tenant`.
pub async fn count_default_seeds(pool: &PgPool, tenant: Uuid) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM llm_default_seeds WHERE tenant_id = $1")
            .bind(tenant)
            .fetch_one(pool)
            .await?,
    )
}

// --- configuration and the mode catalogue ----------------------------------

/// Every configuration row as `(tenant_id, key, value, platform_value)`,
/// by tenant and key.
pub async fn config_rows(
    pool: &PgPool,
) -> Result<Vec<(Option<Uuid>, String, String, Option<String>)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT tenant_id, key, value, platform_value FROM system_configs ORDER BY tenant_id, key",
    )
    .fetch_all(pool)
    .await?)
}

/// Fixture: a tenant configuration row with `value` as both its value and
/// its platform value, written without the configuration path's checks.
pub async fn fixture_config_row(
    pool: &PgPool,
    tenant: Uuid,
    key: &str,
    value: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO system_configs (tenant_id, key, value, platform_value) VALUES ($1, $2, $3, $3)",
    )
    .bind(tenant)
    .bind(key)
    .bind(value)
    .execute(pool)
    .await?;
    Ok(())
}

/// The catalogue epoch.
pub async fn catalogue_epoch(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT epoch FROM catalogue_epoch")
        .fetch_one(pool)
        .await?)
}

/// Tenant mode overrides, across every tenant.
pub async fn count_mode_overrides(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_modes WHERE tenant_id IS NOT NULL")
            .fetch_one(pool)
            .await?,
    )
}

/// Mode change audit rows written by catalogue edits.
pub async fn count_catalogue_mode_changes(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_mode_change_events WHERE source = 'catalogue'",
    )
    .fetch_one(pool)
    .await?)
}

/// Fixture: name `preset` on every catalogue row of mode `mode` of
/// `agent_type`.
pub async fn force_mode_preset(
    pool: &PgPool,
    agent_type: &str,
    mode: &str,
    preset: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE agent_modes SET preset_id = $3 WHERE agent_type = $1 AND name = $2")
        .bind(agent_type)
        .bind(mode)
        .bind(preset)
        .execute(pool)
        .await?;
    Ok(())
}

/// Fixture: set (or with `None` clear) the toolset of every catalogue row
/// of mode `mode` of `agent_type`, without the catalogue's checks.
pub async fn force_mode_toolset(
    pool: &PgPool,
    agent_type: &str,
    mode: &str,
    toolset: Option<&[String]>,
) -> Result<(), StoreError> {
    let toolset = toolset.map(|t| serde_json::json!(t));
    sqlx::query("UPDATE agent_modes SET toolset = $3 WHERE agent_type = $1 AND name = $2")
        .bind(agent_type)
        .bind(mode)
        .bind(toolset)
        .execute(pool)
        .await?;
    Ok(())
}

/// Fixture: set the prompt fragment of `agent_type`'s default mode rows.
pub async fn force_default_mode_fragment(
    pool: &PgPool,
    agent_type: &str,
    fragment: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE agent_modes SET prompt_fragment = $2 WHERE agent_type = $1 AND is_default")
        .bind(agent_type)
        .bind(fragment)
        .execute(pool)
        .await?;
    Ok(())
}

// --- tenants, sessions ----------------------------------------------------

/// Fixture: a tenant named `name` inserted on `conn` (the caller's open
/// transaction, so the test decides when its notice goes out).
pub async fn fixture_tenant_in(
    conn: &mut PgConnection,
    name: &str,
    standing_agents_enabled: bool,
) -> Result<Uuid, StoreError> {
    Ok(sqlx::query_scalar(
        "INSERT INTO tenants (name, standing_agents_enabled) VALUES ($1, $2) RETURNING id",
    )
    .bind(name)
    .bind(standing_agents_enabled)
    .fetch_one(conn)
    .await?)
}

/// `session_sha256` of the first dashboard session the database returns
/// (for a test that has opened exactly one).
pub async fn one_dashboard_session_sha256(pool: &PgPool) -> Result<String, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT session_sha256 FROM dashboard_sessions")
            .fetch_one(pool)
            .await?,
    )
}

// --- connections -----------------------------------------------------------

/// Every connection of the current database whose last statement was a
/// LISTEN, as `(that statement, its client port, the server's port)`.
pub async fn listen_connections(pool: &PgPool) -> Result<Vec<(String, i32, i32)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT query, client_port, inet_server_port() FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE 'LISTEN %'",
    )
    .fetch_all(pool)
    .await?)
}

/// Connections of the current database whose last statement was a LISTEN
/// naming `channel`.
pub async fn count_listening_on(pool: &PgPool, channel: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE 'LISTEN%' || $1 || '%'",
    )
    .bind(channel)
    .fetch_one(pool)
    .await?)
}
