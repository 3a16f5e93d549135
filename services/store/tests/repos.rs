//! The repositories against the real PostgreSQL: the mode chokepoint, the
//! concurrency guarantees of enqueue / resolve / escalation resume, DB-first
//! config, tokens, tenants, and bad input answered with typed errors that
//! leave nothing written.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::collections::HashSet;

use common::*;
use genesis_core::{
    AgentEventKind, AgentType, AttentionKind, AttentionStatus, InstanceStatus, MessageDirection,
    ModeChangeSource, TokenScope,
};
use genesis_store::{
    NewAttentionRequest, NewInstance, Store, StoreError, StoreOptions, tokens::hash_token,
};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

fn decision(instance: Uuid) -> NewAttentionRequest {
    NewAttentionRequest {
        instance_id: Some(instance),
        kind: AttentionKind::Decision,
        title: "Ship the fix?".into(),
        body: "two options".into(),
        options: json!(["yes", "no"]),
        metadata: json!({"source": "soa", "soaInstanceId": instance}),
    }
}

/// DESIGN §5.7 held by the database: a service-role UPDATE that changes
/// `active_mode` without the chokepoint is refused, so no
/// code path can change a mode and skip the audit row.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_mode_write_past_the_chokepoint_is_refused_for_both_service_roles(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    store
        .modes()
        .set_active_mode(t, inst.id, "Incident", ModeChangeSource::Ui, "alice", None)
        .await?;
    let audits = |pool: PgPool| async move {
        count(
            &pool,
            "SELECT count(*) FROM agent_mode_change_events WHERE instance_id = $1",
            inst.id,
        )
        .await
    };
    assert_eq!(audits(pool.clone()).await?, 1);
    let write = "UPDATE agent_instances SET active_mode = NULL, updated_at = now() WHERE id = $1";

    // genesis_app, through the store's own tenant transaction.
    let mut tx = store.tenant_tx(t).await?;
    let err = sqlx::query(write)
        .bind(inst.id)
        .execute(tx.conn())
        .await
        .map_err(StoreError::from)
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::PermissionDenied { reason } if reason.contains("mode chokepoint")),
        "{err:?}"
    );
    tx.rollback().await?;
    // An update that leaves the mode as it is, and every other column, pass.
    let mut tx = store.tenant_tx(t).await?;
    sqlx::query(
        "UPDATE agent_instances SET active_mode = active_mode, updated_at = now() WHERE id = $1",
    )
    .bind(inst.id)
    .execute(tx.conn())
    .await?;
    tx.commit().await?;

    // genesis_system: without a tenant in scope row-level security hides
    // the instance from it (it has no UPDATE policy on agent_instances), and
    // with the tenant set the chokepoint refuses it like genesis_app.
    as_system(&pool, write, Some(inst.id)).await??;
    let mut conn = pool.acquire().await?;
    sqlx::query("SET ROLE genesis_system")
        .execute(&mut *conn)
        .await?;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    sqlx::query("SELECT set_config('genesis.tenant_id', $1, true)")
        .bind(t.to_string())
        .execute(&mut *tx)
        .await?;
    let err = sqlx::query(write)
        .bind(inst.id)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from)
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::PermissionDenied { reason } if reason.contains("mode chokepoint")),
        "{err:?}"
    );
    tx.rollback().await?;
    sqlx::query("RESET ROLE").execute(&mut *conn).await?;
    drop(conn);

    // Nothing changed and nothing was audited; the chokepoint still works,
    // and its mark does not outlive its own transaction.
    let mode = store.instances().get(t, inst.id).await?.active_mode;
    assert_eq!(mode.as_deref(), Some("Incident"));
    assert_eq!(audits(pool.clone()).await?, 1);
    store
        .modes()
        .set_active_mode(t, inst.id, "Incident", ModeChangeSource::Ui, "bob", None)
        .await?;
    assert_eq!(audits(pool.clone()).await?, 2);
    let mut tx = store.tenant_tx(t).await?;
    let mark: String =
        sqlx::query_scalar("SELECT coalesce(current_setting('genesis.mode_chokepoint', true), '')")
            .fetch_one(tx.conn())
            .await?;
    assert_eq!(mark, "", "the chokepoint's mark outlived its transaction");
    tx.rollback().await?;
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_mode_chokepoint_always_audits_and_rejects_modes_outside_the_catalogue(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    assert_eq!(inst.active_mode, None);
    let change = store
        .modes()
        .set_active_mode(t, inst.id, "Incident", ModeChangeSource::Ui, "alice", None)
        .await?;
    assert_eq!(
        (change.from_mode.as_deref(), change.to_mode.as_str()),
        (None, "Incident")
    );
    assert_eq!(
        store
            .instances()
            .get(t, inst.id)
            .await?
            .active_mode
            .as_deref(),
        Some("Incident")
    );
    // Same mode again: still audited.
    store
        .modes()
        .set_active_mode(t, inst.id, "Incident", ModeChangeSource::Ui, "alice", None)
        .await?;
    // A Compliance mode on a SOA: refused, nothing written.
    let err = store
        .modes()
        .set_active_mode(t, inst.id, "Cadence", ModeChangeSource::Ui, "alice", None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidArgument { ref field, .. } if field == "mode"),
        "{err:?}"
    );
    // Approval must name its attention request.
    let err = store
        .modes()
        .set_active_mode(
            t,
            inst.id,
            "Dialogue",
            ModeChangeSource::Approval,
            "bob",
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidArgument { ref field, .. } if field == "attention_request_id")
    );
    let ar = store.attention().create(t, decision(inst.id)).await?;
    let approved = store
        .modes()
        .set_active_mode(
            t,
            inst.id,
            "Dialogue",
            ModeChangeSource::Approval,
            "bob",
            Some(ar.id),
        )
        .await?;
    assert_eq!(approved.from_mode.as_deref(), Some("Incident"));
    let history = store.modes().history(t, inst.id).await?;
    assert_eq!(
        history
            .iter()
            .map(|h| (h.to_mode.as_str(), h.source))
            .collect::<Vec<_>>(),
        vec![
            ("Incident", ModeChangeSource::Ui),
            ("Incident", ModeChangeSource::Ui),
            ("Dialogue", ModeChangeSource::Approval)
        ]
    );
    assert_eq!(
        store
            .instances()
            .get(t, inst.id)
            .await?
            .active_mode
            .as_deref(),
        Some("Dialogue")
    );
    // The catalogues are per type.
    let soa_modes: Vec<String> = store
        .modes()
        .catalogue(AgentType::Soa)
        .await?
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(soa_modes[0], "Strategic");
    assert_eq!(soa_modes.len(), 6);
    assert_eq!(
        store.modes().catalogue(AgentType::Compliance).await?.len(),
        3
    );
    assert!(
        store
            .modes()
            .catalogue(AgentType::MissionResearch)
            .await?
            .is_empty()
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn concurrent_enqueues_to_one_instance_get_distinct_increasing_sequence_numbers(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let mut tasks = Vec::new();
    for n in 0..32 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .events()
                .enqueue(
                    t,
                    inst.id,
                    AgentEventKind::OperatorMessage,
                    &json!({"n": n}),
                    None,
                )
                .await
        }));
    }
    let mut seqs = HashSet::new();
    for task in tasks {
        let out = task.await??;
        assert!(out.created);
        seqs.insert(out.event.sequence_number);
    }
    assert_eq!(seqs, (1..=32).collect::<HashSet<i64>>());
    Ok(())
}

