//! The `AgentTickSupervisor` of spec §3.3: the rules of one tick's
//! completion, decided here and executed by genesis-store under the
//! instance's row lock. Given what the pod reported (a raw outcome or an
//! already derived decision, the tick's plan-input hash), the counters the
//! instance held before the tick and the claimed event's kind, it decides the
//! turn: decision kind and phase (through [`AgentDecisionMapper`]), the idle,
//! re-plan, blocked and exhausted counters (§3.3 steps 3-4, §3.4 step 4), the
//! STUCK halt, whether the next tick must re-plan, and how long until the
//! next heartbeat. Must never do I/O or read a clock: the store stamps the
//! heartbeat with the database's clock from the delay decided here, so every
//! replica computes the same turn from the same inputs.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cadence::next_heartbeat_after;
use crate::enums::{AgentDecisionKind, AgentEventKind, Phase};
use crate::error::CoreError;
use crate::mapper::{AgentDecisionMapper, Completion, TickOutcome};
use crate::options::AgentDispatcherOptions;
use crate::plan_hash::{
    IdleCounters, PlanInputHash, forced_replan_due, is_idle_tick, next_blocked_turns,
    next_exhausted_turns, next_idle_counters, stuck_halt_due,
};

/// The decision of a turn as the pod reports it: the raw outcome (mapped
/// here with the shared `AgentDecisionMapper`) or an already derived pair
/// (the warm path; passed through byte-identical).
#[derive(Debug, Clone, PartialEq)]
pub enum TickDecision {
    /// Map this raw outcome with `AgentDecisionMapper`. Its `event_kind`
    /// must be the claimed event's kind.
    Outcome(TickOutcome),
    /// Kind and phase already decided; a genuine block has phase
    /// `idle:blocked`. `planned`: a real LLM plan ran (not a short-circuit
    /// or credit idle), which restarts the forced re-plan count.
    Derived {
        kind: AgentDecisionKind,
        phase: Phase,
        planned: bool,
    },
}

/// The instance values the counter rules read, as they stood before the
/// tick (spec §3.3 steps 3-4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorCounters {
    pub plan_input_hash: Option<String>,
    pub consecutive_idle_ticks: i32,
    pub idle_ticks_since_replan: i32,
    pub consecutive_blocked_turns: i32,
    #[serde(default)]
    pub consecutive_exhausted_turns: i32,
}

/// The counters a turn leaves on the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnCounters {
    pub consecutive_idle_ticks: u32,
    pub idle_ticks_since_replan: u32,
    pub consecutive_blocked_turns: u32,
    pub consecutive_exhausted_turns: u32,
}

/// Everything the completion write applies, decided from its inputs alone.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnPlan {
    pub kind: AgentDecisionKind,
    /// The phase written to the instance; `halted:stuck` when the STUCK
    /// guard closed it.
    pub phase: Phase,
    pub counters: TurnCounters,
    /// The STUCK guard fired: the instance closes, its heartbeat is dropped
    /// and an operator is asked (the `stuck_halt` attention request).
    pub halt: bool,
    /// `idle_ticks_since_replan` reached `ForcedReplanEveryNIdleTicks`: the
    /// next tick must re-plan even with unchanged inputs.
    pub forced_replan_due: bool,
    /// How long after the write the next heartbeat is due (ignored on a
    /// halt, which keeps none). The cadence keys on the idle streak as it
    /// stands after this tick, widened while turns keep running out.
    pub next_heartbeat_after: Duration,
}

/// The tick's rules under one set of dispatcher options.
#[derive(Debug, Clone, Copy)]
pub struct AgentTickSupervisor<'a> {
    options: &'a AgentDispatcherOptions,
}

