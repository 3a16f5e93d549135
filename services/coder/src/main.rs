//! The `genesis-coder` binary: one coding task, start to finish. Reads its
//! settings (flags or the environment its Job is given), installs logging to
//! stderr, connects to control with the task-bound coder token, builds the
//! model side (the HTTP providers with `ANTHROPIC_BASE_URL` /
//! `OPENAI_BASE_URL`, the platform's provider keys) and calls the library's
//! [`genesis_coder::run`] — or, with `--dry-run`, [`genesis_coder::dry_run`],
//! which prints what a run would do and writes nothing.
//!
//! Exit codes:
//! - 0: the task was completed (or `--dry-run` printed its plan);
//! - 1: the task failed (the model gave up, a limit, the credit ceiling, the
//!   model chain or the checkout ended it), or it was already settled;
//! - 2: bad configuration (a missing or malformed setting, a token or task
//!   control refuses);
//! - 3: control could not be reached.
//!
//! Logic stays in the library, so tests drive the same entry points. This
//! binary must never print the coder token or a provider key.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use genesis_coder::run::{
    DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_TURNS, EXIT_BAD_CONFIG, EXIT_COMPLETED, EXIT_UNREACHABLE,
};
use genesis_coder::{CoderConfig, ControlClient, Limits, Llm, RunConfig};
use tracing::Instrument as _;

genesis_telemetry::global_allocator!();

/// The environment a coder Job is given: the contract's names (one home
/// in genesis-core, which the spawner writes from) and the coder's own.
mod env {
    pub use genesis_core::coder_contract::{
        ENV_ANTHROPIC_BASE_URL as ANTHROPIC_BASE_URL, ENV_CODER_ID as CODER_ID,
        ENV_CODER_TOKEN as CODER_TOKEN, ENV_CONTROL_URL as CONTROL_URL,
        ENV_OPENAI_BASE_URL as OPENAI_BASE_URL, ENV_TASK_ID as TASK_ID, ENV_TENANT_ID as TENANT_ID,
    };
    /// An extra CA trusted for an `https://` control URL.
    pub const CONTROL_CA_FILE: &str = "GENESIS_CONTROL_CA_FILE";
    /// Where the work directory is made.
    pub const WORKDIR: &str = "GENESIS_CODER_WORKDIR";
}

/// One coding task's settings.
#[derive(Parser)]
#[command(
    name = "genesis-coder",
    version,
    about = "Genesis coder: runs one coding task against control and exits"
)]
struct Args {
    /// The coding task to run.
    #[arg(long, env = env::TASK_ID)]
    task_id: String,
    /// The task's tenant.
    #[arg(long, env = env::TENANT_ID)]
    tenant_id: String,
    /// This coder's id (its Job name), for the logs.
    #[arg(long, env = env::CODER_ID, default_value = "")]
    coder_id: String,
    /// Control's gRPC endpoint (http:// or https://).
    #[arg(long, env = env::CONTROL_URL)]
    control_url: String,
    /// The coder's task-bound token (never printed).
    #[arg(long, env = env::CODER_TOKEN, hide_env_values = true)]
    token: String,
    /// An extra CA (PEM) trusted for an https:// control URL, beside the
    /// system roots.
    #[arg(long, env = env::CONTROL_CA_FILE)]
    control_ca_file: Option<PathBuf>,
    /// Where the run's temporary work directory is made (default: the
    /// system's temp directory).
    #[arg(long, env = env::WORKDIR)]
    workdir: Option<PathBuf>,
    /// Model turns before the task fails.
    #[arg(long, default_value_t = DEFAULT_MAX_TURNS)]
    max_turns: u32,
    /// Output cap of each model turn.
    #[arg(long, default_value_t = DEFAULT_MAX_OUTPUT_TOKENS)]
    max_output_tokens: u32,
    /// Wall time of the whole run, in seconds.
    #[arg(long, default_value_t = genesis_coder::run::DEFAULT_TIMEOUT.as_secs())]
    timeout_secs: u64,
    /// Directory of provider keys (one file per key, optionally bound to
    /// tenants), beside the `GENESIS_LLM_KEY_<NAME>` variables and the
    /// well-known `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`.
    #[arg(long, env = genesis_core::llm_keys::KEY_DIR_ENV)]
    llm_key_dir: Option<PathBuf>,
    /// Anthropic base URL override, as the official SDKs read it.
    #[arg(long, env = env::ANTHROPIC_BASE_URL)]
    anthropic_base_url: Option<String>,
    /// OpenAI-compatible base URL override, with or without `/v1`.
    #[arg(long, env = env::OPENAI_BASE_URL)]
    openai_base_url: Option<String>,
    /// Log format: `text` or `json`.
    #[arg(long, env = "GENESIS_LOG_FORMAT", default_value = "text")]
    log_format: String,
    /// Read the task and its model chain, print what a run would do, and
    /// exit: no checkout, no model call, nothing written.
    #[arg(long)]
    dry_run: bool,
}

