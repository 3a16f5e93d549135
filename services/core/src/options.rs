//! `AgentDispatcherOptions`: every tunable default of the spec in one struct
//! (spec §3.2, §3.3, §3.4, §3.6, §3.9), plus the `system_configs` key names
//! and the DB-first override that applies a `key -> value` map onto it.
//! Must never read the environment, files or the database: callers load the
//! values and hand them in, so the same rules serve every process.

use std::time::Duration;

use crate::budget::{BudgetEnvelope, Limit};
use crate::error::CoreError;

/// Ticks one agent pod runs at once unless `GENESIS_POD_CONCURRENCY` says
/// otherwise. Ticks wait on the LLM far longer than they compute, and the
/// supervisor runs concurrent claims, call records and completions as one
/// statement, so more in flight per pod is cheaper per tick. One tenant's default share of it stays the spec's
/// `MaxConcurrentInstancesPerTenant` default of 4.
pub const DEFAULT_POD_CONCURRENCY: usize = 16;

/// The most ticks one agent pod may run at once. Every slot is a permit and
/// a tenant-share entry held for the pod's life; past this the setting is a
/// typo, not a deployment (and far past it tokio's semaphore refuses).
pub const MAX_POD_CONCURRENCY: usize = 4096;

/// The longest tick lease, in seconds (a day). Every service derives
/// intervals from it (the consumer's ack wait is twice it, renewal a third),
/// so all of them refuse the same range, 1 to this.
pub const MAX_LEASE_TTL_SECS: u64 = 86_400;

/// The one check of `GENESIS_LEASE_TTL_SECS` that control and the agent pod
/// run at start (the supervisor's clap parser takes the same range from
/// [`MAX_LEASE_TTL_SECS`]): the refusal names the setting and its range.
pub fn check_lease_ttl_secs(secs: u64) -> Result<(), String> {
    if (1..=MAX_LEASE_TTL_SECS).contains(&secs) {
        Ok(())
    } else {
        Err(format!(
            "GENESIS_LEASE_TTL_SECS must be 1 to {MAX_LEASE_TTL_SECS}"
        ))
    }
}

/// The dispatcher's tunables. `Default` is the spec's code default; the
/// deploy layer (file/env) and then `system_configs` (DB-first, live) are
/// layered on top.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDispatcherOptions {
    /// Instances processed concurrently per tenant per cycle (spec: 4).
    pub max_concurrent_instances_per_tenant: u32,
    /// Dispatcher polling cycle (spec: 5 s).
    pub polling_interval: Duration,
    /// Consecutive blocked turns before the STUCK halt (spec: 3).
    pub max_consecutive_blocked_turns: u32,
    /// Idle ticks after which a re-plan is forced despite an unchanged hash (spec: 20).
    pub forced_replan_every_n_idle_ticks: u32,
    /// Flat daily heartbeat instead of geometric backoff (spec: true).
    pub standing_agent_idle_heartbeat_enabled: bool,
    /// The flat heartbeat interval (spec: 24 h).
    pub standing_agent_heartbeat_interval: Duration,
    /// Base delay of the geometric idle backoff (spec: 30 s).
    pub tick_base_delay: Duration,
    /// Growth factor of the geometric idle backoff (spec: 2.0).
    pub backoff_factor: f64,
    /// Cap of the geometric idle backoff (spec: 30 min).
    pub max_backoff_interval: Duration,
    /// Per-turn output cap during the foundational phase (spec: 16,384).
    pub foundational_max_output_tokens_per_turn: u64,
    /// How long the foundational phase lasts before it self-heals (spec: 24 h).
    pub workset_deadline: Duration,
    /// Weekly agent-planning credit per tenant, in USD (spec: $60).
    pub weekly_credit_usd: f64,
    /// Whether an exhausted credit window idles the agent (spec: true).
    pub credit_enforcement_enabled: bool,
    /// Tick lease time-to-live (internals: 60 s).
    pub lease_ttl: Duration,
    /// Deliveries of one event before dead-letter (internals: 5).
    pub max_attempts: u32,
    /// Whether the STUCK guard halts (pod path: true).
    pub enforce_stuck_guard: bool,
    /// Ensure one SOA per tenant at startup (spec: true).
    pub auto_bootstrap: bool,
    /// Bootstrap the SOA Active with an opener, not Paused (spec: true).
    pub standing_agents_idle_by_default: bool,
    /// Ledger turns re-injected per tick (spec: 12).
    pub ledger_tail: u32,
    /// Heartbeat expiry of in-memory registry entries (spec: 5 min).
    pub registry_entry_ttl: Duration,
    /// Largest accepted event payload, in bytes (64 KiB).
    pub max_event_payload_bytes: usize,
    /// Ephemeral-pod regime (KEDA from zero) rather than warm replicas.
    pub ephemeral_pod: bool,
    /// The shared per-tick budget of the standing policies (the `Tick*` keys).
    pub tick_budget: BudgetEnvelope,
    /// First delay before an event whose tick failed on every provider is
    /// tried again; it doubles with each consecutive failure (30 s).
    pub provider_failure_base_delay: Duration,
    /// Cap of that growing delay (30 min).
    pub provider_failure_max_delay: Duration,
    /// Consecutive provider failures of one instance after which an
    /// operator attention request is raised, once per streak (5).
    pub provider_failure_attention_after: u32,
}

