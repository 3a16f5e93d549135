//! The statements the end-to-end harness and its suites use to check a
//! whole running fleet's database: the invariant sweep the fault suite
//! runs after every fault, the quiescence probe and the report of what
//! keeps a fleet from it, the counts and columns each scenario asserts, the
//! fixtures that break one invariant at a time so the checker can be seen
//! to refuse it, and the server administration the harness needs around a
//! fleet (its own database, the test login, a role the migrate step must
//! refuse).
//!
//! Like the rest of [`crate::inspect`], everything here runs on the pool it
//! is handed (a fleet's database as its owner, or the server's default
//! database for the administration), outside the store's role switching and
//! tenant transactions, so it reads across every tenant. It must never run
//! on a service path, and it never takes SQL text from its caller: each
//! function is the one statement it is named for, and the few names it
//! writes into a statement (a database, a role) are refused unless they are
//! plain lower-case identifiers.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use crate::error::StoreError;

/// `password` as a quoted literal, when it holds only letters, digits,
/// `-` and `_`: `CREATE ROLE` takes no parameters, and such a value can
/// close neither the literal nor the `DO` body it sits in.
fn password_literal(password: &str) -> Result<String, StoreError> {
    let plain = !password.is_empty()
        && password
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        Ok(format!("'{password}'"))
    } else {
        Err(StoreError::invalid(
            "password",
            "must hold only letters, digits, '-' and '_'",
        ))
    }
}

// --- the server: databases, roles, backends ---------------------------------

/// Fixture: create database `name`, owned by the pool's login.
pub async fn fixture_create_database(admin: &PgPool, name: &str) -> Result<(), StoreError> {
    let name = crate::rows::quoted_identifier("database", name)?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(admin)
        .await?;
    Ok(())
}

/// Fixture: drop database `name` if it exists, closing whatever still
/// connects to it.
pub async fn fixture_drop_database(admin: &PgPool, name: &str) -> Result<(), StoreError> {
    let name = crate::rows::quoted_identifier("database", name)?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(admin)
    .await?;
    Ok(())
}

/// Create `role` with `attributes` unless it exists. Roles are cluster-wide
/// and tests start in parallel: one that loses the race to create it sees
/// `duplicate_object` or `unique_violation`, which is fine.
async fn ensure_role(admin: &PgPool, role: &str, attributes: &str) -> Result<(), StoreError> {
    let role = crate::rows::quoted_identifier("role", role)?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DO $$ BEGIN CREATE ROLE {role} {attributes};
         EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
    )))
    .execute(admin)
    .await?;
    Ok(())
}

/// Fixture: a login role `role` with `password` and no other attribute
/// (the services' login of a test fleet), unless it exists.
pub async fn fixture_login_role(
    admin: &PgPool,
    role: &str,
    password: &str,
) -> Result<(), StoreError> {
    let password = password_literal(password)?;
    ensure_role(admin, role, &format!("LOGIN PASSWORD {password}")).await
}

/// Fixture: a `NOLOGIN BYPASSRLS` role `role` (one the migrate step must
/// refuse as a service login), unless it exists.
pub async fn fixture_bypassrls_role(admin: &PgPool, role: &str) -> Result<(), StoreError> {
    ensure_role(admin, role, "NOLOGIN BYPASSRLS").await
}

/// The roles `role` is a direct member of.
pub async fn count_role_memberships(pool: &PgPool, role: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM pg_auth_members m JOIN pg_roles s ON s.oid = m.member
          WHERE s.rolname = $1",
    )
    .bind(role)
    .fetch_one(pool)
    .await?)
}

/// Whether the pool's database holds the schema (its `tenants` table).
pub async fn schema_migrated(pool: &PgPool) -> Result<bool, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT to_regclass('tenants') IS NOT NULL")
            .fetch_one(pool)
            .await?,
    )
}

/// Whether the session of a connection of `pool` is encrypted.
pub async fn connection_encrypted(pool: &PgPool) -> Result<bool, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(pool)
            .await?,
    )
}

/// Fixture: terminate every backend connected to `database` but the
/// pool's own; one outcome per backend signalled.
pub async fn force_backends_terminated(
    admin: &PgPool,
    database: &str,
) -> Result<Vec<bool>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(database)
    .fetch_all(admin)
    .await?)
}

// --- the invariant sweep and quiescence ------------------------------------

