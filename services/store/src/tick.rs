//! The tick supervisor's transactions (spec §3.3, DESIGN §4): claim (CAS
//! lease, dequeue, dead-letter, heartbeat seed), lease renewal, the single
//! passivation write of complete (session guard, idle detection, STUCK
//! guard, ledger turn, consume, exactly-one heartbeat, release, notify) and
//! Reset. Each runs as one transaction on the server-side `genesis_*` tick
//! functions. What a completion writes (kind, phase, counters, halt, the
//! heartbeat delay) is decided by genesis-core's `AgentTickSupervisor`; this
//! module executes it under the row lock. Must never decide a tick rule
//! itself, never write anything when the session guard fails, and never let
//! a second writer touch phase / next tick / counters.

use std::time::Duration;

use chrono::{DateTime, Utc};
use genesis_core::tick::{AgentTickSupervisor, TurnPlan};
use genesis_core::{
    AgentDecisionKind, AgentDispatcherOptions, AgentEventKind, AgentType, Phase, PlanInputHash,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::batch::Call;
use crate::error::StoreError;
use crate::events::EventRow;
use crate::instances::InstanceRow;
use crate::rows::decode;
use crate::store::Store;

/// The decision and prior-counter types live with the rules that read them,
/// in genesis-core's tick module; re-exported where the store's callers
/// already find them.
pub use genesis_core::tick::{PriorCounters, TickDecision};

/// A claimed tick: the session that holds the lease, the pre-tick instance
/// snapshot (counters, mode, prior hash, foundational flags) and the event.
#[derive(Debug, Clone, PartialEq)]
pub struct TickClaim {
    pub session: Uuid,
    pub instance: InstanceRow,
    pub event: EventRow,
    /// Events set aside (dead-lettered) by this claim before it found one.
    pub dead_lettered: u32,
}

/// The answer of [`Store::claim_tick`].
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    /// This session now holds the lease and must complete (or let it expire).
    Claimed(Box<TickClaim>),
    /// Another live session holds the lease; retry later.
    LeaseHeld,
    /// Nothing due: a heartbeat is pending (seeded if it was missing) and the
    /// lease has been released.
    NothingDue {
        /// The pending heartbeat.
        heartbeat: EventRow,
        /// Events dead-lettered by this claim.
        dead_lettered: u32,
    },
}

/// One action a turn produced (an `agent_state_ledger_actions` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerAction {
    pub tool_name: String,
    pub arguments: serde_json::Value,
    pub result: Option<serde_json::Value>,
    /// Took effect outside the agent (proposal, message, record).
    pub side_effecting: bool,
    /// Refused by governance (fed back, not thrown).
    pub blocked: bool,
}

/// What the pod reports at the end of a tick.
#[derive(Debug, Clone, PartialEq)]
pub struct TickCompletion {
    /// The claimed event this turn consumes.
    pub event_id: Uuid,
    pub decision: TickDecision,
    /// The tick's plan-input hash (`None`: not computed; the prior is kept).
    pub plan_input_hash: Option<PlanInputHash>,
    pub actions: Vec<LedgerAction>,
    pub reasoning_summary: Option<String>,
    pub wait_condition: Option<String>,
    /// `{actions, waitCondition, reasoningSummary, activeMode}`.
    pub decision_payload: serde_json::Value,
    pub llm_call_snapshot_id: Option<Uuid>,
    pub served_model: Option<String>,
    /// Computed by the supervisor from usage and pricing, never by the pod.
    pub cost_usd: Option<f64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// The episode's last call attempts, priced, written in the turn's own
    /// transaction; the turn then links their snapshot in
    /// place of `llm_call_snapshot_id` and the usage fields above.
    pub call_attempts: Vec<crate::llm::PricedAttempt>,
}

impl TickCompletion {
    /// A completion with the given decision and nothing else recorded.
    pub fn new(event_id: Uuid, decision: TickDecision) -> Self {
        Self {
            event_id,
            decision,
            plan_input_hash: None,
            actions: Vec::new(),
            reasoning_summary: None,
            wait_condition: None,
            decision_payload: serde_json::json!({}),
            llm_call_snapshot_id: None,
            served_model: None,
            cost_usd: None,
            input_tokens: None,
            output_tokens: None,
            call_attempts: Vec::new(),
        }
    }
}

/// The result of a successful [`Store::complete_tick`].
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedTurn {
    pub ledger_id: Uuid,
    pub turn_number: i64,
    pub decision_kind: AgentDecisionKind,
    pub phase: Phase,
    /// The STUCK guard closed the instance.
    pub halted: bool,
    /// The pending heartbeat's time (`None` when halted).
    pub next_tick_at: Option<DateTime<Utc>>,
    pub heartbeat_event_id: Option<Uuid>,
    /// The `stuck_halt` request raised when halted.
    pub attention_request_id: Option<Uuid>,
    pub consecutive_idle_ticks: u32,
    pub idle_ticks_since_replan: u32,
    pub consecutive_blocked_turns: u32,
    /// `idle_ticks_since_replan` reached `ForcedReplanEveryNIdleTicks`: the
    /// next tick must re-plan even with unchanged inputs.
    pub forced_replan_due: bool,
    /// Where the counters this turn applied were computed from.
    pub prior_read: PriorRead,
}