impl Default for AgentDispatcherOptions {
    fn default() -> Self {
        Self {
            max_concurrent_instances_per_tenant: 4,
            polling_interval: Duration::from_secs(5),
            max_consecutive_blocked_turns: 3,
            forced_replan_every_n_idle_ticks: 20,
            standing_agent_idle_heartbeat_enabled: true,
            standing_agent_heartbeat_interval: Duration::from_secs(24 * 3600),
            tick_base_delay: Duration::from_secs(30),
            backoff_factor: 2.0,
            max_backoff_interval: Duration::from_secs(30 * 60),
            foundational_max_output_tokens_per_turn: 16_384,
            workset_deadline: Duration::from_secs(24 * 3600),
            weekly_credit_usd: 60.0,
            credit_enforcement_enabled: true,
            lease_ttl: Duration::from_secs(60),
            max_attempts: 5,
            enforce_stuck_guard: true,
            auto_bootstrap: true,
            standing_agents_idle_by_default: true,
            ledger_tail: 12,
            registry_entry_ttl: Duration::from_secs(5 * 60),
            max_event_payload_bytes: 64 * 1024,
            ephemeral_pod: false,
            tick_budget: BudgetEnvelope::STANDING_DEFAULT,
            provider_failure_base_delay: Duration::from_secs(30),
            provider_failure_max_delay: Duration::from_secs(30 * 60),
            provider_failure_attention_after: 5,
        }
    }
}

