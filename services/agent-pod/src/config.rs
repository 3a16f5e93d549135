//! The pod's configuration: the `--config` file, `GENESIS_*` env and flags (docs/internals.md
//! "Configuration"), parsed by clap in the bin and built directly by tests.
//!
//! This module must never print the agent token: `Debug` and
//! [`PodConfig::dump`] redact it.

use std::net::SocketAddr;
use std::time::Duration;

/// Env name of [`PodConfig::llm_connect_timeout_secs`].
pub const LLM_CONNECT_TIMEOUT_ENV: &str = "GENESIS_LLM_CONNECT_TIMEOUT_SECS";
/// Env name of [`PodConfig::llm_request_timeout_secs`].
pub const LLM_REQUEST_TIMEOUT_ENV: &str = "GENESIS_LLM_REQUEST_TIMEOUT_SECS";
/// Env name of [`PodConfig::llm_max_retry_after_secs`].
pub const LLM_MAX_RETRY_AFTER_ENV: &str = "GENESIS_LLM_MAX_RETRY_AFTER_SECS";
/// The longest provider timeout accepted: a day is already far beyond any
/// completion, and a bound keeps the deadline arithmetic far from overflow.
pub const MAX_LLM_TIMEOUT_SECS: u64 = 86_400;
/// The longest Retry-After wait accepted: a tick holding its slot for more
/// than an hour waiting on one provider is a misconfiguration.
pub const MAX_LLM_RETRY_AFTER_SECS: u64 = 3_600;

/// A setting in whole seconds with its accepted range. One value per
/// setting serves both clap's value parser and [`PodConfig::validate`] (a
/// config built in code skips the parsers). The error names the variable,
/// because clap's own message names only the flag and an operator sets these
/// through the environment.
struct Seconds {
    var: &'static str,
    min: u64,
    max: u64,
}

impl Seconds {
    fn parse(&self, raw: &str) -> Result<u64, String> {
        let value: u64 = raw.trim().parse().map_err(|_| self.error(raw))?;
        self.check(value)
    }

    fn check(&self, value: u64) -> Result<u64, String> {
        if (self.min..=self.max).contains(&value) {
            Ok(value)
        } else {
            Err(self.error(value))
        }
    }

    fn error(&self, got: impl std::fmt::Debug) -> String {
        format!(
            "{} must be a whole number of seconds in {}..={}, not {got:?}",
            self.var, self.min, self.max
        )
    }
}

const LLM_CONNECT_TIMEOUT: Seconds = Seconds {
    var: LLM_CONNECT_TIMEOUT_ENV,
    min: 1,
    max: MAX_LLM_TIMEOUT_SECS,
};
const LLM_REQUEST_TIMEOUT: Seconds = Seconds {
    var: LLM_REQUEST_TIMEOUT_ENV,
    min: 1,
    max: MAX_LLM_TIMEOUT_SECS,
};
const LLM_MAX_RETRY_AFTER: Seconds = Seconds {
    var: LLM_MAX_RETRY_AFTER_ENV,
    min: 0,
    max: MAX_LLM_RETRY_AFTER_SECS,
};

fn parse_llm_connect_timeout(raw: &str) -> Result<u64, String> {
    LLM_CONNECT_TIMEOUT.parse(raw)
}

fn parse_llm_request_timeout(raw: &str) -> Result<u64, String> {
    LLM_REQUEST_TIMEOUT.parse(raw)
}

fn parse_llm_max_retry_after(raw: &str) -> Result<u64, String> {
    LLM_MAX_RETRY_AFTER.parse(raw)
}

