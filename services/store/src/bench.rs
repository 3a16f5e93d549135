//! The benchmark's statements against a fleet's database: feeding bench
//! events in bulk, the counts and percentiles its checks and figures read,
//! the server's statistics views, the side tables that stamp claim and
//! commit times, the idle fleet and the backlog it inserts in bulk, the
//! `EXPLAIN`s of the hot statements, and the server's `autovacuum` setting.
//!
//! Every function runs on the pool the bench hands it (the database owner's
//! login), outside the store's role switching and tenant transactions: the
//! bench measures the fleet, it is not one of its tenants. Nothing here may
//! be called by a service. A function sends the same statements, in the
//! same transactions, as its name says, because the bench subtracts its
//! own statements from the server's commit counts.

use uuid::Uuid;

use sqlx::PgPool;

use crate::error::StoreError;

/// Enqueue one event of `kind` for each `(tenants[i], instances[i])` in ONE
/// statement, payload `{signalKind, benchRun: run, n: first + ordinal}`,
/// taking the instance rows in the order given; each enqueue's outcome
/// (`created`, ...).
pub async fn enqueue_events(
    pool: &PgPool,
    tenants: &[Uuid],
    instances: &[Uuid],
    kind: &str,
    run: &str,
    first: i64,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT genesis_enqueue_event(x.t, x.i, $3,
                    jsonb_build_object('signalKind', 'GuidanceUpdated', 'benchRun', $4::text, 'n', $5::bigint + x.o),
                    NULL, NULL)->>'outcome'
           FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS x(t, i, o)
          ORDER BY x.i",
    )
    .bind(tenants)
    .bind(instances)
    .bind(kind)
    .bind(run)
    .bind(first)
    .fetch_all(pool)
    .await?)
}

/// `(instance, unconsumed events of kind)` for each of `instances` that
/// has any.
pub async fn pending_per_instance(
    pool: &PgPool,
    instances: &[Uuid],
    kind: &str,
) -> Result<Vec<(Uuid, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT instance_id, count(*) AS n FROM agent_event_queue
          WHERE instance_id = ANY($1) AND consumed_at IS NULL AND dead_lettered_at IS NULL AND event_kind = $2
          GROUP BY instance_id",
    )
    .bind(instances)
    .bind(kind)
    .fetch_all(pool)
    .await?)
}

/// The server's cumulative counters for the current database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerCounters {
    /// Committed transactions (every client's, the bench's own included).
    pub xact_commit: i64,
    /// Rows inserted, updated and deleted.
    pub writes: i64,
    /// Autovacuum and autoanalyze runs over the user tables.
    pub autovacuum_runs: i64,
}

/// [`ServerCounters`] as of now: two statements (the statistics snapshot
/// is cleared first, so the read is not the transaction's cached one).
pub async fn server_counters(pool: &PgPool) -> Result<ServerCounters, StoreError> {
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(pool)
        .await?;
    let (xact_commit, writes, autovacuum_runs): (i64, i64, i64) = sqlx::query_as(
        "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted AS w,
                (SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0)::bigint
                   FROM pg_stat_user_tables) AS vac
           FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(pool)
    .await?;
    Ok(ServerCounters {
        xact_commit,
        writes,
        autovacuum_runs,
    })
}

/// Ledger turns of events of `kind`.
pub async fn count_turns_of_kind(pool: &PgPool, kind: &str) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_state_ledger WHERE event_kind = $1")
            .bind(kind)
            .fetch_one(pool)
            .await?,
    )
}

/// Every ledger turn.
pub async fn count_turns(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_state_ledger")
            .fetch_one(pool)
            .await?,
    )
}

/// What became of one bench run's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunCounts {
    /// Events whose payload names the run.
    pub events: i64,
    pub consumed: i64,
    pub dead_lettered: i64,
    /// Ledger turns of those events.
    pub turns: i64,
}

/// [`RunCounts`] of the events whose payload's `benchRun` is `run`.
pub async fn run_counts(pool: &PgPool, run: &str) -> Result<RunCounts, StoreError> {
    let (events, consumed, dead_lettered, turns): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) AS events,
                count(*) FILTER (WHERE consumed_at IS NOT NULL) AS consumed,
                count(*) FILTER (WHERE dead_lettered_at IS NOT NULL) AS dead,
                (SELECT count(*) FROM agent_state_ledger l JOIN agent_event_queue q ON q.id = l.event_id
                  WHERE q.payload->>'benchRun' = $1) AS turns
           FROM agent_event_queue WHERE payload->>'benchRun' = $1",
    )
    .bind(run)
    .fetch_one(pool)
    .await?;
    Ok(RunCounts {
        events,
        consumed,
        dead_lettered,
        turns,
    })
}

