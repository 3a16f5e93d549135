//! The tick supervisor primitives against the real PostgreSQL: lease CAS
//! under contention, draining under concurrency, session guard, reclaim,
//! dead-lettering, STUCK halt, idle/re-plan counters and Reset.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use genesis_core::{
    AgentDecisionKind, AgentDispatcherOptions, AgentEventKind, AttentionKind, Completion,
    InstanceStatus, Phase, PlanInputHash, TickOutcome,
};
use genesis_store::{ClaimOutcome, LedgerAction, StoreError, TickCompletion, TickDecision};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn sixteen_concurrent_claimers_exactly_one_holds_the_lease(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    message(&store, t, inst.id, json!({"text": "hi"})).await?;
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.claim_tick(t, inst.id, Uuid::new_v4(), TTL, 5).await
        }));
    }
    let mut claimed = 0;
    let mut held = 0;
    for task in tasks {
        match task.await?? {
            ClaimOutcome::Claimed(_) => claimed += 1,
            ClaimOutcome::LeaseHeld => held += 1,
            other => anyhow::bail!("unexpected {other:?}"),
        }
    }
    assert_eq!((claimed, held), (1, 15));
    let row = store.instances().get(t, inst.id).await?;
    assert!(row.lease_session.is_some());
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn eight_workers_drain_a_thousand_events_over_fifty_instances_exactly_once(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let tenants = [tenant(&store, "a").await?, tenant(&store, "b").await?];
    let mut instances = Vec::new();
    for i in 0..50 {
        let t = tenants[i % 2];
        instances.push((t, soa(&store, t).await?.id));
    }
    for (t, id) in &instances {
        for n in 0..20 {
            message(&store, *t, *id, json!({"n": n})).await?;
        }
    }
    let instances = Arc::new(instances);
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..8 {
        let (store, instances, done) = (store.clone(), instances.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
            let mut i = w * 7;
            while done.load(Ordering::SeqCst) < 1000 {
                anyhow::ensure!(tokio::time::Instant::now() < deadline, "drain timed out");
                let (t, id) = instances[i % instances.len()];
                i += 1;
                match store.claim_tick(t, id, Uuid::new_v4(), TTL, 5).await? {
                    ClaimOutcome::Claimed(c) => {
                        complete_planned(&store, t, &c).await?;
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                    ClaimOutcome::LeaseHeld | ClaimOutcome::NothingDue { .. } => {}
                }
            }
            anyhow::Ok(())
        }));
    }
    for w in workers {
        w.await??;
    }
    assert_eq!(done.load(Ordering::SeqCst), 1000);
    let consumed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue WHERE event_kind = 'OperatorMessage' AND consumed_at IS NOT NULL",
    )
    .fetch_one(&pool)
    .await?;
    let all_consumed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM agent_event_queue WHERE consumed_at IS NOT NULL")
            .fetch_one(&pool)
            .await?;
    let ledger: i64 = sqlx::query_scalar("SELECT count(*) FROM agent_state_ledger")
        .fetch_one(&pool)
        .await?;
    let distinct_events: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT event_id) FROM agent_state_ledger")
            .fetch_one(&pool)
            .await?;
    assert_eq!(consumed, 1000);
    assert_eq!(ledger, all_consumed);
    assert_eq!(distinct_events, 1000);
    let heartbeats: Vec<i64> = sqlx::query_scalar(
        "SELECT count(e.id) FROM agent_instances i LEFT JOIN agent_event_queue e ON e.instance_id = i.id
           AND e.event_kind = 'AgentTick' AND e.consumed_at IS NULL AND e.dead_lettered_at IS NULL
         WHERE i.status = 'active' GROUP BY i.id",
    )
    .fetch_all(&pool)
    .await?;
    assert_eq!(heartbeats.len(), 50);
    assert!(
        heartbeats.iter().all(|n| *n == 1),
        "pending heartbeats per instance: {heartbeats:?}"
    );
    let leases: i64 =
        sqlx::query_scalar("SELECT count(*) FROM agent_instances WHERE lease_session IS NOT NULL")
            .fetch_one(&pool)
            .await?;
    assert_eq!(leases, 0);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn complete_with_a_stale_session_writes_nothing_and_returns_lease_lost(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    message(&store, t, inst.id, json!({})).await?;
    let first = match store
        .claim_tick(t, inst.id, Uuid::new_v4(), Duration::from_millis(200), 5)
        .await?
    {
        ClaimOutcome::Claimed(c) => *c,
        other => anyhow::bail!("{other:?}"),
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = claim(&store, t, inst.id).await?;
    assert_eq!(second.event.id, first.event.id);
    // The whole instance row (phase, next tick, every counter, the hash, the
    // lease) as the live session holds it: the stale completion must leave
    // every column as it is, not only the lease and the last decision.
    let instance_row = "SELECT to_jsonb(i)::text FROM agent_instances i WHERE id = $1";
    let before: String = sqlx::query_scalar(instance_row)
        .bind(inst.id)
        .fetch_one(&pool)
        .await?;

    let stale = TickCompletion::new(
        first.event.id,
        derived(AgentDecisionKind::Planned, Phase::Idle, true),
    );
    let err = store
        .complete_tick(
            t,
            inst.id,
            first.session,
            stale,
            &AgentDispatcherOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::LeaseLost);
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM agent_state_ledger WHERE instance_id = $1",
            inst.id
        )
        .await?,
        0
    );
    let after: String = sqlx::query_scalar(instance_row)
        .bind(inst.id)
        .fetch_one(&pool)
        .await?;
    assert_eq!(
        after, before,
        "a stale completion wrote to the instance row"
    );
    let row = store.instances().get(t, inst.id).await?;
    assert_eq!(row.lease_session, Some(second.session));
    assert_eq!(row.last_decision_kind, None);
    let events = store.events().pending(t, inst.id).await?;
    assert_eq!(
        events.len(),
        1,
        "event still unconsumed and no heartbeat written"
    );

    // A session that never claimed is refused the same way.
    let never = TickCompletion::new(
        first.event.id,
        derived(AgentDecisionKind::Planned, Phase::Idle, true),
    );
    let err = store
        .complete_tick(
            t,
            inst.id,
            Uuid::new_v4(),
            never,
            &AgentDispatcherOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::LeaseLost);

    // The live session completes.
    let turn = complete_planned(&store, t, &second).await?;
    assert_eq!(turn.turn_number, 1);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_expired_lease_is_reclaimed_and_its_event_retried_with_attempts_incremented(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    message(&store, t, inst.id, json!({})).await?;
    let s1 = Uuid::new_v4();
    let first = match store
        .claim_tick(t, inst.id, s1, Duration::from_millis(200), 5)
        .await?
    {
        ClaimOutcome::Claimed(c) => *c,
        other => anyhow::bail!("{other:?}"),
    };
    assert_eq!(first.event.attempts, 1);
    // Still live: a second claimer is refused.
    assert_eq!(
        store.claim_tick(t, inst.id, Uuid::new_v4(), TTL, 5).await?,
        ClaimOutcome::LeaseHeld
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = claim(&store, t, inst.id).await?;
    assert_eq!(second.event.id, first.event.id);
    assert_eq!(second.event.attempts, 2);
    assert_eq!(second.event.claimed_session, Some(second.session));
    // The old session can no longer renew.
    assert_eq!(
        store.renew_lease(t, inst.id, s1, TTL).await.unwrap_err(),
        StoreError::LeaseLost
    );
    store.renew_lease(t, inst.id, second.session, TTL).await?;
    Ok(())
}

/// Moves the lease of `instance` into the past, as time would.
async fn expire_lease(pool: &PgPool, instance: Uuid) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE agent_instances SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(instance)
    .execute(pool)
    .await?;
    Ok(())
}

