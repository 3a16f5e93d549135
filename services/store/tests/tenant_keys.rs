//! Implied tenant keys on the real PostgreSQL: the direct tenant foreign
//! keys that a composite key already implies are gone, and no tenant row is
//! less guarded for it. Every `tenant_id` column still reaches `tenants(id)`
//! through foreign keys whose other columns are NOT NULL. A row naming a tenant that does not exist,
//! or another tenant's parent, is refused and leaves nothing behind.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use genesis_store::InstanceRow;
use sqlx::PgPool;
use uuid::Uuid;

/// One foreign key of a tenant table: the columns it checks, whether all of
/// them other than `tenant_id` are NOT NULL (under MATCH SIMPLE a NULL in any
/// column skips the check; a NULL `tenant_id` itself marks a platform-wide
/// row, as in api_tokens and system_configs), and the table and columns it
/// references.
struct Key {
    table: String,
    columns: Vec<String>,
    others_not_null: bool,
    parent: String,
    parent_columns: Vec<String>,
}

async fn tenant_tables(pool: &PgPool) -> BTreeSet<String> {
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
          WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

/// A foreign key as the catalogue query returns it, in [`Key`]'s field order.
type KeyRow = (String, Vec<String>, bool, String, Vec<String>);

async fn foreign_keys(pool: &PgPool) -> Vec<Key> {
    let rows: Vec<KeyRow> = sqlx::query_as(
        "SELECT c.conrelid::regclass::text,
                array(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, o)
                        JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o),
                bool_and(a.attnotnull OR a.attname = 'tenant_id'),
                c.confrelid::regclass::text,
                array(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, o)
                        JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o)
           FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
          WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
          GROUP BY c.oid",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter()
        .map(
            |(table, columns, others_not_null, parent, parent_columns)| Key {
                table,
                columns,
                others_not_null,
                parent,
                parent_columns,
            },
        )
        .collect()
}