/// The side tables and triggers that stamp, with `clock_timestamp()`, the
/// first claim of each event (`bench_claims`) and the ledger insert of
/// each event's turn (`bench_commits`); the stored rows' shapes stay as the
/// services expect.
const STAMPS: [&str; 6] = [
    "CREATE TABLE bench_claims (event_id uuid PRIMARY KEY, claimed_at timestamptz NOT NULL)",
    "CREATE TABLE bench_commits (event_id uuid PRIMARY KEY, committed_at timestamptz NOT NULL)",
    "CREATE FUNCTION bench_stamp_claim() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
     BEGIN
       INSERT INTO bench_claims VALUES (NEW.id, clock_timestamp()) ON CONFLICT DO NOTHING;
       RETURN NEW;
     END $$",
    "CREATE FUNCTION bench_stamp_commit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
     BEGIN
       IF NEW.event_id IS NOT NULL THEN
         INSERT INTO bench_commits VALUES (NEW.event_id, clock_timestamp()) ON CONFLICT DO NOTHING;
       END IF;
       RETURN NEW;
     END $$",
    "CREATE TRIGGER bench_stamp_claim AFTER UPDATE OF claimed_session ON agent_event_queue
     FOR EACH ROW WHEN (NEW.claimed_session IS NOT NULL AND NEW.claimed_session IS DISTINCT FROM OLD.claimed_session)
     EXECUTE FUNCTION bench_stamp_claim()",
    "CREATE TRIGGER bench_stamp_commit AFTER INSERT ON agent_state_ledger
     FOR EACH ROW EXECUTE FUNCTION bench_stamp_commit()",
];

/// Install the claim and commit stamps, one statement each; a failure
/// names the statement that failed.
pub async fn install_stamps(pool: &PgPool) -> Result<(), StoreError> {
    for stmt in STAMPS {
        sqlx::query(stmt).execute(pool).await.map_err(|e| {
            StoreError::Database(format!("install: {stmt}: {}", StoreError::from(e)))
        })?;
    }
    Ok(())
}

/// Percentiles (p50, p95, p99, in ms) of one run's stamped events.
#[derive(Debug, Clone, PartialEq)]
pub struct StampedLatency {
    /// From due (`visible_at`) to first claim; `None` when nothing was
    /// stamped.
    pub claim_ms: Option<Vec<f64>>,
    /// From enqueue (`created_at`) to the ledger insert.
    pub commit_ms: Option<Vec<f64>>,
    /// Events with both stamps.
    pub measured: i64,
}

/// [`StampedLatency`] of the events whose `benchRun` is `run`.
pub async fn stamped_latency(pool: &PgPool, run: &str) -> Result<StampedLatency, StoreError> {
    let (claim_ms, commit_ms, measured): (Option<Vec<f64>>, Option<Vec<f64>>, i64) =
        sqlx::query_as(
            "SELECT percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP
                      (ORDER BY extract(epoch FROM c.claimed_at - e.visible_at) * 1000) AS claim,
                    percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP
                      (ORDER BY extract(epoch FROM m.committed_at - e.created_at) * 1000) AS commit,
                    count(*) AS n
               FROM agent_event_queue e
               JOIN bench_claims c ON c.event_id = e.id
               JOIN bench_commits m ON m.event_id = e.id
              WHERE e.payload->>'benchRun' = $1",
        )
        .bind(run)
        .fetch_one(pool)
        .await?;
    Ok(StampedLatency {
        claim_ms,
        commit_ms,
        measured,
    })
}

