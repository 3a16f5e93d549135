//! The token cache against the real PostgreSQL: an admitted row is served
//! from memory only while the LISTEN is in place and younger than the TTL; a
//! revocation (any change to `api_tokens`) empties it as soon as it commits;
//! a lost LISTEN connection stops all keeping until it is back; unknown
//! tokens are never kept.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::store;
use genesis_core::TokenScope;
use genesis_core::token::{TOKEN_BYTES, token_from_bytes};
use genesis_store::tokens::hash_token;
use genesis_store::{Store, TokenCache};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// Wait up to 10 s for `cond`.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

struct Listening {
    cache: Arc<TokenCache>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn listening(store: &Store, ttl: Duration) -> Listening {
    let cache = Arc::new(TokenCache::new(ttl));
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (cache, store, stop) = (cache.clone(), store.clone(), stop.clone());
        async move { cache.listen(&store, stop.cancelled_owned()).await }
    });
    until("the LISTEN is in place", || cache.is_live()).await;
    Listening { cache, stop, task }
}

/// A token no other test holds: two random UUIDs' bytes.
fn fresh_token() -> String {
    let mut bytes = [0_u8; TOKEN_BYTES];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    token_from_bytes(bytes)
}

/// A stored agent-pod token: its hash and its row.
async fn pod_token(store: &Store) -> (String, genesis_store::ApiToken) {
    let hash = hash_token(&fresh_token());
    let row = store
        .tokens()
        .insert(None, TokenScope::AgentPod, &hash, "pods", None)
        .await
        .unwrap();
    (hash, row)
}

/// Change a row behind the cache's back: the notify trigger is off for
/// this one statement, so only the TTL can bring the change in.
async fn relabel_silently(pool: &PgPool, hash: &str, label: &str) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("ALTER TABLE api_tokens DISABLE TRIGGER api_tokens_notify")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("UPDATE api_tokens SET label = $2 WHERE token_sha256 = $1")
        .bind(hash)
        .bind(label)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("ALTER TABLE api_tokens ENABLE TRIGGER api_tokens_notify")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_kept_row_is_served_from_memory_until_its_ttl_passes(pool: PgPool) {
    let store = store(&pool);
    let (hash, _) = pod_token(&store).await;
    let l = listening(&store, Duration::from_millis(400)).await;

    let first = l.cache.find_by_hash(&store, &hash).await.unwrap().unwrap();
    assert_eq!(first.label, "pods");
    assert_eq!(l.cache.len(), 1);

    relabel_silently(&pool, &hash, "changed").await;
    let kept = l.cache.find_by_hash(&store, &hash).await.unwrap().unwrap();
    assert_eq!(kept.label, "pods", "served from memory within the TTL");

    tokio::time::sleep(Duration::from_millis(450)).await;
    let fresh = l.cache.find_by_hash(&store, &hash).await.unwrap().unwrap();
    assert_eq!(
        fresh.label, "changed",
        "looked up again once the TTL passed"
    );

    l.stop.cancel();
    l.task.await.unwrap();
    assert!(
        !l.cache.is_live() && l.cache.is_empty(),
        "stopped: nothing kept"
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_revocation_empties_the_cache_as_soon_as_it_commits(pool: PgPool) {
    let store = store(&pool);
    let (hash, row) = pod_token(&store).await;
    // A TTL far longer than the wait below: only the notice can explain
    // the revocation being seen.
    let l = listening(&store, Duration::from_secs(60)).await;
    let before = l.cache.find_by_hash(&store, &hash).await.unwrap().unwrap();
    assert!(before.revoked_at.is_none());
    assert_eq!(l.cache.len(), 1);

    assert!(store.tokens().revoke(row.id).await.unwrap());
    until("the revocation's notice empties the cache", || {
        l.cache.is_empty()
    })
    .await;
    let after = l.cache.find_by_hash(&store, &hash).await.unwrap().unwrap();
    assert!(after.revoked_at.is_some(), "the revoked row is read again");

    // A deletion is noticed the same way.
    assert_eq!(l.cache.len(), 1);
    sqlx::query("DELETE FROM api_tokens WHERE id = $1")
        .bind(row.id)
        .execute(&pool)
        .await
        .unwrap();
    until("the deletion's notice empties the cache", || {
        l.cache.is_empty()
    })
    .await;
    assert!(l.cache.find_by_hash(&store, &hash).await.unwrap().is_none());
    l.stop.cancel();
    l.task.await.unwrap();
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn nothing_is_kept_without_a_listen_with_a_zero_ttl_or_for_unknown_tokens(pool: PgPool) {
    let store = store(&pool);
    let (hash, _) = pod_token(&store).await;

    // Never listened: every lookup reads the database.
    let cold = TokenCache::new(Duration::from_secs(60));
    assert!(cold.find_by_hash(&store, &hash).await.unwrap().is_some());
    assert!(cold.is_empty() && !cold.is_live());

    // A zero TTL: listen returns at once and nothing is kept.
    let zero = TokenCache::new(Duration::ZERO);
    zero.listen(&store, std::future::pending()).await;
    assert!(zero.find_by_hash(&store, &hash).await.unwrap().is_some());
    assert!(zero.is_empty());

    // Unknown tokens are never kept (so a later insert is found at once).
    let l = listening(&store, Duration::from_secs(60)).await;
    let unknown = hash_token(&fresh_token());
    assert!(
        l.cache
            .find_by_hash(&store, &unknown)
            .await
            .unwrap()
            .is_none()
    );
    assert!(l.cache.is_empty());
    l.stop.cancel();
    l.task.await.unwrap();
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_lost_listen_connection_stops_keeping_until_it_is_back(pool: PgPool) {
    let store = store(&pool);
    let (hash, _) = pod_token(&store).await;
    let l = listening(&store, Duration::from_secs(60)).await;
    l.cache.find_by_hash(&store, &hash).await.unwrap();
    assert_eq!(l.cache.len(), 1);

    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE 'LISTEN%genesis_api_tokens%') k",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(killed, 1, "one LISTEN connection");
    // Notices sent while it was down are lost, so the loss itself must
    // empty the cache and stop keeping; the reconnect resumes it.
    until("the loss is noticed", || l.cache.is_empty()).await;
    until("the LISTEN is back", || l.cache.is_live()).await;
    l.cache.find_by_hash(&store, &hash).await.unwrap();
    assert_eq!(l.cache.len(), 1, "kept again once listening");
    l.stop.cancel();
    l.task.await.unwrap();
}
