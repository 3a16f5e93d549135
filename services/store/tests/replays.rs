//! Turn replays on a real PostgreSQL (genesis_core::replay): asking for
//! one checks the turn, its journal and the preset, and writes nothing on
//! a refusal; a claim is one pod's at a time and lapses; every session that
//! ever claimed a replay may record the attempts it paid, under the call
//! tag Replay against the replay (never the instance), drawn from the
//! credit window; only the current session settles it, once; concurrent
//! replays' credit holds never pass the ceiling together; another tenant
//! reaches none of it.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::time::Duration;

use chrono::Utc;
use common::*;
use genesis_core::journal::JournalKind;
use genesis_core::replay::{Answered, ReplayAction, ReplayOutcome, ReplayStatus};
use genesis_core::{AgentDecisionKind, AgentEventKind, Phase};
use genesis_store::journal::NewStep;
use genesis_store::llm::{CreditDraw, NewCallAttempt, NewPreset, PresetCouple};
use genesis_store::replays::ReplayClaim;
use genesis_store::{Store, StoreError, TickCompletion};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

const CAP: u32 = 64 * 1024;
const TTL: Duration = Duration::from_secs(600);

fn draw(limit_usd: f64) -> CreditDraw {
    CreditDraw {
        week_start: genesis_store::credit::week_start(Utc::now()),
        limit_usd,
    }
}

