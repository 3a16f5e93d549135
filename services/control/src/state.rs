//! The state every admin service and background loop shares: the store, the
//! configuration, the metrics, the live-turn hub and the small control-owned
//! connection pool used for LISTEN and advisory locks. Must never hold
//! per-request or per-tenant mutable state: it is cloned into every task.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use genesis_store::Store;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::config::ControlConfig;
use crate::metrics::Metrics;
use crate::watch::TurnHub;

/// Cheap to clone; one per process.
#[derive(Clone)]
pub struct AppState {
    /// Every row goes through the store.
    pub store: Store,
    /// The effective configuration.
    pub config: Arc<ControlConfig>,
    /// Process metrics.
    pub metrics: Arc<Metrics>,
    /// Fan-out of `genesis_turns` / `genesis_messages` to `WatchTurns`.
    pub hub: TurnHub,
    /// Connections of the login user for advisory locks (the bootstrap's
    /// singleton guard). Holds no tenant data.
    pub locks: PgPool,
    /// Cancelled when the process shuts down (ends `WatchTurns` streams).
    pub shutdown: CancellationToken,
    /// The worker-lane clients (registry, coders, Windows lane); each may be
    /// unavailable, and its RPCs then say why.
    pub lanes: Arc<crate::services::lanes::Lanes>,
    /// Per-tenant rate limits of the admin surface.
    pub limits: Arc<crate::limits::RateLimits>,
    /// Failed authentications per peer address (gRPC and dashboard
    /// sign-in), checked before any token lookup.
    pub auth_failures: Arc<genesis_proto::peer_limit::FailedAuthLimit>,
    /// Open live streams per token and per tenant.
    pub streams: Arc<crate::streams::StreamSlots>,
    /// The provider keys a preset may name, with who may name each: names
    /// and bindings only (genesis_llm::keys). The well-known names until
    /// [`crate::server::state`] reads the deployment's.
    pub llm_keys: Arc<genesis_core::llm_keys::KeySet>,
    nats_ready: Arc<AtomicBool>,
    /// Tenants whose default preset this process has seen seeded (the
    /// store's once-per-tenant row is the truth; this only spares the
    /// bootstrap rescan a write transaction per tenant).
    seeded: Arc<std::sync::Mutex<std::collections::HashSet<uuid::Uuid>>>,
}

impl AppState {
    /// Assemble the shared state.
    pub fn new(
        store: Store,
        config: ControlConfig,
        locks: PgPool,
        shutdown: CancellationToken,
    ) -> Self {
        AppState {
            store,
            limits: Arc::new(crate::limits::RateLimits::from_config(&config)),
            streams: Arc::new(crate::streams::StreamSlots::from_config(&config)),
            auth_failures: Arc::new(genesis_proto::peer_limit::FailedAuthLimit::new(
                config.auth_failures_per_minute,
                usize::try_from(config.auth_failure_peers).unwrap_or(usize::MAX),
            )),
            config: Arc::new(config),
            metrics: Arc::new(Metrics::default()),
            hub: TurnHub::new(1024),
            locks,
            shutdown,
            lanes: Arc::new(crate::services::lanes::Lanes::default()),
            llm_keys: Arc::new(genesis_core::llm_keys::KeySet::well_known()),
            nats_ready: Arc::new(AtomicBool::new(false)),
            seeded: Arc::default(),
        }
    }

    /// Whether this process already saw `tenant`'s default preset seeded.
    pub fn seeded(&self, tenant: uuid::Uuid) -> bool {
        self.seeded.lock().is_ok_and(|s| s.contains(&tenant))
    }

    /// Remember that `tenant`'s default preset is seeded.
    pub fn mark_seeded(&self, tenant: uuid::Uuid) {
        if let Ok(mut s) = self.seeded.lock() {
            s.insert(tenant);
        }
    }

    /// Record whether the publisher currently holds a working JetStream
    /// connection (`/readyz`).
    pub fn set_nats_ready(&self, ready: bool) {
        self.nats_ready.store(ready, Ordering::Relaxed);
    }

    /// Whether NATS was reachable at the publisher's last attempt.
    pub fn nats_ready(&self) -> bool {
        self.nats_ready.load(Ordering::Relaxed)
    }

    /// The standing-agents gate at both levels for one tenant.
    pub async fn standing_agents_on(&self, tenant_id: uuid::Uuid) -> Result<bool, tonic::Status> {
        if !self.config.standing_agents_enabled {
            return Ok(false);
        }
        let tenant = self
            .store
            .tenants()
            .get(tenant_id)
            .await
            .map_err(crate::status::store_status)?;
        Ok(tenant.standing_agents_on())
    }
}
