//! Model-based property test of the tick state machine (spec §3.3, DESIGN
//! §4-5): random sequences of enqueue, claim, renew, complete, lease expiry,
//! clock advance and reset over a few instances of one tenant run against
//! the real store and against a small in-memory model of the rules, and the
//! two are compared after every step (events consumed, ledger rows, pending
//! heartbeats, lease holder, counters, STUCK halt, attention requests).
//! Must never mock the database, and must never derive the model's rules
//! from genesis-core: the model restates them independently, so a drift in
//! either shows up as a mismatch.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use genesis_core::{
    AgentDispatcherOptions, AgentEventKind, AgentType, Completion, InstanceStatus, Phase,
    PlanInputHash, TickOutcome,
};
use genesis_store::{
    ClaimOutcome, EventRow, InstanceRow, NewInstance, Store, StoreError, TickCompletion,
    TickDecision,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

/// Instances of the one tenant each case drives.
const INSTANCES: usize = 2;
/// Simulated pods.
const WORKERS: usize = 3;
/// Deliveries of one event before it is dead-lettered.
const MAX_ATTEMPTS: u32 = 3;
/// `MaxConsecutiveBlockedTurns` of the default options (checked in the test).
const MAX_BLOCKED: u32 = 3;
const LEASE_TTL: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Complete,
    Blocked,
    ShortCircuited,
}

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        inst: usize,
        kind: AgentEventKind,
    },
    Claim {
        worker: usize,
        inst: usize,
    },
    Renew {
        worker: usize,
    },
    Complete {
        worker: usize,
        outcome: Outcome,
        hash: Option<u8>,
    },
    ExpireLease {
        inst: usize,
    },
    AdvanceClock {
        inst: usize,
    },
    Reset {
        inst: usize,
    },
}

/// Sequences of at most 30 steps: single operations mixed with whole ticks
/// (enqueue, claim, complete on one instance), so counters and the STUCK
/// halt are reached within a short sequence.
fn ops_strategy() -> impl Strategy<Value = Vec<Op>> {
    let outcome = prop_oneof![
        1 => Just(Outcome::Complete),
        3 => Just(Outcome::Blocked),
        1 => Just(Outcome::ShortCircuited),
    ];
    let kind = prop_oneof![
        Just(AgentEventKind::OperatorMessage),
        Just(AgentEventKind::MissionStateChanged),
        Just(AgentEventKind::AgentTick),
    ];
    let tick = (
        0..WORKERS,
        0..INSTANCES,
        kind,
        outcome,
        proptest::option::of(0u8..2),
    )
        .prop_map(|(worker, inst, kind, outcome, hash)| {
            vec![
                Op::Enqueue { inst, kind },
                Op::Claim { worker, inst },
                Op::Complete {
                    worker,
                    outcome,
                    hash,
                },
            ]
        });
    let single = op_strategy().prop_map(|op| vec![op]);
    proptest::collection::vec(prop_oneof![3 => single, 2 => tick], 1..=14).prop_map(|chunks| {
        let mut ops: Vec<Op> = chunks.into_iter().flatten().collect();
        ops.truncate(30);
        ops
    })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let inst = 0..INSTANCES;
    let worker = 0..WORKERS;
    let kind = prop_oneof![
        Just(AgentEventKind::OperatorMessage),
        Just(AgentEventKind::MissionStateChanged),
        Just(AgentEventKind::AgentTick),
    ];
    let outcome = prop_oneof![
        Just(Outcome::Complete),
        Just(Outcome::Blocked),
        Just(Outcome::ShortCircuited),
    ];
    prop_oneof![
        3 => (inst.clone(), kind).prop_map(|(inst, kind)| Op::Enqueue { inst, kind }),
        5 => (worker.clone(), inst.clone()).prop_map(|(worker, inst)| Op::Claim { worker, inst }),
        1 => worker.clone().prop_map(|worker| Op::Renew { worker }),
        5 => (worker, outcome, proptest::option::of(0u8..2))
            .prop_map(|(worker, outcome, hash)| Op::Complete { worker, outcome, hash }),
        1 => inst.clone().prop_map(|inst| Op::ExpireLease { inst }),
        1 => inst.clone().prop_map(|inst| Op::AdvanceClock { inst }),
        1 => inst.prop_map(|inst| Op::Reset { inst }),
    ]
}