/// The `system_configs` key names (spec §3.6 and the other options).
///
/// Value syntax: integers in decimal; booleans `true`/`false` (any case);
/// dollars as a decimal number; budget axes additionally accept `unlimited`;
/// durations as bare seconds (`30`), with a unit (`500ms`, `30s`, `5m`, `24h`,
/// `1d`) or as `hh:mm:ss`.
pub mod keys {
    /// Per-tick total token ceiling.
    pub const TICK_MAX_TOKENS: &str = "AgentDispatcher:TickMaxTokens";
    /// Per-turn output token ceiling.
    pub const TICK_MAX_OUTPUT_TOKENS_PER_TURN: &str = "AgentDispatcher:TickMaxOutputTokensPerTurn";
    /// Per-tick tool-call ceiling.
    pub const TICK_MAX_TOOL_CALLS: &str = "AgentDispatcher:TickMaxToolCalls";
    /// Per-tick wall-clock ceiling, in seconds.
    pub const TICK_MAX_WALL_SECONDS: &str = "AgentDispatcher:TickMaxWallSeconds";
    /// Per-tick dollar ceiling.
    pub const TICK_MAX_DOLLARS: &str = "AgentDispatcher:TickMaxDollars";
    /// Per-tick LLM turn ceiling.
    pub const TICK_MAX_TURNS: &str = "AgentDispatcher:TickMaxTurns";
    /// See [`super::AgentDispatcherOptions::max_concurrent_instances_per_tenant`].
    pub const MAX_CONCURRENT_INSTANCES_PER_TENANT: &str =
        "AgentDispatcher:MaxConcurrentInstancesPerTenant";
    /// See [`super::AgentDispatcherOptions::polling_interval`].
    pub const POLLING_INTERVAL: &str = "AgentDispatcher:PollingInterval";
    /// See [`super::AgentDispatcherOptions::max_consecutive_blocked_turns`].
    pub const MAX_CONSECUTIVE_BLOCKED_TURNS: &str = "AgentDispatcher:MaxConsecutiveBlockedTurns";
    /// See [`super::AgentDispatcherOptions::forced_replan_every_n_idle_ticks`].
    pub const FORCED_REPLAN_EVERY_N_IDLE_TICKS: &str =
        "AgentDispatcher:ForcedReplanEveryNIdleTicks";
    /// See [`super::AgentDispatcherOptions::standing_agent_idle_heartbeat_enabled`].
    pub const STANDING_AGENT_IDLE_HEARTBEAT_ENABLED: &str =
        "AgentDispatcher:StandingAgentIdleHeartbeatEnabled";
    /// See [`super::AgentDispatcherOptions::standing_agent_heartbeat_interval`].
    pub const STANDING_AGENT_HEARTBEAT_INTERVAL: &str =
        "AgentDispatcher:StandingAgentHeartbeatInterval";
    /// See [`super::AgentDispatcherOptions::tick_base_delay`].
    pub const TICK_BASE_DELAY: &str = "AgentDispatcher:TickBaseDelay";
    /// See [`super::AgentDispatcherOptions::backoff_factor`].
    pub const BACKOFF_FACTOR: &str = "AgentDispatcher:BackoffFactor";
    /// See [`super::AgentDispatcherOptions::max_backoff_interval`].
    pub const MAX_BACKOFF_INTERVAL: &str = "AgentDispatcher:MaxBackoffInterval";
    /// See [`super::AgentDispatcherOptions::foundational_max_output_tokens_per_turn`].
    pub const FOUNDATIONAL_MAX_OUTPUT_TOKENS_PER_TURN: &str =
        "AgentDispatcher:FoundationalMaxOutputTokensPerTurn";
    /// See [`super::AgentDispatcherOptions::workset_deadline`].
    pub const WORKSET_DEADLINE: &str = "AgentDispatcher:WorksetDeadline";
    /// See [`super::AgentDispatcherOptions::weekly_credit_usd`].
    pub const WEEKLY_CREDIT_USD: &str = "AgentDispatcher:WeeklyCreditUsd";
    /// See [`super::AgentDispatcherOptions::credit_enforcement_enabled`].
    pub const CREDIT_ENFORCEMENT_ENABLED: &str = "AgentDispatcher:CreditEnforcementEnabled";
    /// See [`super::AgentDispatcherOptions::lease_ttl`].
    pub const LEASE_TTL: &str = "AgentDispatcher:LeaseTtl";
    /// See [`super::AgentDispatcherOptions::max_attempts`].
    pub const MAX_ATTEMPTS: &str = "AgentDispatcher:MaxAttempts";
    /// See [`super::AgentDispatcherOptions::enforce_stuck_guard`].
    pub const ENFORCE_STUCK_GUARD: &str = "AgentDispatcher:EnforceStuckGuard";
    /// See [`super::AgentDispatcherOptions::auto_bootstrap`].
    pub const AUTO_BOOTSTRAP: &str = "AgentDispatcher:AutoBootstrap";
    /// See [`super::AgentDispatcherOptions::standing_agents_idle_by_default`].
    pub const STANDING_AGENTS_IDLE_BY_DEFAULT: &str = "AgentDispatcher:StandingAgentsIdleByDefault";
    /// See [`super::AgentDispatcherOptions::ledger_tail`].
    pub const LEDGER_TAIL: &str = "AgentDispatcher:LedgerTail";
    /// See [`super::AgentDispatcherOptions::registry_entry_ttl`].
    pub const REGISTRY_ENTRY_TTL: &str = "AgentDispatcher:RegistryEntryTtl";
    /// See [`super::AgentDispatcherOptions::max_event_payload_bytes`].
    pub const MAX_EVENT_PAYLOAD_BYTES: &str = "AgentDispatcher:MaxEventPayloadBytes";
    /// See [`super::AgentDispatcherOptions::ephemeral_pod`].
    pub const EPHEMERAL_POD: &str = "AgentDispatcher:EphemeralPod";

