//! MissionService and the mode-change decision through `run` on real
//! PostgreSQL and NATS: a status change wakes the steering instance with
//! `MissionStateChanged`, a refused transition writes nothing, another
//! tenant's mission is NOT_FOUND; a `mode_change` request written the way
//! `soa_propose_mode_change` writes it (`metadata.targetMode`) is applied on
//! approval and left alone on rejection; resolving a decision raised on
//! behalf of a mission, or a mission question, enqueues exactly one
//! `DecisionResolved` to the steering instance (a repeat or a racing
//! replica enqueues none), and nothing else does.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use genesis_core::{AgentEventKind, AttentionKind, ModeChangeSource, TokenScope};
use genesis_proto::v1;
use genesis_store::NewAttentionRequest;
use genesis_store::missions::{MissionStatus, NewMission};
use serde_json::json;
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

fn proposal(steering: Uuid) -> NewMission {
    NewMission {
        steering_instance_id: Some(steering),
        kind: "MissionResearch".into(),
        title: "map the failure modes".into(),
        description: "research".into(),
        metadata: json!({"source": "soa", "soaInstanceId": steering}),
    }
}

fn set(tenant: Uuid, mission: Uuid, status: &str) -> v1::SetMissionStatusRequest {
    v1::SetMissionStatusRequest {
        tenant_id: tenant.to_string(),
        mission_id: mission.to_string(),
        status: status.into(),
    }
}

