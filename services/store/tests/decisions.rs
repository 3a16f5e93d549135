//! The decision transaction on a real database: an approved mode change is
//! resolved, applied (with its `approval` audit row) and resumed atomically;
//! a failure at any step inside the transaction leaves the request open and
//! the mode unchanged; concurrent approvals apply the mode once and enqueue
//! one resume; a retry heals a missing resume without re-applying the mode;
//! a `DecisionResolved` that cannot be enqueued rolls the resolution back.

mod common;

use common::{count, soa, store, tenant};
use genesis_core::{AgentEventKind, AttentionKind, AttentionStatus, ModeChangeSource};
use genesis_store::{
    AttentionRequest, DecisionAnswer, NewAttentionRequest, Store, StoreError, StoreOptions,
};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

fn mode_change(instance: Uuid, mode: &str) -> NewAttentionRequest {
    NewAttentionRequest {
        instance_id: Some(instance),
        kind: AttentionKind::ModeChange,
        title: format!("Switch to {mode}?"),
        body: String::new(),
        options: json!(["approved", "rejected"]),
        metadata: json!({"source": "soa", "soaInstanceId": instance, "targetMode": mode}),
    }
}

fn approve<'a>(mode: &'a str, actor: &'a str) -> DecisionAnswer<'a> {
    DecisionAnswer {
        resolution: "approved",
        resolution_notes: Some("go ahead"),
        resolved_by: actor,
        approved_mode: Some(mode),
        approved_overlay: None,
    }
}

fn resume(r: &AttentionRequest) -> serde_json::Value {
    json!({"resolution": r.resolution, "resolutionNotes": r.resolution_notes,
           "attentionRequestId": r.id})
}

/// (mode-change audit rows, resume events) of one request, as the superuser.
async fn effects(pool: &PgPool, request: Uuid) -> anyhow::Result<(i64, i64)> {
    Ok((
        count(
            pool,
            "SELECT count(*) FROM agent_mode_change_events WHERE attention_request_id = $1",
            request,
        )
        .await?,
        count(
            pool,
            "SELECT count(*) FROM agent_event_queue WHERE attention_request_id = $1",
            request,
        )
        .await?,
    ))
}