/// Everything `run` needs.
#[derive(Clone, clap::Parser, serde::Serialize)]
#[command(
    name = crate::SERVICE_NAME,
    about = "Genesis agent pod: pulls ticks, plans with the LLM, completes over gRPC"
)]
pub struct PodConfig {
    /// NATS URL.
    #[arg(
        long,
        env = "GENESIS_NATS_URL",
        default_value = "nats://127.0.0.1:4222"
    )]
    #[serde(serialize_with = "genesis_telemetry::config_file::redacted_url")]
    pub nats_url: String,
    /// JetStream stream the ticks are published to (created by control).
    #[arg(long, env = "GENESIS_STREAM", default_value = "GENESIS_TICKS")]
    pub stream: String,
    /// Durable pull consumer to bind to (created by control).
    #[arg(long, env = "GENESIS_CONSUMER", default_value = "agent-pods")]
    pub consumer: String,
    /// The supervisor's AgentPod endpoint.
    #[arg(
        long,
        env = "GENESIS_SUPERVISOR_URL",
        default_value = "http://127.0.0.1:50052"
    )]
    #[serde(serialize_with = "genesis_telemetry::config_file::redacted_url")]
    pub supervisor_url: String,
    /// The agent-pod token (secret).
    #[arg(long, env = "GENESIS_AGENT_TOKEN", hide_env_values = true)]
    #[serde(
        serialize_with = "genesis_telemetry::config_file::redacted_secret",
        skip_serializing_if = "Option::is_none"
    )]
    pub agent_token: Option<String>,
    /// Ticks this pod runs at once.
    #[arg(long, env = "GENESIS_POD_CONCURRENCY", default_value_t = genesis_core::DEFAULT_POD_CONCURRENCY)]
    pub concurrency: usize,
    /// Ticks one tenant may run at once on this pod; 0 means the spec's
    /// MaxConcurrentInstancesPerTenant default (4), or half of
    /// GENESIS_POD_CONCURRENCY (rounded up) when that is less.
    #[arg(long, env = "GENESIS_POD_TENANT_CONCURRENCY", default_value_t = 0)]
    pub tenant_concurrency: usize,
    /// `/healthz`, `/readyz`, `/metrics` listen address.
    #[arg(long, env = "GENESIS_HTTP_ADDR", default_value = "0.0.0.0:9092")]
    pub http_addr: SocketAddr,
    /// Tick lease TTL in seconds; the lease is renewed every third of it.
    #[arg(long, env = "GENESIS_LEASE_TTL_SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=genesis_core::MAX_LEASE_TTL_SECS))]
    pub lease_ttl_secs: u64,
    /// How long in-flight ticks may run after SIGTERM before they are abandoned.
    #[arg(long, env = "GENESIS_SHUTDOWN_DEADLINE_SECS", default_value_t = 30)]
    pub shutdown_deadline_secs: u64,
    /// NAK delay when another session holds the lease, in milliseconds.
    #[arg(long, env = "GENESIS_LEASE_HELD_NAK_MS", default_value_t = 1_000)]
    pub lease_held_nak_ms: u64,
    /// NAK delay after a transient supervisor failure, in milliseconds.
    #[arg(long, env = "GENESIS_RETRY_NAK_MS", default_value_t = 5_000)]
    pub retry_nak_ms: u64,
    /// NAK delay for a message whose tenant already holds its share of this
    /// pod, in milliseconds, on its first delivery; it doubles with each
    /// redelivery up to 16 times this.
    #[arg(long, env = "GENESIS_TENANT_BUSY_NAK_MS", default_value_t = 250)]
    pub tenant_busy_nak_ms: u64,
    /// TCP connect timeout of LLM provider requests, in seconds (1..=86400).
    #[arg(
        long,
        env = LLM_CONNECT_TIMEOUT_ENV,
        default_value_t = genesis_llm::http::DEFAULT_CONNECT_TIMEOUT.as_secs(),
        value_parser = parse_llm_connect_timeout
    )]
    pub llm_connect_timeout_secs: u64,
    /// Whole-request timeout of LLM provider requests (connect, send, full
    /// answer), in seconds (1..=86400).
    #[arg(
        long,
        env = LLM_REQUEST_TIMEOUT_ENV,
        default_value_t = genesis_llm::http::DEFAULT_REQUEST_TIMEOUT.as_secs(),
        value_parser = parse_llm_request_timeout
    )]
    pub llm_request_timeout_secs: u64,
    /// The longest an LLM call waits for a provider's Retry-After when every
    /// credential of the chain is rate limited, in seconds (0..=3600; 0
    /// never waits). A longer hint ends the call as exhausted at once.
    #[arg(
        long,
        env = LLM_MAX_RETRY_AFTER_ENV,
        default_value_t = genesis_llm::DEFAULT_MAX_RETRY_WAIT.as_secs(),
        value_parser = parse_llm_max_retry_after
    )]
    pub llm_max_retry_after_secs: u64,
    /// OpenAI-compatible base URL override.
    #[arg(long, env = "OPENAI_BASE_URL")]
    #[serde(
        serialize_with = "genesis_telemetry::config_file::redacted_optional_url",
        skip_serializing_if = "Option::is_none"
    )]
    pub openai_base_url: Option<String>,
    /// Log format: `text` or `json`.
    #[arg(long, env = "GENESIS_LOG_FORMAT", default_value = "text")]
    pub log_format: String,
    /// Print the effective configuration (secrets redacted) and exit.
    #[arg(long)]
    #[serde(skip)]
    pub dump_config: bool,
}