/// An enqueue with nothing to deduplicate takes the row lock
/// with its sequence update, a heartbeat enqueue locks first to look for a
/// pending one. Racing together on one instance they still get distinct,
/// gap-free sequence numbers, and one heartbeat is pending at the end; an
/// unknown instance is refused on either path with nothing written.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn enqueues_with_and_without_a_duplicate_check_race_to_distinct_sequence_numbers(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let before: i64 = sqlx::query_scalar(
        "SELECT coalesce(max(sequence_number), 0) FROM agent_event_queue WHERE instance_id = $1",
    )
    .bind(inst.id)
    .fetch_one(&pool)
    .await?;
    let heartbeats_before = count(
        &pool,
        "SELECT count(*) FROM agent_event_queue WHERE instance_id = $1 AND event_kind = 'AgentTick'",
        inst.id,
    )
    .await?;
    assert_eq!(heartbeats_before, 0);
    let mut tasks = Vec::new();
    for n in 0..32 {
        let store = store.clone();
        let kind = if n % 4 == 0 {
            AgentEventKind::AgentTick
        } else {
            AgentEventKind::OperatorMessage
        };
        tasks.push(tokio::spawn(async move {
            let out = store
                .events()
                .enqueue(t, inst.id, kind, &json!({"n": n}), None)
                .await?;
            anyhow::Ok((kind, out))
        }));
    }
    let mut seqs = HashSet::new();
    let (mut messages, mut heartbeats) = (0, 0);
    for task in tasks {
        let (kind, out) = task.await??;
        match (kind, out.created) {
            (AgentEventKind::OperatorMessage, true) => messages += 1,
            (AgentEventKind::AgentTick, true) => heartbeats += 1,
            (AgentEventKind::AgentTick, false) => continue,
            other => anyhow::bail!("an operator message was not created: {other:?}"),
        }
        assert!(seqs.insert(out.event.sequence_number), "{seqs:?}");
    }
    assert_eq!((messages, heartbeats), (24, 1));
    assert_eq!(seqs, (before + 1..=before + 25).collect::<HashSet<i64>>());
    let drawn = "SELECT event_sequence FROM agent_instances WHERE id = $1";
    assert_eq!(count(&pool, drawn, inst.id).await?, before + 25);
    // An unknown instance, and another tenant's, on both paths.
    let other = tenant(&store, "b").await?;
    let all = || async {
        anyhow::Ok(
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM agent_event_queue")
                .fetch_one(&pool)
                .await?,
        )
    };
    let events_before = all().await?;
    for (tenant_id, instance_id) in [(t, Uuid::new_v4()), (other, inst.id)] {
        for kind in [AgentEventKind::OperatorMessage, AgentEventKind::AgentTick] {
            let err = store
                .events()
                .enqueue(tenant_id, instance_id, kind, &json!({}), None)
                .await
                .unwrap_err();
            assert!(
                matches!(err, StoreError::NotFound { .. }),
                "{kind:?}: {err:?}"
            );
        }
    }
    assert_eq!(
        all().await?,
        events_before,
        "nothing written for the refused enqueues"
    );
    assert_eq!(count(&pool, drawn, inst.id).await?, before + 25);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn concurrent_resolves_of_one_attention_request_have_exactly_one_winner(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let ar = store.attention().create(t, decision(inst.id)).await?;
    let mut tasks = Vec::new();
    for n in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .attention()
                .resolve(t, ar.id, "yes", Some("go"), &format!("op{n}"))
                .await
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        let out = task.await??;
        assert_eq!(out.request.status, AttentionStatus::Resolved);
        if out.resolved_now {
            winners.push(out.request.resolved_by.clone());
        }
    }
    assert_eq!(winners.len(), 1);
    let stored = store.attention().get(t, ar.id).await?;
    assert_eq!(stored.resolved_by, winners[0]);
    assert!(
        store
            .attention()
            .list(t, Some(AttentionStatus::Open))
            .await?
            .is_empty()
    );
    assert!(matches!(
        store
            .attention()
            .resolve(t, Uuid::new_v4(), "yes", None, "op")
            .await,
        Err(StoreError::NotFound { .. })
    ));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn concurrent_answered_escalation_enqueues_produce_one_event(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let ar = store.attention().create(t, decision(inst.id)).await?;
    assert_eq!(
        store
            .attention()
            .open_for_soa_instance(t, inst.id)
            .await?
            .len(),
        1
    );
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .events()
                .enqueue_answered_escalation(t, inst.id, ar.id, &json!({"resolution": "yes"}))
                .await
        }));
    }
    let mut ids = HashSet::new();
    let mut created = 0;
    for task in tasks {
        let out = task.await??;
        created += usize::from(out.created);
        ids.insert(out.event.id);
    }
    assert_eq!((created, ids.len()), (1, 1));
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM agent_event_queue WHERE attention_request_id = $1",
            ar.id
        )
        .await?,
        1
    );
    // An unknown attention request is refused.
    assert!(matches!(
        store
            .events()
            .enqueue_answered_escalation(t, inst.id, Uuid::new_v4(), &json!({}))
            .await,
        Err(StoreError::NotFound { .. })
    ));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn bad_input_gets_a_typed_error_and_writes_nothing(pool: PgPool) -> anyhow::Result<()> {
    let store = Store::from_pool_with(
        &pool,
        StoreOptions {
            max_event_payload_bytes: 1024,
            ..StoreOptions::default()
        },
    );
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    let inst = soa(&store, a).await?;
    let events = "SELECT count(*) FROM agent_event_queue WHERE instance_id = $1";

    // Unknown instance.
    let err = store
        .events()
        .enqueue(
            a,
            Uuid::new_v4(),
            AgentEventKind::OperatorMessage,
            &json!({}),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    // Wrong tenant.
    let err = store
        .events()
        .enqueue(
            b,
            inst.id,
            AgentEventKind::OperatorMessage,
            &json!({}),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    assert!(matches!(
        store
            .messages()
            .append(b, inst.id, MessageDirection::OperatorToAgent, "hi")
            .await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.attention().create(b, decision(inst.id)).await,
        Err(StoreError::NotFound { .. })
    ));
    // Oversized payload.
    let big = json!({"text": "x".repeat(2000)});
    let err = store
        .events()
        .enqueue(a, inst.id, AgentEventKind::OperatorMessage, &big, None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::PayloadTooLarge { limit: 1024, .. }),
        "{err:?}"
    );
    // Escalation resume through the plain enqueue.
    let err = store
        .events()
        .enqueue(
            a,
            inst.id,
            AgentEventKind::OperatorAnsweredEscalation,
            &json!({}),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument { .. }));
    assert_eq!(count(&pool, events, inst.id).await?, 0);
    // Invalid enum strings: typed from parsing, and refused by the schema.
    let err = StoreError::from("Wizard".parse::<AgentType>().unwrap_err());
    assert!(
        matches!(err, StoreError::InvalidArgument { ref field, .. } if field == "AgentType"),
        "{err:?}"
    );
    let mut tx = store.tenant_tx(a).await?;
    let err = sqlx::query("UPDATE agent_instances SET status = 'sleeping' WHERE id = $1")
        .bind(inst.id)
        .execute(tx.conn())
        .await
        .map_err(StoreError::from)
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument { .. }), "{err:?}");
    tx.rollback().await?;
    assert_eq!(
        store.instances().get(a, inst.id).await?.status,
        InstanceStatus::Active
    );
    // Empty text.
    assert!(matches!(
        store
            .messages()
            .append(a, inst.id, MessageDirection::OperatorToAgent, "  ")
            .await,
        Err(StoreError::InvalidArgument { .. })
    ));
    assert!(matches!(
        store.tenants().create("").await,
        Err(StoreError::InvalidArgument { .. })
    ));
    assert!(matches!(
        store
            .tenants()
            .set_feature_flag(a, "time-travel", true)
            .await,
        Err(StoreError::InvalidArgument { .. })
    ));
    assert!(matches!(
        store
            .tokens()
            .insert(None, TokenScope::Operator, "not-hex", "x", None)
            .await,
        Err(StoreError::InvalidArgument { .. })
    ));
    // Claim parameters.
    assert!(matches!(
        store
            .claim_tick(a, inst.id, Uuid::new_v4(), std::time::Duration::ZERO, 5)
            .await,
        Err(StoreError::InvalidArgument { .. })
    ));
    assert!(matches!(
        store.claim_tick(a, inst.id, Uuid::new_v4(), TTL, 0).await,
        Err(StoreError::InvalidArgument { .. })
    ));
    assert_eq!(count(&pool, events, inst.id).await?, 0);
    assert_eq!(store.instances().get(a, inst.id).await?.lease_session, None);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn tenants_are_unique_by_name_and_carry_the_gate_and_feature_flags(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = store.tenants().create("acme").await?;
    assert!(!t.standing_agents_enabled);
    assert!(!t.feature_enabled("prompt-redactor") && !t.feature_enabled("windows-pool"));
    assert!(matches!(
        store.tenants().create("acme").await,
        Err(StoreError::Conflict { .. })
    ));
    let t = store
        .tenants()
        .set_standing_agents_enabled(t.id, true)
        .await?;
    assert!(t.standing_agents_enabled);
    let t = store
        .tenants()
        .set_feature_flag(t.id, "windows-pool", true)
        .await?;
    assert!(t.feature_enabled("windows-pool") && !t.feature_enabled("prompt-redactor"));
    assert_eq!(store.tenants().get(t.id).await?, t);
    assert_eq!(store.tenants().list().await?.len(), 1);
    assert!(matches!(
        store.tenants().get(Uuid::new_v4()).await,
        Err(StoreError::NotFound { .. })
    ));
    Ok(())
}

