//! The control service's configuration: defaults, `GENESIS_*` env and flags
//! (docs/internals.md "Configuration"), parsed by clap in the bin and built
//! directly by tests with [`ControlConfig::new`].
//!
//! This module must never print the database password: `Debug` and
//! [`ControlConfig::dump`] redact it.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::ControlError;

/// The longest bootstrap re-scan period, in seconds (a day): the re-scan only
/// catches tenants whose NOTIFY was missed, so a longer one is a typo, and the
/// loop's timer must stay inside `Instant`'s range.
pub const MAX_BOOTSTRAP_RESCAN_SECS: u64 = 86_400;

/// Everything [`crate::run`] needs.
#[derive(Clone, clap::Args, serde::Serialize)]
pub struct ControlConfig {
    /// PostgreSQL URL; TLS as libpq reads it (`sslmode`, `sslrootcert`).
    #[arg(
        long,
        env = "GENESIS_DATABASE_URL",
        default_value = "postgres://127.0.0.1:5432/genesis",
        hide_env_values = true
    )]
    #[serde(serialize_with = "genesis_telemetry::config_file::redacted_url")]
    pub database_url: String,
    /// NATS URL.
    #[arg(
        long,
        env = "GENESIS_NATS_URL",
        default_value = "nats://127.0.0.1:4222"
    )]
    #[serde(serialize_with = "genesis_telemetry::config_file::redacted_url")]
    pub nats_url: String,
    /// NATS credentials and TLS (`GENESIS_NATS_CREDS_FILE`,
    /// `GENESIS_NATS_USER`/`GENESIS_NATS_PASSWORD`, `GENESIS_NATS_CA_FILE`,
    /// `GENESIS_NATS_TLS_REQUIRED`), for the publisher and the registry.
    #[command(flatten)]
    #[serde(flatten)]
    pub nats: genesis_net::NatsArgs,
    /// TLS of the gRPC listener and the dashboard (`GENESIS_TLS_CERT_FILE`,
    /// `GENESIS_TLS_KEY_FILE`, `GENESIS_TLS_RELOAD_SECS`).
    #[command(flatten)]
    #[serde(flatten)]
    pub tls: genesis_net::ServerTlsArgs,
    /// JetStream stream the ticks are published to (created or updated here).
    #[arg(long, env = "GENESIS_STREAM", default_value = "GENESIS_TICKS")]
    pub stream: String,
    /// Subject prefix: each event goes to `<prefix>.<tenant_id>`.
    #[arg(long, env = "GENESIS_SUBJECT_PREFIX", default_value = "genesis.ticks")]
    pub subject_prefix: String,
    /// Durable pull consumer the agent pods bind to (created or updated here).
    #[arg(long, env = "GENESIS_CONSUMER", default_value = "agent-pods")]
    pub consumer: String,
    /// Dedicated agent-pod pools, `name=tenant,tenant;name=tenant`: a
    /// pool's tenants' ticks go to `<prefix>.<name>.<tenant>`, taken by the
    /// durable consumer `<consumer>-<name>` (created or updated here), and
    /// the shared consumer then filters `<prefix>.*` so it never sees them.
    /// Empty: one shared pool takes every tick.
    #[arg(long, env = "GENESIS_POD_POOLS", default_value = "", value_parser = genesis_core::PodPools::parse_arg)]
    #[serde(
        serialize_with = "pools_text",
        skip_serializing_if = "genesis_core::PodPools::is_empty"
    )]
    pub pod_pools: genesis_core::PodPools,
    /// gRPC listen address.
    #[arg(long, env = "GENESIS_GRPC_ADDR", default_value = "0.0.0.0:50051")]
    pub grpc_addr: SocketAddr,
    /// `/healthz`, `/readyz`, `/metrics` listen address.
    #[arg(long, env = "GENESIS_HTTP_ADDR", default_value = "0.0.0.0:9090")]
    pub http_addr: SocketAddr,
    /// Tick lease TTL in seconds; the consumer's ack_wait is twice this.
    #[arg(long, env = "GENESIS_LEASE_TTL_SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=genesis_core::MAX_LEASE_TTL_SECS))]
    pub lease_ttl_secs: u64,
    /// Claims of one event before it is dead-lettered with an attention request (the retry bound; the JetStream consumer has no delivery cap).
    #[arg(long, env = "GENESIS_MAX_ATTEMPTS", default_value_t = 5)]
    pub max_attempts: u32,
    /// Log format: `text` or `json`.
    #[arg(long, env = "GENESIS_LOG_FORMAT", default_value = "text")]
    pub log_format: String,
    /// Deploy level of the standing-agents gate (spec 3.2). Off: no
    /// bootstrap, and Start refuses with FAILED_PRECONDITION.
    #[arg(long, env = "GENESIS_STANDING_AGENTS_ENABLED", default_value_t = true, action = clap::ArgAction::Set)]
    pub standing_agents_enabled: bool,
    /// AutoBootstrap: ensure one SOA per enabled tenant.
    #[arg(long, env = "GENESIS_AUTO_BOOTSTRAP", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_bootstrap: bool,
    /// StandingAgentsIdleByDefault: bootstrap the SOA Active with its opener
    /// (true) or Paused awaiting an operator start (false).
    #[arg(long, env = "GENESIS_STANDING_AGENTS_IDLE_BY_DEFAULT", default_value_t = true, action = clap::ArgAction::Set)]
    pub standing_agents_idle_by_default: bool,
    /// Provider whose code-default couples the default seeder writes into a
    /// new tenant's `Default` preset (bound to Agent:Default and
    /// PromptRedactor:Default): `anthropic`, `openai` or `scripted` (the
    /// offline provider: demo and tests). Required to serve, with no
    /// default, so the offline provider only ever runs where an operator
    /// chose it (`migrate` and `token create` need none). Set it to the
    /// supervisor's value.
    #[arg(long, env = "GENESIS_DEFAULT_PROVIDER", value_parser = genesis_core::presets::DefaultProvider::parse_arg)]
    pub default_provider: Option<genesis_core::presets::DefaultProvider>,
    /// The agent pods' directory of provider keys (the same Secret, mounted
    /// here too): UpsertPreset and AttachPreset refuse a credential name
    /// that is not one of its files, a `GENESIS_LLM_KEY_<NAME>` variable or
    /// a well-known name, or that its `<NAME>.tenants` binding keeps from
    /// the tenant. Control reads the file names and the bindings only,
    /// never a key.
    #[arg(long, env = genesis_core::llm_keys::KEY_DIR_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_key_dir: Option<std::path::PathBuf>,
    /// Events per outbox batch.
    #[arg(long, env = "GENESIS_OUTBOX_BATCH", default_value_t = 256)]
    pub outbox_batch: i64,
    /// Outbox safety poll, in milliseconds (a missed NOTIFY is found by then).
    #[arg(long, env = "GENESIS_OUTBOX_POLL_MS", default_value_t = 5_000)]
    pub outbox_poll_ms: u64,
    /// How long to wait for the JetStream acks of one batch, in milliseconds.
    #[arg(long, env = "GENESIS_PUBLISH_ACK_TIMEOUT_MS", default_value_t = 5_000)]
    pub publish_ack_timeout_ms: u64,
    /// Back-pressure: stop publishing while the agent pods' consumer holds
    /// this many messages, undelivered or unacknowledged (due events wait in
    /// PostgreSQL, the durable queue, instead of piling up in the stream); 0
    /// is unbounded.
    #[arg(long, env = "GENESIS_OUTBOX_MAX_PENDING", default_value_t = 100_000)]
    pub outbox_max_pending: u64,
    /// Periodic re-scan of tenants for the bootstrap, in seconds (1 to
    /// [`MAX_BOOTSTRAP_RESCAN_SECS`]).
    #[arg(long, env = "GENESIS_BOOTSTRAP_RESCAN_SECS", default_value_t = 30)]
    pub bootstrap_rescan_secs: u64,
    /// How long in-flight RPCs may drain after a shutdown signal, in seconds.
    #[arg(long, env = "GENESIS_SHUTDOWN_DEADLINE_SECS", default_value_t = 10)]
    pub shutdown_deadline_secs: u64,
    /// NATS KV bucket of the coordination registry.
    #[arg(
        long,
        env = "GENESIS_REGISTRY_BUCKET",
        default_value = genesis_lanes::registry::DEFAULT_BUCKET
    )]
    pub registry_bucket: String,
    /// Kubernetes namespace coder Jobs run in.
    #[arg(long, env = "GENESIS_CODER_NAMESPACE", default_value = "default")]
    pub coder_namespace: String,
    /// Image coder Jobs run; empty refuses SpawnCoder with FAILED_PRECONDITION.
    #[arg(long, env = "GENESIS_CODER_IMAGE", default_value = "")]
    pub coder_image: String,
    /// Control's gRPC endpoint as a coder's pod reaches it, handed to every
    /// coder Job as `GENESIS_CONTROL_URL`; unset refuses SpawnCoder with
    /// FAILED_PRECONDITION (a coder that cannot report is not started).
    #[arg(long, env = "GENESIS_CODER_CONTROL_URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coder_control_url: Option<String>,
    /// Days an episode journal is kept (1 to 3650): past it, the retention
    /// loop prunes it; the ledger turn it explains is kept forever.
    #[arg(long, env = "GENESIS_JOURNAL_RETENTION_DAYS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3650))]
    pub journal_retention_days: u64,
    /// Seconds between two passes of the journal retention loop (60 to
    /// 86400).
    #[arg(long, env = "GENESIS_JOURNAL_PRUNE_EVERY_SECS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(60..=86_400))]
    pub journal_prune_every_secs: u64,
    /// The command a coder Job's container runs (whitespace-separated
    /// words); the reference coder `genesis-coder` by default, which the
    /// coder image must have on its `PATH` (the project image ships it, to
    /// copy into a toolchain image). Empty: the image's own entrypoint.
    #[arg(long, env = "GENESIS_CODER_COMMAND", default_value = genesis_lanes::coders::DEFAULT_CODER_COMMAND)]
    pub coder_command: String,
    /// The Secret holding the platform's provider keys (the agent pods'
    /// key directory). A coder Job mounts from it only the keys its task's
    /// chain names that are bound to the task's tenant alone; a key shared
    /// by every tenant or by several is never handed to a coder, whose build
    /// tools run the tenant's code. Unset: no key is mounted.
    #[arg(long, env = "GENESIS_CODER_KEY_SECRET")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coder_key_secret: Option<String>,
    /// The Anthropic base URL handed to coder Jobs (`ANTHROPIC_BASE_URL`),
    /// as the agent pods are given theirs; unset: the provider's own.
    #[arg(long, env = "GENESIS_CODER_ANTHROPIC_BASE_URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coder_anthropic_base_url: Option<String>,
    /// The OpenAI-compatible base URL handed to coder Jobs
    /// (`OPENAI_BASE_URL`); unset: the provider's own.
    #[arg(long, env = "GENESIS_CODER_OPENAI_BASE_URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coder_openai_base_url: Option<String>,
    /// Lifetime of a coder token in seconds (60 to 604800); the token is
    /// revoked sooner when its task settles or its coder is stopped.
    #[arg(long, env = "GENESIS_CODER_TOKEN_TTL_SECS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(60..=604_800))]
    pub coder_token_ttl_secs: u64,
    /// Dollars per million prompt tokens charged for a coder's attempt
    /// whose model has no `llm_pricing` row (cache reads and writes too).
    /// Never zero: an unpriced model must still draw down the weekly
    /// credit. The supervisor reads the same setting for agents' calls.
    #[arg(long, env = "GENESIS_UNPRICED_INPUT_USD_PER_MTOK", default_value_t = 15.0, value_parser = genesis_core::pricing::parse_fallback_price, allow_negative_numbers = true)]
    pub unpriced_input_usd_per_mtok: f64,
    /// Dollars per million completion tokens for an unpriced model (see
    /// `GENESIS_UNPRICED_INPUT_USD_PER_MTOK`).
    #[arg(long, env = "GENESIS_UNPRICED_OUTPUT_USD_PER_MTOK", default_value_t = 75.0, value_parser = genesis_core::pricing::parse_fallback_price, allow_negative_numbers = true)]
    pub unpriced_output_usd_per_mtok: f64,
    /// A kubeconfig naming the cluster coder Jobs run in; unset: control's
    /// in-cluster service account, else `KUBECONFIG` / `~/.kube/config`.
    #[arg(long, env = "GENESIS_CODER_KUBECONFIG")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coder_kubeconfig: Option<std::path::PathBuf>,
    /// Bytes of one coder artifact's content (AttachArtifact refuses more
    /// with INVALID_ARGUMENT).
    #[arg(long, env = "GENESIS_CODER_ARTIFACT_MAX_BYTES", default_value_t = 1_048_576,
          value_parser = clap::value_parser!(u64).range(1..=3_145_728))]
    pub coder_artifact_max_bytes: u64,
    /// Artifacts one coding task may hold.
    #[arg(long, env = "GENESIS_CODER_ARTIFACTS_PER_TASK", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub coder_artifacts_per_task: u32,
    /// Bytes of all of one coding task's artifacts together.
    #[arg(long, env = "GENESIS_CODER_ARTIFACT_TOTAL_BYTES", default_value_t = 16_777_216,
          value_parser = clap::value_parser!(u64).range(1..=1_073_741_824))]
    pub coder_artifact_total_bytes: u64,
    /// Base URL of the Windows pool; unset answers every Windows verb POOL_UNAVAILABLE.
    #[arg(long, env = "GENESIS_WINDOWS_POOL_URL")]
    #[serde(
        serialize_with = "genesis_telemetry::config_file::redacted_optional_url",
        skip_serializing_if = "Option::is_none"
    )]
    pub windows_pool_url: Option<String>,
    /// Control's credential for the Windows pool (secret).
    #[arg(long, env = "GENESIS_WINDOWS_POOL_TOKEN", hide_env_values = true)]
    #[serde(
        serialize_with = "genesis_telemetry::config_file::redacted_secret",
        skip_serializing_if = "Option::is_none"
    )]
    pub windows_pool_token: Option<String>,
    /// Operator dashboard listen address, or `off` to serve no dashboard.
    #[arg(long, env = "GENESIS_DASHBOARD_ADDR", default_value = "0.0.0.0:8080")]
    pub dashboard_addr: String,
    /// Lifetime of a dashboard sign-in session, in hours (never beyond the
    /// operator token's own expiry).
    #[arg(long, env = "GENESIS_DASHBOARD_SESSION_HOURS", default_value_t = 12)]
    pub dashboard_session_hours: u64,
    /// Mark the session cookie `Secure` though control serves the dashboard
    /// plaintext (set it behind an ingress that terminates TLS). With
    /// `GENESIS_TLS_CERT_FILE` the cookie is `Secure` whatever this says.
    #[arg(long, env = "GENESIS_DASHBOARD_SECURE_COOKIE", default_value_t = false, action = clap::ArgAction::Set)]
    pub dashboard_secure_cookie: bool,
    /// Admin calls per second per tenant (a platform token is its own key);
    /// 0 switches the limit off.
    #[arg(long, env = "GENESIS_ADMIN_RATE_PER_SEC", default_value_t = 100.0)]
    pub admin_rate_per_sec: f64,
    /// Admin calls a tenant may make at once before the rate applies.
    #[arg(long, env = "GENESIS_ADMIN_RATE_BURST", default_value_t = 200.0)]
    pub admin_rate_burst: f64,
    /// Enqueueing calls (messages, answers, starts, resets, signals) per
    /// second per tenant; 0 switches the limit off.
    #[arg(long, env = "GENESIS_ENQUEUE_RATE_PER_SEC", default_value_t = 20.0)]
    pub enqueue_rate_per_sec: f64,
    /// Enqueueing calls a tenant may make at once before the rate applies.
    #[arg(long, env = "GENESIS_ENQUEUE_RATE_BURST", default_value_t = 100.0)]
    pub enqueue_rate_burst: f64,
    /// Failed authentications (gRPC bearer tokens, dashboard sign-ins) a
    /// peer address (an IPv6 /64) may make per minute, all at once at most;
    /// past it the peer's requests are refused before any token lookup
    /// until its bucket refills. 0 switches the limit off (do so when every
    /// client comes through one proxy address).
    #[arg(long, env = "GENESIS_AUTH_FAILURES_PER_MINUTE", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub auth_failures_per_minute: u32,
    /// Most peer addresses whose failed authentications are remembered;
    /// past it refilled peers, then the least recently failed, are dropped.
    #[arg(long, env = "GENESIS_AUTH_FAILURE_PEERS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub auth_failure_peers: u32,
    /// Seconds between checks of an open live stream's credential
    /// (`WatchTurns`' token, the dashboard stream's session); a revoked or
    /// expired token or a signed-out session ends the stream by then (an
    /// expiry is checked at its instant).
    #[arg(long, env = "GENESIS_STREAM_RECHECK_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub stream_recheck_secs: u64,
    /// Open live streams one token may hold (`WatchTurns` and dashboard
    /// streams together); 0 is no cap.
    #[arg(long, env = "GENESIS_STREAMS_PER_TOKEN", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub streams_per_token: u32,
    /// Open live streams on one tenant, whoever holds them; 0 is no cap.
    #[arg(long, env = "GENESIS_STREAMS_PER_TENANT", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub streams_per_tenant: u32,
    /// Serve though the database login is a superuser, a BYPASSRLS role or
    /// the schema owner (`genesis_store::roles`): local development against
    /// a trust-auth server only. Off, `serve` refuses such a login, because
    /// row-level security would not bind it.
    #[arg(long, env = "GENESIS_ALLOW_OWNER_LOGIN", default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_owner_login: bool,
}

