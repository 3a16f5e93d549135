//! Platform-only ceilings: the `system_configs` keys and feature flags that
//! bound what a tenant spends or the load it puts on the shared platform,
//! each with the direction a tenant may move it, and the two rules that keep
//! a tenant inside the platform's value: [`check_tenant_value`] (a tenant
//! operator's write) and [`AgentDispatcherOptions::within_platform`] (every
//! read, so a tenant row written before the platform lowered its value can
//! never raise anything). A mode's budget override is held to the same
//! per-tick maxima: [`check_tenant_budget_override`] when a tenant operator
//! writes one, [`BudgetOverride::within_platform`] whenever a tick's budget
//! is assembled from one. Both take the bound of the mode, [`mode_bound`]:
//! the platform's per-tick values, raised on each axis where the mode's own
//! catalogue seed is wider (Compliance Research's widened budget is the
//! specification's, not a tenant's raise).
//!
//! The platform's value for a tenant is the platform's own row for that
//! tenant, else the global row, else the code (or deploy) default. A
//! platform-wide operator token writes either without limit.
//!
//! The keys of [`crate::options::keys::ALL`] not listed in [`CEILINGS`] are
//! a tenant's own to set, each for the reason [`TENANT_KEYS`] gives. Must
//! never do I/O: callers hand in the options they read.

use std::time::Duration;

use crate::budget::{BudgetAxis, BudgetEnvelope, BudgetOverride, Limit};
use crate::error::CoreError;
use crate::options::{AgentDispatcherOptions, keys};

/// Which way a tenant operator may move a platform-bounded value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// A ceiling: the tenant may lower it (at or below the platform's
    /// value; `unlimited` is never a lowering), never raise it.
    AtMost,
    /// A floor (a delay, an interval): the tenant may raise it, never lower it.
    AtLeast,
    /// A guard: the tenant may turn it on, never off.
    OnlyOn,
}

/// One platform-bounded key and why it is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ceiling {
    /// The `system_configs` key.
    pub key: &'static str,
    /// The direction a tenant may move it.
    pub bound: Bound,
    /// Why the platform owns it.
    pub why: &'static str,
}

const fn at_most(key: &'static str, why: &'static str) -> Ceiling {
    Ceiling {
        key,
        bound: Bound::AtMost,
        why,
    }
}

const fn at_least(key: &'static str, why: &'static str) -> Ceiling {
    Ceiling {
        key,
        bound: Bound::AtLeast,
        why,
    }
}

const fn only_on(key: &'static str, why: &'static str) -> Ceiling {
    Ceiling {
        key,
        bound: Bound::OnlyOn,
        why,
    }
}

/// Every platform-bounded `system_configs` key.
pub const CEILINGS: &[Ceiling] = &[
    at_most(
        keys::WEEKLY_CREDIT_USD,
        "the dollars a tenant's agents may spend in a week",
    ),
    only_on(
        keys::CREDIT_ENFORCEMENT_ENABLED,
        "off, the weekly credit is only metered and spend is never refused",
    ),
    at_most(
        keys::MAX_CONCURRENT_INSTANCES_PER_TENANT,
        "how many of a tenant's ticks hold pod slots at once",
    ),
    at_most(
        keys::MAX_EVENT_PAYLOAD_BYTES,
        "the bytes one event stores and puts in front of the model",
    ),
    at_most(keys::TICK_MAX_TOKENS, "the tokens one tick may spend"),
    at_most(
        keys::TICK_MAX_OUTPUT_TOKENS_PER_TURN,
        "the output tokens one model call may spend",
    ),
    at_most(
        keys::TICK_MAX_TOOL_CALLS,
        "the tool calls, each a load on a lane, one tick may make",
    ),
    at_most(
        keys::TICK_MAX_WALL_SECONDS,
        "how long one tick may hold a pod slot",
    ),
    at_most(keys::TICK_MAX_DOLLARS, "the dollars one tick may spend"),
    at_most(keys::TICK_MAX_TURNS, "the model calls one tick may make"),
    at_most(
        keys::FOUNDATIONAL_MAX_OUTPUT_TOKENS_PER_TURN,
        "the output tokens one model call may spend in the foundational phase, \
         whose other axes are unlimited",
    ),
    at_most(
        keys::WORKSET_DEADLINE,
        "how long the foundational phase, with its unlimited axes, lasts",
    ),
    at_most(
        keys::MAX_ATTEMPTS,
        "how many ticks one failing event is retried for",
    ),
    at_most(
        keys::MAX_CONSECUTIVE_BLOCKED_TURNS,
        "how many turns a stuck agent spends before it halts",
    ),
    only_on(
        keys::ENFORCE_STUCK_GUARD,
        "off, a stuck agent never halts and spends on",
    ),
    only_on(
        keys::STANDING_AGENT_IDLE_HEARTBEAT_ENABLED,
        "off, an idle agent ticks on the geometric backoff (capped at minutes) \
         instead of the flat heartbeat (a day)",
    ),
    at_least(
        keys::STANDING_AGENT_HEARTBEAT_INTERVAL,
        "how often an idle agent ticks",
    ),
    at_least(
        keys::TICK_BASE_DELAY,
        "the first idle backoff delay: how often an idle agent ticks",
    ),
    at_least(
        keys::BACKOFF_FACTOR,
        "how fast the idle backoff grows: how often an idle agent ticks",
    ),
    at_least(
        keys::MAX_BACKOFF_INTERVAL,
        "the idle backoff's cap: how often an idle agent ticks",
    ),
    at_least(
        keys::FORCED_REPLAN_EVERY_N_IDLE_TICKS,
        "how often an idle agent calls the model although nothing changed",
    ),
    at_least(
        keys::POLLING_INTERVAL,
        "how often the dispatcher polls for a tenant",
    ),
    at_least(
        keys::PROVIDER_FAILURE_BASE_DELAY,
        "how soon an event is retried against a failing provider",
    ),
    at_least(
        keys::PROVIDER_FAILURE_MAX_DELAY,
        "the cap of that delay: how often a failing provider is retried",
    ),
];

