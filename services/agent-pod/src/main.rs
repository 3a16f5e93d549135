//! The `genesis-agent-pod` bin: parse the configuration (defaults, the
//! `--config` file, `GENESIS_*` env, flags), install logging and OTLP export (genesis-telemetry), wire
//! SIGTERM/SIGINT to a cancellation token (a second signal exits at once),
//! build the production collaborators (their counters exported over OTLP when
//! configured), call the library's `run_with` and flush the telemetry once
//! it returns.
//!
//! Logic must stay in the library so tests drive the same entry point.

use genesis_agent_pod::{PodConfig, PodDeps, run_with};
use genesis_telemetry::TelemetryConfig;

genesis_telemetry::global_allocator!();

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Before any TLS client exists: the graph enables two rustls providers,
    // and a library that takes the process default would panic.
    genesis_net::install_default_provider();
    let config: PodConfig = genesis_telemetry::config_file::parse();
    if config.dump_config {
        print!("{}", config.dump());
        return Ok(());
    }
    let telemetry = genesis_telemetry::init(TelemetryConfig::from_env(
        genesis_agent_pod::SERVICE_NAME,
        config.log_format.parse()?,
    )?)?;
    let shutdown = genesis_telemetry::shutdown::cancel_on_signal();
    let deps = PodDeps::from_config(&config)?;
    genesis_telemetry::export_metrics(genesis_agent_pod::SERVICE_NAME, {
        let metrics = deps.metrics.clone();
        move || metrics.families()
    });
    // The pull loop runs on the runtime's worker, beside the ticks it
    // spawns and the NATS connection's task. Run by `block_on` on the main
    // thread it woke that thread for every message and handed each tick
    // across threads; with the one worker a cluster gives the pod, that is
    // a context switch per hop.
    let result = match tokio::spawn(run_with(config, deps, shutdown)).await {
        Ok(result) => result,
        Err(e) => Err(anyhow::anyhow!("the pod's main task ended abnormally: {e}")),
    };
    telemetry.shutdown().await;
    result
}
