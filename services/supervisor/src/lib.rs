//! genesis-supervisor: the only service agent pods talk to. Serves
//! `genesis.v1.AgentPod` (ClaimTick with its bundle, RenewLease, governed
//! InvokeTool, RecordCallAttempt with server-side cost, CompleteTick as the
//! single passivation write) behind the agent-pod token gate, plus
//! `grpc.health.v1`, reflection (v1 and v1alpha, open, listing only what
//! this server answers) and HTTP `/healthz` `/readyz` `/metrics`. Tick rules
//! come from genesis-core and every write from genesis-store. Must never
//! trust a cost, decision kind or toolset from a pod, and never serve an
//! admin surface.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod auth;
pub mod bundle;
pub mod cache;
pub mod config;
pub mod error;
pub mod http;
pub mod metrics;
pub mod ops;
pub mod presets;
pub mod redaction;
pub mod rpc;
pub mod tools;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use genesis_proto::v1::agent_pod_server::AgentPodServer;
use genesis_store::{Store, StoreOptions};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::{LogFormat, SupervisorConfig};
pub use presets::DefaultProvider;
pub use rpc::{AgentPodService, ServiceSettings};
pub use tools::{AllowAll, Governance, Tool, ToolRegistry};

/// The AgentPod service's former module path, kept for the integration
/// tests and the fuzz body that name `service::MAX_TOOL_ARGUMENTS_BYTES`.
pub mod service {
    pub use crate::rpc::{AgentPodService, MAX_TOOL_ARGUMENTS_BYTES, ServiceSettings};
}

/// The fleet's gRPC message size limits (`genesis_proto::limits`). The
/// supervisor's largest legitimate request is a `CompleteTick` whose text the
/// store caps at `genesis_store::tick::MAX_COMPLETION_BYTES` (1 MiB); one
/// `InvokeTool` carries at most `rpc::MAX_TOOL_ARGUMENTS_BYTES`.
pub use genesis_proto::limits::{MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES};

const _: () = assert!(
    MAX_REQUEST_BYTES >= 2 * genesis_store::tick::MAX_COMPLETION_BYTES
        && MAX_REQUEST_BYTES > 4 * rpc::MAX_TOOL_ARGUMENTS_BYTES
);

/// The services this server answers besides the open ones
/// (`genesis_proto::reflection::OPEN_SERVICES`), as reflection lists them.
pub const SERVED_SERVICES: &[&str] =
    &[<AgentPodServer<AgentPodService> as tonic::server::NamedService>::NAME];

/// What [`serve`] runs with besides its listeners.
pub struct Parts {
    pub store: Store,
    pub registry: ToolRegistry,
    pub governance: Arc<dyn Governance>,
}

/// The service's name: its command name, its telemetry `service.name`, its
/// metrics and PostgreSQL's `application_name` of every connection it opens.
pub const SERVICE_NAME: &str = "genesis-supervisor";

/// Connect to the database and serve until `shutdown` is cancelled, with the
/// standard tool registry and the tenant's constitution as the governance
/// gate (rules cached per tenant for `DEFAULT_RULES_TTL`).
pub async fn run(
    config: SupervisorConfig,
    grpc_listener: TcpListener,
    http_listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let store_options = StoreOptions {
        batch: genesis_store::batch::BatchOptions {
            max: config.store_batch_max,
            workers: config.store_batch_workers,
            shared: config.store_batch_shared,
        },
        application_name: Some(SERVICE_NAME.to_owned()),
        ..StoreOptions::default()
    };
    let store = Store::connect(&config.database_url, store_options)
        .await
        .context("connecting to the database")?;
    let governance = Arc::new(tools::constitution_gate::ConstitutionGovernance::new(
        store.clone(),
        tools::constitution_gate::DEFAULT_RULES_TTL,
    ));
    let parts = Parts {
        store,
        registry: ToolRegistry::standard(),
        governance,
    };
    serve(config, parts, grpc_listener, http_listener, shutdown).await
}