/// The bootstrap re-scan's one query: every tenant, its gate and status,
/// and its oldest SOA of any status; other agent types never stand in.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_census_lists_every_tenant_with_its_oldest_soa(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let with_soa = tenant(&store, "with-soa").await?;
    let compliance_only = tenant(&store, "compliance-only").await?;
    let bare = tenant(&store, "bare").await?;
    store
        .tenants()
        .set_standing_agents_enabled(with_soa, true)
        .await?;
    let first = soa(&store, with_soa).await?;
    let second = soa(&store, with_soa).await?;
    store
        .instances()
        .set_status(with_soa, first.id, InstanceStatus::Closed)
        .await?;
    store
        .instances()
        .create(
            compliance_only,
            NewInstance::foundational(AgentType::Compliance, InstanceStatus::Paused),
        )
        .await?;

    let census = store.tenants().census().await?;
    let ids: Vec<Uuid> = census.iter().map(|t| t.id).collect();
    assert_eq!(
        ids,
        vec![with_soa, compliance_only, bare],
        "oldest tenant first"
    );
    assert_eq!(
        census[0].soa_id,
        Some(first.id),
        "the oldest SOA, closed or not"
    );
    assert_ne!(census[0].soa_id, Some(second.id));
    assert!(
        census[0].standing_agents_enabled && census[0].status == genesis_core::TenantStatus::Active
    );
    assert_eq!(census[1].soa_id, None, "a Compliance instance is not a SOA");
    assert!(!census[1].standing_agents_enabled);
    assert_eq!(census[2].soa_id, None);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn instances_start_foundational_and_start_seeds_the_opener(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = store
        .instances()
        .create(
            t,
            NewInstance::foundational(AgentType::Compliance, InstanceStatus::Paused),
        )
        .await?;
    assert!(inst.in_foundational_phase(chrono::Utc::now()));
    assert!(
        inst.workset_deadline_utc
            .is_some_and(|d| d > chrono::Utc::now() + chrono::Duration::hours(23))
    );
    assert!(store.events().list(t, inst.id).await?.is_empty());
    let started = store
        .instances()
        .set_status(t, inst.id, InstanceStatus::Active)
        .await?;
    assert_eq!(started.status, InstanceStatus::Active);
    let evs = store.events().list(t, inst.id).await?;
    assert_eq!(
        evs.iter().map(|e| e.event_kind).collect::<Vec<_>>(),
        vec![AgentEventKind::AgentInitialized]
    );
    // Already active: no second opener.
    store
        .instances()
        .set_status(t, inst.id, InstanceStatus::Active)
        .await?;
    assert_eq!(store.events().list(t, inst.id).await?.len(), 1);
    let done = store.instances().complete_workset(t, inst.id).await?;
    assert!(!done.in_foundational_phase(chrono::Utc::now()));
    assert_eq!(
        store
            .instances()
            .list(t, Some(AgentType::Compliance))
            .await?
            .len(),
        1
    );
    assert!(
        store
            .instances()
            .list(t, Some(AgentType::Soa))
            .await?
            .is_empty()
    );
    let msg = store
        .messages()
        .append(t, inst.id, MessageDirection::AgentToOperator, "hello")
        .await?;
    assert_eq!(store.messages().list(t, inst.id, 10).await?, vec![msg]);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn tokens_authenticate_only_while_unrevoked_and_unexpired(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let live = hash_token("gen_live");
    let tok = store
        .tokens()
        .insert(Some(t), TokenScope::Operator, &live, "ops", None)
        .await?;
    let found = store.tokens().authenticate(&live).await?;
    assert_eq!(
        (found.id, found.tenant_id, found.scope),
        (tok.id, Some(t), TokenScope::Operator)
    );
    assert!(matches!(
        store
            .tokens()
            .insert(None, TokenScope::Operator, &live, "dup", None)
            .await,
        Err(StoreError::Conflict { .. })
    ));
    let expired = hash_token("gen_old");
    store
        .tokens()
        .insert(
            None,
            TokenScope::AgentPod,
            &expired,
            "pod",
            Some(chrono::Utc::now() - chrono::Duration::seconds(1)),
        )
        .await?;
    assert!(matches!(
        store.tokens().authenticate(&expired).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(store.tokens().revoke(tok.id).await?);
    assert!(!store.tokens().revoke(tok.id).await?);
    assert!(matches!(
        store.tokens().authenticate(&live).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.tokens().authenticate(&hash_token("never")).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store
            .tokens()
            .insert(Some(t), TokenScope::AgentPod, &hash_token("p"), "x", None)
            .await,
        Err(StoreError::InvalidArgument { .. })
    ));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn config_reads_tenant_over_global_over_none(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let key = "AgentDispatcher:TickMaxToolCalls";
    assert_eq!(store.config().get(Some(a), key).await?, None);
    store.config().set(None, key, "8").await?;
    assert_eq!(
        store.config().get(Some(a), key).await?.as_deref(),
        Some("8")
    );
    store.config().set(Some(a), key, "12").await?;
    store.config().set(Some(a), key, "16").await?;
    assert_eq!(
        store.config().get(Some(a), key).await?.as_deref(),
        Some("16")
    );
    assert_eq!(store.config().get(None, key).await?.as_deref(), Some("8"));
    let eff = store.config().effective(Some(a)).await?;
    assert_eq!(eff.get(key).map(String::as_str), Some("16"));
    let opts = genesis_core::AgentDispatcherOptions::default().with_system_configs(eff.iter())?;
    assert_eq!(
        opts.tick_budget.max_tool_calls,
        genesis_core::Limit::Limited(16)
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn dashboard_sessions_open_only_for_usable_operator_tokens_of_their_tenant(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    let op_a = store
        .tokens()
        .insert(
            Some(a),
            TokenScope::Operator,
            &hash_token("gen_a"),
            "ops",
            None,
        )
        .await?;
    let platform = store
        .tokens()
        .insert(
            None,
            TokenScope::Operator,
            &hash_token("gen_p"),
            "root",
            None,
        )
        .await?;
    let pod = store
        .tokens()
        .insert(
            None,
            TokenScope::AgentPod,
            &hash_token("gen_pod"),
            "pod",
            None,
        )
        .await?;
    let soon = chrono::Utc::now() + chrono::Duration::hours(1);
    let csrf = "x".repeat(40);
    let count = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM dashboard_sessions")
            .fetch_one(&pool)
            .await
    };

    // Refusals: typed, and nothing written.
    let bad_hash = store.sessions().open(a, op_a.id, "nope", &csrf, soon).await;
    assert!(
        matches!(bad_hash, Err(StoreError::InvalidArgument { ref field, .. }) if field == "session_sha256")
    );
    let short_csrf = store
        .sessions()
        .open(a, op_a.id, &hash_token("s1"), "short", soon)
        .await;
    assert!(
        matches!(short_csrf, Err(StoreError::InvalidArgument { ref field, .. }) if field == "csrf_token")
    );
    let past = store
        .sessions()
        .open(a, op_a.id, &hash_token("s1"), &csrf, chrono::Utc::now())
        .await;
    assert!(
        matches!(past, Err(StoreError::InvalidArgument { ref field, .. }) if field == "expires_at")
    );
    for (tenant, token) in [(b, op_a.id), (a, pod.id), (Uuid::new_v4(), platform.id)] {
        let r = store
            .sessions()
            .open(tenant, token, &hash_token("s1"), &csrf, soon)
            .await;
        assert!(matches!(r, Err(StoreError::NotFound { .. })), "{r:?}");
    }
    assert_eq!(count().await?, 0);

    // A tenant token on its tenant, a platform token on any tenant.
    let s = store
        .sessions()
        .open(a, op_a.id, &hash_token("s1"), &csrf, soon)
        .await?;
    assert_eq!((s.tenant_id, s.token_tenant_id), (a, Some(a)));
    let p = store
        .sessions()
        .open(b, platform.id, &hash_token("s2"), &csrf, soon)
        .await?;
    assert_eq!((p.tenant_id, p.token_tenant_id), (b, None));
    assert_eq!(
        store.sessions().authenticate(&hash_token("s1")).await?.id,
        s.id
    );

    // Signing out and revoking the token both end a session.
    assert!(store.sessions().revoke(&hash_token("s1")).await?);
    assert!(!store.sessions().revoke(&hash_token("s1")).await?);
    assert!(matches!(
        store.sessions().authenticate(&hash_token("s1")).await,
        Err(StoreError::NotFound { .. })
    ));
    store.tokens().revoke(platform.id).await?;
    assert!(matches!(
        store.sessions().authenticate(&hash_token("s2")).await,
        Err(StoreError::NotFound { .. })
    ));
    Ok(())
}

/// Every connection of a store reports the service's `application_name`
/// (both roles' pools), unless the URL names one itself; a URL the driver
/// cannot parse is refused naming the setting.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_store_s_connections_carry_the_service_s_application_name(
    pool: PgPool,
) -> anyhow::Result<()> {
    let named = Store::from_pool_with(
        &pool,
        StoreOptions {
            application_name: Some("genesis-test-service".into()),
            ..StoreOptions::default()
        },
    );
    let t = tenant(&named, "a").await?;
    let mut tx = named.tenant_tx(t).await?;
    let tenant_side: String = sqlx::query_scalar("SELECT current_setting('application_name')")
        .fetch_one(tx.conn())
        .await?;
    tx.commit().await?;
    assert_eq!(tenant_side, "genesis-test-service");
    // The system pool made the tenant above; its backend shows the name too.
    let system_side: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'genesis-test-service'",
    )
    .fetch_one(&pool)
    .await?;
    assert!(system_side >= 2, "{system_side} named backends");

    let url = "postgres://u@h:5432/db";
    let opts = genesis_store::connect_options(url, Some("genesis-control"))?;
    assert_eq!(opts.get_application_name(), Some("genesis-control"));
    let own = genesis_store::connect_options(&format!("{url}?application_name=ops"), Some("x"))?;
    assert_eq!(
        own.get_application_name(),
        Some("ops"),
        "the URL's own wins"
    );
    assert_eq!(
        genesis_store::connect_options(url, None)?.get_application_name(),
        None
    );
    let err = genesis_store::connect_options("postgres://h:notaport/db", Some("x")).unwrap_err();
    assert!(err.to_string().contains("database_url"), "{err}");
    Ok(())
}

/// The statements the supervisor and its tools once issued themselves, now
/// the store's: a lease is given back only by the session holding it (and
/// never across tenants), and the in-transaction reads and writes the tools
/// call refuse what they should, with nothing written.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_lease_is_released_only_by_its_holder_and_tool_statements_refuse_bad_input(
    pool: PgPool,
) -> anyhow::Result<()> {
    use genesis_store::{instances, ledger, locks, modes, telemetry};
    let store = store(&pool);
    let t = tenant(&store, "acme").await?;
    let other = tenant(&store, "globex").await?;
    let inst = soa(&store, t).await?;
    message(&store, t, inst.id, json!({"text": "hi"})).await?;
    let c = claim(&store, t, inst.id).await?;
    let instances = store.instances();
    let releases = |tenant, session| instances.release_lease(tenant, inst.id, session);
    assert!(!releases(t, Uuid::new_v4()).await?, "not the holder");
    assert!(!releases(other, c.session).await?, "not the tenant's");
    assert_eq!(
        store.instances().get(t, inst.id).await?.lease_session,
        Some(c.session)
    );
    assert!(releases(t, c.session).await?);
    let after = store.instances().get(t, inst.id).await?;
    assert_eq!((after.lease_session, after.lease_expires_at), (None, None));

    let mut tx = store.tenant_tx(t).await?;
    for hours in [0, telemetry::MAX_WINDOW_HOURS + 1] {
        assert!(matches!(
            telemetry::window_in(tx.conn(), hours).await,
            Err(StoreError::InvalidArgument { .. })
        ));
    }
    assert_eq!(
        telemetry::window_in(tx.conn(), 24).await?["windowHours"],
        24
    );
    for (query, limit) in [(" ", 5), ("hi", 0)] {
        assert!(matches!(
            ledger::memory_search_in(tx.conn(), inst.id, query, limit).await,
            Err(StoreError::InvalidArgument { .. })
        ));
    }
    let names = modes::mode_names_in(tx.conn(), inst.id).await?;
    assert_eq!(names.agent_type, AgentType::Soa);
    assert!(!names.names.is_empty());
    let cat = modes::instance_catalogue_in(tx.conn(), inst.id).await?;
    assert_eq!(cat.modes.len(), {
        let mut unique = names.names.clone();
        unique.dedup();
        unique.len()
    });
    assert!(matches!(
        modes::instance_catalogue_in(tx.conn(), Uuid::new_v4()).await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        instances::complete_workset_in(tx.conn(), Uuid::new_v4()).await?,
        None
    );
    assert_eq!(
        instances::complete_workset_in(tx.conn(), inst.id).await?,
        Some(true)
    );
    assert_eq!(
        instances::complete_workset_in(tx.conn(), inst.id).await?,
        Some(false)
    );
    tx.rollback().await?;

    // The advisory lock is the session's: held until unlocked, once.
    let mut conn = pool.acquire().await?;
    locks::lock(&mut conn, 7, "singleton:x").await?;
    assert!(locks::unlock(&mut conn, 7, "singleton:x").await?);
    assert!(!locks::unlock(&mut conn, 7, "singleton:x").await?);
    Ok(())
}
