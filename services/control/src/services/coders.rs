//! `genesis.v1.CoderService` (spec §2.3): on-demand coders as Kubernetes
//! Jobs through `genesis_lanes::coders::CoderSpawner`. A coder's id is its
//! Job name (what ListCoders shows and StopCoder takes). The couple resolves
//! through `resolve_couple` with the tenant's presets (presetId overrides the
//! triple). Without a reachable cluster every RPC answers
//! FAILED_PRECONDITION "no Kubernetes cluster reachable: ...". Must never
//! touch another tenant's Job (the spawner re-checks the owner labels) nor
//! pass a credential value to a coder.

use genesis_lanes::coders::{
    CoderHandle, CoderPhase, CoderResources, CoderSpawner, CoderSpec, CodingTaskRequest, Preset,
    ResolvedCouple, resolve_couple,
};
use genesis_lanes::windows::LaneKey;
use genesis_proto::convert::invalid_argument;
use genesis_proto::v1::{self, coder_service_server::CoderService};
use genesis_store::llm::PresetRow;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use super::lanes::{WINDOWS_POOL_FLAG, lanes_status};
use super::{observe, record_ids};
use crate::auth::caller;
use crate::state::AppState;
use crate::status::{opt_uuid, store_status};

/// Longest coder name accepted.
const MAX_CODER_NAME: usize = 128;
/// The env variable a coder reads its display name from.
pub const ENV_CODER_NAME: &str = "CODER_NAME";
/// The env variable telling a coder to attach the Windows lane tools.
pub const ENV_ENABLE_WINDOWS_MCP: &str = "ENABLE_WINDOWS_MCP";

/// The service.
#[derive(Clone)]
pub struct Coders {
    state: AppState,
}

impl Coders {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

/// The tenant's presets as the lanes' resolver sees them.
pub fn lane_presets(rows: &[PresetRow]) -> Vec<Preset> {
    rows.iter()
        .map(|p| Preset {
            id: p.id,
            couple: ResolvedCouple {
                model: p.model.clone(),
                provider: p.provider.clone(),
                backend: p.backend.clone(),
            },
        })
        .collect()
}

/// The spawner, or FAILED_PRECONDITION naming why there is none.
pub fn spawner(state: &AppState) -> Result<&CoderSpawner, Status> {
    state.lanes.coders.as_ref().map_err(|why| {
        Status::failed_precondition(format!("no Kubernetes cluster reachable: {why}"))
    })
}

fn status_of(phase: CoderPhase) -> &'static str {
    match phase {
        CoderPhase::Pending => "pending",
        CoderPhase::Running => "running",
        CoderPhase::Succeeded => "stopped",
        CoderPhase::Failed => "failed",
    }
}

fn coder(h: &CoderHandle, name: &str, couple: Option<&ResolvedCouple>) -> v1::Coder {
    v1::Coder {
        id: h.name.clone(),
        tenant_id: h.tenant_id.to_string(),
        name: name.to_owned(),
        status: status_of(h.phase).to_owned(),
        couple: couple.map(|c| v1::PresetCouple {
            model: c.model.clone(),
            provider: c.provider.clone(),
            backend: c.backend.clone(),
            credential_names: Vec::new(),
        }),
        job_name: h.name.clone(),
        ..Default::default()
    }
}

fn opt(s: &str) -> Option<String> {
    (!s.trim().is_empty()).then(|| s.to_owned())
}