/// What the fault suite's invariants are checked on: counts over the queue,
/// the ledger and the attention requests, and the rows that break a rule
/// outright.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetInvariants {
    /// Every event row.
    pub events: i64,
    /// Consumed events.
    pub consumed: i64,
    /// Dead-lettered events.
    pub dead_lettered: i64,
    /// Ledger turns.
    pub turns: i64,
    /// Ledger turns whose event is consumed.
    pub turns_of_consumed: i64,
    /// Attention requests of kind `dead_letter`.
    pub dead_letter_requests: i64,
    /// Dead-lettered events with a number of `dead_letter` attention
    /// requests naming them (`metadata.eventId`, same tenant and instance)
    /// other than one: (event, requests).
    pub unmatched_dead_letters: Vec<(Uuid, i64)>,
    /// `dead_letter` attention requests naming no dead-lettered event.
    pub orphan_dead_letter_requests: Vec<Uuid>,
    /// Active instances with a pending-heartbeat count other than one:
    /// (instance, pending heartbeats).
    pub bad_heartbeats: Vec<(Uuid, i64)>,
    /// Unconsumed, un-dead-lettered events of active instances that are not
    /// their heartbeat: (instance, event kind), by instance and sequence.
    pub stray_pending: Vec<(Uuid, String)>,
    /// Leases still held (a session set) whose expiry has passed.
    pub stale_leases: i64,
}

/// Read every count and offending row [`FleetInvariants`] holds.
pub async fn invariant_sweep(pool: &PgPool) -> Result<FleetInvariants, StoreError> {
    let (
        events,
        consumed,
        dead_lettered,
        turns,
        turns_of_consumed,
        dead_letter_requests,
        stale_leases,
    ): (i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(
        "SELECT
           (SELECT count(*) FROM agent_event_queue),
           (SELECT count(*) FROM agent_event_queue WHERE consumed_at IS NOT NULL),
           (SELECT count(*) FROM agent_event_queue WHERE dead_lettered_at IS NOT NULL),
           (SELECT count(*) FROM agent_state_ledger),
           (SELECT count(*) FROM agent_state_ledger l JOIN agent_event_queue e ON e.id = l.event_id
             WHERE e.consumed_at IS NOT NULL),
           (SELECT count(*) FROM attention_requests WHERE kind = 'dead_letter'),
           (SELECT count(*) FROM agent_instances
             WHERE lease_session IS NOT NULL AND lease_expires_at < now())",
    )
    .fetch_one(pool)
    .await?;
    // Each dead letter joined to its own request, not only counted: a
    // request for one event must not stand in for another's.
    let unmatched_dead_letters: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT e.id, (SELECT count(*) FROM attention_requests a
                        WHERE a.kind = 'dead_letter' AND a.tenant_id = e.tenant_id
                          AND a.instance_id = e.instance_id
                          AND a.metadata->>'eventId' = e.id::text)
           FROM agent_event_queue e WHERE e.dead_lettered_at IS NOT NULL",
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .filter(|(_, n)| *n != 1)
    .collect();
    let orphan_dead_letter_requests: Vec<Uuid> = sqlx::query_scalar(
        "SELECT a.id FROM attention_requests a
          WHERE a.kind = 'dead_letter'
            AND NOT EXISTS (SELECT 1 FROM agent_event_queue e
                             WHERE e.dead_lettered_at IS NOT NULL
                               AND e.id::text = a.metadata->>'eventId')",
    )
    .fetch_all(pool)
    .await?;
    let bad_heartbeats: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT i.id, (SELECT count(*) FROM agent_event_queue e
                       WHERE e.instance_id = i.id AND e.event_kind = 'AgentTick'
                         AND e.consumed_at IS NULL AND e.dead_lettered_at IS NULL)
         FROM agent_instances i WHERE i.status = 'active'",
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .filter(|(_, n)| *n != 1)
    .collect();
    let stray_pending: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT e.instance_id, e.event_kind FROM agent_event_queue e
           JOIN agent_instances i ON i.id = e.instance_id
          WHERE i.status = 'active' AND e.event_kind <> 'AgentTick'
            AND e.consumed_at IS NULL AND e.dead_lettered_at IS NULL
          ORDER BY e.instance_id, e.sequence_number",
    )
    .fetch_all(pool)
    .await?;
    Ok(FleetInvariants {
        events,
        consumed,
        dead_lettered,
        turns,
        turns_of_consumed,
        dead_letter_requests,
        unmatched_dead_letters,
        orphan_dead_letter_requests,
        bad_heartbeats,
        stray_pending,
        stale_leases,
    })
}

/// An event that keeps the fleet from quiescence: visible, unconsumed and
/// not dead-lettered (alias `e` of `agent_event_queue`). A macro so that
/// `concat!` keeps each statement a static string.
macro_rules! due_event {
    () => {
        "e.consumed_at IS NULL AND e.dead_lettered_at IS NULL AND e.visible_at <= now()"
    };
}

/// A lease that keeps the fleet from quiescence: held and not yet expired
/// (alias `i` of `agent_instances`).
macro_rules! live_lease {
    () => {
        "i.lease_session IS NOT NULL AND i.lease_expires_at > now()"
    };
}

/// Whether nothing is due: no visible unconsumed, un-dead-lettered event
/// and no live lease.
pub async fn fleet_quiescent(pool: &PgPool) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(concat!(
        "SELECT NOT EXISTS (SELECT FROM agent_event_queue e WHERE ",
        due_event!(),
        ") AND NOT EXISTS (SELECT FROM agent_instances i WHERE ",
        live_lease!(),
        ")"
    ))
    .fetch_one(pool)
    .await?)
}