/// Insert the idle fleet: a new tenant (standing agents off) with
/// `instances` active MissionOperations instances, each with one heartbeat
/// due in a day, and move every other pending heartbeat (and instance's
/// next tick) a day out too; one transaction, then ANALYZE of the two
/// tables. The new tenant's id.
pub async fn seed_idle_fleet(pool: &PgPool, instances: i64) -> Result<Uuid, StoreError> {
    let mut tx = pool.begin().await?;
    let tenant: Uuid = sqlx::query_scalar(
        "INSERT INTO tenants (name, standing_agents_enabled) VALUES ('bench-idle-' || gen_random_uuid(), false)
         RETURNING id",
    )
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO agent_instances (tenant_id, agent_type, status, next_tick_at, event_sequence)
         SELECT $1, 'MissionOperations', 'active', now() + interval '24 hours', 1 FROM generate_series(1, $2)",
    )
    .bind(tenant)
    .bind(instances)
    .execute(&mut *tx)
    .await?;
    // The foreign-key check of the next insert is a plan this connection
    // cached while agent_instances was small (a sequential scan); ANALYZE
    // invalidates it, so each of the many checks is an index lookup
    // instead of a scan of the whole new table.
    sqlx::query("ANALYZE agent_instances")
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO agent_event_queue (tenant_id, instance_id, sequence_number, event_kind, visible_at)
         SELECT tenant_id, id, 1, 'AgentTick', next_tick_at FROM agent_instances WHERE tenant_id = $1",
    )
    .bind(tenant)
    .execute(&mut *tx)
    .await?;
    // The fleet's other instances join the idle fleet: their heartbeats
    // move a day out too.
    sqlx::query(
        "UPDATE agent_event_queue SET visible_at = now() + interval '24 hours'
          WHERE event_kind = 'AgentTick' AND consumed_at IS NULL AND dead_lettered_at IS NULL
            AND published_at IS NULL AND tenant_id <> $1",
    )
    .bind(tenant)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE agent_instances SET next_tick_at = now() + interval '24 hours' WHERE tenant_id <> $1",
    )
    .bind(tenant)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    sqlx::query("ANALYZE agent_event_queue")
        .execute(pool)
        .await?;
    sqlx::query("ANALYZE agent_instances").execute(pool).await?;
    Ok(tenant)
}

/// Active instances, every tenant's.
pub async fn count_active_instances(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM agent_instances WHERE status = 'active'")
            .fetch_one(pool)
            .await?,
    )
}

/// Events neither consumed nor dead-lettered.
pub async fn count_pending_events(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue WHERE consumed_at IS NULL AND dead_lettered_at IS NULL",
    )
    .fetch_one(pool)
    .await?)
}

/// Events published to the stream and neither consumed nor dead-lettered.
pub async fn count_published_unconsumed(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue
          WHERE published_at IS NOT NULL AND consumed_at IS NULL AND dead_lettered_at IS NULL",
    )
    .fetch_one(pool)
    .await?)
}

/// Consumed events whose `benchRun` is `run`.
pub async fn count_consumed_of_run(pool: &PgPool, run: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue WHERE payload->>'benchRun' = $1 AND consumed_at IS NOT NULL",
    )
    .bind(run)
    .fetch_one(pool)
    .await?)
}

/// `(application_name, connections)` of the current database's other
/// client backends, by name.
pub async fn client_connections(pool: &PgPool) -> Result<Vec<(String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT coalesce(application_name, ''), count(*) FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()
            AND backend_type = 'client backend'
          GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(pool)
    .await?)
}

/// Insert `events` due events of `kind` at once, `depth` deep on the first
/// MissionOperations instances by id (payload `{benchRun: 'backlog'}`),
/// advance those instances' sequence counters and wake the publisher, all
/// in ONE transaction: committed apart, the outbox could publish the events
/// and the supervisor claim them (locking instance rows in id order) while
/// the counter update still walked the same rows in another order, and
/// PostgreSQL would break the deadlock by failing one side. The number
/// inserted.
pub async fn insert_backlog(
    pool: &PgPool,
    events: i64,
    depth: i64,
    kind: &str,
) -> Result<i64, StoreError> {
    let mut tx = pool.begin().await?;
    let inserted = sqlx::query(
        "WITH targets AS (
            SELECT id, tenant_id, event_sequence FROM agent_instances
             WHERE agent_type = 'MissionOperations' ORDER BY id LIMIT ($1 + $2 - 1) / $2)
         INSERT INTO agent_event_queue (tenant_id, instance_id, sequence_number, event_kind, payload, visible_at)
         SELECT t.tenant_id, t.id, t.event_sequence + d, $3, jsonb_build_object('benchRun', 'backlog'), now()
           FROM targets t CROSS JOIN generate_series(1, $2) AS d
          LIMIT $1",
    )
    .bind(events)
    .bind(depth)
    .bind(kind)
    .execute(&mut *tx)
    .await?
    .rows_affected() as i64;
    sqlx::query(
        "UPDATE agent_instances i SET event_sequence = m.s
           FROM (SELECT instance_id, max(sequence_number) AS s FROM agent_event_queue
                  WHERE payload->>'benchRun' = 'backlog' GROUP BY instance_id) m
          WHERE i.id = m.instance_id",
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query("SELECT pg_notify('genesis_due', '')")
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(inserted)
}

