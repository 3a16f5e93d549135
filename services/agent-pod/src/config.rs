//! The pod's configuration: the `--config` file, `GENESIS_*` env and flags (docs/internals.md
//! "Configuration"), parsed by clap in the bin and built directly by tests.
//!
//! This module must never print the agent token: `Debug` and
//! [`PodConfig::dump`] redact it.

use std::net::SocketAddr;
use std::time::Duration;

/// Env name of [`PodConfig::llm_connect_timeout_secs`].
/// The extra CA for the supervisor's certificate.
pub const SUPERVISOR_CA_ENV: &str = "GENESIS_SUPERVISOR_CA_FILE";
/// The pod's client certificate for mutual TLS with the supervisor.
pub const CLIENT_CERT_ENV: &str = "GENESIS_TLS_CLIENT_CERT_FILE";
/// The private key of the pod's client certificate.
pub const CLIENT_KEY_ENV: &str = "GENESIS_TLS_CLIENT_KEY_FILE";
pub const LLM_CONNECT_TIMEOUT_ENV: &str = "GENESIS_LLM_CONNECT_TIMEOUT_SECS";
/// Env name of [`PodConfig::llm_request_timeout_secs`].
pub const LLM_REQUEST_TIMEOUT_ENV: &str = "GENESIS_LLM_REQUEST_TIMEOUT_SECS";
/// Env name of [`PodConfig::llm_max_retry_after_secs`].
pub const LLM_MAX_RETRY_AFTER_ENV: &str = "GENESIS_LLM_MAX_RETRY_AFTER_SECS";
/// Env name of [`PodConfig::llm_max_retries`].
pub const LLM_MAX_RETRIES_ENV: &str = "GENESIS_LLM_MAX_RETRIES";
/// Env name of [`PodConfig::backend_url`].
pub const BACKEND_URLS_ENV: &str = "GENESIS_BACKEND_URLS";
/// Env name of [`PodConfig::anthropic_base_url`] (the official SDKs' name).
pub const ANTHROPIC_BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";
/// Env name of [`PodConfig::openai_base_url`] (the official SDKs' name).
pub const OPENAI_BASE_URL_ENV: &str = "OPENAI_BASE_URL";
/// The most same-credential retries of a transient provider failure.
pub const MAX_LLM_RETRIES: u32 = 10;
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

fn check_llm_max_retries(value: u32) -> Result<u32, String> {
    if value <= MAX_LLM_RETRIES {
        Ok(value)
    } else {
        Err(format!(
            "{LLM_MAX_RETRIES_ENV} must be a whole number in 0..={MAX_LLM_RETRIES}, not {value}"
        ))
    }
}

fn parse_llm_max_retries(raw: &str) -> Result<u32, String> {
    let value: u32 = raw.trim().parse().map_err(|_| {
        format!(
            "{LLM_MAX_RETRIES_ENV} must be a whole number in 0..={MAX_LLM_RETRIES}, not {raw:?}"
        )
    })?;
    check_llm_max_retries(value)
}

/// Check a provider base URL, naming its variable; the message never
/// repeats the URL (it may carry a password).
fn check_base_url(var: &str, raw: &str) -> Result<String, String> {
    genesis_llm::http::normalize_base_url(raw)
        .map(|_| raw.trim().to_string())
        .map_err(|e| match e {
            genesis_llm::LlmError::InvalidRequest { detail } => format!("{var}: {detail}"),
            other => format!("{var}: {other}"),
        })
}

fn parse_anthropic_base_url(raw: &str) -> Result<String, String> {
    check_base_url(ANTHROPIC_BASE_URL_ENV, raw)
}

fn parse_openai_base_url(raw: &str) -> Result<String, String> {
    check_base_url(OPENAI_BASE_URL_ENV, raw)
}

/// One `--backend-url NAME=URL`: couples whose backend label is `name` are
/// sent to `url`, whatever their provider.
#[derive(Clone, PartialEq, Eq)]
pub struct BackendUrl {
    /// The backend label, as presets write it (`api`, `gateway-eu`).
    pub name: String,
    /// The base URL, as `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` take it.
    pub url: String,
}

impl std::fmt::Debug for BackendUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={}",
            self.name,
            genesis_telemetry::config_file::redact_url(&self.url)
        )
    }
}

