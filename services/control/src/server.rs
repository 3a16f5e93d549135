//! Process assembly: [`run`] opens the store and the control-owned pool,
//! registers every admin service in ONE place ([`routes`]) behind the auth
//! layer, adds `grpc.health.v1` and reflection (v1 and v1alpha, listing only
//! what this server answers), serves HTTP, and starts the
//! publisher, the bootstrap loop and the turn hub. Shutdown: stop the
//! publisher after its in-flight batch, stop accepting RPCs, drain under a
//! deadline, exit. Must never hold service logic: it wires, nothing more.

use std::time::Duration;

use genesis_proto::v1;
use genesis_store::{Store, StoreOptions};
use sqlx::postgres::PgPoolOptions;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::bootstrap::run_bootstrap;
use crate::config::ControlConfig;
use crate::error::ControlError;
use crate::notices::Notices;
use crate::publisher::{PublisherSettings, run_publisher};
use crate::services::missions;
use crate::services::{agents, config, decisions, tenants, tokens};
use crate::services::{coders, coding_tasks, lanes, llm, registry, windows};
use crate::services::{constitution, knowledge};
use crate::state::AppState;

/// The admin services this server answers (fully qualified). Services of
/// admin.proto not listed here answer UNIMPLEMENTED.
pub const SERVED_SERVICES: &[&str] = &[
    "genesis.v1.TenantService",
    "genesis.v1.AgentService",
    "genesis.v1.DecisionService",
    "genesis.v1.ConfigService",
    "genesis.v1.TokenService",
    "genesis.v1.LlmService",
    "genesis.v1.RegistryService",
    "genesis.v1.CoderService",
    "genesis.v1.CodingTaskService",
    "genesis.v1.WindowsLaneService",
    "genesis.v1.MissionService",
    "genesis.v1.ConstitutionService",
    "genesis.v1.KnowledgeService",
];

/// The fleet's gRPC message size limits (`genesis_proto::limits`). Control's
/// largest legitimate request is `IngestSourceFile` carrying a file at the
/// store's ceiling (`genesis_store::knowledge::MAX_FILE_BYTES`) plus its path.
pub use genesis_proto::limits::{MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES};

const _: () = assert!(MAX_REQUEST_BYTES >= 2 * genesis_store::knowledge::MAX_FILE_BYTES);

/// Applies [`MAX_REQUEST_BYTES`] and [`MAX_RESPONSE_BYTES`] to one generated
/// server (the limits are per service in tonic; there is no server-wide knob).
macro_rules! limited {
    ($server:expr) => {
        $server
            .max_decoding_message_size(MAX_REQUEST_BYTES)
            .max_encoding_message_size(MAX_RESPONSE_BYTES)
    };
}

/// Every admin service, registered in one place, each with the message
/// size limits.
pub fn routes(state: &AppState) -> tonic::service::RoutesBuilder {
    use v1::{
        agent_service_server::AgentServiceServer, coder_service_server::CoderServiceServer,
        coding_task_service_server::CodingTaskServiceServer,
        config_service_server::ConfigServiceServer,
        constitution_service_server::ConstitutionServiceServer,
        decision_service_server::DecisionServiceServer,
        knowledge_service_server::KnowledgeServiceServer, llm_service_server::LlmServiceServer,
        mission_service_server::MissionServiceServer,
        registry_service_server::RegistryServiceServer, tenant_service_server::TenantServiceServer,
        token_service_server::TokenServiceServer,
        windows_lane_service_server::WindowsLaneServiceServer,
    };
    let s = state;
    let mut b = tonic::service::Routes::builder();
    b.add_service(limited!(TenantServiceServer::new(tenants::Tenants::new(
        s.clone()
    ))))
    .add_service(limited!(AgentServiceServer::new(agents::Agents::new(
        s.clone()
    ))))
    .add_service(limited!(DecisionServiceServer::new(
        decisions::Decisions::new(s.clone())
    )))
    .add_service(limited!(ConfigServiceServer::new(config::Configs::new(
        s.clone()
    ))))
    .add_service(limited!(TokenServiceServer::new(tokens::Tokens::new(
        s.clone()
    ))))
    .add_service(limited!(LlmServiceServer::new(llm::Llms::new(s.clone()))))
    .add_service(limited!(RegistryServiceServer::new(
        registry::Registries::new(s.clone())
    )))
    .add_service(limited!(CoderServiceServer::new(coders::Coders::new(
        s.clone()
    ))))
    .add_service(limited!(CodingTaskServiceServer::new(
        coding_tasks::CodingTasks::new(s.clone())
    )))
    .add_service(limited!(WindowsLaneServiceServer::new(
        windows::WindowsLanes::new(s.clone())
    )))
    .add_service(limited!(MissionServiceServer::new(
        missions::Missions::new(s.clone())
    )))
    .add_service(limited!(ConstitutionServiceServer::new(
        constitution::Constitutions::new(s.clone())
    )))
    .add_service(limited!(KnowledgeServiceServer::new(
        knowledge::Knowledge::new(s.clone())
    )));
    b
}