/// What keeps a fleet from quiescence, one line per row, at most ten of
/// each, so a stalled wait explains itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuiescenceBlockers {
    /// Each due event with its delivery state and its instance's lease, by
    /// visibility.
    pub due_events: Vec<String>,
    /// Each live lease with its session, expiry and phase, by expiry.
    pub live_leases: Vec<String>,
}

/// The due events and live leases [`fleet_quiescent`] waits on.
pub async fn quiescence_blockers(pool: &PgPool) -> Result<QuiescenceBlockers, StoreError> {
    let due_events: Vec<String> = sqlx::query_scalar(concat!(
        "SELECT format('due event %s %s seq %s of %s: visible %s, published %s (epoch %s), \
                        claimed by %s, %s attempts; instance %s, lease %s until %s',
                       e.id, e.event_kind, e.sequence_number, e.instance_id, e.visible_at,
                       coalesce(e.published_at::text, 'never'), e.publish_epoch,
                       coalesce(e.claimed_session::text, 'nobody'), e.attempts, i.status,
                       coalesce(i.lease_session::text, 'none'), i.lease_expires_at)
           FROM agent_event_queue e JOIN agent_instances i ON i.id = e.instance_id
          WHERE ",
        due_event!(),
        " ORDER BY e.visible_at LIMIT 10"
    ))
    .fetch_all(pool)
    .await?;
    let live_leases: Vec<String> = sqlx::query_scalar(concat!(
        "SELECT format('lease on %s: session %s until %s, phase %s',
                       i.id, i.lease_session, i.lease_expires_at, i.phase)
           FROM agent_instances i
          WHERE ",
        live_lease!(),
        " ORDER BY i.lease_expires_at LIMIT 10"
    ))
    .fetch_all(pool)
    .await?;
    Ok(QuiescenceBlockers {
        due_events,
        live_leases,
    })
}

/// Instances holding a lease that has not expired yet (a tick in flight).
pub async fn count_live_leases(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_instances WHERE lease_session IS NOT NULL AND lease_expires_at > now()",
    )
    .fetch_one(pool)
    .await?)
}

// --- the ledger ------------------------------------------------------------

/// One ledger turn as stored, with the columns the suites compare.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerTurn {
    pub id: Uuid,
    pub turn_number: i64,
    pub event_id: Option<Uuid>,
    pub event_kind: String,
    pub decision_kind: String,
    pub phase: String,
    pub llm_call_snapshot_id: Option<Uuid>,
    pub served_model: Option<String>,
    pub cost_usd: Option<f64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub plan_input_hash: Option<String>,
}

/// Every ledger turn of `instance`, oldest first.
pub async fn ledger_turns(pool: &PgPool, instance: Uuid) -> Result<Vec<LedgerTurn>, StoreError> {
    type Row = (
        Uuid,
        i64,
        Option<Uuid>,
        String,
        String,
        String,
        Option<Uuid>,
        Option<String>,
        Option<f64>,
        Option<i64>,
        Option<i64>,
        Option<String>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, turn_number, event_id, event_kind, decision_kind, phase, llm_call_snapshot_id,
                served_model, cost_usd::float8 AS cost_usd, input_tokens, output_tokens, plan_input_hash
         FROM agent_state_ledger WHERE instance_id = $1 ORDER BY turn_number",
    )
    .bind(instance)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(
                id,
                turn_number,
                event_id,
                event_kind,
                decision_kind,
                phase,
                llm_call_snapshot_id,
                served_model,
                cost_usd,
                input_tokens,
                output_tokens,
                plan_input_hash,
            )| LedgerTurn {
                id,
                turn_number,
                event_id,
                event_kind,
                decision_kind,
                phase,
                llm_call_snapshot_id,
                served_model,
                cost_usd,
                input_tokens,
                output_tokens,
                plan_input_hash,
            },
        )
        .collect())
}

/// How many of `instance`'s operator messages have their ledger turn.
pub async fn operator_message_turns(pool: &PgPool, instance: Uuid) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_state_ledger l JOIN agent_event_queue e ON e.id = l.event_id
          WHERE e.instance_id = $1 AND e.event_kind = 'OperatorMessage'",
    )
    .bind(instance)
    .fetch_one(pool)
    .await?)
}

/// Ledger turns of events of `kind`, across every tenant.
pub async fn count_turns_of_event_kind(pool: &PgPool, kind: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_state_ledger l
           JOIN agent_event_queue e ON e.id = l.event_id
          WHERE e.event_kind = $1",
    )
    .bind(kind)
    .fetch_one(pool)
    .await?)
}

/// Ledger turns that decided `decision_kind`, across every tenant.
pub async fn count_turns_with_decision(
    pool: &PgPool,
    decision_kind: &str,
) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_state_ledger WHERE decision_kind = $1")
            .bind(decision_kind)
            .fetch_one(pool)
            .await?,
    )
}