/// `(tenant, id)` of the first idle-fleet (MissionOperations) instance by
/// id, the one the `EXPLAIN`s run against.
pub async fn idle_fleet_instance(pool: &PgPool) -> Result<Option<(Uuid, Uuid)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT tenant_id, id FROM agent_instances WHERE agent_type = 'MissionOperations' ORDER BY id LIMIT 1",
    )
    .fetch_optional(pool)
    .await?)
}

/// The role a hot statement runs under in the services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceRole {
    /// The tenant path.
    App,
    /// The platform loops.
    System,
}

impl ServiceRole {
    fn name(self) -> &'static str {
        match self {
            ServiceRole::App => "genesis_app",
            ServiceRole::System => "genesis_system",
        }
    }
}

/// One hot statement of the tick path, as the bench explains it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotStatement {
    pub name: &'static str,
    pub role: ServiceRole,
    /// `$1` is the instance, `$2` its tenant.
    pub sql: &'static str,
    /// The index the plan must name, if one.
    pub must_use: Option<&'static str>,
}

/// The statements [`explain`] runs: claim's due-event stamp, the outbox
/// select, complete's guarded instance update, complete's heartbeat check,
/// complete's next turn number and the bootstrap re-scan's census (the one
/// statement an idle control repeats per re-scan).
pub const HOT_STATEMENTS: [HotStatement; 6] = [
    HotStatement {
        name: "claim: stamp the next due event of an instance",
        role: ServiceRole::App,
        // The stamp must find its one row by the primary key, not by a
        // whole scan of the partial due index that the subquery reads.
        sql: "UPDATE agent_event_queue e SET claimed_session = gen_random_uuid(), attempts = e.attempts + 1
              WHERE e.id = (SELECT q.id FROM agent_event_queue q
                             WHERE q.instance_id = $1 AND q.consumed_at IS NULL AND q.dead_lettered_at IS NULL
                               AND q.visible_at <= clock_timestamp()
                             ORDER BY q.sequence_number LIMIT 1)
                AND e.attempts < 5
              RETURNING e.id",
        must_use: Some("agent_event_queue_pkey"),
    },
    HotStatement {
        name: "outbox: due unpublished events",
        role: ServiceRole::System,
        sql: "SELECT to_jsonb(e) FROM agent_event_queue e
              WHERE published_at IS NULL AND consumed_at IS NULL AND dead_lettered_at IS NULL AND visible_at <= now()
              ORDER BY visible_at LIMIT 256 FOR UPDATE SKIP LOCKED",
        must_use: None,
    },
    HotStatement {
        name: "complete: the guarded instance update",
        role: ServiceRole::App,
        // The claimed event is checked by its primary key, and the
        // pending heartbeat by its partial unique index. (The idle
        // instance holds no lease, so nothing is updated.)
        sql: "UPDATE agent_instances i SET lease_session = NULL, lease_expires_at = NULL,
                    next_tick_at = coalesce((SELECT h.visible_at FROM agent_event_queue h
                                              WHERE h.instance_id = $1 AND h.event_kind = 'AgentTick'
                                                AND h.consumed_at IS NULL AND h.dead_lettered_at IS NULL
                                                AND h.id <> '00000000-0000-0000-0000-000000000000'), now())
              WHERE i.id = $1 AND i.tenant_id = $2 AND i.lease_session = '00000000-0000-0000-0000-000000000000'
                AND EXISTS (SELECT 1 FROM agent_event_queue e
                             WHERE e.id = '00000000-0000-0000-0000-000000000000' AND e.instance_id = $1
                               AND e.claimed_session = '00000000-0000-0000-0000-000000000000'
                               AND e.consumed_at IS NULL AND e.dead_lettered_at IS NULL)",
        must_use: Some("agent_event_queue_pkey"),
    },
    HotStatement {
        name: "complete: pending heartbeat of an instance",
        role: ServiceRole::App,
        sql: "SELECT * FROM agent_event_queue
              WHERE instance_id = $1 AND event_kind = 'AgentTick' AND consumed_at IS NULL AND dead_lettered_at IS NULL",
        must_use: None,
    },
    HotStatement {
        name: "complete: next turn number of an instance",
        role: ServiceRole::App,
        sql: "SELECT coalesce((SELECT l.turn_number FROM agent_state_ledger l
                               WHERE l.tenant_id = $2 AND l.instance_id = $1
                               ORDER BY l.turn_number DESC LIMIT 1), 0) + 1",
        must_use: None,
    },
    HotStatement {
        name: "bootstrap re-scan: every tenant and its SOA",
        role: ServiceRole::System,
        sql: crate::tenants::CENSUS_SQL,
        must_use: None,
    },
];

