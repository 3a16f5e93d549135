//! `genesis.v1.RegistryService` (spec §2.2): the tenant-partitioned
//! coordination registry of worker agents over `genesis_lanes::Registry`
//! (NATS KV, heartbeat-expired after 5 minutes). The tenant always comes from
//! the caller's authorization, so one tenant never sees or touches another's
//! entries. A coder token registers under its own task's id (so every
//! replica converges on one entry per task) and heartbeats that entry only.
//! Must never keep registry state of its own: the bucket is the directory
//! every replica shares.

use std::collections::BTreeMap;

use genesis_lanes::registry::{AgentRegistration, AgentRole, RegistryEntry};
use genesis_proto::convert::{invalid_argument, timestamp_from_chrono};
use genesis_proto::v1::{self, registry_service_server::RegistryService};
use tonic::{Request, Response, Status};

use super::lanes::{lanes_status, registry};
use super::{observe, record_ids};
use crate::auth::{caller, coder_grant, require_own_task};
use crate::state::AppState;
use crate::status::uuid;

/// The metadata key carried into the entry's endpoint.
const ENDPOINT_KEY: &str = "endpoint";

/// The service.
#[derive(Clone)]
pub struct Registries {
    state: AppState,
}

impl Registries {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

fn role(field: &str, value: &str) -> Result<AgentRole, Status> {
    value
        .parse::<AgentRole>()
        .map_err(|_| invalid_argument(field, format!("unknown role {value:?}; known: Developer, Reviewer, Coordinator, Monitor, Generic, Orchestration")))
}

/// `metadata_json`: empty, or a JSON object of string values.
fn metadata(raw: &str) -> Result<BTreeMap<String, String>, Status> {
    if raw.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    let value: serde_json::Value = serde_json::from_str(raw)
        .map_err(|e| invalid_argument("metadata_json", format!("not JSON: {e}")))?;
    let obj = value
        .as_object()
        .ok_or_else(|| invalid_argument("metadata_json", "must be a JSON object"))?;
    obj.iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k.clone(), s.clone())),
            _ => Err(invalid_argument(
                "metadata_json",
                format!("value of {k:?} must be a string"),
            )),
        })
        .collect()
}

/// The wire shape of one entry.
pub fn agent(e: &RegistryEntry, ttl: std::time::Duration) -> v1::RegistryAgent {
    let mut meta: serde_json::Map<String, serde_json::Value> = e
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    if !e.endpoint.is_empty() {
        meta.insert(
            ENDPOINT_KEY.into(),
            serde_json::Value::String(e.endpoint.clone()),
        );
    }
    let expires = chrono::Duration::from_std(ttl)
        .ok()
        .and_then(|d| e.last_heartbeat.checked_add_signed(d))
        .unwrap_or(e.last_heartbeat);
    v1::RegistryAgent {
        id: e.agent_id.to_string(),
        tenant_id: e.tenant_id.to_string(),
        name: e.name.clone(),
        role: e.role.as_str().to_owned(),
        capabilities: e.capabilities.clone(),
        metadata_json: serde_json::Value::Object(meta).to_string(),
        registered_at: Some(timestamp_from_chrono(e.registered_at)),
        last_heartbeat_at: Some(timestamp_from_chrono(e.last_heartbeat)),
        expires_at: Some(timestamp_from_chrono(expires)),
    }
}

