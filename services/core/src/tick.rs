//! The `AgentTickSupervisor` of spec §3.3: the rules of one tick's
//! completion, decided here and executed by genesis-store under the
//! instance's row lock. Given what the pod reported (a raw outcome or an
//! already derived decision, the tick's plan-input hash), the counters the
//! instance held before the tick and the claimed event's kind, it decides the
//! turn: decision kind and phase (through [`AgentDecisionMapper`]), the idle,
//! re-plan, blocked and exhausted counters (§3.3 steps 3-4, §3.4 step 4), the
//! STUCK halt, whether the next tick must re-plan, and how long until the
//! next heartbeat. At the claim it decides the terms the tick runs under:
//! the budget envelope (policy default, mode override within the platform's
//! bound, foundational exemption) capped at the week's credit (§3.4). Must
//! never do I/O or read a clock: the store stamps the
//! heartbeat with the database's clock from the delay decided here, so every
//! replica computes the same turn from the same inputs.

use std::time::Duration;

use chrono::{DateTime, Utc};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::budget::{
    BudgetEnvelope, CreditStatus, CreditWindow, FoundationalState, cap_to_credit, credit_status,
    policy_default, resolve_tick_budget,
};
use crate::cadence::next_heartbeat_after;
use crate::ceilings::mode_bound;
use crate::enums::{AgentDecisionKind, AgentEventKind, AgentType, Phase};
use crate::error::CoreError;
use crate::mapper::{AgentDecisionMapper, Completion, TickOutcome};
use crate::modes::{ResolvedMode, seeded_budget};
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

/// The words of the `stuck_halt` attention request a STUCK halt raises:
/// what the operator reads on the dashboard and in `genesisctl attention`.
/// The store adds only what it alone knows (the turn's ledger id) to the
/// request's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaltNotice {
    pub title: String,
    pub body: String,
}

impl TurnPlan {
    /// The attention request this turn raises, when the STUCK guard halted
    /// the instance (`None` otherwise).
    pub fn halt_notice(&self, agent_type: AgentType, instance_id: Uuid) -> Option<HaltNotice> {
        self.halt.then(|| HaltNotice {
            title: format!("Agent {agent_type} halted: stuck"),
            body: format!(
                "Agent instance {instance_id} was blocked for {} consecutive turns and has been closed.",
                self.counters.consecutive_blocked_turns
            ),
        })
    }
}

/// What a claimed tick is assembled from, besides the bundle's rows.
#[derive(Debug, Clone, Copy)]
pub struct ClaimInputs<'a> {
    pub agent_type: AgentType,
    /// The workset deadline while the instance builds its starting workset
    /// (the foundational phase), else `None`.
    pub foundational_deadline: Option<DateTime<Utc>>,
    /// The claim's clock reading.
    pub now: DateTime<Utc>,
    /// Monday 00:00 UTC of the credit window's week.
    pub week_start: DateTime<Utc>,
    /// What the tenant has spent in that window so far.
    pub credit_spent_usd: f64,
    /// The instance's resolved mode.
    pub mode: &'a ResolvedMode,
    /// The platform's options for the tenant: the bound a mode's budget
    /// override stays within, whatever the tenant wrote.
    pub platform: &'a AgentDispatcherOptions,
}

