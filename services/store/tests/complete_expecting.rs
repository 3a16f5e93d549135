//! CompleteTick in one statement against the real PostgreSQL: an unlocked
//! read of the counters that still holds writes the turn at once; a stale
//! one writes nothing itself and the locked read decides; every refusal
//! writes nothing; racing completions of one claim write one turn and pay
//! for its last attempt once; a STUCK halt written in one statement raises
//! core's notice, and the function refuses a halt that carries none;
//! still works; the episode's last call attempts are written with the turn,
//! exactly once, and a completion refused under a held lease still pays for
//! them; a heartbeat enqueued while the completion waits for the instance
//! row is the next tick it keeps.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use common::*;
use genesis_core::{
    AgentDecisionKind, AgentDispatcherOptions, AgentEventKind, Completion, Phase, PlanInputHash,
    TickOutcome,
};
use genesis_store::llm::{CreditDraw, NewCallAttempt, PricedAttempt};
use genesis_store::{
    CompletedTurn, ExpectedPrior, PriorCounters, PriorRead, Store, StoreError, TickClaim,
    TickCompletion,
};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

fn hash(c: char) -> PlanInputHash {
    c.to_string().repeat(64).parse().unwrap()
}

/// What the supervisor reads before completing: the counters and the kind.
async fn expectation(store: &Store, t: Uuid, c: &TickClaim) -> anyhow::Result<ExpectedPrior> {
    let pre = store
        .complete_context(t, c.event.id, c.instance.id, None)
        .await?;
    Ok(ExpectedPrior {
        counters: pre.prior.expect("a known instance has a prior read"),
        event_kind: pre.event_kind.unwrap().parse()?,
        agent_type: pre.agent_type.unwrap().parse()?,
    })
}

/// A short-circuited heartbeat turn with `h`: idle when `h` is the prior hash.
fn idle_turn(c: &TickClaim, h: &PlanInputHash) -> TickCompletion {
    let mut done = TickCompletion::new(
        c.event.id,
        derived(AgentDecisionKind::Heartbeat, Phase::Idle, false),
    );
    done.plan_input_hash = Some(h.clone());
    done
}

/// A completed turn answering an operator message, with no actions.
fn operator_message_answered(c: &TickClaim) -> TickCompletion {
    TickCompletion::new(
        c.event.id,
        genesis_store::TickDecision::Outcome(TickOutcome {
            event_kind: AgentEventKind::OperatorMessage,
            raised_escalation: false,
            side_effecting_actions: 0,
            completion: Completion::Complete,
        }),
    )
}

async fn ledger_turns(pool: &PgPool, instance: Uuid) -> anyhow::Result<i64> {
    count(
        pool,
        "SELECT count(*) FROM agent_state_ledger WHERE instance_id = $1",
        instance,
    )
    .await
}

