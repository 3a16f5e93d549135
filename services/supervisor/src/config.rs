//! The supervisor's configuration: defaults → the `--config` file →
//! `GENESIS_*` env → flags (clap, with genesis-telemetry's `config_file`),
//! with `--dump-config` printing the effective values, the database password
//! redacted. Must never print or log a secret.

use std::net::SocketAddr;
use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use genesis_store::batch::BatchOptions;

use crate::presets::DefaultProvider;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Everything `genesis-supervisor` is configured with.
#[derive(Clone, clap::Parser, serde::Serialize)]
#[command(
    name = crate::SERVICE_NAME,
    version,
    about = "The tick supervisor agent pods talk to (genesis.v1.AgentPod)"
)]
pub struct SupervisorConfig {
    /// PostgreSQL URL; TLS as libpq reads it (`sslmode`, `sslrootcert`).
    #[arg(
        long,
        env = "GENESIS_DATABASE_URL",
        default_value = "postgres://127.0.0.1:5432/genesis"
    )]
    #[serde(serialize_with = "genesis_telemetry::config_file::redacted_url")]
    pub database_url: String,
    /// gRPC listen address.
    #[arg(long, env = "GENESIS_GRPC_ADDR", default_value = "0.0.0.0:50052")]
    pub grpc_addr: SocketAddr,
    /// TLS of the gRPC listener (`GENESIS_TLS_CERT_FILE`,
    /// `GENESIS_TLS_KEY_FILE`, `GENESIS_TLS_RELOAD_SECS`).
    #[command(flatten)]
    #[serde(flatten)]
    pub tls: genesis_net::ServerTlsArgs,
    /// PEM CA that agent pods' client certificates must be signed by: when
    /// set, a pod that presents no certificate, or one this CA did not
    /// sign, is refused at the TLS handshake (mutual TLS; needs
    /// GENESIS_TLS_CERT_FILE). Unset: no client certificate is asked for.
    /// Read at start-up (a new CA needs a restart).
    #[arg(long, env = genesis_net::server::CLIENT_CA_ENV)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_client_ca_file: Option<std::path::PathBuf>,
    /// HTTP listen address (`/healthz`, `/readyz`, `/metrics`).
    #[arg(long, env = "GENESIS_HTTP_ADDR", default_value = "0.0.0.0:9091")]
    pub http_addr: SocketAddr,
    /// Tick lease TTL in seconds.
    #[arg(long, env = "GENESIS_LEASE_TTL_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=genesis_core::MAX_LEASE_TTL_SECS))]
    pub lease_ttl_secs: u64,
    /// Deliveries of one event before it is dead-lettered.
    #[arg(long, env = "GENESIS_MAX_ATTEMPTS", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_attempts: u32,
    /// Alertmanager base URL for the ops digest's firing alerts (optional).
    #[arg(long, env = "GENESIS_ALERTMANAGER_URL")]
    #[serde(
        serialize_with = "genesis_telemetry::config_file::redacted_optional_url",
        skip_serializing_if = "Option::is_none"
    )]
    pub alertmanager_url: Option<String>,
    /// Seconds between ops-digest samples (database counters, Alertmanager).
    #[arg(long, env = "GENESIS_OPS_SAMPLE_SECS", default_value_t = crate::ops::DEFAULT_SAMPLE_INTERVAL.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub ops_sample_secs: u64,
    /// Seconds the ops digest's deltas span (deadlocks, rollbacks, tool errors).
    #[arg(long, env = "GENESIS_OPS_WINDOW_SECS", default_value_t = crate::ops::DEFAULT_WINDOW.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub ops_window_secs: u64,
    /// Log format.
    #[arg(long, env = "GENESIS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Provider of the code-default preset when a tenant bound none:
    /// `anthropic` (`claude-opus-4-8`), `openai` (`gpt-4o`) or `scripted`
    /// (`scripted-1`, the offline provider: demo and tests). Required, with
    /// no default, so the offline provider only ever runs where an operator
    /// chose it.
    #[arg(long, env = "GENESIS_DEFAULT_PROVIDER", value_parser = genesis_core::presets::DefaultProvider::parse_arg)]
    pub default_provider: DefaultProvider,
    /// Dollars per million prompt tokens charged for an attempt whose model
    /// has no `llm_pricing` row (a price deleted after its preset was
    /// accepted). Never zero: an unpriced model must still draw down the
    /// weekly credit. Cache reads and writes are charged at this price too.
    #[arg(long, env = "GENESIS_UNPRICED_INPUT_USD_PER_MTOK", default_value_t = 15.0, value_parser = genesis_core::pricing::parse_fallback_price, allow_negative_numbers = true)]
    pub unpriced_input_usd_per_mtok: f64,
    /// Dollars per million completion tokens for an unpriced model (see
    /// `GENESIS_UNPRICED_INPUT_USD_PER_MTOK`).
    #[arg(long, env = "GENESIS_UNPRICED_OUTPUT_USD_PER_MTOK", default_value_t = 75.0, value_parser = genesis_core::pricing::parse_fallback_price, allow_negative_numbers = true)]
    pub unpriced_output_usd_per_mtok: f64,
    /// Bytes of one episode's journal (its steps' JSON): the first step past
    /// it is replaced by a truncation marker and nothing later is kept, so a
    /// resumed episode replays only what came before it. 16 KiB to 256 MiB.
    #[arg(long, env = "GENESIS_JOURNAL_MAX_EPISODE_BYTES", default_value_t = genesis_core::journal::DEFAULT_MAX_EPISODE_BYTES,
          value_parser = clap::value_parser!(u32).range(i64::from(genesis_core::journal::MIN_MAX_EPISODE_BYTES)..=i64::from(genesis_core::journal::MAX_MAX_EPISODE_BYTES)))]
    pub journal_max_episode_bytes: u32,
    /// Milliseconds an admitted agent-pod token is remembered before it is
    /// looked up again (0: every RPC looks it up). Any change to
    /// `api_tokens` (a revocation) empties the memory as soon as it
    /// commits, by NOTIFY; this bounds only how long a row is trusted.
    #[arg(long, env = "GENESIS_TOKEN_CACHE_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub token_cache_ms: u64,
    /// Mebibytes of ledger tails the supervisor holds between claims, so a
    /// claim reads only the turns written since (0: none; every claim reads
    /// the whole tail). Least recently claimed instances go first. The
    /// database confirms the newest held turn on every claim, so a reset
    /// ledger is never served from memory.
    #[arg(long, env = "GENESIS_LEDGER_CACHE_MB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(0..=16_384))]
    pub ledger_cache_mb: u64,
    /// Mebibytes of bundle catalogues (a tenant's mode rows, site bindings,
    /// presets and configuration for one agent type) the supervisor holds
    /// between claims, so a claim is sent them only when an admin write
    /// changed them (0: none; every claim reads them). The database checks
    /// the held catalogue's epoch on every claim, so a change is never
    /// missed.
    #[arg(long, env = "GENESIS_CATALOGUE_CACHE_MB", default_value_t = 16, value_parser = clap::value_parser!(u64).range(0..=16_384))]
    pub catalogue_cache_mb: u64,
    /// Most concurrent claims, call-attempt records or completions run
    /// together as one statement (one round trip, one commit); 1 runs each
    /// alone. A call never waits for company: a batch is what queued while
    /// the previous one of its kind was in the database.
    #[arg(long, env = "GENESIS_STORE_BATCH_MAX", default_value_t = BatchOptions::DEFAULT.max,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=BatchOptions::MAX_CALLS as u64))]
    pub store_batch_max: usize,
    /// Statements of each batching queue in the database at once.
    #[arg(long, env = "GENESIS_STORE_BATCH_WORKERS", default_value_t = BatchOptions::DEFAULT.workers,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=BatchOptions::MAX_WORKERS as u64))]
    pub store_batch_workers: usize,
    /// Whether claims, call-attempt records and completions share one queue,
    /// so one statement may carry all three kinds (false: a queue, and
    /// `GENESIS_STORE_BATCH_WORKERS` statements, per kind).
    #[arg(long, env = "GENESIS_STORE_BATCH_SHARED", default_value_t = BatchOptions::DEFAULT.shared, action = clap::ArgAction::Set)]
    pub store_batch_shared: bool,
    /// Seconds in-flight calls get to finish after a shutdown signal.
    #[arg(long, env = "GENESIS_SHUTDOWN_GRACE_SECS", default_value_t = 20)]
    pub shutdown_grace_secs: u64,
    /// Failed authentications a peer address (an IPv6 /64) may make per
    /// minute, all at once at most; past it the peer's calls are refused
    /// UNAUTHENTICATED before any token lookup until its bucket refills.
    /// 0 switches the limit off.
    #[arg(long, env = "GENESIS_AUTH_FAILURES_PER_MINUTE", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub auth_failures_per_minute: u32,
    /// Most peer addresses whose failed authentications are remembered;
    /// past it refilled peers, then the least recently failed, are dropped.
    #[arg(long, env = "GENESIS_AUTH_FAILURE_PEERS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub auth_failure_peers: u32,
    /// Serve though the database login is a superuser, a BYPASSRLS role or
    /// the schema owner (`genesis_store::roles`): local development against
    /// a trust-auth server only. Off, the supervisor refuses such a login,
    /// because row-level security would not bind it.
    #[arg(long, env = "GENESIS_ALLOW_OWNER_LOGIN", default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_owner_login: bool,
    /// Print the effective configuration (secrets redacted) and exit.
    #[arg(long)]
    #[serde(skip)]
    pub dump_config: bool,
}