/// `(reasoning_summary, event_payload)` of ledger turn `id`.
pub async fn ledger_summary_and_event_payload(
    pool: &PgPool,
    id: Uuid,
) -> Result<(Option<String>, Value), StoreError> {
    Ok(sqlx::query_as(
        "SELECT reasoning_summary, event_payload FROM agent_state_ledger WHERE id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await?)
}

/// The stored results (as JSON text) of every `tool` action of `instance`,
/// in turn and action order.
pub async fn tool_action_results(
    pool: &PgPool,
    instance: Uuid,
    tool: &str,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT a.result::text FROM agent_state_ledger_actions a JOIN agent_state_ledger l ON l.id = a.ledger_id
         WHERE l.instance_id = $1 AND a.tool_name = $2 ORDER BY l.turn_number, a.ordinal",
    )
    .bind(instance)
    .bind(tool)
    .fetch_all(pool)
    .await?)
}

/// `(tool_name, result)` of every ledger action, by turn row and ordinal.
pub async fn all_ledger_actions(pool: &PgPool) -> Result<Vec<(String, Value)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT tool_name, result FROM agent_state_ledger_actions ORDER BY ledger_id, ordinal",
    )
    .fetch_all(pool)
    .await?)
}

// --- the event queue -------------------------------------------------------

/// Events of `kind` that were consumed or dead-lettered, across every
/// tenant.
pub async fn count_settled_events_of_kind(pool: &PgPool, kind: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue WHERE event_kind = $1
           AND (consumed_at IS NOT NULL OR dead_lettered_at IS NOT NULL)",
    )
    .bind(kind)
    .fetch_one(pool)
    .await?)
}

/// Events claimed more than once: a pod died between its claim and its
/// completion and a later claim took the event over.
pub async fn count_reclaimed_events(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_event_queue WHERE attempts > 1")
            .fetch_one(pool)
            .await?,
    )
}

/// Events due now and not consumed, across every tenant.
pub async fn count_due_unconsumed_events(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue WHERE consumed_at IS NULL AND visible_at <= now()",
    )
    .fetch_one(pool)
    .await?)
}

/// Events neither published nor consumed yet, across every tenant.
pub async fn count_unpublished_events(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue WHERE published_at IS NULL AND consumed_at IS NULL",
    )
    .fetch_one(pool)
    .await?)
}

/// Dead-lettered events whose payload `body` is `body`.
pub async fn count_dead_lettered_with_body(pool: &PgPool, body: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue
          WHERE payload->>'body' = $1 AND dead_lettered_at IS NOT NULL",
    )
    .bind(body)
    .fetch_one(pool)
    .await?)
}

/// The claim attempts of the one event whose payload `body` is `body`.
pub async fn attempts_of_event_with_body(pool: &PgPool, body: &str) -> Result<i32, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT attempts FROM agent_event_queue WHERE payload->>'body' = $1")
            .bind(body)
            .fetch_one(pool)
            .await?,
    )
}

/// `tenant`'s events other than heartbeats that are neither consumed nor
/// dead-lettered.
pub async fn count_open_non_tick_events(pool: &PgPool, tenant: Uuid) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue
          WHERE tenant_id = $1 AND event_kind <> 'AgentTick'
            AND consumed_at IS NULL AND dead_lettered_at IS NULL",
    )
    .bind(tenant)
    .fetch_one(pool)
    .await?)
}

/// Where `tenant`'s operator messages stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatorMessageOutcomes {
    /// Stored operator messages.
    pub messages: i64,
    pub dead_lettered: i64,
    pub consumed: i64,
    /// Ledger turns of those messages.
    pub turns: i64,
}

/// How many of `tenant`'s operator messages were stored, dead-lettered,
/// consumed and answered by a turn.
pub async fn operator_message_outcomes(
    pool: &PgPool,
    tenant: Uuid,
) -> Result<OperatorMessageOutcomes, StoreError> {
    let (messages, dead_lettered, consumed, turns): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*),
                count(*) FILTER (WHERE e.dead_lettered_at IS NOT NULL),
                count(*) FILTER (WHERE e.consumed_at IS NOT NULL),
                count(l.id)
           FROM agent_event_queue e LEFT JOIN agent_state_ledger l ON l.event_id = e.id
          WHERE e.tenant_id = $1 AND e.event_kind = 'OperatorMessage'",
    )
    .bind(tenant)
    .fetch_one(pool)
    .await?;
    Ok(OperatorMessageOutcomes {
        messages,
        dead_lettered,
        consumed,
        turns,
    })
}

/// How event `id` was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSettlement {
    /// Ledger turns of the event.
    pub turns: i64,
    pub attempts: i32,
    pub consumed: bool,
}

/// The turns, claim attempts and consumption of event `id`.
pub async fn event_settlement(pool: &PgPool, id: Uuid) -> Result<EventSettlement, StoreError> {
    let (turns, attempts, consumed): (i64, i32, bool) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM agent_state_ledger WHERE event_id = e.id), e.attempts, e.consumed_at IS NOT NULL
         FROM agent_event_queue e WHERE e.id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await?;
    Ok(EventSettlement {
        turns,
        attempts,
        consumed,
    })
}

