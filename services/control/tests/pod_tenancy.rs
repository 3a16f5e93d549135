//! Agent-pod tokens scoped to tenants, and dedicated agent-pod pools, on
//! real PostgreSQL and real JetStream: CreateToken mints an agent-pod token
//! with a tenant set for a platform-wide caller only, refuses every bad set
//! precisely and writes nothing then, and ListTokens shows the set; a
//! dedicated pool's tenant's tick goes to that pool's consumer and never
//! reaches the shared pool's, including after the shared consumer of an
//! existing deployment is narrowed.

mod common;

use std::time::Duration;

use async_nats::jetstream;
use common::*;
use futures::StreamExt as _;
use genesis_control::metrics::Metrics;
use genesis_control::publisher::{self, PublisherSettings, TickMessage};
use genesis_core::{AgentEventKind, PodPools, TokenScope};
use genesis_proto::v1;
use serde_json::json;
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

async fn token_rows(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(genesis_store::inspect::count_rows(pool, "api_tokens").await?)
}

fn pod_request(scope: &str, tenants: &[String]) -> v1::CreateTokenRequest {
    v1::CreateTokenRequest {
        scope: scope.into(),
        tenant_id: None,
        label: "eu pool".into(),
        ttl_seconds: None,
        pod_tenant_ids: tenants.to_vec(),
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn only_a_platform_caller_mints_a_pod_token_for_some_tenants_and_listings_show_them(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let root = token(&store, TokenScope::Operator, None).await?;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let h = start(config(&pool, NATS_URL)).await?;
    let mut tokens = v1::token_service_client::TokenServiceClient::new(h.channel().await?);
    let before = token_rows(&pool).await?;

    // A tenant-bound operator may not name the tenants of a pod token, not
    // even only its own, nor with its tenant in tenant_id.
    for r in [
        pod_request("agent-pod", &[a.to_string()]),
        v1::CreateTokenRequest {
            tenant_id: Some(a.to_string()),
            ..pod_request("agent-pod", &[a.to_string()])
        },
        v1::CreateTokenRequest {
            tenant_id: Some(a.to_string()),
            ..pod_request("operator", &["not-even-a-uuid".into()])
        },
    ] {
        let e = tokens
            .create_token(req(r.clone(), &op_a))
            .await
            .expect_err("a tenant token");
        assert_eq!(e.code(), Code::PermissionDenied, "{r:?}: {e:?}");
    }
    assert_eq!(token_rows(&pool).await?, before, "nothing was written");

    // Bad sets from the platform: each named, nothing written.
    let ghost = Uuid::new_v4();
    let cases: [(v1::CreateTokenRequest, Code, String); 4] = [
        (
            pod_request("agent-pod", &[a.to_string(), "acme".into()]),
            Code::InvalidArgument,
            "pod_tenant_ids[1]: must be a UUID".into(),
        ),
        (
            pod_request("agent-pod", &[a.to_string(), a.to_string()]),
            Code::InvalidArgument,
            format!("pod_tenant_ids: tenant {a} is listed twice"),
        ),
        (
            pod_request("operator", &[a.to_string()]),
            Code::InvalidArgument,
            "pod_tenant_ids: only agent-pod tokens carry a tenant set".into(),
        ),
        (
            pod_request("agent-pod", &[a.to_string(), ghost.to_string()]),
            Code::NotFound,
            format!("tenant {ghost} not found"),
        ),
    ];
    for (r, code, message) in cases {
        let e = tokens
            .create_token(req(r.clone(), &root))
            .await
            .expect_err("a bad set");
        assert_eq!((e.code(), e.message()), (code, message.as_str()), "{r:?}");
    }
    assert_eq!(token_rows(&pool).await?, before, "nothing was written");

    // The platform mints one; the answer and the listing show the set,
    // sorted, and the shared pool's token shows none.
    let created = tokens
        .create_token(req(
            pod_request("agent-pod", &[b.to_string(), a.to_string()]),
            &root,
        ))
        .await?
        .into_inner();
    let mut sorted = vec![a.to_string(), b.to_string()];
    sorted.sort();
    let info = created.info.expect("token info");
    assert_eq!(info.scope, "agent-pod");
    assert_eq!(info.pod_tenant_ids, sorted);
    let shared = tokens
        .create_token(req(pod_request("agent-pod", &[]), &root))
        .await?
        .into_inner()
        .info
        .expect("token info");
    assert!(shared.pod_tenant_ids.is_empty());
    let listed = tokens
        .list_tokens(req(v1::ListTokensRequest { tenant_id: None }, &root))
        .await?
        .into_inner()
        .tokens;
    let row = listed.iter().find(|t| t.id == info.id).expect("listed");
    assert_eq!(row.pod_tenant_ids, sorted);
    let row = store
        .tokens()
        .find_by_hash(&genesis_proto::auth::token_sha256(&created.token))
        .await?
        .expect("stored");
    assert!(row.pod_tenants.admits(a) && row.pod_tenants.admits(b));
    assert!(!row.pod_tenants.admits(ghost));
    h.stop().await
}

/// Every message `consumer` holds now: (subject, body).
async fn drain(
    js: &jetstream::Context,
    stream: &str,
    consumer: &str,
) -> anyhow::Result<Vec<(String, TickMessage)>> {
    let consumer: jetstream::consumer::PullConsumer = js
        .get_stream(stream)
        .await?
        .get_consumer(consumer)
        .await
        .map_err(|e| anyhow::anyhow!("{consumer}: {e}"))?;
    let mut batch = consumer
        .fetch()
        .max_messages(100)
        .expires(Duration::from_secs(2))
        .messages()
        .await?;
    let mut got = Vec::new();
    while let Some(msg) = batch.next().await {
        let msg = msg.map_err(|e| anyhow::anyhow!("{e}"))?;
        got.push((
            msg.subject.to_string(),
            serde_json::from_slice(&msg.payload)?,
        ));
        msg.ack().await.map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(got)
}

async fn filter_of(js: &jetstream::Context, stream: &str, consumer: &str) -> String {
    js.get_stream(stream)
        .await
        .expect("stream")
        .consumer_info(consumer)
        .await
        .expect("consumer")
        .config
        .filter_subject
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_dedicated_tenants_tick_reaches_its_pools_consumer_and_never_the_shared_one(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let dedicated = store.tenants().create("dedicated").await?.id;
    let shared = store.tenants().create("shared").await?.id;
    let config = config(&pool, NATS_URL);
    // An existing deployment: one shared consumer on `<prefix>.>`.
    let before = PublisherSettings::from(&config);
    let js = publisher::connect(&before).await?;
    publisher::ensure_stream(&js, &before).await?;
    assert_eq!(
        filter_of(&js, &before.stream, &before.consumer).await,
        format!("{}.>", before.subject_prefix)
    );

    // The pool is added: the shared consumer narrows, the pool's appears.
    let mut settings = before.clone();
    settings.pools = PodPools::parse(&format!("eu={dedicated}")).map_err(anyhow::Error::msg)?;
    publisher::ensure_stream(&js, &settings).await?;
    let pool_consumer = format!("{}-eu", settings.consumer);
    let prefix = settings.subject_prefix.clone();
    assert_eq!(
        filter_of(&js, &settings.stream, &settings.consumer).await,
        format!("{prefix}.*")
    );
    assert_eq!(
        filter_of(&js, &settings.stream, &pool_consumer).await,
        format!("{prefix}.eu.*")
    );
    publisher::ensure_stream(&js, &settings).await?; // idempotent

    // Ticks of both tenants go out through the outbox.
    let mut events = Vec::new();
    for t in [dedicated, shared] {
        let inst = soa(&store, t).await?;
        for n in 0..2 {
            let e = store
                .events()
                .enqueue(
                    t,
                    inst.id,
                    AgentEventKind::OperatorMessage,
                    &json!({ "n": n }),
                    None,
                )
                .await?
                .event;
            events.push((t, e.id));
        }
    }
    let metrics = Metrics::default();
    let mut published = 0;
    while published < events.len() {
        let n = publisher::publish_batch(&store, &js, &settings, &metrics).await?;
        anyhow::ensure!(n > 0, "the outbox stopped with {published} published");
        published += n;
    }

    let on_shared = drain(&js, &settings.stream, &settings.consumer).await?;
    let on_pool = drain(&js, &settings.stream, &pool_consumer).await?;
    let ids = |got: &[(String, TickMessage)]| {
        let mut v: Vec<Uuid> = got.iter().filter_map(|(_, m)| m.event_id).collect();
        v.sort();
        v
    };
    let of = |tenant: Uuid| {
        let mut v: Vec<Uuid> = events
            .iter()
            .filter(|(t, _)| *t == tenant)
            .map(|(_, e)| *e)
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        ids(&on_shared),
        of(shared),
        "the shared pool: {on_shared:?}"
    );
    assert_eq!(ids(&on_pool), of(dedicated), "the eu pool: {on_pool:?}");
    assert!(
        on_shared
            .iter()
            .all(|(s, m)| m.tenant_id == shared && *s == format!("{prefix}.{shared}"))
    );
    assert!(
        on_pool
            .iter()
            .all(|(s, m)| m.tenant_id == dedicated && *s == format!("{prefix}.eu.{dedicated}"))
    );

    // The pool is retired while its consumer still exists: the shared
    // consumer stays narrow (taking the same subjects) rather than widen
    // over it, which the WorkQueue stream would refuse.
    publisher::ensure_stream(&js, &before).await?;
    assert_eq!(
        filter_of(&js, &settings.stream, &settings.consumer).await,
        format!("{prefix}.*")
    );
    let _ = js.delete_stream(&settings.stream).await;
    Ok(())
}