/// The keys of [`crate::options::keys::ALL`] a tenant sets freely, and why
/// none of them bounds spend or load.
pub const TENANT_KEYS: &[(&str, &str)] = &[
    (
        keys::LEASE_TTL,
        "how long a crashed pod's claim blocks the instance; a tick's length is \
         bounded by TickMaxWallSeconds",
    ),
    (
        keys::AUTO_BOOTSTRAP,
        "whether the tenant's standing agent is created; it runs only when the \
         tenant's standing-agents switch is on",
    ),
    (
        keys::STANDING_AGENTS_IDLE_BY_DEFAULT,
        "whether that agent starts active or paused",
    ),
    (
        keys::LEDGER_TAIL,
        "how much history a tick re-reads; its cost is bounded by the Tick* ceilings",
    ),
    (
        keys::REGISTRY_ENTRY_TTL,
        "when a silent registry entry of the tenant's own expires",
    ),
    (keys::EPHEMERAL_POD, "the pod regime; no per-tenant effect"),
    (
        keys::PROVIDER_FAILURE_ATTENTION_AFTER,
        "when the tenant's own inbox hears of a failing provider",
    ),
];

/// The feature flags only a platform-wide operator token may set, and why.
pub const PLATFORM_FEATURES: &[(&str, &str)] = &[
    (
        "windows-pool",
        "leases Windows machines from the platform's shared pool",
    ),
    (
        "prompt-redactor",
        "runs a redactor agent, with its own model spend, per tenant",
    ),
];

/// The platform bound of `key`, if it has one.
pub fn ceiling(key: &str) -> Option<&'static Ceiling> {
    CEILINGS.iter().find(|c| c.key == key)
}

/// Whether only a platform-wide operator token may set feature `name`.
pub fn is_platform_feature(name: &str) -> bool {
    PLATFORM_FEATURES.iter().any(|(f, _)| *f == name)
}

/// Why a tenant operator's write of a platform-bounded key is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TenantWriteError {
    /// The value does not parse as the key's value.
    #[error(transparent)]
    Invalid(#[from] CoreError),
    /// The value is looser than the platform's value for the tenant.
    #[error("{}", refusal(.key, *.bound, .platform))]
    BeyondPlatform {
        /// The key.
        key: &'static str,
        /// The direction a tenant may move it.
        bound: Bound,
        /// The platform's value for the tenant, in `system_configs` syntax.
        platform: String,
    },
}

fn refusal(key: &str, bound: Bound, platform: &str) -> String {
    let (may, only) = match bound {
        Bound::AtMost if platform == "unlimited" => (
            "lower it (to a number: unlimited is never a lowering)".to_owned(),
            "raise it",
        ),
        Bound::AtMost => (format!("lower it (to {platform} or below)"), "raise it"),
        Bound::AtLeast => (format!("raise it (to {platform} or above)"), "lower it"),
        Bound::OnlyOn => ("turn it on".to_owned(), "turn it off"),
    };
    format!(
        "{key} is bounded by the platform, whose value for this tenant is {platform}: \
         a tenant operator may only {may}; only a platform token may {only}"
    )
}

/// A tenant operator's write of `key` = `value`, given the platform's
/// options for the tenant: `Ok` when `key` is not platform-bounded or the
/// value is within the platform's (see [`Bound`]); `unlimited` is refused
/// for every ceiling, the platform's included.
pub fn check_tenant_value(
    key: &str,
    value: &str,
    platform: &AgentDispatcherOptions,
) -> Result<(), TenantWriteError> {
    let Some(c) = ceiling(key) else {
        return Ok(());
    };
    let mut wanted = platform.clone();
    wanted.apply_system_config(key, value)?;
    let unlimited = value.trim().eq_ignore_ascii_case("unlimited");
    let mut theirs = platform.clone();
    if unlimited || !within(c, &mut wanted, &mut theirs) {
        return Err(TenantWriteError::BeyondPlatform {
            key: c.key,
            bound: c.bound,
            platform: shown(c.key, platform),
        });
    }
    Ok(())
}

/// The platform key bounding each axis of a tick's budget, so a mode's
/// budget override answers to the same per-tick maxima as the config keys.
pub const BUDGET_AXIS_KEYS: &[(BudgetAxis, &str)] = &[
    (BudgetAxis::Tokens, keys::TICK_MAX_TOKENS),
    (
        BudgetAxis::OutputTokensPerTurn,
        keys::TICK_MAX_OUTPUT_TOKENS_PER_TURN,
    ),
    (BudgetAxis::ToolCalls, keys::TICK_MAX_TOOL_CALLS),
    (BudgetAxis::WallSeconds, keys::TICK_MAX_WALL_SECONDS),
    (BudgetAxis::Dollars, keys::TICK_MAX_DOLLARS),
    (BudgetAxis::Turns, keys::TICK_MAX_TURNS),
];

