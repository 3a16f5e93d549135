//! Per-tick budget envelopes and the weekly credit window (spec §3.6, §3.4
//! step 9). Owns the `Limit` axis type, the per-type policy defaults, the
//! three-layer resolution (foundational → mode override → policy default),
//! the consumption check that names the exhausted axis, and the weekly dollar
//! ceiling. Must never read configuration or clocks itself: callers pass the
//! options and `now` in, so every rule stays a pure function.

use chrono::{DateTime, Datelike, Duration as TimeDelta, TimeZone, Utc};
use serde_json::Value;

use crate::enums::AgentType;
use crate::error::CoreError;
use crate::options::AgentDispatcherOptions;

/// One budget axis: either a finite ceiling or no ceiling at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit<T = u64> {
    /// At most this much.
    Limited(T),
    /// No ceiling (foundational phase).
    Unlimited,
}

impl<T: PartialOrd + Copy> Limit<T> {
    /// True when `used` has reached or passed this ceiling.
    pub fn is_exhausted_by(&self, used: T) -> bool {
        match self {
            Limit::Limited(max) => used >= *max,
            Limit::Unlimited => false,
        }
    }

    /// The finite ceiling, if any.
    pub fn limited(&self) -> Option<T> {
        match self {
            Limit::Limited(v) => Some(*v),
            Limit::Unlimited => None,
        }
    }
}

/// The per-tick envelope the invoker enforces at every loop boundary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetEnvelope {
    /// Total (input + output) tokens across the episode.
    pub max_tokens: Limit,
    /// Output tokens a single LLM turn may produce (the request's max_tokens).
    pub max_output_tokens_per_turn: Limit,
    /// Tool calls across the episode.
    pub max_tool_calls: Limit,
    /// Wall-clock seconds of the episode.
    pub max_wall_seconds: Limit,
    /// Dollars of the episode (computed server-side from usage).
    pub max_dollars: Limit<f64>,
    /// LLM turns of the episode.
    pub max_turns: Limit,
}

impl BudgetEnvelope {
    /// The shared standing-agent default (SOA and Compliance; missions too).
    pub const STANDING_DEFAULT: BudgetEnvelope = BudgetEnvelope {
        max_tokens: Limit::Limited(24_000),
        max_output_tokens_per_turn: Limit::Limited(4_096),
        max_tool_calls: Limit::Limited(12),
        max_wall_seconds: Limit::Limited(300),
        max_dollars: Limit::Limited(1.50),
        max_turns: Limit::Limited(12),
    };

    /// The Prompt Engineer's smaller default: one focused redaction pass.
    pub const PROMPT_REDACTOR_DEFAULT: BudgetEnvelope = BudgetEnvelope {
        max_tokens: Limit::Limited(8_000),
        max_output_tokens_per_turn: Limit::Limited(2_048),
        max_tool_calls: Limit::Limited(6),
        max_wall_seconds: Limit::Limited(120),
        max_dollars: Limit::Limited(0.50),
        max_turns: Limit::Limited(6),
    };
}

crate::enums::stored_enum! {
    /// The axis of a [`BudgetEnvelope`]; the text form is the budget-JSON key.
    BudgetAxis {
        /// [`BudgetEnvelope::max_tokens`].
        Tokens => "maxTokens",
        /// [`BudgetEnvelope::max_output_tokens_per_turn`].
        OutputTokensPerTurn => "maxOutputTokensPerTurn",
        /// [`BudgetEnvelope::max_tool_calls`].
        ToolCalls => "maxToolCalls",
        /// [`BudgetEnvelope::max_wall_seconds`].
        WallSeconds => "maxWallSeconds",
        /// [`BudgetEnvelope::max_dollars`].
        Dollars => "maxDollars",
        /// [`BudgetEnvelope::max_turns`].
        Turns => "maxTurns",
    }
}

/// What an episode has used so far, checked at every loop boundary.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Consumption {
    /// Input + output tokens so far.
    pub tokens: u64,
    /// Tool calls dispatched so far.
    pub tool_calls: u64,
    /// Wall-clock seconds elapsed.
    pub wall_seconds: u64,
    /// Dollars spent so far (server-computed).
    pub dollars: f64,
    /// LLM turns taken so far.
    pub turns: u64,
}