/// A stored counter as the rules count it: a negative value (never written
/// by this system) counts as zero rather than wrapping.
fn counter(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

impl<'a> AgentTickSupervisor<'a> {
    /// The rules under `options` (the tenant's effective dispatcher options).
    pub fn new(options: &'a AgentDispatcherOptions) -> Self {
        Self { options }
    }

    /// Decide the turn a completion writes. `event_kind` is the claimed
    /// event's; a raw outcome for another kind is refused, since the mapping
    /// and the idle rule both key on it.
    pub fn plan_turn(
        &self,
        decision: &TickDecision,
        plan_input_hash: Option<&PlanInputHash>,
        prior: &PriorCounters,
        event_kind: AgentEventKind,
    ) -> Result<TurnPlan, CoreError> {
        let (kind, phase, planned) = match decision {
            TickDecision::Outcome(outcome) => {
                if outcome.event_kind != event_kind {
                    return Err(CoreError::InvalidArgument {
                        field: "outcome.event_kind".into(),
                        reason: format!(
                            "is {} but the claimed event is {}",
                            outcome.event_kind, event_kind
                        ),
                    });
                }
                let mapped = AgentDecisionMapper::map(outcome);
                let planned = !matches!(
                    outcome.completion,
                    Completion::ShortCircuited | Completion::CreditExhausted
                );
                (mapped.kind, mapped.phase, planned)
            }
            TickDecision::Derived {
                kind,
                phase,
                planned,
            } => (kind.clone(), *phase, *planned),
        };
        let blocked = matches!(phase, Phase::IdleBlocked);
        let exhausted = matches!(phase, Phase::IdleExhausted);
        let prior_hash: Option<PlanInputHash> = prior
            .plan_input_hash
            .as_deref()
            .and_then(|h| h.parse().ok());
        let idle =
            plan_input_hash.is_some_and(|h| is_idle_tick(event_kind, h, prior_hash.as_ref()));
        let (consecutive_idle_ticks, idle_ticks_since_replan) = next_idle_counters(
            IdleCounters {
                consecutive_idle_ticks: counter(prior.consecutive_idle_ticks),
                idle_ticks_since_replan: counter(prior.idle_ticks_since_replan),
            },
            idle,
            planned,
        );
        let consecutive_blocked_turns =
            next_blocked_turns(counter(prior.consecutive_blocked_turns), blocked);
        let consecutive_exhausted_turns =
            next_exhausted_turns(counter(prior.consecutive_exhausted_turns), exhausted);
        let halt = blocked && stuck_halt_due(consecutive_blocked_turns, self.options);
        Ok(TurnPlan {
            kind,
            phase: if halt { Phase::HaltedStuck } else { phase },
            counters: TurnCounters {
                consecutive_idle_ticks,
                idle_ticks_since_replan,
                consecutive_blocked_turns,
                consecutive_exhausted_turns,
            },
            halt,
            forced_replan_due: forced_replan_due(idle_ticks_since_replan, self.options),
            next_heartbeat_after: next_heartbeat_after(
                self.options,
                consecutive_idle_ticks,
                consecutive_exhausted_turns,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prior(blocked: i32) -> PriorCounters {
        PriorCounters {
            plan_input_hash: None,
            consecutive_idle_ticks: 0,
            idle_ticks_since_replan: 0,
            consecutive_blocked_turns: blocked,
            consecutive_exhausted_turns: 0,
        }
    }

    fn derived(kind: AgentDecisionKind, phase: Phase, planned: bool) -> TickDecision {
        TickDecision::Derived {
            kind,
            phase,
            planned,
        }
    }

    #[test]
    fn an_idle_tick_with_unchanged_inputs_counts_and_backs_the_heartbeat_off() {
        let opts = AgentDispatcherOptions {
            standing_agent_idle_heartbeat_enabled: false,
            ..AgentDispatcherOptions::default()
        };
        let rules = AgentTickSupervisor::new(&opts);
        let hash = PlanInputHash::compute(AgentEventKind::AgentTick, None, "ops");
        let mut p = prior(0);
        p.plan_input_hash = Some(hash.as_str().to_owned());
        let first = rules
            .plan_turn(
                &derived(AgentDecisionKind::Heartbeat, Phase::Idle, false),
                Some(&hash),
                &p,
                AgentEventKind::AgentTick,
            )
            .unwrap();
        assert_eq!(first.counters.consecutive_idle_ticks, 1);
        assert!(!first.halt);
        p.consecutive_idle_ticks = 1;
        p.idle_ticks_since_replan = 1;
        let second = rules
            .plan_turn(
                &derived(AgentDecisionKind::Heartbeat, Phase::Idle, false),
                Some(&hash),
                &p,
                AgentEventKind::AgentTick,
            )
            .unwrap();
        assert_eq!(second.counters.consecutive_idle_ticks, 2);
        // The cadence keys on the streak as it stands after the tick.
        assert_eq!(
            first.next_heartbeat_after,
            next_heartbeat_after(&opts, 1, 0)
        );
        assert_eq!(
            second.next_heartbeat_after,
            next_heartbeat_after(&opts, 2, 0)
        );
        assert_ne!(
            next_heartbeat_after(&opts, 0, 0),
            next_heartbeat_after(&opts, 2, 0),
            "the geometric cadence backs an idle agent off"
        );
    }

    #[test]
    fn the_stuck_guard_halts_on_the_threshold_turn_and_not_before() {
        let opts = AgentDispatcherOptions::default();
        let rules = AgentTickSupervisor::new(&opts);
        let threshold = i32::try_from(opts.max_consecutive_blocked_turns).unwrap();
        let blocked = derived(AgentDecisionKind::WaitingForEvent, Phase::IdleBlocked, true);
        let before = rules
            .plan_turn(
                &blocked,
                None,
                &prior(threshold - 2),
                AgentEventKind::AgentTick,
            )
            .unwrap();
        assert!(!before.halt);
        assert_eq!(before.phase, Phase::IdleBlocked);
        let at = rules
            .plan_turn(
                &blocked,
                None,
                &prior(threshold - 1),
                AgentEventKind::AgentTick,
            )
            .unwrap();
        assert!(at.halt);
        assert_eq!(at.phase, Phase::HaltedStuck);
        assert_eq!(
            at.counters.consecutive_blocked_turns,
            opts.max_consecutive_blocked_turns
        );
        // An exhausted turn never counts toward the guard.
        let exhausted = derived(
            AgentDecisionKind::WaitingForEvent,
            Phase::IdleExhausted,
            true,
        );
        let spared = rules
            .plan_turn(
                &exhausted,
                None,
                &prior(threshold - 1),
                AgentEventKind::AgentTick,
            )
            .unwrap();
        assert!(!spared.halt);
        assert_eq!(spared.counters.consecutive_blocked_turns, 0);
        assert_eq!(spared.counters.consecutive_exhausted_turns, 1);
    }

    #[test]
    fn an_outcome_for_another_event_kind_is_refused() {
        let opts = AgentDispatcherOptions::default();
        let outcome = TickOutcome {
            event_kind: AgentEventKind::OperatorMessage,
            raised_escalation: false,
            side_effecting_actions: 0,
            completion: Completion::Blocked,
        };
        let err = AgentTickSupervisor::new(&opts)
            .plan_turn(
                &TickDecision::Outcome(outcome),
                None,
                &prior(0),
                AgentEventKind::AgentTick,
            )
            .unwrap_err();
        assert!(
            matches!(&err, CoreError::InvalidArgument { field, .. } if field == "outcome.event_kind"),
            "{err:?}"
        );
    }
}
