//! The admin server end to end through `run`: the auth matrix enumerated
//! from the descriptor set, tenant isolation, RespondDecision exactly once,
//! Reset against an in-flight tick, bootstrap singleton and runtime pickup,
//! and field-named INVALID_ARGUMENT for malformed requests.

mod common;

use std::time::Duration;

use common::*;
use genesis_control::bootstrap;
use genesis_core::{AgentEventKind, AgentType, AttentionKind, TokenScope};
use genesis_proto::raw::RawCodec;
use genesis_proto::v1;
use genesis_store::NewAttentionRequest;
use serde_json::json;
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

/// Call any RPC with an empty request body (`()` encodes as no fields).
async fn raw_call(
    channel: tonic::transport::Channel,
    path: &str,
    token: Option<&str>,
) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel);
    if let Err(e) = grpc.ready().await {
        return tonic::Status::unknown(e.to_string());
    }
    let mut request = tonic::Request::new(());
    if let Some(t) = token {
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {t}").parse().expect("ascii"),
        );
    }
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    let path = http::uri::PathAndQuery::try_from(path.to_owned()).expect("path");
    match grpc.unary(request, path, codec).await {
        Ok(_) => tonic::Status::ok("answered"),
        Err(s) => s,
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn every_served_rpc_refuses_no_token_a_bad_token_and_an_agent_pod_token(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let pod = token(&store, TokenScope::AgentPod, None).await?;
    let revoked_id =
        genesis_control::tokens::mint(&store, TokenScope::Operator, None, "old", None).await?;
    store.tokens().revoke(revoked_id.1.id).await?;
    let expired = genesis_control::tokens::mint(
        &store,
        TokenScope::Operator,
        None,
        "expired",
        Some(chrono::Utc::now() - chrono::Duration::seconds(1)),
    )
    .await?
    .0;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    // Every refusal here comes from one address: the failed-auth limit
    // (tested below) would soon answer them all alike.
    cfg.auth_failures_per_minute = 0;
    let h = start(cfg).await?;
    let channel = h.channel().await?;
    let rpcs: Vec<_> = genesis_proto::convert::all_rpcs()
        .into_iter()
        .filter(|(s, _)| genesis_control::SERVED_SERVICES.contains(&s.as_str()))
        .collect();
    assert!(rpcs.len() >= 25, "{rpcs:?}");
    for (service, method) in &rpcs {
        let path = genesis_proto::convert::rpc_path(service, method);
        let none = raw_call(channel.clone(), &path, None).await;
        assert_eq!(
            none.code(),
            Code::Unauthenticated,
            "{path} without a token: {none:?}"
        );
        let bad = raw_call(
            channel.clone(),
            &path,
            Some(&genesis_proto::auth::generate_token()),
        )
        .await;
        assert_eq!(
            bad.code(),
            Code::Unauthenticated,
            "{path} with an unknown token: {bad:?}"
        );
        let old = raw_call(channel.clone(), &path, Some(&revoked_id.0)).await;
        assert_eq!(
            old.code(),
            Code::Unauthenticated,
            "{path} with a revoked token: {old:?}"
        );
        let gone = raw_call(channel.clone(), &path, Some(&expired)).await;
        assert_eq!(
            gone.code(),
            Code::Unauthenticated,
            "{path} with an expired token: {gone:?}"
        );
        let agent = raw_call(channel.clone(), &path, Some(&pod)).await;
        assert_eq!(
            agent.code(),
            Code::PermissionDenied,
            "{path} with an agent-pod token: {agent:?}"
        );
    }
    h.stop().await
}

/// A peer that spent its failed authentications is refused before its
/// token is looked up (a valid one too), with a retry hint; health and
/// reflection still answer it.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_peer_out_of_failed_authentications_is_refused_before_any_lookup(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let op = token(&store, TokenScope::Operator, None).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    cfg.auth_failures_per_minute = 3;
    let h = start(cfg).await?;
    let channel = h.channel().await?;
    let path = "/genesis.v1.TenantService/ListTenants";
    let unknown = raw_call(channel.clone(), path, None).await;
    assert_eq!(unknown.code(), Code::Unauthenticated, "{unknown:?}");
    for _ in 0..2 {
        let bad = raw_call(
            channel.clone(),
            path,
            Some(&genesis_proto::auth::generate_token()),
        )
        .await;
        assert_eq!(bad.message(), "unknown, expired or revoked token");
    }
    let held = raw_call(channel.clone(), path, Some(&op)).await;
    assert_eq!(held.code(), Code::Unauthenticated, "{held:?}");
    assert!(
        held.message()
            .starts_with("too many failed authentications from this address"),
        "{held:?}"
    );
    assert!(held.metadata().get("retry-after-ms").is_some(), "{held:?}");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await?;
    h.stop().await
}