/// The services reflection lists beside [`SERVED_SERVICES`].
pub use genesis_proto::reflection::OPEN_SERVICES;

/// The service's name: its command name, its telemetry `service.name`, its
/// metrics and PostgreSQL's `application_name` of every connection it opens.
pub const SERVICE_NAME: &str = "genesis-control";

/// Build the shared state from configuration (pools are lazy: an
/// unreachable database surfaces in `/readyz` and in RPCs, not here).
pub async fn state(
    config: ControlConfig,
    shutdown: CancellationToken,
) -> Result<AppState, ControlError> {
    config.validate()?;
    // Names and bindings only: control never reads a key (genesis_llm::keys).
    let keys = genesis_llm::load_key_set(std::env::vars_os(), config.llm_key_dir.as_deref())
        .map_err(|e| ControlError::Config(e.to_string()))?;
    for ignored in &keys.ignored {
        tracing::warn!(entry = %ignored.entry, reason = %ignored.reason, "provider keys: a key-directory entry is not a key and can never be named");
    }
    tracing::info!(keys = ?keys.set.names().collect::<Vec<_>>(), "provider keys a preset may name");
    let store = Store::connect(
        &config.database_url,
        StoreOptions {
            application_name: Some(SERVICE_NAME.to_owned()),
            ..StoreOptions::default()
        },
    )
    .await?;
    let locks = PgPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(genesis_store::connect_options(
            &config.database_url,
            Some(SERVICE_NAME),
        )?);
    let lanes = lanes::Lanes::connect(&config, &store).await;
    let mut state = AppState::new(store, config, locks, shutdown);
    state.lanes = std::sync::Arc::new(lanes);
    state.llm_keys = std::sync::Arc::new(keys.set);
    Ok(state)
}