/// The lines of `EXPLAIN (ANALYZE, BUFFERS)` of `statement` for `instance`
/// of `tenant`, under the statement's role with the tenant set (so
/// row-level security is in the plan), in a transaction rolled back.
pub async fn explain(
    pool: &PgPool,
    statement: &HotStatement,
    tenant: Uuid,
    instance: Uuid,
) -> Result<Vec<String>, StoreError> {
    let mut tx = pool.begin().await?;
    let role = statement.role.name();
    sqlx::query(sqlx::AssertSqlSafe(format!("SET LOCAL ROLE {role}")))
        .execute(&mut *tx)
        .await?;
    sqlx::query("SELECT set_config('genesis.tenant_id', $1, true)")
        .bind(tenant.to_string())
        .execute(&mut *tx)
        .await?;
    let sql = statement.sql;
    let text = format!("EXPLAIN (ANALYZE, BUFFERS) {sql}");
    let q = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(text));
    let q = if sql.contains("$2") {
        q.bind(instance).bind(tenant)
    } else if sql.contains("$1") {
        q.bind(instance)
    } else {
        q
    };
    let lines: Vec<String> = q.fetch_all(&mut *tx).await?;
    tx.rollback().await?;
    Ok(lines)
}

/// A change of the server's `autovacuum` through `ALTER SYSTEM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutovacuumChange {
    /// `ALTER SYSTEM SET autovacuum = on`.
    On,
    /// `ALTER SYSTEM SET autovacuum = off` (keeps an `ALTER SYSTEM` entry).
    Off,
    /// `ALTER SYSTEM RESET autovacuum` (removes the entry).
    Reset,
}

impl AutovacuumChange {
    /// The statement, as the bench reports it.
    pub fn statement(self) -> &'static str {
        match self {
            AutovacuumChange::On => "ALTER SYSTEM SET autovacuum = on",
            AutovacuumChange::Off => "ALTER SYSTEM SET autovacuum = off",
            AutovacuumChange::Reset => "ALTER SYSTEM RESET autovacuum",
        }
    }
}

/// `(setting, the file it came from or '')` of the server's `autovacuum`.
pub async fn autovacuum_setting(pool: &PgPool) -> Result<(String, String), StoreError> {
    Ok(sqlx::query_as(
        "SELECT setting, coalesce(sourcefile, '') AS file FROM pg_settings WHERE name = 'autovacuum'",
    )
    .fetch_one(pool)
    .await?)
}

/// Apply `change` and reload the server's configuration (each backend
/// reads the reloaded file when its signal arrives).
pub async fn alter_autovacuum(pool: &PgPool, change: AutovacuumChange) -> Result<(), StoreError> {
    sqlx::query(change.statement()).execute(pool).await?;
    sqlx::query("SELECT pg_reload_conf()").execute(pool).await?;
    Ok(())
}

/// `SHOW autovacuum` on a connection of `pool`.
pub async fn show_autovacuum(pool: &PgPool) -> Result<String, StoreError> {
    Ok(sqlx::query_scalar("SHOW autovacuum")
        .fetch_one(pool)
        .await?)
}

/// Fixture: a login role `name` with no other privilege (a bench test's
/// user that may not alter the system).
pub async fn fixture_create_plain_role(pool: &PgPool, name: &str) -> Result<(), StoreError> {
    let name = crate::rows::quoted_identifier("role", name)?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE ROLE {name} LOGIN")))
        .execute(pool)
        .await?;
    Ok(())
}

/// Fixture: drop role `name`.
pub async fn fixture_drop_role(pool: &PgPool, name: &str) -> Result<(), StoreError> {
    let name = crate::rows::quoted_identifier("role", name)?;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP ROLE {name}")))
        .execute(pool)
        .await?;
    Ok(())
}
