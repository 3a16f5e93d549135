//! The shared AgentDecisionMapper (spec §3.4 step 11, §3.3 step 2): turns the
//! raw outcome of a tick into its `AgentDecisionKind` and phase, so the warm
//! path and the pod path (re-derived by the supervisor) classify identically.
//! Must never look at response prose or anything the model merely said: only
//! the structured outcome (tool calls are the commit).

use crate::budget::BudgetAxis;
use crate::enums::{AgentDecisionKind, AgentEventKind, Phase};

/// How the tick's episode ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// The planner terminated with `phase_complete`.
    Complete,
    /// The planner terminated with `phase_blocked`.
    Blocked,
    /// The plan-input hash was unchanged: no LLM call was made.
    ShortCircuited,
    /// The weekly credit window was exhausted: no LLM call was made.
    CreditExhausted,
    /// The per-tick envelope ran out on `axis` before a terminator.
    BudgetExhausted {
        /// The exhausted axis.
        axis: BudgetAxis,
    },
    /// The episode failed on the pod's side (a malformed bundle, a
    /// dispatch failure).
    Failed {
        /// What failed, for the ledger.
        reason: String,
    },
    /// Every provider of the preset's chain failed: nothing was decided.
    /// Such a tick is deferred, not completed (its event is retried later
    /// and no turn is written); the mapping exists so the pod's own
    /// reading of it is total.
    ProviderFailed {
        /// The last provider error.
        reason: String,
    },
}

/// The raw outcome the mapper classifies.
#[derive(Debug, Clone, PartialEq)]
pub struct TickOutcome {
    /// The event that triggered the tick.
    pub event_kind: AgentEventKind,
    /// Whether the episode raised an escalation (`soa_propose_decision`,
    /// `soa_propose_mode_change`, `mission_ask_user`).
    pub raised_escalation: bool,
    /// How many side-effecting actions succeeded.
    pub side_effecting_actions: u32,
    /// How the episode ended.
    pub completion: Completion,
}

/// The mapper's verdict: what the ledger turn records and the phase the
/// passivation write stores.
#[derive(Debug, Clone, PartialEq)]
pub struct MappedDecision {
    /// The decision kind of the turn.
    pub kind: AgentDecisionKind,
    /// The phase the turn leaves; never [`Phase::HaltedStuck`] (only the
    /// STUCK guard halts).
    pub phase: Phase,
}

impl MappedDecision {
    /// A genuine block: counts toward the STUCK guard
    /// (`consecutive_blocked_turns`).
    pub fn is_blocked(&self) -> bool {
        matches!(self.phase, Phase::IdleBlocked)
    }

    /// The `(kind, phase)` pair.
    pub fn into_pair(self) -> (AgentDecisionKind, Phase) {
        (self.kind, self.phase)
    }
}

/// The shared decision ladder. A unit type so call sites read as the spec's
/// `AgentDecisionMapper.Map(outcome)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentDecisionMapper;

impl AgentDecisionMapper {
    /// Classifies `outcome` by the precedence ladder:
    /// 1. an escalation was raised → `Escalated` / `escalated`;
    /// 2. any side-effecting action → `ActedWithTool` / `acted`;
    /// 3. clean completion → `Initialized` / `MessageAcknowledged` /
    ///    `EscalationResumed` by the triggering event, otherwise `Planned`;
    ///    phase `idle`;
    /// 4. short-circuit or credit idle → `Heartbeat` / `idle` (no LLM call
    ///    was made, whatever the event);
    /// 5. blocked → `WaitingForEvent` / `idle:blocked`, the only outcome
    ///    that counts toward the STUCK guard (spec: a genuine PhaseBlocked);
    /// 6. failed, out of per-tick budget before a terminator, or every
    ///    provider failed → `WaitingForEvent` / `idle:exhausted`. These are
    ///    not the planner's verdict, so they never close an agent: a budget
    ///    cut waits for the next event (the idle cadence keeps it cheap) and
    ///    a provider outage is deferred and retried.
    pub fn map(outcome: &TickOutcome) -> MappedDecision {
        let (kind, phase) = if outcome.raised_escalation {
            (AgentDecisionKind::Escalated, Phase::Escalated)
        } else if outcome.side_effecting_actions > 0 {
            (AgentDecisionKind::ActedWithTool, Phase::Acted)
        } else {
            match &outcome.completion {
                Completion::Complete => {
                    let kind = match outcome.event_kind {
                        AgentEventKind::AgentInitialized => AgentDecisionKind::Initialized,
                        AgentEventKind::OperatorMessage => AgentDecisionKind::MessageAcknowledged,
                        AgentEventKind::OperatorAnsweredEscalation => {
                            AgentDecisionKind::EscalationResumed
                        }
                        _ => AgentDecisionKind::Planned,
                    };
                    (kind, Phase::Idle)
                }
                Completion::ShortCircuited | Completion::CreditExhausted => {
                    (AgentDecisionKind::Heartbeat, Phase::Idle)
                }
                Completion::Blocked => (AgentDecisionKind::WaitingForEvent, Phase::IdleBlocked),
                Completion::Failed { .. }
                | Completion::BudgetExhausted { .. }
                | Completion::ProviderFailed { .. } => {
                    (AgentDecisionKind::WaitingForEvent, Phase::IdleExhausted)
                }
            }
        };
        MappedDecision { kind, phase }
    }
}