/// Serve gRPC and HTTP on the given listeners until `shutdown` is
/// cancelled: ingress stops at once, in-flight calls get
/// `shutdown_grace_secs` to finish, then the rest is abandoned (a tick whose
/// completion was cut off keeps its event; its lease expires).
pub async fn serve(
    config: SupervisorConfig,
    parts: Parts,
    grpc_listener: TcpListener,
    http_listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let metrics = Arc::new(metrics::Metrics::default());
    metrics.observe_store_batches(parts.store.batch_counters());
    genesis_telemetry::export_metrics(SERVICE_NAME, {
        let metrics = metrics.clone();
        move || metrics.families()
    });
    let ops = Arc::new(ops::OpsProbe::new(
        config.alertmanager_url.clone(),
        Duration::from_secs(config.ops_window_secs),
    ));
    let sampler = ops::spawn_sampler(
        ops.clone(),
        parts.store.clone(),
        metrics.clone(),
        Duration::from_secs(config.ops_sample_secs),
        shutdown.child_token(),
    );
    let options = genesis_core::AgentDispatcherOptions {
        lease_ttl: config.lease_ttl(),
        max_attempts: config.max_attempts,
        ..Default::default()
    };
    let settings = ServiceSettings {
        options,
        lease_ttl: config.lease_ttl(),
        max_attempts: config.max_attempts,
        default_provider: config.default_provider,
        ledger_cache_bytes: config.ledger_cache_bytes(),
        catalogue_cache_bytes: config.catalogue_cache_bytes(),
        unpriced_price: config.unpriced_price(),
        journal_max_episode_bytes: config.journal_max_episode_bytes,
    };
    let service = AgentPodService::new(
        parts.store.clone(),
        settings,
        parts.registry,
        parts.governance,
        metrics.clone(),
        ops,
    );
    let token_cache = Arc::new(genesis_store::TokenCache::new(Duration::from_millis(
        config.token_cache_ms,
    )));
    let token_listener = tokio::spawn({
        let cache = token_cache.clone();
        let store = parts.store.clone();
        let stop = shutdown.child_token();
        async move { cache.listen(&store, stop.cancelled_owned()).await }
    });
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<AgentPodServer<AgentPodService>>()
        .await;
    let (reflection, reflection_v1alpha) =
        genesis_proto::reflection::services(SERVED_SERVICES).context("reflection")?;

    let grpc_addr = grpc_listener.local_addr().ok();
    let http_addr = http_listener.local_addr().ok();
    tracing::info!(?grpc_addr, ?http_addr, "genesis-supervisor serving");

    let grpc_shutdown = shutdown.clone();
    let auth_failures = Arc::new(genesis_proto::peer_limit::FailedAuthLimit::new(
        config.auth_failures_per_minute,
        usize::try_from(config.auth_failure_peers).unwrap_or(usize::MAX),
    ));
    let tls = config.server_tls()?;
    if let Some(tls) = &tls {
        tracing::info!(?tls, "gRPC serves TLS");
        tokio::spawn(
            tls.clone()
                .watch(config.tls.reload_every(), shutdown.child_token()),
        );
    }
    let grpc_tls = tls
        .as_ref()
        .map(|t| t.server_config(genesis_net::ALPN_GRPC))
        .transpose()?;
    let grpc_router = tonic::transport::Server::builder()
        // A peer out of failed authentications is refused before the auth
        // layer looks its token up.
        .layer(genesis_proto::peer_limit::FailedAuthLayer::new(
            auth_failures,
            auth::is_open_path,
        ))
        .layer(auth::layer(parts.store.clone(), token_cache))
        .add_service(
            health_service
                .max_decoding_message_size(MAX_REQUEST_BYTES)
                .max_encoding_message_size(MAX_RESPONSE_BYTES),
        )
        .add_service(
            reflection
                .max_decoding_message_size(MAX_REQUEST_BYTES)
                .max_encoding_message_size(MAX_RESPONSE_BYTES),
        )
        .add_service(
            reflection_v1alpha
                .max_decoding_message_size(MAX_REQUEST_BYTES)
                .max_encoding_message_size(MAX_RESPONSE_BYTES),
        )
        .add_service(
            AgentPodServer::new(service)
                .max_decoding_message_size(MAX_REQUEST_BYTES)
                .max_encoding_message_size(MAX_RESPONSE_BYTES),
        );
    let grpc: std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), tonic::transport::Error>> + Send>,
    > = match grpc_tls {
        Some(tls) => Box::pin(grpc_router.serve_with_incoming_shutdown(
            genesis_net::TlsListener::new(grpc_listener, tls)?.into_incoming(),
            grpc_shutdown.cancelled_owned(),
        )),
        None => Box::pin(grpc_router.serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(grpc_listener).with_nodelay(Some(true)),
            grpc_shutdown.cancelled_owned(),
        )),
    };
    let http_shutdown = shutdown.clone();
    let http = axum::serve(http_listener, http::router(parts.store.clone(), metrics))
        .with_graceful_shutdown(http_shutdown.cancelled_owned())
        .into_future();

    let mut grpc = tokio::spawn(grpc);
    let mut http = tokio::spawn(http);
    // A server that ends first (its graceful shutdown can finish before the
    // select sees the cancellation) must not be awaited again below: a
    // JoinHandle polled after completion panics.
    let (mut grpc_done, mut http_done) = (false, false);
    tokio::select! {
        r = &mut grpc => { grpc_done = true; shutdown.cancel(); r.context("gRPC task")?.context("gRPC server")?; }
        r = &mut http => { http_done = true; shutdown.cancel(); r.context("HTTP task")?.context("HTTP server")?; }
        () = shutdown.cancelled() => {}
    }
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let drained = tokio::time::timeout(grace, async {
        if !grpc_done {
            let _ = (&mut grpc).await;
        }
        if !http_done {
            let _ = (&mut http).await;
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            grace_secs = config.shutdown_grace_secs,
            "drain deadline passed; abandoning in-flight calls"
        );
        grpc.abort();
        http.abort();
    }
    // The sampler's token is a child of `shutdown`, cancelled by now.
    let _ = sampler.await;
    let _ = token_listener.await;
    parts.store.close().await;
    tracing::info!("genesis-supervisor stopped");
    Ok(())
}