/// Where a completion's counters came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriorRead {
    /// The caller's unlocked read still held under the row lock: the turn
    /// was written in one statement.
    Held,
    /// The caller's read had changed by then; nothing was written by that
    /// statement and the turn went through the locked read instead.
    Stale,
    /// No read was offered; the locked read was used.
    Locked,
}

impl PriorRead {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Stale => "stale",
            Self::Locked => "locked",
        }
    }
}

/// What a caller read before completing without a lock: the counters and
/// the claimed event's kind, which the database checks under the lock, and
/// the instance's type, which a STUCK halt's notice names.
/// [`Store::complete_tick_expecting`] computes the turn from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedPrior {
    pub counters: PriorCounters,
    pub event_kind: AgentEventKind,
    pub agent_type: AgentType,
}

/// The result of a successful [`Store::reset_instance`].
#[derive(Debug, Clone, PartialEq)]
pub struct ResetOutcome {
    pub cleared_turns: i64,
    pub drained_events: i64,
    /// The fresh `AgentInitialized`.
    pub event_id: Uuid,
}

/// Largest total of turn JSON (actions, payload, summaries) accepted,
/// counted as stored: a payload that embeds the actions counts them again,
/// since the ledger keeps both copies.
pub const MAX_COMPLETION_BYTES: usize = 1024 * 1024;

fn interval_ms(field: &str, d: Duration) -> Result<i64, StoreError> {
    let ms = i64::try_from(d.as_millis()).map_err(|_| StoreError::invalid(field, "too large"))?;
    if ms <= 0 {
        return Err(StoreError::invalid(field, "must be positive"));
    }
    Ok(ms)
}

/// A completion's own checks, before anything is read: cost and token
/// bounds, tool names and the size cap. The phase needs none: its type
/// holds only the phases the schema accepts.
fn check_completion(completion: &TickCompletion) -> Result<(), StoreError> {
    if completion
        .cost_usd
        .is_some_and(|c| !c.is_finite() || c < 0.0)
    {
        return Err(StoreError::invalid(
            "cost_usd",
            "must be a finite, non-negative amount",
        ));
    }
    if completion.input_tokens.is_some_and(|t| t < 0)
        || completion.output_tokens.is_some_and(|t| t < 0)
    {
        return Err(StoreError::invalid("tokens", "must be non-negative"));
    }
    for (i, a) in completion.actions.iter().enumerate() {
        crate::rows::check_text(&format!("actions[{i}].tool_name"), &a.tool_name, 200)?;
    }
    let size = serde_json::to_vec(&completion.actions)?.len()
        + serde_json::to_vec(&completion.decision_payload)?.len()
        + completion.reasoning_summary.as_ref().map_or(0, String::len)
        + completion.wait_condition.as_ref().map_or(0, String::len);
    if size > MAX_COMPLETION_BYTES {
        return Err(StoreError::PayloadTooLarge {
            size,
            limit: MAX_COMPLETION_BYTES,
        });
    }
    Ok(())
}

/// A turn as [`AgentTickSupervisor`] decided it.
struct PlannedTurn {
    plan: TurnPlan,
    /// The halt's attention request, composed by core (`None` unless halted).
    notice: Option<genesis_core::tick::HaltNotice>,
}

fn plan_turn(
    opts: &AgentDispatcherOptions,
    completion: &TickCompletion,
    prior: &PriorCounters,
    event_kind: AgentEventKind,
    (agent_type, instance_id): (AgentType, Uuid),
) -> Result<PlannedTurn, StoreError> {
    let plan = AgentTickSupervisor::new(opts).plan_turn(
        &completion.decision,
        completion.plan_input_hash.as_ref(),
        prior,
        event_kind,
    )?;
    let notice = plan.halt_notice(agent_type, instance_id);
    Ok(PlannedTurn { plan, notice })
}

/// `genesis_apply_complete`'s arguments, each named as the function's
/// parameter without its `p_` prefix, so [`apply_complete_call`] reads them
/// by name: who completes, what core decided, what the pod recorded, the
/// prior the write must still find under the lock, and the attempts. The
/// function takes them as typed parameters; this object is only how they
/// travel in a batched statement.
#[derive(Serialize)]
struct ApplyArgs<'a> {
    tenant: Uuid,
    instance: Uuid,
    session: Uuid,
    event: Uuid,
    decision_kind: &'a str,
    phase: &'static str,
    plan_input_hash: Option<&'a str>,
    consecutive_idle_ticks: u32,
    idle_ticks_since_replan: u32,
    consecutive_blocked_turns: u32,
    consecutive_exhausted_turns: u32,
    halt: bool,
    next_tick_delay_ms: i64,
    attention_title: Option<&'a str>,
    attention_body: Option<&'a str>,
    decision_payload: &'a serde_json::Value,
    wait_condition: Option<&'a str>,
    reasoning_summary: Option<&'a str>,
    llm_call_snapshot_id: Option<Uuid>,
    served_model: Option<&'a str>,
    cost_usd: Option<f64>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    actions: &'a [LedgerAction],
    expecting: bool,
    expect_event_kind: Option<&'static str>,
    expect_plan_input_hash: Option<&'a str>,
    expect_idle_ticks: Option<i32>,
    expect_idle_since_replan: Option<i32>,
    expect_blocked_turns: Option<i32>,
    expect_exhausted_turns: Option<i32>,
    attempts: &'a serde_json::Value,
}