/// Parse `NAME=URL`: a label of letters, digits, `-`, `_` and `.`, and an
/// http(s) URL. The error names the flag and its variable and never the URL.
fn parse_backend_url(raw: &str) -> Result<BackendUrl, String> {
    let what = format!("--backend-url / {BACKEND_URLS_ENV}");
    let Some((name, url)) = raw.split_once('=') else {
        return Err(format!(
            "{what}: expected NAME=URL (e.g. gateway=https://llm.example/v1), got no `=`"
        ));
    };
    let name = name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "{what}: the backend name before `=` must be letters, digits, `-`, `_` or `.`, not {name:?}"
        ));
    }
    let url = check_base_url(&format!("{what} {name}"), url)?;
    Ok(BackendUrl {
        name: name.to_string(),
        url,
    })
}

/// `--dump-config` form of the backend URLs: one `NAME=URL,…` string (the
/// form the flag, its variable and a config file take), passwords masked.
fn serialize_backend_urls<S: serde::Serializer>(
    urls: &[BackendUrl],
    s: S,
) -> Result<S::Ok, S::Error> {
    let joined: Vec<String> = urls.iter().map(|b| format!("{b:?}")).collect();
    s.serialize_str(&joined.join(","))
}

/// Everything `run` needs.
#[derive(Clone, clap::Parser, serde::Serialize)]
#[command(
    name = crate::SERVICE_NAME,
    version,
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
    /// NATS credentials and TLS of the tick consumer
    /// (`GENESIS_NATS_CREDS_FILE`, `GENESIS_NATS_USER`/`GENESIS_NATS_PASSWORD`,
    /// `GENESIS_NATS_CA_FILE`, `GENESIS_NATS_TLS_REQUIRED`).
    #[command(flatten)]
    #[serde(flatten)]
    pub nats: genesis_net::NatsArgs,
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
    /// Extra CA (PEM) trusted for the supervisor's certificate when
    /// GENESIS_SUPERVISOR_URL is `https://`, beside the system roots.
    #[arg(long, env = SUPERVISOR_CA_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supervisor_ca_file: Option<std::path::PathBuf>,
    /// PEM client certificate this pod presents to an `https://`
    /// supervisor that verifies clients (GENESIS_TLS_CLIENT_CA_FILE there);
    /// with GENESIS_TLS_CLIENT_KEY_FILE.
    #[arg(long, env = CLIENT_CERT_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_client_cert_file: Option<std::path::PathBuf>,
    /// PEM private key of GENESIS_TLS_CLIENT_CERT_FILE.
    #[arg(long, env = CLIENT_KEY_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_client_key_file: Option<std::path::PathBuf>,
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
    /// The most one LLM call spends, in total, waiting on providers' wait
    /// hints (Retry-After, retry-after-ms, x-ratelimit-reset-*) of a 429, a
    /// 503 or a 529 before retrying the same credential once, when no other
    /// credential of that provider is free; in seconds (0..=3600; 0 never
    /// waits). A hint that does not fit moves the chain on at once.
    #[arg(
        long,
        env = LLM_MAX_RETRY_AFTER_ENV,
        default_value_t = genesis_llm::DEFAULT_MAX_RETRY_WAIT.as_secs(),
        value_parser = parse_llm_max_retry_after
    )]
    pub llm_max_retry_after_secs: u64,
    /// Retries of the same credential after a transient provider failure
    /// (a 5xx without Retry-After, a timeout, a failed or reset
    /// connection), each after a random delay of up to 250 ms doubling per
    /// retry (at most 8 s), before the chain moves to the next credential or
    /// provider (0..=10; 0 moves on at once).
    #[arg(
        long,
        env = LLM_MAX_RETRIES_ENV,
        default_value_t = genesis_llm::fallback::DEFAULT_MAX_RETRIES,
        value_parser = parse_llm_max_retries
    )]
    pub llm_max_retries: u32,
    /// Anthropic base URL override, as the official SDKs read it: without
    /// `/v1` (e.g. https://api.anthropic.com; a trailing `/v1` is tolerated).
    /// Must be http(s).
    #[arg(long, env = ANTHROPIC_BASE_URL_ENV, value_parser = parse_anthropic_base_url)]
    #[serde(
        serialize_with = "genesis_telemetry::config_file::redacted_optional_url",
        skip_serializing_if = "Option::is_none"
    )]
    pub anthropic_base_url: Option<String>,
    /// OpenAI-compatible base URL override, with the SDKs' `/v1`
    /// (https://api.openai.com/v1) or without it: requests go to
    /// `…/v1/chat/completions` either way. Must be http(s).
    #[arg(long, env = OPENAI_BASE_URL_ENV, value_parser = parse_openai_base_url)]
    #[serde(
        serialize_with = "genesis_telemetry::config_file::redacted_optional_url",
        skip_serializing_if = "Option::is_none"
    )]
    pub openai_base_url: Option<String>,
    /// Base URL of a preset backend label, `NAME=URL` (e.g.
    /// `gateway-eu=https://llm-eu.example/v1`): couples whose backend is
    /// NAME go to URL whatever their provider, ahead of the provider's base
    /// URL. Repeat the flag, or give `name1=url1,name2=url2` in the
    /// variable. Each URL must be http(s).
    #[arg(
        long = "backend-url",
        env = BACKEND_URLS_ENV,
        value_name = "NAME=URL",
        value_delimiter = ',',
        value_parser = parse_backend_url
    )]
    #[serde(
        serialize_with = "serialize_backend_urls",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub backend_url: Vec<BackendUrl>,
    /// Directory of provider keys, one file per key named as presets name
    /// it (a Kubernetes Secret mounted as a volume), each optionally bound
    /// to tenants by a `<NAME>.tenants` file beside it. With the
    /// `GENESIS_LLM_KEY_<NAME>` variables and the well-known
    /// `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`, the only credentials a
    /// preset can name (genesis_core::llm_keys).
    #[arg(long, env = genesis_core::llm_keys::KEY_DIR_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_key_dir: Option<std::path::PathBuf>,
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
            nats: genesis_net::NatsArgs::default(),
            stream: "GENESIS_TICKS".into(),
            consumer: "agent-pods".into(),
            supervisor_url: supervisor_url.into(),
            supervisor_ca_file: None,
            tls_client_cert_file: None,
            tls_client_key_file: None,
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
            llm_max_retries: genesis_llm::fallback::DEFAULT_MAX_RETRIES,
            anthropic_base_url: None,
            openai_base_url: None,
            backend_url: Vec::new(),
            llm_key_dir: None,
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

    /// The most an LLM call waits on providers' wait hints.
    pub fn llm_max_retry_wait(&self) -> Duration {
        Duration::from_secs(self.llm_max_retry_after_secs)
    }

    /// How an LLM call retries a transient provider failure.
    pub fn llm_retry_policy(&self) -> genesis_llm::fallback::RetryPolicy {
        genesis_llm::fallback::RetryPolicy {
            max_retries: self.llm_max_retries,
            ..Default::default()
        }
    }

    /// The LLM provider factory these settings describe: the provider base
    /// URLs and the per-backend ones, checked (a URL that is not http(s) is
    /// refused, naming its setting).
    pub fn llm_provider_factory(
        &self,
    ) -> Result<genesis_llm::HttpProviderFactory, crate::error::PodError> {
        use crate::error::PodError::Config;
        let mut factory = genesis_llm::HttpProviderFactory::new(self.llm_timeouts())
            .map_err(|e| Config(format!("LLM HTTP client: {e}")))?;
        if let Some(url) = &self.anthropic_base_url {
            factory = factory.with_anthropic_base_url(url.clone());
        }
        if let Some(url) = &self.openai_base_url {
            factory = factory.with_openai_base_url(url.clone());
        }
        for backend in &self.backend_url {
            factory = factory.with_backend_base_url(backend.name.clone(), backend.url.clone());
        }
        factory.validate().map_err(|e| match e {
            genesis_llm::LlmError::InvalidRequest { detail } => Config(detail),
            other => Config(other.to_string()),
        })?;
        Ok(factory)
    }

    /// Ticks one tenant may run at once on this pod.
    pub fn tenant_cap(&self) -> usize {
        if self.tenant_concurrency == 0 {
            crate::fairness::default_tenant_cap(self.concurrency)
        } else {
            self.tenant_concurrency
        }
    }

    /// How this pod reaches an `https://` supervisor: the system roots
    /// plus GENESIS_SUPERVISOR_CA_FILE, and its client certificate. A key
    /// without its certificate (or the reverse) is an error naming both.
    pub fn supervisor_tls(&self) -> Result<genesis_net::ClientTls, genesis_net::TlsError> {
        use genesis_net::SettingPath;
        Ok(genesis_net::ClientTls {
            ca: self
                .supervisor_ca_file
                .as_ref()
                .map(|p| SettingPath::new(SUPERVISOR_CA_ENV, p)),
            identity: genesis_net::ClientIdentity::pair(
                self.tls_client_cert_file
                    .as_ref()
                    .map(|p| SettingPath::new(CLIENT_CERT_ENV, p)),
                self.tls_client_key_file
                    .as_ref()
                    .map(|p| SettingPath::new(CLIENT_KEY_ENV, p)),
            )?,
        })
    }

    /// Reject values `run` cannot work with, naming the setting.
    pub fn validate(&self) -> Result<(), crate::error::PodError> {
        use crate::error::PodError::Config;
        let tls = self.supervisor_tls().map_err(|e| Config(e.to_string()))?;
        if !self.supervisor_url.starts_with("https://") && tls != genesis_net::ClientTls::default()
        {
            return Err(Config(format!(
                "{SUPERVISOR_CA_ENV}, {CLIENT_CERT_ENV} and {CLIENT_KEY_ENV} apply to an \
                 https:// GENESIS_SUPERVISOR_URL only; it is {}",
                genesis_telemetry::config_file::redact_url(&self.supervisor_url)
            )));
        }
        self.nats
            .validate(&self.nats_url)
            .map_err(|e| Config(e.to_string()))?;
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
        check_llm_max_retries(self.llm_max_retries).map_err(Config)?;
        if let Some(url) = &self.anthropic_base_url {
            parse_anthropic_base_url(url).map_err(Config)?;
        }
        if let Some(url) = &self.openai_base_url {
            parse_openai_base_url(url).map_err(Config)?;
        }
        let mut seen = std::collections::HashSet::new();
        for backend in &self.backend_url {
            parse_backend_url(&format!("{}={}", backend.name, backend.url)).map_err(Config)?;
            if !seen.insert(backend.name.as_str()) {
                return Err(Config(format!(
                    "--backend-url / {BACKEND_URLS_ENV}: backend {:?} is given twice",
                    backend.name
                )));
            }
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

    fn parse_err(args: &[&str]) -> String {
        match parse(args) {
            Ok(_) => panic!("{args:?} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn provider_base_urls_are_read_as_the_sdks_write_them_and_checked() {
        let c = parse(&[
            "--agent-token",
            "tok",
            "--anthropic-base-url",
            "https://llm-gw.example",
            "--openai-base-url",
            "https://llm-gw.example/openai/v1",
        ])
        .expect("valid URLs");
        assert_eq!(
            c.anthropic_base_url.as_deref(),
            Some("https://llm-gw.example")
        );
        assert_eq!(
            c.openai_base_url.as_deref(),
            Some("https://llm-gw.example/openai/v1")
        );
        assert!(c.validate().is_ok());
        c.llm_provider_factory().expect("the factory builds");

        for (flag, var) in [
            ("--anthropic-base-url", ANTHROPIC_BASE_URL_ENV),
            ("--openai-base-url", OPENAI_BASE_URL_ENV),
        ] {
            for bad in [
                "ftp://llm.example",
                "llm.example/v1",
                "unix:///run/llm.sock",
            ] {
                let err = parse_err(&[&format!("{flag}={bad}")]);
                assert!(err.contains(var), "{flag} {bad}: {err}");
            }
            let err = parse_err(&[&format!("{flag}=ftp://llm.example")]);
            assert!(err.contains("http:// or https://"), "{err}");
        }
        // clap quotes what was typed; the reason itself never repeats a URL.
        let reason = parse_openai_base_url("ftp://u:hunter2@llm.example").unwrap_err();
        assert!(!reason.contains("hunter2"), "{reason}");
        // The same parser reads the environment value.
        assert_eq!(
            parse_anthropic_base_url("gopher://x.example"),
            Err("ANTHROPIC_BASE_URL: base URL must be http:// or https://, not gopher://".into())
        );
    }

    #[test]
    fn a_config_built_in_code_gets_the_same_url_checks() {
        let mut c = config();
        c.anthropic_base_url = Some("ftp://llm.example".into());
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains(ANTHROPIC_BASE_URL_ENV), "{err}");
        let err = match c.llm_provider_factory() {
            Ok(_) => panic!("a bad URL built a factory"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(ANTHROPIC_BASE_URL_ENV), "{err}");

        let mut c = config();
        c.backend_url = vec![BackendUrl {
            name: "gw".into(),
            url: "file:///etc/passwd".into(),
        }];
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("--backend-url"), "{err}");
        assert!(c.llm_provider_factory().is_err());

        let mut c = config();
        c.backend_url = vec![
            BackendUrl {
                name: "gw".into(),
                url: "https://a.example".into(),
            },
            BackendUrl {
                name: "gw".into(),
                url: "https://b.example".into(),
            },
        ];
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("\"gw\" is given twice"), "{err}");
    }

    #[test]
    fn backend_urls_are_read_repeated_and_comma_separated() {
        let c = parse(&[
            "--agent-token",
            "tok",
            "--backend-url",
            "gateway=https://llm-gw.example/v1",
            "--backend-url",
            "eu=https://u:hunter2@llm-eu.example,local.dev=http://127.0.0.1:8080",
        ])
        .expect("valid routes");
        let routes: Vec<(&str, &str)> = c
            .backend_url
            .iter()
            .map(|b| (b.name.as_str(), b.url.as_str()))
            .collect();
        assert_eq!(
            routes,
            [
                ("gateway", "https://llm-gw.example/v1"),
                ("eu", "https://u:hunter2@llm-eu.example"),
                ("local.dev", "http://127.0.0.1:8080"),
            ]
        );
        assert!(c.validate().is_ok());
        c.llm_provider_factory().expect("the factory builds");
        let dump = c.dump();
        assert!(
            dump.contains(
                "backend_url = \"gateway=https://llm-gw.example/v1,eu=https://u:***@llm-eu.example,local.dev=http://127.0.0.1:8080\""
            ),
            "{dump}"
        );
        assert!(!dump.contains("hunter2"), "{dump}");
        assert!(!format!("{c:?}").contains("hunter2"));
        assert!(
            !config().dump().contains("backend_url"),
            "no route, no line"
        );
    }

    #[test]
    fn backend_urls_are_read_from_a_config_file_as_the_variable_writes_them() {
        let path = std::env::temp_dir().join(format!(
            "genesis-pod-backend-urls-{}.toml",
            std::process::id()
        ));
        std::fs::write(
            &path,
            "GENESIS_BACKEND_URLS = \"gateway=https://llm-gw.example/v1,eu=https://llm-eu.example\"\n",
        )
        .expect("write the file");
        let args: Vec<std::ffi::OsString> = ["genesis-agent-pod", "--config"]
            .into_iter()
            .map(Into::into)
            .chain([path.clone().into_os_string()])
            .collect();
        let parsed = genesis_telemetry::config_file::try_parse_from::<PodConfig>(&args, None);
        let _ = std::fs::remove_file(&path);
        let c = match parsed {
            Ok(c) => c,
            Err(e) => panic!("the file is refused: {e}"),
        };
        let names: Vec<&str> = c.backend_url.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["gateway", "eu"]);
    }

    #[test]
    fn bad_backend_urls_are_refused_naming_the_flag() {
        for (value, says) in [
            ("gateway", "expected NAME=URL"),
            ("=https://llm.example", "backend name"),
            ("gate way=https://llm.example", "backend name"),
            ("gateway=ftp://llm.example", "http:// or https://"),
            ("gateway=", "empty"),
            ("gateway=https://llm.example,broken", "expected NAME=URL"),
        ] {
            let err = parse_err(&[&format!("--backend-url={value}")]);
            assert!(
                err.contains("--backend-url / GENESIS_BACKEND_URLS") && err.contains(says),
                "{value}: {err}"
            );
        }
        let reason = parse_backend_url("gw=ftp://u:hunter2@llm.example").unwrap_err();
        assert!(reason.contains("http:// or https://"), "{reason}");
        assert!(!reason.contains("hunter2"), "{reason}");
    }

    #[test]
    fn llm_retries_default_to_two_and_are_bounded() {
        let c = parse(&[]).expect("defaults parse");
        assert_eq!(c.llm_max_retries, 2);
        assert_eq!(
            c.llm_retry_policy(),
            genesis_llm::fallback::RetryPolicy::default()
        );
        let c = parse(&["--llm-max-retries", "0"]).expect("0 moves on at once");
        assert_eq!(c.llm_retry_policy().max_retries, 0);
        assert!(c.dump().contains("llm_max_retries = 0"), "{}", c.dump());
        for bad in ["11", "-1", "two", "1.5"] {
            let err = parse_err(&[&format!("--llm-max-retries={bad}")]);
            assert!(err.contains(LLM_MAX_RETRIES_ENV), "{bad}: {err}");
        }
        let mut c = config();
        c.llm_max_retries = MAX_LLM_RETRIES + 1;
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains(LLM_MAX_RETRIES_ENV), "{err}");
    }
}
