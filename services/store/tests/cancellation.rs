//! A transaction whose future is dropped while its `BEGIN` is in flight must
//! not leave its pooled connection inside a transaction: the next borrower's
//! statements would run in it, hold their row locks until some later COMMIT
//! on that connection, and be lost if the connection closed first. A gRPC
//! handler is dropped exactly there when its client (a killed pod) goes
//! away, which is how the fault suite met it.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::task::Poll;
use std::time::Duration;

use common::*;
use genesis_store::{DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT, Store, StoreOptions, TenantTx};
use sqlx::PgPool;

/// A store with one tenant connection, so every borrow is the same backend.
fn one_connection_store(pool: &PgPool, idle_in_transaction_timeout: Duration) -> Store {
    Store::from_pool_with(
        pool,
        StoreOptions {
            tenant_pool_size: 1,
            idle_in_transaction_timeout,
            ..StoreOptions::default()
        },
    )
}

async fn backend_pid(tx: &mut TenantTx) -> anyhow::Result<i32> {
    Ok(sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(tx.conn())
        .await?)
}

/// The backend's `pg_stat_activity.state`, read from the test's own pool.
async fn state(pool: &PgPool, pid: i32) -> anyhow::Result<String> {
    Ok(
        sqlx::query_scalar("SELECT state FROM pg_stat_activity WHERE pid = $1")
            .bind(pid)
            .fetch_one(pool)
            .await?,
    )
}

/// Wait up to `within` for the backend to reach `want`; the last state seen.
async fn wait_for(pool: &PgPool, pid: i32, want: &str, within: Duration) -> anyhow::Result<String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let seen = state(pool, pid).await?;
        if seen == want || tokio::time::Instant::now() >= deadline {
            return Ok(seen);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_transaction_dropped_during_begin_leaves_its_connection_out_of_any_transaction(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = one_connection_store(&pool, DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT);
    let t = tenant(&store, "a").await?;
    let mut tx = store.tenant_tx(t).await?;
    let pid = backend_pid(&mut tx).await?;
    tx.commit().await?;
    assert_eq!(
        wait_for(&pool, pid, "idle", Duration::from_secs(5)).await?,
        "idle"
    );

    // Poll the next begin once: the pool hands over its idle connection and
    // BEGIN goes out; the future then waits for the answer. Once the server
    // shows the backend inside the transaction, and without polling again,
    // drop the future: it has sent BEGIN and never read its answer. (A poll
    // that completes the begin, or that finds the pool still taking its
    // connection back and sends nothing, makes the attempt again.)
    let mut hit = false;
    for _ in 0..20 {
        let mut begin = Box::pin(store.tenant_tx(t));
        if let Poll::Ready(done) = futures::poll!(begin.as_mut()) {
            done?.rollback().await?;
            continue;
        }
        let seen = wait_for(&pool, pid, "idle in transaction", Duration::from_secs(2)).await?;
        drop(begin);
        if seen == "idle in transaction" {
            hit = true;
            break;
        }
        wait_for(&pool, pid, "idle", Duration::from_secs(5)).await?;
    }
    assert!(hit, "never caught a begin with its BEGIN on the server");

    // The dropped borrow goes back to the pool with the transaction ended.
    assert_eq!(
        wait_for(&pool, pid, "idle", Duration::from_secs(5)).await?,
        "idle",
        "the connection went back to the pool inside the dropped transaction"
    );

    // And what the next borrower writes is committed when its call returns,
    // not held in a transaction nobody ends.
    let inst = soa(&store, t).await?;
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM agent_instances WHERE id = $1",
            inst.id
        )
        .await?,
        1
    );
    assert_eq!(state(&pool, pid).await?, "idle");
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_transaction_left_idle_past_the_bound_is_ended_and_its_row_lock_freed(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = one_connection_store(&pool, Duration::from_millis(300));
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;

    // Take the instance's row lock and write under it, then go idle.
    let mut tx = store.tenant_tx(t).await?;
    sqlx::query("UPDATE agent_instances SET consecutive_idle_ticks = 7 WHERE id = $1")
        .bind(inst.id)
        .execute(tx.conn())
        .await?;
    let pid = backend_pid(&mut tx).await?;

    // Within the bound the lock is held: another session cannot take it.
    let held = sqlx::query("SELECT 1 FROM agent_instances WHERE id = $1 FOR UPDATE NOWAIT")
        .bind(inst.id)
        .execute(&pool)
        .await;
    assert!(held.is_err(), "the row lock was not held inside the bound");

    // Past it the server has ended the session: the lock is free without
    // waiting, the write is rolled back, and the abandoned transaction can
    // no longer commit.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let gone: bool =
            sqlx::query_scalar("SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)")
                .bind(pid)
                .fetch_one(&pool)
                .await?;
        if gone {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the idle transaction's session was never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sqlx::query("SELECT 1 FROM agent_instances WHERE id = $1 FOR UPDATE NOWAIT")
        .bind(inst.id)
        .execute(&pool)
        .await?;
    assert_eq!(
        count(
            &pool,
            "SELECT consecutive_idle_ticks::bigint FROM agent_instances WHERE id = $1",
            inst.id
        )
        .await?,
        0
    );
    assert!(
        tx.commit().await.is_err(),
        "a terminated transaction committed"
    );

    // The pool replaces the dead connection: the next transaction works.
    let mut tx = store.tenant_tx(t).await?;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM agent_instances WHERE id = $1")
        .bind(inst.id)
        .fetch_one(tx.conn())
        .await?;
    tx.commit().await?;
    assert_eq!(n, 1);
    Ok(())
}