    /// Every key [`super::AgentDispatcherOptions::with_system_configs`] understands.
    /// [`AgentDispatcherOptions::provider_failure_base_delay`].
    pub const PROVIDER_FAILURE_BASE_DELAY: &str = "AgentDispatcher:ProviderFailureBaseDelay";
    /// [`AgentDispatcherOptions::provider_failure_max_delay`].
    pub const PROVIDER_FAILURE_MAX_DELAY: &str = "AgentDispatcher:ProviderFailureMaxDelay";
    /// [`AgentDispatcherOptions::provider_failure_attention_after`].
    pub const PROVIDER_FAILURE_ATTENTION_AFTER: &str =
        "AgentDispatcher:ProviderFailureAttentionAfter";

    pub const ALL: &[&str] = &[
        TICK_MAX_TOKENS,
        TICK_MAX_OUTPUT_TOKENS_PER_TURN,
        TICK_MAX_TOOL_CALLS,
        TICK_MAX_WALL_SECONDS,
        TICK_MAX_DOLLARS,
        TICK_MAX_TURNS,
        MAX_CONCURRENT_INSTANCES_PER_TENANT,
        POLLING_INTERVAL,
        MAX_CONSECUTIVE_BLOCKED_TURNS,
        FORCED_REPLAN_EVERY_N_IDLE_TICKS,
        STANDING_AGENT_IDLE_HEARTBEAT_ENABLED,
        STANDING_AGENT_HEARTBEAT_INTERVAL,
        TICK_BASE_DELAY,
        BACKOFF_FACTOR,
        MAX_BACKOFF_INTERVAL,
        FOUNDATIONAL_MAX_OUTPUT_TOKENS_PER_TURN,
        WORKSET_DEADLINE,
        WEEKLY_CREDIT_USD,
        CREDIT_ENFORCEMENT_ENABLED,
        LEASE_TTL,
        MAX_ATTEMPTS,
        ENFORCE_STUCK_GUARD,
        AUTO_BOOTSTRAP,
        STANDING_AGENTS_IDLE_BY_DEFAULT,
        LEDGER_TAIL,
        REGISTRY_ENTRY_TTL,
        MAX_EVENT_PAYLOAD_BYTES,
        EPHEMERAL_POD,
        PROVIDER_FAILURE_BASE_DELAY,
        PROVIDER_FAILURE_MAX_DELAY,
        PROVIDER_FAILURE_ATTENTION_AFTER,
    ];
}

type Reason = String;

fn parse_positive_u64(v: &str) -> Result<u64, Reason> {
    let n: u64 = v
        .parse()
        .map_err(|_| "expected a positive decimal integer".to_owned())?;
    if n == 0 {
        return Err("must be greater than zero".to_owned());
    }
    Ok(n)
}

fn parse_positive_u32(v: &str) -> Result<u32, Reason> {
    let n = parse_positive_u64(v)?;
    u32::try_from(n).map_err(|_| format!("must be at most {}", u32::MAX))
}

fn parse_bool(v: &str) -> Result<bool, Reason> {
    if v.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if v.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err("expected true or false".to_owned())
    }
}

