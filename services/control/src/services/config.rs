//! `genesis.v1.ConfigService`: the DB-first `system_configs` layer (spec
//! §3.6), tenant or global scope. A tenant-bound caller reads the global
//! layer and writes only its own; the global layer is written by a
//! platform-wide caller only. A key that bounds spend or load
//! (genesis-core `ceilings`) a tenant-bound caller may only tighten against
//! the platform's value for its tenant; a platform-wide caller sets either
//! without limit. Only known keys are written. Must never cache a value:
//! the store reads live.

use genesis_core::AgentDispatcherOptions;
use genesis_core::ceilings::{TenantWriteError, ceiling, check_tenant_value};
use genesis_core::options::keys;
use genesis_proto::convert::invalid_argument;
use genesis_proto::v1::{self, config_service_server::ConfigService};
use genesis_store::config::MAX_CONFIG_VALUE_BYTES;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use super::{observe, record_ids};
use crate::auth::{Caller, caller};
use crate::state::AppState;
use crate::status::{opt_text, opt_uuid, store_status, text};

/// Longest key accepted (the store's limit).
const MAX_KEY_BYTES: usize = 200;

/// The service.
#[derive(Clone)]
pub struct Configs {
    state: AppState,
}

impl Configs {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

fn entry(key: &str, value: &str, tenant: Option<Uuid>) -> v1::ConfigEntry {
    v1::ConfigEntry {
        key: key.to_owned(),
        value: value.to_owned(),
        scope: if tenant.is_some() { "tenant" } else { "global" }.to_owned(),
        tenant_id: tenant.map(|t| t.to_string()),
        updated_at: None,
    }
}

fn tenant_of(caller: &Caller, value: Option<&str>) -> Result<Option<Uuid>, Status> {
    let t = opt_uuid("tenant_id", value)?;
    if let Some(t) = t {
        caller.authorize_tenant(t)?;
        record_ids(t, None);
    }
    Ok(t)
}

/// The platform's options for `tenant`, the bound of every value a
/// tenant-bound caller writes (a config key, a mode's budget override):
/// the platform's row for the tenant, else the global row, else the
/// default.
pub(crate) async fn platform_options(
    state: &AppState,
    tenant: Uuid,
) -> Result<AgentDispatcherOptions, Status> {
    let layers = state
        .store
        .config()
        .layers(Some(tenant))
        .await
        .map_err(store_status)?;
    let (platform, _) =
        AgentDispatcherOptions::default().with_valid_system_configs(&layers.platform);
    Ok(platform)
}

#[tonic::async_trait]
impl ConfigService for Configs {
    async fn get_config(
        &self,
        request: Request<v1::GetConfigRequest>,
    ) -> Result<Response<v1::ConfigEntry>, Status> {
        observe(&self.state, "/genesis.v1.ConfigService/GetConfig", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = tenant_of(&caller, req.tenant_id.as_deref())?;
            text("key", &req.key, MAX_KEY_BYTES)?;
            let config = self.state.store.config();
            let value = config
                .get(t, &req.key)
                .await
                .map_err(store_status)?
                .ok_or_else(|| {
                    Status::not_found(format!("config key {:?} is set in neither scope", req.key))
                })?;
            // Which layer answered: the tenant's own when it differs from the
            // global one (equal values read as global).
            let scope_tenant = match t {
                Some(t) => {
                    let global = config.get(None, &req.key).await.map_err(store_status)?;
                    (global.as_deref() != Some(value.as_str())).then_some(t)
                }
                None => None,
            };
            Ok(entry(&req.key, &value, scope_tenant))
        })
        .await
    }

    async fn set_config(
        &self,
        request: Request<v1::SetConfigRequest>,
    ) -> Result<Response<v1::ConfigEntry>, Status> {
        observe(&self.state, "/genesis.v1.ConfigService/SetConfig", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = tenant_of(&caller, req.tenant_id.as_deref())?;
            text("key", &req.key, MAX_KEY_BYTES)?;
            opt_text("value", &req.value, MAX_CONFIG_VALUE_BYTES)?;
            let scope_tenant = match (req.scope.as_str(), t) {
                ("global", None) => {
                    caller.require_platform()?;
                    None
                }
                ("global", Some(_)) => {
                    return Err(invalid_argument(
                        "tenant_id",
                        "must be unset for scope global",
                    ));
                }
                ("tenant", Some(t)) => Some(t),
                ("tenant", None) => {
                    return Err(invalid_argument("tenant_id", "required for scope tenant"));
                }
                ("", _) => return Err(invalid_argument("scope", "required: tenant or global")),
                (other, _) => {
                    return Err(invalid_argument(
                        "scope",
                        format!("unknown scope {other:?}: tenant or global"),
                    ));
                }
            };
            // Only a key some rule reads is written: a misspelt one would
            // sit in the table, read by nothing, the operator none the wiser.
            if !keys::ALL.contains(&req.key.as_str()) {
                return Err(invalid_argument(
                    "key",
                    format!(
                        "unknown config key {:?}; known: {}",
                        req.key,
                        keys::ALL.join(", ")
                    ),
                ));
            }
            // The value must parse as the rule reading it will parse it: a
            // value the next tick would refuse is refused here, naming the
            // key, and nothing is written.
            AgentDispatcherOptions::default()
                .apply_system_config(&req.key, &req.value)
                .map_err(|e| invalid_argument("value", e.to_string()))?;
            let config = self.state.store.config();
            match scope_tenant {
                Some(t) if !caller.is_platform() => {
                    if ceiling(&req.key).is_some() {
                        let platform = platform_options(&self.state, t).await?;
                        check_tenant_value(&req.key, &req.value, &platform).map_err(
                            |e| match e {
                                TenantWriteError::Invalid(e) => {
                                    invalid_argument("value", e.to_string())
                                }
                                beyond => Status::permission_denied(beyond.to_string()),
                            },
                        )?;
                    }
                    config.set_by_tenant(t, &req.key, &req.value).await
                }
                _ => config.set(scope_tenant, &req.key, &req.value).await,
            }
            .map_err(store_status)?;
            Ok(entry(&req.key, &req.value, scope_tenant))
        })
        .await
    }

    async fn list_config(
        &self,
        request: Request<v1::ListConfigRequest>,
    ) -> Result<Response<v1::ListConfigResponse>, Status> {
        observe(&self.state, "/genesis.v1.ConfigService/ListConfig", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = tenant_of(&caller, req.tenant_id.as_deref())?;
            let config = self.state.store.config();
            let global = config.effective(None).await.map_err(store_status)?;
            let entries = match t {
                None => global.iter().map(|(k, v)| entry(k, v, None)).collect(),
                Some(t) => config
                    .effective(Some(t))
                    .await
                    .map_err(store_status)?
                    .iter()
                    .map(|(k, v)| {
                        let own = global.get(k) != Some(v);
                        entry(k, v, own.then_some(t))
                    })
                    .collect(),
            };
            Ok(v1::ListConfigResponse { entries })
        })
        .await
    }
}