#[tonic::async_trait]
impl CoderService for Coders {
    async fn spawn_coder(
        &self,
        request: Request<v1::SpawnCoderRequest>,
    ) -> Result<Response<v1::Coder>, Status> {
        observe(&self.state, "/genesis.v1.CoderService/SpawnCoder", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            if req.name.trim().is_empty() || req.name.len() > MAX_CODER_NAME {
                return Err(invalid_argument("name", format!("must be 1..={MAX_CODER_NAME} bytes")));
            }
            let preset_id = opt_uuid("preset_id", req.preset_id.as_deref())?;
            record_ids(t, None);
            let store = &self.state.store;
            if req.enable_windows_mcp {
                let tenant = store.tenants().get(t).await.map_err(store_status)?;
                if !tenant.feature_enabled(WINDOWS_POOL_FLAG) {
                    return Err(Status::failed_precondition(
                        "enable_windows_mcp needs the tenant's windows-pool feature on",
                    ));
                }
            }
            let presets = store.llm().list_presets(t).await.map_err(store_status)?;
            let couple = resolve_couple(
                &CodingTaskRequest {
                    preset_id,
                    model: opt(&req.model),
                    provider: opt(&req.provider),
                    backend: opt(&req.backend),
                    ..Default::default()
                },
                &lane_presets(&presets),
            )
            .map_err(lanes_status)?;
            let spawner = spawner(&self.state)?;
            if self.state.lanes.coder_image.trim().is_empty() {
                return Err(Status::failed_precondition("no coder image configured (GENESIS_CODER_IMAGE)"));
            }
            let mut env = std::collections::BTreeMap::new();
            env.insert(ENV_CODER_NAME.to_owned(), req.name.clone());
            if req.enable_windows_mcp {
                env.insert(ENV_ENABLE_WINDOWS_MCP.to_owned(), "true".to_owned());
            }
            let handle = spawner
                .spawn(
                    t,
                    CoderSpec {
                        image: self.state.lanes.coder_image.clone(),
                        resources: CoderResources::default(),
                        couple: couple.clone(),
                        env,
                        task_id: Uuid::new_v4(),
                    },
                )
                .await
                .map_err(lanes_status)?;
            tracing::info!(tenant = %t, coder = %handle.name, actor = %caller.actor(), "coder spawned");
            let mut out = coder(&handle, &req.name, Some(&couple));
            out.preset_id = preset_id.map(|p| p.to_string());
            out.enable_windows_mcp = req.enable_windows_mcp;
            Ok(out)
        })
        .await
    }

    async fn list_coders(
        &self,
        request: Request<v1::ListCodersRequest>,
    ) -> Result<Response<v1::ListCodersResponse>, Status> {
        observe(&self.state, "/genesis.v1.CoderService/ListCoders", async {
            let caller = caller(&request)?;
            let t = caller.tenant("tenant_id", &request.get_ref().tenant_id)?;
            record_ids(t, None);
            let handles = spawner(&self.state)?.list(t).await.map_err(lanes_status)?;
            Ok(v1::ListCodersResponse {
                coders: handles
                    .iter()
                    .rev()
                    .map(|h| coder(h, &h.name, None))
                    .collect(),
            })
        })
        .await
    }

    async fn stop_coder(
        &self,
        request: Request<v1::StopCoderRequest>,
    ) -> Result<Response<v1::Coder>, Status> {
        observe(&self.state, "/genesis.v1.CoderService/StopCoder", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            if req.coder_id.trim().is_empty() {
                return Err(invalid_argument("coder_id", "required"));
            }
            record_ids(t, None);
            let spawner = spawner(&self.state)?;
            let current = spawner
                .list(t)
                .await
                .map_err(lanes_status)?
                .into_iter()
                .find(|h| h.name == req.coder_id)
                .ok_or_else(|| Status::not_found(format!("coder {} not found", req.coder_id)))?;
            spawner.stop(t, &req.coder_id).await.map_err(lanes_status)?;
            if let Some(lane) = &self.state.lanes.windows
                && let Err(e) = lane.task_settled(&LaneKey::new(t, req.coder_id.clone())).await
            {
                tracing::warn!(tenant = %t, coder = %req.coder_id, error = %e, "windows session release on stop failed");
            }
            tracing::info!(tenant = %t, coder = %req.coder_id, actor = %caller.actor(), "coder stopped");
            let mut out = coder(&current, &current.name, None);
            out.status = "stopped".to_owned();
            out.stopped_at = Some(genesis_proto::convert::timestamp_from_chrono(chrono::Utc::now()));
            Ok(out)
        })
        .await
    }
}