/// `(decision_kind, milliseconds from the event's insert to its turn's)`
/// of event `id`'s turn, once it has one.
pub async fn event_answer_latency_ms(
    pool: &PgPool,
    id: Uuid,
) -> Result<Option<(String, f64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT l.decision_kind,
                (extract(epoch FROM l.created_at - e.created_at) * 1000)::float8
           FROM agent_state_ledger l JOIN agent_event_queue e ON e.id = l.event_id
          WHERE e.id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?)
}

/// When event `id` was published (`None`: not yet).
pub async fn event_published_at(
    pool: &PgPool,
    id: Uuid,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT published_at FROM agent_event_queue WHERE id = $1")
            .bind(id)
            .fetch_one(pool)
            .await?,
    )
}

/// `(consumed_at, its instance's status)` of event `id`.
pub async fn event_consumed_at_and_instance_status(
    pool: &PgPool,
    id: Uuid,
) -> Result<(Option<DateTime<Utc>>, String), StoreError> {
    Ok(sqlx::query_as(
        "SELECT e.consumed_at, i.status FROM agent_event_queue e
           JOIN agent_instances i ON i.id = e.instance_id WHERE e.id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await?)
}

/// `(attention_request_id, payload)` of every escalation answer enqueued
/// to `instance` (its `OperatorAnsweredEscalation` events), in order.
pub async fn escalation_answers(
    pool: &PgPool,
    instance: Uuid,
) -> Result<Vec<(Uuid, Value)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT attention_request_id, payload FROM agent_event_queue
         WHERE instance_id = $1 AND event_kind = 'OperatorAnsweredEscalation' ORDER BY sequence_number",
    )
    .bind(instance)
    .fetch_all(pool)
    .await?)
}

/// Fixture: an event of `kind` for `instance`, published now, visible at
/// `visible_at` and dead-lettered at `dead_lettered_at`, numbered after
/// every event of the instance so it collides with none; its id.
pub async fn fixture_event(
    pool: &PgPool,
    tenant: Uuid,
    instance: Uuid,
    kind: &str,
    visible_at: DateTime<Utc>,
    dead_lettered_at: Option<DateTime<Utc>>,
) -> Result<Uuid, StoreError> {
    Ok(sqlx::query_scalar(
        "INSERT INTO agent_event_queue
              (tenant_id, instance_id, sequence_number, event_kind, payload, visible_at, published_at, dead_lettered_at)
            SELECT $1, $2, max(sequence_number) + 1000, $3, '{}', $4, now(), $5
              FROM agent_event_queue WHERE instance_id = $2
            RETURNING id",
    )
    .bind(tenant)
    .bind(instance)
    .bind(kind)
    .bind(visible_at)
    .bind(dead_lettered_at)
    .fetch_one(pool)
    .await?)
}

/// Fixture: a pending replay of turn 1 of `instance`, written as if control
/// stopped before its notice was read (no turn or preset is checked); its
/// id. `replays().get` reads it back.
pub async fn fixture_unpublished_replay(
    pool: &PgPool,
    tenant: Uuid,
    instance: Uuid,
) -> Result<Uuid, StoreError> {
    Ok(sqlx::query_scalar(
        "INSERT INTO agent_replays (tenant_id, instance_id, turn_number, event_id, preset_id)
         VALUES ($1, $2, 1, gen_random_uuid(), gen_random_uuid()) RETURNING id",
    )
    .bind(tenant)
    .bind(instance)
    .fetch_one(pool)
    .await?)
}

/// Fixture: an operator message of `instance` consumed now without a
/// ledger turn, numbered after every event of the instance; its id.
pub async fn fixture_consumed_event_without_turn(
    pool: &PgPool,
    tenant: Uuid,
    instance: Uuid,
) -> Result<Uuid, StoreError> {
    Ok(sqlx::query_scalar(
        "INSERT INTO agent_event_queue
           (tenant_id, instance_id, sequence_number, event_kind, payload, visible_at, published_at, consumed_at)
         SELECT $1, $2, max(sequence_number) + 1000, 'OperatorMessage', '{}', now(), now(), now()
           FROM agent_event_queue WHERE instance_id = $2
         RETURNING id",
    )
    .bind(tenant)
    .bind(instance)
    .fetch_one(pool)
    .await?)
}

/// Fixture: remove event `id`.
pub async fn fixture_delete_event(pool: &PgPool, id: Uuid) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM agent_event_queue WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Fixture: dead-letter `instance`'s pending heartbeat (its one unconsumed,
/// live `AgentTick`); its id.
pub async fn force_pending_heartbeat_dead_lettered(
    pool: &PgPool,
    instance: Uuid,
) -> Result<Uuid, StoreError> {
    Ok(sqlx::query_scalar(
        "UPDATE agent_event_queue SET dead_lettered_at = now()
          WHERE instance_id = $1 AND event_kind = 'AgentTick'
            AND consumed_at IS NULL AND dead_lettered_at IS NULL
          RETURNING id",
    )
    .bind(instance)
    .fetch_one(pool)
    .await?)
}