/// An instance four idle ticks into hash `h`, with a heartbeat claimed.
async fn four_idle_ticks_in(
    store: &Store,
    pool: &PgPool,
    t: Uuid,
    h: &PlanInputHash,
) -> anyhow::Result<TickClaim> {
    let inst = soa(store, t).await?;
    sqlx::query(
        "UPDATE agent_instances SET consecutive_idle_ticks = 4, idle_ticks_since_replan = 4,
                plan_input_hash = $2 WHERE id = $1",
    )
    .bind(inst.id)
    .bind(h.as_str())
    .execute(pool)
    .await?;
    store
        .events()
        .enqueue(t, inst.id, AgentEventKind::AgentTick, &json!({}), None)
        .await?;
    claim(store, t, inst.id).await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_expectation_that_holds_writes_the_turn_in_one_statement(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let h = hash('a');
    let c = four_idle_ticks_in(&store, &pool, t, &h).await?;
    let expect = expectation(&store, t, &c).await?;
    assert_eq!(
        expect,
        ExpectedPrior {
            counters: PriorCounters {
                plan_input_hash: Some(h.as_str().to_owned()),
                consecutive_idle_ticks: 4,
                idle_ticks_since_replan: 4,
                consecutive_blocked_turns: 0,
                consecutive_exhausted_turns: 0,
            },
            event_kind: AgentEventKind::AgentTick,
            agent_type: genesis_core::AgentType::Soa,
        }
    );
    let turn = store
        .complete_tick_expecting(
            t,
            c.instance.id,
            c.session,
            idle_turn(&c, &h),
            &AgentDispatcherOptions::default(),
            Some(&expect),
        )
        .await?;
    assert_eq!(turn.prior_read, PriorRead::Held);
    assert_eq!(
        (
            turn.turn_number,
            turn.consecutive_idle_ticks,
            turn.idle_ticks_since_replan
        ),
        (1, 5, 5)
    );
    let row = store.instances().get(t, c.instance.id).await?;
    assert_eq!(
        (row.consecutive_idle_ticks, row.idle_ticks_since_replan),
        (5, 5)
    );
    assert_eq!(row.lease_session, None);
    assert_eq!(ledger_turns(&pool, c.instance.id).await?, 1);
    let pending = store.events().pending(t, c.instance.id).await?;
    assert_eq!(pending.len(), 1, "exactly one heartbeat pending");
    assert_eq!(Some(pending[0].id), turn.heartbeat_event_id);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_stale_expectation_is_not_trusted_and_the_locked_read_decides(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let h = hash('b');
    // Each stale part alone: had the store trusted any of them, the idle
    // streak would have restarted at 0 instead of reaching 5.
    let right = PriorCounters {
        plan_input_hash: Some(h.as_str().to_owned()),
        consecutive_idle_ticks: 4,
        idle_ticks_since_replan: 4,
        consecutive_blocked_turns: 0,
        consecutive_exhausted_turns: 0,
    };
    let cases = [
        (
            "hash",
            PriorCounters {
                plan_input_hash: None,
                ..right.clone()
            },
            AgentEventKind::AgentTick,
        ),
        (
            "idle",
            PriorCounters {
                consecutive_idle_ticks: 0,
                ..right.clone()
            },
            AgentEventKind::AgentTick,
        ),
        (
            "since",
            PriorCounters {
                idle_ticks_since_replan: 9,
                ..right.clone()
            },
            AgentEventKind::AgentTick,
        ),
        (
            "blocked",
            PriorCounters {
                consecutive_blocked_turns: 2,
                ..right.clone()
            },
            AgentEventKind::AgentTick,
        ),
        (
            "exhausted",
            PriorCounters {
                consecutive_exhausted_turns: 3,
                ..right.clone()
            },
            AgentEventKind::AgentTick,
        ),
        ("event kind", right.clone(), AgentEventKind::OperatorMessage),
    ];
    for (what, counters, event_kind) in cases {
        let c = four_idle_ticks_in(&store, &pool, t, &h).await?;
        let turn = store
            .complete_tick_expecting(
                t,
                c.instance.id,
                c.session,
                idle_turn(&c, &h),
                &AgentDispatcherOptions::default(),
                Some(&ExpectedPrior {
                    counters,
                    event_kind,
                    agent_type: genesis_core::AgentType::Soa,
                }),
            )
            .await?;
        assert_eq!(turn.prior_read, PriorRead::Stale, "{what}");
        assert_eq!(
            (
                turn.consecutive_idle_ticks,
                turn.idle_ticks_since_replan,
                turn.consecutive_blocked_turns
            ),
            (5, 5, 0),
            "{what}: counters from the locked row"
        );
        let row = store.instances().get(t, c.instance.id).await?;
        assert_eq!(
            (row.consecutive_idle_ticks, row.idle_ticks_since_replan),
            (5, 5),
            "{what}"
        );
        assert_eq!(
            ledger_turns(&pool, c.instance.id).await?,
            1,
            "{what}: one turn, not two"
        );
    }
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn refusals_of_the_one_statement_path_write_nothing(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let h = hash('c');
    let c = four_idle_ticks_in(&store, &pool, t, &h).await?;
    let expect = expectation(&store, t, &c).await?;
    let opts = AgentDispatcherOptions::default();
    let try_with = |instance: Uuid, session: Uuid, event: Uuid| {
        let mut done = idle_turn(&c, &h);
        done.event_id = event;
        let (store, expect, opts) = (store.clone(), expect.clone(), opts.clone());
        async move {
            store
                .complete_tick_expecting(t, instance, session, done, &opts, Some(&expect))
                .await
        }
    };
    let err = try_with(c.instance.id, Uuid::new_v4(), c.event.id)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost), "{err:?}");
    let err = try_with(Uuid::new_v4(), c.session, c.event.id)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    let err = try_with(c.instance.id, c.session, Uuid::new_v4())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidArgument { field, .. } if field == "event_id"),
        "{err:?}"
    );
    // An outcome for another event kind is refused before anything is sent.
    let mut wrong = operator_message_answered(&c);
    wrong.plan_input_hash = Some(h.clone());
    let err = store
        .complete_tick_expecting(t, c.instance.id, c.session, wrong, &opts, Some(&expect))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidArgument { field, .. } if field == "outcome.event_kind"),
        "{err:?}"
    );
    assert_eq!(ledger_turns(&pool, c.instance.id).await?, 0);
    let row = store.instances().get(t, c.instance.id).await?;
    assert_eq!(
        row.lease_session,
        Some(c.session),
        "the lease is still held"
    );
    assert_eq!(row.consecutive_idle_ticks, 4);
    // The claim still completes after all that.
    let turn = try_with(c.instance.id, c.session, c.event.id).await?;
    assert_eq!((turn.prior_read, turn.turn_number), (PriorRead::Held, 1));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn racing_completions_of_one_claim_write_one_turn(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let h = hash('d');
    for round in 0..5 {
        let c = four_idle_ticks_in(&store, &pool, t, &h).await?;
        let expect = expectation(&store, t, &c).await?;
        let mut tasks = Vec::new();
        for i in 0..8 {
            let (store, c, expect, h) = (store.clone(), c.clone(), expect.clone(), h.clone());
            tasks.push(tokio::spawn(async move {
                let opts = AgentDispatcherOptions::default();
                // Half through the one-statement path, half through the lock.
                if i % 2 == 0 {
                    store
                        .complete_tick_expecting(
                            t,
                            c.instance.id,
                            c.session,
                            paying_turn(&c, &h, &[1.0]),
                            &opts,
                            Some(&expect),
                        )
                        .await
                } else {
                    store
                        .complete_tick(
                            t,
                            c.instance.id,
                            c.session,
                            paying_turn(&c, &h, &[1.0]),
                            &opts,
                        )
                        .await
                }
            }));
        }
        let mut done: Vec<CompletedTurn> = Vec::new();
        for task in tasks {
            match task.await? {
                Ok(turn) => done.push(turn),
                Err(StoreError::LeaseLost) => {}
                Err(other) => anyhow::bail!("round {round}: unexpected {other:?}"),
            }
        }
        assert_eq!(done.len(), 1, "round {round}: one completion wins");
        assert_eq!(done[0].consecutive_idle_ticks, 5);
        assert_eq!(
            ledger_turns(&pool, c.instance.id).await?,
            1,
            "round {round}"
        );
        let row = store.instances().get(t, c.instance.id).await?;
        assert_eq!(row.consecutive_idle_ticks, 5, "round {round}: counted once");
        // Each completion carried the episode's last attempt: the winner
        // wrote it, the losers (a lost lease) wrote nothing.
        let rounds = round + 1;
        assert_eq!(
            paid(&pool, t).await?,
            (rounds, rounds, rounds as f64),
            "round {round}: paid once"
        );
    }
    Ok(())
}