fn parse_positive_f64(v: &str) -> Result<f64, Reason> {
    let n: f64 = v
        .parse()
        .map_err(|_| "expected a decimal number".to_owned())?;
    if !n.is_finite() || n <= 0.0 {
        return Err("must be a finite number greater than zero".to_owned());
    }
    Ok(n)
}

fn parse_non_negative_f64(v: &str) -> Result<f64, Reason> {
    let n: f64 = v
        .parse()
        .map_err(|_| "expected a decimal number".to_owned())?;
    if !n.is_finite() || n < 0.0 {
        return Err("must be a finite number, zero or greater".to_owned());
    }
    Ok(n)
}

fn is_unlimited(v: &str) -> bool {
    v.eq_ignore_ascii_case("unlimited")
}

fn parse_limit(v: &str) -> Result<Limit, Reason> {
    if is_unlimited(v) {
        return Ok(Limit::Unlimited);
    }
    parse_positive_u64(v)
        .map(Limit::Limited)
        .map_err(|r| format!("{r}, or \"unlimited\""))
}

fn parse_dollar_limit(v: &str) -> Result<Limit<f64>, Reason> {
    if is_unlimited(v) {
        return Ok(Limit::Unlimited);
    }
    parse_positive_f64(v)
        .map(Limit::Limited)
        .map_err(|r| format!("{r}, or \"unlimited\""))
}

/// Parses a positive duration: bare seconds, a unit suffix (`ms`, `s`, `m`,
/// `h`, `d`) or `hh:mm:ss`. Public so bins can share the same syntax.
pub fn parse_duration(v: &str) -> Result<Duration, CoreError> {
    parse_duration_reason(v).map_err(|reason| CoreError::InvalidArgument {
        field: "duration".to_owned(),
        reason,
    })
}

fn parse_duration_reason(v: &str) -> Result<Duration, Reason> {
    const SYNTAX: &str = "expected seconds, a number with ms/s/m/h/d, or hh:mm:ss";
    let d = if v.contains(':') {
        let parts: Vec<&str> = v.split(':').collect();
        let [h, m, s] = parts.as_slice() else {
            return Err(SYNTAX.to_owned());
        };
        let h: u64 = h.parse().map_err(|_| SYNTAX.to_owned())?;
        let m: u64 = m.parse().map_err(|_| SYNTAX.to_owned())?;
        let s: u64 = s.parse().map_err(|_| SYNTAX.to_owned())?;
        if m >= 60 || s >= 60 {
            return Err("minutes and seconds must be below 60".to_owned());
        }
        h.checked_mul(3600)
            .and_then(|x| x.checked_add(m * 60 + s))
            .map(Duration::from_secs)
            .ok_or_else(|| "duration too large".to_owned())?
    } else {
        let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
        let (digits, unit) = v.split_at(split);
        let n: u64 = digits.parse().map_err(|_| SYNTAX.to_owned())?;
        let too_large = || "duration too large".to_owned();
        match unit {
            "" | "s" => Duration::from_secs(n),
            "ms" => Duration::from_millis(n),
            "m" => Duration::from_secs(n.checked_mul(60).ok_or_else(too_large)?),
            "h" => Duration::from_secs(n.checked_mul(3600).ok_or_else(too_large)?),
            "d" => Duration::from_secs(n.checked_mul(86_400).ok_or_else(too_large)?),
            _ => return Err(SYNTAX.to_owned()),
        }
    };
    if d.is_zero() {
        return Err("must be greater than zero".to_owned());
    }
    Ok(d)
}