/// Fixture: undo a dead letter of event `id`.
pub async fn force_dead_letter_undone(pool: &PgPool, id: Uuid) -> Result<(), StoreError> {
    sqlx::query("UPDATE agent_event_queue SET dead_lettered_at = NULL WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

// --- instances -------------------------------------------------------------

/// Fixture: give `instance` a lease of a session nobody holds, expired a
/// second ago (a lease nothing will ever clean up).
pub async fn force_stale_lease(pool: &PgPool, instance: Uuid) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agent_instances SET lease_session = gen_random_uuid(),
                lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(instance)
    .execute(pool)
    .await?;
    Ok(())
}

/// Fixture: put `instance`'s starting-workset deadline a second in the
/// past, as on an agent a day old.
pub async fn force_workset_deadline_passed(
    pool: &PgPool,
    instance: Uuid,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agent_instances SET workset_deadline_utc = now() - interval '1 second' WHERE id = $1",
    )
    .bind(instance)
    .execute(pool)
    .await?;
    Ok(())
}

/// Hours from the database's now to `instance`'s next heartbeat.
pub async fn hours_to_next_tick(pool: &PgPool, instance: Uuid) -> Result<f64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT extract(epoch FROM next_tick_at - now())::float8 / 3600 FROM agent_instances WHERE id = $1",
    )
    .bind(instance)
    .fetch_one(pool)
    .await?)
}

/// How a group of instances stands after provider failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstancesStanding {
    /// Instances of the group that are active.
    pub active: i64,
    /// Their blocked-turn streaks, summed.
    pub blocked_turns: i64,
    /// Attention requests of the asked kind raised for them.
    pub attention_requests: i64,
}

/// How `instances` stand, counting their attention requests of `kind`.
pub async fn instances_standing(
    pool: &PgPool,
    instances: &[Uuid],
    kind: &str,
) -> Result<InstancesStanding, StoreError> {
    let (active, blocked_turns, attention_requests): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM agent_instances WHERE id = ANY($1) AND status = 'active'),
                (SELECT coalesce(sum(consecutive_blocked_turns), 0) FROM agent_instances
                  WHERE id = ANY($1)),
                (SELECT count(*) FROM attention_requests
                  WHERE instance_id = ANY($1) AND kind = $2)",
    )
    .bind(instances)
    .bind(kind)
    .fetch_one(pool)
    .await?;
    Ok(InstancesStanding {
        active,
        blocked_turns,
        attention_requests,
    })
}

// --- attention, messages, presets, configuration ---------------------------

/// Instances among `instances` with at least one attention request of
/// `kind`.
pub async fn count_instances_with_attention(
    pool: &PgPool,
    instances: &[Uuid],
    kind: &str,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(DISTINCT instance_id) FROM attention_requests
          WHERE instance_id = ANY($1) AND kind = $2",
    )
    .bind(instances)
    .bind(kind)
    .fetch_one(pool)
    .await?)
}

/// Attention requests of `kind` raised for `instance`.
pub async fn count_instance_attention_requests(
    pool: &PgPool,
    instance: Uuid,
    kind: &str,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM attention_requests WHERE instance_id = $1 AND kind = $2",
    )
    .bind(instance)
    .bind(kind)
    .fetch_one(pool)
    .await?)
}

/// Fixture: a `dead_letter` attention request of `instance` whose metadata
/// names `event` (any id: a request for another event is one of the
/// breakages the invariant checker must refuse); its id.
pub async fn fixture_dead_letter_request(
    pool: &PgPool,
    tenant: Uuid,
    instance: Uuid,
    event: Uuid,
) -> Result<Uuid, StoreError> {
    Ok(sqlx::query_scalar(
        "INSERT INTO attention_requests (tenant_id, instance_id, kind, title, body, metadata)
            VALUES ($1, $2, 'dead_letter', 'dead letter', '', jsonb_build_object('eventId', $3::text))
            RETURNING id",
    )
    .bind(tenant)
    .bind(instance)
    .bind(event.to_string())
    .fetch_one(pool)
    .await?)
}

/// Fixture: remove attention request `id`.
pub async fn fixture_delete_attention_request(pool: &PgPool, id: Uuid) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM attention_requests WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// The bodies of `instance`'s messages to the operator, oldest first.
pub async fn messages_to_operator(
    pool: &PgPool,
    instance: Uuid,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT body FROM agent_messages WHERE instance_id = $1 AND direction = 'agent_to_operator' ORDER BY created_at",
    )
    .bind(instance)
    .fetch_all(pool)
    .await?)
}