/// The episode's last attempt of the claim `c`, priced at `cost`.
fn priced(c: &TickClaim, cost: f64) -> PricedAttempt {
    PricedAttempt {
        attempt: NewCallAttempt {
            instance_id: c.instance.id,
            session: c.session,
            invocation_id: format!("inv-{}", c.event.id),
            site_id: "Agent:Planning".into(),
            requested_model: "scripted-1".into(),
            served_model: "scripted-1".into(),
            provider: "scripted".into(),
            credential_name: String::new(),
            outcome: "success".into(),
            input_tokens: 100,
            output_tokens: 10,
            cache_read_tokens: 0,
            latency_ms: 3,
            error_message: String::new(),
            cost_usd: cost,
            cache_write_tokens: 0,
            priced_as: None,
            pricing_source: None,
            prompt_overlay_sha256: None,
        },
        credit: CreditDraw {
            week_start: "2026-11-30T00:00:00Z".parse().unwrap(),
            limit_usd: 50.0,
        },
        journal: None,
    }
}

/// [`idle_turn`] carrying the episode's last attempts, one per cost.
fn paying_turn(c: &TickClaim, h: &PlanInputHash, costs: &[f64]) -> TickCompletion {
    let mut done = idle_turn(c, h);
    done.call_attempts = costs.iter().map(|&cost| priced(c, cost)).collect();
    done
}