impl<'a> ApplyArgs<'a> {
    fn new(
        (tenant, instance, session): (Uuid, Uuid, Uuid),
        completion: &'a TickCompletion,
        turn: &'a PlannedTurn,
        expect: Option<&'a ExpectedPrior>,
        attempts: &'a serde_json::Value,
    ) -> Self {
        let plan = &turn.plan;
        let c = &plan.counters;
        let prior = expect.map(|e| &e.counters);
        Self {
            tenant,
            instance,
            session,
            event: completion.event_id,
            decision_kind: plan.kind.as_str(),
            phase: plan.phase.as_str(),
            plan_input_hash: completion
                .plan_input_hash
                .as_ref()
                .map(PlanInputHash::as_str),
            consecutive_idle_ticks: c.consecutive_idle_ticks,
            idle_ticks_since_replan: c.idle_ticks_since_replan,
            consecutive_blocked_turns: c.consecutive_blocked_turns,
            consecutive_exhausted_turns: c.consecutive_exhausted_turns,
            halt: plan.halt,
            next_tick_delay_ms: i64::try_from(plan.next_heartbeat_after.as_millis())
                .unwrap_or(i64::MAX),
            attention_title: turn.notice.as_ref().map(|n| n.title.as_str()),
            attention_body: turn.notice.as_ref().map(|n| n.body.as_str()),
            decision_payload: &completion.decision_payload,
            wait_condition: completion.wait_condition.as_deref(),
            reasoning_summary: completion.reasoning_summary.as_deref(),
            llm_call_snapshot_id: completion.llm_call_snapshot_id,
            served_model: completion.served_model.as_deref(),
            cost_usd: completion.cost_usd,
            input_tokens: completion.input_tokens,
            output_tokens: completion.output_tokens,
            actions: &completion.actions,
            expecting: expect.is_some(),
            expect_event_kind: expect.map(|e| e.event_kind.as_str()),
            expect_plan_input_hash: prior.and_then(|p| p.plan_input_hash.as_deref()),
            expect_idle_ticks: prior.map(|p| p.consecutive_idle_ticks),
            expect_idle_since_replan: prior.map(|p| p.idle_ticks_since_replan),
            expect_blocked_turns: prior.map(|p| p.consecutive_blocked_turns),
            expect_exhausted_turns: prior.map(|p| p.consecutive_exhausted_turns),
            attempts,
        }
    }
}

/// The completion's attempts as `genesis_apply_complete` takes them: JSON
/// null for none, else the array of checked attempt objects. Every attempt
/// must be the completing session's on the completing instance.
fn attempts_arg(
    instance_id: Uuid,
    session: Uuid,
    attempts: &[crate::llm::PricedAttempt],
) -> Result<serde_json::Value, StoreError> {
    if attempts.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    attempts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if (p.attempt.instance_id, p.attempt.session) != (instance_id, session) {
                return Err(StoreError::invalid(
                    format!("call_attempts[{i}]"),
                    "must be made by the completing session on its instance",
                ));
            }
            crate::llm::attempt_object(&p.attempt, p.credit, p.journal.as_ref())
        })
        .collect::<Result<Vec<_>, _>>()
        .map(serde_json::Value::Array)
}

/// What [`Store::defer_tick`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct DeferredTick {
    /// When the deferred event is visible again.
    pub visible_at: DateTime<Utc>,
    /// The instance's provider-failure streak, this one included.
    pub consecutive_provider_failures: i32,
    /// The `provider_failure` attention request, when this deferral
    /// reached the threshold.
    pub attention_request_id: Option<Uuid>,
}

#[derive(Deserialize)]
struct RawDefer {
    outcome: String,
    #[serde(default)]
    visible_at: Option<DateTime<Utc>>,
    #[serde(default)]
    consecutive_provider_failures: Option<i32>,
    #[serde(default)]
    attention_request_id: Option<Uuid>,
}

/// The error for a lock or apply outcome that writes nothing.
fn refusal(outcome: &str, what: Option<String>) -> StoreError {
    match outcome {
        "lease_lost" => StoreError::LeaseLost,
        "event_not_claimed" => StoreError::invalid(
            "event_id",
            "not an unconsumed event claimed by this session",
        ),
        "not_found" => StoreError::not_found(what.unwrap_or_else(|| "agent instance".into())),
        other => StoreError::Database(format!("unexpected complete outcome {other:?}")),
    }
}

