//! Migration 0092 against the real PostgreSQL: the value lists of the
//! tick's hot rows (event kind, instance status and type, call outcome) are
//! domains holding the lists genesis-core and the store check (the
//! store's `ATTEMPT_OUTCOMES` for outcomes), no table CHECK re-reads them on
//! every update, and a value outside a list is still refused as an invalid
//! argument that writes nothing.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use common::*;
use genesis_core::{AgentEventKind, AgentType, InstanceStatus};
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
    assert!(listed("CHECK ((VALUE >= 0))").is_empty());
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
            "llm_call_attempts",
            "outcome",
            "llm_call_outcome",
            sorted(genesis_store::llm::ATTEMPT_OUTCOMES),
        ),
    ];
    for (table, column, domain, values) in columns {
        let ty: String = sqlx::query_scalar(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute
              WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped",
        )
        .bind(table)
        .bind(column)
        .fetch_one(&pool)
        .await?;
        assert_eq!(ty, domain, "{table}.{column}");
        let checks: Vec<String> = sqlx::query_scalar(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint
              WHERE contypid = $1::regtype AND contype = 'c'",
        )
        .bind(domain)
        .fetch_all(&pool)
        .await?;
        assert_eq!(checks.len(), 1, "{domain}: {checks:?}");
        assert_eq!(listed(&checks[0]), values, "{domain}");
    }
    // No table CHECK of the rows a tick updates re-reads a value list: each
    // would be parsed again and checked on every update of the row.
    let lists: Vec<(String, String)> = sqlx::query_as(
        "SELECT conrelid::regclass::text, conname::text FROM pg_constraint
          WHERE contype = 'c'
            AND conrelid IN ('agent_event_queue'::regclass, 'agent_instances'::regclass,
                             'llm_call_attempts'::regclass)
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
    ] {
        let err = refused(&pool, sql, inst.id).await;
        assert_invalid(err, &format!("{domain}_check"), domain);
    }
    let (status, agent_type): (String, String) =
        sqlx::query_as("SELECT status, agent_type FROM agent_instances WHERE id = $1")
            .bind(inst.id)
            .fetch_one(&pool)
            .await?;
    assert_eq!(
        (status.as_str(), agent_type.as_str()),
        ("active", "Soa"),
        "instance unchanged"
    );

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
    sqlx::query("UPDATE agent_instances SET updated_at = now() WHERE id = $1")
        .bind(inst.id)
        .execute(&pool)
        .await?;
    Ok(())
}