/// A tenant operator's mode budget override with an axis above the
/// platform's per-tick maximum for the tenant.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "{axis} {value} is above {key}, the platform's per-tick maximum for this tenant \
     ({platform}): a tenant operator may set a mode's {axis} at or below it; only a \
     platform token may set it higher"
)]
pub struct OverrideBeyondPlatform {
    /// The override's axis.
    pub axis: BudgetAxis,
    /// The axis's value in the override.
    pub value: String,
    /// The platform key bounding the axis.
    pub key: &'static str,
    /// The platform's value for the tenant, in `system_configs` syntax.
    pub platform: String,
}

/// A tenant operator's mode budget override, given the platform's options
/// for the tenant: `Ok` when every axis it sets is at or below the
/// platform's per-tick maximum ([`Bound::AtMost`], as
/// [`check_tenant_value`] holds the keys themselves), else the first axis
/// above it. A mode's override may still exceed the tenant's own lowered
/// defaults: raising a mode above them is what an override is for.
pub fn check_tenant_budget_override(
    o: &BudgetOverride,
    platform: &AgentDispatcherOptions,
) -> Result<(), OverrideBeyondPlatform> {
    let mut mine = platform.clone();
    mine.tick_budget = o.apply_to(&platform.tick_budget);
    let mut theirs = platform.clone();
    for (axis, key) in BUDGET_AXIS_KEYS {
        let Some(c) = ceiling(key) else { continue };
        if !within(c, &mut mine, &mut theirs) {
            return Err(OverrideBeyondPlatform {
                axis: *axis,
                value: shown(c.key, &mine),
                key: c.key,
                platform: shown(c.key, platform),
            });
        }
    }
    Ok(())
}

/// The options a mode's budget override is held within: `platform` (the
/// platform's options for the tenant) with each per-tick axis raised to
/// the mode's catalogue seed (`seeded`, the override the in-code catalogue
/// gives the mode, e.g. Compliance Research's widened budget) where the
/// seed is wider. The seed is the platform's own choice for that mode, so a
/// tenant keeping or lowering it is never refused or cut, while a tenant
/// raising any axis above both is.
pub fn mode_bound(
    platform: &AgentDispatcherOptions,
    seeded: Option<&BudgetOverride>,
) -> AgentDispatcherOptions {
    let mut out = platform.clone();
    let Some(seed) = seeded else { return out };
    fn wider<T: PartialOrd + Copy>(base: Limit<T>, seed: Option<T>) -> Limit<T> {
        match (base, seed) {
            (Limit::Limited(b), Some(s)) if s > b => Limit::Limited(s),
            _ => base,
        }
    }
    let b = &mut out.tick_budget;
    b.max_tokens = wider(b.max_tokens, seed.max_tokens);
    b.max_output_tokens_per_turn = wider(
        b.max_output_tokens_per_turn,
        seed.max_output_tokens_per_turn,
    );
    b.max_tool_calls = wider(b.max_tool_calls, seed.max_tool_calls);
    b.max_wall_seconds = wider(b.max_wall_seconds, seed.max_wall_seconds);
    b.max_dollars = wider(b.max_dollars, seed.max_dollars);
    b.max_turns = wider(b.max_turns, seed.max_turns);
    out
}

/// `env` with each per-tick axis brought back within the platform's
/// maximum (the lower of the two).
fn envelope_within(env: &BudgetEnvelope, platform: &AgentDispatcherOptions) -> BudgetEnvelope {
    let mut mine = platform.clone();
    mine.tick_budget = *env;
    let mut theirs = platform.clone();
    for (_, key) in BUDGET_AXIS_KEYS {
        if let Some(c) = ceiling(key)
            && !within(c, &mut mine, &mut theirs)
        {
            take(c.key, &mut mine, &mut theirs);
        }
    }
    mine.tick_budget
}

impl BudgetOverride {
    /// This override with each axis it sets brought back within the
    /// platform's per-tick maximum (`platform`: the platform's options for
    /// the tenant). Applied whenever a tick's budget is assembled, so an
    /// override written before the platform lowered a maximum, or by a
    /// platform token since narrowed, never lifts a tick above it.
    pub fn within_platform(&self, platform: &AgentDispatcherOptions) -> Self {
        let env = envelope_within(&self.apply_to(&platform.tick_budget), platform);
        Self {
            max_tokens: self.max_tokens.and(env.max_tokens.limited()),
            max_output_tokens_per_turn: self
                .max_output_tokens_per_turn
                .and(env.max_output_tokens_per_turn.limited()),
            max_tool_calls: self.max_tool_calls.and(env.max_tool_calls.limited()),
            max_wall_seconds: self.max_wall_seconds.and(env.max_wall_seconds.limited()),
            max_dollars: self.max_dollars.and(env.max_dollars.limited()),
            max_turns: self.max_turns.and(env.max_turns.limited()),
        }
    }
}