/// Prints [`SupervisorConfig::dump`], so a logged config is redacted too.
impl std::fmt::Debug for SupervisorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.dump())
    }
}

fn mebibytes(mb: u64) -> usize {
    usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

impl SupervisorConfig {
    /// The config with every default, as a test starts from.
    pub fn for_tests(database_url: &str) -> Self {
        use clap::Parser as _;
        let mut c = Self::parse_from(["genesis-supervisor", "--default-provider", "scripted"]);
        c.database_url = database_url.to_owned();
        c
    }

    /// The price charged for a model with no `llm_pricing` row.
    pub fn unpriced_price(&self) -> genesis_core::pricing::ModelPrice {
        genesis_core::pricing::ModelPrice::fallback(
            self.unpriced_input_usd_per_mtok,
            self.unpriced_output_usd_per_mtok,
        )
    }

    /// The ledger-tail cache's budget in bytes.
    pub fn ledger_cache_bytes(&self) -> usize {
        mebibytes(self.ledger_cache_mb)
    }

    /// The catalogue cache's budget in bytes.
    pub fn catalogue_cache_bytes(&self) -> usize {
        mebibytes(self.catalogue_cache_mb)
    }

    /// The server TLS these settings describe, its files read now (`None`:
    /// plaintext). A half-given pair, a client CA without a certificate or
    /// an unusable file is an error naming the setting.
    pub fn server_tls(&self) -> Result<Option<genesis_net::ServerTls>, genesis_net::TlsError> {
        let ca = self
            .tls_client_ca_file
            .as_ref()
            .map(|p| genesis_net::SettingPath::new(genesis_net::server::CLIENT_CA_ENV, p));
        self.tls.load(ca.as_ref())
    }

    /// The lease TTL.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_secs)
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
    fn passwords_are_redacted_in_debug_and_dump() {
        let mut c = SupervisorConfig::for_tests("postgres://app:hunter2@db:5432/genesis");
        c.alertmanager_url = Some("http://ops:am-pass@am:9093".into());
        c.dump_config = true;
        for printed in [format!("{c:?}"), c.dump()] {
            assert!(!printed.contains("hunter2"), "{printed}");
            assert!(!printed.contains("am-pass"), "{printed}");
            assert!(printed.contains("app:***@db"), "{printed}");
            assert!(printed.contains("ops:***@am:9093"), "{printed}");
        }
        let t: toml::Table = c.dump().parse().expect("the dump is TOML");
        assert_eq!(t["lease_ttl_secs"].as_integer(), Some(60));
        assert!(!t.contains_key("dump_config"), "{t:?}");
    }

    #[test]
    fn the_unpriced_fallback_is_never_zero() {
        use clap::Parser as _;
        let c = SupervisorConfig::for_tests("postgres://x");
        let p = c.unpriced_price();
        assert_eq!((p.input_usd_per_mtok, p.output_usd_per_mtok), (15.0, 75.0));
        for bad in ["0", "-1", "NaN", "inf", "cheap"] {
            let err = SupervisorConfig::try_parse_from([
                "genesis-supervisor",
                "--default-provider",
                "scripted",
                "--unpriced-output-usd-per-mtok",
                bad,
            ])
            .expect_err(bad);
            assert!(err.to_string().contains("is not a price"), "{bad}: {err}");
        }
        let c = SupervisorConfig::try_parse_from([
            "genesis-supervisor",
            "--default-provider",
            "scripted",
            "--unpriced-input-usd-per-mtok",
            "2.5",
        ])
        .expect("a positive price parses");
        assert_eq!(c.unpriced_input_usd_per_mtok, 2.5);
    }

    #[test]
    fn the_default_provider_must_be_chosen() {
        use clap::Parser as _;
        // Unless the environment names it, a missing provider is refused:
        // the offline scripted provider never runs by default.
        if std::env::var_os("GENESIS_DEFAULT_PROVIDER").is_none() {
            let err = SupervisorConfig::try_parse_from(["genesis-supervisor"])
                .expect_err("no provider chosen")
                .to_string();
            assert!(err.contains("--default-provider"), "{err}");
        }
        let c = SupervisorConfig::try_parse_from([
            "genesis-supervisor",
            "--default-provider",
            "anthropic",
        ])
        .expect("a chosen provider");
        assert_eq!(c.default_provider, DefaultProvider::Anthropic);
    }

    #[test]
    fn defaults_match_the_internals_table() {
        let c = SupervisorConfig::for_tests("postgres://x");
        assert_eq!(c.grpc_addr.port(), 50052);
        assert_eq!(c.http_addr.port(), 9091);
        assert_eq!(c.lease_ttl_secs, 60);
        assert_eq!(c.max_attempts, 5);
        assert_eq!(c.default_provider, DefaultProvider::Scripted);
        assert_eq!((c.store_batch_max, c.store_batch_workers), (16, 2));
        assert!(c.store_batch_shared, "the tick's calls share one queue");
        assert_eq!(
            (c.auth_failures_per_minute, c.auth_failure_peers),
            (20, 10_000)
        );
    }

    #[test]
    fn store_batching_flags_parse_and_bad_values_are_refused() {
        use clap::Parser as _;
        let parse = |args: &[&str]| {
            SupervisorConfig::try_parse_from(
                ["genesis-supervisor", "--default-provider", "scripted"]
                    .into_iter()
                    .chain(args.iter().copied()),
            )
        };
        let c = parse(&[
            "--store-batch-shared",
            "false",
            "--store-batch-workers",
            "3",
        ])
        .expect("valid flags");
        assert!(!c.store_batch_shared);
        assert_eq!(c.store_batch_workers, 3);
        for bad in [
            &["--store-batch-shared", "sometimes"][..],
            &["--store-batch-max", "0"],
            &["--store-batch-workers", "17"],
        ] {
            let err = parse(bad).expect_err("refused").to_string();
            assert!(err.contains(bad[0]), "{bad:?}: {err}");
        }
    }
}