/// A completed turn 1 of the tenant's SOA; with `journaled`, its episode
/// has one LLM turn in the journal. The instance.
async fn turn(store: &Store, t: Uuid, journaled: bool) -> anyhow::Result<Uuid> {
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
    let c = claim(store, t, inst.id).await?;
    if journaled {
        let entry = json!({
            "turn": 1,
            "invocation_id": "inv-1",
            "request": {"model": "claude-sonnet-4-5", "system": "You are the SOA.",
                        "messages": [{"role": "user", "content": "hello"}],
                        "tools": ["soa_send_message", "soa_query_telemetry"],
                        "max_output_tokens": 1024},
            "response": {"tool_calls": [], "served_model": "claude-sonnet-4-5",
                         "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 2}},
            "attempts": [{"provider": "anthropic", "credential_name": "K",
                          "requested_model": "claude-sonnet-4-5", "served_model": "claude-sonnet-4-5",
                          "outcome": "success", "latency_ms": 5,
                          "usage": {"input_tokens": 10, "output_tokens": 2}}],
        });
        store
            .journal()
            .append(
                t,
                NewStep {
                    event_id: c.event.id,
                    instance_id: inst.id,
                    session: c.session,
                    kind: JournalKind::LlmTurn,
                    entry: &entry,
                },
                CAP,
            )
            .await?;
    }
    store
        .complete_tick(
            t,
            inst.id,
            c.session,
            TickCompletion::new(
                c.event.id,
                derived(AgentDecisionKind::ActedWithTool, Phase::Idle, true),
            ),
            &Default::default(),
        )
        .await?;
    Ok(inst.id)
}

async fn preset(store: &Store, t: Uuid) -> anyhow::Result<Uuid> {
    Ok(store
        .llm()
        .create_preset(
            t,
            NewPreset {
                name: "cheap".into(),
                primary: PresetCouple {
                    model: "claude-haiku-4-5".into(),
                    provider: "anthropic".into(),
                    backend: String::new(),
                    credentials: vec!["ANTHROPIC_API_KEY".into()],
                },
                fallback: vec![],
                overlays: json!({}),
            },
        )
        .await?
        .id)
}

fn attempt(cost_usd: f64) -> NewCallAttempt {
    NewCallAttempt {
        instance_id: Uuid::nil(),
        session: Uuid::nil(),
        invocation_id: "inv-replay".into(),
        site_id: "Agent:Planning".into(),
        requested_model: "claude-haiku-4-5".into(),
        served_model: "claude-haiku-4-5".into(),
        provider: "anthropic".into(),
        credential_name: "ANTHROPIC_API_KEY".into(),
        outcome: "success".into(),
        input_tokens: 1000,
        output_tokens: 100,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        latency_ms: 12,
        error_message: String::new(),
        cost_usd,
        priced_as: None,
        pricing_source: None,
        prompt_overlay_sha256: None,
    }
}

fn outcome() -> ReplayOutcome {
    ReplayOutcome {
        end: "Complete".into(),
        reasoning_summary: "would greet".into(),
        wait_condition: "the next event".into(),
        reason: String::new(),
        actions: vec![ReplayAction {
            tool_name: "soa_send_message".into(),
            arguments: json!({"body": "hi"}),
            result: json!({"replay": "not executed (replay)"}),
            answered: Answered::NotExecuted,
        }],
        turns: 1,
        input_tokens: 1000,
        output_tokens: 100,
        served_models: vec!["claude-haiku-4-5".into()],
    }
}

fn session_of(c: ReplayClaim) -> Uuid {
    match c {
        ReplayClaim::Claimed(row) => {
            assert_eq!(row.status, ReplayStatus::Running);
            row.session.unwrap()
        }
        other => panic!("expected a claim, got {other:?}"),
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn asking_checks_the_turn_its_journal_and_the_preset_and_refusals_write_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let b = tenant(&store, "b").await?;
    let inst = turn(&store, a, true).await?;
    let p = preset(&store, a).await?;
    let theirs = preset(&store, b).await?;
    let replays = store.replays();
    let refused = [
        replays.create(a, inst, 2, p).await,
        replays.create(a, inst, 0, p).await,
        replays.create(a, inst, 1, theirs).await,
        replays.create(b, inst, 1, theirs).await,
        replays.create(a, inst, 1, Uuid::new_v4()).await,
    ];
    assert!(matches!(&refused[0], Err(StoreError::NotFound { what }) if what == "ledger turn"));
    assert!(
        matches!(&refused[1], Err(StoreError::InvalidArgument { field, .. }) if field == "turn_number")
    );
    assert!(matches!(&refused[2], Err(StoreError::NotFound { what }) if what == "llm preset"));
    assert!(matches!(&refused[3], Err(StoreError::NotFound { what }) if what == "ledger turn"));
    assert!(matches!(&refused[4], Err(StoreError::NotFound { what }) if what == "llm preset"));
    // A turn without a journal (pruned, or never written) has nothing to
    // replay.
    let c = tenant(&store, "c").await?;
    let bare = turn(&store, c, false).await?;
    let cp = preset(&store, c).await?;
    assert!(matches!(
        replays.create(c, bare, 1, cp).await,
        Err(StoreError::FailedPrecondition { .. })
    ));
    assert_eq!(
        count(&pool, "SELECT count(*) FROM agent_replays WHERE $1", true).await?,
        0
    );

    let row = replays.create(a, inst, 1, p).await?;
    assert_eq!(row.status, ReplayStatus::Pending);
    assert_eq!(row.published_at, None);
    // The publisher's sweep sees it until it is marked.
    let unpublished = replays.unpublished(Duration::ZERO, 10).await?;
    assert_eq!(
        unpublished.iter().map(|u| u.id).collect::<Vec<_>>(),
        [row.id]
    );
    replays.mark_published(&[row.id]).await?;
    assert!(replays.unpublished(Duration::ZERO, 10).await?.is_empty());
    // Another tenant reads and claims nothing of it.
    assert!(matches!(
        replays.get(b, row.id).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        replays.claim(b, row.id, TTL).await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        replays.get(a, row.id).await?.row.status,
        ReplayStatus::Pending
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_replay_is_claimed_once_its_attempts_bill_the_replay_tag_and_it_settles_once(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let inst = turn(&store, a, true).await?;
    let p = preset(&store, a).await?;
    let replays = store.replays();
    let id = replays.create(a, inst, 1, p).await?.id;

    let first = session_of(replays.claim(a, id, TTL).await?);
    assert!(matches!(
        replays.claim(a, id, TTL).await?,
        ReplayClaim::Held(_)
    ));
    // The first pod died: its claim lapses and the next one takes over.
    sqlx::query(
        "UPDATE agent_replays SET claimed_until = now() - interval '1 second' WHERE id = $1",
    )
    .bind(id)
    .execute(&pool)
    .await?;
    let second = session_of(replays.claim(a, id, TTL).await?);
    assert_ne!(first, second);

    let snapshots_before = count(
        &pool,
        "SELECT count(*) FROM llm_call_snapshots WHERE instance_id = $1",
        inst,
    )
    .await?;
    // Both sessions' paid attempts are kept; only the second still runs it.
    let late = replays
        .record_attempt((a, id, first), &attempt(0.002), draw(50.0))
        .await?;
    assert!(!late.current);
    let now = replays
        .record_attempt((a, id, second), &attempt(0.003), draw(50.0))
        .await?;
    assert!(now.current);
    assert_eq!(now.snapshot.call_tag, "Replay");
    assert_eq!(now.snapshot.replay_id, Some(id));
    assert_eq!(now.snapshot.instance_id, None);
    // A session that never claimed it records nothing.
    assert!(matches!(
        replays
            .record_attempt((a, id, Uuid::new_v4()), &attempt(9.0), draw(50.0))
            .await,
        Err(StoreError::NotFound { .. })
    ));
    let view = replays.get(a, id).await?;
    assert_eq!(view.attempts, 2);
    assert!((view.cost_usd - 0.005).abs() < 1e-12, "{}", view.cost_usd);
    let spent = store
        .credit()
        .current(a, genesis_store::credit::week_start(Utc::now()), 50.0)
        .await?;
    assert!((spent.spent_usd - 0.005).abs() < 1e-12, "{spent:?}");
    // Nothing of the agent's moved: no snapshot of the instance, no turn.
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM llm_call_snapshots WHERE instance_id = $1",
            inst
        )
        .await?,
        snapshots_before
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM agent_state_ledger WHERE instance_id = $1",
            inst
        )
        .await?,
        1
    );

    // Only the current session settles it, and only once.
    assert_eq!(
        replays.complete((a, id, first), Ok(&outcome())).await,
        Err(StoreError::LeaseLost)
    );
    assert_eq!(
        replays.complete((a, id, second), Ok(&outcome())).await?,
        ReplayStatus::Done
    );
    assert_eq!(
        replays.complete((a, id, second), Err("again")).await,
        Err(StoreError::LeaseLost)
    );
    assert!(matches!(
        replays.claim(a, id, TTL).await?,
        ReplayClaim::Settled(ReplayStatus::Done)
    ));
    let done = replays.get(a, id).await?;
    assert_eq!(done.row.status, ReplayStatus::Done);
    let kept: ReplayOutcome = serde_json::from_value(done.row.outcome.unwrap())?;
    assert_eq!(kept, outcome());
    // A failure needs its reason.
    let other = replays.create(a, inst, 1, p).await?.id;
    let s = session_of(replays.claim(a, other, TTL).await?);
    assert!(matches!(
        replays.complete((a, other, s), Err("  ")).await,
        Err(StoreError::InvalidArgument { .. })
    ));
    assert_eq!(
        replays.complete((a, other, s), Err("no couple")).await?,
        ReplayStatus::Failed
    );
    assert_eq!(replays.get(a, other).await?.row.error, "no couple");
    Ok(())
}

/// Concurrent replays of one tenant reserving the last of the credit: the
/// hold rule they share with ticks and coders lets through only what fits,
/// however the reservations interleave; a settled replay's hold lapses.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn concurrent_replay_holds_never_pass_the_ceiling_together(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = tenant(&store, "a").await?;
    let inst = turn(&store, a, true).await?;
    let p = preset(&store, a).await?;
    let mut claimed = Vec::new();
    for _ in 0..6 {
        let id = store.replays().create(a, inst, 1, p).await?.id;
        claimed.push((id, session_of(store.replays().claim(a, id, TTL).await?)));
    }
    // A ceiling of $1: each hold asks $0.40, so two fit, never three.
    let tasks: Vec<_> = claimed
        .iter()
        .map(|&(id, s)| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .replays()
                    .reserve_credit((a, id, s), draw(1.0), 0.40)
                    .await
            })
        })
        .collect();
    let mut granted = 0;
    for t in tasks {
        if t.await??.granted {
            granted += 1;
        }
    }
    assert_eq!(granted, 2, "holds granted past the ceiling");
    // A stale session reserves nothing.
    assert_eq!(
        store
            .replays()
            .reserve_credit((a, claimed[0].0, Uuid::new_v4()), draw(1.0), 0.1)
            .await,
        Err(StoreError::LeaseLost)
    );
    // Settling the holders frees the window for the others.
    for &(id, s) in &claimed {
        store.replays().complete((a, id, s), Err("stopped")).await?;
    }
    let id = store.replays().create(a, inst, 1, p).await?.id;
    let s = session_of(store.replays().claim(a, id, TTL).await?);
    assert!(
        store
            .replays()
            .reserve_credit((a, id, s), draw(1.0), 0.9)
            .await?
            .granted
    );
    Ok(())
}