#[tonic::async_trait]
impl RegistryService for Registries {
    async fn register(
        &self,
        request: Request<v1::RegisterRequest>,
    ) -> Result<Response<v1::RegistryAgent>, Status> {
        observe(&self.state, "/genesis.v1.RegistryService/Register", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            if req.name.trim().is_empty() {
                return Err(invalid_argument("name", "required"));
            }
            let role = role("role", &req.role)?;
            let mut meta = metadata(&req.metadata_json)?;
            let endpoint = meta.remove(ENDPOINT_KEY).unwrap_or_default();
            record_ids(t, None);
            let reg = registry(&self.state)?;
            let registration = AgentRegistration {
                name: req.name.clone(),
                role,
                capabilities: req.capabilities.clone(),
                endpoint,
                metadata: meta,
            };
            let entry = match coder_grant(&request) {
                // A coder's entry is its task's: registering again refreshes it.
                Some(grant) => reg.register_fixed(t, grant.task_id, registration).await,
                None => reg.agent_register(t, registration).await,
            }
            .map_err(lanes_status)?;
            Ok(agent(&entry, reg.ttl()))
        })
        .await
    }

    async fn heartbeat(
        &self,
        request: Request<v1::HeartbeatRequest>,
    ) -> Result<Response<v1::RegistryAgent>, Status> {
        observe(
            &self.state,
            "/genesis.v1.RegistryService/Heartbeat",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("agent_id", &req.agent_id)?;
                // A coder's entry carries its task's id: that one only.
                require_own_task(&request, id)?;
                record_ids(t, None);
                let reg = registry(&self.state)?;
                let entry = reg.heartbeat(t, id).await.map_err(lanes_status)?;
                Ok(agent(&entry, reg.ttl()))
            },
        )
        .await
    }

    async fn list(
        &self,
        request: Request<v1::RegistryListRequest>,
    ) -> Result<Response<v1::RegistryListResponse>, Status> {
        observe(&self.state, "/genesis.v1.RegistryService/List", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let role = match req.role.as_deref() {
                None | Some("") => None,
                Some(r) => Some(role("role", r)?),
            };
            let capability = req.capability.as_deref().filter(|c| !c.is_empty());
            if let Some(c) = capability {
                genesis_lanes::registry::validate_capability(c).map_err(lanes_status)?;
            }
            record_ids(t, None);
            let reg = registry(&self.state)?;
            let rows = reg.list(t).await.map_err(lanes_status)?;
            Ok(v1::RegistryListResponse {
                agents: rows
                    .iter()
                    .filter(|e| role.is_none_or(|r| e.role == r))
                    .filter(|e| capability.is_none_or(|c| e.capabilities.iter().any(|x| x == c)))
                    .map(|e| agent(e, reg.ttl()))
                    .collect(),
            })
        })
        .await
    }

    async fn unregister(
        &self,
        request: Request<v1::UnregisterRequest>,
    ) -> Result<Response<v1::UnregisterResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.RegistryService/Unregister",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("agent_id", &req.agent_id)?;
                record_ids(t, None);
                let reg = registry(&self.state)?;
                // Look first so an unknown (or another tenant's) id answers false.
                let removed = match reg.get(t, id).await {
                    Ok(_) => match reg.unregister(t, id).await {
                        Ok(()) => true,
                        Err(genesis_lanes::LanesError::NotFound { .. }) => false,
                        Err(e) => return Err(lanes_status(e)),
                    },
                    Err(genesis_lanes::LanesError::NotFound { .. }) => false,
                    Err(e) => return Err(lanes_status(e)),
                };
                Ok(v1::UnregisterResponse { removed })
            },
        )
        .await
    }

    async fn route(
        &self,
        request: Request<v1::RouteRequest>,
    ) -> Result<Response<v1::RouteResponse>, Status> {
        observe(&self.state, "/genesis.v1.RegistryService/Route", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            if req.capabilities.is_empty() {
                return Err(invalid_argument("capabilities", "at least one is required"));
            }
            for c in &req.capabilities {
                genesis_lanes::registry::validate_capability(c)
                    .map_err(|e| invalid_argument("capabilities", e.to_string()))?;
            }
            let role = match req.role.as_deref() {
                None | Some("") => None,
                Some(r) => Some(role("role", r)?),
            };
            record_ids(t, None);
            let reg = registry(&self.state)?;
            let chosen = if let ([only], None) = (req.capabilities.as_slice(), role) {
                // The library's round-robin pick, recorded on the entry.
                reg.route(t, only).await.map_err(lanes_status)?
            } else {
                let mut candidates: Vec<RegistryEntry> = reg
                    .list(t)
                    .await
                    .map_err(lanes_status)?
                    .into_iter()
                    .filter(|e| role.is_none_or(|r| e.role == r))
                    .filter(|e| req.capabilities.iter().all(|c| e.capabilities.contains(c)))
                    .collect();
                candidates.sort_by(|a, b| {
                    b.last_heartbeat
                        .cmp(&a.last_heartbeat)
                        .then(a.agent_id.cmp(&b.agent_id))
                });
                candidates.into_iter().next()
            };
            Ok(v1::RouteResponse {
                agent: chosen.map(|e| agent(&e, reg.ttl())),
            })
        })
        .await
    }
}
