//! `genesis.v1.TenantService`: tenants, the standing-agents switch and
//! feature flags. CreateTenant is platform-wide only, and so is setting a
//! feature that costs the platform (genesis-core
//! `ceilings::PLATFORM_FEATURES`); a tenant-bound caller sees and changes
//! its own tenant only. Must never bootstrap here: flipping the switch
//! notifies `genesis_tenants` and the bootstrap loop reacts.

use genesis_core::ceilings::is_platform_feature;
use genesis_core::validate::{MAX_NAME_LEN, validate_name};
use genesis_proto::convert::invalid_argument;
use genesis_proto::v1::{self, tenant_service_server::TenantService};
use genesis_store::tenants::FEATURE_FLAGS;
use tonic::{Request, Response, Status};

use super::{observe, record_ids};
use crate::auth::caller;
use crate::bootstrap::{PROMPT_REDACTOR_FLAG, set_redactor_feature};
use crate::convert;
use crate::state::AppState;
use crate::status::{control_status, field_status, store_status};

/// The service.
#[derive(Clone)]
pub struct Tenants {
    state: AppState,
}

impl Tenants {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

#[tonic::async_trait]
impl TenantService for Tenants {
    async fn create_tenant(
        &self,
        request: Request<v1::CreateTenantRequest>,
    ) -> Result<Response<v1::Tenant>, Status> {
        observe(
            &self.state,
            "/genesis.v1.TenantService/CreateTenant",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                caller.require_platform()?;
                validate_name("name", &req.name, MAX_NAME_LEN)
                    .map_err(|e| field_status("name", e))?;
                let store = &self.state.store;
                let mut t = store
                    .tenants()
                    .create(&req.name)
                    .await
                    .map_err(store_status)?;
                if req.standing_agents_enabled {
                    t = store
                        .tenants()
                        .set_standing_agents_enabled(t.id, true)
                        .await
                        .map_err(store_status)?;
                }
                record_ids(t.id, None);
                Ok(convert::tenant(&t))
            },
        )
        .await
    }

    async fn get_tenant(
        &self,
        request: Request<v1::GetTenantRequest>,
    ) -> Result<Response<v1::Tenant>, Status> {
        observe(&self.state, "/genesis.v1.TenantService/GetTenant", async {
            let caller = caller(&request)?;
            let t = caller.tenant("tenant_id", &request.get_ref().tenant_id)?;
            record_ids(t, None);
            let row = self
                .state
                .store
                .tenants()
                .get(t)
                .await
                .map_err(store_status)?;
            Ok(convert::tenant(&row))
        })
        .await
    }

    async fn list_tenants(
        &self,
        request: Request<v1::ListTenantsRequest>,
    ) -> Result<Response<v1::ListTenantsResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.TenantService/ListTenants",
            async {
                let caller = caller(&request)?;
                let rows = match caller.tenant_id {
                    None => self
                        .state
                        .store
                        .tenants()
                        .list()
                        .await
                        .map_err(store_status)?,
                    Some(own) => vec![
                        self.state
                            .store
                            .tenants()
                            .get(own)
                            .await
                            .map_err(store_status)?,
                    ],
                };
                Ok(v1::ListTenantsResponse {
                    tenants: rows.iter().map(convert::tenant).collect(),
                })
            },
        )
        .await
    }

    async fn set_standing_agents(
        &self,
        request: Request<v1::SetStandingAgentsRequest>,
    ) -> Result<Response<v1::Tenant>, Status> {
        observe(
            &self.state,
            "/genesis.v1.TenantService/SetStandingAgents",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                record_ids(t, None);
                let row = self
                    .state
                    .store
                    .tenants()
                    .set_standing_agents_enabled(t, req.enabled)
                    .await
                    .map_err(store_status)?;
                Ok(convert::tenant(&row))
            },
        )
        .await
    }

    async fn set_feature(
        &self,
        request: Request<v1::SetFeatureRequest>,
    ) -> Result<Response<v1::Tenant>, Status> {
        observe(&self.state, "/genesis.v1.TenantService/SetFeature", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            validate_name("name", &req.name, 64).map_err(|e| field_status("name", e))?;
            if !FEATURE_FLAGS.contains(&req.name.as_str()) {
                return Err(invalid_argument(
                    "name",
                    format!(
                        "unknown feature {:?}; known: {}",
                        req.name,
                        FEATURE_FLAGS.join(", ")
                    ),
                ));
            }
            if is_platform_feature(&req.name) && !caller.is_platform() {
                return Err(Status::permission_denied(format!(
                    "feature {:?} is the platform's to grant: only a platform token may set it",
                    req.name
                )));
            }
            record_ids(t, None);
            let row = if req.name == PROMPT_REDACTOR_FLAG {
                let (row, changed) =
                    set_redactor_feature(&self.state.store, &self.state.locks, t, req.enabled)
                        .await
                        .map_err(control_status)?;
                tracing::info!(tenant = %t, enabled = req.enabled, redactors = changed, "prompt-redactor feature set");
                row
            } else {
                self.state
                    .store
                    .tenants()
                    .set_feature_flag(t, &req.name, req.enabled)
                    .await
                    .map_err(store_status)?
            };
            Ok(convert::tenant(&row))
        })
        .await
    }
}