/// Reflection answers without a token in both versions (v1alpha for older
/// grpcurl, Postman and Evans), lists exactly what control serves (never
/// the supervisor's AgentPod) and resolves no AgentPod symbol.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn reflection_v1_and_v1alpha_list_only_what_control_serves(
    pool: PgPool,
) -> anyhow::Result<()> {
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let channel = h.channel().await?;
    let mut want: Vec<String> = genesis_control::SERVED_SERVICES
        .iter()
        .chain(genesis_control::server::OPEN_SERVICES)
        .map(|s| (*s).to_owned())
        .collect();
    want.sort();
    for v1alpha in [false, true] {
        let mut listed = genesis_e2e::reflection::reflect(channel.clone(), v1alpha, None)
            .await?
            .map_err(|e| anyhow::anyhow!(e))?;
        listed.sort();
        assert_eq!(listed, want, "v1alpha: {v1alpha}");
        let found = genesis_e2e::reflection::reflect(
            channel.clone(),
            v1alpha,
            Some("genesis.v1.TenantService"),
        )
        .await?;
        assert!(found.is_ok(), "v1alpha: {v1alpha}: {found:?}");
        for hidden in ["genesis.v1.AgentPod", "genesis.v1.AgentPod.ClaimTick"] {
            let refused =
                genesis_e2e::reflection::reflect(channel.clone(), v1alpha, Some(hidden)).await?;
            assert!(
                matches!(&refused, Err(e) if e.starts_with("NotFound")),
                "{hidden} resolved (v1alpha: {v1alpha}): {refused:?}"
            );
        }
    }
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_operator_of_one_tenant_cannot_reach_another_tenants_objects(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let b_soa = soa(&store, b).await?;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let ch = h.channel().await?;
    let mut agents = v1::agent_service_client::AgentServiceClient::new(ch.clone());
    let mut tenants = v1::tenant_service_client::TenantServiceClient::new(ch.clone());
    let mut decisions = v1::decision_service_client::DecisionServiceClient::new(ch.clone());
    // Naming tenant B: PERMISSION_DENIED.
    let e = agents
        .get_agent(req(
            v1::GetAgentRequest {
                tenant_id: b.to_string(),
                instance_id: b_soa.id.to_string(),
            },
            &op_a,
        ))
        .await
        .expect_err("other tenant");
    assert_eq!(e.code(), Code::PermissionDenied);
    let e = tenants
        .get_tenant(req(
            v1::GetTenantRequest {
                tenant_id: b.to_string(),
            },
            &op_a,
        ))
        .await
        .expect_err("b");
    assert_eq!(e.code(), Code::PermissionDenied);
    // B's object under A's tenant id: NOT_FOUND (RLS hides it).
    let e = agents
        .send_message(req(
            v1::SendMessageRequest {
                tenant_id: a.to_string(),
                instance_id: b_soa.id.to_string(),
                body: "hi".into(),
            },
            &op_a,
        ))
        .await
        .expect_err("hidden");
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        store.messages().list(b, b_soa.id, 10).await?.is_empty(),
        "nothing written"
    );
    let e = decisions
        .list_decisions(req(
            v1::ListDecisionsRequest {
                tenant_id: b.to_string(),
                status: None,
            },
            &op_a,
        ))
        .await
        .expect_err("b");
    assert_eq!(e.code(), Code::PermissionDenied);
    // A tenant-bound operator cannot create tenants; ListTenants shows its own.
    let e = tenants
        .create_tenant(req(
            v1::CreateTenantRequest {
                name: "c".into(),
                standing_agents_enabled: false,
            },
            &op_a,
        ))
        .await
        .expect_err("platform only");
    assert_eq!(e.code(), Code::PermissionDenied);
    let list = tenants
        .list_tenants(req(v1::ListTenantsRequest {}, &op_a))
        .await?
        .into_inner();
    assert_eq!(
        list.tenants
            .iter()
            .map(|t| t.id.clone())
            .collect::<Vec<_>>(),
        vec![a.to_string()]
    );
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn fifty_concurrent_responds_produce_one_answered_escalation(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let ar = store
        .attention()
        .create(
            t,
            NewAttentionRequest {
                instance_id: Some(inst.id),
                kind: AttentionKind::ModeChange,
                title: "switch to Incident".into(),
                body: String::new(),
                options: json!(["approved", "rejected"]),
                metadata: json!({"source": "soa", "soaInstanceId": inst.id, "mode": "Incident"}),
            },
        )
        .await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let ch = h.channel().await?;
    let calls = (0..50).map(|i| {
        let mut c = v1::decision_service_client::DecisionServiceClient::new(ch.clone());
        let op = op.clone();
        async move {
            c.respond_decision(req(
                v1::RespondDecisionRequest {
                    tenant_id: t.to_string(),
                    decision_id: ar.id.to_string(),
                    resolution: "approved".into(),
                    notes: format!("caller {i}"),
                },
                &op,
            ))
            .await
            .map(|r| r.into_inner())
        }
    });
    let answers = futures::future::join_all(calls).await;
    let answers: Vec<_> = answers.into_iter().collect::<Result<_, _>>()?;
    assert_eq!(answers.iter().filter(|a| !a.already_resolved).count(), 1);
    let resume_ids: std::collections::BTreeSet<_> =
        answers.iter().map(|a| a.resume_event_id.clone()).collect();
    assert_eq!(
        resume_ids.len(),
        1,
        "every caller sees the same resume event"
    );
    let resumes: Vec<_> = store
        .events()
        .list(t, inst.id)
        .await?
        .into_iter()
        .filter(|e| e.event_kind == AgentEventKind::OperatorAnsweredEscalation)
        .collect();
    assert_eq!(resumes.len(), 1);
    let winner = answers
        .iter()
        .find(|a| !a.already_resolved)
        .and_then(|a| a.decision.clone())
        .expect("winner");
    assert_eq!(resumes[0].payload["resolution"], "approved");
    assert_eq!(resumes[0].payload["attentionRequestId"], ar.id.to_string());
    assert_eq!(
        resumes[0].payload["resolutionNotes"],
        winner.resolution_notes
    );
    // The approved mode change went through the chokepoint once, source approval.
    let history = store.modes().history(t, inst.id).await?;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].to_mode, "Incident");
    assert_eq!(history[0].source, genesis_core::ModeChangeSource::Approval);
    assert_eq!(history[0].attention_request_id, Some(ar.id));
    assert_eq!(
        store
            .instances()
            .get(t, inst.id)
            .await?
            .active_mode
            .as_deref(),
        Some("Incident")
    );
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn reset_is_refused_mid_tick_and_otherwise_clears_drains_and_seeds_an_opener(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::OperatorMessage,
            &json!({"n": 1}),
            None,
        )
        .await?;
    store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::OperatorMessage,
            &json!({"n": 2}),
            None,
        )
        .await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut agents = v1::agent_service_client::AgentServiceClient::new(h.channel().await?);
    // Hold the lease: a tick is in flight.
    let session = Uuid::new_v4();
    let claim = store
        .claim_tick(t, inst.id, session, Duration::from_secs(60), 5)
        .await?;
    let genesis_store::ClaimOutcome::Claimed(claim) = claim else {
        anyhow::bail!("expected a claim")
    };
    let before = queue_shape(store.events().list(t, inst.id).await?);
    let reset = |a: &mut v1::agent_service_client::AgentServiceClient<_>| {
        let r = req(
            v1::ResetAgentRequest {
                tenant_id: t.to_string(),
                instance_id: inst.id.to_string(),
            },
            &op,
        );
        let mut a = a.clone();
        async move { a.reset_agent(r).await }
    };
    let e = reset(&mut agents).await.expect_err("mid-tick");
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert_eq!(
        queue_shape(store.events().list(t, inst.id).await?),
        before,
        "nothing changed"
    );
    // Complete the tick (one turn on the ledger), then Reset succeeds.
    store
        .complete_tick(
            t,
            inst.id,
            session,
            genesis_store::TickCompletion::new(
                claim.event.id,
                genesis_store::TickDecision::Derived {
                    kind: genesis_core::AgentDecisionKind::Planned,
                    phase: genesis_core::Phase::Idle,
                    planned: true,
                },
            ),
            &genesis_core::AgentDispatcherOptions::default(),
        )
        .await?;
    assert_eq!(store.ledger().count(t, inst.id).await?, 1);
    let out = reset(&mut agents).await?.into_inner();
    assert_eq!(out.cleared_turns, 1);
    assert!(out.drained_events >= 1);
    assert_eq!(store.ledger().count(t, inst.id).await?, 0);
    let pending = store.events().pending(t, inst.id).await?;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].event_kind, AgentEventKind::AgentInitialized);
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn concurrent_bootstraps_of_one_tenant_create_one_soa(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    // Two replicas: separate stores and lock pools.
    let url = db_url(&pool);
    let mut tasks = Vec::new();
    for _ in 0..2 {
        for _ in 0..4 {
            let replica = genesis_store::Store::connect(&url, Default::default()).await?;
            let locks = sqlx::postgres::PgPoolOptions::new()
                .max_connections(2)
                .connect(&url)
                .await?;
            tasks.push(tokio::spawn(async move {
                bootstrap::ensure_soa(&replica, &locks, t, true).await
            }));
        }
    }
    let mut created = 0;
    for task in tasks {
        if task.await??.1 {
            created += 1;
        }
    }
    assert_eq!(created, 1);
    let soas = store.instances().list(t, Some(AgentType::Soa)).await?;
    assert_eq!(soas.len(), 1);
    assert_eq!(soas[0].status, genesis_core::InstanceStatus::Active);
    assert!(soas[0].in_foundational_phase(chrono::Utc::now()));
    let evs = store.events().list(t, soas[0].id).await?;
    assert_eq!(
        evs.iter().map(|e| e.event_kind).collect::<Vec<_>>(),
        vec![AgentEventKind::AgentInitialized]
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenant_enabled_at_runtime_gets_its_soa_without_a_restart(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let platform = token(&store, TokenScope::Operator, None).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.bootstrap_rescan_secs = 3600; // only the notification can find it in time
    cfg.standing_agents_idle_by_default = false;
    let h = start(cfg).await?;
    let mut tenants = v1::tenant_service_client::TenantServiceClient::new(h.channel().await?);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let created = tenants
        .create_tenant(req(
            v1::CreateTenantRequest {
                name: "late".into(),
                standing_agents_enabled: false,
            },
            &platform,
        ))
        .await?
        .into_inner();
    let t: Uuid = created.id.parse()?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        store
            .instances()
            .list(t, Some(AgentType::Soa))
            .await?
            .is_empty(),
        "off by default: no SOA"
    );
    tenants
        .set_standing_agents(req(
            v1::SetStandingAgentsRequest {
                tenant_id: t.to_string(),
                enabled: true,
            },
            &platform,
        ))
        .await?;
    let soa = eventually(Duration::from_secs(10), || async {
        Ok(store
            .instances()
            .list(t, Some(AgentType::Soa))
            .await?
            .into_iter()
            .next())
    })
    .await?;
    assert_eq!(
        soa.status,
        genesis_core::InstanceStatus::Paused,
        "idle-by-default off: Paused"
    );
    assert!(
        store.events().list(t, soa.id).await?.is_empty(),
        "a paused SOA gets no opener"
    );
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn malformed_requests_are_invalid_argument_naming_the_field(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let op = token(&store, TokenScope::Operator, None).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let ch = h.channel().await?;
    let mut agents = v1::agent_service_client::AgentServiceClient::new(ch.clone());
    let mut decisions = v1::decision_service_client::DecisionServiceClient::new(ch.clone());
    let mut configs = v1::config_service_client::ConfigServiceClient::new(ch.clone());
    let mut tokens = v1::token_service_client::TokenServiceClient::new(ch.clone());
    let (ts, is) = (t.to_string(), inst.id.to_string());
    fn field(r: Result<impl std::fmt::Debug, tonic::Status>, name: &str) {
        let e = r.expect_err("refused");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(
            e.message().starts_with(&format!("{name}:")),
            "{name}: {}",
            e.message()
        );
    }
    field(
        agents
            .get_agent(req(
                v1::GetAgentRequest {
                    tenant_id: ts.clone(),
                    instance_id: String::new(),
                },
                &op,
            ))
            .await,
        "instance_id",
    );
    field(
        agents
            .get_agent(req(
                v1::GetAgentRequest {
                    tenant_id: "nope".into(),
                    instance_id: is.clone(),
                },
                &op,
            ))
            .await,
        "tenant_id",
    );
    field(
        agents
            .list_agents(req(
                v1::ListAgentsRequest {
                    tenant_id: ts.clone(),
                    agent_type: Some("Robot".into()),
                    status: None,
                },
                &op,
            ))
            .await,
        "agent_type",
    );
    field(
        agents
            .list_modes(req(
                v1::ListModesRequest {
                    tenant_id: ts.clone(),
                    agent_type: "Soa2".into(),
                },
                &op,
            ))
            .await,
        "agent_type",
    );
    field(
        agents
            .send_message(req(
                v1::SendMessageRequest {
                    tenant_id: ts.clone(),
                    instance_id: is.clone(),
                    body: "x".repeat(16 * 1024 + 1),
                },
                &op,
            ))
            .await,
        "body",
    );
    field(
        agents
            .send_message(req(
                v1::SendMessageRequest {
                    tenant_id: ts.clone(),
                    instance_id: is.clone(),
                    body: "  ".into(),
                },
                &op,
            ))
            .await,
        "body",
    );
    field(
        agents
            .set_mode(req(
                v1::SetModeRequest {
                    tenant_id: ts.clone(),
                    instance_id: is.clone(),
                    mode: "Cadence".into(),
                },
                &op,
            ))
            .await,
        "mode",
    );
    field(
        agents
            .get_ledger(req(
                v1::GetLedgerRequest {
                    tenant_id: ts.clone(),
                    instance_id: is.clone(),
                    limit: 501,
                    before: None,
                },
                &op,
            ))
            .await,
        "limit",
    );
    field(
        agents
            .raise_redactor_signal(req(
                v1::RaiseRedactorSignalRequest {
                    tenant_id: ts.clone(),
                    call_site_id: "Agent:Planning".into(),
                    signal_kind: "Shout".into(),
                    note: String::new(),
                },
                &op,
            ))
            .await,
        "signal_kind",
    );
    field(
        decisions
            .respond_decision(req(
                v1::RespondDecisionRequest {
                    tenant_id: ts.clone(),
                    decision_id: "x".into(),
                    resolution: "approved".into(),
                    notes: String::new(),
                },
                &op,
            ))
            .await,
        "decision_id",
    );
    field(
        configs
            .set_config(req(
                v1::SetConfigRequest {
                    tenant_id: Some(ts.clone()),
                    key: "k".into(),
                    value: "v".into(),
                    scope: "galaxy".into(),
                },
                &op,
            ))
            .await,
        "scope",
    );
    field(
        tokens
            .create_token(req(
                v1::CreateTokenRequest {
                    scope: "root".into(),
                    tenant_id: None,
                    label: String::new(),
                    ttl_seconds: None,
                    pod_tenant_ids: vec![],
                },
                &op,
            ))
            .await,
        "scope",
    );
    field(
        tokens
            .create_token(req(
                v1::CreateTokenRequest {
                    scope: "operator".into(),
                    tenant_id: None,
                    label: String::new(),
                    ttl_seconds: Some(0),
                    pod_tenant_ids: vec![],
                },
                &op,
            ))
            .await,
        "ttl_seconds",
    );
    // Nothing was written by any of them.
    assert!(store.messages().list(t, inst.id, 10).await?.is_empty());
    assert!(store.events().list(t, inst.id).await?.is_empty());
    assert!(store.modes().history(t, inst.id).await?.is_empty());
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenant_over_its_rate_is_refused_with_a_retry_hint_and_others_are_not(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let soa_a = soa(&store, a).await?;
    let soa_b = soa(&store, b).await?;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    // Slow refill so the test's own pace never earns a token back.
    cfg.enqueue_rate_per_sec = 0.01;
    cfg.enqueue_rate_burst = 2.0;
    cfg.admin_rate_per_sec = 0.01;
    cfg.admin_rate_burst = 6.0;
    let h = start(cfg).await?;
    let mut agents = v1::agent_service_client::AgentServiceClient::new(h.channel().await?);
    let send = |t: Uuid, i: Uuid, tok: &str, body: &str| {
        req(
            v1::SendMessageRequest {
                tenant_id: t.to_string(),
                instance_id: i.to_string(),
                body: body.into(),
            },
            tok,
        )
    };
    agents.send_message(send(a, soa_a.id, &op_a, "one")).await?;
    agents.send_message(send(a, soa_a.id, &op_a, "two")).await?;
    let e = agents
        .send_message(send(a, soa_a.id, &op_a, "three"))
        .await
        .expect_err("the enqueue burst is spent");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("retry in"), "{}", e.message());
    assert!(e.metadata().get("retry-after-ms").is_some());
    assert_eq!(
        store.messages().list(a, soa_a.id, 10).await?.len(),
        2,
        "the refused message wrote nothing"
    );
    assert_eq!(store.events().list(a, soa_a.id).await?.len(), 2);
    // Tenant B has buckets of its own.
    agents
        .send_message(send(b, soa_b.id, &op_b, "b one"))
        .await?;
    // Reads draw from the admin bucket only: A has 6 - 3 = 3 left.
    let list = |tok: &str, t: Uuid| {
        req(
            v1::ListAgentsRequest {
                tenant_id: t.to_string(),
                ..Default::default()
            },
            tok,
        )
    };
    for _ in 0..3 {
        agents.list_agents(list(&op_a, a)).await?;
    }
    let e = agents
        .list_agents(list(&op_a, a))
        .await
        .expect_err("the admin burst is spent");
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(e.message().contains("admin calls"), "{}", e.message());
    agents.list_agents(list(&op_b, b)).await?;
    h.stop().await
}

#[test]
fn every_enqueue_method_names_a_served_rpc() {
    let served: Vec<String> = genesis_proto::convert::all_rpcs()
        .iter()
        .map(|(s, m)| genesis_proto::convert::rpc_path(s, m))
        .collect();
    for m in genesis_control::limits::ENQUEUE_METHODS {
        assert!(served.iter().any(|p| p == m), "{m} is not an RPC");
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_deploy_level_gate_off_bootstraps_nothing_and_refuses_starts(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    store.tenants().set_standing_agents_enabled(t, true).await?;

    // The same tenant, the deploy level off: no SOA; on: one SOA.
    let mut off = config(&pool, NATS_URL);
    off.standing_agents_enabled = false;
    let state_off =
        genesis_control::server::state(off.clone(), tokio_util::sync::CancellationToken::new())
            .await?;
    assert_eq!(bootstrap::bootstrap_all(&state_off).await?, 0);
    assert!(store.instances().list(t, None).await?.is_empty());
    let mut on = config(&pool, NATS_URL);
    on.standing_agents_enabled = true;
    let state_on =
        genesis_control::server::state(on, tokio_util::sync::CancellationToken::new()).await?;
    assert_eq!(bootstrap::bootstrap_all(&state_on).await?, 1);
    let soa_id = store.instances().list(t, None).await?[0].id;
    store
        .instances()
        .set_status(t, soa_id, genesis_core::InstanceStatus::Paused)
        .await?;

    // A served control with the deploy level off refuses to start standing agents.
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let h = start(off).await?;
    let mut agents = v1::agent_service_client::AgentServiceClient::new(h.channel().await?);
    let e = agents
        .start_agent(req(
            v1::StartAgentRequest {
                tenant_id: t.to_string(),
                instance_id: soa_id.to_string(),
            },
            &op,
        ))
        .await
        .expect_err("the gate is off");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains("standing agents are off"),
        "{}",
        e.message()
    );
    assert_eq!(
        store.instances().get(t, soa_id).await?.status,
        genesis_core::InstanceStatus::Paused,
        "nothing changed"
    );
    h.stop().await
}

/// Row counts of `tables`, in order: what a refused request must not change.
async fn row_counts(pool: &PgPool, tables: &[&str]) -> anyhow::Result<Vec<i64>> {
    let mut counts = Vec::with_capacity(tables.len());
    for table in tables {
        counts.push(genesis_store::inspect::count_rows(pool, table).await?);
    }
    Ok(counts)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn length_delimited(field: u32, body: &[u8], out: &mut Vec<u8>) {
    varint(u64::from(field) << 3 | 2, out);
    varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// The request of `method` with only its tenant set to `tenant`: the
/// `tenant_id` field, or the `tenant_id` of a message field (the Windows
/// lane's `session`); empty when the request names no tenant.
fn tenant_only_request(
    fds: &prost_types::FileDescriptorSet,
    service: &str,
    method: &str,
    tenant: &str,
) -> Vec<u8> {
    let messages: Vec<&prost_types::DescriptorProto> = fds
        .file
        .iter()
        .filter(|f| f.package() == "genesis.v1")
        .flat_map(|f| f.message_type.iter())
        .collect();
    let by_name = |full: &str| {
        let short = full.rsplit('.').next().unwrap_or(full);
        messages.iter().find(|m| m.name() == short).copied()
    };
    let input = fds
        .file
        .iter()
        .flat_map(|f| f.service.iter().map(move |s| (f.package(), s)))
        .find(|(p, s)| format!("{p}.{}", s.name()) == service)
        .and_then(|(_, s)| s.method.iter().find(|m| m.name() == method))
        .map(|m| m.input_type().to_owned())
        .unwrap_or_default();
    let Some(msg) = by_name(&input) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(f) = msg.field.iter().find(|f| f.name() == "tenant_id") {
        length_delimited(f.number() as u32, tenant.as_bytes(), &mut out);
        return out;
    }
    for f in &msg.field {
        if let Some(inner) = f.type_name.as_deref().and_then(by_name)
            && let Some(t) = inner.field.iter().find(|x| x.name() == "tenant_id")
        {
            let mut body = Vec::new();
            length_delimited(t.number() as u32, tenant.as_bytes(), &mut body);
            length_delimited(f.number() as u32, &body, &mut out);
            return out;
        }
    }
    out
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn every_served_rpc_aimed_at_another_tenant_is_refused(pool: PgPool) -> anyhow::Result<()> {
    use tonic_prost::prost::Message as _;
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    cfg.admin_rate_per_sec = 0.0;
    cfg.enqueue_rate_per_sec = 0.0;
    let h = start(cfg).await?;
    let channel = h.channel().await?;
    let fds = prost_types::FileDescriptorSet::decode(genesis_proto::FILE_DESCRIPTOR_SET)?;
    let tables = [
        "agent_instances",
        "agent_event_queue",
        "agent_messages",
        "attention_requests",
        "system_configs",
        "api_tokens",
        "tenants",
    ];
    let before = row_counts(&pool, &tables).await?;
    // RPCs that name no tenant and read platform-wide data every operator
    // may see (the price list).
    let open_reads = ["/genesis.v1.LlmService/ListPricing"];
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (service, method) in genesis_proto::convert::all_rpcs()
        .into_iter()
        .filter(|(s, _)| genesis_control::SERVED_SERVICES.contains(&s.as_str()))
    {
        let path = genesis_proto::convert::rpc_path(&service, &method);
        let body = tenant_only_request(&fds, &service, &method, &b.to_string());
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready().await?;
        let mut request = tonic::Request::new(body);
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {op_a}").parse()?);
        let result = grpc
            .unary(
                request,
                http::uri::PathAndQuery::try_from(path.clone())?,
                RawCodec,
            )
            .await;
        checked += 1;
        match result {
            Err(s) if matches!(s.code(), Code::PermissionDenied | Code::NotFound) => {}
            Ok(_) if open_reads.contains(&path.as_str()) => {}
            // ListTenants names no tenant: a tenant-bound caller gets its own.
            Ok(r) if path == "/genesis.v1.TenantService/ListTenants" => {
                let body = String::from_utf8_lossy(r.get_ref()).into_owned();
                if body.contains(&b.to_string()) || !body.contains(&a.to_string()) {
                    wrong.push(format!("{path}: listed other than the caller's own tenant"));
                }
            }
            Ok(_) => wrong.push(format!("{path}: answered OK")),
            Err(s) => wrong.push(format!("{path}: {:?} {}", s.code(), s.message())),
        }
    }
    assert!(checked >= 60, "only {checked} RPCs enumerated");
    assert!(
        wrong.is_empty(),
        "RPCs not refusing tenant B to A's operator:\n{}",
        wrong.join("\n")
    );
    let after = row_counts(&pool, &tables).await?;
    assert_eq!(before, after, "nothing was written");
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn lifecycle_mode_decision_config_feature_and_token_rpcs_do_what_they_say(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    store.tenants().set_standing_agents_enabled(t, true).await?;
    let inst = soa(&store, t).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let root = token(&store, TokenScope::Operator, None).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let ch = h.channel().await?;
    let mut agents = v1::agent_service_client::AgentServiceClient::new(ch.clone());
    let ids = || (t.to_string(), inst.id.to_string());

    // Stop, then Start: status flips and Start seeds an AgentInitialized.
    let (tenant_id, instance_id) = ids();
    let stopped = agents
        .stop_agent(req(
            v1::StopAgentRequest {
                tenant_id,
                instance_id,
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(stopped.status, "paused");
    let (tenant_id, instance_id) = ids();
    let started = agents
        .start_agent(req(
            v1::StartAgentRequest {
                tenant_id,
                instance_id,
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(started.status, "active");
    assert!(
        store
            .events()
            .list(t, inst.id)
            .await?
            .iter()
            .any(|e| e.event_kind == AgentEventKind::AgentInitialized),
        "Start seeds the opener"
    );

    // SetMode: applied through the chokepoint, audited with source ui.
    let (tenant_id, instance_id) = ids();
    let set = agents
        .set_mode(req(
            v1::SetModeRequest {
                tenant_id,
                instance_id,
                mode: "Housekeeping".into(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(
        set.instance.map(|i| i.active_mode).as_deref(),
        Some("Housekeeping")
    );
    let audit = store.modes().history(t, inst.id).await?;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].source, genesis_core::ModeChangeSource::Ui);
    assert_eq!(audit[0].id.to_string(), set.mode_change_event_id);

    // GetDecision returns the request with its SOA-origin metadata.
    let ar = store
        .attention()
        .create(
            t,
            NewAttentionRequest {
                instance_id: Some(inst.id),
                kind: AttentionKind::Decision,
                title: "pick".into(),
                body: String::new(),
                options: json!(["a"]),
                metadata: json!({"source": "soa", "soaInstanceId": inst.id}),
            },
        )
        .await?;
    let mut decisions = v1::decision_service_client::DecisionServiceClient::new(ch.clone());
    let d = decisions
        .get_decision(req(
            v1::GetDecisionRequest {
                tenant_id: t.to_string(),
                decision_id: ar.id.to_string(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!((d.title.as_str(), d.status.as_str()), ("pick", "open"));
    let meta: serde_json::Value = serde_json::from_str(&d.metadata_json)?;
    assert_eq!(meta["soaInstanceId"], inst.id.to_string());

    // Config: a tenant value over the global one, read back and listed.
    let mut configs = v1::config_service_client::ConfigServiceClient::new(ch.clone());
    configs
        .set_config(req(
            v1::SetConfigRequest {
                tenant_id: None,
                key: "AgentDispatcher:TickMaxTurns".into(),
                value: "9".into(),
                scope: "global".into(),
            },
            &root,
        ))
        .await?;
    configs
        .set_config(req(
            v1::SetConfigRequest {
                tenant_id: Some(t.to_string()),
                key: "AgentDispatcher:TickMaxTurns".into(),
                value: "4".into(),
                scope: "tenant".into(),
            },
            &op,
        ))
        .await?;
    let got = configs
        .get_config(req(
            v1::GetConfigRequest {
                tenant_id: Some(t.to_string()),
                key: "AgentDispatcher:TickMaxTurns".into(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!((got.value.as_str(), got.scope.as_str()), ("4", "tenant"));
    let listed = configs
        .list_config(req(
            v1::ListConfigRequest {
                tenant_id: Some(t.to_string()),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert!(listed.entries.iter().any(|e| e.value == "4"), "{listed:?}");
    // A bad value is refused naming the key, and changes nothing.
    let e = configs
        .set_config(req(
            v1::SetConfigRequest {
                tenant_id: Some(t.to_string()),
                key: "AgentDispatcher:TickMaxTurns".into(),
                value: "many".into(),
                scope: "tenant".into(),
            },
            &op,
        ))
        .await
        .expect_err("not a number");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert_eq!(
        store
            .config()
            .get(Some(t), "AgentDispatcher:TickMaxTurns")
            .await?,
        Some("4".to_owned())
    );

    // SetFeature: the tenant's flag flips (platform token).
    let mut tenants = v1::tenant_service_client::TenantServiceClient::new(ch.clone());
    let flagged = tenants
        .set_feature(req(
            v1::SetFeatureRequest {
                tenant_id: t.to_string(),
                name: "windows-pool".into(),
                enabled: true,
            },
            &root,
        ))
        .await?
        .into_inner();
    assert_eq!(flagged.features.get("windows-pool"), Some(&true));

    // Tokens: create (shown once), list, revoke; the revoked token is refused.
    let mut tokens = v1::token_service_client::TokenServiceClient::new(ch.clone());
    let created = tokens
        .create_token(req(
            v1::CreateTokenRequest {
                scope: "operator".into(),
                tenant_id: Some(t.to_string()),
                label: "ci".into(),
                ttl_seconds: Some(3600),
                pod_tenant_ids: vec![],
            },
            &op,
        ))
        .await?
        .into_inner();
    assert!(genesis_proto::auth::is_well_formed_token(&created.token));
    let info = created.info.expect("token info");
    let list = tokens
        .list_tokens(req(
            v1::ListTokensRequest {
                tenant_id: Some(t.to_string()),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert!(
        list.tokens
            .iter()
            .any(|x| x.id == info.id && x.label == "ci")
    );
    agents
        .list_agents(req(
            v1::ListAgentsRequest {
                tenant_id: t.to_string(),
                ..Default::default()
            },
            &created.token,
        ))
        .await?;
    tokens
        .revoke_token(req(
            v1::RevokeTokenRequest {
                token_id: info.id.clone(),
                tenant_id: Some(t.to_string()),
            },
            &op,
        ))
        .await?;
    let e = agents
        .list_agents(req(
            v1::ListAgentsRequest {
                tenant_id: t.to_string(),
                ..Default::default()
            },
            &created.token,
        ))
        .await
        .expect_err("revoked");
    assert_eq!(e.code(), Code::Unauthenticated);

    // Health: grpc.health.v1 needs no token and says SERVING; /healthz is up.
    let mut health = tonic_health::pb::health_client::HealthClient::new(ch.clone());
    let s = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "genesis.v1.AgentService".into(),
        })
        .await?
        .into_inner();
    assert_eq!(
        s.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    let body = reqwest::get(format!("http://{}/healthz", h.http)).await?;
    assert_eq!(body.status(), 200);
    assert_eq!(body.text().await?, "ok");
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn thousands_of_malformed_requests_get_precise_refusals_and_write_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    use rand::{Rng as _, SeedableRng as _};
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    soa(&store, t).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    cfg.admin_rate_per_sec = 0.0;
    cfg.enqueue_rate_per_sec = 0.0;
    let h = start(cfg).await?;
    let channel = h.channel().await?;
    let tables = [
        "tenants",
        "agent_instances",
        "agent_event_queue",
        "agent_messages",
        "attention_requests",
        "system_configs",
        "api_tokens",
        "constitution_rules",
        "knowledge_documents",
        "missions",
        "coding_tasks",
        "llm_presets",
        "llm_pricing",
    ];
    // The bootstrap loop seeds the tenant's Default preset on its own; let
    // it finish so only the requests below could change a count.
    let mut seeded = false;
    for _ in 0..100 {
        let n: i64 = genesis_store::inspect::count_default_seeds(&pool, t).await?;
        if n > 0 {
            seeded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seeded, "the Default preset was never seeded");
    let before = row_counts(&pool, &tables).await?;
    let rpcs: Vec<String> = genesis_proto::convert::all_rpcs()
        .into_iter()
        .filter(|(s, _)| genesis_control::SERVED_SERVICES.contains(&s.as_str()))
        .map(|(s, m)| genesis_proto::convert::rpc_path(&s, &m))
        .collect();
    // Seeded, so a failure names inputs that can be replayed.
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x06e5_e515);
    let mut sent = 0;
    let mut wrong = Vec::new();
    for round in 0..30 {
        for path in &rpcs {
            // Random bytes, or a well-formed field 1 (a tenant id or name
            // in most requests) holding a non-UUID string.
            let body: Vec<u8> = if round % 2 == 0 {
                let n = rng.random_range(0..64);
                (0..n).map(|_| rng.random()).collect()
            } else {
                let junk: String = (0..rng.random_range(1..40))
                    .map(|_| char::from(rng.random_range(b'!'..=b'~')))
                    .collect();
                let mut b = vec![0x0a, junk.len() as u8];
                b.extend_from_slice(junk.as_bytes());
                b
            };
            let mut grpc = tonic::client::Grpc::new(channel.clone());
            grpc.ready().await?;
            let mut request = tonic::Request::new(body.clone());
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {op}").parse()?);
            let r = grpc
                .unary(
                    request,
                    http::uri::PathAndQuery::try_from(path.clone())?,
                    RawCodec,
                )
                .await;
            sent += 1;
            match r {
                // Reads that need no tenant may answer (the caller's own
                // tenant, the price list, the call-sites, the global config).
                Ok(_)
                    if path.ends_with("/ListTenants")
                        || path.ends_with("/ListPricing")
                        || path.ends_with("/ListSites")
                        || path.ends_with("/ListConfig") => {}
                Ok(_) => wrong.push(format!("{path} answered OK to {body:?}")),
                Err(s) => match s.code() {
                    Code::InvalidArgument
                    | Code::PermissionDenied
                    | Code::NotFound
                    | Code::FailedPrecondition => {
                        if s.message().trim().is_empty() {
                            wrong.push(format!("{path}: {:?} with no message", s.code()));
                        }
                    }
                    // tonic's own refusal of bytes that are not the request
                    // message: tonic-prost maps a prost::DecodeError to
                    // INTERNAL in its codec, before any service code runs,
                    // as the gRPC status-code table prescribes ("Error
                    // parsing request proto: INTERNAL").
                    Code::Internal
                        if s.message()
                            .starts_with("failed to decode Protobuf message: ") => {}
                    other => wrong.push(format!("{path}: {other:?} {}", s.message())),
                },
            }
        }
    }
    assert!(sent >= 1500, "only {sent} requests");
    assert!(
        wrong.is_empty(),
        "{} imprecise answers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert_eq!(
        row_counts(&pool, &tables).await?,
        before,
        "nothing was written"
    );
    // The server is still up and answering.
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await?;
    h.stop().await
}

/// The auth-matrix tests above walk the RPCs of `SERVED_SERVICES` only, so a
/// service added to the proto and the server but not to that list would
/// escape them: every service of the descriptor but the supervisor's
/// AgentPod must be in it.
#[test]
fn every_admin_service_of_the_descriptor_is_served_and_so_covered_by_the_auth_matrix() {
    let mut services: Vec<String> = genesis_proto::convert::all_rpcs()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    services.sort();
    services.dedup();
    assert!(
        services.iter().any(|s| s == "genesis.v1.AgentPod"),
        "{services:?}"
    );
    let missing: Vec<&String> = services
        .iter()
        .filter(|s| s.as_str() != "genesis.v1.AgentPod")
        .filter(|s| !genesis_control::SERVED_SERVICES.contains(&s.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "admin services outside SERVED_SERVICES: {missing:?}"
    );
    assert_eq!(services.len(), genesis_control::SERVED_SERVICES.len() + 1);
}