/// Whether another LLM turn may start: the first exhausted axis, in the order
/// dollars, tokens, turns, tool calls, wall time. An axis is exhausted once
/// its use has reached the ceiling. The per-turn output cap is not checked
/// here: it is the `max_tokens` of each request, not an episode total.
pub fn check(envelope: &BudgetEnvelope, consumption: &Consumption) -> Result<(), BudgetAxis> {
    if envelope.max_dollars.is_exhausted_by(consumption.dollars) {
        return Err(BudgetAxis::Dollars);
    }
    if envelope.max_tokens.is_exhausted_by(consumption.tokens) {
        return Err(BudgetAxis::Tokens);
    }
    if envelope.max_turns.is_exhausted_by(consumption.turns) {
        return Err(BudgetAxis::Turns);
    }
    if envelope
        .max_tool_calls
        .is_exhausted_by(consumption.tool_calls)
    {
        return Err(BudgetAxis::ToolCalls);
    }
    if envelope
        .max_wall_seconds
        .is_exhausted_by(consumption.wall_seconds)
    {
        return Err(BudgetAxis::WallSeconds);
    }
    Ok(())
}

/// A mode's budget override (`agent_modes.budget_json`): each present axis
/// replaces the policy default for that mode only.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BudgetOverride {
    /// `maxTokens`.
    pub max_tokens: Option<u64>,
    /// `maxOutputTokensPerTurn`.
    pub max_output_tokens_per_turn: Option<u64>,
    /// `maxToolCalls`.
    pub max_tool_calls: Option<u64>,
    /// `maxWallSeconds`.
    pub max_wall_seconds: Option<u64>,
    /// `maxDollars`.
    pub max_dollars: Option<f64>,
    /// `maxTurns`.
    pub max_turns: Option<u64>,
}

fn budget_err(reason: impl Into<String>) -> CoreError {
    CoreError::InvalidBudgetJson {
        reason: reason.into(),
    }
}

fn positive_int(key: &str, v: &Value) -> Result<u64, CoreError> {
    match v.as_u64() {
        Some(n) if n > 0 => Ok(n),
        _ => Err(budget_err(format!(
            "{key} must be a positive integer, got {v}"
        ))),
    }
}