/// `genesis_apply_complete`'s answer: the written turn, `None` for
/// `stale_prior` (nothing written), or the refusal.
fn applied(
    raw: serde_json::Value,
    turn: PlannedTurn,
    read: PriorRead,
) -> Result<Option<CompletedTurn>, StoreError> {
    let applied: RawApply = decode(raw)?;
    match (
        applied.outcome.as_str(),
        applied.ledger_id,
        applied.turn_number,
    ) {
        ("completed", Some(ledger_id), Some(turn_number)) => Ok(Some(CompletedTurn {
            ledger_id,
            turn_number,
            decision_kind: turn.plan.kind,
            phase: turn.plan.phase,
            halted: applied.halted.unwrap_or(false),
            next_tick_at: applied.next_tick_at,
            heartbeat_event_id: applied.heartbeat_event_id,
            attention_request_id: applied.attention_request_id,
            consecutive_idle_ticks: turn.plan.counters.consecutive_idle_ticks,
            idle_ticks_since_replan: turn.plan.counters.idle_ticks_since_replan,
            consecutive_blocked_turns: turn.plan.counters.consecutive_blocked_turns,
            forced_replan_due: turn.plan.forced_replan_due,
            prior_read: read,
        })),
        ("stale_prior", _, _) => Ok(None),
        (other, _, _) => Err(refusal(other, None)),
    }
}

#[derive(Deserialize)]
struct RawClaim {
    outcome: String,
    status: Option<String>,
    instance: Option<InstanceRow>,
    event: Option<EventRow>,
    heartbeat: Option<EventRow>,
    dead_lettered: Option<u32>,
    /// The bundle read made with the claim (`genesis_claim_and_read`).
    bundle: Option<serde_json::Value>,
}

impl RawClaim {
    /// The claim's answer as the store's outcome; a malformed or unknown
    /// answer is a database error.
    fn into_outcome(self, session: Uuid) -> Result<ClaimOutcome, StoreError> {
        match self.outcome.as_str() {
            "claimed" => match (self.instance, self.event) {
                (Some(instance), Some(event)) => Ok(ClaimOutcome::Claimed(Box::new(TickClaim {
                    session,
                    instance,
                    event,
                    dead_lettered: self.dead_lettered.unwrap_or(0),
                }))),
                _ => Err(StoreError::Database(
                    "claim returned no instance/event".to_owned(),
                )),
            },
            "lease_held" => Ok(ClaimOutcome::LeaseHeld),
            "nothing_due" => match self.heartbeat {
                Some(heartbeat) => Ok(ClaimOutcome::NothingDue {
                    heartbeat,
                    dead_lettered: self.dead_lettered.unwrap_or(0),
                }),
                None => Err(StoreError::Database(
                    "claim returned no heartbeat".to_owned(),
                )),
            },
            "not_active" => Err(StoreError::precondition(format!(
                "agent instance is {}",
                self.status.unwrap_or_default()
            ))),
            "not_found" => Err(StoreError::not_found("agent instance")),
            other => Err(StoreError::Database(format!(
                "unexpected claim outcome {other:?}"
            ))),
        }
    }
}

/// What a claim's bundle read asks for (DESIGN §4 claim step 4), as
/// [`Store::read_tick_bundle`] and [`Store::claim_tick_reading`] take it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BundleAsk<'a> {
    /// How many of the newest ledger turns the pod gets.
    pub tail: i64,
    pub agent_type: genesis_core::AgentType,
    /// The site chain whose bindings are read.
    pub sites: &'a [String],
    /// The credit window read.
    pub week_start: DateTime<Utc>,
    /// The newest ledger turn the caller holds (number, id), if any.
    pub known: Option<(i64, Uuid)>,
    /// The epoch of the catalogue the caller holds (0: none).
    pub catalogue_epoch: i64,
}

type JsonScalar<'q> =
    sqlx::query::QueryScalar<'q, sqlx::Postgres, serde_json::Value, sqlx::postgres::PgArguments>;

impl BundleAsk<'_> {
    /// Whether this read can be made with the claim: not for a Compliance
    /// instance, whose read also discovers the corpus in its transaction.
    pub fn joins_claim(&self) -> bool {
        self.agent_type != genesis_core::AgentType::Compliance
    }
}

/// The claim without a bundle read, batched ([`crate::batch`]): arguments
/// tenant, instance, session, lease TTL in ms, max attempts.
const CLAIM_TICK: Call = Call {
    name: "claim",
    sql: "genesis_claim_tick((a->>0)::uuid, (a->>1)::uuid, (a->>2)::uuid,
                             (a->>3)::bigint * interval '1 millisecond', (a->>4)::integer)",
};

/// The claim and its bundle read, batched: the claim's
/// arguments, then the read's in [`bind_ask`]'s order.
const CLAIM_AND_READ: Call = Call {
    name: "claim_and_read",
    sql: "genesis_claim_and_read((a->>0)::uuid, (a->>1)::uuid, (a->>2)::uuid,
                                 (a->>3)::bigint * interval '1 millisecond', (a->>4)::integer,
                                 (a->>5)::bigint, a->>6, ARRAY(SELECT jsonb_array_elements_text(a->7)),
                                 (a->>8)::timestamptz, (a->>9)::bigint, (a->>10)::uuid, (a->>11)::bigint)",
};