async fn mission_events(
    store: &genesis_store::Store,
    tenant: Uuid,
    instance: Uuid,
) -> anyhow::Result<Vec<genesis_store::EventRow>> {
    Ok(store
        .events()
        .list(tenant, instance)
        .await?
        .into_iter()
        .filter(|e| e.event_kind == AgentEventKind::MissionStateChanged)
        .collect())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_mission_status_change_enqueues_mission_state_changed_for_the_steering_instance(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let m = store.missions().create(t, &proposal(inst.id)).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::mission_service_client::MissionServiceClient::new(h.channel().await?);

    let got = c
        .set_mission_status(req(set(t, m.id, "active"), &op))
        .await?
        .into_inner();
    assert_eq!(got.status, "active");
    assert_eq!(got.steering_instance_id, Some(inst.id.to_string()));
    let events = mission_events(&store, t, inst.id).await?;
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].payload,
        json!({"missionId": m.id, "from": "proposed", "to": "active"})
    );

    // Setting the current status again enqueues nothing.
    c.set_mission_status(req(set(t, m.id, "active"), &op))
        .await?;
    assert_eq!(mission_events(&store, t, inst.id).await?.len(), 1);

    let one = c
        .get_mission(req(
            v1::GetMissionRequest {
                tenant_id: t.to_string(),
                mission_id: m.id.to_string(),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(one.status, "active");
    let listed = c
        .list_missions(req(
            v1::ListMissionsRequest {
                tenant_id: t.to_string(),
                status: Some("active".into()),
                instance_id: Some(inst.id.to_string()),
            },
            &op,
        ))
        .await?
        .into_inner();
    assert_eq!(
        listed
            .missions
            .iter()
            .map(|m| m.id.clone())
            .collect::<Vec<_>>(),
        vec![m.id.to_string()]
    );
    let none = c
        .list_missions(req(
            v1::ListMissionsRequest {
                tenant_id: t.to_string(),
                status: Some("completed".into()),
                instance_id: None,
            },
            &op,
        ))
        .await?
        .into_inner();
    assert!(none.missions.is_empty());
    let bad = c
        .list_missions(req(
            v1::ListMissionsRequest {
                tenant_id: t.to_string(),
                status: Some("Done".into()),
                instance_id: None,
            },
            &op,
        ))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("status"), "{}", bad.message());
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_refused_mission_transition_is_failed_precondition_and_writes_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let m = store.missions().create(t, &proposal(inst.id)).await?;
    store
        .missions()
        .set_status(t, m.id, MissionStatus::Active)
        .await?;
    store
        .missions()
        .set_status(t, m.id, MissionStatus::Completed)
        .await?;
    let before = store.missions().get(t, m.id).await?;
    let events_before = queue_shape(store.events().list(t, inst.id).await?);
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::mission_service_client::MissionServiceClient::new(h.channel().await?);

    let err = c
        .set_mission_status(req(set(t, m.id, "active"), &op))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(store.missions().get(t, m.id).await?, before);
    assert_eq!(
        queue_shape(store.events().list(t, inst.id).await?),
        events_before
    );

    let err = c
        .set_mission_status(req(set(t, m.id, "finished"), &op))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("status"), "{}", err.message());
    assert_eq!(store.missions().get(t, m.id).await?, before);
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn another_tenants_mission_is_not_found_for_an_operator(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let inst_b = soa(&store, b).await?;
    let mb = store.missions().create(b, &proposal(inst_b.id)).await?;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::mission_service_client::MissionServiceClient::new(h.channel().await?);

    let get = c
        .get_mission(req(
            v1::GetMissionRequest {
                tenant_id: a.to_string(),
                mission_id: mb.id.to_string(),
            },
            &op_a,
        ))
        .await
        .unwrap_err();
    assert_eq!(get.code(), Code::NotFound);
    let set_err = c
        .set_mission_status(req(set(a, mb.id, "active"), &op_a))
        .await
        .unwrap_err();
    assert_eq!(set_err.code(), Code::NotFound);
    let listed = c
        .list_missions(req(
            v1::ListMissionsRequest {
                tenant_id: a.to_string(),
                status: None,
                instance_id: None,
            },
            &op_a,
        ))
        .await?
        .into_inner();
    assert!(listed.missions.is_empty());
    // Naming tenant B outright is refused by the token binding.
    let denied = c
        .get_mission(req(
            v1::GetMissionRequest {
                tenant_id: b.to_string(),
                mission_id: mb.id.to_string(),
            },
            &op_a,
        ))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert_eq!(
        store.missions().get(b, mb.id).await?.status,
        MissionStatus::Proposed
    );
    assert!(mission_events(&store, b, inst_b.id).await?.is_empty());
    h.stop().await
}

async fn target_mode_request(
    store: &genesis_store::Store,
    tenant: Uuid,
    instance: Uuid,
) -> anyhow::Result<genesis_store::AttentionRequest> {
    Ok(store
        .attention()
        .create(
            tenant,
            NewAttentionRequest {
                instance_id: Some(instance),
                kind: AttentionKind::ModeChange,
                title: "switch to Incident".into(),
                body: String::new(),
                options: json!(["approved", "rejected"]),
                metadata: json!({
                    "source": "soa",
                    "soaInstanceId": instance,
                    "targetMode": "Incident",
                }),
            },
        )
        .await?)
}

fn respond(tenant: Uuid, decision: Uuid, resolution: &str) -> v1::RespondDecisionRequest {
    v1::RespondDecisionRequest {
        tenant_id: tenant.to_string(),
        decision_id: decision.to_string(),
        resolution: resolution.into(),
        notes: String::new(),
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_approved_target_mode_change_switches_the_mode_through_the_chokepoint(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let mode_before = inst.active_mode.clone();
    assert_ne!(mode_before.as_deref(), Some("Incident"));
    let approved = target_mode_request(&store, t, inst.id).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::decision_service_client::DecisionServiceClient::new(h.channel().await?);

    let answer = c
        .respond_decision(req(respond(t, approved.id, "approved"), &op))
        .await?
        .into_inner();
    assert!(!answer.already_resolved);
    assert_eq!(
        store
            .instances()
            .get(t, inst.id)
            .await?
            .active_mode
            .as_deref(),
        Some("Incident")
    );
    let history = store.modes().history(t, inst.id).await?;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].to_mode, "Incident");
    assert_eq!(history[0].source, ModeChangeSource::Approval);
    assert_eq!(history[0].attention_request_id, Some(approved.id));
    let resumes: Vec<_> = store
        .events()
        .list(t, inst.id)
        .await?
        .into_iter()
        .filter(|e| e.event_kind == AgentEventKind::OperatorAnsweredEscalation)
        .collect();
    assert_eq!(resumes.len(), 1);
    assert_eq!(resumes[0].attention_request_id, Some(approved.id));
    assert_eq!(answer.resume_event_id, Some(resumes[0].id.to_string()));
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_rejected_target_mode_change_leaves_the_mode_and_writes_no_audit_row(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let rejected = target_mode_request(&store, t, inst.id).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::decision_service_client::DecisionServiceClient::new(h.channel().await?);

    let answer = c
        .respond_decision(req(respond(t, rejected.id, "rejected"), &op))
        .await?
        .into_inner();
    assert!(!answer.already_resolved);
    assert_eq!(
        store.instances().get(t, inst.id).await?.active_mode,
        inst.active_mode
    );
    assert!(store.modes().history(t, inst.id).await?.is_empty());
    h.stop().await
}

/// The `DecisionResolved` events on `instance`'s queue.
async fn decision_resolved(
    store: &genesis_store::Store,
    tenant: Uuid,
    instance: Uuid,
) -> anyhow::Result<Vec<genesis_store::EventRow>> {
    Ok(store
        .events()
        .list(tenant, instance)
        .await?
        .into_iter()
        .filter(|e| e.event_kind == AgentEventKind::DecisionResolved)
        .collect())
}

/// A decision written the way `soa_propose_decision` writes it, on behalf
/// of `mission` when one is given.
async fn soa_decision(
    store: &genesis_store::Store,
    tenant: Uuid,
    soa: Uuid,
    mission: Option<Uuid>,
) -> anyhow::Result<genesis_store::AttentionRequest> {
    let mut metadata = json!({"source": "soa", "soaInstanceId": soa.to_string()});
    if let Some(m) = mission {
        metadata["missionId"] = json!(m.to_string());
    }
    Ok(store
        .attention()
        .create(
            tenant,
            NewAttentionRequest {
                instance_id: Some(soa),
                kind: AttentionKind::Decision,
                title: "ship the EU rollout first?".into(),
                body: String::new(),
                options: json!(["yes", "no"]),
                metadata,
            },
        )
        .await?)
}

/// A mission agent's question, written the way `mission_ask_user` writes it.
async fn mission_question(
    store: &genesis_store::Store,
    tenant: Uuid,
    asker: Uuid,
) -> anyhow::Result<genesis_store::AttentionRequest> {
    Ok(store
        .attention()
        .create(
            tenant,
            NewAttentionRequest {
                instance_id: Some(asker),
                kind: AttentionKind::MissionQuestion,
                title: "EU or US first?".into(),
                body: String::new(),
                options: json!([]),
                metadata: json!({
                    "source": "mission",
                    "missionInstanceId": asker.to_string(),
                    "question": "EU or US first?",
                    "context": "",
                }),
            },
        )
        .await?)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn resolving_a_missions_decision_enqueues_one_decision_resolved_to_the_steering_soa(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let m = store.missions().create(t, &proposal(inst.id)).await?;
    let d = soa_decision(&store, t, inst.id, Some(m.id)).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::decision_service_client::DecisionServiceClient::new(h.channel().await?);
    assert!(decision_resolved(&store, t, inst.id).await?.is_empty());

    let mut answer = respond(t, d.id, "yes");
    answer.notes = "then the US a week later".into();
    let first = c.respond_decision(req(answer, &op)).await?.into_inner();
    assert!(!first.already_resolved);
    let events = decision_resolved(&store, t, inst.id).await?;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0].payload,
        json!({
            "attentionRequestId": d.id,
            "kind": "decision",
            "missionId": m.id,
            "raisedByInstanceId": inst.id,
            "resolution": "yes",
            "resolutionNotes": "then the US a week later",
        })
    );
    assert_eq!(events[0].attention_request_id, None);
    assert!(events[0].visible_at <= chrono::Utc::now(), "visible now");
    // The raiser's own resume is still the one OperatorAnsweredEscalation.
    assert!(first.resume_event_id.is_some());

    // A repeat answers as a repeat does (already resolved, the stored
    // answer, the same resume) and signals nothing more.
    let again = c
        .respond_decision(req(respond(t, d.id, "no"), &op))
        .await?
        .into_inner();
    assert!(again.already_resolved);
    assert_eq!(again.resume_event_id, first.resume_event_id);
    assert_eq!(again.decision.map(|d| d.resolution), Some("yes".into()));
    assert_eq!(
        queue_shape(decision_resolved(&store, t, inst.id).await?),
        queue_shape(events.clone())
    );

    // The outbox publishes it like any other due event (its genesis_due
    // notice committed with the resolution).
    let id = events[0].id;
    eventually(std::time::Duration::from_secs(10), || {
        let store = store.clone();
        async move {
            let e = decision_resolved(&store, t, inst.id).await?;
            Ok(e.iter()
                .any(|e| e.id == id && e.published_at.is_some())
                .then_some(()))
        }
    })
    .await?;
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn two_control_replicas_racing_to_resolve_enqueue_exactly_one_decision_resolved(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let m = store.missions().create(t, &proposal(inst.id)).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let (mut ca, mut cb) = (config(&pool, NATS_URL), config(&pool, NATS_URL));
    ca.auto_bootstrap = false;
    cb.auto_bootstrap = false;
    let (ha, hb) = (start(ca).await?, start(cb).await?);
    let mut a = v1::decision_service_client::DecisionServiceClient::new(ha.channel().await?);
    let mut b = v1::decision_service_client::DecisionServiceClient::new(hb.channel().await?);

    let mut decisions = Vec::new();
    for _ in 0..5 {
        decisions.push(soa_decision(&store, t, inst.id, Some(m.id)).await?.id);
    }
    for &d in &decisions {
        let (ra, rb) = tokio::join!(
            a.respond_decision(req(respond(t, d, "yes"), &op)),
            b.respond_decision(req(respond(t, d, "no"), &op)),
        );
        let (ra, rb) = (ra?.into_inner(), rb?.into_inner());
        assert_ne!(
            ra.already_resolved, rb.already_resolved,
            "exactly one replica resolved {d}"
        );
        assert_eq!(ra.resume_event_id, rb.resume_event_id);
    }
    let events = decision_resolved(&store, t, inst.id).await?;
    for d in &decisions {
        let stored = store.attention().get(t, *d).await?.resolution;
        let mine: Vec<_> = events
            .iter()
            .filter(|e| e.payload["attentionRequestId"] == json!(d))
            .collect();
        assert_eq!(mine.len(), 1, "one DecisionResolved for {d}: {events:?}");
        // It carries the winner's answer, the one stored.
        assert_eq!(mine[0].payload["resolution"], json!(stored));
    }
    assert_eq!(events.len(), decisions.len());
    ha.stop().await?;
    hb.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn answering_a_mission_question_signals_the_tenants_soa_and_resumes_the_asker(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let mut new = genesis_store::NewInstance::foundational(
        genesis_core::AgentType::MissionResearch,
        genesis_core::InstanceStatus::Active,
    );
    new.seed_initialized = false;
    let asker = store.instances().create(t, new).await?.id;
    let q = mission_question(&store, t, asker).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::decision_service_client::DecisionServiceClient::new(h.channel().await?);

    let answer = c
        .respond_decision(req(respond(t, q.id, "EU first"), &op))
        .await?
        .into_inner();
    assert!(!answer.already_resolved);
    let events = decision_resolved(&store, t, inst.id).await?;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0].payload,
        json!({
            "attentionRequestId": q.id,
            "kind": "mission_question",
            "missionId": null,
            "raisedByInstanceId": asker,
            "resolution": "EU first",
            "resolutionNotes": null,
        })
    );
    // The asker gets its answer as its resume, not as the steering signal.
    let asker_events = store.events().list(t, asker).await?;
    assert_eq!(
        asker_events
            .iter()
            .map(|e| e.event_kind)
            .collect::<Vec<_>>(),
        vec![AgentEventKind::OperatorAnsweredEscalation]
    );
    assert_eq!(answer.resume_event_id, Some(asker_events[0].id.to_string()));
    c.respond_decision(req(respond(t, q.id, "US first"), &op))
        .await?;
    assert_eq!(decision_resolved(&store, t, inst.id).await?.len(), 1);
    h.stop().await
}

/// DecisionResolved is an orchestration signal about steered work (spec
/// §3.1): a decision no mission concerns, another kind of request naming a
/// mission, a request no agent raised and a mission whose steering
/// instance is gone signal nothing; refused answers signal nothing either.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn decisions_no_mission_concerns_and_refused_answers_enqueue_no_decision_resolved(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("a").await?.id;
    let inst = soa(&store, t).await?;
    let m = store.missions().create(t, &proposal(inst.id)).await?;
    let unsteered = store
        .missions()
        .create(
            t,
            &NewMission {
                steering_instance_id: None,
                ..proposal(inst.id)
            },
        )
        .await?;
    let plain = soa_decision(&store, t, inst.id, None).await?;
    let orphan = soa_decision(&store, t, inst.id, Some(unsteered.id)).await?;
    let mode_change = target_mode_request(&store, t, inst.id).await?;
    let no_agent = store
        .attention()
        .create(
            t,
            NewAttentionRequest {
                instance_id: None,
                kind: AttentionKind::Decision,
                title: "no agent raised this".into(),
                body: String::new(),
                options: json!([]),
                metadata: json!({"missionId": m.id.to_string()}),
            },
        )
        .await?;
    let b = store.tenants().create("b").await?.id;
    let inst_b = soa(&store, b).await?;
    let mb = store.missions().create(b, &proposal(inst_b.id)).await?;
    let db = soa_decision(&store, b, inst_b.id, Some(mb.id)).await?;
    let op = token(&store, TokenScope::Operator, Some(t)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut c = v1::decision_service_client::DecisionServiceClient::new(h.channel().await?);

    for d in [plain.id, orphan.id, no_agent.id] {
        let r = c
            .respond_decision(req(respond(t, d, "yes"), &op))
            .await?
            .into_inner();
        assert!(!r.already_resolved, "{d}");
    }
    c.respond_decision(req(respond(t, mode_change.id, "rejected"), &op))
        .await?;
    assert!(decision_resolved(&store, t, inst.id).await?.is_empty());

    // Refused: a malformed id, an unknown one, another tenant's decision
    // through this tenant, and this token aimed at the other tenant.
    let mut bad = respond(t, plain.id, "yes");
    bad.decision_id = "not-a-uuid".into();
    let e = c.respond_decision(req(bad, &op)).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("decision_id"), "{}", e.message());
    let e = c
        .respond_decision(req(respond(t, Uuid::new_v4(), "yes"), &op))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = c
        .respond_decision(req(respond(t, db.id, "yes"), &op))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = c
        .respond_decision(req(respond(b, db.id, "yes"), &op))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(decision_resolved(&store, b, inst_b.id).await?.is_empty());
    assert_eq!(
        store.attention().get(b, db.id).await?.status,
        genesis_core::AttentionStatus::Open
    );
    h.stop().await
}
