//! The catalogue epoch on the real PostgreSQL: every committed write to a
//! catalogue table (agent_modes, llm_presets, llm_site_bindings,
//! system_configs) raises the catalogue epoch, a rolled-back one does not,
//! the service roles cannot set it, and the bundle read leaves the
//! catalogue out exactly when the caller names the current epoch. A write
//! to llm_pricing raises it too.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use common::*;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

async fn epoch(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT epoch FROM catalogue_epoch")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn bundle(pool: &PgPool, t: Uuid, instance: Uuid, held_epoch: i64) -> Value {
    sqlx::query_scalar(
        "SELECT genesis_read_bundle($1, $2, 12, 'Soa', ARRAY['Agent:Planning'], now(), 0, NULL, $3)",
    )
    .bind(t)
    .bind(instance)
    .bind(held_epoch)
    .fetch_one(pool)
    .await
    .unwrap()
}

const CATALOGUE: [&str; 4] = ["configs", "modes", "bindings", "mode_presets"];

fn has_catalogue(b: &Value) -> bool {
    let present = CATALOGUE.iter().filter(|k| b.get(**k).is_some()).count();
    assert!(present == 0 || present == 4, "all or none: {b}");
    present == 4
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_bundle_leaves_the_catalogue_out_only_for_the_current_epoch(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let e = epoch(&pool).await;
    let full = bundle(&pool, t, inst.id, 0).await;
    assert!(has_catalogue(&full));
    assert_eq!(full["catalogue_epoch"], e);
    assert!(!full["modes"].as_array().unwrap().is_empty(), "{full}");
    let lean = bundle(&pool, t, inst.id, e).await;
    assert!(!has_catalogue(&lean), "{lean}");
    assert_eq!(lean["catalogue_epoch"], e);
    for k in ["ledger", "missions", "escalations", "ledger_after"] {
        assert!(lean.get(k).is_some(), "{k} is always sent: {lean}");
    }
    // An older or unknown epoch gets the whole catalogue.
    assert!(has_catalogue(&bundle(&pool, t, inst.id, e - 1).await));
    assert!(has_catalogue(&bundle(&pool, t, inst.id, e + 1).await));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn every_committed_catalogue_write_raises_the_epoch_and_a_rolled_back_one_does_not(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    sqlx::query(
        "INSERT INTO llm_presets (tenant_id, name, model, provider) VALUES ($1, 'p', 'm', 'scripted')",
    )
    .bind(t)
    .execute(&pool)
    .await?;
    let writes: [(&str, &str); 6] = [
        (
            "a tenant configuration",
            "INSERT INTO system_configs (tenant_id, key, value) VALUES ($1, 'Any:Key', '1')",
        ),
        (
            "a mode row",
            "UPDATE agent_modes SET description = description || '.' WHERE agent_type = 'Soa' AND $1 IS NOT NULL",
        ),
        (
            "a preset",
            "UPDATE llm_presets SET model = 'm2' WHERE tenant_id = $1",
        ),
        (
            "a site binding",
            "INSERT INTO llm_site_bindings (tenant_id, site_id, preset_id) SELECT $1, 'Agent:Planning', id FROM llm_presets WHERE tenant_id = $1",
        ),
        (
            "a binding removed",
            "DELETE FROM llm_site_bindings WHERE tenant_id = $1",
        ),
        (
            "a configuration removed",
            "DELETE FROM system_configs WHERE tenant_id = $1",
        ),
    ];
    for (what, sql) in writes {
        let before = epoch(&pool).await;
        // Rolled back: the epoch stays.
        let mut tx = pool.begin().await?;
        sqlx::query(sql).bind(t).execute(&mut *tx).await?;
        tx.rollback().await?;
        assert_eq!(epoch(&pool).await, before, "{what}: rolled back");
        sqlx::query(sql).bind(t).execute(&pool).await?;
        let after = epoch(&pool).await;
        assert!(after > before, "{what}: {before} -> {after}");
        // A caller holding the old epoch is sent the new catalogue.
        let b = bundle(&pool, t, inst.id, before).await;
        assert!(has_catalogue(&b), "{what}");
        assert_eq!(b["catalogue_epoch"], after, "{what}");
    }
    // Reads move nothing.
    let before = epoch(&pool).await;
    bundle(&pool, t, inst.id, 0).await;
    sqlx::query("SELECT count(*) FROM agent_modes")
        .execute(&pool)
        .await?;
    assert_eq!(epoch(&pool).await, before);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_service_roles_read_the_epoch_but_cannot_set_it(pool: PgPool) -> anyhow::Result<()> {
    let before = epoch(&pool).await;
    for (role, set_role) in [
        ("genesis_app", "SET LOCAL ROLE genesis_app"),
        ("genesis_system", "SET LOCAL ROLE genesis_system"),
    ] {
        let mut tx = pool.begin().await?;
        sqlx::query(set_role).execute(&mut *tx).await?;
        let seen: i64 = sqlx::query_scalar("SELECT epoch FROM catalogue_epoch")
            .fetch_one(&mut *tx)
            .await?;
        assert_eq!(seen, before, "{role} reads it");
        let err = sqlx::query("UPDATE catalogue_epoch SET epoch = 1")
            .execute(&mut *tx)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("permission denied"),
            "{role}: {err}"
        );
        tx.rollback().await?;
    }
    assert_eq!(epoch(&pool).await, before);
    Ok(())
}

/// A reader holding the catalogue the way the supervisor does, racing a
/// writer that commits 60 configuration changes: every value it uses is one
/// that was committed, never older than one it used before, and once the
/// writer is done the next read has the last value.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_held_catalogue_never_outlives_a_concurrent_committed_write(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    sqlx::query("INSERT INTO system_configs (tenant_id, key, value) VALUES ($1, 'Race:Key', '0')")
        .bind(t)
        .execute(&pool)
        .await?;
    let writer = {
        let pool = pool.clone();
        tokio::spawn(async move {
            for i in 1..=60 {
                sqlx::query("UPDATE system_configs SET value = $2 WHERE tenant_id = $1 AND key = 'Race:Key'")
                    .bind(t)
                    .bind(i.to_string())
                    .execute(&pool)
                    .await?;
            }
            anyhow::Ok(())
        })
    };
    let value = |b: &Value| -> i64 { b["configs"]["Race:Key"].as_str().unwrap().parse().unwrap() };
    let (mut held_epoch, mut held_value) = (0_i64, -1_i64);
    let mut used = Vec::new();
    loop {
        let done = writer.is_finished();
        let b = bundle(&pool, t, inst.id, held_epoch).await;
        if has_catalogue(&b) {
            held_epoch = b["catalogue_epoch"].as_i64().unwrap();
            held_value = value(&b);
        } else {
            assert_eq!(
                b["catalogue_epoch"], held_epoch,
                "left out only for the held epoch"
            );
        }
        used.push(held_value);
        if done {
            break;
        }
    }
    writer.await??;
    assert!(
        used.windows(2).all(|w| w[0] <= w[1]),
        "never older: {used:?}"
    );
    assert_eq!(*used.last().unwrap(), 60, "the last committed value");
    Ok(())
}

/// A committed price write raises the epoch (a rolled-back
/// one does not), and the attempt context read returns the price with the
/// epoch it was read at, so a held price is never used past a write.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_price_write_raises_the_epoch_the_attempt_context_reports(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let price = |ctx: &genesis_store::llm::RecordContext| {
        genesis_store::llm::choose_pricing("gpt-4o-2024-08-06", "gpt-4o", &ctx.prices)
            .map(|c| (c.row.model, c.row.input_usd_per_mtok, c.source.as_str()))
    };
    let ctx = store
        .llm()
        .record_context(t, inst.id, "gpt-4o-2024-08-06", "gpt-4o")
        .await?;
    assert_eq!(ctx.catalogue_epoch, epoch(&pool).await);
    // The candidates are the rows that begin either name, and the dated
    // served name is priced by its base model's row.
    let mut names: Vec<_> = ctx.prices.iter().map(|p| p.model.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["gpt-4o"]);
    assert_eq!(price(&ctx), Some(("gpt-4o".into(), 2.5, "prefix")));
    let writes = [
        "UPDATE llm_pricing SET input_usd_per_mtok = 4 WHERE model = 'gpt-4o'",
        "INSERT INTO llm_pricing (model, input_usd_per_mtok, output_usd_per_mtok) VALUES ('new-1', 1, 2)",
        "DELETE FROM llm_pricing WHERE model = 'new-1'",
    ];
    for sql in writes {
        let before = epoch(&pool).await;
        let mut tx = pool.begin().await?;
        sqlx::query(sql).execute(&mut *tx).await?;
        tx.rollback().await?;
        assert_eq!(epoch(&pool).await, before, "{sql}: rolled back");
        sqlx::query(sql).execute(&pool).await?;
        let after = epoch(&pool).await;
        assert!(after > before, "{sql}: {before} -> {after}");
        let ctx = store
            .llm()
            .record_context(t, inst.id, "gpt-4o-2024-08-06", "gpt-4o")
            .await?;
        assert_eq!(ctx.catalogue_epoch, after, "{sql}");
        assert_eq!(price(&ctx), Some(("gpt-4o".into(), 4.0, "prefix")));
    }
    Ok(())
}