/// Messages to the operator, across every tenant, whose body starts with
/// `prefix`.
pub async fn count_messages_to_operator_starting(
    pool: &PgPool,
    prefix: &str,
) -> Result<i64, StoreError> {
    // starts_with, not LIKE: the prefix is compared as text, so a `%` or
    // `_` in it matches only itself.
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_messages WHERE direction = 'agent_to_operator'
           AND starts_with(body, $1)",
    )
    .bind(prefix)
    .fetch_one(pool)
    .await?)
}

/// Successful (paid) call attempts under the snapshot the turns of events
/// of `kind` link: the turns a resumed episode replayed are counted once,
/// under the one invocation its sessions shared.
pub async fn count_successful_attempts_of_event_kind(
    pool: &PgPool,
    kind: &str,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM llm_call_attempts a
           JOIN agent_state_ledger l ON l.llm_call_snapshot_id = a.snapshot_id
          WHERE l.event_kind = $1 AND a.outcome = 'success'",
    )
    .bind(kind)
    .fetch_one(pool)
    .await?)
}

/// The prompt overlay of LLM preset `preset` (`None`: it has none).
pub async fn preset_prompt_overlay(
    pool: &PgPool,
    preset: Uuid,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT overlays->>'prompt_overlay' FROM llm_presets WHERE id = $1")
            .bind(preset)
            .fetch_one(pool)
            .await?,
    )
}

/// `(table, rows)` of every table of schema `public` whose rows' text
/// holds `needle`, by table name, skipping the tables in `except` and the
/// migrator's own bookkeeping: where a value the platform must not store
/// was stored after all.
pub async fn tables_holding_text(
    pool: &PgPool,
    needle: &str,
    except: &[&str],
) -> Result<Vec<(String, i64)>, StoreError> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public'
          AND tablename <> '_sqlx_migrations' AND tablename <> ALL($1) ORDER BY 1",
    )
    .bind(except)
    .fetch_all(pool)
    .await?;
    let mut found = Vec::new();
    for table in tables {
        let quoted = crate::rows::quoted_identifier("table", &table)?;
        let rows: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {quoted} x WHERE x::text LIKE '%' || $1 || '%'"
        )))
        .bind(needle)
        .fetch_one(pool)
        .await?;
        if rows > 0 {
            found.push((table, rows));
        }
    }
    Ok(found)
}

/// `tenant`'s configuration rows.
pub async fn count_tenant_configs(pool: &PgPool, tenant: Uuid) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM system_configs WHERE tenant_id = $1")
            .bind(tenant)
            .fetch_one(pool)
            .await?,
    )
}

/// One mode change audit row.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeChangeAudit {
    pub id: Uuid,
    pub actor: String,
    pub changes: Value,
    pub created_at: DateTime<Utc>,
}

/// The catalogue edit's audit row of `tenant` (for a test that made
/// exactly one).
pub async fn catalogue_mode_change_of(
    pool: &PgPool,
    tenant: Uuid,
) -> Result<ModeChangeAudit, StoreError> {
    let (id, actor, changes, created_at): (Uuid, String, Value, DateTime<Utc>) = sqlx::query_as(
        "SELECT id, actor, changes, created_at FROM agent_mode_change_events
          WHERE source = 'catalogue' AND tenant_id = $1",
    )
    .bind(tenant)
    .fetch_one(pool)
    .await?;
    Ok(ModeChangeAudit {
        id,
        actor,
        changes,
        created_at,
    })
}

/// Fixture: a tenant with the id `id` (as a deployment that names its
/// tenants before they exist), inserted as CreateTenant inserts one, so
/// control's re-scan bootstraps it.
pub async fn fixture_tenant_with_id(
    pool: &PgPool,
    id: Uuid,
    name: &str,
    standing_agents_enabled: bool,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO tenants (id, name, standing_agents_enabled) VALUES ($1, $2, $3)")
        .bind(id)
        .bind(name)
        .bind(standing_agents_enabled)
        .execute(pool)
        .await?;
    Ok(())
}

// --- LLM calls and credit --------------------------------------------------

/// Successful LLM call attempts of `instance` (each a model call with its
/// snapshot).
pub async fn successful_llm_calls(pool: &PgPool, instance: Uuid) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM llm_call_attempts a JOIN llm_call_snapshots s ON s.id = a.snapshot_id
         WHERE s.instance_id = $1 AND a.outcome = 'success'",
    )
    .bind(instance)
    .fetch_one(pool)
    .await?)
}

/// LLM call snapshots of `instance`.
pub async fn count_call_snapshots(pool: &PgPool, instance: Uuid) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM llm_call_snapshots WHERE instance_id = $1")
            .bind(instance)
            .fetch_one(pool)
            .await?,
    )
}

/// `(served_model, cost_usd)` of call snapshot `id`.
pub async fn call_snapshot_model_and_cost(
    pool: &PgPool,
    id: Uuid,
) -> Result<(Option<String>, f64), StoreError> {
    Ok(
        sqlx::query_as("SELECT served_model, cost_usd FROM llm_call_snapshots WHERE id = $1")
            .bind(id)
            .fetch_one(pool)
            .await?,
    )
}