impl AgentDispatcherOptions {
    /// Applies one `system_configs` entry. Keys outside [`keys::ALL`] are
    /// ignored and reported as `Ok(false)` (the table holds other settings
    /// too); a known key with an unparsable value is an
    /// [`CoreError::InvalidConfig`] and leaves `self` unchanged.
    pub fn apply_system_config(&mut self, key: &str, value: &str) -> Result<bool, CoreError> {
        let v = value.trim();
        let result: Result<(), Reason> = (|| {
            match key {
                keys::TICK_MAX_TOKENS => self.tick_budget.max_tokens = parse_limit(v)?,
                keys::TICK_MAX_OUTPUT_TOKENS_PER_TURN => {
                    self.tick_budget.max_output_tokens_per_turn = parse_limit(v)?
                }
                keys::TICK_MAX_TOOL_CALLS => self.tick_budget.max_tool_calls = parse_limit(v)?,
                keys::TICK_MAX_WALL_SECONDS => self.tick_budget.max_wall_seconds = parse_limit(v)?,
                keys::TICK_MAX_DOLLARS => self.tick_budget.max_dollars = parse_dollar_limit(v)?,
                keys::TICK_MAX_TURNS => self.tick_budget.max_turns = parse_limit(v)?,
                keys::MAX_CONCURRENT_INSTANCES_PER_TENANT => {
                    self.max_concurrent_instances_per_tenant = parse_positive_u32(v)?
                }
                keys::POLLING_INTERVAL => self.polling_interval = parse_duration_reason(v)?,
                keys::MAX_CONSECUTIVE_BLOCKED_TURNS => {
                    self.max_consecutive_blocked_turns = parse_positive_u32(v)?
                }
                keys::FORCED_REPLAN_EVERY_N_IDLE_TICKS => {
                    self.forced_replan_every_n_idle_ticks = parse_positive_u32(v)?
                }
                keys::STANDING_AGENT_IDLE_HEARTBEAT_ENABLED => {
                    self.standing_agent_idle_heartbeat_enabled = parse_bool(v)?
                }
                keys::STANDING_AGENT_HEARTBEAT_INTERVAL => {
                    self.standing_agent_heartbeat_interval = parse_duration_reason(v)?
                }
                keys::TICK_BASE_DELAY => self.tick_base_delay = parse_duration_reason(v)?,
                keys::BACKOFF_FACTOR => {
                    let f = parse_positive_f64(v)?;
                    if f < 1.0 {
                        return Err("must be at least 1.0 (backoff never shrinks)".to_owned());
                    }
                    self.backoff_factor = f;
                }
                keys::MAX_BACKOFF_INTERVAL => self.max_backoff_interval = parse_duration_reason(v)?,
                keys::FOUNDATIONAL_MAX_OUTPUT_TOKENS_PER_TURN => {
                    self.foundational_max_output_tokens_per_turn = parse_positive_u64(v)?
                }
                keys::WORKSET_DEADLINE => self.workset_deadline = parse_duration_reason(v)?,
                keys::WEEKLY_CREDIT_USD => self.weekly_credit_usd = parse_non_negative_f64(v)?,
                keys::CREDIT_ENFORCEMENT_ENABLED => {
                    self.credit_enforcement_enabled = parse_bool(v)?
                }
                keys::LEASE_TTL => self.lease_ttl = parse_duration_reason(v)?,
                keys::MAX_ATTEMPTS => self.max_attempts = parse_positive_u32(v)?,
                keys::PROVIDER_FAILURE_BASE_DELAY => {
                    self.provider_failure_base_delay = parse_duration_reason(v)?
                }
                keys::PROVIDER_FAILURE_MAX_DELAY => {
                    self.provider_failure_max_delay = parse_duration_reason(v)?
                }
                keys::PROVIDER_FAILURE_ATTENTION_AFTER => {
                    self.provider_failure_attention_after = parse_positive_u32(v)?
                }
                keys::ENFORCE_STUCK_GUARD => self.enforce_stuck_guard = parse_bool(v)?,
                keys::AUTO_BOOTSTRAP => self.auto_bootstrap = parse_bool(v)?,
                keys::STANDING_AGENTS_IDLE_BY_DEFAULT => {
                    self.standing_agents_idle_by_default = parse_bool(v)?
                }
                keys::LEDGER_TAIL => self.ledger_tail = parse_positive_u32(v)?,
                keys::REGISTRY_ENTRY_TTL => self.registry_entry_ttl = parse_duration_reason(v)?,
                keys::MAX_EVENT_PAYLOAD_BYTES => {
                    let n = parse_positive_u64(v)?;
                    self.max_event_payload_bytes =
                        usize::try_from(n).map_err(|_| "too large".to_owned())?;
                }
                keys::EPHEMERAL_POD => self.ephemeral_pod = parse_bool(v)?,
                _ => return Err(String::new()),
            }
            Ok(())
        })();
        match result {
            Ok(()) => Ok(true),
            Err(reason) if reason.is_empty() => Ok(false),
            Err(reason) => Err(CoreError::InvalidConfig {
                key: key.to_owned(),
                value: value.to_owned(),
                reason,
            }),
        }
    }