/// Free-function form of [`AgentDecisionMapper::map`].
pub fn map_decision(outcome: &TickOutcome) -> MappedDecision {
    AgentDecisionMapper::map(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use AgentDecisionKind as K;
    use AgentEventKind as E;

    fn outcome(event_kind: E, esc: bool, acts: u32, completion: Completion) -> TickOutcome {
        TickOutcome {
            event_kind,
            raised_escalation: esc,
            side_effecting_actions: acts,
            completion,
        }
    }

    #[test]
    fn ladder_covers_every_branch() {
        let failed = || Completion::Failed {
            reason: "all providers exhausted".into(),
        };
        let budget = Completion::BudgetExhausted {
            axis: BudgetAxis::ToolCalls,
        };
        let table: Vec<(TickOutcome, K, Phase, bool)> = vec![
            // 1. escalation wins over everything, even failure and actions.
            (
                outcome(E::AgentTick, true, 3, Completion::Complete),
                K::Escalated,
                Phase::Escalated,
                false,
            ),
            (
                outcome(E::OperatorMessage, true, 0, failed()),
                K::Escalated,
                Phase::Escalated,
                false,
            ),
            (
                outcome(E::AgentTick, true, 0, Completion::Blocked),
                K::Escalated,
                Phase::Escalated,
                false,
            ),
            // 2. any side-effecting action.
            (
                outcome(E::AgentTick, false, 1, Completion::Complete),
                K::ActedWithTool,
                Phase::Acted,
                false,
            ),
            (
                outcome(E::AgentInitialized, false, 2, Completion::Blocked),
                K::ActedWithTool,
                Phase::Acted,
                false,
            ),
            (
                outcome(E::OperatorMessage, false, 1, budget.clone()),
                K::ActedWithTool,
                Phase::Acted,
                false,
            ),
            // 3. clean completion, by event kind.
            (
                outcome(E::AgentInitialized, false, 0, Completion::Complete),
                K::Initialized,
                Phase::Idle,
                false,
            ),
            (
                outcome(E::OperatorMessage, false, 0, Completion::Complete),
                K::MessageAcknowledged,
                Phase::Idle,
                false,
            ),
            (
                outcome(
                    E::OperatorAnsweredEscalation,
                    false,
                    0,
                    Completion::Complete,
                ),
                K::EscalationResumed,
                Phase::Idle,
                false,
            ),
            (
                outcome(E::AgentTick, false, 0, Completion::Complete),
                K::Planned,
                Phase::Idle,
                false,
            ),
            (
                outcome(E::MissionStateChanged, false, 0, Completion::Complete),
                K::Planned,
                Phase::Idle,
                false,
            ),
            (
                outcome(E::DecisionResolved, false, 0, Completion::Complete),
                K::Planned,
                Phase::Idle,
                false,
            ),
            (
                outcome(E::DependencyCompleted, false, 0, Completion::Complete),
                K::Planned,
                Phase::Idle,
                false,
            ),
            (
                outcome(E::ExternalSignalReceived, false, 0, Completion::Complete),
                K::Planned,
                Phase::Idle,
                false,
            ),
            // 4. no LLM call made.
            (
                outcome(E::AgentTick, false, 0, Completion::ShortCircuited),
                K::Heartbeat,
                Phase::Idle,
                false,
            ),
            (
                outcome(E::AgentTick, false, 0, Completion::CreditExhausted),
                K::Heartbeat,
                Phase::Idle,
                false,
            ),
            (
                outcome(E::OperatorMessage, false, 0, Completion::CreditExhausted),
                K::Heartbeat,
                Phase::Idle,
                false,
            ),
            // 5. blocked: the only outcome that counts toward STUCK.
            (
                outcome(E::AgentTick, false, 0, Completion::Blocked),
                K::WaitingForEvent,
                Phase::IdleBlocked,
                true,
            ),
            // 6. not the planner's verdict: never counts toward STUCK.
            (
                outcome(E::OperatorMessage, false, 0, failed()),
                K::WaitingForEvent,
                Phase::IdleExhausted,
                false,
            ),
            (
                outcome(E::AgentTick, false, 0, budget),
                K::WaitingForEvent,
                Phase::IdleExhausted,
                false,
            ),
            (
                outcome(
                    E::OperatorMessage,
                    false,
                    0,
                    Completion::ProviderFailed {
                        reason: "rate limited".into(),
                    },
                ),
                K::WaitingForEvent,
                Phase::IdleExhausted,
                false,
            ),
        ];
        for (o, kind, phase, blocked) in table {
            let m = AgentDecisionMapper::map(&o);
            assert_eq!(m.kind, kind, "{o:?}");
            assert_eq!(m.phase, phase, "{o:?}");
            assert_eq!(m.is_blocked(), blocked, "{o:?}");
            assert_eq!(map_decision(&o).into_pair(), (kind, phase));
        }
    }

    #[test]
    fn every_mapped_phase_is_a_documented_phase() {
        for e in AgentEventKind::ALL {
            for c in [
                Completion::Complete,
                Completion::Blocked,
                Completion::ShortCircuited,
                Completion::BudgetExhausted {
                    axis: BudgetAxis::Turns,
                },
                Completion::ProviderFailed { reason: "x".into() },
            ] {
                for (esc, acts) in [(false, 0), (false, 1), (true, 0)] {
                    let m = AgentDecisionMapper::map(&outcome(*e, esc, acts, c.clone()));
                    assert!(Phase::ALL.contains(&m.phase));
                    assert!(m.kind.is_known());
                    assert_ne!(m.phase, Phase::HaltedStuck, "the mapper never halts");
                }
            }
        }
    }
}
