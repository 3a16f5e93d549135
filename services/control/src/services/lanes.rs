//! The worker-lane clients control's admin services share: the coordination
//! registry (NATS KV), the on-demand coder spawner (Kubernetes) and the
//! Windows lane (the pool's HTTP API), each optional because each depends on
//! infrastructure a deployment may not have; plus the SOA's self-registration
//! in the registry and its minute heartbeat. Built once at start by
//! [`Lanes::connect`]. Must never fail the process when a lane's backend is
//! missing: the lane's RPCs answer the precise reason instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use genesis_lanes::LanesError;
use genesis_lanes::coders::CoderSpawner;
use genesis_lanes::registry::{AgentRegistration, AgentRole, Registry, RegistryConfig};
use genesis_lanes::windows::{WindowsFeature, WindowsLane, WindowsPoolConfig};
use genesis_store::Store;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::config::ControlConfig;
use crate::state::AppState;

/// The tenant feature flag that gates the Windows lane.
pub const WINDOWS_POOL_FLAG: &str = "windows-pool";
/// How often the SOA's registry entry is refreshed (well inside the 5-minute expiry).
pub const SOA_HEARTBEAT: Duration = Duration::from_secs(60);
/// The SOA's registry capability.
pub const ORCHESTRATION_CAPABILITY: &str = "orchestration";
/// How long to wait for NATS when opening the registry at start.
const NATS_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP timeout of a Windows-lane call that carries no budget of its own.
const WINDOWS_HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// The tenant's `windows-pool` flag read from the store on every verb, so an
/// operator's switch takes effect at once. A read failure counts as off
/// (fail closed).
#[derive(Clone)]
pub struct StoreWindowsFeature {
    store: Store,
}

impl StoreWindowsFeature {
    /// Read flags through `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

#[async_trait]
impl WindowsFeature for StoreWindowsFeature {
    async fn windows_pool_enabled(&self, tenant: Uuid) -> bool {
        match self.store.tenants().get(tenant).await {
            Ok(t) => t.feature_enabled(WINDOWS_POOL_FLAG),
            Err(e) => {
                tracing::warn!(%tenant, error = %e, "windows-pool flag unreadable; treated as off");
                false
            }
        }
    }
}

/// The lane clients; each `None`/`Err` records why it is unavailable.
pub struct Lanes {
    /// The coordination registry, when NATS was reachable at start.
    pub registry: Result<Registry, String>,
    /// The coder spawner, when a Kubernetes configuration was found.
    pub coders: Result<CoderSpawner, String>,
    /// The image coder Jobs run.
    pub coder_image: String,
    /// The Windows lane, when a pool URL is configured.
    pub windows: Option<Arc<WindowsLane>>,
    /// The SOAs this replica bootstrapped: tenant → instance (also the SOA's
    /// registry agent id).
    soa_entries: Mutex<HashMap<Uuid, Uuid>>,
}

impl std::fmt::Debug for Lanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("registry", &self.registry.is_ok())
            .field("coders", &self.coders.is_ok())
            .field("windows", &self.windows.is_some())
            .finish()
    }
}

impl Default for Lanes {
    /// No lane available (the state before [`Lanes::connect`]).
    fn default() -> Self {
        Lanes {
            registry: Err("the registry is not configured".into()),
            coders: Err("no Kubernetes configuration was loaded".into()),
            coder_image: String::new(),
            windows: None,
            soa_entries: Mutex::new(HashMap::new()),
        }
    }
}