impl BudgetOverride {
    /// Parses the stored budget JSON. Unknown keys, non-object documents and
    /// non-positive or non-integer values are refused with the offending key,
    /// so a typo never silently falls back to the default.
    pub fn from_json_str(text: &str) -> Result<Self, CoreError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| budget_err(format!("not valid JSON: {e}")))?;
        Self::from_json_value(&value)
    }

    /// As [`BudgetOverride::from_json_str`], from an already-parsed value.
    pub fn from_json_value(value: &Value) -> Result<Self, CoreError> {
        let Value::Object(map) = value else {
            return Err(budget_err("expected a JSON object"));
        };
        let mut o = BudgetOverride::default();
        for (key, v) in map {
            if v.is_null() {
                continue;
            }
            let axis: BudgetAxis = key
                .parse()
                .map_err(|_| budget_err(format!("unknown key {key:?}")))?;
            match axis {
                BudgetAxis::Tokens => o.max_tokens = Some(positive_int(key, v)?),
                BudgetAxis::OutputTokensPerTurn => {
                    o.max_output_tokens_per_turn = Some(positive_int(key, v)?)
                }
                BudgetAxis::ToolCalls => o.max_tool_calls = Some(positive_int(key, v)?),
                BudgetAxis::WallSeconds => o.max_wall_seconds = Some(positive_int(key, v)?),
                BudgetAxis::Turns => o.max_turns = Some(positive_int(key, v)?),
                BudgetAxis::Dollars => match v.as_f64() {
                    Some(d) if d.is_finite() && d > 0.0 => o.max_dollars = Some(d),
                    _ => {
                        return Err(budget_err(format!(
                            "{key} must be a positive number, got {v}"
                        )));
                    }
                },
            }
        }
        Ok(o)
    }

    /// The stored JSON form (camelCase keys, absent axes omitted).
    pub fn to_json(&self) -> Value {
        let mut map = serde_json::Map::new();
        let mut put = |axis: BudgetAxis, v: Option<Value>| {
            if let Some(v) = v {
                map.insert(axis.as_str().to_owned(), v);
            }
        };
        put(BudgetAxis::Tokens, self.max_tokens.map(Value::from));
        put(
            BudgetAxis::OutputTokensPerTurn,
            self.max_output_tokens_per_turn.map(Value::from),
        );
        put(BudgetAxis::ToolCalls, self.max_tool_calls.map(Value::from));
        put(
            BudgetAxis::WallSeconds,
            self.max_wall_seconds.map(Value::from),
        );
        put(BudgetAxis::Dollars, self.max_dollars.map(Value::from));
        put(BudgetAxis::Turns, self.max_turns.map(Value::from));
        Value::Object(map)
    }

    /// `base` with each present axis replaced, axis by axis.
    pub fn apply_to(&self, base: &BudgetEnvelope) -> BudgetEnvelope {
        BudgetEnvelope {
            max_tokens: self.max_tokens.map_or(base.max_tokens, Limit::Limited),
            max_output_tokens_per_turn: self
                .max_output_tokens_per_turn
                .map_or(base.max_output_tokens_per_turn, Limit::Limited),
            max_tool_calls: self
                .max_tool_calls
                .map_or(base.max_tool_calls, Limit::Limited),
            max_wall_seconds: self
                .max_wall_seconds
                .map_or(base.max_wall_seconds, Limit::Limited),
            max_dollars: self.max_dollars.map_or(base.max_dollars, Limit::Limited),
            max_turns: self.max_turns.map_or(base.max_turns, Limit::Limited),
        }
    }
}

/// The instance's foundational-phase state: present while
/// `is_building_starting_workset` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundationalState {
    /// `workset_deadline_utc`: the phase self-heals at this instant.
    pub deadline: DateTime<Utc>,
    /// The tick's clock reading.
    pub now: DateTime<Utc>,
}

impl FoundationalState {
    /// Whether the foundational exemption applies (strictly before the deadline).
    pub fn is_active(&self) -> bool {
        self.now < self.deadline
    }
}

/// The deadline a freshly created instance's foundational phase gets.
pub fn workset_deadline_from(now: DateTime<Utc>, opts: &AgentDispatcherOptions) -> DateTime<Utc> {
    TimeDelta::from_std(opts.workset_deadline)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// The per-type policy default (IPlanningAgentPolicy.TickBudget), read live
/// from options: the standing types and missions share `opts.tick_budget`;
/// the Prompt Engineer gets its smaller fixed envelope.
pub fn policy_default(agent_type: AgentType, opts: &AgentDispatcherOptions) -> BudgetEnvelope {
    match agent_type {
        AgentType::PromptRedactor => BudgetEnvelope::PROMPT_REDACTOR_DEFAULT,
        _ => opts.tick_budget,
    }
}

/// The tick's envelope (AgentAgent.ResolveTickBudget), in precedence:
/// 1. foundational phase before its deadline → every axis Unlimited and the
///    per-turn output cap raised to the foundational cap;
/// 2. the active mode's override, merged axis by axis over the default;
/// 3. the policy default.
///
/// The weekly dollar ceiling is not part of this envelope: see
/// [`credit_status`] (the gate) and [`cap_to_credit`] (the dollar cap), which
/// apply in every phase.
pub fn resolve_tick_budget(
    policy_default: &BudgetEnvelope,
    mode_override: Option<&BudgetOverride>,
    foundational: Option<FoundationalState>,
    opts: &AgentDispatcherOptions,
) -> BudgetEnvelope {
    if foundational.is_some_and(|f| f.is_active()) {
        return BudgetEnvelope {
            max_tokens: Limit::Unlimited,
            max_output_tokens_per_turn: Limit::Limited(
                opts.foundational_max_output_tokens_per_turn,
            ),
            max_tool_calls: Limit::Unlimited,
            max_wall_seconds: Limit::Unlimited,
            max_dollars: Limit::Unlimited,
            max_turns: Limit::Unlimited,
        };
    }
    match mode_override {
        Some(o) => o.apply_to(policy_default),
        None => *policy_default,
    }
}

/// A tenant's weekly agent-planning credit window (`credit_windows`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CreditWindow {
    /// Monday 00:00 UTC of the window's week.
    pub week_start: DateTime<Utc>,
    /// The window's ceiling in USD.
    pub limit_usd: f64,
    /// Spent so far in USD.
    pub spent_usd: f64,
}