/// Run control until `shutdown`: gRPC on `grpc`, HTTP on `http`, and the
/// background loops.
pub async fn run(
    config: ControlConfig,
    grpc: TcpListener,
    http: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), ControlError> {
    // The certificate files are read before anything starts: a missing or
    // mismatched one stops the process with its setting named.
    let tls = config
        .tls
        .load(None)
        .map_err(|e| ControlError::Config(e.to_string()))?;
    let state = state(config, shutdown.clone()).await?;
    genesis_telemetry::export_metrics(SERVICE_NAME, {
        let metrics = state.metrics.clone();
        move || metrics.families()
    });
    let deadline = Duration::from_secs(state.config.shutdown_deadline_secs);
    let tracker = TaskTracker::new();
    let loops = shutdown.child_token();

    // One LISTEN connection for every loop below (crate::notices).
    let mut notices = Notices::new(state.hub.clone());
    let due = notices.due();
    let tenants = notices.tenants();
    tracker.spawn(notices.run(state.locks.clone(), loops.clone()));
    tracker.spawn(run_publisher(
        state.clone(),
        PublisherSettings::from(state.config.as_ref()),
        due,
        loops.clone(),
    ));
    tracker.spawn(lanes::run_soa_heartbeats(state.clone(), loops.clone()));
    tracker.spawn(crate::journal_retention::run(
        state.clone(),
        Duration::from_secs(state.config.journal_prune_every_secs),
        loops.clone(),
    ));
    tracker.spawn(run_bootstrap(
        state.clone(),
        Duration::from_secs(state.config.bootstrap_rescan_secs),
        tenants,
        loops.clone(),
    ));

    let (health, health_service) = tonic_health::server::health_reporter();
    let health_service = limited!(health_service);
    for name in SERVED_SERVICES {
        health
            .set_service_status(*name, tonic_health::ServingStatus::Serving)
            .await;
    }
    health
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    // Reflection lists only what this server answers (not the
    // supervisor's AgentPod), in v1 and v1alpha.
    let (reflection, reflection_v1alpha) = genesis_proto::reflection::services(SERVED_SERVICES)
        .map_err(|e| ControlError::Transport(format!("reflection: {e}")))?;

    let mut builder = routes(&state);
    builder
        .add_service(health_service)
        .add_service(limited!(reflection))
        .add_service(limited!(reflection_v1alpha));
    if let Some(tls) = &tls {
        tracing::info!(?tls, "gRPC and dashboard serve TLS");
        tracker.spawn(
            tls.clone()
                .watch(state.config.tls.reload_every(), loops.clone()),
        );
    }
    let tls_config = |alpn| {
        tls.as_ref()
            .map(|t| t.server_config(alpn))
            .transpose()
            .map_err(|e| ControlError::Config(e.to_string()))
    };
    let grpc_tls = tls_config(genesis_net::ALPN_GRPC)?;
    let dashboard_tls = tls_config(genesis_net::ALPN_HTTP)?;
    let grpc_shutdown = shutdown.clone();
    let grpc_router = tonic::transport::Server::builder()
        // A peer out of failed authentications is refused before the auth
        // layer looks its token up.
        .layer(genesis_proto::peer_limit::FailedAuthLayer::new(
            state.auth_failures.clone(),
            crate::auth::is_open_path,
        ))
        .layer(crate::auth::layer(state.clone()))
        .add_routes(builder.routes());
    let grpc_server: std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), tonic::transport::Error>> + Send>,
    > = match grpc_tls {
        Some(config) => Box::pin(grpc_router.serve_with_incoming_shutdown(
            genesis_net::TlsListener::new(grpc, config)?.into_incoming(),
            grpc_shutdown.cancelled_owned(),
        )),
        None => Box::pin(grpc_router.serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(grpc).with_nodelay(Some(true)),
            grpc_shutdown.cancelled_owned(),
        )),
    };

    let http_shutdown = shutdown.clone();
    let http_server = axum::serve(http, crate::http::router(state.clone()))
        .with_graceful_shutdown(async move { http_shutdown.cancelled().await });
    if let Some(addr) = state.config.dashboard_listen()? {
        let listener = TcpListener::bind(addr).await?;
        tracing::info!(addr = %listener.local_addr()?, tls = dashboard_tls.is_some(), "dashboard serving");
        let dash_shutdown = shutdown.clone();
        let app = crate::dashboard::router(state.clone())
            .into_make_service_with_connect_info::<std::net::SocketAddr>();
        let served: std::pin::Pin<
            Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>,
        > = match dashboard_tls {
            // `tap_io` (a no-op) is how axum hands a custom listener's peer
            // address to `ConnectInfo`.
            Some(config) => {
                use axum::serve::ListenerExt as _;
                use std::future::IntoFuture as _;
                let tls_listener = genesis_net::TlsListener::new(listener, config)?;
                Box::pin(
                    axum::serve(tls_listener.tap_io(|_| {}), app)
                        .with_graceful_shutdown(dash_shutdown.cancelled_owned())
                        .into_future(),
                )
            }
            None => Box::pin(
                axum::serve(listener, app)
                    .with_graceful_shutdown(dash_shutdown.cancelled_owned())
                    .into_future(),
            ),
        };
        tracker.spawn(async move {
            let served = served.await;
            if let Err(e) = served {
                tracing::error!(error = %e, "dashboard server failed");
            }
        });
    }

    tracing::info!("genesis-control serving");
    let grpc_task = tokio::spawn(grpc_server);
    let http_task = tokio::spawn(async move { http_server.await });

    shutdown.cancelled().await;
    tracing::info!("shutdown: stopping loops and draining RPCs");
    health
        .set_not_serving::<v1::tenant_service_server::TenantServiceServer<tenants::Tenants>>()
        .await;
    tracker.close();
    let drained = tokio::time::timeout(deadline, async {
        tracker.wait().await;
        let g = grpc_task.await;
        let h = http_task.await;
        (g, h)
    })
    .await;
    state.store.close().await;
    state.locks.close().await;
    match drained {
        Ok((Ok(Ok(())), Ok(Ok(())))) => Ok(()),
        Ok((Ok(Err(e)), _)) => Err(ControlError::Transport(e.to_string())),
        Ok((_, Ok(Err(e)))) => Err(ControlError::Io(e)),
        Ok(_) => Err(ControlError::Transport("a server task panicked".into())),
        Err(_) => {
            tracing::warn!("shutdown: drain deadline passed; exiting");
            Ok(())
        }
    }
}