async fn lease_of(
    pool: &PgPool,
    instance: Uuid,
) -> anyhow::Result<(Option<Uuid>, Option<chrono::DateTime<chrono::Utc>>)> {
    Ok(
        sqlx::query_as("SELECT lease_session, lease_expires_at FROM agent_instances WHERE id = $1")
            .bind(instance)
            .fetch_one(pool)
            .await?,
    )
}

/// The holder's own session renews a live lease, but once the lease has
/// expired (nobody has reclaimed it yet) renewal is LeaseLost and writes
/// nothing: the expiry stays in the past and the instance stays claimable.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_expired_lease_cannot_be_renewed_by_its_own_session(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    message(&store, t, inst.id, json!({})).await?;
    let first = claim(&store, t, inst.id).await?;
    store.renew_lease(t, inst.id, first.session, TTL).await?;
    expire_lease(&pool, inst.id).await?;
    let before = lease_of(&pool, inst.id).await?;
    assert_eq!(
        store
            .renew_lease(t, inst.id, first.session, TTL)
            .await
            .unwrap_err(),
        StoreError::LeaseLost
    );
    assert_eq!(lease_of(&pool, inst.id).await?, before, "nothing written");
    let second = claim(&store, t, inst.id).await?;
    assert_eq!(second.event.id, first.event.id);
    assert_eq!(second.event.attempts, 2);
    Ok(())
}

