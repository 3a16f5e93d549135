//! MissionService and the mode-change decision through `run` on real
//! PostgreSQL and NATS: a status change wakes the steering instance with
//! `MissionStateChanged`, a refused transition writes nothing, another
//! tenant's mission is NOT_FOUND; a `mode_change` request written the way
//! `soa_propose_mode_change` writes it (`metadata.targetMode`) is applied on
//! approval and left alone on rejection.

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