impl Lanes {
    /// Open every lane the configuration and the environment allow.
    pub async fn connect(config: &ControlConfig, store: &Store) -> Lanes {
        genesis_lanes::install_crypto_provider();
        let registry = match tokio::time::timeout(
            NATS_CONNECT_TIMEOUT,
            config
                .nats
                .connect(&config.nats_url, crate::server::SERVICE_NAME, |o| o),
        )
        .await
        {
            Ok(Ok(client)) => Registry::connect(
                client,
                RegistryConfig {
                    bucket: config.registry_bucket.clone(),
                    ..RegistryConfig::default()
                },
            )
            .await
            .map_err(|e| e.to_string()),
            // Redacted by genesis-net: the URL may carry a password.
            Ok(Err(e)) => Err(format!("NATS unreachable: {e}")),
            Err(_) => Err("NATS did not answer in time".to_owned()),
        };
        if let Err(e) = &registry {
            tracing::warn!(error = %e, "registry lane unavailable");
        }
        let coders = match &config.coder_kubeconfig {
            Some(path) => CoderSpawner::from_kubeconfig(path, config.coder_namespace.clone()).await,
            None => CoderSpawner::from_env(config.coder_namespace.clone()).await,
        }
        .map_err(|e| e.to_string());
        if let Err(e) = &coders {
            tracing::info!(error = %e, "coder lane unavailable");
        }
        let windows = match config.windows_pool_url.as_deref() {
            Some(url) if !url.trim().is_empty() => {
                let feature: Arc<dyn WindowsFeature> =
                    Arc::new(StoreWindowsFeature::new(store.clone()));
                match WindowsLane::new(
                    WindowsPoolConfig {
                        base_url: url.to_owned(),
                        credential: config.windows_pool_token.clone().unwrap_or_default(),
                        http_timeout: WINDOWS_HTTP_TIMEOUT,
                    },
                    feature,
                    Arc::new(super::windows::StoreHolds::new(store.clone())),
                ) {
                    Ok(lane) => Some(Arc::new(lane)),
                    Err(e) => {
                        tracing::warn!(error = %e, "windows lane unavailable");
                        None
                    }
                }
            }
            _ => None,
        };
        Lanes {
            registry,
            coders,
            coder_image: config.coder_image.clone(),
            windows,
            soa_entries: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Uuid>> {
        self.soa_entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether this replica registered `instance` as `tenant`'s SOA and
    /// keeps its entry alive ([`Self::heartbeat_soas`]).
    pub fn knows_soa(&self, tenant: Uuid, instance: Uuid) -> bool {
        self.entries().get(&tenant) == Some(&instance)
    }

    /// Make sure the tenant's SOA `instance` is in the registry (role
    /// Orchestration, capability `orchestration`) so it shows in the listing.
    /// The entry's id is the instance's own, so every control replica
    /// refreshes the same entry and a restarted replica adds no duplicate.
    pub async fn ensure_soa_registered(
        &self,
        tenant: Uuid,
        instance: Uuid,
    ) -> Result<(), LanesError> {
        let Ok(registry) = &self.registry else {
            return Ok(());
        };
        let entry = registry
            .register_fixed(tenant, instance, soa_registration(instance))
            .await?;
        let fresh = self.entries().insert(tenant, instance) != Some(instance);
        if fresh {
            tracing::info!(%tenant, %instance, agent = %entry.agent_id, "registry: SOA registered");
        }
        Ok(())
    }

    /// Refresh every SOA entry this replica bootstrapped (an expired one is
    /// written again).
    pub async fn heartbeat_soas(&self) {
        let all: Vec<(Uuid, Uuid)> = self.entries().iter().map(|(k, v)| (*k, *v)).collect();
        for (tenant, instance) in all {
            if let Err(e) = self.ensure_soa_registered(tenant, instance).await {
                tracing::warn!(%tenant, error = %e, "registry: SOA heartbeat failed");
            }
        }
    }
}

/// The SOA's registration (spec §2.2: role/type orchestration).
pub fn soa_registration(instance: Uuid) -> AgentRegistration {
    let mut metadata = std::collections::BTreeMap::new();
    metadata.insert("agentType".to_owned(), "Soa".to_owned());
    metadata.insert("instanceId".to_owned(), instance.to_string());
    AgentRegistration {
        name: "Strategic Orchestration Agent".to_owned(),
        role: AgentRole::Orchestration,
        capabilities: vec![ORCHESTRATION_CAPABILITY.to_owned()],
        endpoint: String::new(),
        metadata,
    }
}

/// The SOA heartbeat loop: every [`SOA_HEARTBEAT`] until `shutdown`.
pub async fn run_soa_heartbeats(state: AppState, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(SOA_HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => state.lanes.heartbeat_soas().await,
        }
    }
}

/// The one `LanesError` → `Status` mapping of the registry and coder lanes.
pub fn lanes_status(err: LanesError) -> tonic::Status {
    use genesis_proto::convert::invalid_argument;
    match err {
        LanesError::Validation { field, message } => invalid_argument(field, message),
        LanesError::NotFound { kind, id } => {
            tonic::Status::not_found(format!("{kind} {id} not found"))
        }
        // Nothing to read yet (a pending Job): asking later may succeed.
        LanesError::NotStarted(m) => tonic::Status::failed_precondition(m),
        LanesError::ClusterUnavailable(m)
        | LanesError::Kubernetes {
            status: 0,
            message: m,
        } => tonic::Status::failed_precondition(format!("no Kubernetes cluster reachable: {m}")),
        LanesError::Kubernetes { status, message } => {
            tracing::warn!(status, error = %message, "kubernetes API refused a coder call");
            tonic::Status::unavailable(format!("the Kubernetes API answered {status}"))
        }
        LanesError::Contended(id) => {
            tonic::Status::aborted(format!("registry entry {id} is contended; retry"))
        }
        LanesError::Store(m) | LanesError::Corrupt { message: m, .. } => {
            tracing::error!(error = %m, "registry store failure answered UNAVAILABLE");
            tonic::Status::unavailable("the registry is unavailable")
        }
    }
}

/// The registry, or UNAVAILABLE naming why it is not there.
pub fn registry(state: &AppState) -> Result<&Registry, tonic::Status> {
    state
        .lanes
        .registry
        .as_ref()
        .map_err(|why| tonic::Status::unavailable(format!("the registry is unavailable: {why}")))
}