/// A renewal racing a reclaim of the same expired lease: the reclaim wins
/// every time, the renewal is LeaseLost, and the new session holds it.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_renewal_racing_a_reclaim_of_an_expired_lease_never_wins(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    message(&store, t, inst.id, json!({})).await?;
    let mut holder = claim(&store, t, inst.id).await?.session;
    for round in 0..8 {
        expire_lease(&pool, inst.id).await?;
        let next = Uuid::new_v4();
        let (renewed, claimed) = tokio::join!(
            store.renew_lease(t, inst.id, holder, TTL),
            store.claim_tick(t, inst.id, next, TTL, 100),
        );
        assert_eq!(renewed, Err(StoreError::LeaseLost), "round {round}");
        assert!(
            matches!(claimed?, ClaimOutcome::Claimed(ref c) if c.session == next),
            "round {round}"
        );
        assert_eq!(
            lease_of(&pool, inst.id).await?.0,
            Some(next),
            "round {round}"
        );
        holder = next;
    }
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_event_past_max_attempts_is_dead_lettered_with_an_attention_request(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let ev = message(&store, t, inst.id, json!({})).await?.event;
    for attempt in 1..=2 {
        match store
            .claim_tick(t, inst.id, Uuid::new_v4(), Duration::from_millis(100), 2)
            .await?
        {
            ClaimOutcome::Claimed(c) => assert_eq!(c.event.attempts, attempt),
            other => anyhow::bail!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let outcome = store.claim_tick(t, inst.id, Uuid::new_v4(), TTL, 2).await?;
    let ClaimOutcome::NothingDue {
        heartbeat,
        dead_lettered,
    } = outcome
    else {
        anyhow::bail!("expected nothing due, got {outcome:?}");
    };
    assert_eq!(dead_lettered, 1);
    assert_eq!(heartbeat.event_kind, AgentEventKind::AgentTick);
    let rows = store.events().list(t, inst.id).await?;
    let dead = rows
        .iter()
        .find(|e| e.id == ev.id)
        .ok_or_else(|| anyhow::anyhow!("event gone"))?;
    assert!(dead.dead_lettered_at.is_some());
    assert!(dead.consumed_at.is_none());
    let requests = store.attention().list(t, None).await?;
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].kind, AttentionKind::DeadLetter);
    assert_eq!(requests[0].instance_id, Some(inst.id));
    assert_eq!(requests[0].metadata["eventId"], json!(ev.id));
    assert_eq!(store.instances().get(t, inst.id).await?.lease_session, None);
    Ok(())
}

/// The pod's outcome for a tick of `kind` that raised nothing and had no
/// side effect.
fn outcome(kind: AgentEventKind, completion: Completion) -> TickDecision {
    TickDecision::Outcome(TickOutcome {
        event_kind: kind,
        raised_escalation: false,
        side_effecting_actions: 0,
        completion,
    })
}

