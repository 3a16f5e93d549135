//! `genesis-supervisor`: parses configuration, initialises tracing, binds the
//! listeners and runs the library's [`genesis_supervisor::run`] until SIGTERM
//! or SIGINT (a second signal exits at once). Must stay thin: no logic here.

use clap::Parser as _;
use genesis_supervisor::{LogFormat, SupervisorConfig};
use tokio_util::sync::CancellationToken;

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn signalled() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r?,
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = SupervisorConfig::parse();
    if config.dump_config {
        println!("{}", config.dump());
        return Ok(());
    }
    init_tracing(config.log_format);
    let grpc = tokio::net::TcpListener::bind(config.grpc_addr).await?;
    let http = tokio::net::TcpListener::bind(config.http_addr).await?;
    let shutdown = CancellationToken::new();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        if let Err(e) = signalled().await {
            tracing::error!(error = %e, "signal handling failed");
        }
        tracing::info!("shutdown signal: draining");
        trigger.cancel();
        if signalled().await.is_ok() {
            tracing::warn!("second signal: exiting now");
            std::process::exit(130);
        }
    });
    genesis_supervisor::run(config, grpc, http, shutdown).await
}