/// Where a modelled event stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EvState {
    /// Unconsumed and not dead-lettered.
    Pending,
    /// Consumed by a completed turn (its ledger row exists unless a reset
    /// cleared the ledger since).
    Consumed,
    /// Consumed without a turn: drained by a reset or a STUCK halt.
    Drained,
    DeadLettered,
}

#[derive(Debug, Clone)]
struct MEvent {
    id: Uuid,
    kind: AgentEventKind,
    state: EvState,
    attempts: i32,
    claimed: Option<Uuid>,
    /// `visible_at <= now`.
    due: bool,
}

#[derive(Debug, Clone)]
struct MLease {
    session: Uuid,
    live: bool,
}

#[derive(Debug, Clone)]
struct MInstance {
    id: Uuid,
    closed: bool,
    lease: Option<MLease>,
    events: Vec<MEvent>,
    /// Event ids of the ledger turns, in turn order.
    ledger: Vec<Uuid>,
    idle: u32,
    since_replan: u32,
    blocked: u32,
    hash: Option<String>,
    /// `None`: no next tick; `Some(due)`: set, and whether it has passed.
    next_tick: Option<bool>,
    phase: Phase,
    dead_letters: i64,
    stuck_halts: i64,
}

impl MInstance {
    fn pending_tick(&self) -> Option<&MEvent> {
        self.events
            .iter()
            .find(|e| e.kind == AgentEventKind::AgentTick && e.state == EvState::Pending)
    }

    fn push(&mut self, id: Uuid, kind: AgentEventKind, due: bool) {
        self.events.push(MEvent {
            id,
            kind,
            state: EvState::Pending,
            attempts: 0,
            claimed: None,
            due,
        });
    }
}

/// A worker's tick in hand: (instance index, session, event id).
type Held = Option<(usize, Uuid, Uuid)>;

struct Model {
    instances: Vec<MInstance>,
    workers: [Held; WORKERS],
}

/// What an operation answered, reduced to what the model predicts.
#[derive(Debug, Clone, PartialEq)]
enum Res {
    Enqueued {
        id: Uuid,
        created: bool,
    },
    Claimed(Uuid),
    LeaseHeld,
    NothingDue(Uuid),
    Completed {
        halted: bool,
        idle: u32,
        since_replan: u32,
        blocked: u32,
        heartbeat: Option<Uuid>,
    },
    Done,
    Reset(Uuid),
    Err(&'static str),
    Skipped,
}

fn err_kind(e: &StoreError) -> Result<&'static str, TestCaseError> {
    match e {
        StoreError::LeaseLost => Ok("lease_lost"),
        StoreError::FailedPrecondition { .. } => Ok("precondition"),
        StoreError::InvalidArgument { .. } => Ok("invalid"),
        other => Err(TestCaseError::fail(format!(
            "unexpected store error: {other}"
        ))),
    }
}

fn hash_of(h: u8) -> PlanInputHash {
    PlanInputHash::compute(AgentEventKind::AgentTick, None, &format!("bucket-{h}"))
}

fn payload_for(kind: AgentEventKind, step: usize) -> serde_json::Value {
    match kind {
        AgentEventKind::OperatorMessage => json!({"text": format!("message {step}")}),
        AgentEventKind::MissionStateChanged => {
            json!({"missionId": Uuid::new_v4(), "status": "active"})
        }
        _ => json!({}),
    }
}

struct Harness {
    store: Store,
    pool: PgPool,
    tenant: Uuid,
    opts: AgentDispatcherOptions,
}