impl AgentDispatcherOptions {
    /// These options (a tenant's, its own rows applied) with every
    /// platform-bounded option brought back within `platform` (the
    /// platform's options for the tenant): the lower of two ceilings, the
    /// higher of two floors, a guard on when either is on.
    pub fn within_platform(&self, platform: &Self) -> Self {
        let mut out = self.clone();
        let mut theirs = platform.clone();
        for c in CEILINGS {
            if !within(c, &mut out, &mut theirs) {
                take(c.key, &mut out, &mut theirs);
            }
        }
        out
    }

    /// The options a tenant runs with: `self` (code and deploy defaults)
    /// with the platform's layer (`global` rows and the platform's rows for
    /// the tenant) applied, then every effective row of the tenant (its own
    /// over the platform's), then [`Self::within_platform`]. A value that
    /// does not parse is skipped (the layer below stands) and returned, so a
    /// bad row never fails a tick.
    pub fn for_tenant<P, T, K, V, K2, V2>(&self, platform: P, tenant: T) -> (Self, Vec<CoreError>)
    where
        P: IntoIterator<Item = (K, V)>,
        T: IntoIterator<Item = (K2, V2)>,
        K: AsRef<str>,
        V: AsRef<str>,
        K2: AsRef<str>,
        V2: AsRef<str>,
    {
        let (platform_opts, mut skipped) = self.with_valid_system_configs(platform);
        let (tenant_opts, more) = platform_opts.with_valid_system_configs(tenant);
        skipped.extend(more);
        (tenant_opts.within_platform(&platform_opts), skipped)
    }

    /// These options with every entry that parses applied, and the
    /// refusals of those that do not (each leaves its option as it was).
    pub fn with_valid_system_configs<I, K, V>(&self, entries: I) -> (Self, Vec<CoreError>)
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut next = self.clone();
        let skipped = entries
            .into_iter()
            .filter_map(|(k, v)| next.apply_system_config(k.as_ref(), v.as_ref()).err())
            .collect();
        (next, skipped)
    }
}