/// The call of `genesis_apply_complete` from an [`ApplyArgs`] object `a`,
/// each argument by its parameter's name. The one text both completion
/// paths run: batched (the optimistic write) and alone in the locked
/// transaction.
macro_rules! apply_complete_call {
    () => {
        "genesis_apply_complete(
            p_tenant => (a->>'tenant')::uuid, p_instance => (a->>'instance')::uuid,
            p_session => (a->>'session')::uuid, p_event => (a->>'event')::uuid,
            p_decision_kind => a->>'decision_kind', p_phase => a->>'phase',
            p_plan_input_hash => a->>'plan_input_hash',
            p_consecutive_idle_ticks => (a->>'consecutive_idle_ticks')::integer,
            p_idle_ticks_since_replan => (a->>'idle_ticks_since_replan')::integer,
            p_consecutive_blocked_turns => (a->>'consecutive_blocked_turns')::integer,
            p_consecutive_exhausted_turns => (a->>'consecutive_exhausted_turns')::integer,
            p_halt => (a->>'halt')::boolean, p_next_tick_delay_ms => (a->>'next_tick_delay_ms')::bigint,
            p_attention_title => a->>'attention_title', p_attention_body => a->>'attention_body',
            p_decision_payload => a->'decision_payload', p_wait_condition => a->>'wait_condition',
            p_reasoning_summary => a->>'reasoning_summary',
            p_llm_call_snapshot_id => (a->>'llm_call_snapshot_id')::uuid,
            p_served_model => a->>'served_model', p_cost_usd => (a->>'cost_usd')::numeric,
            p_input_tokens => (a->>'input_tokens')::bigint, p_output_tokens => (a->>'output_tokens')::bigint,
            p_actions => a->'actions', p_expecting => (a->>'expecting')::boolean,
            p_expect_event_kind => a->>'expect_event_kind',
            p_expect_plan_input_hash => a->>'expect_plan_input_hash',
            p_expect_idle_ticks => (a->>'expect_idle_ticks')::integer,
            p_expect_idle_since_replan => (a->>'expect_idle_since_replan')::integer,
            p_expect_blocked_turns => (a->>'expect_blocked_turns')::integer,
            p_expect_exhausted_turns => (a->>'expect_exhausted_turns')::integer,
            p_attempts => a->'attempts')"
    };
}

/// The optimistic completion with its attempts, batched.
const APPLY_COMPLETE: Call = Call {
    name: "complete",
    sql: apply_complete_call!(),
};

/// The locked completion's statement: the same call on one bound object.
const APPLY_COMPLETE_ALONE: &str = concat!(
    "SELECT ",
    apply_complete_call!(),
    " FROM (SELECT $1::jsonb) AS y(a)"
);

/// Bind a bundle read's arguments after those already bound, in the order
/// `genesis_read_bundle` and `genesis_claim_and_read` take them.
fn bind_ask<'q>(query: JsonScalar<'q>, ask: Option<&BundleAsk<'q>>) -> JsonScalar<'q> {
    let Some(a) = ask else {
        return query;
    };
    query
        .bind(a.tail)
        .bind(a.agent_type.as_str())
        .bind(a.sites)
        .bind(a.week_start)
        .bind(a.known.map_or(0, |(turn, _)| turn))
        .bind(a.known.map(|(_, id)| id))
        .bind(a.catalogue_epoch)
}

#[derive(Deserialize)]
struct RawLock {
    outcome: String,
    what: Option<String>,
    instance: Option<InstanceRow>,
    event: Option<EventRow>,
}

#[derive(Deserialize)]
struct RawApply {
    outcome: String,
    ledger_id: Option<Uuid>,
    turn_number: Option<i64>,
    halted: Option<bool>,
    next_tick_at: Option<DateTime<Utc>>,
    heartbeat_event_id: Option<Uuid>,
    attention_request_id: Option<Uuid>,
}

#[derive(Deserialize)]
struct RawReset {
    outcome: String,
    cleared_turns: Option<i64>,
    drained_events: Option<i64>,
    event_id: Option<Uuid>,
}

/// What [`Store::complete_context`] returns; each part `None` when absent
/// (an unknown event, another instance's snapshot), for the caller to
/// answer as it sees fit.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CompleteContext {
    pub event_kind: Option<String>,
    pub active_mode: Option<String>,
    pub snapshot: Option<crate::llm::CallSnapshotRow>,
    /// `system_configs`: the tenant's rows over the global ones, and the
    /// platform's values for the tenant.
    pub configs: crate::config::TenantConfigs,
    pub agent_type: Option<String>,
    /// The instance's counters as this read saw them (no lock); `None` for
    /// an unknown instance.
    pub prior: Option<PriorCounters>,
}

impl Store {
    /// ClaimTick: take the instance's CAS lease for `session` (a live lease
    /// of another session → [`ClaimOutcome::LeaseHeld`]; an expired one is
    /// simply taken over), then the next due event (lowest sequence), stamped
    /// with the session and `attempts + 1`. An event already at
    /// `max_attempts` is dead-lettered with a `dead_letter` attention request
    /// and the next one is tried. Nothing due → seed the heartbeat at
    /// `next_tick_at` (or now) if none is pending, release the lease.
    /// One round trip. Paused/closed instance → `FailedPrecondition`.
    pub async fn claim_tick(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        session: Uuid,
        lease_ttl: Duration,
        max_attempts: u32,
    ) -> Result<ClaimOutcome, StoreError> {
        self.claim_tick_reading(
            tenant_id,
            instance_id,
            session,
            lease_ttl,
            max_attempts,
            None,
        )
        .await
        .map(|(claim, _)| claim)
    }