/// Logging to stderr (stdout carries the dry run's plan), filtered by
/// `RUST_LOG` (default `info`), every line's URL passwords masked.
fn init_logging(format: &str) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let writer = || genesis_telemetry::RedactingWriter(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let installed = match format {
        "text" => builder.try_init(),
        "json" => builder.json().try_init(),
        other => anyhow::bail!("--log-format {other:?}: expected text or json"),
    };
    installed.map_err(|e| anyhow::anyhow!("installing the logger: {e}"))
}

/// The model side: HTTP providers (base URLs checked, naming their setting)
/// and the platform's provider keys.
fn llm(args: &Args) -> anyhow::Result<Llm> {
    // The scripted provider answers only a chain that names it (an
    // operator's choice), with the coder's own offline script.
    let mut factory = genesis_llm::HttpProviderFactory::new(genesis_llm::HttpTimeouts::default())
        .context("LLM HTTP client")?
        .with_scripted(Arc::new(genesis_llm::ScriptedProvider::with_script(
            genesis_coder::run::offline_script(),
        )));
    if let Some(url) = &args.anthropic_base_url {
        factory = factory.with_anthropic_base_url(url.clone());
    }
    if let Some(url) = &args.openai_base_url {
        factory = factory.with_openai_base_url(url.clone());
    }
    factory.validate()?;
    let keys = genesis_llm::ProviderKeys::from_process_env(args.llm_key_dir.as_deref())?;
    for ignored in keys.ignored() {
        tracing::warn!(entry = %ignored.entry, reason = %ignored.reason, "provider keys: a key-directory entry is not a key and is never used");
    }
    Ok(Llm {
        invoker: genesis_llm::FallbackInvoker::new(Arc::new(factory)),
        credentials: Arc::new(keys),
    })
}

fn run_config(args: &Args) -> RunConfig {
    RunConfig {
        limits: Limits {
            max_turns: args.max_turns,
            max_output_tokens: args.max_output_tokens,
            timeout: Duration::from_secs(args.timeout_secs),
        },
        workdir: args.workdir.clone(),
        tools: CoderConfig::default(),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    // Before any TLS client exists: the graph enables two rustls providers,
    // and a library that takes the process default would panic.
    genesis_net::install_default_provider();
    // clap exits 2 on a missing or malformed setting, 0 on --help/--version.
    let args = Args::parse();
    if let Err(e) = init_logging(&args.log_format) {
        eprintln!("genesis-coder: {e:#}");
        return ExitCode::from(EXIT_BAD_CONFIG);
    }
    let span = tracing::info_span!("genesis_coder", coder = %args.coder_id);
    run(args).instrument(span).await
}

/// Everything after the logger: connect, then run or plan.
async fn run(args: Args) -> ExitCode {
    let config = run_config(&args);
    let llm = match llm(&args) {
        Ok(llm) => llm,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "bad configuration");
            return ExitCode::from(EXIT_BAD_CONFIG);
        }
    };
    let tls = genesis_net::ClientTls {
        ca: args
            .control_ca_file
            .as_ref()
            .map(|p| genesis_net::SettingPath::new(env::CONTROL_CA_FILE, p)),
        identity: None,
    };
    let control = match ControlClient::connect(
        &args.control_url,
        &args.token,
        &tls,
        &args.tenant_id,
        &args.task_id,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot connect to control");
            let code = if e.is_unreachable() {
                EXIT_UNREACHABLE
            } else {
                EXIT_BAD_CONFIG
            };
            return ExitCode::from(code);
        }
    };
    if args.dry_run {
        return match genesis_coder::dry_run(&control, llm.credentials.as_ref(), &config).await {
            Ok(plan) => {
                print!("{plan}");
                ExitCode::from(EXIT_COMPLETED)
            }
            Err(e) => {
                tracing::error!(error = %e, "dry run failed");
                ExitCode::from(e.exit_code())
            }
        };
    }
    match genesis_coder::run(&control, &llm, &config).await {
        Ok(outcome) => {
            tracing::info!(?outcome, "run finished");
            ExitCode::from(outcome.exit_code())
        }
        Err(e) => {
            tracing::error!(error = %e, "run failed");
            ExitCode::from(e.exit_code())
        }
    }
}