impl Harness {
    /// Run `op` against the store.
    async fn run(
        &self,
        model: &Model,
        op: &Op,
        step: usize,
        session: Uuid,
    ) -> Result<Res, TestCaseError> {
        let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(e.to_string());
        let id_of = |i: usize| model.instances[i].id;
        match op {
            Op::Enqueue { inst, kind } => {
                let r = self
                    .store
                    .events()
                    .enqueue(
                        self.tenant,
                        id_of(*inst),
                        *kind,
                        &payload_for(*kind, step),
                        None,
                    )
                    .await
                    .map_err(|e| fail(&e))?;
                Ok(Res::Enqueued {
                    id: r.event.id,
                    created: r.created,
                })
            }
            Op::Claim { inst, .. } => {
                match self
                    .store
                    .claim_tick(self.tenant, id_of(*inst), session, LEASE_TTL, MAX_ATTEMPTS)
                    .await
                {
                    Ok(ClaimOutcome::Claimed(c)) => {
                        prop_assert_eq!(c.session, session);
                        Ok(Res::Claimed(c.event.id))
                    }
                    Ok(ClaimOutcome::LeaseHeld) => Ok(Res::LeaseHeld),
                    Ok(ClaimOutcome::NothingDue { heartbeat, .. }) => {
                        Ok(Res::NothingDue(heartbeat.id))
                    }
                    Err(e) => Ok(Res::Err(err_kind(&e)?)),
                }
            }
            Op::Renew { worker } => match model.workers[*worker] {
                None => Ok(Res::Skipped),
                Some((inst, session, _)) => {
                    match self
                        .store
                        .renew_lease(self.tenant, id_of(inst), session, LEASE_TTL)
                        .await
                    {
                        Ok(()) => Ok(Res::Done),
                        Err(e) => Ok(Res::Err(err_kind(&e)?)),
                    }
                }
            },
            Op::Complete {
                worker,
                outcome,
                hash,
            } => match model.workers[*worker] {
                None => Ok(Res::Skipped),
                Some((inst, session, event)) => {
                    let kind = model.instances[inst]
                        .events
                        .iter()
                        .find(|e| e.id == event)
                        .map(|e| e.kind)
                        .ok_or_else(|| TestCaseError::fail("held event not in the model"))?;
                    let completion = match outcome {
                        Outcome::Complete => Completion::Complete,
                        Outcome::Blocked => Completion::Blocked,
                        Outcome::ShortCircuited => Completion::ShortCircuited,
                    };
                    let mut tc = TickCompletion::new(
                        event,
                        TickDecision::Outcome(TickOutcome {
                            event_kind: kind,
                            raised_escalation: false,
                            side_effecting_actions: 0,
                            completion,
                        }),
                    );
                    tc.plan_input_hash = hash.map(hash_of);
                    match self
                        .store
                        .complete_tick(self.tenant, id_of(inst), session, tc, &self.opts)
                        .await
                    {
                        Ok(t) => Ok(Res::Completed {
                            halted: t.halted,
                            idle: t.consecutive_idle_ticks,
                            since_replan: t.idle_ticks_since_replan,
                            blocked: t.consecutive_blocked_turns,
                            heartbeat: t.heartbeat_event_id,
                        }),
                        Err(e) => Ok(Res::Err(err_kind(&e)?)),
                    }
                }
            },
            Op::ExpireLease { inst } => {
                // Simulated time: the test's superuser connection moves the
                // lease deadline into the past.
                sqlx::query(
                    "UPDATE agent_instances SET lease_expires_at = now() - interval '1 second'
                     WHERE id = $1 AND lease_session IS NOT NULL",
                )
                .bind(id_of(*inst))
                .execute(&self.pool)
                .await
                .map_err(|e| fail(&e))?;
                Ok(Res::Done)
            }
            Op::AdvanceClock { inst } => {
                // Simulated time: every future event and the next tick fall due.
                sqlx::query(
                    "UPDATE agent_event_queue SET visible_at = now() - interval '1 second'
                     WHERE instance_id = $1 AND consumed_at IS NULL AND dead_lettered_at IS NULL
                       AND visible_at > now()",
                )
                .bind(id_of(*inst))
                .execute(&self.pool)
                .await
                .map_err(|e| fail(&e))?;
                sqlx::query(
                    "UPDATE agent_instances SET next_tick_at = now() - interval '1 second'
                     WHERE id = $1 AND next_tick_at > now()",
                )
                .bind(id_of(*inst))
                .execute(&self.pool)
                .await
                .map_err(|e| fail(&e))?;
                Ok(Res::Done)
            }
            Op::Reset { inst } => {
                match self.store.reset_instance(self.tenant, id_of(*inst)).await {
                    Ok(r) => Ok(Res::Reset(r.event_id)),
                    Err(e) => Ok(Res::Err(err_kind(&e)?)),
                }
            }
        }
    }
}