/// (attempts, snapshots, credit spent) of the tenant.
async fn paid(pool: &PgPool, t: Uuid) -> anyhow::Result<(i64, i64, f64)> {
    Ok(sqlx::query_as(
        "SELECT (SELECT count(*) FROM llm_call_attempts WHERE tenant_id = $1),
                (SELECT count(*) FROM llm_call_snapshots WHERE tenant_id = $1),
                coalesce((SELECT sum(spent_usd) FROM credit_windows WHERE tenant_id = $1), 0)::float8",
    )
    .bind(t)
    .fetch_one(pool)
    .await?)
}

/// The snapshot and cost the turn links.
async fn turn_link(pool: &PgPool, ledger: Uuid) -> anyhow::Result<(Option<Uuid>, Option<f64>)> {
    Ok(sqlx::query_as(
        "SELECT llm_call_snapshot_id, cost_usd::float8 FROM agent_state_ledger WHERE id = $1",
    )
    .bind(ledger)
    .fetch_one(pool)
    .await?)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_last_attempts_are_written_once_with_the_turn_whichever_read_decides(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let h = hash('f');
    let opts = AgentDispatcherOptions::default();
    // A read that holds: one statement writes the attempts and the turn.
    let c = four_idle_ticks_in(&store, &pool, t, &h).await?;
    let expect = expectation(&store, t, &c).await?;
    let done = paying_turn(&c, &h, &[0.25, 0.5]);
    let turn = store
        .complete_tick_expecting(t, c.instance.id, c.session, done, &opts, Some(&expect))
        .await?;
    assert_eq!(turn.prior_read, PriorRead::Held);
    assert_eq!(paid(&pool, t).await?, (2, 1, 0.75));
    let (snapshot, cost) = turn_link(&pool, turn.ledger_id).await?;
    let stored: Uuid = sqlx::query_scalar("SELECT id FROM llm_call_snapshots WHERE tenant_id = $1")
        .bind(t)
        .fetch_one(&pool)
        .await?;
    assert_eq!(
        snapshot,
        Some(stored),
        "the turn links the attempts' snapshot"
    );
    assert_eq!(cost, Some(0.75));
    // A stale read writes nothing itself, so the locked write that follows
    // records the attempt once, not twice.
    let c = four_idle_ticks_in(&store, &pool, t, &h).await?;
    let mut stale = expectation(&store, t, &c).await?;
    stale.counters.consecutive_idle_ticks = 0;
    let done = paying_turn(&c, &h, &[1.0]);
    let turn = store
        .complete_tick_expecting(t, c.instance.id, c.session, done, &opts, Some(&stale))
        .await?;
    assert_eq!(turn.prior_read, PriorRead::Stale);
    assert_eq!(paid(&pool, t).await?, (3, 2, 1.75));
    assert_eq!(turn_link(&pool, turn.ledger_id).await?.1, Some(1.0));
    // The locked path without any read carries them too.
    let c = four_idle_ticks_in(&store, &pool, t, &h).await?;
    let done = paying_turn(&c, &h, &[2.0]);
    let turn = store
        .complete_tick(t, c.instance.id, c.session, done, &opts)
        .await?;
    assert_eq!(paid(&pool, t).await?, (4, 3, 3.75));
    assert_eq!(turn_link(&pool, turn.ledger_id).await?.1, Some(2.0));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_completion_refused_under_a_held_lease_still_pays_for_its_attempts(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let h = hash('1');
    let opts = AgentDispatcherOptions::default();
    let c = four_idle_ticks_in(&store, &pool, t, &h).await?;
    let expect = expectation(&store, t, &c).await?;
    // A lost lease writes nothing, attempts included.
    let done = paying_turn(&c, &h, &[0.5]);
    let stranger = Uuid::new_v4();
    let mut other = done.clone();
    other.call_attempts[0].attempt.session = stranger;
    let err = store
        .complete_tick_expecting(t, c.instance.id, stranger, other, &opts, Some(&expect))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost), "{err:?}");
    assert_eq!(paid(&pool, t).await?, (0, 0, 0.0));
    // An attempt of another session is refused before anything is sent.
    let mut foreign = done.clone();
    foreign.call_attempts[0].attempt.session = Uuid::new_v4();
    let err = store
        .complete_tick_expecting(t, c.instance.id, c.session, foreign, &opts, Some(&expect))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidArgument { field, .. } if field == "call_attempts[0]"),
        "{err:?}"
    );
    assert_eq!(paid(&pool, t).await?, (0, 0, 0.0));
    // An event this session did not claim (the locked path, no read) and
    // a completion too large to write (the one-statement path): no turn,
    // but the calls made under the held lease are recorded and drawn.
    let mut unclaimed = done.clone();
    unclaimed.event_id = Uuid::new_v4();
    let err = store
        .complete_tick(t, c.instance.id, c.session, unclaimed, &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidArgument { field, .. } if field == "event_id"),
        "{err:?}"
    );
    assert_eq!(paid(&pool, t).await?, (1, 1, 0.5));
    let mut huge = done.clone();
    huge.reasoning_summary = Some("x".repeat(2 * 1024 * 1024));
    let err = store
        .complete_tick_expecting(t, c.instance.id, c.session, huge, &opts, Some(&expect))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::PayloadTooLarge { .. }), "{err:?}");
    assert_eq!(paid(&pool, t).await?, (2, 1, 1.0));
    assert_eq!(ledger_turns(&pool, c.instance.id).await?, 0);
    // The session still holds its tick, and completing it pays once more.
    let turn = store
        .complete_tick_expecting(t, c.instance.id, c.session, done, &opts, Some(&expect))
        .await?;
    assert_eq!(turn.turn_number, 1);
    assert_eq!(paid(&pool, t).await?, (3, 1, 1.5));
    Ok(())
}