impl CreditWindow {
    /// A fresh, unspent window for the week containing `now`.
    pub fn fresh(now: DateTime<Utc>, opts: &AgentDispatcherOptions) -> Self {
        Self {
            week_start: week_start_for(now),
            limit_usd: opts.weekly_credit_usd,
            spent_usd: 0.0,
        }
    }
}

/// Monday 00:00 UTC of the ISO week containing `now`: windows regenerate weekly.
pub fn week_start_for(now: DateTime<Utc>) -> DateTime<Utc> {
    let date = now.date_naive();
    let monday = date - TimeDelta::days(i64::from(date.weekday().num_days_from_monday()));
    Utc.from_utc_datetime(&monday.and_time(chrono::NaiveTime::MIN))
}

/// What the credit gate (spec §3.4 step 9) decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CreditStatus {
    /// USD left in the window, never negative.
    pub remaining: f64,
    /// True when enforcement is on and nothing remains: skip the LLM call.
    pub exhausted: bool,
}

/// The credit gate. Applies in every phase, foundational included (the
/// runaway-cost backstop); with enforcement off the window is only metered.
pub fn credit_status(window: &CreditWindow, enforcement: bool) -> CreditStatus {
    let raw = window.limit_usd - window.spent_usd;
    let remaining = if raw.is_finite() && raw > 0.0 {
        raw
    } else {
        0.0
    };
    CreditStatus {
        remaining,
        exhausted: enforcement && remaining <= 0.0,
    }
}