    /// Returns these options with every `system_configs` entry applied
    /// (DB-first, spec §3.6). All or nothing: the first bad value is an
    /// [`CoreError::InvalidConfig`] naming its key, and `self` is untouched.
    pub fn with_system_configs<I, K, V>(&self, entries: I) -> Result<Self, CoreError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut next = self.clone();
        for (k, v) in entries {
            next.apply_system_config(k.as_ref(), v.as_ref())?;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_ttl_range_is_one_second_to_a_day() {
        for ok in [1, 60, MAX_LEASE_TTL_SECS] {
            assert_eq!(check_lease_ttl_secs(ok), Ok(()));
        }
        for bad in [0, MAX_LEASE_TTL_SECS + 1, u64::MAX] {
            let err = check_lease_ttl_secs(bad).expect_err("refused");
            assert_eq!(err, "GENESIS_LEASE_TTL_SECS must be 1 to 86400");
        }
    }
    use std::collections::BTreeMap;

    #[test]
    fn defaults_are_the_spec_values() {
        let o = AgentDispatcherOptions::default();
        assert_eq!(o.max_concurrent_instances_per_tenant, 4);
        assert_eq!(o.polling_interval, Duration::from_secs(5));
        assert_eq!(o.max_consecutive_blocked_turns, 3);
        assert_eq!(o.forced_replan_every_n_idle_ticks, 20);
        assert!(o.standing_agent_idle_heartbeat_enabled);
        assert_eq!(
            o.standing_agent_heartbeat_interval,
            Duration::from_secs(86_400)
        );
        assert_eq!(o.tick_base_delay, Duration::from_secs(30));
        assert_eq!(o.backoff_factor, 2.0);
        assert_eq!(o.max_backoff_interval, Duration::from_secs(1800));
        assert_eq!(o.foundational_max_output_tokens_per_turn, 16_384);
        assert_eq!(o.workset_deadline, Duration::from_secs(86_400));
        assert_eq!(o.weekly_credit_usd, 60.0);
        assert!(o.credit_enforcement_enabled);
        assert_eq!(o.lease_ttl, Duration::from_secs(60));
        assert_eq!(o.max_attempts, 5);
        assert!(o.enforce_stuck_guard);
        assert!(o.auto_bootstrap);
        assert!(o.standing_agents_idle_by_default);
        assert_eq!(o.ledger_tail, 12);
        assert_eq!(o.registry_entry_ttl, Duration::from_secs(300));
        assert_eq!(o.max_event_payload_bytes, 65_536);
        assert_eq!(o.tick_budget, BudgetEnvelope::STANDING_DEFAULT);
    }

    #[test]
    fn system_configs_override_each_axis_and_option() {
        let map = BTreeMap::from([
            (keys::TICK_MAX_TOKENS, "50000"),
            (keys::TICK_MAX_DOLLARS, "2.25"),
            (keys::TICK_MAX_TURNS, "unlimited"),
            (keys::TICK_MAX_WALL_SECONDS, " 600 "),
            (keys::FORCED_REPLAN_EVERY_N_IDLE_TICKS, "7"),
            (keys::CREDIT_ENFORCEMENT_ENABLED, "False"),
            (keys::WEEKLY_CREDIT_USD, "0"),
            (keys::POLLING_INTERVAL, "500ms"),
            (keys::STANDING_AGENT_HEARTBEAT_INTERVAL, "12h"),
            (keys::MAX_BACKOFF_INTERVAL, "00:10:00"),
            (keys::TICK_BASE_DELAY, "45"),
            ("Some:OtherKey", "whatever"),
        ]);
        let o = AgentDispatcherOptions::default()
            .with_system_configs(&map)
            .unwrap();
        assert_eq!(o.tick_budget.max_tokens, Limit::Limited(50_000));
        assert_eq!(o.tick_budget.max_dollars, Limit::Limited(2.25));
        assert_eq!(o.tick_budget.max_turns, Limit::Unlimited);
        assert_eq!(o.tick_budget.max_wall_seconds, Limit::Limited(600));
        assert_eq!(o.tick_budget.max_tool_calls, Limit::Limited(12));
        assert_eq!(o.forced_replan_every_n_idle_ticks, 7);
        assert!(!o.credit_enforcement_enabled);
        assert_eq!(o.weekly_credit_usd, 0.0);
        assert_eq!(o.polling_interval, Duration::from_millis(500));
        assert_eq!(
            o.standing_agent_heartbeat_interval,
            Duration::from_secs(12 * 3600)
        );
        assert_eq!(o.max_backoff_interval, Duration::from_secs(600));
        assert_eq!(o.tick_base_delay, Duration::from_secs(45));
    }

    #[test]
    fn every_listed_key_is_understood() {
        let mut o = AgentDispatcherOptions::default();
        for key in keys::ALL {
            // A value that is not valid for any key: each must refuse, proving it is routed.
            let err = o.apply_system_config(key, "not-a-value").unwrap_err();
            assert_eq!(err.code(), crate::ErrorCode::InvalidConfig, "{key}");
        }
        assert_eq!(
            o.apply_system_config("AgentDispatcher:Unknown", "x"),
            Ok(false)
        );
        assert_eq!(o, AgentDispatcherOptions::default());
    }

    #[test]
    fn unparsable_value_is_a_precise_error_and_changes_nothing() {
        let base = AgentDispatcherOptions::default();
        let entries = vec![
            (keys::TICK_MAX_TOKENS.to_owned(), "1000".to_owned()),
            (keys::TICK_MAX_TOOL_CALLS.to_owned(), "twelve".to_owned()),
        ];
        let err = base.with_system_configs(entries).unwrap_err();
        assert_eq!(
            err,
            CoreError::InvalidConfig {
                key: keys::TICK_MAX_TOOL_CALLS.to_owned(),
                value: "twelve".to_owned(),
                reason: "expected a positive decimal integer, or \"unlimited\"".to_owned(),
            }
        );
        assert_eq!(base, AgentDispatcherOptions::default());
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let mut o = AgentDispatcherOptions::default();
        for (k, v) in [
            (keys::TICK_MAX_TOKENS, "0"),
            (keys::TICK_MAX_TOKENS, "-5"),
            (keys::TICK_MAX_DOLLARS, "NaN"),
            (keys::TICK_MAX_DOLLARS, "-1.0"),
            (keys::BACKOFF_FACTOR, "0.5"),
            (keys::WEEKLY_CREDIT_USD, "-3"),
            (keys::POLLING_INTERVAL, "0s"),
            (keys::POLLING_INTERVAL, "5 weeks"),
            (keys::MAX_BACKOFF_INTERVAL, "00:61:00"),
            (keys::MAX_ATTEMPTS, "99999999999"),
            (keys::CREDIT_ENFORCEMENT_ENABLED, "yes"),
            (
                keys::STANDING_AGENT_HEARTBEAT_INTERVAL,
                "99999999999999999999d",
            ),
        ] {
            assert!(o.apply_system_config(k, v).is_err(), "{k}={v}");
        }
        assert_eq!(o, AgentDispatcherOptions::default());
    }

    #[test]
    fn duration_syntax() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86_400));
        assert_eq!(
            parse_duration("24:00:00").unwrap(),
            Duration::from_secs(86_400)
        );
        assert!(parse_duration("").is_err());
        assert!(parse_duration("1:2").is_err());
        assert!(parse_duration("m").is_err());
    }
}