impl Model {
    /// Apply `op` to the model and return what the store should have
    /// answered. Ids the store minted (new events) are taken from `actual`;
    /// whether anything was minted at all is the model's own call.
    fn apply(&mut self, op: &Op, actual: &Res, session: Uuid) -> Res {
        let minted = |r: &Res| match r {
            Res::Enqueued { id, .. } | Res::NothingDue(id) | Res::Reset(id) => Some(*id),
            Res::Completed { heartbeat, .. } => *heartbeat,
            _ => None,
        };
        match op {
            Op::Enqueue { inst, kind } => {
                let m = &mut self.instances[*inst];
                if *kind == AgentEventKind::AgentTick
                    && let Some(tick) = m.pending_tick()
                {
                    return Res::Enqueued {
                        id: tick.id,
                        created: false,
                    };
                }
                let Some(id) = minted(actual) else {
                    return Res::Enqueued {
                        id: Uuid::nil(),
                        created: true,
                    };
                };
                m.push(id, *kind, true);
                Res::Enqueued { id, created: true }
            }
            Op::Claim { worker, inst } => {
                let m = &mut self.instances[*inst];
                if m.closed {
                    return Res::Err("precondition");
                }
                if m.lease.as_ref().is_some_and(|l| l.live) {
                    return Res::LeaseHeld;
                }
                m.lease = Some(MLease {
                    session,
                    live: true,
                });
                for e in m.events.iter_mut() {
                    if e.state != EvState::Pending || !e.due {
                        continue;
                    }
                    if e.attempts >= MAX_ATTEMPTS as i32 {
                        e.state = EvState::DeadLettered;
                        m.dead_letters += 1;
                        continue;
                    }
                    e.attempts += 1;
                    e.claimed = Some(session);
                    let id = e.id;
                    self.workers[*worker] = Some((*inst, session, id));
                    return Res::Claimed(id);
                }
                m.lease = None;
                let hb = match m.pending_tick() {
                    Some(t) => t.id,
                    None => {
                        let due = m.next_tick.unwrap_or(true);
                        let Some(id) = minted(actual) else {
                            return Res::NothingDue(Uuid::nil());
                        };
                        m.push(id, AgentEventKind::AgentTick, due);
                        id
                    }
                };
                Res::NothingDue(hb)
            }
            Op::Renew { worker } => match self.workers[*worker] {
                None => Res::Skipped,
                // An expired lease is lost: renewal never revives it.
                Some((inst, session, _)) => match &self.instances[inst].lease {
                    Some(l) if l.session == session && l.live => Res::Done,
                    _ => Res::Err("lease_lost"),
                },
            },
            Op::Complete {
                worker,
                outcome,
                hash,
            } => {
                let Some((inst, session, event)) = self.workers[*worker].take() else {
                    return Res::Skipped;
                };
                let m = &mut self.instances[inst];
                if m.lease.as_ref().is_none_or(|l| l.session != session) {
                    return Res::Err("lease_lost");
                }
                let Some(ev) = m.events.iter_mut().find(|e| {
                    e.id == event && e.state == EvState::Pending && e.claimed == Some(session)
                }) else {
                    return Res::Err("invalid");
                };
                ev.state = EvState::Consumed;
                let kind = ev.kind;
                m.ledger.push(event);
                let new_hash = hash.map(|h| hash_of(h).as_str().to_owned());
                let idle =
                    kind == AgentEventKind::AgentTick && new_hash.is_some() && new_hash == m.hash;
                let planned = *outcome != Outcome::ShortCircuited;
                let blocked = *outcome == Outcome::Blocked;
                m.idle = if idle { m.idle + 1 } else { 0 };
                m.since_replan = if planned || !idle {
                    0
                } else {
                    m.since_replan + 1
                };
                m.blocked = if blocked { m.blocked + 1 } else { 0 };
                let halted = blocked && m.blocked >= MAX_BLOCKED;
                if new_hash.is_some() {
                    m.hash = new_hash;
                }
                m.lease = None;
                let heartbeat = if halted {
                    for e in m.events.iter_mut() {
                        if e.kind == AgentEventKind::AgentTick && e.state == EvState::Pending {
                            e.state = EvState::Drained;
                        }
                    }
                    m.closed = true;
                    m.next_tick = None;
                    m.stuck_halts += 1;
                    m.phase = Phase::HaltedStuck;
                    None
                } else {
                    m.phase = if blocked {
                        Phase::IdleBlocked
                    } else {
                        Phase::Idle
                    };
                    match m.pending_tick().map(|t| (t.id, t.due)) {
                        Some((id, due)) => {
                            m.next_tick = Some(due);
                            Some(id)
                        }
                        None => {
                            // The cadence (24 h by default) puts it in the future.
                            m.next_tick = Some(false);
                            let id = minted(actual).unwrap_or(Uuid::nil());
                            m.push(id, AgentEventKind::AgentTick, false);
                            Some(id)
                        }
                    }
                };
                Res::Completed {
                    halted,
                    idle: m.idle,
                    since_replan: m.since_replan,
                    blocked: m.blocked,
                    heartbeat,
                }
            }
            Op::ExpireLease { inst } => {
                if let Some(l) = &mut self.instances[*inst].lease {
                    l.live = false;
                }
                Res::Done
            }
            Op::AdvanceClock { inst } => {
                let m = &mut self.instances[*inst];
                for e in m.events.iter_mut().filter(|e| e.state == EvState::Pending) {
                    e.due = true;
                }
                if m.next_tick.is_some() {
                    m.next_tick = Some(true);
                }
                Res::Done
            }
            Op::Reset { inst } => {
                let m = &mut self.instances[*inst];
                if m.lease.as_ref().is_some_and(|l| l.live) {
                    return Res::Err("precondition");
                }
                m.ledger.clear();
                for e in m.events.iter_mut().filter(|e| e.state == EvState::Pending) {
                    e.state = EvState::Drained;
                }
                m.idle = 0;
                m.since_replan = 0;
                m.blocked = 0;
                m.hash = None;
                m.next_tick = None;
                m.phase = Phase::Idle;
                m.lease = None;
                let id = minted(actual).unwrap_or(Uuid::nil());
                m.push(id, AgentEventKind::AgentInitialized, true);
                Res::Reset(id)
            }
        }
    }
}

