//! Value domains on the real PostgreSQL: the value lists of the tick's hot rows
//! (event kind, instance status, type and phase, the ledger turn's phase, call
//! outcome) are domains holding the
//! lists genesis-core and the store check (the store's `ATTEMPT_OUTCOMES` for
//! outcomes), no table CHECK re-reads them on every update, and a value outside
//! a list is still refused as an invalid argument that writes nothing. The same
//! holds for the range and shape checks of the call records, the credit window
//! and the event's publish epoch.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use common::*;
use genesis_core::{AgentEventKind, AgentType, InstanceStatus, Phase};
use genesis_store::StoreError;
use sqlx::PgPool;
use uuid::Uuid;

/// The quoted values of a `CHECK (VALUE IN (...))` definition, sorted.
fn listed(definition: &str) -> Vec<String> {
    let mut values: Vec<String> = definition
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    values.sort();
    values
}

fn sorted(texts: &[&str]) -> Vec<String> {
    let mut values: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
    values.sort();
    values
}

#[test]
fn the_list_reader_takes_every_quoted_value() {
    assert_eq!(
        listed("CHECK ((VALUE = ANY (ARRAY['b'::text, 'a'::text])))"),
        ["a", "b"]
    );
    assert!(listed("CHECK ((VALUE >= 0)) NOT VALID").is_empty());
}

/// The type of `table.column` as PostgreSQL names it (a domain by its name).
async fn column_type(pool: &PgPool, table: &str, column: &str) -> anyhow::Result<String> {
    Ok(sqlx::query_scalar(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute
          WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped",
    )
    .bind(table)
    .bind(column)
    .fetch_one(pool)
    .await?)
}

/// The definitions of `domain`'s CHECK constraints.
async fn domain_checks(pool: &PgPool, domain: &str) -> anyhow::Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint
          WHERE contypid = $1::regtype AND contype = 'c'",
    )
    .bind(domain)
    .fetch_all(pool)
    .await?)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_hot_columns_are_checked_by_domains_holding_core_lists(
    pool: PgPool,
) -> anyhow::Result<()> {
    // (table, column, domain, the values it must hold)
    let columns = [
        (
            "agent_event_queue",
            "event_kind",
            "agent_event_kind",
            sorted(AgentEventKind::TEXTS),
        ),
        (
            "agent_instances",
            "status",
            "agent_instance_status",
            sorted(InstanceStatus::TEXTS),
        ),
        (
            "agent_instances",
            "agent_type",
            "agent_instance_type",
            sorted(AgentType::TEXTS),
        ),
        (
            "agent_instances",
            "phase",
            "agent_phase",
            sorted(Phase::TEXTS),
        ),
        (
            "agent_state_ledger",
            "phase",
            "agent_phase",
            sorted(Phase::TEXTS),
        ),
        (
            "llm_call_attempts",
            "outcome",
            "llm_call_outcome",
            sorted(genesis_store::llm::ATTEMPT_OUTCOMES),
        ),
    ];
    for (table, column, domain, values) in columns {
        assert_eq!(
            column_type(&pool, table, column).await?,
            domain,
            "{table}.{column}"
        );
        let checks = domain_checks(&pool, domain).await?;
        assert_eq!(checks.len(), 1, "{domain}: {checks:?}");
        assert_eq!(listed(&checks[0]), values, "{domain}");
    }
    // No table CHECK of the rows a tick updates re-reads a value list: each
    // would be parsed again and checked on every update of the row.
    let lists: Vec<(String, String)> = sqlx::query_as(
        "SELECT conrelid::regclass::text, conname::text FROM pg_constraint
          WHERE contype = 'c'
            AND conrelid IN ('agent_event_queue'::regclass, 'agent_instances'::regclass,
                             'agent_state_ledger'::regclass, 'llm_call_attempts'::regclass)
            AND pg_get_constraintdef(oid) LIKE '%ANY (ARRAY[%'",
    )
    .fetch_all(&pool)
    .await?;
    assert!(
        lists.is_empty(),
        "table CHECKs with a value list: {lists:?}"
    );
    Ok(())
}

/// Run `sql` (binding `id`) and give back the store's reading of its error.
async fn refused(pool: &PgPool, sql: &'static str, id: Uuid) -> StoreError {
    let err = sqlx::query(sql).bind(id).execute(pool).await.unwrap_err();
    let code = err
        .as_database_error()
        .and_then(|d| d.code())
        .map(|c| c.into_owned());
    assert_eq!(code.as_deref(), Some("23514"), "{err}");
    StoreError::from(err)
}