async fn active_mode(store: &Store, t: Uuid, instance: Uuid) -> anyhow::Result<Option<String>> {
    Ok(store.instances().get(t, instance).await?.active_mode)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_approval_resolves_applies_the_mode_audits_and_resumes_in_one_go(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let before = active_mode(&store, t, inst.id).await?;
    let ar = store
        .attention()
        .create(t, mode_change(inst.id, "Incident"))
        .await?;
    let out = store
        .decisions()
        .respond(t, ar.id, approve("Incident", "op"), resume)
        .await?;
    assert!(out.resolve.resolved_now);
    assert_eq!(out.resolve.request.status, AttentionStatus::Resolved);
    let change = out.mode_change.expect("the approved mode was applied");
    assert_eq!(change.source, ModeChangeSource::Approval);
    assert_eq!(change.attention_request_id, Some(ar.id));
    assert_eq!(change.from_mode, before);
    assert_eq!(change.to_mode, "Incident");
    assert_eq!(change.actor, "op");
    let ev = out.resume.expect("the instance is resumed");
    assert!(ev.created);
    assert_eq!(
        ev.event.event_kind,
        AgentEventKind::OperatorAnsweredEscalation
    );
    assert_eq!(ev.event.instance_id, inst.id);
    assert_eq!(ev.event.payload["resolution"], "approved");
    assert_eq!(ev.event.payload["resolutionNotes"], "go ahead");
    assert_eq!(
        active_mode(&store, t, inst.id).await?.as_deref(),
        Some("Incident")
    );
    assert_eq!(store.modes().history(t, inst.id).await?, vec![change]);
    assert_eq!(effects(&pool, ar.id).await?, (1, 1));

    // A retry with another answer is idempotent: nothing re-applied, the
    // same resume, the stored answer kept.
    let again = store
        .decisions()
        .respond(t, ar.id, approve("Discovery", "other"), resume)
        .await?;
    assert!(!again.resolve.resolved_now);
    assert_eq!(again.mode_change, None);
    let same = again.resume.expect("the resume is returned");
    assert!(!same.created);
    assert_eq!(same.event.id, ev.event.id);
    assert_eq!(again.resolve.request.resolved_by.as_deref(), Some("op"));
    assert_eq!(
        active_mode(&store, t, inst.id).await?.as_deref(),
        Some("Incident")
    );
    assert_eq!(effects(&pool, ar.id).await?, (1, 1));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_failed_mode_write_inside_the_transaction_leaves_the_request_open(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let before = active_mode(&store, t, inst.id).await?;
    let ar = store
        .attention()
        .create(t, mode_change(inst.id, "Housekeeping"))
        .await?;
    // The proposal was valid when raised; the catalogue row disappears
    // before the answer, so the mode step fails after the resolve ran.
    sqlx::query("DELETE FROM agent_modes WHERE agent_type = 'Soa' AND name = 'Housekeeping'")
        .execute(&pool)
        .await?;
    let err = store
        .decisions()
        .respond(t, ar.id, approve("Housekeeping", "op"), resume)
        .await
        .expect_err("an unknown mode is refused");
    assert!(
        err.to_string().contains("Housekeeping"),
        "the error names the mode: {err}"
    );
    let stored = store.attention().get(t, ar.id).await?;
    assert_eq!(stored.status, AttentionStatus::Open);
    assert_eq!(stored.resolution, None);
    assert_eq!(active_mode(&store, t, inst.id).await?, before);
    assert_eq!(effects(&pool, ar.id).await?, (0, 0));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_failed_resume_rolls_back_the_applied_mode_and_the_resolve(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = Store::from_pool_with(
        &pool,
        StoreOptions {
            max_event_payload_bytes: 256,
            ..StoreOptions::default()
        },
    );
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let before = active_mode(&store, t, inst.id).await?;
    let ar = store
        .attention()
        .create(t, mode_change(inst.id, "Incident"))
        .await?;
    // The resume is the last step: its payload (the stored notes) is over
    // the limit, after the resolve and the mode write already ran.
    let notes = "n".repeat(1024);
    let answer = DecisionAnswer {
        resolution_notes: Some(&notes),
        ..approve("Incident", "op")
    };
    let err = store
        .decisions()
        .respond(t, ar.id, answer, resume)
        .await
        .expect_err("an oversized resume is refused");
    assert!(matches!(
        err,
        StoreError::PayloadTooLarge { limit: 256, .. }
    ));
    assert_eq!(
        store.attention().get(t, ar.id).await?.status,
        AttentionStatus::Open
    );
    assert_eq!(active_mode(&store, t, inst.id).await?, before);
    assert_eq!(effects(&pool, ar.id).await?, (0, 0));

    // Bad input is refused before anything runs.
    let err = store
        .decisions()
        .respond(t, ar.id, approve("Incident", " "), resume)
        .await
        .expect_err("an empty actor is refused");
    assert!(matches!(err, StoreError::InvalidArgument { .. }), "{err:?}");
    // An unknown request is NOT_FOUND.
    let err = store
        .decisions()
        .respond(t, Uuid::new_v4(), approve("Incident", "op"), resume)
        .await
        .expect_err("an unknown request is refused");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    // Another tenant cannot see, let alone answer, the request.
    let other = tenant(&store, "b").await?;
    let err = store
        .decisions()
        .respond(other, ar.id, approve("Incident", "op"), resume)
        .await
        .expect_err("another tenant's request is refused");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    assert_eq!(
        store.attention().get(t, ar.id).await?.status,
        AttentionStatus::Open
    );
    assert_eq!(effects(&pool, ar.id).await?, (0, 0));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn concurrent_approvals_apply_the_mode_once_and_resume_once(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let ar = store
        .attention()
        .create(t, mode_change(inst.id, "Discovery"))
        .await?;
    let mut tasks = Vec::new();
    for n in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let actor = format!("op{n}");
            store
                .decisions()
                .respond(t, ar.id, approve("Discovery", &actor), resume)
                .await
        }));
    }
    let mut winners = 0;
    let mut events = std::collections::HashSet::new();
    for task in tasks {
        let out = task.await??;
        winners += usize::from(out.resolve.resolved_now);
        assert_eq!(out.mode_change.is_some(), out.resolve.resolved_now);
        events.insert(
            out.resume
                .expect("every answer returns the resume")
                .event
                .id,
        );
    }
    assert_eq!((winners, events.len()), (1, 1));
    assert_eq!(effects(&pool, ar.id).await?, (1, 1));
    assert_eq!(
        active_mode(&store, t, inst.id).await?.as_deref(),
        Some("Discovery")
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_retry_heals_a_resume_lost_by_an_earlier_answer(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let ar = store
        .attention()
        .create(t, mode_change(inst.id, "Incident"))
        .await?;
    // Resolved by an older path that never enqueued the resume.
    store
        .attention()
        .resolve(t, ar.id, "approved", None, "op")
        .await?;
    assert_eq!(effects(&pool, ar.id).await?, (0, 0));
    let out = store
        .decisions()
        .respond(t, ar.id, approve("Incident", "op"), resume)
        .await?;
    assert!(!out.resolve.resolved_now);
    assert_eq!(out.mode_change, None, "a retry never applies the mode");
    assert!(out.resume.expect("the resume is healed").created);
    assert_eq!(effects(&pool, ar.id).await?, (0, 1));
    Ok(())
}

fn overlay_answer<'a>(preset: Uuid, base: &'a str, overlay: &'a str) -> DecisionAnswer<'a> {
    DecisionAnswer {
        resolution: "approved",
        resolution_notes: None,
        resolved_by: "op",
        approved_mode: None,
        approved_overlay: Some(genesis_store::OverlayReplacement {
            preset_id: preset,
            base_sha256: base,
            overlay,
        }),
    }
}

async fn overlay_of(store: &Store, t: Uuid, preset: Uuid) -> anyhow::Result<Option<String>> {
    Ok(store
        .llm()
        .list_presets(t)
        .await?
        .into_iter()
        .find(|p| p.id == preset)
        .and_then(|p| p.overlays["prompt_overlay"].as_str().map(str::to_owned)))
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_approved_redaction_replaces_the_overlay_unless_it_changed_since(
    pool: PgPool,
) -> anyhow::Result<()> {
    use genesis_store::llm::{NewPreset, PresetCouple};
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let new_preset = |overlay: &str| NewPreset {
        name: "ops".into(),
        primary: PresetCouple {
            model: "m".into(),
            provider: "scripted".into(),
            backend: String::new(),
            credentials: vec![],
        },
        fallback: vec![],
        overlays: json!({"prompt_overlay": overlay, "routing_chain_id": "rc-1"}),
    };
    let preset = store
        .llm()
        .create_preset(t, new_preset("key sk-ant-abcdefghijklmnopqrstuvwx"))
        .await?
        .id;
    let base = genesis_core::prompt::overlay_sha256("key sk-ant-abcdefghijklmnopqrstuvwx")
        .unwrap_or_default();
    let redaction = || NewAttentionRequest {
        kind: AttentionKind::Redaction,
        ..mode_change(inst.id, "unused")
    };
    let answer = |base| overlay_answer(preset, base, "key [REDACTED:api_key]");

    // Stale: the overlay was edited after the proposal. Nothing resolves.
    let stale = store.attention().create(t, redaction()).await?;
    store
        .llm()
        .update_preset(t, preset, new_preset("key sk-ant-zzzzzzzzzzzzzzzzzzzzzzzz"))
        .await?;
    let err = store
        .decisions()
        .respond(t, stale.id, answer(&base), resume)
        .await
        .expect_err("a stale proposal is refused");
    assert!(
        matches!(err, StoreError::FailedPrecondition { .. }),
        "{err:?}"
    );
    assert_eq!(
        store.attention().get(t, stale.id).await?.status,
        AttentionStatus::Open
    );
    assert_eq!(
        effects(&pool, stale.id).await?.1,
        0,
        "no resume for a refused answer"
    );
    assert_eq!(
        overlay_of(&store, t, preset).await?.as_deref(),
        Some("key sk-ant-zzzzzzzzzzzzzzzzzzzzzzzz")
    );

    // Current: applied with the resume, other overlays kept; a retry of the
    // resolved request does not write it again.
    store
        .llm()
        .update_preset(t, preset, new_preset("key sk-ant-abcdefghijklmnopqrstuvwx"))
        .await?;
    let out = store
        .decisions()
        .respond(t, stale.id, answer(&base), resume)
        .await?;
    assert!(out.resolve.resolved_now);
    assert_eq!(
        overlay_of(&store, t, preset).await?.as_deref(),
        Some("key [REDACTED:api_key]")
    );
    let row = store.llm().list_presets(t).await?;
    assert_eq!(row[0].overlays["routing_chain_id"], "rc-1");
    assert_eq!(effects(&pool, stale.id).await?.1, 1);
    store
        .llm()
        .update_preset(t, preset, new_preset("operator edit"))
        .await?;
    let again = store
        .decisions()
        .respond(t, stale.id, answer(&base), resume)
        .await?;
    assert!(!again.resolve.resolved_now);
    assert_eq!(
        overlay_of(&store, t, preset).await?.as_deref(),
        Some("operator edit"),
        "a retry re-applied the overlay over a later edit"
    );

    // A deleted preset: NotFound, the request stays open.
    let gone = store.attention().create(t, redaction()).await?;
    let missing = overlay_answer(Uuid::new_v4(), &base, "x");
    let err = store
        .decisions()
        .respond(t, gone.id, missing, resume)
        .await
        .expect_err("a missing preset is refused");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    assert_eq!(
        store.attention().get(t, gone.id).await?.status,
        AttentionStatus::Open
    );
    Ok(())
}

/// The steering instance's `DecisionResolved` is the resolving
/// transaction's last step: when it cannot be enqueued (here, a payload
/// over the limit while the raiser's resume fits), the resolution and the
/// resume roll back with it and the request stays open; the answer that
/// fits resolves, resumes and signals once.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_failed_decision_resolved_rolls_back_the_resolve_and_the_resume(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = Store::from_pool_with(
        &pool,
        StoreOptions {
            max_event_payload_bytes: 400,
            ..StoreOptions::default()
        },
    );
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let mission = store
        .missions()
        .create(
            t,
            &genesis_store::NewMission {
                steering_instance_id: Some(inst.id),
                kind: "MissionResearch".into(),
                title: "m".into(),
                description: String::new(),
                metadata: json!({}),
            },
        )
        .await?;
    let ar = store
        .attention()
        .create(
            t,
            NewAttentionRequest {
                instance_id: Some(inst.id),
                kind: AttentionKind::Decision,
                title: "ship?".into(),
                body: String::new(),
                options: json!([]),
                metadata: json!({"source": "soa", "soaInstanceId": inst.id,
                                 "missionId": mission.id.to_string()}),
            },
        )
        .await?;
    let notes = "n".repeat(300);
    let answer = |notes| DecisionAnswer {
        resolution: "yes",
        resolution_notes: notes,
        resolved_by: "op",
        approved_mode: None,
        approved_overlay: None,
    };
    // The resume carries only the id here, so only the signal is over.
    let id_only = |r: &AttentionRequest| json!({"attentionRequestId": r.id});
    let err = store
        .decisions()
        .respond(t, ar.id, answer(Some(notes.as_str())), id_only)
        .await
        .expect_err("an oversized DecisionResolved is refused");
    assert!(
        matches!(err, StoreError::PayloadTooLarge { limit: 400, .. }),
        "{err:?}"
    );
    assert_eq!(
        store.attention().get(t, ar.id).await?.status,
        AttentionStatus::Open
    );
    assert!(store.events().list(t, inst.id).await?.is_empty());

    let ok = store
        .decisions()
        .respond(t, ar.id, answer(None), id_only)
        .await?;
    assert!(ok.resolve.resolved_now);
    let signal = ok
        .steering_signal
        .expect("the steering instance is signalled");
    assert_eq!(signal.event.event_kind, AgentEventKind::DecisionResolved);
    assert_eq!(signal.event.instance_id, inst.id);
    assert_eq!(signal.event.payload["missionId"], json!(mission.id));
    let again = store
        .decisions()
        .respond(t, ar.id, answer(None), id_only)
        .await?;
    assert_eq!(again.steering_signal, None);
    let kinds: Vec<_> = store
        .events()
        .list(t, inst.id)
        .await?
        .into_iter()
        .map(|e| e.event_kind)
        .collect();
    assert_eq!(
        kinds,
        vec![
            AgentEventKind::OperatorAnsweredEscalation,
            AgentEventKind::DecisionResolved
        ]
    );
    Ok(())
}