fn blocked_outcome(kind: AgentEventKind) -> TickDecision {
    outcome(kind, Completion::Blocked)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn three_blocked_turns_halt_the_instance_with_no_heartbeat_and_one_attention_request(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let opts = AgentDispatcherOptions::default();
    for n in 0..4 {
        message(&store, t, inst.id, json!({"n": n})).await?;
    }
    // blocked, then a clean turn resets the streak.
    let c = claim(&store, t, inst.id).await?;
    let turn = store
        .complete_tick(
            t,
            inst.id,
            c.session,
            TickCompletion::new(c.event.id, blocked_outcome(c.event.event_kind)),
            &opts,
        )
        .await?;
    assert_eq!(
        (turn.consecutive_blocked_turns, turn.phase),
        (1, Phase::IdleBlocked)
    );
    assert_eq!(turn.decision_kind, AgentDecisionKind::WaitingForEvent);
    let c = claim(&store, t, inst.id).await?;
    let turn = complete_planned(&store, t, &c).await?;
    assert_eq!(turn.consecutive_blocked_turns, 0);
    message(&store, t, inst.id, json!({"n": 9})).await?;

    let mut last = None;
    for expected in 1..=3u32 {
        let c = claim(&store, t, inst.id).await?;
        let turn = store
            .complete_tick(
                t,
                inst.id,
                c.session,
                TickCompletion::new(c.event.id, blocked_outcome(c.event.event_kind)),
                &opts,
            )
            .await?;
        assert_eq!(turn.consecutive_blocked_turns, expected);
        assert_eq!(turn.halted, expected == 3);
        last = Some(turn);
    }
    let last = last.ok_or_else(|| anyhow::anyhow!("no turn"))?;
    assert_eq!(last.phase, Phase::HaltedStuck);
    assert_eq!(last.next_tick_at, None);
    let row = store.instances().get(t, inst.id).await?;
    assert_eq!(row.status, InstanceStatus::Closed);
    assert_eq!(row.phase, Phase::HaltedStuck);
    assert_eq!(row.lease_session, None);
    let pending_ticks = store
        .events()
        .pending(t, inst.id)
        .await?
        .into_iter()
        .filter(|e| e.event_kind == AgentEventKind::AgentTick)
        .count();
    assert_eq!(pending_ticks, 0);
    let stuck: Vec<_> = store
        .attention()
        .list(t, None)
        .await?
        .into_iter()
        .filter(|a| a.kind == AttentionKind::StuckHalt)
        .collect();
    assert_eq!(stuck.len(), 1);
    assert_eq!(Some(stuck[0].id), last.attention_request_id);
    // The words are core's halt notice; the store adds the turn's id.
    assert_eq!(stuck[0].title, "Agent Soa halted: stuck");
    assert_eq!(
        stuck[0].body,
        format!(
            "Agent instance {} was blocked for 3 consecutive turns and has been closed.",
            inst.id
        )
    );
    assert_eq!(stuck[0].metadata["consecutiveBlockedTurns"], json!(3));
    assert_eq!(stuck[0].metadata["ledgerId"], json!(last.ledger_id));
    // A closed instance cannot be claimed.
    assert!(matches!(
        store.claim_tick(t, inst.id, Uuid::new_v4(), TTL, 5).await,
        Err(StoreError::FailedPrecondition { .. })
    ));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn blocked_turns_without_the_enforced_guard_count_but_never_halt(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let opts = AgentDispatcherOptions {
        enforce_stuck_guard: false,
        ..AgentDispatcherOptions::default()
    };
    for _ in 0..4 {
        message(&store, t, inst.id, json!({})).await?;
    }
    for expected in 1..=4u32 {
        let c = claim(&store, t, inst.id).await?;
        let turn = store
            .complete_tick(
                t,
                inst.id,
                c.session,
                TickCompletion::new(c.event.id, blocked_outcome(c.event.event_kind)),
                &opts,
            )
            .await?;
        assert_eq!(
            (turn.consecutive_blocked_turns, turn.halted),
            (expected, false)
        );
    }
    assert_eq!(
        store.instances().get(t, inst.id).await?.status,
        InstanceStatus::Active
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn idle_ticks_count_up_and_a_real_plan_restarts_the_forced_replan_count(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let opts = AgentDispatcherOptions {
        standing_agent_heartbeat_interval: Duration::from_millis(1),
        forced_replan_every_n_idle_ticks: 3,
        ..AgentDispatcherOptions::default()
    };
    let h1 = PlanInputHash::compute(AgentEventKind::AgentTick, None, "ok");
    let h2 = PlanInputHash::compute(AgentEventKind::AgentTick, None, "incident");
    store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::AgentInitialized,
            &json!({}),
            None,
        )
        .await?;

    // (hash, completion, expected consecutive_idle, expected since_replan, forced due)
    let script: Vec<(&PlanInputHash, Completion, u32, u32, bool)> = vec![
        (&h1, Completion::Complete, 0, 0, false), // AgentInitialized: never idle
        (&h1, Completion::ShortCircuited, 1, 1, false),
        (&h1, Completion::ShortCircuited, 2, 2, true),
        (&h1, Completion::Complete, 3, 0, false), // forced re-plan ran: idle by hash, count restarts
        (&h2, Completion::Complete, 0, 0, false), // inputs changed
    ];
    for (hash, completion, idle, since, forced) in script {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let c = claim(&store, t, inst.id).await?;
        let mut done = TickCompletion::new(c.event.id, outcome(c.event.event_kind, completion));
        done.plan_input_hash = Some(hash.clone());
        let turn = store
            .complete_tick(t, inst.id, c.session, done, &opts)
            .await?;
        assert_eq!(
            (
                turn.consecutive_idle_ticks,
                turn.idle_ticks_since_replan,
                turn.forced_replan_due
            ),
            (idle, since, forced),
            "turn {}",
            turn.turn_number
        );
        let row = store.instances().get(t, inst.id).await?;
        assert_eq!(row.consecutive_idle_ticks, idle as i32);
        assert_eq!(row.idle_ticks_since_replan, since as i32);
        assert_eq!(row.plan_input_hash.as_deref(), Some(hash.as_str()));
    }
    let tail = store.ledger().tail(t, inst.id, 12).await?;
    assert_eq!(tail.len(), 5);
    assert_eq!(tail[0].decision_kind, AgentDecisionKind::Initialized);
    assert_eq!(tail[1].decision_kind, AgentDecisionKind::Heartbeat);
    assert_eq!(tail[1].event_kind, AgentEventKind::AgentTick);
    Ok(())
}

/// The shipped ForcedReplanEveryNIdleTicks (20): nineteen unchanged
/// heartbeats short-circuit with no forced re-plan due, the twentieth idle
/// tick is the forced one, and a plan restarts the count.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_shipped_default_forces_a_replan_on_the_twentieth_idle_tick(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let opts = AgentDispatcherOptions {
        standing_agent_heartbeat_interval: Duration::from_millis(1),
        ..AgentDispatcherOptions::default()
    };
    assert_eq!(opts.forced_replan_every_n_idle_ticks, 20);
    let hash = PlanInputHash::compute(AgentEventKind::AgentTick, None, "ok");
    store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::AgentInitialized,
            &json!({}),
            None,
        )
        .await?;
    let mut forced_at = Vec::new();
    // The initialization, 19 short-circuits, the forced plan, one more idle.
    for tick in 0..=21u32 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let c = claim(&store, t, inst.id).await?;
        let completion = if tick == 0 || tick == 20 {
            Completion::Complete
        } else {
            Completion::ShortCircuited
        };
        let mut done = TickCompletion::new(c.event.id, outcome(c.event.event_kind, completion));
        done.plan_input_hash = Some(hash.clone());
        let turn = store
            .complete_tick(t, inst.id, c.session, done, &opts)
            .await?;
        if turn.forced_replan_due {
            forced_at.push((tick, turn.idle_ticks_since_replan));
        }
        if tick == 20 {
            assert_eq!(
                turn.idle_ticks_since_replan, 0,
                "the plan restarts the count"
            );
        }
    }
    assert_eq!(
        forced_at,
        vec![(19, 19)],
        "due once, after the 19th short-circuit: the 20th idle tick plans"
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_turn_records_its_actions_consumes_its_event_and_keeps_exactly_one_heartbeat(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let ev = message(&store, t, inst.id, json!({"text": "status?"}))
        .await?
        .event;
    let c = claim(&store, t, inst.id).await?;
    let mut done = TickCompletion::new(
        c.event.id,
        TickDecision::Outcome(TickOutcome {
            event_kind: AgentEventKind::OperatorMessage,
            raised_escalation: false,
            side_effecting_actions: 1,
            completion: Completion::Complete,
        }),
    );
    done.actions = vec![
        LedgerAction {
            tool_name: "agent_query_memory".into(),
            arguments: json!({"q": "x"}),
            result: Some(json!([])),
            side_effecting: false,
            blocked: false,
        },
        LedgerAction {
            tool_name: "soa_send_message".into(),
            arguments: json!({"body": "all green"}),
            result: None,
            side_effecting: true,
            blocked: false,
        },
    ];
    done.reasoning_summary = Some("answered the operator about cluster status".into());
    done.served_model = Some("claude-opus-4-8".into());
    done.cost_usd = Some(0.0125);
    done.input_tokens = Some(1200);
    done.output_tokens = Some(80);
    let turn = store
        .complete_tick(
            t,
            inst.id,
            c.session,
            done,
            &AgentDispatcherOptions::default(),
        )
        .await?;
    assert_eq!(turn.decision_kind, AgentDecisionKind::ActedWithTool);
    assert_eq!(turn.phase, Phase::Acted);
    let actions = store.ledger().actions(t, turn.ledger_id).await?;
    assert_eq!(
        actions
            .iter()
            .map(|a| (a.ordinal, a.tool_name.as_str(), a.side_effecting))
            .collect::<Vec<_>>(),
        vec![
            (0, "agent_query_memory", false),
            (1, "soa_send_message", true)
        ]
    );
    let tail = store.ledger().tail(t, inst.id, 1).await?;
    assert_eq!(tail[0].event_id, Some(ev.id));
    assert_eq!(tail[0].event_payload, json!({"text": "status?"}));
    assert_eq!(tail[0].cost_usd, Some(0.0125));
    assert_eq!(
        store
            .ledger()
            .search(t, Some(inst.id), "cluster", 5)
            .await?
            .len(),
        1
    );
    let pending = store.events().pending(t, inst.id).await?;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].event_kind, AgentEventKind::AgentTick);
    assert_eq!(Some(pending[0].id), turn.heartbeat_event_id);
    let row = store.instances().get(t, inst.id).await?;
    assert_eq!(row.next_tick_at, Some(pending[0].visible_at));
    assert_eq!(
        row.last_decision_kind,
        Some(AgentDecisionKind::ActedWithTool)
    );
    // An explicit heartbeat enqueue while one is pending returns that one.
    let again = store
        .events()
        .enqueue(t, inst.id, AgentEventKind::AgentTick, &json!({}), None)
        .await?;
    assert!(!again.created);
    assert_eq!(again.event.id, pending[0].id);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_outcome_for_a_different_event_kind_is_refused_and_writes_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    message(&store, t, inst.id, json!({})).await?;
    let c = claim(&store, t, inst.id).await?;
    let wrong = TickCompletion::new(c.event.id, blocked_outcome(AgentEventKind::AgentTick));
    let err = store
        .complete_tick(
            t,
            inst.id,
            c.session,
            wrong,
            &AgentDispatcherOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidArgument { ref field, .. } if field == "outcome.event_kind"),
        "{err:?}"
    );
    let unknown_event = TickCompletion::new(
        Uuid::new_v4(),
        derived(AgentDecisionKind::Planned, Phase::Idle, true),
    );
    let err = store
        .complete_tick(
            t,
            inst.id,
            c.session,
            unknown_event,
            &AgentDispatcherOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidArgument { ref field, .. } if field == "event_id"),
        "{err:?}"
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM agent_state_ledger WHERE instance_id = $1",
            inst.id
        )
        .await?,
        0
    );
    assert_eq!(
        store.instances().get(t, inst.id).await?.lease_session,
        Some(c.session)
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_unknown_stored_decision_kind_loads_as_other_and_round_trips(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    message(&store, t, inst.id, json!({})).await?;
    let c = claim(&store, t, inst.id).await?;
    let kind = AgentDecisionKind::Other("DelegatedToPeer".into());
    let turn = store
        .complete_tick(
            t,
            inst.id,
            c.session,
            TickCompletion::new(c.event.id, derived(kind.clone(), Phase::Idle, true)),
            &AgentDispatcherOptions::default(),
        )
        .await?;
    assert_eq!(turn.decision_kind, kind);
    assert_eq!(
        store.ledger().tail(t, inst.id, 1).await?[0].decision_kind,
        kind
    );
    assert_eq!(
        store.instances().get(t, inst.id).await?.last_decision_kind,
        Some(kind)
    );
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn reset_is_refused_mid_tick_and_otherwise_clears_the_ledger_and_reseeds_the_opener(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    for _ in 0..3 {
        message(&store, t, inst.id, json!({})).await?;
    }
    let c = claim(&store, t, inst.id).await?;
    let err = store.reset_instance(t, inst.id).await.unwrap_err();
    assert!(
        matches!(err, StoreError::FailedPrecondition { .. }),
        "{err:?}"
    );
    complete_planned(&store, t, &c).await?;
    assert_eq!(store.ledger().count(t, inst.id).await?, 1);

    let reset = store.reset_instance(t, inst.id).await?;
    assert_eq!(reset.cleared_turns, 1);
    assert_eq!(reset.drained_events, 3, "two messages and the heartbeat");
    assert_eq!(store.ledger().count(t, inst.id).await?, 0);
    let pending = store.events().pending(t, inst.id).await?;
    assert_eq!(
        pending
            .iter()
            .map(|e| (e.id, e.event_kind))
            .collect::<Vec<_>>(),
        vec![(reset.event_id, AgentEventKind::AgentInitialized)]
    );
    let row = store.instances().get(t, inst.id).await?;
    assert_eq!(
        (
            row.consecutive_idle_ticks,
            row.consecutive_blocked_turns,
            row.idle_ticks_since_replan
        ),
        (0, 0, 0)
    );
    assert_eq!(row.last_decision_kind, None);
    // Wrong tenant: nothing found, nothing changed.
    let other = tenant(&store, "b").await?;
    assert!(matches!(
        store.reset_instance(other, inst.id).await,
        Err(StoreError::NotFound { .. })
    ));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn nothing_due_seeds_one_heartbeat_and_releases_the_lease(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let mut seen = HashSet::new();
    for _ in 0..3 {
        match store.claim_tick(t, inst.id, Uuid::new_v4(), TTL, 5).await? {
            // next_tick_at is null: the first beat is due now and gets claimed.
            ClaimOutcome::Claimed(c) => {
                assert_eq!(c.event.event_kind, AgentEventKind::AgentTick);
                seen.insert(c.event.id);
                complete_planned(&store, t, &c).await?;
            }
            ClaimOutcome::NothingDue { heartbeat, .. } => {
                seen.insert(heartbeat.id);
            }
            ClaimOutcome::LeaseHeld => anyhow::bail!("lease should be free"),
        }
    }
    let pending = store.events().pending(t, inst.id).await?;
    assert_eq!(pending.len(), 1);
    assert!(pending[0].visible_at > chrono::Utc::now() + chrono::Duration::hours(23));
    assert_eq!(store.instances().get(t, inst.id).await?.lease_session, None);
    Ok(())
}

/// A paused instance's published events are claimed `not_active` and their
/// messages acknowledged; resuming the instance must re-arm exactly its
/// unconsumed ones (new message id, NOTIFY), or they would never tick.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn resuming_an_instance_re_arms_the_events_published_while_it_was_paused(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let other = soa(&store, t).await?;
    let events = store.events();
    // One event consumed while active: resuming must not touch it.
    let done = message(&store, t, inst.id, json!({"message": "a"})).await?;
    let c = claim(&store, t, inst.id).await?;
    assert_eq!(c.event.id, done.event.id);
    complete_planned(&store, t, &c).await?;
    store
        .instances()
        .set_status(t, inst.id, InstanceStatus::Paused)
        .await?;
    let stranded = message(&store, t, inst.id, json!({"message": "b"})).await?;
    let elsewhere = message(&store, t, other.id, json!({"message": "c"})).await?;
    let batch = events.begin_outbox_batch(100).await?;
    let ids: Vec<Uuid> = batch.events.iter().map(|e| e.id).collect();
    assert!(ids.contains(&stranded.event.id) && ids.contains(&elsewhere.event.id));
    batch.mark_published(&ids).await?;
    let paused = store
        .claim_tick(t, inst.id, Uuid::new_v4(), TTL, 5)
        .await
        .expect_err("a paused instance is not claimed");
    assert!(matches!(paused, StoreError::FailedPrecondition { .. }));

    let mut listener = sqlx::postgres::PgListener::connect_with(&pool).await?;
    listener.listen("genesis_due").await?;
    store
        .instances()
        .set_status(t, inst.id, InstanceStatus::Active)
        .await?;
    let note = tokio::time::timeout(Duration::from_secs(5), listener.recv()).await??;
    assert!(
        note.payload().contains(&inst.id.to_string()),
        "{}",
        note.payload()
    );

    let row = |id: Uuid| {
        let store = &store;
        async move {
            Ok::<_, anyhow::Error>(
                store
                    .events()
                    .list(t, inst.id)
                    .await?
                    .into_iter()
                    .find(|e| e.id == id),
            )
        }
    };
    let re = row(stranded.event.id).await?.expect("still pending");
    assert_eq!(
        re.published_at, None,
        "the stranded event is unpublished again"
    );
    assert_eq!(re.publish_epoch, 1);
    assert_eq!(re.message_id(), format!("{}.1", re.id));
    let batch = events.begin_outbox_batch(100).await?;
    let again: Vec<Uuid> = batch.events.iter().map(|e| e.id).collect();
    assert!(
        again.contains(&stranded.event.id),
        "the outbox publishes it again"
    );
    assert!(
        !again.contains(&elsewhere.event.id),
        "another instance's published event was re-armed"
    );
    drop(batch);
    let consumed: (Option<chrono::DateTime<chrono::Utc>>, i32) =
        sqlx::query_as("SELECT published_at, publish_epoch FROM agent_event_queue WHERE id = $1")
            .bind(done.event.id)
            .fetch_one(&pool)
            .await?;
    assert_eq!(consumed.1, 0, "a consumed event was re-armed");
    // The resume's opener comes after the stranded event: the claim takes
    // the stranded one first.
    let c = claim(&store, t, inst.id).await?;
    assert_eq!(c.event.id, stranded.event.id);
    Ok(())
}

/// A claim that runs late in a statement begun before an event was enqueued
/// (a shared batch statement, or one that waited for the instance's row
/// lock) still finds that event due: due is judged by the clock once the
/// lease is held, not by the statement's start. Judged by
/// `now()`, the claim answered `nothing_due`, the pod acked the wake-up, and
/// the event waited for the next heartbeat.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_claim_in_a_statement_begun_before_the_enqueue_still_finds_the_event_due(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    let mut early = pool.begin().await?;
    let began: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&mut *early)
        .await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let enqueued = message(&store, t, inst.id, json!({"text": "hi"})).await?;
    assert!(enqueued.created);
    let event = enqueued.event;
    assert!(
        event.visible_at > began,
        "the event must be newer than the statement"
    );
    let raw: serde_json::Value =
        sqlx::query_scalar("SELECT genesis_claim_tick($1, $2, $3, interval '60 seconds', 5)")
            .bind(t)
            .bind(inst.id)
            .bind(Uuid::new_v4())
            .fetch_one(&mut *early)
            .await?;
    early.commit().await?;
    assert_eq!(raw["outcome"], "claimed", "{raw}");
    assert_eq!(raw["event"]["id"], json!(event.id), "{raw}");
    Ok(())
}
