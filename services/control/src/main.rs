//! The `genesis-control` bin: `serve` (default), `migrate`, `token create`
//! and `--dump-config`. Parses configuration (defaults, the `--config` file,
//! `GENESIS_*` env, flags; genesis-telemetry's `config_file`),
//! installs logging and OTLP export (genesis-telemetry), wires SIGTERM/SIGINT
//! to cancellation (a second signal exits at once), calls the library and
//! flushes the telemetry before exiting. Logic must stay in the library.

use clap::{Parser, Subcommand};
use genesis_control::{ControlConfig, run};
use genesis_core::{PodTenants, TokenScope};
use genesis_telemetry::TelemetryConfig;
use uuid::Uuid;

genesis_telemetry::global_allocator!();

#[derive(Parser)]
#[command(
    name = genesis_control::server::SERVICE_NAME,
    version,
    about = "Genesis control: admin API, bootstrap, outbox publisher"
)]
struct Cli {
    #[command(flatten)]
    config: ControlConfig,
    /// Print the effective configuration (secrets redacted) and exit.
    #[arg(long, global = true)]
    dump_config: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the admin API and run the background loops (the default).
    Serve,
    /// Apply the database migrations and exit. Run it as the schema owner;
    /// with `--service-role` it then prepares the services' own login.
    Migrate {
        /// The login role the services use (created beforehand by the
        /// platform, with its own password): after migrating, it is granted
        /// genesis_app and genesis_system, PUBLIC loses CONNECT on the
        /// database (the owner and this role keep it), and the role is
        /// checked: a superuser, a BYPASSRLS role, the owner, a member of
        /// one of those, or a role that owns objects fails the migrate
        /// naming each violation, with nothing granted. Unset: only the
        /// migrations run.
        #[arg(long, env = "GENESIS_SERVICE_ROLE")]
        service_role: Option<String>,
    },
    /// API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Mint a token, print it once, store only its SHA-256.
    Create {
        /// operator or agent-pod.
        #[arg(long)]
        scope: String,
        /// Bind an operator token to a tenant (unset: platform-wide).
        #[arg(long)]
        tenant: Option<Uuid>,
        /// Scope agent-pod only: a tenant the token may serve (repeat the
        /// flag or separate ids with commas; at most 256). Unset: every
        /// tenant (a shared pool's token).
        #[arg(long = "pod-tenant", value_name = "TENANT", value_delimiter = ',')]
        pod_tenants: Vec<Uuid>,
        /// A label recorded as the actor of audited writes.
        #[arg(long, default_value = "")]
        label: String,
        /// Lifetime such as 30d or 12h (unset: no expiry).
        #[arg(long)]
        ttl: Option<String>,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Before any TLS client exists: the graph enables two rustls providers,
    // and a library that takes the process default would panic.
    genesis_net::install_default_provider();
    let cli: Cli = genesis_telemetry::config_file::parse();
    if cli.dump_config {
        print!("{}", cli.config.dump());
        return Ok(());
    }
    let telemetry = genesis_telemetry::init(TelemetryConfig::from_env(
        genesis_control::server::SERVICE_NAME,
        cli.config.log_format.parse()?,
    )?)?;
    let result = command(cli).await;
    telemetry.shutdown().await;
    result
}

async fn command(cli: Cli) -> anyhow::Result<()> {
    match cli.command.unwrap_or(Command::Serve) {
        Command::Migrate { service_role } => {
            // A role that could never be accepted (a bad name, a missing
            // role, a superuser, ...) is refused before anything runs.
            if let Some(role) = &service_role {
                genesis_store::roles::check_service_role(&cli.config.database_url, role).await?;
            }
            genesis_store::Store::migrate(&cli.config.database_url).await?;
            println!("migrations applied");
            if let Some(role) = service_role {
                genesis_store::roles::grant_service_role(&cli.config.database_url, &role).await?;
                println!("service role {role} prepared");
            }
            Ok(())
        }
        Command::Token {
            command:
                TokenCommand::Create {
                    scope,
                    tenant,
                    pod_tenants,
                    label,
                    ttl,
                },
        } => {
            let scope: TokenScope = scope.parse().map_err(|e| anyhow::anyhow!("--scope: {e}"))?;
            let pod_tenants = PodTenants::new("--pod-tenant", pod_tenants)?;
            if scope != TokenScope::AgentPod && !pod_tenants.is_all() {
                anyhow::bail!("--pod-tenant: only agent-pod tokens carry a tenant set");
            }
            let expires_at = match ttl {
                None => None,
                Some(t) => Some(
                    genesis_control::tokens::expires_after(&t)
                        .map_err(|e| anyhow::anyhow!("--ttl: {e}"))?,
                ),
            };
            let store =
                genesis_store::Store::connect(&cli.config.database_url, Default::default()).await?;
            let (raw, row) = genesis_control::tokens::mint_for_tenants(
                &store,
                scope,
                tenant,
                &pod_tenants,
                &label,
                expires_at,
            )
            .await?;
            let serves = match row.pod_tenants.ids() {
                [] if row.scope == TokenScope::AgentPod => ", every tenant".to_owned(),
                [] => String::new(),
                ids => format!(
                    ", tenants {}",
                    ids.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            };
            eprintln!(
                "token {} ({}{serves}) created; it is shown once:",
                row.id, row.scope
            );
            println!("{raw}");
            Ok(())
        }
        Command::Serve => {
            cli.config.validate()?;
            // The certificate files are read before the database is reached,
            // so a bad one is the error an operator sees.
            cli.config.tls.load(None)?;
            // A login row-level security does not bind (superuser, BYPASSRLS,
            // the schema owner) is refused before anything is served.
            genesis_store::roles::check_service_login(
                &cli.config.database_url,
                cli.config.allow_owner_login,
            )
            .await?;
            let grpc = tokio::net::TcpListener::bind(cli.config.grpc_addr).await?;
            let http = tokio::net::TcpListener::bind(cli.config.http_addr).await?;
            let shutdown = genesis_telemetry::shutdown::cancel_on_signal();
            run(cli.config, grpc, http, shutdown).await?;
            Ok(())
        }
    }
}
