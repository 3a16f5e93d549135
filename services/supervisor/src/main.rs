//! `genesis-supervisor`: parses configuration, installs logging and OTLP
//! export (genesis-telemetry), binds the listeners and runs the library's
//! [`genesis_supervisor::run`] until SIGTERM or SIGINT (a second signal exits
//! at once), then flushes the telemetry. Must stay thin: no logic here.

use genesis_supervisor::{LogFormat, SupervisorConfig};
use genesis_telemetry::TelemetryConfig;

genesis_telemetry::global_allocator!();

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Before any TLS client exists: the graph enables two rustls providers,
    // and a library that takes the process default would panic.
    genesis_net::install_default_provider();
    let config: SupervisorConfig = genesis_telemetry::config_file::parse();
    if config.dump_config {
        println!("{}", config.dump());
        return Ok(());
    }
    let log_format = match config.log_format {
        LogFormat::Text => genesis_telemetry::LogFormat::Text,
        LogFormat::Json => genesis_telemetry::LogFormat::Json,
    };
    let telemetry = genesis_telemetry::init(TelemetryConfig::from_env(
        genesis_supervisor::SERVICE_NAME,
        log_format,
    )?)?;
    let result = serve(config).await;
    telemetry.shutdown().await;
    result
}

async fn serve(config: SupervisorConfig) -> anyhow::Result<()> {
    // The certificate files are read before the database is reached, so a
    // bad one is the error an operator sees.
    config.server_tls()?;
    // A login row-level security does not bind (superuser, BYPASSRLS,
    // the schema owner) is refused before anything is served.
    genesis_store::roles::check_service_login(&config.database_url, config.allow_owner_login)
        .await?;
    let grpc = tokio::net::TcpListener::bind(config.grpc_addr).await?;
    let http = tokio::net::TcpListener::bind(config.http_addr).await?;
    let shutdown = genesis_telemetry::shutdown::cancel_on_signal();
    genesis_supervisor::run(config, grpc, http, shutdown).await
}