/// The terms a claimed tick runs under: its budget envelope and the credit
/// window it draws on.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimTerms {
    pub budget: BudgetEnvelope,
    pub window: CreditWindow,
    pub credit: CreditStatus,
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

    /// The budget envelope and credit of a claimed tick (spec §3.4): the
    /// type's policy default, the mode's override within the platform's
    /// bound (wider where the catalogue's own seed of the mode is wider),
    /// the foundational phase's exemption, and the dollar axis capped at
    /// what the week's window has left in every phase — the pod enforces
    /// only this envelope and never re-reads the window.
    pub fn claim_terms(&self, c: &ClaimInputs<'_>) -> ClaimTerms {
        let opts = self.options;
        let window = CreditWindow {
            week_start: c.week_start,
            limit_usd: opts.weekly_credit_usd,
            spent_usd: c.credit_spent_usd,
        };
        let credit = credit_status(&window, opts.credit_enforcement_enabled);
        let mode_budget = c.mode.budget_override.map(|o| {
            let seeded = seeded_budget(c.mode.agent_type, &c.mode.name);
            o.within_platform(&mode_bound(c.platform, seeded.as_ref()))
        });
        let foundational = c.foundational_deadline.map(|deadline| FoundationalState {
            deadline,
            now: c.now,
        });
        let budget = cap_to_credit(
            &resolve_tick_budget(
                &policy_default(c.agent_type, opts),
                mode_budget.as_ref(),
                foundational,
                opts,
            ),
            &window,
            opts.credit_enforcement_enabled,
        );
        ClaimTerms {
            budget,
            window,
            credit,
        }
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
    fn only_a_halt_raises_a_notice_and_it_names_the_agent_and_its_streak() {
        let opts = AgentDispatcherOptions::default();
        let rules = AgentTickSupervisor::new(&opts);
        let threshold = i32::try_from(opts.max_consecutive_blocked_turns).unwrap();
        let blocked = derived(AgentDecisionKind::WaitingForEvent, Phase::IdleBlocked, true);
        let instance = Uuid::from_u128(7);
        let before = rules
            .plan_turn(
                &blocked,
                None,
                &prior(threshold - 2),
                AgentEventKind::AgentTick,
            )
            .unwrap();
        assert_eq!(before.halt_notice(AgentType::Soa, instance), None);
        let at = rules
            .plan_turn(
                &blocked,
                None,
                &prior(threshold - 1),
                AgentEventKind::AgentTick,
            )
            .unwrap();
        let notice = at.halt_notice(AgentType::Compliance, instance).unwrap();
        assert_eq!(notice.title, "Agent Compliance halted: stuck");
        assert_eq!(
            notice.body,
            format!(
                "Agent instance {instance} was blocked for {threshold} consecutive turns \
                 and has been closed."
            )
        );
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

    fn mode(agent_type: AgentType, name: &str, dollars: Option<f64>) -> ResolvedMode {
        ResolvedMode {
            agent_type,
            name: name.into(),
            prompt_fragment: String::new(),
            toolset: Vec::new(),
            preset: None,
            budget_override: dollars.map(|d| crate::BudgetOverride {
                max_dollars: Some(d),
                ..crate::BudgetOverride::default()
            }),
            from_seed: true,
        }
    }

    fn inputs<'a>(
        m: &'a ResolvedMode,
        platform: &'a AgentDispatcherOptions,
        spent: f64,
        foundational: bool,
    ) -> ClaimInputs<'a> {
        let now = DateTime::parse_from_rfc3339("2026-12-02T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        ClaimInputs {
            agent_type: m.agent_type,
            foundational_deadline: foundational.then(|| now + chrono::Duration::hours(1)),
            now,
            week_start: crate::budget::week_start_for(now),
            credit_spent_usd: spent,
            mode: m,
            platform,
        }
    }

    #[test]
    fn the_dollar_axis_is_capped_at_the_weeks_credit_even_while_foundational() {
        let opts = AgentDispatcherOptions {
            weekly_credit_usd: 10.0,
            credit_enforcement_enabled: true,
            ..AgentDispatcherOptions::default()
        };
        let m = mode(AgentType::Soa, "Strategic", None);
        let terms = AgentTickSupervisor::new(&opts).claim_terms(&inputs(&m, &opts, 9.5, true));
        assert_eq!(terms.budget.max_dollars, crate::Limit::Limited(0.5));
        assert_eq!(
            terms.budget.max_tool_calls,
            crate::Limit::Unlimited,
            "foundational"
        );
        assert_eq!(terms.credit.remaining, 0.5);
        assert!(!terms.credit.exhausted);
        let spent = AgentTickSupervisor::new(&opts).claim_terms(&inputs(&m, &opts, 12.0, false));
        assert!(spent.credit.exhausted);
        assert_eq!(spent.budget.max_dollars, crate::Limit::Limited(0.0));
    }

    #[test]
    fn a_mode_override_stays_within_the_platform_unless_its_seed_is_wider() {
        let opts = AgentDispatcherOptions {
            weekly_credit_usd: 1_000.0,
            ..AgentDispatcherOptions::default()
        };
        let rules = AgentTickSupervisor::new(&opts);
        let greedy = mode(AgentType::Soa, "Strategic", Some(500.0));
        let capped = rules.claim_terms(&inputs(&greedy, &opts, 0.0, false));
        let platform_max = opts.tick_budget.max_dollars.limited().unwrap();
        assert!(
            capped.budget.max_dollars.limited().unwrap() <= platform_max,
            "{:?} above the platform's {platform_max}",
            capped.budget.max_dollars
        );
        let seeded = crate::modes::seeded_budget(AgentType::Compliance, "Research")
            .and_then(|b| b.max_dollars)
            .unwrap();
        assert!(
            seeded > platform_max,
            "the Research seed is wider than the default"
        );
        let research = mode(AgentType::Compliance, "Research", Some(seeded));
        let wide = rules.claim_terms(&inputs(&research, &opts, 0.0, false));
        assert_eq!(wide.budget.max_dollars, crate::Limit::Limited(seeded));
    }
}