/// The pricing source of each attempt of call snapshot `snapshot`.
pub async fn attempt_pricing_sources(
    pool: &PgPool,
    snapshot: Uuid,
) -> Result<Vec<Option<String>>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT pricing_source::text FROM llm_call_attempts WHERE snapshot_id = $1",
    )
    .bind(snapshot)
    .fetch_all(pool)
    .await?)
}

/// `(provider, served_model, outcome, cost_usd, usage)` of every call
/// attempt, in the order they were made.
pub async fn all_call_attempts(
    pool: &PgPool,
) -> Result<Vec<(String, String, String, f64, Value)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT provider, served_model, outcome::text, cost_usd::float8, usage
           FROM llm_call_attempts ORDER BY created_at, ordinal",
    )
    .fetch_all(pool)
    .await?)
}

/// `(priced_as, pricing_source)` of every successful call attempt.
pub async fn successful_attempt_pricing(
    pool: &PgPool,
) -> Result<Vec<(Option<String>, Option<String>)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT priced_as, pricing_source::text FROM llm_call_attempts WHERE outcome = 'success'",
    )
    .fetch_all(pool)
    .await?)
}

/// Call attempts sent to `provider`, across every tenant.
pub async fn count_attempts_of_provider(pool: &PgPool, provider: &str) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM llm_call_attempts WHERE provider = $1")
            .bind(provider)
            .fetch_one(pool)
            .await?,
    )
}

/// `(attempts, attempts that ended in a server error)` of `tenant`'s calls
/// to `provider`.
pub async fn attempts_and_server_errors(
    pool: &PgPool,
    tenant: Uuid,
    provider: &str,
) -> Result<(i64, i64), StoreError> {
    Ok(sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE outcome = 'server_error')
           FROM llm_call_attempts WHERE tenant_id = $1 AND provider = $2",
    )
    .bind(tenant)
    .bind(provider)
    .fetch_one(pool)
    .await?)
}

/// Fixture: `tenant`'s credit window of the current week with `usd` as
/// both its limit and what it has spent (a new window's limit, an
/// existing one's spending only).
pub async fn force_credit_week_spent(
    pool: &PgPool,
    tenant: Uuid,
    usd: f64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO credit_windows (tenant_id, week_start, limit_usd, spent_usd)
         VALUES ($1, date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', $2, $2)
         ON CONFLICT (tenant_id, week_start) DO UPDATE SET spent_usd = $2",
    )
    .bind(tenant)
    .bind(usd)
    .execute(pool)
    .await?;
    Ok(())
}

// --- Windows holds ---------------------------------------------------------

/// `tenant`'s Windows holds by `holder`.
pub async fn count_windows_holds_of(
    pool: &PgPool,
    tenant: Uuid,
    holder: &str,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM windows_holds WHERE tenant_id = $1 AND holder = $2",
    )
    .bind(tenant)
    .bind(holder)
    .fetch_one(pool)
    .await?)
}

/// What a replay's calls left on the books: its snapshots' call tags (one
/// per snapshot), the attempts under them, their summed cost, and how many
/// of them name an instance (a replay's never should).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayCalls {
    pub call_tags: Vec<String>,
    pub attempts: i64,
    pub cost_usd: f64,
    pub naming_an_instance: i64,
}

/// [`ReplayCalls`] of `replay_id`.
pub async fn replay_calls(pool: &PgPool, replay_id: Uuid) -> Result<ReplayCalls, StoreError> {
    let (call_tags, attempts, cost_usd, naming_an_instance): (Vec<String>, i64, f64, i64) =
        sqlx::query_as(
            "SELECT coalesce(array_agg(s.call_tag::text ORDER BY s.created_at), '{}'),
                    coalesce((SELECT count(*) FROM llm_call_attempts a
                               JOIN llm_call_snapshots x ON x.id = a.snapshot_id
                              WHERE x.replay_id = $1), 0),
                    coalesce(sum(s.cost_usd), 0)::double precision,
                    count(s.instance_id)
               FROM llm_call_snapshots s WHERE s.replay_id = $1",
        )
        .bind(replay_id)
        .fetch_one(pool)
        .await?;
    Ok(ReplayCalls {
        call_tags,
        attempts,
        cost_usd,
        naming_an_instance,
    })
}

/// What the tenant's weekly credit windows have spent, in all.
pub async fn credit_spent(pool: &PgPool, tenant: Uuid) -> Result<f64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT coalesce(sum(spent_usd), 0)::double precision FROM credit_windows WHERE tenant_id = $1",
    )
    .bind(tenant)
    .fetch_one(pool)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_password_reaches_a_statement() {
        assert_eq!(
            password_literal("genesis-e2e-service").as_deref(),
            Ok("'genesis-e2e-service'")
        );
        for bad in ["", "a'b", "a$$b", "a\\b", "a b"] {
            assert!(password_literal(bad).is_err(), "{bad}");
        }
    }
}