    /// [`Store::claim_tick`], and with `ask` the claim's bundle read in the
    /// same round trip (`genesis_claim_and_read`): the raw
    /// JSON of [`Store::read_tick_bundle`], present only when an instance of
    /// `ask.agent_type` was claimed. The caller still checks that the
    /// claimed instance yields `ask.sites`. Never for a Compliance instance,
    /// whose read also discovers the corpus (`None` is answered).
    pub async fn claim_tick_reading(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        session: Uuid,
        lease_ttl: Duration,
        max_attempts: u32,
        ask: Option<&BundleAsk<'_>>,
    ) -> Result<(ClaimOutcome, Option<serde_json::Value>), StoreError> {
        let ttl_ms = interval_ms("lease_ttl", lease_ttl)?;
        let max_attempts = i32::try_from(max_attempts)
            .ok()
            .filter(|m| *m > 0)
            .ok_or_else(|| StoreError::invalid("max_attempts", "must be between 1 and 2^31-1"))?;
        let ask = ask.filter(|a| a.joins_claim());
        let mut args = vec![
            serde_json::json!(tenant_id),
            serde_json::json!(instance_id),
            serde_json::json!(session),
            serde_json::json!(ttl_ms),
            serde_json::json!(max_attempts),
        ];
        let call = match ask {
            None => CLAIM_TICK,
            Some(a) => {
                args.extend([
                    serde_json::json!(a.tail),
                    serde_json::json!(a.agent_type.as_str()),
                    serde_json::json!(a.sites),
                    serde_json::json!(a.week_start),
                    serde_json::json!(a.known.map_or(0, |(turn, _)| turn)),
                    serde_json::json!(a.known.map(|(_, id)| id)),
                    serde_json::json!(a.catalogue_epoch),
                ]);
                CLAIM_AND_READ
            }
        };
        let raw = self
            .batched(call, instance_id, serde_json::Value::Array(args))
            .await?;
        let mut raw: RawClaim = decode(raw)?;
        let bundle = raw.bundle.take();
        Ok((raw.into_outcome(session)?, bundle))
    }

