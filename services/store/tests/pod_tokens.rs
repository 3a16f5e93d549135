//! Agent-pod tokens scoped to tenants against the real
//! PostgreSQL: the set is stored sorted and unique, read back by every
//! lookup and listing, refused on an operator token and when it names an
//! unknown tenant (which is named, and nothing is written), and a change to
//! it empties a listening token cache as a revocation does.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{store, tenant};
use genesis_core::{PodTenants, TokenScope};
use genesis_store::tokens::hash_token;
use genesis_store::{StoreError, TokenCache};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

async fn token_rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM api_tokens")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_pod_tokens_tenant_set_is_stored_and_read_back_by_every_lookup(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    let set = PodTenants::new("pod_tenants", [b, a])?;
    let hash = hash_token("gen_scoped");
    let row = store
        .tokens()
        .insert_for_tenants(None, TokenScope::AgentPod, &set, &hash, "eu pool", None)
        .await?;
    assert_eq!(row.pod_tenants, set);
    assert!(row.pod_tenants.admits(a) && row.pod_tenants.admits(b));
    assert!(!row.pod_tenants.admits(Uuid::new_v4()));
    let mut sorted = [a, b];
    sorted.sort();
    let stored: Vec<Uuid> =
        sqlx::query_scalar("SELECT unnest(pod_tenants) FROM api_tokens WHERE id = $1")
            .bind(row.id)
            .fetch_all(&pool)
            .await?;
    assert_eq!(stored, sorted, "stored sorted");
    assert_eq!(
        store
            .tokens()
            .find_by_hash(&hash)
            .await?
            .unwrap()
            .pod_tenants,
        set
    );
    assert_eq!(store.tokens().authenticate(&hash).await?.pod_tenants, set);
    assert_eq!(store.tokens().get(row.id).await?.pod_tenants, set);
    let listed = store.tokens().list(None).await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].pod_tenants, set);

    // The unscoped token of a shared pool, and every operator token, admit
    // every tenant their scope allows: the set is empty.
    let shared = store
        .tokens()
        .insert(
            None,
            TokenScope::AgentPod,
            &hash_token("gen_shared"),
            "shared",
            None,
        )
        .await?;
    assert!(shared.pod_tenants.is_all());
    let op = store
        .tokens()
        .insert(
            Some(a),
            TokenScope::Operator,
            &hash_token("gen_op"),
            "ops",
            None,
        )
        .await?;
    assert!(op.pod_tenants.is_all());
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenant_set_on_an_operator_token_or_naming_an_unknown_tenant_writes_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let set = PodTenants::new("pod_tenants", [a])?;
    let refused = store
        .tokens()
        .insert_for_tenants(
            None,
            TokenScope::Operator,
            &set,
            &hash_token("gen_op"),
            "ops",
            None,
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::InvalidArgument { ref field, .. }) if field == "pod_tenants"),
        "{refused:?}"
    );
    let ghost = Uuid::new_v4();
    let unknown = store
        .tokens()
        .insert_for_tenants(
            None,
            TokenScope::AgentPod,
            &PodTenants::new("pod_tenants", [a, ghost])?,
            &hash_token("gen_pod"),
            "pods",
            None,
        )
        .await;
    match unknown {
        Err(StoreError::NotFound { what }) => assert_eq!(what, format!("tenant {ghost}")),
        other => panic!("expected the unknown tenant named, got {other:?}"),
    }
    assert_eq!(token_rows(&pool).await, 0, "nothing was written");

    // The table holds the same rules against a write that skips the store.
    let direct = sqlx::query(
        "INSERT INTO api_tokens (scope, pod_tenants, token_sha256) VALUES ('operator', $1, $2)",
    )
    .bind(vec![a])
    .bind(hash_token("gen_direct"))
    .execute(&pool)
    .await;
    assert!(direct.is_err(), "an operator token with a tenant set");
    let direct = sqlx::query(
        "INSERT INTO api_tokens (scope, pod_tenants, token_sha256) VALUES ('agent-pod', $1, $2)",
    )
    .bind(vec![ghost])
    .bind(hash_token("gen_direct"))
    .execute(&pool)
    .await;
    assert!(direct.is_err(), "an unknown tenant");
    assert_eq!(token_rows(&pool).await, 0);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_changed_tenant_set_empties_a_listening_cache_at_once(pool: PgPool) {
    let store = store(&pool);
    let a = tenant(&store, "a").await.unwrap();
    let b = tenant(&store, "b").await.unwrap();
    let hash = hash_token("gen_pool");
    let row = store
        .tokens()
        .insert_for_tenants(
            None,
            TokenScope::AgentPod,
            &PodTenants::new("pod_tenants", [a]).unwrap(),
            &hash,
            "pool",
            None,
        )
        .await
        .unwrap();
    // A TTL far longer than the test: only the notice explains the change
    // being seen.
    let cache = Arc::new(TokenCache::new(Duration::from_secs(60)));
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (cache, store, stop) = (cache.clone(), store.clone(), stop.clone());
        async move { cache.listen(&store, stop.cancelled_owned()).await }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cache.is_live() {
        assert!(tokio::time::Instant::now() < deadline, "never listened");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let kept = cache.find_by_hash(&store, &hash).await.unwrap().unwrap();
    assert!(kept.pod_tenants.admits(a) && !kept.pod_tenants.admits(b));
    assert_eq!(cache.len(), 1);

    // Narrowed to b (by hand: the store mints sets, it never edits them).
    sqlx::query("UPDATE api_tokens SET pod_tenants = $2 WHERE id = $1")
        .bind(row.id)
        .bind(vec![b])
        .execute(&pool)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cache.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the change's notice never emptied the cache"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let fresh = cache.find_by_hash(&store, &hash).await.unwrap().unwrap();
    assert!(!fresh.pod_tenants.admits(a) && fresh.pod_tenants.admits(b));
    stop.cancel();
    task.await.unwrap();
}