/// `GENESIS_POD_POOLS` as it is written.
fn pools_text<S: serde::Serializer>(
    pools: &genesis_core::PodPools,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(pools)
}

impl std::fmt::Debug for ControlConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.dump())
    }
}

impl ControlConfig {
    /// Every default, for the given database and NATS (tests and embedders).
    pub fn new(database_url: &str, nats_url: &str) -> Self {
        ControlConfig {
            database_url: database_url.into(),
            nats_url: nats_url.into(),
            nats: genesis_net::NatsArgs::default(),
            tls: genesis_net::ServerTlsArgs::plaintext(),
            stream: "GENESIS_TICKS".into(),
            subject_prefix: "genesis.ticks".into(),
            consumer: "agent-pods".into(),
            pod_pools: genesis_core::PodPools::none(),
            grpc_addr: SocketAddr::from(([0, 0, 0, 0], 50051)),
            http_addr: SocketAddr::from(([0, 0, 0, 0], 9090)),
            lease_ttl_secs: 60,
            max_attempts: 5,
            log_format: "text".into(),
            standing_agents_enabled: true,
            auto_bootstrap: true,
            standing_agents_idle_by_default: true,
            default_provider: Some(genesis_core::presets::DefaultProvider::Scripted),
            llm_key_dir: None,
            outbox_batch: 256,
            outbox_poll_ms: 5_000,
            publish_ack_timeout_ms: 5_000,
            outbox_max_pending: 100_000,
            bootstrap_rescan_secs: 30,
            shutdown_deadline_secs: 10,
            registry_bucket: genesis_lanes::registry::DEFAULT_BUCKET.into(),
            coder_namespace: "default".into(),
            coder_image: String::new(),
            coder_control_url: None,
            coder_token_ttl_secs: 86_400,
            journal_retention_days: 30,
            journal_prune_every_secs: 3600,
            coder_command: genesis_lanes::coders::DEFAULT_CODER_COMMAND.into(),
            coder_key_secret: None,
            coder_anthropic_base_url: None,
            coder_openai_base_url: None,
            unpriced_input_usd_per_mtok: 15.0,
            unpriced_output_usd_per_mtok: 75.0,
            coder_kubeconfig: None,
            coder_artifact_max_bytes: 1_048_576,
            coder_artifacts_per_task: 100,
            coder_artifact_total_bytes: 16_777_216,
            windows_pool_url: None,
            windows_pool_token: None,
            dashboard_addr: "off".into(),
            dashboard_session_hours: 12,
            dashboard_secure_cookie: false,
            admin_rate_per_sec: 100.0,
            admin_rate_burst: 200.0,
            enqueue_rate_per_sec: 20.0,
            enqueue_rate_burst: 100.0,
            auth_failures_per_minute: 20,
            auth_failure_peers: 10_000,
            stream_recheck_secs: 30,
            streams_per_token: 8,
            streams_per_tenant: 64,
            allow_owner_login: false,
        }
    }