/// The tick's envelope with its dollar axis capped at what the weekly credit
/// window has left (spec §3.4 step 9, §3.6): the smaller of the axis and the
/// remaining credit, in every phase. The pod enforces only the envelope it is
/// handed and never re-reads the window mid-episode, so without this cap an
/// unlimited foundational episode could spend far past the weekly ceiling.
/// With enforcement off the window is only metered and the envelope is
/// returned unchanged.
pub fn cap_to_credit(
    envelope: &BudgetEnvelope,
    window: &CreditWindow,
    enforcement: bool,
) -> BudgetEnvelope {
    if !enforcement {
        return *envelope;
    }
    let remaining = credit_status(window, enforcement).remaining;
    let max_dollars = match envelope.max_dollars {
        Limit::Limited(axis) if axis <= remaining => Limit::Limited(axis),
        _ => Limit::Limited(remaining),
    };
    BudgetEnvelope {
        max_dollars,
        ..*envelope
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn check_names_the_first_exhausted_axis() {
        let env = BudgetEnvelope::STANDING_DEFAULT;
        assert_eq!(check(&env, &Consumption::default()), Ok(()));
        let under = Consumption {
            tokens: 23_999,
            tool_calls: 11,
            wall_seconds: 299,
            dollars: 1.49,
            turns: 11,
        };
        assert_eq!(check(&env, &under), Ok(()));
        for (c, axis) in [
            (
                Consumption {
                    tokens: 24_000,
                    ..under
                },
                BudgetAxis::Tokens,
            ),
            (
                Consumption {
                    tool_calls: 12,
                    ..under
                },
                BudgetAxis::ToolCalls,
            ),
            (
                Consumption {
                    wall_seconds: 300,
                    ..under
                },
                BudgetAxis::WallSeconds,
            ),
            (
                Consumption {
                    dollars: 1.50,
                    ..under
                },
                BudgetAxis::Dollars,
            ),
            (Consumption { turns: 12, ..under }, BudgetAxis::Turns),
        ] {
            assert_eq!(check(&env, &c), Err(axis));
        }
        let all = Consumption {
            tokens: 99_999,
            tool_calls: 99,
            wall_seconds: 999,
            dollars: 9.0,
            turns: 99,
        };
        assert_eq!(check(&env, &all), Err(BudgetAxis::Dollars));
    }

    #[test]
    fn unlimited_axes_never_exhaust() {
        let o = AgentDispatcherOptions::default();
        let f = FoundationalState {
            deadline: ts("2030-01-02T00:00:00Z"),
            now: ts("2030-01-01T00:00:00Z"),
        };
        let env = resolve_tick_budget(&o.tick_budget, None, Some(f), &o);
        let huge = Consumption {
            tokens: u64::MAX,
            tool_calls: u64::MAX,
            wall_seconds: u64::MAX,
            dollars: 1e12,
            turns: u64::MAX,
        };
        assert_eq!(check(&env, &huge), Ok(()));
    }

    #[test]
    fn foundational_phase_lifts_every_axis_until_the_deadline() {
        let o = AgentDispatcherOptions::default();
        let research = BudgetOverride {
            max_tokens: Some(48_000),
            ..Default::default()
        };
        let before = FoundationalState {
            deadline: ts("2030-01-02T00:00:00Z"),
            now: ts("2030-01-01T23:59:59Z"),
        };
        let env = resolve_tick_budget(&o.tick_budget, Some(&research), Some(before), &o);
        assert_eq!(env.max_tokens, Limit::Unlimited);
        assert_eq!(env.max_tool_calls, Limit::Unlimited);
        assert_eq!(env.max_wall_seconds, Limit::Unlimited);
        assert_eq!(env.max_dollars, Limit::Unlimited);
        assert_eq!(env.max_turns, Limit::Unlimited);
        assert_eq!(env.max_output_tokens_per_turn, Limit::Limited(16_384));
        // At and after the deadline the phase has self-healed.
        let at = FoundationalState {
            now: before.deadline,
            ..before
        };
        let env = resolve_tick_budget(&o.tick_budget, Some(&research), Some(at), &o);
        assert_eq!(env.max_tokens, Limit::Limited(48_000));
        assert_eq!(env.max_tool_calls, Limit::Limited(12));
    }

    #[test]
    fn mode_override_merges_axis_by_axis_over_the_policy_default() {
        let o = AgentDispatcherOptions::default();
        let ov = BudgetOverride::from_json_str(r#"{"maxTokens":48000,"maxDollars":4.0}"#).unwrap();
        let env = resolve_tick_budget(&o.tick_budget, Some(&ov), None, &o);
        assert_eq!(env.max_tokens, Limit::Limited(48_000));
        assert_eq!(env.max_dollars, Limit::Limited(4.0));
        assert_eq!(env.max_tool_calls, Limit::Limited(12));
        assert_eq!(env.max_turns, Limit::Limited(12));
        // The shared default itself is untouched.
        assert_eq!(o.tick_budget, BudgetEnvelope::STANDING_DEFAULT);
        assert_eq!(
            resolve_tick_budget(&o.tick_budget, None, None, &o),
            BudgetEnvelope::STANDING_DEFAULT
        );
    }

    #[test]
    fn policy_defaults_per_type() {
        let o = AgentDispatcherOptions::default();
        assert_eq!(
            policy_default(AgentType::Soa, &o),
            BudgetEnvelope::STANDING_DEFAULT
        );
        assert_eq!(
            policy_default(AgentType::Compliance, &o),
            BudgetEnvelope::STANDING_DEFAULT
        );
        let r = policy_default(AgentType::PromptRedactor, &o);
        assert!(r.max_tokens.limited() < BudgetEnvelope::STANDING_DEFAULT.max_tokens.limited());
        let tuned = o
            .with_system_configs([("AgentDispatcher:TickMaxTokens", "30000")])
            .unwrap();
        assert_eq!(
            policy_default(AgentType::Soa, &tuned).max_tokens,
            Limit::Limited(30_000)
        );
    }

    #[test]
    fn budget_json_round_trips() {
        let text = r#"{"maxTokens":48000,"maxToolCalls":24,"maxWallSeconds":600,"maxDollars":4.0,"maxTurns":24,"maxOutputTokensPerTurn":8192}"#;
        let o = BudgetOverride::from_json_str(text).unwrap();
        assert_eq!(o.max_output_tokens_per_turn, Some(8192));
        assert_eq!(BudgetOverride::from_json_value(&o.to_json()).unwrap(), o);
        assert_eq!(
            BudgetOverride::from_json_str("{}").unwrap(),
            BudgetOverride::default()
        );
        assert_eq!(
            BudgetOverride::from_json_str(r#"{"maxTurns":null}"#).unwrap(),
            BudgetOverride::default()
        );
    }

    #[test]
    fn bad_budget_json_is_a_precise_error() {
        for (text, needle) in [
            ("{not json", "not valid JSON"),
            ("[1,2]", "expected a JSON object"),
            (r#"{"maxTokenz":1}"#, "unknown key \"maxTokenz\""),
            (r#"{"maxTokens":0}"#, "maxTokens must be a positive integer"),
            (
                r#"{"maxTokens":-4}"#,
                "maxTokens must be a positive integer",
            ),
            (
                r#"{"maxTokens":1.5}"#,
                "maxTokens must be a positive integer",
            ),
            (
                r#"{"maxToolCalls":"12"}"#,
                "maxToolCalls must be a positive integer",
            ),
            (
                r#"{"maxDollars":0}"#,
                "maxDollars must be a positive number",
            ),
            (
                r#"{"maxDollars":"4"}"#,
                "maxDollars must be a positive number",
            ),
        ] {
            let err = BudgetOverride::from_json_str(text).unwrap_err();
            assert_eq!(err.code(), crate::ErrorCode::InvalidBudgetJson);
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn credit_window_exhausts_only_when_enforced() {
        let now = ts("2030-01-03T12:00:00Z");
        let o = AgentDispatcherOptions::default();
        let fresh = CreditWindow::fresh(now, &o);
        assert_eq!(fresh.week_start, ts("2029-12-31T00:00:00Z"));
        assert_eq!(
            credit_status(&fresh, true),
            CreditStatus {
                remaining: 60.0,
                exhausted: false
            }
        );
        let spent = CreditWindow {
            spent_usd: 60.0,
            ..fresh
        };
        assert_eq!(
            credit_status(&spent, true),
            CreditStatus {
                remaining: 0.0,
                exhausted: true
            }
        );
        assert_eq!(
            credit_status(&spent, false),
            CreditStatus {
                remaining: 0.0,
                exhausted: false
            }
        );
        let over = CreditWindow {
            spent_usd: 75.5,
            ..fresh
        };
        assert_eq!(credit_status(&over, true).remaining, 0.0);
        let partial = CreditWindow {
            spent_usd: 59.0,
            ..fresh
        };
        assert!(!credit_status(&partial, true).exhausted);
    }

    #[test]
    fn credit_gate_still_bites_in_the_foundational_phase() {
        // The foundational envelope is unlimited, but the weekly ceiling is separate.
        let o = AgentDispatcherOptions::default();
        let now = ts("2030-01-01T00:00:00Z");
        let f = FoundationalState {
            deadline: workset_deadline_from(now, &o),
            now,
        };
        assert!(f.is_active());
        assert_eq!(f.deadline, ts("2030-01-02T00:00:00Z"));
        let env = resolve_tick_budget(&o.tick_budget, None, Some(f), &o);
        assert_eq!(env.max_dollars, Limit::Unlimited);
        let window = CreditWindow {
            spent_usd: 60.0,
            ..CreditWindow::fresh(now, &o)
        };
        assert!(credit_status(&window, o.credit_enforcement_enabled).exhausted);
    }

    fn window_with_left(left: f64) -> CreditWindow {
        CreditWindow {
            week_start: ts("2029-12-31T00:00:00Z"),
            limit_usd: 60.0,
            spent_usd: 60.0 - left,
        }
    }

    #[test]
    fn enforced_credit_caps_the_foundational_dollar_axis_at_what_is_left() {
        let o = AgentDispatcherOptions::default();
        let now = ts("2030-01-01T00:00:00Z");
        let f = FoundationalState {
            deadline: workset_deadline_from(now, &o),
            now,
        };
        let env = resolve_tick_budget(&o.tick_budget, None, Some(f), &o);
        let capped = cap_to_credit(&env, &window_with_left(1.5), true);
        assert_eq!(capped.max_dollars, Limit::Limited(1.5));
        // Only the dollar axis changes; the rest stays foundational.
        assert_eq!(
            capped,
            BudgetEnvelope {
                max_dollars: Limit::Limited(1.5),
                ..env
            }
        );
        // The capped episode stops once it has spent what was left.
        let spent = Consumption {
            dollars: 1.5,
            ..Consumption::default()
        };
        assert_eq!(check(&capped, &spent), Err(BudgetAxis::Dollars));
        assert_eq!(check(&env, &spent), Ok(()));
    }

    #[test]
    fn the_smaller_of_the_axis_and_the_remaining_credit_wins_in_every_phase() {
        let env = BudgetEnvelope::STANDING_DEFAULT;
        // Plenty left: the policy's own $1.50 stands.
        assert_eq!(
            cap_to_credit(&env, &window_with_left(59.0), true).max_dollars,
            Limit::Limited(1.50)
        );
        // Less left than the axis: the window wins.
        assert_eq!(
            cap_to_credit(&env, &window_with_left(0.25), true).max_dollars,
            Limit::Limited(0.25)
        );
        // Equal: unchanged.
        assert_eq!(
            cap_to_credit(&env, &window_with_left(1.5), true).max_dollars,
            Limit::Limited(1.50)
        );
    }

    #[test]
    fn a_spent_or_overdrawn_window_caps_the_axis_at_zero_so_no_turn_starts() {
        let o = AgentDispatcherOptions::default();
        let f = FoundationalState {
            deadline: ts("2030-01-02T00:00:00Z"),
            now: ts("2030-01-01T00:00:00Z"),
        };
        let env = resolve_tick_budget(&o.tick_budget, None, Some(f), &o);
        for spent in [60.0, 75.5, f64::NAN] {
            let window = CreditWindow {
                spent_usd: spent,
                ..window_with_left(0.0)
            };
            let capped = cap_to_credit(&env, &window, true);
            assert_eq!(capped.max_dollars, Limit::Limited(0.0), "spent {spent}");
            assert_eq!(
                check(&capped, &Consumption::default()),
                Err(BudgetAxis::Dollars)
            );
        }
    }

    #[test]
    fn without_enforcement_the_envelope_is_left_alone() {
        let o = AgentDispatcherOptions::default();
        let f = FoundationalState {
            deadline: ts("2030-01-02T00:00:00Z"),
            now: ts("2030-01-01T00:00:00Z"),
        };
        let foundational = resolve_tick_budget(&o.tick_budget, None, Some(f), &o);
        for env in [foundational, BudgetEnvelope::STANDING_DEFAULT] {
            assert_eq!(cap_to_credit(&env, &window_with_left(0.25), false), env);
            assert_eq!(cap_to_credit(&env, &window_with_left(0.0), false), env);
        }
    }

    #[test]
    fn week_start_is_monday_midnight_utc() {
        assert_eq!(
            week_start_for(ts("2030-01-06T23:59:59Z")),
            ts("2029-12-31T00:00:00Z")
        );
        assert_eq!(
            week_start_for(ts("2029-12-31T00:00:00Z")),
            ts("2029-12-31T00:00:00Z")
        );
        assert_eq!(
            week_start_for(ts("2030-01-07T00:00:01Z")),
            ts("2030-01-07T00:00:00Z")
        );
    }
}
