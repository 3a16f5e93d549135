//! AgentService paths that need the whole process through `run`: the live
//! WatchTurns stream and its tenant filter, StartCompliance/StopCompliance,
//! RaiseRedactorSignal and the Paused redactor, `/metrics`, and graceful
//! shutdown with an open stream. Real PostgreSQL and NATS only.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use genesis_core::{
    AgentDecisionKind, AgentDispatcherOptions, AgentEventKind, AgentType, InstanceStatus,
    MessageDirection, Phase, TokenScope,
};
use genesis_proto::v1;
use genesis_store::{ClaimOutcome, StoreError, TickCompletion, TickDecision};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use uuid::Uuid;

type Events = tonic::Streaming<v1::WatchTurnsEvent>;

async fn watch(h: &Harness, tenant: Uuid, token: &str) -> anyhow::Result<Events> {
    let mut c = v1::agent_service_client::AgentServiceClient::new(h.channel().await?);
    Ok(c.watch_turns(req(
        v1::WatchTurnsRequest {
            tenant_id: tenant.to_string(),
            instance_id: None,
        },
        token,
    ))
    .await?
    .into_inner())
}

async fn next(stream: &mut Events, within: Duration) -> anyhow::Result<v1::WatchTurnsEvent> {
    match tokio::time::timeout(within, stream.next()).await {
        Ok(Some(item)) => Ok(item?),
        Ok(None) => anyhow::bail!("the stream ended"),
        Err(_) => anyhow::bail!("nothing streamed within {within:?}"),
    }
}