fn is_due(at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    at <= now
}

/// Compare the store with the model for one instance.
async fn compare(h: &Harness, m: &MInstance, step: usize, op: &Op) -> Result<(), TestCaseError> {
    let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(format!("step {step} {op:?}: {e}"));
    let now = Utc::now();
    let row: InstanceRow = h
        .store
        .instances()
        .get(h.tenant, m.id)
        .await
        .map_err(|e| fail(&e))?;
    let ctx = format!("step {step} {op:?}, instance {}", m.id);
    let status = if m.closed {
        InstanceStatus::Closed
    } else {
        InstanceStatus::Active
    };
    prop_assert_eq!(row.status, status, "status; {}", ctx);
    prop_assert_eq!(
        row.lease_session,
        m.lease.as_ref().map(|l| l.session),
        "lease holder; {}",
        ctx
    );
    if let (Some(l), Some(at)) = (&m.lease, row.lease_expires_at) {
        prop_assert_eq!(at > now, l.live, "lease liveness; {}", ctx);
    }
    prop_assert_eq!(
        row.consecutive_idle_ticks,
        m.idle as i32,
        "consecutive_idle_ticks; {}",
        ctx
    );
    prop_assert_eq!(
        row.idle_ticks_since_replan,
        m.since_replan as i32,
        "idle_ticks_since_replan; {}",
        ctx
    );
    prop_assert_eq!(
        row.consecutive_blocked_turns,
        m.blocked as i32,
        "consecutive_blocked_turns; {}",
        ctx
    );
    prop_assert_eq!(&row.plan_input_hash, &m.hash, "plan_input_hash; {}", ctx);
    prop_assert_eq!(&row.phase, &m.phase, "phase; {}", ctx);
    prop_assert_eq!(
        row.next_tick_at.map(|at| is_due(at, now)),
        m.next_tick,
        "next_tick_at; {}",
        ctx
    );

    let events: Vec<EventRow> = h
        .store
        .events()
        .list(h.tenant, m.id)
        .await
        .map_err(|e| fail(&e))?;
    prop_assert_eq!(events.len(), m.events.len(), "event count; {}", ctx);
    for (db, me) in events.iter().zip(&m.events) {
        prop_assert_eq!(db.id, me.id, "event order; {}", ctx);
        prop_assert_eq!(db.event_kind, me.kind, "event kind; {}", ctx);
        let consumed = matches!(me.state, EvState::Consumed | EvState::Drained);
        prop_assert_eq!(
            db.consumed_at.is_some(),
            consumed,
            "consumed {}; {}",
            me.id,
            ctx
        );
        prop_assert_eq!(
            db.dead_lettered_at.is_some(),
            me.state == EvState::DeadLettered,
            "dead-lettered {}; {}",
            me.id,
            ctx
        );
        prop_assert_eq!(db.attempts, me.attempts, "attempts {}; {}", me.id, ctx);
        prop_assert_eq!(
            db.claimed_session,
            me.claimed,
            "claimed_session {}; {}",
            me.id,
            ctx
        );
        if me.state == EvState::Pending {
            prop_assert_eq!(is_due(db.visible_at, now), me.due, "due {}; {}", me.id, ctx);
        }
    }

    // The ledger: one row per consumed, non-drained event since the last
    // reset, numbered 1.. in completion order, each of a consumed event.
    let ledger: Vec<(i64, Uuid, bool)> = sqlx::query_as(
        "SELECT l.turn_number, l.event_id, e.consumed_at IS NOT NULL
           FROM agent_state_ledger l JOIN agent_event_queue e ON e.id = l.event_id
          WHERE l.instance_id = $1 ORDER BY l.turn_number",
    )
    .bind(m.id)
    .fetch_all(&h.pool)
    .await
    .map_err(|e| fail(&e))?;
    let turns: Vec<i64> = ledger.iter().map(|(t, _, _)| *t).collect();
    let expected_turns: Vec<i64> = (1..=m.ledger.len() as i64).collect();
    prop_assert_eq!(turns, expected_turns, "turn numbers; {}", ctx);
    let ids: Vec<Uuid> = ledger.iter().map(|(_, id, _)| *id).collect();
    prop_assert_eq!(&ids, &m.ledger, "ledger event ids; {}", ctx);
    prop_assert!(
        ledger.iter().all(|(_, _, c)| *c),
        "a ledger turn's event is unconsumed; {}",
        ctx
    );
    let consumed_turns: Vec<Uuid> = m
        .events
        .iter()
        .filter(|e| e.state == EvState::Consumed)
        .map(|e| e.id)
        .collect();
    // Only turns since the last reset have rows; earlier consumed events
    // were cleared with the ledger.
    prop_assert!(
        m.ledger.iter().all(|id| consumed_turns.contains(id)),
        "ledger rows must be consumed events; {}",
        ctx
    );

    let pending_ticks: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue WHERE instance_id = $1
           AND event_kind = 'AgentTick' AND consumed_at IS NULL AND dead_lettered_at IS NULL",
    )
    .bind(m.id)
    .fetch_one(&h.pool)
    .await
    .map_err(|e| fail(&e))?;
    prop_assert!(
        pending_ticks <= 1,
        "{} pending heartbeats; {}",
        pending_ticks,
        ctx
    );

    let (dead, stuck): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE kind = 'dead_letter'), count(*) FILTER (WHERE kind = 'stuck_halt')
           FROM attention_requests WHERE instance_id = $1",
    )
    .bind(m.id)
    .fetch_one(&h.pool)
    .await
    .map_err(|e| fail(&e))?;
    prop_assert_eq!(dead, m.dead_letters, "dead_letter requests; {}", ctx);
    prop_assert_eq!(stuck, m.stuck_halts, "stuck_halt requests; {}", ctx);
    Ok(())
}