fn assert_invalid(err: StoreError, constraint: &str, domain: &str) {
    match err {
        StoreError::InvalidArgument { field, reason } => {
            assert_eq!(field, constraint);
            assert!(reason.contains(domain), "{reason}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_value_outside_a_domain_is_an_invalid_argument_that_writes_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let inst = soa(&store, a).await?;
    const EVENTS: &str = "SELECT count(*) FROM agent_event_queue WHERE instance_id = $1";
    let before = count(&pool, EVENTS, inst.id).await?;

    let err = refused(
        &pool,
        "INSERT INTO agent_event_queue (tenant_id, instance_id, sequence_number, event_kind)
         SELECT tenant_id, id, 1000, 'AgentNap' FROM agent_instances WHERE id = $1",
        inst.id,
    )
    .await;
    assert_invalid(err, "agent_event_kind_check", "agent_event_kind");
    assert_eq!(
        count(&pool, EVENTS, inst.id).await?,
        before,
        "no event written"
    );

    for (sql, domain) in [
        (
            "UPDATE agent_instances SET status = 'sleeping' WHERE id = $1",
            "agent_instance_status",
        ),
        (
            "UPDATE agent_instances SET agent_type = 'Robot' WHERE id = $1",
            "agent_instance_type",
        ),
        (
            "UPDATE agent_instances SET phase = 'idle:napping' WHERE id = $1",
            "agent_phase",
        ),
    ] {
        let err = refused(&pool, sql, inst.id).await;
        assert_invalid(err, &format!("{domain}_check"), domain);
    }
    let (status, agent_type, phase): (String, String, String) =
        sqlx::query_as("SELECT status, agent_type, phase FROM agent_instances WHERE id = $1")
            .bind(inst.id)
            .fetch_one(&pool)
            .await?;
    assert_eq!(
        (status.as_str(), agent_type.as_str(), phase.as_str()),
        ("active", "Soa", "idle"),
        "instance unchanged"
    );
    const TURNS: &str = "SELECT count(*) FROM agent_state_ledger WHERE instance_id = $1";
    let err = refused(
        &pool,
        "INSERT INTO agent_state_ledger (tenant_id, instance_id, turn_number, event_kind, decision_kind, phase)
         SELECT tenant_id, id, 1, 'AgentTick', 'Planned', 'Idle' FROM agent_instances WHERE id = $1",
        inst.id,
    )
    .await;
    assert_invalid(err, "agent_phase_check", "agent_phase");
    assert_eq!(count(&pool, TURNS, inst.id).await?, 0, "no turn written");

    let snapshot = snapshot_row(&pool, a, inst.id).await?;
    let err = refused(
        &pool,
        "INSERT INTO llm_call_attempts (tenant_id, snapshot_id, ordinal, provider, requested_model, outcome)
         SELECT tenant_id, id, 0, 'scripted', 'scripted', 'maybe' FROM llm_call_snapshots WHERE id = $1",
        snapshot,
    )
    .await;
    assert_invalid(err, "llm_call_outcome_check", "llm_call_outcome");
    let attempts = count(
        &pool,
        "SELECT count(*) FROM llm_call_attempts WHERE snapshot_id = $1",
        snapshot,
    )
    .await?;
    assert_eq!(attempts, 0, "no attempt written");

    // Updates that leave the listed columns alone go through, and every
    // listed value is still accepted.
    for status in InstanceStatus::TEXTS {
        sqlx::query("UPDATE agent_instances SET status = $2 WHERE id = $1")
            .bind(inst.id)
            .bind(status)
            .execute(&pool)
            .await?;
    }
    for phase in Phase::TEXTS {
        sqlx::query("UPDATE agent_instances SET phase = $2 WHERE id = $1")
            .bind(inst.id)
            .bind(phase)
            .execute(&pool)
            .await?;
    }
    sqlx::query("UPDATE agent_instances SET updated_at = now() WHERE id = $1")
        .bind(inst.id)
        .execute(&pool)
        .await?;
    Ok(())
}

/// The range and shape domains: (table, column, domain, the domain's one
/// check).
const RANGE_DOMAINS: [(&str, &str, &str, &str); 13] = [
    (
        "llm_call_snapshots",
        "invocation_id",
        "llm_invocation_id",
        "CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 200)))",
    ),
    (
        "llm_call_snapshots",
        "call_tag",
        "llm_call_tag",
        "CHECK ((VALUE = ANY (ARRAY['AgentPlanning'::text, 'Coder'::text, 'Replay'::text])))",
    ),
    (
        "llm_call_snapshots",
        "input_tokens",
        "nonnegative_bigint",
        "CHECK ((VALUE >= 0))",
    ),
    (
        "llm_call_snapshots",
        "output_tokens",
        "nonnegative_bigint",
        "CHECK ((VALUE >= 0))",
    ),
    (
        "llm_call_snapshots",
        "cost_usd",
        "usd_amount",
        "CHECK ((VALUE >= (0)::double precision))",
    ),
    (
        "llm_call_snapshots",
        "prompt_overlay_sha256",
        "sha256_hex",
        "CHECK ((VALUE ~ '^[0-9a-f]{64}$'::text))",
    ),
    (
        "llm_call_attempts",
        "ordinal",
        "nonnegative_integer",
        "CHECK ((VALUE >= 0))",
    ),
    (
        "llm_call_attempts",
        "usage",
        "json_object",
        "CHECK ((jsonb_typeof(VALUE) = 'object'::text))",
    ),
    (
        "llm_call_attempts",
        "latency_ms",
        "nonnegative_bigint",
        "CHECK ((VALUE >= 0))",
    ),
    (
        "llm_call_attempts",
        "cost_usd",
        "usd_amount",
        "CHECK ((VALUE >= (0)::double precision))",
    ),
    (
        "credit_windows",
        "limit_usd",
        "usd_amount",
        "CHECK ((VALUE >= (0)::double precision))",
    ),
    (
        "credit_windows",
        "spent_usd",
        "usd_amount",
        "CHECK ((VALUE >= (0)::double precision))",
    ),
    (
        "agent_event_queue",
        "publish_epoch",
        "nonnegative_integer",
        "CHECK ((VALUE >= 0))",
    ),
];

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_call_records_ranges_are_domains_and_no_table_check_is_left_but_the_event_pairing(
    pool: PgPool,
) -> anyhow::Result<()> {
    for (table, column, domain, check) in RANGE_DOMAINS {
        assert_eq!(
            column_type(&pool, table, column).await?,
            domain,
            "{table}.{column}"
        );
        let checks = domain_checks(&pool, domain).await?;
        assert_eq!(checks, [check], "{domain}");
    }
    // Every table CHECK of the rows a tick writes is re-read and, on an
    // update, re-checked by each statement; the ones left span two columns:
    // the event pairing, and a call snapshot naming exactly one of an agent
    // instance and a coding task.
    let left: Vec<String> = sqlx::query_scalar(
        "SELECT conname::text FROM pg_constraint
          WHERE contype = 'c'
            AND conrelid IN ('agent_event_queue'::regclass, 'agent_instances'::regclass,
                             'agent_state_ledger'::regclass, 'llm_call_snapshots'::regclass,
                             'llm_call_attempts'::regclass, 'credit_windows'::regclass)
          ORDER BY 1",
    )
    .fetch_all(&pool)
    .await?;
    assert_eq!(
        left,
        ["agent_event_queue_check", "llm_call_snapshots_one_subject"]
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_value_outside_a_range_domain_is_an_invalid_argument_that_writes_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let inst = soa(&store, a).await?;
    const SNAPSHOTS: &str = "SELECT count(*) FROM llm_call_snapshots WHERE instance_id = $1";
    for (sql, domain) in [
        (
            "INSERT INTO llm_call_snapshots (tenant_id, instance_id, invocation_id, site_id, requested_model)
             SELECT tenant_id, id, '', 'Agent:Planning', 'scripted' FROM agent_instances WHERE id = $1",
            "llm_invocation_id",
        ),
        (
            "INSERT INTO llm_call_snapshots (tenant_id, instance_id, invocation_id, site_id, requested_model, call_tag)
             SELECT tenant_id, id, 'inv-x', 'Agent:Planning', 'scripted', 'Chat' FROM agent_instances WHERE id = $1",
            "llm_call_tag",
        ),
        (
            "INSERT INTO llm_call_snapshots (tenant_id, instance_id, invocation_id, site_id, requested_model, input_tokens)
             SELECT tenant_id, id, 'inv-x', 'Agent:Planning', 'scripted', -1 FROM agent_instances WHERE id = $1",
            "nonnegative_bigint",
        ),
        (
            "INSERT INTO llm_call_snapshots (tenant_id, instance_id, invocation_id, site_id, requested_model, cost_usd)
             SELECT tenant_id, id, 'inv-x', 'Agent:Planning', 'scripted', -0.5 FROM agent_instances WHERE id = $1",
            "usd_amount",
        ),
        (
            "INSERT INTO llm_call_snapshots (tenant_id, instance_id, invocation_id, site_id, requested_model,
                                             prompt_overlay_sha256)
             SELECT tenant_id, id, 'inv-x', 'Agent:Planning', 'scripted', 'ABC' FROM agent_instances WHERE id = $1",
            "sha256_hex",
        ),
    ] {
        let err = refused(&pool, sql, inst.id).await;
        assert_invalid(err, &format!("{domain}_check"), domain);
    }
    assert_eq!(
        count(&pool, SNAPSHOTS, inst.id).await?,
        0,
        "no snapshot written"
    );

    let snapshot = snapshot_row(&pool, a, inst.id).await?;
    const ATTEMPTS: &str = "SELECT count(*) FROM llm_call_attempts WHERE snapshot_id = $1";
    for (sql, domain) in [
        (
            "INSERT INTO llm_call_attempts (tenant_id, snapshot_id, ordinal, provider, requested_model, outcome)
             SELECT tenant_id, id, -1, 'scripted', 'scripted', 'success' FROM llm_call_snapshots WHERE id = $1",
            "nonnegative_integer",
        ),
        (
            "INSERT INTO llm_call_attempts (tenant_id, snapshot_id, ordinal, provider, requested_model, outcome, usage)
             SELECT tenant_id, id, 0, 'scripted', 'scripted', 'success', '[]' FROM llm_call_snapshots WHERE id = $1",
            "json_object",
        ),
        (
            "INSERT INTO llm_call_attempts (tenant_id, snapshot_id, ordinal, provider, requested_model, outcome,
                                            latency_ms)
             SELECT tenant_id, id, 0, 'scripted', 'scripted', 'success', -5 FROM llm_call_snapshots WHERE id = $1",
            "nonnegative_bigint",
        ),
        (
            "INSERT INTO llm_call_attempts (tenant_id, snapshot_id, ordinal, provider, requested_model, outcome,
                                            cost_usd)
             SELECT tenant_id, id, 0, 'scripted', 'scripted', 'success', -1 FROM llm_call_snapshots WHERE id = $1",
            "usd_amount",
        ),
    ] {
        let err = refused(&pool, sql, snapshot).await;
        assert_invalid(err, &format!("{domain}_check"), domain);
    }
    assert_eq!(
        count(&pool, ATTEMPTS, snapshot).await?,
        0,
        "no attempt written"
    );

    // An update that writes a range column is checked; the snapshot is unchanged.
    let err = refused(
        &pool,
        "UPDATE llm_call_snapshots SET output_tokens = output_tokens - 1 WHERE id = $1",
        snapshot,
    )
    .await;
    assert_invalid(err, "nonnegative_bigint_check", "nonnegative_bigint");
    let tokens: i64 =
        sqlx::query_scalar("SELECT output_tokens FROM llm_call_snapshots WHERE id = $1")
            .bind(snapshot)
            .fetch_one(&pool)
            .await?;
    assert_eq!(tokens, 0, "snapshot unchanged");

    // The credit window and the event's epoch, on update.
    sqlx::query(
        "INSERT INTO credit_windows (tenant_id, week_start, limit_usd) VALUES ($1, date_trunc('week', now()), 5)",
    )
    .bind(a)
    .execute(&pool)
    .await?;
    let err = refused(
        &pool,
        "UPDATE credit_windows SET spent_usd = spent_usd - 1 WHERE tenant_id = $1",
        a,
    )
    .await;
    assert_invalid(err, "usd_amount_check", "usd_amount");
    let event: Uuid = sqlx::query_scalar(
        "INSERT INTO agent_event_queue (tenant_id, instance_id, sequence_number, event_kind)
         SELECT tenant_id, id, 1000, 'ExternalSignalReceived' FROM agent_instances WHERE id = $1
         RETURNING id",
    )
    .bind(inst.id)
    .fetch_one(&pool)
    .await?;
    let err = refused(
        &pool,
        "UPDATE agent_event_queue SET publish_epoch = -1 WHERE id = $1",
        event,
    )
    .await;
    assert_invalid(err, "nonnegative_integer_check", "nonnegative_integer");
    let (epoch, spent): (i32, f64) = sqlx::query_as(
        "SELECT e.publish_epoch, w.spent_usd FROM agent_event_queue e, credit_windows w
          WHERE e.id = $1 AND w.tenant_id = e.tenant_id",
    )
    .bind(event)
    .fetch_one(&pool)
    .await?;
    assert_eq!((epoch, spent), (0, 0.0), "event and window unchanged");

    // Values in range still go in, NULL where the column allows it.
    sqlx::query(
        "INSERT INTO llm_call_attempts (tenant_id, snapshot_id, ordinal, provider, requested_model, outcome,
                                        usage, latency_ms, cost_usd)
         SELECT tenant_id, id, 0, 'scripted', 'scripted', 'success', '{\"input_tokens\": 3}', 0, 0
           FROM llm_call_snapshots WHERE id = $1",
    )
    .bind(snapshot)
    .execute(&pool)
    .await?;
    sqlx::query(
        "UPDATE llm_call_snapshots SET prompt_overlay_sha256 = NULL, cost_usd = 0.25 WHERE id = $1",
    )
    .bind(snapshot)
    .execute(&pool)
    .await?;
    assert_eq!(count(&pool, ATTEMPTS, snapshot).await?, 1);
    Ok(())
}