    /// The claim's bundle read (DESIGN §4 claim step 4) as the raw JSON of
    /// `genesis_read_bundle`: one autocommit round trip
    /// (the function sets the tenant itself). `ask.known` names the newest
    /// ledger turn the caller already holds (number, id): when it still
    /// exists, `ledger` carries only the later turns and `ledger_after` is
    /// its number; otherwise `ledger` is the whole tail and `ledger_after`
    /// is 0. `ask.catalogue_epoch` is the epoch of the catalogue the caller
    /// holds (0 for none): when it is still the current one, the configs,
    /// modes, bindings and mode presets are left out; the answer's
    /// `catalogue_epoch` is always the current epoch. A Compliance
    /// instance's read runs in one tenant transaction with the cold-sweep
    /// corpus discovery (spec §3.4 step 8), which it also returns.
    pub async fn read_tick_bundle(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        ask: &BundleAsk<'_>,
    ) -> Result<
        (
            serde_json::Value,
            Option<crate::knowledge::ComplianceCorpus>,
        ),
        StoreError,
    > {
        let query = || {
            bind_ask(
                sqlx::query_scalar(
                    "SELECT genesis_read_bundle($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(tenant_id)
                .bind(instance_id),
                Some(ask),
            )
        };
        if ask.agent_type != genesis_core::AgentType::Compliance {
            return Ok((query().fetch_one(self.tenant_pool()).await?, None));
        }
        let mut tx = self.tenant_tx(tenant_id).await?;
        let raw = query().fetch_one(tx.conn()).await?;
        let corpus =
            crate::knowledge::compliance_corpus(tx.conn(), crate::knowledge::MAX_CORPUS_PROJECTS)
                .await?;
        tx.commit().await?;
        Ok((raw, Some(corpus)))
    }

    /// What CompleteTick reads before the mapper runs
    /// (`genesis_complete_context`, one autocommit round trip).
    pub async fn complete_context(
        &self,
        tenant_id: Uuid,
        event_id: Uuid,
        instance_id: Uuid,
        snapshot_id: Option<Uuid>,
    ) -> Result<CompleteContext, StoreError> {
        let raw: serde_json::Value =
            sqlx::query_scalar("SELECT genesis_complete_context($1, $2, $3, $4)")
                .bind(tenant_id)
                .bind(event_id)
                .bind(instance_id)
                .bind(snapshot_id)
                .fetch_one(self.tenant_pool())
                .await?;
        decode(raw)
    }

    /// RenewLease: extend the lease held by `session` by `ttl` from now.
    /// Not held by this session, or already expired (the claim counts an
    /// expired lease as free, so another pod may hold the event by now) →
    /// [`StoreError::LeaseLost`], and nothing is written.
    pub async fn renew_lease(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        session: Uuid,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let ttl_ms = interval_ms("lease_ttl", ttl)?;
        let renewed: bool = sqlx::query_scalar(
            "SELECT genesis_renew_lease($1, $2, $3, $4::bigint * interval '1 millisecond')",
        )
        .bind(tenant_id)
        .bind(instance_id)
        .bind(session)
        .bind(ttl_ms)
        .fetch_one(self.tenant_pool())
        .await?;
        if renewed {
            Ok(())
        } else {
            Err(StoreError::LeaseLost)
        }
    }

    /// CompleteTick, the single passivation writer, in ONE transaction:
    /// lock the instance and check `lease_session = session` (otherwise
    /// write nothing: [`StoreError::LeaseLost`]); compute idle / re-plan /
    /// blocked counters and the STUCK halt from the locked snapshot and
    /// `opts`; then (server side) insert the ledger turn and its actions,
    /// consume the event, either halt (status closed, phase `halted:stuck`,
    /// pending heartbeats consumed, a `stuck_halt` attention request) or
    /// ensure exactly one pending heartbeat at now + cadence (an already
    /// pending heartbeat is kept where it is, and `next_tick_at` reports
    /// it), write phase / next tick / counters / last decision / hash,
    /// release the lease and `pg_notify('genesis_turns', ...)`.
    pub async fn complete_tick(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        session: Uuid,
        completion: TickCompletion,
        opts: &AgentDispatcherOptions,
    ) -> Result<CompletedTurn, StoreError> {
        self.complete_tick_expecting(tenant_id, instance_id, session, completion, opts, None)
            .await
    }

    /// [`Store::complete_tick`] in one autocommit statement when `expect`
    /// is given: the turn is computed from it, read earlier without a lock,
    /// and the database writes it only if the locked instance and event
    /// still hold those values. If they do not
    /// (`stale_prior`), nothing was written and the locked path runs
    /// instead, so a stale read costs a second attempt, never a wrong
    /// counter. `None` takes the locked path at once.
    ///
    /// The completion's `call_attempts` are written with the turn, after
    /// its session guard. A completion refused while the
    /// session still holds its lease (a bad completion, an event it did
    /// not claim) records them alone, as RecordCallAttempt would, so a call
    /// made under the lease is always paid for.
    #[allow(clippy::too_many_arguments)]
    pub async fn complete_tick_expecting(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        session: Uuid,
        completion: TickCompletion,
        opts: &AgentDispatcherOptions,
        expect: Option<&ExpectedPrior>,
    ) -> Result<CompletedTurn, StoreError> {
        let attempts = attempts_arg(instance_id, session, &completion.call_attempts)?;
        let done = self
            .complete_writing(
                (tenant_id, instance_id, session),
                &completion,
                opts,
                expect,
                &attempts,
            )
            .await;
        match done {
            Err(e @ (StoreError::InvalidArgument { .. } | StoreError::PayloadTooLarge { .. }))
                if !completion.call_attempts.is_empty() =>
            {
                // The objects the completion sent, already checked.
                let objects = attempts.as_array().map(Vec::as_slice).unwrap_or_default();
                for (p, object) in completion.call_attempts.iter().zip(objects) {
                    if let Err(lost) = self
                        .llm()
                        .record_attempt_object(
                            tenant_id,
                            (instance_id, session),
                            object.clone(),
                            p.attempt.cost_usd,
                        )
                        .await
                    {
                        tracing::warn!(%instance_id, error = %lost, "a refused completion's attempt was not recorded");
                        break;
                    }
                }
                Err(e)
            }
            done => done,
        }
    }

    /// [`Store::complete_tick_expecting`]'s write: optimistic when `expect`
    /// is given, locked otherwise or when it was stale.
    async fn complete_writing(
        &self,
        (tenant_id, instance_id, session): (Uuid, Uuid, Uuid),
        completion: &TickCompletion,
        opts: &AgentDispatcherOptions,
        expect: Option<&ExpectedPrior>,
        attempts: &serde_json::Value,
    ) -> Result<CompletedTurn, StoreError> {
        check_completion(completion)?;
        let read = match expect {
            None => PriorRead::Locked,
            Some(expect) => {
                let turn = plan_turn(
                    opts,
                    completion,
                    &expect.counters,
                    expect.event_kind,
                    (expect.agent_type, instance_id),
                )?;
                let args = ApplyArgs::new(
                    (tenant_id, instance_id, session),
                    completion,
                    &turn,
                    Some(expect),
                    attempts,
                );
                let raw = self
                    .batched(APPLY_COMPLETE, instance_id, serde_json::to_value(&args)?)
                    .await?;
                if let Some(done) = applied(raw, turn, PriorRead::Held)? {
                    return Ok(done);
                }
                tracing::debug!(%instance_id, "completion's prior read was stale; taking the lock");
                PriorRead::Stale
            }
        };
        self.complete_locked(
            (tenant_id, instance_id, session),
            completion,
            opts,
            read,
            attempts,
        )
        .await
    }

    /// The locked completion: read the instance and event under the row
    /// lock, compute the turn, write it, in one transaction.
    async fn complete_locked(
        &self,
        (tenant_id, instance_id, session): (Uuid, Uuid, Uuid),
        completion: &TickCompletion,
        opts: &AgentDispatcherOptions,
        read: PriorRead,
        attempts: &serde_json::Value,
    ) -> Result<CompletedTurn, StoreError> {
        let mut tx = self.tenant_pool().begin().await?;
        let raw: serde_json::Value =
            sqlx::query_scalar("SELECT genesis_lock_for_complete($1, $2, $3, $4)")
                .bind(tenant_id)
                .bind(instance_id)
                .bind(session)
                .bind(completion.event_id)
                .fetch_one(&mut *tx)
                .await?;
        let lock: RawLock = decode(raw)?;
        let (prior, event) = match (lock.outcome.as_str(), lock.instance, lock.event) {
            ("locked", Some(i), Some(e)) => (i, e),
            (other, _, _) => return Err(refusal(other, lock.what)),
        };
        let turn = plan_turn(
            opts,
            completion,
            &PriorCounters::from(&prior),
            event.event_kind,
            (prior.agent_type, instance_id),
        )?;
        let args = ApplyArgs::new(
            (tenant_id, instance_id, session),
            completion,
            &turn,
            None,
            attempts,
        );
        let raw: serde_json::Value = sqlx::query_scalar(APPLY_COMPLETE_ALONE)
            .bind(serde_json::to_value(&args)?)
            .fetch_one(&mut *tx)
            .await?;
        match applied(raw, turn, read)? {
            Some(done) => {
                tx.commit().await?;
                Ok(done)
            }
            // Only an expectation can be stale, and none was sent.
            None => Err(StoreError::Database(
                "unexpected complete outcome \"stale_prior\"".to_owned(),
            )),
        }
    }

    /// Defer the claimed event of a tick whose every LLM provider failed,
    /// in one statement under the instance's row lock
    /// (`genesis_defer_tick`): record and bill the attempts, put the event
    /// back unconsumed, visible again after `opts`' growing delay, with its
    /// delivery attempt given back (an outage never dead-letters an
    /// operator's message) and a new publish epoch so the outbox publishes
    /// it again; count the instance's provider-failure streak, raise a
    /// `provider_failure` attention request when it reaches the threshold,
    /// release the lease. No ledger turn; the STUCK counter is untouched.
    /// A session that lost its lease writes nothing ([`StoreError::LeaseLost`]).
    pub async fn defer_tick(
        &self,
        (tenant_id, instance_id, session): (Uuid, Uuid, Uuid),
        event_id: Uuid,
        attempts: &[crate::llm::PricedAttempt],
        reason: &str,
        opts: &AgentDispatcherOptions,
    ) -> Result<DeferredTick, StoreError> {
        let objects = attempts_arg(instance_id, session, attempts)?;
        let ms = |field: &str, d: Duration| interval_ms(field, d);
        let raw: serde_json::Value =
            sqlx::query_scalar("SELECT genesis_defer_tick($1, $2, $3, $4, $5, $6, $7, $8, $9)")
                .bind(tenant_id)
                .bind(instance_id)
                .bind(session)
                .bind(event_id)
                .bind(&objects)
                .bind(ms(
                    "provider_failure_base_delay",
                    opts.provider_failure_base_delay,
                )?)
                .bind(ms(
                    "provider_failure_max_delay",
                    opts.provider_failure_max_delay,
                )?)
                .bind(i32::try_from(opts.provider_failure_attention_after).unwrap_or(i32::MAX))
                .bind(reason)
                .fetch_one(self.tenant_pool())
                .await?;
        let outcome: RawDefer = decode(raw)?;
        match (outcome.outcome.as_str(), outcome.visible_at) {
            ("deferred", Some(visible_at)) => Ok(DeferredTick {
                visible_at,
                consecutive_provider_failures: outcome.consecutive_provider_failures.unwrap_or(0),
                attention_request_id: outcome.attention_request_id,
            }),
            (other, _) => Err(refusal(other, None)),
        }
    }

    /// Reset: clear the instance's ledger (the one documented clear), drain
    /// its pending events, reset counters and seed a fresh
    /// `AgentInitialized`. Refused with `FailedPrecondition` while a live
    /// lease is held (a tick is mid-flight).
    pub async fn reset_instance(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
    ) -> Result<ResetOutcome, StoreError> {
        let mut tx = self.tenant_tx(tenant_id).await?;
        let raw: serde_json::Value = sqlx::query_scalar("SELECT genesis_reset_instance($1, $2)")
            .bind(tenant_id)
            .bind(instance_id)
            .fetch_one(tx.conn())
            .await?;
        let raw: RawReset = decode(raw)?;
        match (raw.outcome.as_str(), raw.event_id) {
            ("reset", Some(event_id)) => {
                tx.commit().await?;
                Ok(ResetOutcome {
                    cleared_turns: raw.cleared_turns.unwrap_or(0),
                    drained_events: raw.drained_events.unwrap_or(0),
                    event_id,
                })
            }
            ("lease_held", _) => Err(StoreError::precondition("a tick is in flight (lease held)")),
            ("not_found", _) => Err(StoreError::not_found("agent instance")),
            (other, _) => Err(StoreError::Database(format!(
                "unexpected reset outcome {other:?}"
            ))),
        }
    }
}