/// Run one tick of `instance` through the store's claim and complete.
async fn one_turn(
    store: &genesis_store::Store,
    tenant: Uuid,
    instance: Uuid,
) -> anyhow::Result<genesis_store::CompletedTurn> {
    store
        .events()
        .enqueue(
            tenant,
            instance,
            AgentEventKind::AgentTick,
            &serde_json::json!({}),
            None,
        )
        .await?;
    let claim = match store
        .claim_tick(tenant, instance, Uuid::new_v4(), Duration::from_secs(60), 5)
        .await?
    {
        ClaimOutcome::Claimed(c) => *c,
        other => anyhow::bail!("expected a claim, got {other:?}"),
    };
    let completion = TickCompletion::new(
        claim.event.id,
        TickDecision::Derived {
            kind: AgentDecisionKind::Planned,
            phase: Phase::Idle,
            planned: true,
        },
    );
    Ok(store
        .complete_tick(
            tenant,
            instance,
            claim.session,
            completion,
            &AgentDispatcherOptions::default(),
        )
        .await?)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn watch_turns_streams_a_turn_and_a_message_to_its_tenant_only(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let inst_a = soa(&store, a).await?;
    let inst_b = soa(&store, b).await?;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut watch_a = watch(&h, a, &op_a).await?;
    let mut watch_b = watch(&h, b, &op_b).await?;
    // Let the hub's LISTEN settle before anything is committed.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let turn = one_turn(&store, a, inst_a.id).await?;
    let msg = store
        .messages()
        .append(
            a,
            inst_a.id,
            MessageDirection::AgentToOperator,
            "status: all green",
        )
        .await?;

    use v1::watch_turns_event::Event;
    match next(&mut watch_a, Duration::from_secs(10)).await?.event {
        Some(Event::Turn(t)) => {
            assert_eq!(t.ledger_id, turn.ledger_id.to_string());
            assert_eq!(t.tenant_id, a.to_string());
            assert_eq!(t.instance_id, inst_a.id.to_string());
            assert_eq!(t.turn_number, turn.turn_number);
        }
        other => anyhow::bail!("expected the turn first, got {other:?}"),
    }
    match next(&mut watch_a, Duration::from_secs(10)).await?.event {
        Some(Event::Message(m)) => {
            let m = m.message.unwrap();
            assert_eq!(m.id, msg.id.to_string());
            assert_eq!(m.body, "status: all green");
        }
        other => anyhow::bail!("expected the message, got {other:?}"),
    }

    // Tenant B's subscriber saw none of it: the first thing it receives is
    // B's own message, committed after A's events were delivered.
    let msg_b = store
        .messages()
        .append(b, inst_b.id, MessageDirection::AgentToOperator, "b only")
        .await?;
    match next(&mut watch_b, Duration::from_secs(10)).await?.event {
        Some(Event::Message(m)) => assert_eq!(m.message.unwrap().id, msg_b.id.to_string()),
        other => anyhow::bail!("tenant B received {other:?}"),
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(500), watch_a.next())
            .await
            .is_err(),
        "tenant A must not receive B's message"
    );

    // A subscriber naming another tenant is refused before any stream opens.
    let mut c = v1::agent_service_client::AgentServiceClient::new(h.channel().await?);
    let denied = c
        .watch_turns(req(
            v1::WatchTurnsRequest {
                tenant_id: b.to_string(),
                instance_id: None,
            },
            &op_a,
        ))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn start_compliance_creates_one_instance_and_stop_compliance_pauses_it(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::agent_service_client::AgentServiceClient::new(h.channel().await?);
    let start_req = || {
        req(
            v1::StartComplianceRequest {
                tenant_id: t.to_string(),
            },
            &op,
        )
    };
    let stop_req = || {
        req(
            v1::StopComplianceRequest {
                tenant_id: t.to_string(),
            },
            &op,
        )
    };

    // Nothing to stop yet; and with the tenant gate off nothing is created.
    let err = c.stop_compliance(stop_req()).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = c.start_compliance(start_req()).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        store
            .instances()
            .list(t, Some(AgentType::Compliance))
            .await?
            .is_empty()
    );

    store.tenants().set_standing_agents_enabled(t, true).await?;
    let first = c.start_compliance(start_req()).await?.into_inner();
    let second = c.start_compliance(start_req()).await?.into_inner();
    assert_eq!(first.id, second.id);
    assert_eq!(first.agent_type, "Compliance");
    let all = store
        .instances()
        .list(t, Some(AgentType::Compliance))
        .await?;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].status, InstanceStatus::Active);

    let stopped = c.stop_compliance(stop_req()).await?.into_inner();
    assert_eq!(stopped.id, first.id);
    assert_eq!(
        store.instances().get(t, all[0].id).await?.status,
        InstanceStatus::Paused
    );
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_redactor_signal_creates_the_paused_redactor_once_and_enqueues_each_signal(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::agent_service_client::AgentServiceClient::new(h.channel().await?);
    let signal = |kind: &str| {
        req(
            v1::RaiseRedactorSignalRequest {
                tenant_id: t.to_string(),
                call_site_id: "Agent:Planning".into(),
                signal_kind: kind.into(),
                note: "please rework".into(),
            },
            &op,
        )
    };

    let bad = c
        .raise_redactor_signal(signal("Whenever"))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("signal_kind"), "{}", bad.message());
    assert!(
        store
            .instances()
            .list(t, Some(AgentType::PromptRedactor))
            .await?
            .is_empty()
    );

    let first = c
        .raise_redactor_signal(signal("HumanRequest"))
        .await?
        .into_inner();
    let second = c
        .raise_redactor_signal(signal("HumanRequest"))
        .await?
        .into_inner();
    assert!(first.instance_created);
    assert!(!second.instance_created);
    assert_eq!(first.instance_id, second.instance_id);
    assert_ne!(first.event_id, second.event_id);

    let redactors = store
        .instances()
        .list(t, Some(AgentType::PromptRedactor))
        .await?;
    assert_eq!(redactors.len(), 1);
    let r = &redactors[0];
    assert_eq!(r.id.to_string(), first.instance_id);
    assert_eq!(r.status, InstanceStatus::Paused);
    assert_eq!(r.call_site_id.as_deref(), Some("Agent:Planning"));
    let signals: Vec<_> = store
        .events()
        .list(t, r.id)
        .await?
        .into_iter()
        .filter(|e| e.event_kind == AgentEventKind::ExternalSignalReceived)
        .collect();
    assert_eq!(signals.len(), 2);
    assert!(
        signals
            .iter()
            .all(|e| e.payload["signalKind"] == "HumanRequest"
                && e.payload["callSiteId"] == "Agent:Planning")
    );

    // Paused: the tick supervisor refuses to claim it.
    let claim = store
        .claim_tick(t, r.id, Uuid::new_v4(), Duration::from_secs(60), 5)
        .await;
    assert!(
        matches!(claim, Err(StoreError::FailedPrecondition { ref reason }) if reason.contains("paused")),
        "{claim:?}"
    );
    assert!(
        store
            .events()
            .list(t, r.id)
            .await?
            .iter()
            .all(|e| e.consumed_at.is_none())
    );
    h.stop().await
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out)).await??;
    Ok(out)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn metrics_are_prometheus_text_counting_rpcs(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::agent_service_client::AgentServiceClient::new(h.channel().await?);
    c.list_agents(req(
        v1::ListAgentsRequest {
            tenant_id: t.to_string(),
            ..Default::default()
        },
        &op,
    ))
    .await?;
    let body = http_get(h.http, "/metrics").await?;
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(
        body.to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{body}"
    );
    assert!(body.contains("# TYPE genesis_rpc_total counter"), "{body}");
    assert!(
        body.contains(
            "genesis_rpc_total{method=\"/genesis.v1.AgentService/ListAgents\",code=\"Ok\"} 1"
        ),
        "{body}"
    );
    let missing = http_get(h.http, "/no-such-path").await?;
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");

    // Unauthenticated calls to made-up paths are refused before routing and
    // all count under `unknown`: no path a caller invents becomes a label.
    for path in [
        "/evil.Probe/A1",
        "/evil.Probe/B2",
        "/genesis.v1.AgentService/NoSuchMethod",
    ] {
        let mut grpc = tonic::client::Grpc::new(h.channel().await?);
        grpc.ready().await?;
        let codec = tonic_prost::ProstCodec::<(), ()>::default();
        let err = grpc
            .unary(
                tonic::Request::new(()),
                http::uri::PathAndQuery::from_static(path),
                codec,
            )
            .await
            .expect_err("no token");
        assert_eq!(err.code(), tonic::Code::Unauthenticated, "{path}: {err:?}");
    }
    let body = http_get(h.http, "/metrics").await?;
    assert!(
        body.contains("genesis_rpc_total{method=\"unknown\",code=\"Unauthenticated\"} 3"),
        "{body}"
    );
    assert!(!body.contains("evil"), "{body}");
    assert!(!body.contains("NoSuchMethod"), "{body}");
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn cancelling_the_token_ends_run_and_an_open_watch_stream(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut stream = watch(&h, t, &op).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let started = std::time::Instant::now();
    h.shutdown.cancel();
    let result = tokio::time::timeout(Duration::from_secs(5), h.handle).await;
    let joined = result.map_err(|_| anyhow::anyhow!("run did not return within 5s"))?;
    joined??;
    assert!(started.elapsed() < Duration::from_secs(5));
    let end = tokio::time::timeout(Duration::from_secs(2), stream.next()).await;
    match end {
        Ok(None) | Ok(Some(Err(_))) => {}
        Ok(Some(Ok(ev))) => anyhow::bail!("the stream delivered {ev:?} after shutdown"),
        Err(_) => anyhow::bail!("the WatchTurns stream stayed open after shutdown"),
    }
    if let Ok(client) = async_nats::connect(NATS_URL).await {
        let _ = async_nats::jetstream::new(client)
            .delete_stream(&h.config.stream)
            .await;
    }
    Ok(())
}

/// The stream's end: the status it closed with, within `within`.
async fn closed_with(stream: &mut Events, within: Duration) -> anyhow::Result<tonic::Status> {
    match tokio::time::timeout(within, stream.next()).await {
        Ok(Some(Err(status))) => Ok(status),
        Ok(Some(Ok(ev))) => anyhow::bail!("the stream delivered {ev:?}"),
        Ok(None) => anyhow::bail!("the stream ended without a status"),
        Err(_) => anyhow::bail!("the stream stayed open for {within:?}"),
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_watch_stream_ends_unauthenticated_once_its_token_is_revoked(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let (raw, row) =
        genesis_control::tokens::mint(&store, TokenScope::Operator, Some(t), "ops", None).await?;
    let other = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    cfg.stream_recheck_secs = 1;
    let h = start(cfg).await?;
    let mut revoked = watch(&h, t, &raw).await?;
    let mut kept = watch(&h, t, &other).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(store.tokens().revoke(row.id).await?);
    let status = closed_with(&mut revoked, Duration::from_secs(5)).await?;
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert!(status.message().contains("revoked"), "{status:?}");
    // Another token's stream on the same tenant goes on.
    let still = tokio::time::timeout(Duration::from_millis(1500), kept.next()).await;
    assert!(still.is_err(), "the other stream stays open: {still:?}");
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_watch_stream_ends_at_its_tokens_expiry_not_the_next_interval(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let expires = chrono::Utc::now() + chrono::Duration::seconds(3);
    let (raw, _) = genesis_control::tokens::mint(
        &store,
        TokenScope::Operator,
        Some(t),
        "short",
        Some(expires),
    )
    .await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    assert_eq!(cfg.stream_recheck_secs, 30, "the default interval");
    let h = start(cfg).await?;
    let mut stream = watch(&h, t, &raw).await?;
    let status = closed_with(&mut stream, Duration::from_secs(10)).await?;
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert!(
        chrono::Utc::now() >= expires,
        "closed before the expiry: {status:?}"
    );
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn watch_streams_are_capped_per_token_and_tenant_and_a_closed_one_frees_its_slot(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let u = store.tenants().create("b").await?.id;
    let a = token(&store, TokenScope::Operator, Some(t)).await?;
    let b = token(&store, TokenScope::Operator, Some(t)).await?;
    let c = token(&store, TokenScope::Operator, Some(t)).await?;
    let on_u = token(&store, TokenScope::Operator, Some(u)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    cfg.streams_per_token = 2;
    cfg.streams_per_tenant = 3;
    let h = start(cfg).await?;
    let a1 = watch(&h, t, &a).await?;
    let _a2 = watch(&h, t, &a).await?;
    let refused = watch(&h, t, &a)
        .await
        .expect_err("a third stream of one token");
    let status = refused.downcast_ref::<tonic::Status>().expect("a status");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("GENESIS_STREAMS_PER_TOKEN"),
        "{status:?}"
    );
    let _b1 = watch(&h, t, &b).await?;
    let refused = watch(&h, t, &c)
        .await
        .expect_err("a fourth stream on one tenant");
    let status = refused.downcast_ref::<tonic::Status>().expect("a status");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("GENESIS_STREAMS_PER_TENANT"),
        "{status:?}"
    );
    // Another tenant is not held back by this one's streams.
    let _u1 = watch(&h, u, &on_u).await?;
    // Closing a stream frees its slot.
    drop(a1);
    eventually(Duration::from_secs(5), || async {
        Ok(watch(&h, t, &c).await.ok().map(|_| ()))
    })
    .await?;
    h.stop().await
}