impl std::fmt::Debug for PodConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.dump())
    }
}

impl PodConfig {
    /// A configuration with every default, for the given endpoints and token
    /// (tests and embedders).
    pub fn new(nats_url: &str, supervisor_url: &str, agent_token: &str) -> Self {
        PodConfig {
            nats_url: nats_url.into(),
            stream: "GENESIS_TICKS".into(),
            consumer: "agent-pods".into(),
            supervisor_url: supervisor_url.into(),
            agent_token: Some(agent_token.into()),
            concurrency: genesis_core::DEFAULT_POD_CONCURRENCY,
            tenant_concurrency: 0,
            http_addr: SocketAddr::from(([0, 0, 0, 0], 9092)),
            lease_ttl_secs: 60,
            shutdown_deadline_secs: 30,
            lease_held_nak_ms: 1_000,
            retry_nak_ms: 5_000,
            tenant_busy_nak_ms: 250,
            llm_connect_timeout_secs: genesis_llm::http::DEFAULT_CONNECT_TIMEOUT.as_secs(),
            llm_request_timeout_secs: genesis_llm::http::DEFAULT_REQUEST_TIMEOUT.as_secs(),
            llm_max_retry_after_secs: genesis_llm::DEFAULT_MAX_RETRY_WAIT.as_secs(),
            openai_base_url: None,
            log_format: "text".into(),
            dump_config: false,
        }
    }