async fn run_case(store: Store, pool: PgPool, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(e.to_string());
    let tenant = store
        .tenants()
        .create(&format!("model-{}", Uuid::new_v4()))
        .await
        .map_err(|e| fail(&e))?
        .id;
    let mut instances = Vec::new();
    for _ in 0..INSTANCES {
        let mut new = NewInstance::foundational(AgentType::Soa, InstanceStatus::Active);
        new.seed_initialized = false;
        let row = store
            .instances()
            .create(tenant, new)
            .await
            .map_err(|e| fail(&e))?;
        instances.push(MInstance {
            id: row.id,
            closed: false,
            lease: None,
            events: Vec::new(),
            ledger: Vec::new(),
            idle: 0,
            since_replan: 0,
            blocked: 0,
            hash: None,
            next_tick: row.next_tick_at.map(|at| at <= Utc::now()),
            phase: row.phase,
            dead_letters: 0,
            stuck_halts: 0,
        });
    }
    let h = Harness {
        store,
        pool,
        tenant,
        opts: AgentDispatcherOptions::default(),
    };
    let mut model = Model {
        instances,
        workers: [None; WORKERS],
    };
    for (step, op) in ops.iter().enumerate() {
        // A claim's fresh session, shared by the store call and the model.
        let session = Uuid::new_v4();
        let actual = h.run(&model, op, step, session).await?;
        let expected = model.apply(op, &actual, session);
        prop_assert_eq!(&actual, &expected, "answer of step {} {:?}", step, op);
        for m in &model.instances {
            compare(&h, m, step, op).await?;
        }
    }
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn random_tick_sequences_match_the_model(pool: PgPool) -> anyhow::Result<()> {
    let opts = AgentDispatcherOptions::default();
    assert_eq!(opts.max_consecutive_blocked_turns, MAX_BLOCKED);
    assert!(opts.enforce_stuck_guard);
    assert!(opts.standing_agent_heartbeat_interval > Duration::from_secs(3600));

    let store = common::store(&pool);
    let handle = tokio::runtime::Handle::current();
    let result = tokio::task::spawn_blocking(move || {
        let mut runner = TestRunner::new(Config {
            cases: 24,
            max_shrink_iters: 200,
            failure_persistence: None,
            ..Config::default()
        });
        runner.run(&ops_strategy(), |ops| {
            handle.block_on(run_case(store.clone(), pool.clone(), ops))
        })
    })
    .await?;
    if let Err(e) = result {
        anyhow::bail!("{e}");
    }
    Ok(())
}