/// The tables whose `tenant_id`, when set, is proven to name an existing
/// tenant: by a key on `tenant_id` alone to `tenants(id)`, or by a key whose
/// other columns are NOT NULL and that maps
/// `tenant_id` onto the `tenant_id` of a table already proven.
///
/// A table named in `one_of` (whose CHECK makes exactly one of its subject
/// columns non-null, so exactly one of those keys applies to every row) is
/// proven when every one of its keys with a nullable subject maps
/// `tenant_id` onto a proven parent's; its parent reads as the first.
fn proven(keys: &[Key], one_of: &[&str]) -> BTreeMap<String, String> {
    let mut proven: BTreeMap<String, String> = BTreeMap::new();
    let maps_tenant = |k: &Key, proven: &BTreeMap<String, String>| {
        k.columns
            .iter()
            .position(|c| c == "tenant_id")
            .and_then(|at| k.parent_columns.get(at))
            .is_some_and(|c| c == "tenant_id")
            && proven.contains_key(&k.parent)
    };
    loop {
        let before = proven.len();
        for table in one_of {
            if proven.contains_key(*table) {
                continue;
            }
            let subjects: Vec<&Key> = keys
                .iter()
                .filter(|k| k.table == *table && !k.others_not_null && k.columns.len() > 1)
                .collect();
            if subjects.len() >= 2 && subjects.iter().all(|k| maps_tenant(k, &proven)) {
                proven.insert((*table).to_owned(), subjects[0].parent.clone());
            }
        }
        for k in keys {
            if proven.contains_key(&k.table) || !k.others_not_null {
                continue;
            }
            let Some(at) = k.columns.iter().position(|c| c == "tenant_id") else {
                continue;
            };
            let direct =
                k.parent == "tenants" && k.columns.len() == 1 && k.parent_columns == ["id"];
            let through = k.parent_columns.get(at).map(String::as_str) == Some("tenant_id")
                && proven.contains_key(&k.parent);
            if direct || through {
                proven.insert(k.table.clone(), k.parent.clone());
            }
        }
        if proven.len() == before {
            return proven;
        }
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn every_tenant_id_still_reaches_tenants_through_foreign_keys(
    pool: PgPool,
) -> anyhow::Result<()> {
    let keys = foreign_keys(&pool).await;
    // A call snapshot names exactly one of an agent instance, a coding
    // task and a replay, by its CHECK: one of its three keys applies to
    // every row.
    let one_subject: String = sqlx::query_scalar(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint
          WHERE conname = 'llm_call_snapshots_one_subject'",
    )
    .fetch_one(&pool)
    .await?;
    assert_eq!(
        one_subject,
        "CHECK ((num_nonnulls(instance_id, coding_task_id, replay_id) = 1))"
    );
    let proven = proven(&keys, &["llm_call_snapshots"]);
    let tables = tenant_tables(&pool).await;
    assert!(tables.len() > 20, "the schema's tenant tables: {tables:?}");
    let unproven: Vec<&String> = tables.iter().filter(|t| !proven.contains_key(*t)).collect();
    assert!(
        unproven.is_empty(),
        "tenant tables whose tenant_id no foreign key chain checks: {unproven:?}"
    );
    // The hot tables are now proven through their parent, not directly.
    for (table, parent) in [
        ("agent_event_queue", "agent_instances"),
        ("agent_state_ledger", "agent_instances"),
        ("agent_state_ledger_actions", "agent_state_ledger"),
        ("agent_messages", "agent_instances"),
        ("llm_call_snapshots", "agent_instances"),
        ("llm_call_attempts", "llm_call_snapshots"),
        ("tool_invocations", "agent_instances"),
    ] {
        assert_eq!(
            proven.get(table).map(String::as_str),
            Some(parent),
            "{table}"
        );
        let direct = keys
            .iter()
            .filter(|k| k.table == table && k.parent == "tenants")
            .count();
        assert_eq!(direct, 0, "{table} still has a direct tenant key");
    }
    // And the chain ends at a direct key.
    assert_eq!(
        proven.get("agent_instances").map(String::as_str),
        Some("tenants")
    );
    Ok(())
}

#[test]
fn the_proof_refuses_a_nullable_or_misaligned_key() {
    let key =
        |table: &str, columns: &[&str], others_not_null: bool, parent: &str, pc: &[&str]| Key {
            table: table.into(),
            columns: columns.iter().map(|c| (*c).into()).collect(),
            others_not_null,
            parent: parent.into(),
            parent_columns: pc.iter().map(|c| (*c).into()).collect(),
        };
    let keys = [
        key("a", &["tenant_id"], true, "tenants", &["id"]),
        key("b", &["tenant_id", "a_id"], true, "a", &["tenant_id", "id"]),
        key(
            "c",
            &["tenant_id", "a_id"],
            false,
            "a",
            &["tenant_id", "id"],
        ),
        key("d", &["a_id", "tenant_id"], true, "a", &["tenant_id", "id"]),
        key("e", &["tenant_id", "x_id"], true, "x", &["tenant_id", "id"]),
        // One of two nullable subjects: proven only when named as such, and
        // only when every subject's parent is proven.
        key(
            "f",
            &["tenant_id", "a_id"],
            false,
            "a",
            &["tenant_id", "id"],
        ),
        key(
            "f",
            &["tenant_id", "b_id"],
            false,
            "b",
            &["tenant_id", "id"],
        ),
        key(
            "g",
            &["tenant_id", "a_id"],
            false,
            "a",
            &["tenant_id", "id"],
        ),
        key(
            "g",
            &["tenant_id", "x_id"],
            false,
            "x",
            &["tenant_id", "id"],
        ),
    ];
    assert_eq!(
        proven(&keys, &[])
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(
        proven(&keys, &["c", "f", "g"])
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["a", "b", "f"]
    );
}

async fn events_of(pool: &PgPool, instance: Uuid) -> i64 {
    count(
        pool,
        "SELECT count(*) FROM agent_event_queue WHERE instance_id = $1",
        instance,
    )
    .await
    .unwrap()
}

async fn insert_event(pool: &PgPool, tenant: Uuid, instance: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO agent_event_queue (tenant_id, instance_id, sequence_number, event_kind)
         VALUES ($1, $2, 1000, 'ExternalSignalReceived')",
    )
    .bind(tenant)
    .bind(instance)
    .execute(pool)
    .await
    .map(|_| ())
}

fn foreign_key_violation(e: sqlx::Error) -> String {
    let db = e.as_database_error().expect("a database error");
    assert_eq!(db.code().as_deref(), Some("23503"), "{db}");
    db.constraint().unwrap_or_default().to_owned()
}

/// Tenants `a` and `b`, and an SOA of `a`.
async fn owner_other_and_soa(pool: &PgPool) -> anyhow::Result<(Uuid, Uuid, InstanceRow)> {
    let store = store(pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    let inst = soa(&store, a).await?;
    Ok((a, b, inst))
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_row_naming_a_missing_tenant_or_another_tenants_instance_is_refused(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (a, b, inst) = owner_other_and_soa(&pool).await?;
    let before = events_of(&pool, inst.id).await;

    // Superuser inserts bypass row-level security: only the keys stand here.
    let missing = insert_event(&pool, Uuid::new_v4(), inst.id)
        .await
        .unwrap_err();
    assert_eq!(
        foreign_key_violation(missing),
        "agent_event_queue_tenant_id_instance_id_fkey"
    );
    let other = insert_event(&pool, b, inst.id).await.unwrap_err();
    assert_eq!(
        foreign_key_violation(other),
        "agent_event_queue_tenant_id_instance_id_fkey"
    );
    assert_eq!(events_of(&pool, inst.id).await, before, "nothing written");

    // The owner's own row goes in.
    insert_event(&pool, a, inst.id).await?;
    assert_eq!(events_of(&pool, inst.id).await, before + 1);

    // A tenant that still has instances cannot be deleted from under them.
    let gone = sqlx::query("DELETE FROM tenants WHERE id = $1")
        .bind(a)
        .execute(&pool)
        .await
        .unwrap_err();
    assert_eq!(
        foreign_key_violation(gone),
        "agent_instances_tenant_id_fkey"
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_call_attempt_under_another_tenant_than_its_snapshot_is_refused(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (a, b, inst) = owner_other_and_soa(&pool).await?;
    let snapshot = snapshot_row(&pool, a, inst.id).await?;
    let attempt = |tenant: Uuid| {
        sqlx::query(
            "INSERT INTO llm_call_attempts (tenant_id, snapshot_id, ordinal, provider, requested_model, outcome)
             VALUES ($1, $2, 0, 'scripted', 'scripted', 'success')",
        )
        .bind(tenant)
        .bind(snapshot)
        .execute(&pool)
    };
    let refused = attempt(b).await.unwrap_err();
    assert_eq!(
        foreign_key_violation(refused),
        "llm_call_attempts_tenant_id_snapshot_id_fkey"
    );
    let n = count(
        &pool,
        "SELECT count(*) FROM llm_call_attempts WHERE snapshot_id = $1",
        snapshot,
    )
    .await?;
    assert_eq!(n, 0, "nothing written");
    attempt(a).await?;
    Ok(())
}