/// Two transactions that each write two catalogue rows do
/// not deadlock. The first raises the epoch with a preset, the second then
/// binds a site, and the first binds the same site: with the epoch taken
/// after a statement's rows the second held the binding while
/// waiting for the epoch and the first waited for the binding, and
/// PostgreSQL failed one of them. Taken before, the second waits for the
/// epoch before it writes, and both commit in order.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn catalogue_writers_queue_for_the_epoch_before_their_rows(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let preset: Uuid = sqlx::query_scalar(
        "INSERT INTO llm_presets (tenant_id, name, model, provider) VALUES ($1, 'p', 'm', 'scripted') RETURNING id",
    )
    .bind(t)
    .fetch_one(&pool)
    .await?;
    let before = epoch(&pool).await;

    let mut first = pool.begin().await?;
    sqlx::query(
        "INSERT INTO llm_presets (tenant_id, name, model, provider) VALUES ($1, 'seeded', 'm', 'scripted')",
    )
    .bind(t)
    .execute(&mut *first)
    .await?;

    let second = tokio::spawn({
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await?;
            sqlx::query(
                "INSERT INTO llm_site_bindings (tenant_id, site_id, preset_id) VALUES ($1, 'Agent:Default', $2)
                 ON CONFLICT (tenant_id, site_id) DO UPDATE SET preset_id = EXCLUDED.preset_id",
            )
            .bind(t)
            .bind(preset)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(())
        }
    });
    // Let the second transaction reach its wait.
    wait_for_a_lock_wait(&pool).await;
    let bound = sqlx::query(
        "INSERT INTO llm_site_bindings (tenant_id, site_id, preset_id)
         SELECT $1, 'Agent:Default', id FROM llm_presets WHERE tenant_id = $1 AND name = 'seeded'
         ON CONFLICT (tenant_id, site_id) DO NOTHING",
    )
    .bind(t)
    .execute(&mut *first)
    .await?;
    assert_eq!(bound.rows_affected(), 1, "the first writer bound the site");
    first.commit().await?;
    second.await??;

    // Both committed, in order: the second writer's binding stands.
    let bound_to: Uuid = sqlx::query_scalar(
        "SELECT preset_id FROM llm_site_bindings WHERE tenant_id = $1 AND site_id = 'Agent:Default'",
    )
    .bind(t)
    .fetch_one(&pool)
    .await?;
    assert_eq!(bound_to, preset);
    assert!(epoch(&pool).await >= before + 2);
    Ok(())
}

/// Until some backend of this database waits on a lock (at most 5 s).
async fn wait_for_a_lock_wait(pool: &PgPool) {
    for _ in 0..500 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the second writer never waited");
}