/// The completion's instance update waits for the row lock while another
/// transaction enqueues a heartbeat and commits: the
/// heartbeat the completion keeps is that one, and next_tick_at names it,
/// not the next tick the completion would have scheduled on its own.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_heartbeat_enqueued_while_the_completion_waits_is_its_next_tick(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?;
    message(&store, t, inst.id, json!({"text": "status?"})).await?;
    let c = claim(&store, t, inst.id).await?;
    assert_eq!(c.event.event_kind, AgentEventKind::OperatorMessage);
    let before = store.events().pending(t, inst.id).await?;
    assert_eq!(
        before.len(),
        1,
        "the message alone is pending: no heartbeat yet"
    );

    let expect = expectation(&store, t, &c).await?;
    // Another transaction holds the instance row.
    let mut holder = pool.begin().await?;
    sqlx::query("SELECT 1 FROM agent_instances WHERE id = $1 FOR UPDATE")
        .bind(inst.id)
        .execute(&mut *holder)
        .await?;
    let completing = {
        let (store, c, expect) = (store.clone(), c.clone(), expect.clone());
        tokio::spawn(async move {
            let done = operator_message_answered(&c);
            // The one-statement path: its instance UPDATE takes the lock.
            store
                .complete_tick_expecting(
                    t,
                    c.instance.id,
                    c.session,
                    done,
                    &AgentDispatcherOptions::default(),
                    Some(&expect),
                )
                .await
        })
    };
    // Until the completion waits for that lock.
    let mut waited = false;
    for _ in 0..200 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND query LIKE '%genesis_apply_complete%'",
        )
        .fetch_one(&pool)
        .await?;
        if waiting > 0 {
            waited = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(waited, "the completion never waited for the instance row");
    // A heartbeat an hour out, committed while the completion waits.
    let beat: serde_json::Value = sqlx::query_scalar(
        "SELECT genesis_enqueue_event($1, $2, 'AgentTick', '{}', now() + interval '1 hour', NULL)",
    )
    .bind(t)
    .bind(inst.id)
    .fetch_one(&mut *holder)
    .await?;
    assert_eq!(beat["outcome"], "created", "{beat}");
    holder.commit().await?;

    let turn = completing.await??;
    assert_eq!(turn.prior_read, PriorRead::Held);
    let pending = store.events().pending(t, inst.id).await?;
    assert_eq!(pending.len(), 1, "exactly one heartbeat pending");
    assert_eq!(
        pending[0].id.to_string(),
        beat["event"]["id"].as_str().unwrap()
    );
    assert_eq!(turn.heartbeat_event_id, Some(pending[0].id));
    let row = store.instances().get(t, inst.id).await?;
    assert_eq!(row.next_tick_at, Some(pending[0].visible_at));
    assert_eq!(row.lease_session, None);
    assert_eq!(ledger_turns(&pool, inst.id).await?, 1);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_halt_in_one_statement_raises_cores_notice(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let opts = AgentDispatcherOptions::default();
    let c = four_idle_ticks_in(&store, &pool, t, &hash('a')).await?;
    sqlx::query("UPDATE agent_instances SET consecutive_blocked_turns = $2 WHERE id = $1")
        .bind(c.instance.id)
        .bind(i32::try_from(opts.max_consecutive_blocked_turns)? - 1)
        .execute(&pool)
        .await?;
    let expect = expectation(&store, t, &c).await?;
    let blocked = TickCompletion::new(
        c.event.id,
        derived(AgentDecisionKind::WaitingForEvent, Phase::IdleBlocked, true),
    );
    let turn = store
        .complete_tick_expecting(t, c.instance.id, c.session, blocked, &opts, Some(&expect))
        .await?;
    assert!(turn.halted);
    assert_eq!(turn.prior_read, PriorRead::Held);
    let (title, body, ledger): (String, String, Option<String>) = sqlx::query_as(
        "SELECT title, body, metadata->>'ledgerId' FROM attention_requests
          WHERE instance_id = $1 AND kind = 'stuck_halt'",
    )
    .bind(c.instance.id)
    .fetch_one(&pool)
    .await?;
    assert_eq!(title, "Agent Soa halted: stuck");
    assert_eq!(
        body,
        format!(
            "Agent instance {} was blocked for {} consecutive turns and has been closed.",
            c.instance.id, opts.max_consecutive_blocked_turns
        )
    );
    assert_eq!(ledger, Some(turn.ledger_id.to_string()));
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_write_refuses_a_halt_without_its_notice_and_writes_nothing(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let c = four_idle_ticks_in(&store, &pool, t, &hash('a')).await?;
    let turns_before = ledger_turns(&pool, c.instance.id).await?;
    let row_before = store.instances().get(t, c.instance.id).await?;
    let refused = sqlx::query(
        "SELECT genesis_apply_complete(p_tenant => $1, p_instance => $2, p_session => $3,
            p_event => $4, p_decision_kind => 'WaitingForEvent', p_phase => 'halted:stuck',
            p_plan_input_hash => NULL, p_consecutive_idle_ticks => 0, p_idle_ticks_since_replan => 0,
            p_consecutive_blocked_turns => 3, p_consecutive_exhausted_turns => 0, p_halt => true,
            p_next_tick_delay_ms => 0, p_attention_title => NULL, p_attention_body => NULL,
            p_decision_payload => '{}', p_wait_condition => NULL, p_reasoning_summary => NULL,
            p_llm_call_snapshot_id => NULL, p_served_model => NULL, p_cost_usd => NULL,
            p_input_tokens => NULL, p_output_tokens => NULL, p_actions => NULL,
            p_expecting => false, p_expect_event_kind => NULL, p_expect_plan_input_hash => NULL,
            p_expect_idle_ticks => NULL, p_expect_idle_since_replan => NULL,
            p_expect_blocked_turns => NULL, p_expect_exhausted_turns => NULL, p_attempts => NULL)",
    )
    .bind(t)
    .bind(c.instance.id)
    .bind(c.session)
    .bind(c.event.id)
    .execute(&pool)
    .await
    .unwrap_err();
    assert!(
        refused.to_string().contains("needs its attention request"),
        "{refused}"
    );
    assert_eq!(ledger_turns(&pool, c.instance.id).await?, turns_before);
    let row = store.instances().get(t, c.instance.id).await?;
    assert_eq!(row, row_before, "a refused write changes nothing");
    assert_eq!(row.lease_session, Some(c.session));
    Ok(())
}