    /// Where the dashboard listens: `None` when `GENESIS_DASHBOARD_ADDR` is
    /// `off`. An address that does not parse is refused by [`Self::validate`].
    pub fn dashboard_listen(&self) -> Result<Option<SocketAddr>, ControlError> {
        match self.dashboard_addr.trim() {
            "off" | "" => Ok(None),
            a => a.parse().map(Some).map_err(|_| {
                ControlError::Config(format!(
                    "GENESIS_DASHBOARD_ADDR must be host:port or off, got {a:?}"
                ))
            }),
        }
    }

    /// Whether the dashboard's session cookie carries `Secure`: always when
    /// control serves the dashboard over TLS, else as configured.
    pub fn dashboard_cookie_secure(&self) -> bool {
        self.dashboard_secure_cookie || self.tls.enabled()
    }

    /// The tick lease TTL.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_secs)
    }

    /// The configured coder control URL, when set and non-blank.
    pub fn coder_control_url(&self) -> Option<&str> {
        self.coder_control_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
    }

    /// How long an episode journal is kept.
    pub fn journal_retention(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.journal_retention_days.saturating_mul(24 * 3600))
    }

    /// The price charged for a coder's attempt of a model with no
    /// `llm_pricing` row.
    pub fn unpriced_price(&self) -> genesis_core::pricing::ModelPrice {
        genesis_core::pricing::ModelPrice::fallback(
            self.unpriced_input_usd_per_mtok,
            self.unpriced_output_usd_per_mtok,
        )
    }

    /// The caps on a coding task's artifacts.
    pub fn artifact_caps(&self) -> genesis_store::coding_tasks::ArtifactCaps {
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        genesis_store::coding_tasks::ArtifactCaps {
            max_bytes: size(self.coder_artifact_max_bytes),
            max_count: size(u64::from(self.coder_artifacts_per_task)),
            max_total_bytes: size(self.coder_artifact_total_bytes),
        }
    }

    /// How often an open live stream's credential is checked again.
    pub fn stream_recheck(&self) -> Duration {
        Duration::from_secs(self.stream_recheck_secs.max(1))
    }

    /// Refuse values the service cannot work with, naming the setting.
    pub fn validate(&self) -> Result<(), ControlError> {
        let bad = |m: &str| Err(ControlError::Config(m.to_owned()));
        genesis_core::check_lease_ttl_secs(self.lease_ttl_secs).map_err(ControlError::Config)?;
        if self.default_provider.is_none() {
            return bad(
                "GENESIS_DEFAULT_PROVIDER is required: anthropic, openai or scripted (the offline \
                 provider, for demos and tests); it has no default so a deployment never runs \
                 on canned answers by accident",
            );
        }
        if self.max_attempts == 0 {
            return bad("GENESIS_MAX_ATTEMPTS must be at least 1");
        }
        if self.outbox_batch <= 0 {
            return bad("GENESIS_OUTBOX_BATCH must be at least 1");
        }
        if self.outbox_poll_ms == 0 || self.publish_ack_timeout_ms == 0 {
            return bad(
                "GENESIS_OUTBOX_POLL_MS and GENESIS_PUBLISH_ACK_TIMEOUT_MS must be positive",
            );
        }
        // The outbox waits for a batch's acks inside its transaction; the
        // store's server-side bound on an idle transaction must not end it.
        let ack_bound = genesis_store::DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT.as_millis() / 2;
        if u128::from(self.publish_ack_timeout_ms) > ack_bound {
            return Err(ControlError::Config(format!(
                "GENESIS_PUBLISH_ACK_TIMEOUT_MS must be at most {ack_bound}: the outbox holds its \
                 batch's transaction open while it waits, and the store ends a transaction idle \
                 for {} s",
                genesis_store::DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT.as_secs()
            )));
        }
        if !(1..=MAX_BOOTSTRAP_RESCAN_SECS).contains(&self.bootstrap_rescan_secs) {
            return Err(ControlError::Config(format!(
                "GENESIS_BOOTSTRAP_RESCAN_SECS must be 1 to {MAX_BOOTSTRAP_RESCAN_SECS}"
            )));
        }
        let name_ok = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        if !name_ok(&self.stream) || !name_ok(&self.consumer) {
            return bad(
                "GENESIS_STREAM and GENESIS_CONSUMER must be non-empty names of letters, digits, '_' or '-'",
            );
        }
        if self.subject_prefix.is_empty()
            || self.subject_prefix.starts_with('.')
            || self.subject_prefix.ends_with('.')
            || self
                .subject_prefix
                .contains(|c: char| c.is_whitespace() || c == '*' || c == '>')
        {
            return bad(
                "GENESIS_SUBJECT_PREFIX must be a plain subject (no wildcards, spaces or edge dots)",
            );
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return bad("GENESIS_LOG_FORMAT must be text or json");
        }
        self.dashboard_listen()?;
        self.tls
            .validate()
            .map_err(|e| ControlError::Config(e.to_string()))?;
        self.nats
            .validate(&self.nats_url)
            .map_err(|e| ControlError::Config(e.to_string()))?;
        if let Some(url) = self.coder_control_url.as_deref()
            && !url.trim().is_empty()
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return bad("GENESIS_CODER_CONTROL_URL must be an http:// or https:// URL");
        }
        if self.coder_artifact_max_bytes > self.coder_artifact_total_bytes {
            return bad(
                "GENESIS_CODER_ARTIFACT_MAX_BYTES must not exceed GENESIS_CODER_ARTIFACT_TOTAL_BYTES",
            );
        }
        if !(1..=24 * 30).contains(&self.dashboard_session_hours) {
            return bad("GENESIS_DASHBOARD_SESSION_HOURS must be between 1 and 720");
        }
        for (name, rate, burst) in [
            ("ADMIN", self.admin_rate_per_sec, self.admin_rate_burst),
            (
                "ENQUEUE",
                self.enqueue_rate_per_sec,
                self.enqueue_rate_burst,
            ),
        ] {
            if !rate.is_finite() || rate < 0.0 {
                return Err(ControlError::Config(format!(
                    "GENESIS_{name}_RATE_PER_SEC must be 0 (off) or positive"
                )));
            }
            if rate > 0.0 && !(burst.is_finite() && burst >= 1.0) {
                return Err(ControlError::Config(format!(
                    "GENESIS_{name}_RATE_BURST must be at least 1"
                )));
            }
        }
        Ok(())
    }

    /// `--dump-config` output: TOML `key = value` lines under the keys a
    /// config file takes, secrets redacted (unset options are left out).
    pub fn dump(&self) -> String {
        genesis_telemetry::config_file::dump(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_redacts_the_database_password() {
        let mut c = ControlConfig::new(
            "postgres://app:hunter2@db:5432/genesis",
            "nats://bus:natspass@n:4222",
        );
        c.windows_pool_url = Some("https://pool:poolpass@pool.example:8443".into());
        c.windows_pool_token = Some("pool-token-value".into());
        for printed in [c.dump(), format!("{c:?}")] {
            for secret in ["hunter2", "natspass", "poolpass", "pool-token-value"] {
                assert!(!printed.contains(secret), "{secret} in {printed}");
            }
        }
        let t: toml::Table = c.dump().parse().expect("the dump is TOML");
        assert_eq!(
            t["database_url"].as_str(),
            Some("postgres://app:***@db:5432/genesis")
        );
        assert_eq!(t["nats_url"].as_str(), Some("nats://bus:***@n:4222"));
        assert_eq!(t["windows_pool_token"].as_str(), Some("***"));
        assert_eq!(t["lease_ttl_secs"].as_integer(), Some(60));
        assert_eq!(t["default_provider"].as_str(), Some("scripted"));
        let unset = ControlConfig::new("postgres://h/db", "nats://h").dump();
        assert!(!unset.contains("windows_pool"), "{unset}");
    }

    #[test]
    fn validate_names_the_bad_setting() {
        let mut c = ControlConfig::new("postgres://h/db", "nats://h");
        assert!(c.validate().is_ok());
        let mut none = c.clone();
        none.default_provider = None;
        let err = none.validate().expect_err("no provider chosen").to_string();
        assert!(
            err.contains("GENESIS_DEFAULT_PROVIDER is required"),
            "{err}"
        );
        c.subject_prefix = "genesis.>".into();
        let err = c.validate().expect_err("wildcard prefix refused");
        assert!(err.to_string().contains("GENESIS_SUBJECT_PREFIX"));
        c.subject_prefix = "ok".into();
        c.max_attempts = 0;
        assert!(
            c.validate()
                .expect_err("zero")
                .to_string()
                .contains("GENESIS_MAX_ATTEMPTS")
        );
        c.max_attempts = 5;
        c.publish_ack_timeout_ms = 30_001;
        let err = c
            .validate()
            .expect_err("an ack wait past half the idle bound");
        assert!(
            err.to_string()
                .contains("GENESIS_PUBLISH_ACK_TIMEOUT_MS must be at most 30000"),
            "{err}"
        );
        c.publish_ack_timeout_ms = 30_000;
        assert!(c.validate().is_ok());
        // Each bounded setting: refused below 1 and past a day, by name.
        type Set = fn(&mut ControlConfig, u64);
        let bounded: [(&str, Set, u64); 2] = [
            ("GENESIS_LEASE_TTL_SECS", |c, v| c.lease_ttl_secs = v, 60),
            (
                "GENESIS_BOOTSTRAP_RESCAN_SECS",
                |c, v| c.bootstrap_rescan_secs = v,
                30,
            ),
        ];
        for (name, set, default) in bounded {
            for (value, ok) in [
                (0, false),
                (1, true),
                (86_400, true),
                (86_401, false),
                (u64::MAX, false),
            ] {
                set(&mut c, value);
                match c.validate() {
                    Ok(()) => assert!(ok, "{name} {value} accepted"),
                    Err(e) => assert!(
                        !ok && e
                            .to_string()
                            .contains(&format!("{name} must be 1 to 86400")),
                        "{name} {value}: {e}"
                    ),
                }
            }
            set(&mut c, default);
        }
        c.dashboard_addr = "localhost".into();
        assert!(
            c.validate()
                .expect_err("no port")
                .to_string()
                .contains("GENESIS_DASHBOARD_ADDR")
        );
        c.dashboard_addr = "127.0.0.1:0".into();
        assert!(c.validate().is_ok());
        c.enqueue_rate_burst = 0.5;
        assert!(
            c.validate()
                .expect_err("burst below one")
                .to_string()
                .contains("GENESIS_ENQUEUE_RATE_BURST")
        );
        c.enqueue_rate_per_sec = 0.0;
        assert!(c.validate().is_ok(), "a zero rate switches the limit off");
        c.admin_rate_per_sec = f64::NAN;
        assert!(
            c.validate()
                .expect_err("NaN")
                .to_string()
                .contains("GENESIS_ADMIN_RATE_PER_SEC")
        );
        c.admin_rate_per_sec = 100.0;
        c.dashboard_session_hours = 0;
        assert!(
            c.validate()
                .expect_err("zero hours")
                .to_string()
                .contains("GENESIS_DASHBOARD_SESSION_HOURS")
        );
    }

    #[test]
    fn journal_retention_and_its_pass_are_bounded_and_named_when_refused() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            config: ControlConfig,
        }
        let cli = Cli::try_parse_from(["genesis-control"]).expect("defaults");
        assert_eq!(
            cli.config.journal_retention(),
            std::time::Duration::from_secs(30 * 86_400)
        );
        assert_eq!(cli.config.journal_prune_every_secs, 3600);
        for (flag, bad) in [
            ("--journal-retention-days", "0"),
            ("--journal-retention-days", "3651"),
            ("--journal-prune-every-secs", "59"),
            ("--journal-prune-every-secs", "many"),
        ] {
            let err = Cli::try_parse_from(["genesis-control", flag, bad])
                .err()
                .expect("refused")
                .to_string();
            assert!(err.contains(flag), "{flag} {bad}: {err}");
        }
    }

    #[test]
    fn pod_pools_are_read_from_their_text_refused_with_the_reason_and_dumped_back() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            config: ControlConfig,
        }
        let (a, b) = (uuid::Uuid::from_u128(1), uuid::Uuid::from_u128(2));
        let text = format!("eu={b},{a}");
        let cli = Cli::try_parse_from(["genesis-control", "--pod-pools", &text]).expect("parsed");
        let pools = cli.config.pod_pools.pools();
        assert_eq!(pools.len(), 1);
        assert_eq!((pools[0].name(), pools[0].tenants()), ("eu", &[a, b][..]));
        let dumped: toml::Table = cli.config.dump().parse().expect("TOML");
        assert_eq!(
            dumped["pod_pools"].as_str(),
            Some(format!("eu={a},{b}").as_str())
        );
        let err = Cli::try_parse_from(["genesis-control", "--pod-pools", &format!("EU={a}")])
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("pool name \"EU\""), "{err}");
        let err = Cli::try_parse_from(["genesis-control", "--pod-pools", &format!("x={a};y={a}")])
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("in two pools"), "{err}");
        let unset = ControlConfig::new("postgres://h/db", "nats://h");
        assert!(unset.pod_pools.is_empty());
        assert!(!unset.dump().contains("pod_pools"));
    }
}
