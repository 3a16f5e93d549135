//! Database tests of the missions repository: create/get/list, the status
//! change that enqueues `MissionStateChanged` in the same transaction, the
//! refused transition that writes nothing, and tenant isolation. Must never
//! mock the database.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use genesis_core::AgentEventKind;
use genesis_store::StoreError;
use genesis_store::missions::{MissionFilter, MissionStatus, NewMission};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

fn proposal(steering: Option<Uuid>, title: &str) -> NewMission {
    NewMission {
        steering_instance_id: steering,
        kind: "MissionResearch".into(),
        title: title.into(),
        description: "look into it".into(),
        metadata: json!({"source": "soa", "soaInstanceId": steering}),
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn status_change_enqueues_mission_state_changed_to_the_steering_instance(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let soa = soa(&store, t).await?;
    let m = store
        .missions()
        .create(t, &proposal(Some(soa.id), "m1"))
        .await?;
    assert_eq!(m.status, MissionStatus::Proposed);
    let change = store
        .missions()
        .set_status(t, m.id, MissionStatus::Active)
        .await?;
    assert_eq!(change.mission.status, MissionStatus::Active);
    let ev = change.event.expect("an event");
    assert_eq!(ev.instance_id, soa.id);
    assert_eq!(ev.event_kind, AgentEventKind::MissionStateChanged);
    assert_eq!(
        ev.payload,
        json!({"missionId": m.id, "from": "proposed", "to": "active"})
    );
    let events = store.events().list(t, soa.id).await?;
    assert_eq!(
        events
            .iter()
            .filter(|e| e.event_kind == AgentEventKind::MissionStateChanged)
            .count(),
        1
    );
    // The same status again: nothing changes, nothing is enqueued.
    let again = store
        .missions()
        .set_status(t, m.id, MissionStatus::Active)
        .await?;
    assert!(again.event.is_none());
    assert_eq!(store.events().list(t, soa.id).await?.len(), events.len());
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn refused_transition_is_failed_precondition_and_writes_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let soa = soa(&store, t).await?;
    let m = store
        .missions()
        .create(t, &proposal(Some(soa.id), "m1"))
        .await?;
    store
        .missions()
        .set_status(t, m.id, MissionStatus::Active)
        .await?;
    store
        .missions()
        .set_status(t, m.id, MissionStatus::Completed)
        .await?;
    let before = store.missions().get(t, m.id).await?;
    let events_before = store.events().list(t, soa.id).await?.len();
    let err = store
        .missions()
        .set_status(t, m.id, MissionStatus::Active)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::FailedPrecondition { .. }),
        "{err:?}"
    );
    assert_eq!(store.missions().get(t, m.id).await?, before);
    assert_eq!(store.events().list(t, soa.id).await?.len(), events_before);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn list_filters_and_other_tenants_missions_are_not_found(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    let soa_a = soa(&store, a).await?;
    let soa_b = soa(&store, b).await?;
    let m1 = store
        .missions()
        .create(a, &proposal(Some(soa_a.id), "m1"))
        .await?;
    let m2 = store.missions().create(a, &proposal(None, "m2")).await?;
    let mb = store
        .missions()
        .create(b, &proposal(Some(soa_b.id), "mb"))
        .await?;
    store
        .missions()
        .set_status(a, m2.id, MissionStatus::Cancelled)
        .await?;

    let all = store.missions().list(a, MissionFilter::default()).await?;
    let mut ids: Vec<_> = all.iter().map(|m| m.id).collect();
    ids.sort();
    let mut want = vec![m1.id, m2.id];
    want.sort();
    assert_eq!(ids, want);
    let steered = store
        .missions()
        .list(
            a,
            MissionFilter {
                steering_instance_id: Some(soa_a.id),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(
        steered.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![m1.id]
    );
    let cancelled = store
        .missions()
        .list(
            a,
            MissionFilter {
                status: Some(MissionStatus::Cancelled),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(
        cancelled.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![m2.id]
    );

    assert!(matches!(
        store.missions().get(a, mb.id).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store
            .missions()
            .set_status(a, mb.id, MissionStatus::Active)
            .await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        store.missions().get(b, mb.id).await?.status,
        MissionStatus::Proposed
    );
    // A steering instance of another tenant is refused at create.
    assert!(matches!(
        store
            .missions()
            .create(a, &proposal(Some(soa_b.id), "x"))
            .await,
        Err(StoreError::NotFound { .. })
    ));
    // Bad input is refused before the database.
    let mut bad = proposal(None, " ");
    assert!(matches!(
        store.missions().create(a, &bad).await,
        Err(StoreError::InvalidArgument { .. })
    ));
    bad.title = "ok".into();
    bad.metadata = json!([1]);
    assert!(matches!(
        store.missions().create(a, &bad).await,
        Err(StoreError::InvalidArgument { .. })
    ));
    assert_eq!(
        store
            .missions()
            .list(a, MissionFilter::default())
            .await?
            .len(),
        2
    );
    Ok(())
}
