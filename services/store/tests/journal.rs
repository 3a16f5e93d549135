//! The episode journal on a real PostgreSQL: steps appended in order under
//! the session guard, read back by event, invisible to another tenant,
//! append-only to the tenant path, bounded per episode with one truncation
//! marker, numbered without gaps under concurrent appends, and pruned after
//! its retention while the ledger turn is kept.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::time::Duration;

use common::*;
use genesis_core::journal::JournalKind;
use genesis_core::{AgentDecisionKind, AgentEventKind, Phase};
use genesis_store::journal::{Appended, NewStep};
use genesis_store::{StoreError, TickCompletion};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

const CAP: u32 = 64 * 1024;

fn step<'a>(
    c: &genesis_store::TickClaim,
    kind: JournalKind,
    entry: &'a serde_json::Value,
) -> NewStep<'a> {
    NewStep {
        event_id: c.event.id,
        instance_id: c.instance.id,
        session: c.session,
        kind,
        entry,
    }
}

/// A tenant's SOA with an event claimed.
async fn claimed(
    store: &genesis_store::Store,
    name: &str,
) -> anyhow::Result<(Uuid, genesis_store::TickClaim)> {
    let t = tenant(store, name).await?;
    let inst = soa(store, t).await?;
    store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::OperatorMessage,
            &json!({}),
            None,
        )
        .await?;
    Ok((t, claim(store, t, inst.id).await?))
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn steps_are_journaled_in_order_and_only_their_tenant_reads_them(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let (a, c) = claimed(&store, "a").await?;
    let (b, _) = claimed(&store, "b").await?;
    let turn = json!({"request": {"model": "claude-opus-4-8"}, "response": {"text": "hi"}});
    let tool = json!({"name": "soa_send_message", "arguments": {"body": "hi"}, "result": {"ok": true}, "side_effecting": true});
    let j = store.journal();
    assert_eq!(
        j.append(a, step(&c, JournalKind::LlmTurn, &turn), CAP)
            .await?,
        Appended::At(0)
    );
    assert_eq!(
        j.append(a, step(&c, JournalKind::ToolCall, &tool), CAP)
            .await?,
        Appended::At(1)
    );
    let episode = j.episode(a, c.event.id).await?;
    assert_eq!(episode.len(), 2);
    assert_eq!(
        episode.iter().map(|e| (e.seq, e.kind)).collect::<Vec<_>>(),
        [(0, JournalKind::LlmTurn), (1, JournalKind::ToolCall)]
    );
    assert_eq!(episode[1].entry, tool);
    assert_eq!(episode[0].session, c.session);
    // The cap counts what is stored: the entry's JSON text.
    assert!(
        episode[0].bytes as usize >= turn.to_string().len(),
        "{}",
        episode[0].bytes
    );
    // Another tenant: nothing to read, and no appending to a's instance.
    assert!(j.episode(b, c.event.id).await?.is_empty());
    let err = j
        .append(b, step(&c, JournalKind::LlmTurn, &turn), CAP)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    // Append-only to the tenant path.
    for stmt in [
        "UPDATE agent_episode_journal SET entry = '{}' WHERE tenant_id = $1",
        "DELETE FROM agent_episode_journal WHERE tenant_id = $1",
    ] {
        let err = in_tenant_tx(&store, a, stmt, &[a]).await?.unwrap_err();
        assert!(
            matches!(err, StoreError::PermissionDenied { .. }),
            "{stmt}: {err:?}"
        );
    }
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_session_without_the_lease_or_a_bad_step_journals_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let (a, c) = claimed(&store, "a").await?;
    let entry = json!({"request": {}});
    let j = store.journal();
    let stale = NewStep {
        session: Uuid::new_v4(),
        ..step(&c, JournalKind::LlmTurn, &entry)
    };
    assert!(matches!(
        j.append(a, stale, CAP).await,
        Err(StoreError::LeaseLost)
    ));
    genesis_store::inspect::force_lease_expired(&pool, c.instance.id).await?;
    assert!(matches!(
        j.append(a, step(&c, JournalKind::LlmTurn, &entry), CAP)
            .await,
        Err(StoreError::LeaseLost)
    ));
    let marker = j
        .append(a, step(&c, JournalKind::Truncated, &entry), CAP)
        .await;
    assert!(
        matches!(marker, Err(StoreError::InvalidArgument { .. })),
        "{marker:?}"
    );
    let not_object = json!(["a"]);
    let bad = j
        .append(a, step(&c, JournalKind::LlmTurn, &not_object), CAP)
        .await;
    assert!(
        matches!(bad, Err(StoreError::InvalidArgument { .. })),
        "{bad:?}"
    );
    assert!(j.episode(a, c.event.id).await?.is_empty());
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_episode_past_its_cap_gets_one_marker_and_nothing_more(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let (a, c) = claimed(&store, "a").await?;
    let big = json!({"result": "x".repeat(30_000)});
    let j = store.journal();
    let cap = 64 * 1024;
    assert_eq!(
        j.append(a, step(&c, JournalKind::ToolCall, &big), cap)
            .await?,
        Appended::At(0)
    );
    assert_eq!(
        j.append(a, step(&c, JournalKind::ToolCall, &big), cap)
            .await?,
        Appended::At(1)
    );
    // The third would pass 64 KiB: the marker takes its place.
    assert_eq!(
        j.append(a, step(&c, JournalKind::ToolCall, &big), cap)
            .await?,
        Appended::Truncated(2)
    );
    let small = json!({"ok": true});
    assert_eq!(
        j.append(a, step(&c, JournalKind::LlmTurn, &small), cap)
            .await?,
        Appended::Dropped
    );
    let episode = j.episode(a, c.event.id).await?;
    assert_eq!(episode.len(), 3);
    let marker = &episode[2];
    assert_eq!(marker.kind, JournalKind::Truncated);
    assert_eq!(marker.entry["dropped_kind"], "tool_call");
    assert_eq!(marker.entry["max_bytes"], cap);
    assert_eq!(
        marker.entry["journal_bytes"],
        episode[0].bytes + episode[1].bytes
    );
    // The episode still completes: the turn is written as ever.
    store
        .complete_tick(
            a,
            c.instance.id,
            c.session,
            TickCompletion::new(
                c.event.id,
                derived(AgentDecisionKind::Planned, Phase::Idle, true),
            ),
            &Default::default(),
        )
        .await?;
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM agent_state_ledger WHERE instance_id = $1",
            c.instance.id
        )
        .await?,
        1
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn concurrent_appends_of_one_episode_take_every_number_once(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let (a, c) = claimed(&store, "a").await?;
    let mut joins = Vec::new();
    for i in 0..16 {
        let s = store.clone();
        let (event_id, instance_id, session) = (c.event.id, c.instance.id, c.session);
        joins.push(tokio::spawn(async move {
            let entry = json!({"call": i});
            s.journal()
                .append(
                    a,
                    NewStep {
                        event_id,
                        instance_id,
                        session,
                        kind: JournalKind::ToolCall,
                        entry: &entry,
                    },
                    CAP,
                )
                .await
        }));
    }
    let mut seqs = Vec::new();
    for j in joins {
        match j.await?? {
            Appended::At(s) => seqs.push(s),
            other => panic!("{other:?}"),
        }
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (0..16).collect::<Vec<_>>());
    assert_eq!(store.journal().episode(a, c.event.id).await?.len(), 16);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn retention_prunes_old_journals_and_keeps_every_ledger_turn(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let (a, old) = claimed(&store, "a").await?;
    let entry = json!({"request": {}, "response": {}});
    let j = store.journal();
    for _ in 0..3 {
        j.append(a, step(&old, JournalKind::LlmTurn, &entry), CAP)
            .await?;
    }
    store
        .complete_tick(
            a,
            old.instance.id,
            old.session,
            TickCompletion::new(
                old.event.id,
                derived(AgentDecisionKind::Planned, Phase::Idle, true),
            ),
            &Default::default(),
        )
        .await?;
    store
        .events()
        .enqueue(
            a,
            old.instance.id,
            AgentEventKind::OperatorMessage,
            &json!({}),
            None,
        )
        .await?;
    let fresh = claim(&store, a, old.instance.id).await?;
    j.append(a, step(&fresh, JournalKind::LlmTurn, &entry), CAP)
        .await?;
    genesis_store::inspect::force_journal_age(
        &pool,
        old.event.id,
        Duration::from_secs(31 * 24 * 3600),
    )
    .await?;
    let retention = genesis_core::journal::DEFAULT_RETENTION;
    // In batches of two: 2, then 1, then nothing left to prune.
    assert_eq!(j.prune(retention, 2).await?, 2);
    assert_eq!(j.prune(retention, 2).await?, 1);
    assert_eq!(j.prune(retention, 2).await?, 0);
    assert!(j.episode(a, old.event.id).await?.is_empty());
    assert_eq!(
        j.episode(a, fresh.event.id).await?.len(),
        1,
        "a recent journal is kept"
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM agent_state_ledger WHERE instance_id = $1",
            old.instance.id
        )
        .await?,
        1,
        "the ledger turn is kept forever"
    );
    assert!(matches!(
        j.prune(retention, 0).await,
        Err(StoreError::InvalidArgument { .. })
    ));
    Ok(())
}