    /// The lease TTL.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_secs)
    }

    /// The lease renewal interval: a third of the TTL, at least 100 ms.
    pub fn renew_interval(&self) -> Duration {
        (self.lease_ttl() / 3).max(Duration::from_millis(100))
    }

    /// The provider HTTP timeouts.
    pub fn llm_timeouts(&self) -> genesis_llm::HttpTimeouts {
        genesis_llm::HttpTimeouts {
            request: Duration::from_secs(self.llm_request_timeout_secs),
            connect: Duration::from_secs(self.llm_connect_timeout_secs),
        }
    }

    /// The longest an LLM call waits for a Retry-After.
    pub fn llm_max_retry_wait(&self) -> Duration {
        Duration::from_secs(self.llm_max_retry_after_secs)
    }

    /// Ticks one tenant may run at once on this pod.
    pub fn tenant_cap(&self) -> usize {
        if self.tenant_concurrency == 0 {
            crate::fairness::default_tenant_cap(self.concurrency)
        } else {
            self.tenant_concurrency
        }
    }

    /// Reject values `run` cannot work with, naming the setting.
    pub fn validate(&self) -> Result<(), crate::error::PodError> {
        use crate::error::PodError::Config;
        if !(1..=genesis_core::MAX_POD_CONCURRENCY).contains(&self.concurrency) {
            return Err(Config(format!(
                "GENESIS_POD_CONCURRENCY must be 1 to {}",
                genesis_core::MAX_POD_CONCURRENCY
            )));
        }
        if self.tenant_concurrency > self.concurrency {
            return Err(Config(format!(
                "GENESIS_POD_TENANT_CONCURRENCY ({}) must not exceed GENESIS_POD_CONCURRENCY ({})",
                self.tenant_concurrency, self.concurrency
            )));
        }
        genesis_core::check_lease_ttl_secs(self.lease_ttl_secs).map_err(Config)?;
        // A config built in code skips clap's value parsers: the same ranges.
        for (setting, value) in [
            (LLM_CONNECT_TIMEOUT, self.llm_connect_timeout_secs),
            (LLM_REQUEST_TIMEOUT, self.llm_request_timeout_secs),
            (LLM_MAX_RETRY_AFTER, self.llm_max_retry_after_secs),
        ] {
            setting.check(value).map_err(Config)?;
        }
        if self
            .agent_token
            .as_deref()
            .is_none_or(|t| t.trim().is_empty())
        {
            return Err(Config("GENESIS_AGENT_TOKEN is required".into()));
        }
        if self.stream.trim().is_empty() || self.consumer.trim().is_empty() {
            return Err(Config(
                "GENESIS_STREAM and GENESIS_CONSUMER must not be empty".into(),
            ));
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return Err(Config(format!(
                "GENESIS_LOG_FORMAT must be text or json, not {:?}",
                self.log_format
            )));
        }
        Ok(())
    }

    /// `--dump-config` output: TOML `key = value` lines under the keys a
    /// config file takes, secrets redacted (unset options are left out). The
    /// tenant share is printed as it applies, 0 resolved, which a file may
    /// give as well.
    pub fn dump(&self) -> String {
        genesis_telemetry::config_file::dump(&PodConfig {
            tenant_concurrency: self.tenant_cap(),
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> PodConfig {
        PodConfig::new("nats://127.0.0.1:4222", "http://127.0.0.1:50052", "tok")
    }

    #[test]
    fn the_tenant_share_defaults_to_the_specs_four_and_may_not_exceed_the_pod() {
        let mut c = config();
        assert_eq!(c.concurrency, 16, "the shipped default");
        assert!(c.validate().is_ok());
        assert_eq!(c.tenant_cap(), 4, "the spec's per-tenant default");
        assert!(c.dump().contains("tenant_concurrency = 4"), "{}", c.dump());
        c.concurrency = 5;
        assert_eq!(c.tenant_cap(), 3, "half rounded up");
        c.tenant_concurrency = 5;
        assert!(c.validate().is_ok());
        assert_eq!(c.tenant_cap(), 5);
        c.tenant_concurrency = 6;
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("GENESIS_POD_TENANT_CONCURRENCY (6)")
                && err.contains("GENESIS_POD_CONCURRENCY (5)"),
            "{err}"
        );
    }

    #[test]
    fn bad_settings_are_refused_by_name_and_the_token_never_dumped() {
        for bad in [0, 4097, usize::MAX] {
            let mut c = config();
            c.concurrency = bad;
            c.tenant_concurrency = 0;
            let err = c.validate().unwrap_err().to_string();
            assert!(
                err.contains("GENESIS_POD_CONCURRENCY must be 1 to 4096"),
                "{bad}: {err}"
            );
        }
        let mut c = config();
        c.concurrency = 4096;
        assert!(c.validate().is_ok());
        for bad in [0, 86_401, u64::MAX] {
            let mut c = config();
            c.lease_ttl_secs = bad;
            let err = c.validate().unwrap_err().to_string();
            assert!(
                err.contains("GENESIS_LEASE_TTL_SECS must be 1 to 86400"),
                "{bad}: {err}"
            );
        }
        let mut c = config();
        c.log_format = "yaml".into();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("GENESIS_LOG_FORMAT")
        );
        let mut c = PodConfig::new(
            "nats://pod:natspass@n:4222",
            "http://127.0.0.1:50052",
            "agent-token-value",
        );
        c.openai_base_url = Some("https://u:apipass@llm.example/v1".into());
        for printed in [c.dump(), format!("{c:?}")] {
            for secret in ["natspass", "agent-token-value", "apipass"] {
                assert!(!printed.contains(secret), "{secret} in {printed}");
            }
        }
        let t: toml::Table = c.dump().parse().expect("the dump is TOML");
        assert_eq!(t["agent_token"].as_str(), Some("***"));
        assert_eq!(t["nats_url"].as_str(), Some("nats://pod:***@n:4222"));
        assert!(!t.contains_key("dump_config"), "{t:?}");
        c.agent_token = None;
        c.openai_base_url = None;
        let t: toml::Table = c.dump().parse().expect("the dump is TOML");
        assert!(
            !t.contains_key("agent_token") && !t.contains_key("openai_base_url"),
            "unset options are left out: {t:?}"
        );
    }

    fn parse(args: &[&str]) -> Result<PodConfig, clap::Error> {
        use clap::Parser;
        PodConfig::try_parse_from(std::iter::once("genesis-agent-pod").chain(args.iter().copied()))
    }

    #[test]
    fn llm_timeouts_default_to_the_provider_defaults_and_are_read() {
        let c = parse(&[]).expect("defaults parse");
        assert_eq!(c.llm_timeouts(), genesis_llm::HttpTimeouts::default());
        assert_eq!(c.llm_max_retry_wait(), genesis_llm::DEFAULT_MAX_RETRY_WAIT);
        assert_eq!(
            config().llm_timeouts(),
            genesis_llm::HttpTimeouts::default()
        );

        let c = parse(&[
            "--llm-connect-timeout-secs",
            "3",
            "--llm-request-timeout-secs",
            " 45 ",
            "--llm-max-retry-after-secs",
            "0",
        ])
        .expect("valid values");
        assert_eq!(
            c.llm_timeouts(),
            genesis_llm::HttpTimeouts {
                request: Duration::from_secs(45),
                connect: Duration::from_secs(3),
            }
        );
        assert_eq!(c.llm_max_retry_wait(), Duration::ZERO);
        let dump = c.dump();
        for line in [
            "llm_connect_timeout_secs = 3",
            "llm_request_timeout_secs = 45",
            "llm_max_retry_after_secs = 0",
        ] {
            assert!(dump.contains(line), "{dump}");
        }
    }

    #[test]
    fn bad_llm_timeouts_are_refused_naming_the_variable() {
        for (flag, value, var) in [
            ("--llm-connect-timeout-secs", "0", LLM_CONNECT_TIMEOUT_ENV),
            ("--llm-connect-timeout-secs", "ten", LLM_CONNECT_TIMEOUT_ENV),
            ("--llm-request-timeout-secs", "0", LLM_REQUEST_TIMEOUT_ENV),
            ("--llm-request-timeout-secs", "-5", LLM_REQUEST_TIMEOUT_ENV),
            (
                "--llm-request-timeout-secs",
                "86401",
                LLM_REQUEST_TIMEOUT_ENV,
            ),
            ("--llm-max-retry-after-secs", "1.5", LLM_MAX_RETRY_AFTER_ENV),
            (
                "--llm-max-retry-after-secs",
                "3601",
                LLM_MAX_RETRY_AFTER_ENV,
            ),
        ] {
            let arg = format!("{flag}={value}");
            let err = match parse(&[arg.as_str()]) {
                Ok(_) => panic!("{flag} {value} was accepted"),
                Err(e) => e.to_string(),
            };
            assert!(err.contains(var), "{flag} {value}: {err}");
        }
        // The same parser reads the environment value, so its message is
        // what an operator sees for a bad env setting.
        assert_eq!(
            parse_llm_connect_timeout("abc"),
            Err("GENESIS_LLM_CONNECT_TIMEOUT_SECS must be a whole number of seconds in 1..=86400, not \"abc\"".into())
        );
    }

    #[test]
    fn a_config_built_in_code_gets_the_same_llm_checks() {
        let mut c = config();
        c.llm_connect_timeout_secs = 0;
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains(LLM_CONNECT_TIMEOUT_ENV), "{err}");
        let mut c = config();
        c.llm_request_timeout_secs = 0;
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains(LLM_REQUEST_TIMEOUT_ENV), "{err}");
        let mut c = config();
        c.llm_max_retry_after_secs = MAX_LLM_RETRY_AFTER_SECS + 1;
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains(LLM_MAX_RETRY_AFTER_ENV), "{err}");
        let mut c = config();
        c.llm_max_retry_after_secs = 0;
        assert!(c.validate().is_ok(), "0 means never wait");
    }
}