/// One option, borrowed mutably so one match serves every comparison.
enum Field<'a> {
    Limit(&'a mut Limit),
    Dollars(&'a mut Limit<f64>),
    Count(&'a mut u64),
    Small(&'a mut u32),
    Bytes(&'a mut usize),
    Number(&'a mut f64),
    Time(&'a mut Duration),
    Flag(&'a mut bool),
}

fn field<'a>(o: &'a mut AgentDispatcherOptions, key: &str) -> Option<Field<'a>> {
    let b = &mut o.tick_budget;
    Some(match key {
        keys::TICK_MAX_TOKENS => Field::Limit(&mut b.max_tokens),
        keys::TICK_MAX_OUTPUT_TOKENS_PER_TURN => Field::Limit(&mut b.max_output_tokens_per_turn),
        keys::TICK_MAX_TOOL_CALLS => Field::Limit(&mut b.max_tool_calls),
        keys::TICK_MAX_WALL_SECONDS => Field::Limit(&mut b.max_wall_seconds),
        keys::TICK_MAX_DOLLARS => Field::Dollars(&mut b.max_dollars),
        keys::TICK_MAX_TURNS => Field::Limit(&mut b.max_turns),
        keys::WEEKLY_CREDIT_USD => Field::Number(&mut o.weekly_credit_usd),
        keys::CREDIT_ENFORCEMENT_ENABLED => Field::Flag(&mut o.credit_enforcement_enabled),
        keys::MAX_CONCURRENT_INSTANCES_PER_TENANT => {
            Field::Small(&mut o.max_concurrent_instances_per_tenant)
        }
        keys::MAX_EVENT_PAYLOAD_BYTES => Field::Bytes(&mut o.max_event_payload_bytes),
        keys::FOUNDATIONAL_MAX_OUTPUT_TOKENS_PER_TURN => {
            Field::Count(&mut o.foundational_max_output_tokens_per_turn)
        }
        keys::WORKSET_DEADLINE => Field::Time(&mut o.workset_deadline),
        keys::MAX_ATTEMPTS => Field::Small(&mut o.max_attempts),
        keys::MAX_CONSECUTIVE_BLOCKED_TURNS => Field::Small(&mut o.max_consecutive_blocked_turns),
        keys::ENFORCE_STUCK_GUARD => Field::Flag(&mut o.enforce_stuck_guard),
        keys::STANDING_AGENT_IDLE_HEARTBEAT_ENABLED => {
            Field::Flag(&mut o.standing_agent_idle_heartbeat_enabled)
        }
        keys::STANDING_AGENT_HEARTBEAT_INTERVAL => {
            Field::Time(&mut o.standing_agent_heartbeat_interval)
        }
        keys::TICK_BASE_DELAY => Field::Time(&mut o.tick_base_delay),
        keys::BACKOFF_FACTOR => Field::Number(&mut o.backoff_factor),
        keys::MAX_BACKOFF_INTERVAL => Field::Time(&mut o.max_backoff_interval),
        keys::FORCED_REPLAN_EVERY_N_IDLE_TICKS => {
            Field::Small(&mut o.forced_replan_every_n_idle_ticks)
        }
        keys::POLLING_INTERVAL => Field::Time(&mut o.polling_interval),
        keys::PROVIDER_FAILURE_BASE_DELAY => Field::Time(&mut o.provider_failure_base_delay),
        keys::PROVIDER_FAILURE_MAX_DELAY => Field::Time(&mut o.provider_failure_max_delay),
        _ => return None,
    })
}

/// Whether `mine` is at or inside `theirs` in `bound`'s direction. A value
/// that does not compare (NaN: never produced by the parser) is outside.
fn ordered_within<T: PartialOrd>(bound: Bound, mine: &T, theirs: &T) -> bool {
    match bound {
        Bound::AtMost => mine <= theirs,
        Bound::AtLeast => mine >= theirs,
        Bound::OnlyOn => false,
    }
}

fn limit_within<T: PartialOrd + Copy>(bound: Bound, mine: &Limit<T>, theirs: &Limit<T>) -> bool {
    match (mine.limited(), theirs.limited()) {
        (Some(m), Some(t)) => ordered_within(bound, &m, &t),
        // Unlimited is the loosest ceiling.
        (None, None) => true,
        (None, Some(_)) => bound == Bound::AtLeast,
        (Some(_), None) => bound == Bound::AtMost,
    }
}

/// Whether option `c.key` of `mine` is within that of `theirs`.
fn within(
    c: &Ceiling,
    mine: &mut AgentDispatcherOptions,
    theirs: &mut AgentDispatcherOptions,
) -> bool {
    let (Some(m), Some(t)) = (field(mine, c.key), field(theirs, c.key)) else {
        return true;
    };
    match (m, t) {
        (Field::Limit(m), Field::Limit(t)) => limit_within(c.bound, m, t),
        (Field::Dollars(m), Field::Dollars(t)) => limit_within(c.bound, m, t),
        (Field::Count(m), Field::Count(t)) => ordered_within(c.bound, m, t),
        (Field::Small(m), Field::Small(t)) => ordered_within(c.bound, m, t),
        (Field::Bytes(m), Field::Bytes(t)) => ordered_within(c.bound, m, t),
        (Field::Number(m), Field::Number(t)) => ordered_within(c.bound, m, t),
        (Field::Time(m), Field::Time(t)) => ordered_within(c.bound, m, t),
        (Field::Flag(m), Field::Flag(t)) => *m || !*t,
        _ => false,
    }
}

/// Set option `key` of `mine` to that of `theirs`.
fn take(key: &str, mine: &mut AgentDispatcherOptions, theirs: &mut AgentDispatcherOptions) {
    let (Some(m), Some(t)) = (field(mine, key), field(theirs, key)) else {
        return;
    };
    match (m, t) {
        (Field::Limit(m), Field::Limit(t)) => *m = *t,
        (Field::Dollars(m), Field::Dollars(t)) => *m = *t,
        (Field::Count(m), Field::Count(t)) => *m = *t,
        (Field::Small(m), Field::Small(t)) => *m = *t,
        (Field::Bytes(m), Field::Bytes(t)) => *m = *t,
        (Field::Number(m), Field::Number(t)) => *m = *t,
        (Field::Time(m), Field::Time(t)) => *m = *t,
        (Field::Flag(m), Field::Flag(t)) => *m = *t,
        _ => {}
    }
}

/// Option `key` of `o` in `system_configs` syntax.
fn shown(key: &str, o: &AgentDispatcherOptions) -> String {
    fn limit<T: std::fmt::Display + PartialOrd + Copy>(l: &Limit<T>) -> String {
        l.limited()
            .map_or_else(|| "unlimited".to_owned(), |v| v.to_string())
    }
    let mut o = o.clone();
    match field(&mut o, key) {
        Some(Field::Limit(v)) => limit(v),
        Some(Field::Dollars(v)) => limit(v),
        Some(Field::Count(v)) => v.to_string(),
        Some(Field::Small(v)) => v.to_string(),
        Some(Field::Bytes(v)) => v.to_string(),
        Some(Field::Number(v)) => v.to_string(),
        Some(Field::Time(v)) if v.subsec_nanos() == 0 => format!("{}s", v.as_secs()),
        Some(Field::Time(v)) => format!("{}ms", v.as_millis()),
        Some(Field::Flag(v)) => v.to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn platform() -> AgentDispatcherOptions {
        AgentDispatcherOptions::default()
    }

    /// A value looser than the default for each bounded key, and one
    /// tighter, in `system_configs` syntax.
    fn looser_and_tighter(key: &str) -> (&'static str, &'static str) {
        match ceiling(key).map(|c| c.bound) {
            Some(Bound::OnlyOn) => ("false", "true"),
            Some(Bound::AtLeast) => match key {
                keys::BACKOFF_FACTOR => ("1.0", "3.5"),
                keys::FORCED_REPLAN_EVERY_N_IDLE_TICKS => ("1", "1000"),
                _ => ("1ms", "400d"),
            },
            _ => match key {
                keys::WEEKLY_CREDIT_USD | keys::TICK_MAX_DOLLARS => ("1000000", "0.5"),
                keys::WORKSET_DEADLINE => ("1000d", "1s"),
                _ => ("4000000000", "1"),
            },
        }
    }

    #[test]
    fn every_key_is_either_bounded_or_the_tenants_with_a_reason() {
        let bounded: BTreeSet<&str> = CEILINGS.iter().map(|c| c.key).collect();
        let free: BTreeSet<&str> = TENANT_KEYS.iter().map(|(k, _)| *k).collect();
        assert_eq!(bounded.len(), CEILINGS.len(), "a key listed twice");
        assert!(bounded.is_disjoint(&free));
        let all: BTreeSet<&str> = keys::ALL.iter().copied().collect();
        let listed: BTreeSet<&str> = bounded.union(&free).copied().collect();
        assert_eq!(listed, all, "each key of keys::ALL is decided once");
        for c in CEILINGS {
            assert!(!c.why.is_empty(), "{}", c.key);
            let mut o = platform();
            assert!(field(&mut o, c.key).is_some(), "{} has no field", c.key);
        }
        assert!(TENANT_KEYS.iter().all(|(_, why)| !why.is_empty()));
    }

    #[test]
    fn the_named_money_and_load_keys_are_bounded() {
        for key in [
            keys::WEEKLY_CREDIT_USD,
            keys::CREDIT_ENFORCEMENT_ENABLED,
            keys::MAX_CONCURRENT_INSTANCES_PER_TENANT,
            keys::MAX_EVENT_PAYLOAD_BYTES,
            keys::TICK_MAX_TOKENS,
            keys::TICK_MAX_OUTPUT_TOKENS_PER_TURN,
            keys::TICK_MAX_TOOL_CALLS,
            keys::TICK_MAX_WALL_SECONDS,
            keys::TICK_MAX_DOLLARS,
            keys::TICK_MAX_TURNS,
            keys::FOUNDATIONAL_MAX_OUTPUT_TOKENS_PER_TURN,
        ] {
            assert!(ceiling(key).is_some(), "{key}");
        }
        assert_eq!(
            ceiling(keys::CREDIT_ENFORCEMENT_ENABLED).map(|c| c.bound),
            Some(Bound::OnlyOn)
        );
        assert!(ceiling(keys::LEDGER_TAIL).is_none());
        assert!(is_platform_feature("windows-pool"));
        assert!(is_platform_feature("prompt-redactor"));
        assert!(!is_platform_feature("standing-agents"));
    }

    #[test]
    fn a_tenant_may_tighten_every_bounded_key_and_loosen_none() {
        for c in CEILINGS {
            let (looser, tighter) = looser_and_tighter(c.key);
            assert_eq!(
                check_tenant_value(c.key, tighter, &platform()),
                Ok(()),
                "{} = {tighter}",
                c.key
            );
            let err = check_tenant_value(c.key, looser, &platform()).unwrap_err();
            assert!(
                matches!(err, TenantWriteError::BeyondPlatform { key, .. } if key == c.key),
                "{} = {looser}: {err:?}",
                c.key
            );
        }
    }

    #[test]
    fn the_platforms_own_value_is_allowed_and_unlimited_never_is() {
        let p = platform();
        for c in CEILINGS {
            let own = shown(c.key, &p);
            assert_eq!(
                check_tenant_value(c.key, &own, &p),
                Ok(()),
                "{} = {own}",
                c.key
            );
        }
        let mut open = platform();
        open.apply_system_config(keys::TICK_MAX_TURNS, "unlimited")
            .unwrap();
        let err = check_tenant_value(keys::TICK_MAX_TURNS, " Unlimited ", &open).unwrap_err();
        assert!(
            matches!(err, TenantWriteError::BeyondPlatform { .. }),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("value for this tenant is unlimited: a tenant operator may only lower it (to a number: unlimited is never a lowering)"),
            "{err}"
        );
        assert_eq!(
            check_tenant_value(keys::TICK_MAX_TURNS, "500", &open),
            Ok(())
        );
    }

    #[test]
    fn the_refusal_names_the_key_the_platform_value_and_who_may_raise_it() {
        let err = check_tenant_value(keys::WEEKLY_CREDIT_USD, "1000000", &platform()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "AgentDispatcher:WeeklyCreditUsd is bounded by the platform, whose value for this \
             tenant is 60: a tenant operator may only lower it (to 60 or below); only a platform \
             token may raise it"
        );
        let err =
            check_tenant_value(keys::CREDIT_ENFORCEMENT_ENABLED, "false", &platform()).unwrap_err();
        assert!(
            err.to_string()
                .contains("only a platform token may turn it off"),
            "{err}"
        );
        let err = check_tenant_value(keys::TICK_BASE_DELAY, "500ms", &platform()).unwrap_err();
        assert!(
            err.to_string().contains("value for this tenant is 30s"),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("only a platform token may lower it"),
            "{err}"
        );
    }

    #[test]
    fn a_guard_the_platform_has_off_may_stay_off() {
        let mut p = platform();
        p.apply_system_config(keys::CREDIT_ENFORCEMENT_ENABLED, "false")
            .unwrap();
        assert_eq!(
            check_tenant_value(keys::CREDIT_ENFORCEMENT_ENABLED, "false", &p),
            Ok(())
        );
        assert_eq!(
            check_tenant_value(keys::CREDIT_ENFORCEMENT_ENABLED, "true", &p),
            Ok(())
        );
    }

    #[test]
    fn unbounded_keys_pass_and_bad_values_are_invalid_not_refused() {
        assert_eq!(
            check_tenant_value(keys::LEDGER_TAIL, "500", &platform()),
            Ok(())
        );
        assert!(matches!(
            check_tenant_value(keys::WEEKLY_CREDIT_USD, "lots", &platform()),
            Err(TenantWriteError::Invalid(CoreError::InvalidConfig { .. }))
        ));
    }

    #[test]
    fn a_stale_tenant_row_never_raises_anything() {
        let tight: Vec<(&str, &str)> = CEILINGS
            .iter()
            .map(|c| (c.key, looser_and_tighter(c.key).1))
            .collect();
        let loose: Vec<(&str, &str)> = CEILINGS
            .iter()
            .map(|c| (c.key, looser_and_tighter(c.key).0))
            .collect();
        let base = AgentDispatcherOptions::default();
        let (got, skipped) = base.for_tenant(tight.clone(), loose);
        assert!(skipped.is_empty(), "{skipped:?}");
        let (platform, _) = base.for_tenant(tight, Vec::<(&str, &str)>::new());
        assert_eq!(got, platform, "every looser tenant value is the platform's");
    }

    #[test]
    fn a_tenant_lowering_holds_under_a_looser_platform() {
        let base = AgentDispatcherOptions::default();
        let (got, _) = base.for_tenant(
            [(keys::WEEKLY_CREDIT_USD, "100")],
            [
                (keys::WEEKLY_CREDIT_USD, "25"),
                (keys::CREDIT_ENFORCEMENT_ENABLED, "true"),
                (keys::TICK_MAX_TURNS, "3"),
                (keys::TICK_BASE_DELAY, "1h"),
                (keys::LEDGER_TAIL, "40"),
            ],
        );
        assert_eq!(got.weekly_credit_usd, 25.0);
        assert_eq!(got.tick_budget.max_turns, Limit::Limited(3));
        assert_eq!(got.tick_base_delay, Duration::from_secs(3600));
        assert_eq!(got.ledger_tail, 40, "an unbounded key is the tenant's");
        assert!(got.credit_enforcement_enabled);
    }

    #[test]
    fn the_platform_lowering_below_a_tenant_row_wins() {
        let base = AgentDispatcherOptions::default();
        // The tenant lowered to 40 when the platform allowed 60; the
        // platform now allows 10, and off-switches stay on.
        let (got, _) = base.for_tenant(
            [
                (keys::WEEKLY_CREDIT_USD, "10"),
                (keys::TICK_MAX_DOLLARS, "unlimited"),
            ],
            [
                (keys::WEEKLY_CREDIT_USD, "40"),
                (keys::CREDIT_ENFORCEMENT_ENABLED, "false"),
                (keys::TICK_MAX_DOLLARS, "2"),
            ],
        );
        assert_eq!(got.weekly_credit_usd, 10.0);
        assert!(got.credit_enforcement_enabled);
        assert_eq!(got.tick_budget.max_dollars, Limit::Limited(2.0));
    }

    #[test]
    fn a_platform_that_lets_go_lets_the_tenant_choose() {
        let base = AgentDispatcherOptions::default();
        let (got, _) = base.for_tenant(
            [
                (keys::CREDIT_ENFORCEMENT_ENABLED, "false"),
                (keys::TICK_MAX_TURNS, "unlimited"),
            ],
            [(keys::TICK_MAX_TURNS, "unlimited")],
        );
        assert!(!got.credit_enforcement_enabled);
        assert_eq!(got.tick_budget.max_turns, Limit::Unlimited);
    }

    #[test]
    fn every_budget_axis_has_its_per_tick_ceiling() {
        for axis in BudgetAxis::ALL {
            let key = BUDGET_AXIS_KEYS
                .iter()
                .find(|(a, _)| a == axis)
                .map(|(_, k)| *k);
            let c = key.and_then(ceiling);
            assert_eq!(c.map(|c| c.bound), Some(Bound::AtMost), "{axis}");
        }
    }

    fn full_override(n: u64, dollars: f64) -> BudgetOverride {
        BudgetOverride {
            max_tokens: Some(n),
            max_output_tokens_per_turn: Some(n),
            max_tool_calls: Some(n),
            max_wall_seconds: Some(n),
            max_dollars: Some(dollars),
            max_turns: Some(n),
        }
    }

    #[test]
    fn an_override_at_or_below_every_platform_maximum_is_a_tenants() {
        let p = platform();
        let b = p.tick_budget;
        let at = BudgetOverride {
            max_tokens: b.max_tokens.limited(),
            max_output_tokens_per_turn: b.max_output_tokens_per_turn.limited(),
            max_tool_calls: b.max_tool_calls.limited(),
            max_wall_seconds: b.max_wall_seconds.limited(),
            max_dollars: b.max_dollars.limited(),
            max_turns: b.max_turns.limited(),
        };
        assert_eq!(check_tenant_budget_override(&at, &p), Ok(()));
        assert_eq!(
            check_tenant_budget_override(&full_override(1, 0.01), &p),
            Ok(())
        );
        assert_eq!(
            check_tenant_budget_override(&BudgetOverride::default(), &p),
            Ok(())
        );
        assert_eq!(at.within_platform(&p), at);
    }

    #[test]
    fn each_axis_above_the_platform_maximum_is_refused_by_name() {
        let p = platform();
        for (axis, key) in BUDGET_AXIS_KEYS {
            let mut o = BudgetOverride::default();
            match axis {
                BudgetAxis::Tokens => o.max_tokens = Some(4_000_000_000),
                BudgetAxis::OutputTokensPerTurn => {
                    o.max_output_tokens_per_turn = Some(4_000_000_000)
                }
                BudgetAxis::ToolCalls => o.max_tool_calls = Some(4_000_000_000),
                BudgetAxis::WallSeconds => o.max_wall_seconds = Some(4_000_000_000),
                BudgetAxis::Dollars => o.max_dollars = Some(1_000_000.0),
                BudgetAxis::Turns => o.max_turns = Some(4_000_000_000),
            }
            let err = check_tenant_budget_override(&o, &p).unwrap_err();
            assert_eq!((err.axis, err.key), (*axis, *key), "{err}");
            assert_eq!(err.platform, shown(key, &p), "{err}");
        }
        let o = BudgetOverride {
            max_turns: Some(40),
            ..BudgetOverride::default()
        };
        assert_eq!(
            check_tenant_budget_override(&o, &p)
                .unwrap_err()
                .to_string(),
            "maxTurns 40 is above AgentDispatcher:TickMaxTurns, the platform's per-tick \
             maximum for this tenant (12): a tenant operator may set a mode's maxTurns at or \
             below it; only a platform token may set it higher"
        );
    }

    #[test]
    fn an_unlimited_platform_maximum_bounds_no_override() {
        let mut p = platform();
        p.apply_system_config(keys::TICK_MAX_TURNS, "unlimited")
            .unwrap();
        let o = BudgetOverride {
            max_turns: Some(4_000_000_000),
            ..BudgetOverride::default()
        };
        assert_eq!(check_tenant_budget_override(&o, &p), Ok(()));
        assert_eq!(o.within_platform(&p), o);
    }

    #[test]
    fn an_override_is_clamped_to_a_lowered_platform_maximum_axis_by_axis() {
        let mut p = platform();
        p.apply_system_config(keys::TICK_MAX_TURNS, "3").unwrap();
        p.apply_system_config(keys::TICK_MAX_DOLLARS, "0.25")
            .unwrap();
        let stale = BudgetOverride {
            max_turns: Some(40),
            max_dollars: Some(5.0),
            max_tool_calls: Some(2),
            ..BudgetOverride::default()
        };
        assert_eq!(
            stale.within_platform(&p),
            BudgetOverride {
                max_turns: Some(3),
                max_dollars: Some(0.25),
                max_tool_calls: Some(2),
                ..BudgetOverride::default()
            },
            "an axis above is lowered, one below kept, an unset one stays unset"
        );
        let big = full_override(4_000_000_000, 1_000_000.0).within_platform(&p);
        assert_eq!(
            big.apply_to(&BudgetEnvelope::STANDING_DEFAULT),
            BudgetEnvelope {
                max_turns: Limit::Limited(3),
                max_dollars: Limit::Limited(0.25),
                ..p.tick_budget
            }
        );
    }

    #[test]
    fn malformed_rows_are_skipped_and_reported() {
        let base = AgentDispatcherOptions::default();
        let (got, skipped) = base.for_tenant(
            [(keys::WEEKLY_CREDIT_USD, "lots")],
            [(keys::TICK_MAX_TURNS, "many"), (keys::LEDGER_TAIL, "30")],
        );
        assert_eq!(got.weekly_credit_usd, 60.0);
        assert_eq!(got.tick_budget, base.tick_budget);
        assert_eq!(got.ledger_tail, 30);
        let keys: Vec<String> = skipped
            .iter()
            .map(|e| match e {
                CoreError::InvalidConfig { key, .. } => key.clone(),
                other => other.to_string(),
            })
            .collect();
        assert_eq!(keys, [keys::WEEKLY_CREDIT_USD, keys::TICK_MAX_TURNS]);
    }
    #[test]
    fn a_modes_seeded_budget_widens_its_bound_and_nothing_else() {
        use crate::modes::COMPLIANCE_RESEARCH_BUDGET;
        let p = AgentDispatcherOptions::default();
        let research = mode_bound(&p, Some(&COMPLIANCE_RESEARCH_BUDGET));
        // The seed itself passes and is never cut, although it is above
        // the standard per-tick values.
        assert!(COMPLIANCE_RESEARCH_BUDGET.max_turns > p.tick_budget.max_turns.limited());
        assert_eq!(
            check_tenant_budget_override(&COMPLIANCE_RESEARCH_BUDGET, &research),
            Ok(())
        );
        assert_eq!(
            COMPLIANCE_RESEARCH_BUDGET.within_platform(&research),
            COMPLIANCE_RESEARCH_BUDGET
        );
        // One turn above the seed is refused and cut back to it.
        let above = BudgetOverride {
            max_turns: COMPLIANCE_RESEARCH_BUDGET.max_turns.map(|t| t + 1),
            ..COMPLIANCE_RESEARCH_BUDGET
        };
        let err = check_tenant_budget_override(&above, &research).unwrap_err();
        assert_eq!(err.axis, BudgetAxis::Turns);
        assert_eq!(
            above.within_platform(&research).max_turns,
            COMPLIANCE_RESEARCH_BUDGET.max_turns
        );
        // No seed: the platform's values stand; the same override is cut
        // back to them.
        assert_eq!(mode_bound(&p, None), p);
        assert_eq!(
            COMPLIANCE_RESEARCH_BUDGET.within_platform(&p).max_turns,
            p.tick_budget.max_turns.limited()
        );
        // A seed narrower than the platform never lowers the bound.
        let narrow = BudgetOverride {
            max_turns: Some(1),
            ..BudgetOverride::default()
        };
        assert_eq!(mode_bound(&p, Some(&narrow)), p);
    }
}
