//! `genesis.v1.CoderService` (spec §2.3): on-demand coders as Kubernetes
//! Jobs through `genesis_lanes::coders::CoderSpawner`. A coder's id is its
//! Job name (what ListCoders shows and StopCoder takes). A coder runs one
//! coding task: SpawnCoder takes the task's id (or creates the task from the
//! request, its couple resolved through `resolve_couple` with the tenant's
//! presets, presetId overriding the triple), mints a token of scope `coder`
//! bound to that task (expiring after `GENESIS_CODER_TOKEN_TTL_SECS`) and
//! hands the Job the coder contract: GENESIS_TASK_ID, GENESIS_CONTROL_URL
//! and GENESIS_CODER_TOKEN. StopCoder revokes the task's coder tokens.
//! CoderLogs reads the log of a task's coder (an operator's RPC: the gate
//! refuses coder tokens, as it refuses them everything outside
//! `auth::CODER_RPCS`).
//! Without a reachable cluster every RPC answers FAILED_PRECONDITION "no
//! Kubernetes cluster reachable: ...". Must never touch or read another
//! tenant's Job (the spawner re-checks the owner labels), never pass any
//! credential to a coder but its own task-bound token, and never leave that
//! token usable when the Job was not created.

use genesis_core::ErrorCode;
use genesis_lanes::coders::{
    CoderContract, CoderHandle, CoderKeys, CoderPhase, CoderResources, CoderSpawner, CoderSpec,
    ENV_ANTHROPIC_BASE_URL, ENV_OPENAI_BASE_URL, LogOptions, Preset, ResolvedCouple,
};
use genesis_proto::convert::invalid_argument;
use genesis_proto::status::coded;
use genesis_proto::v1::{self, coder_service_server::CoderService};
use genesis_store::llm::PresetRow;
use tonic::{Request, Response, Status};

use super::coding_tasks::{TaskFields, create_task_row, wind_down};
use super::lanes::{WINDOWS_POOL_FLAG, lanes_status};
use super::{observe, record_ids};
use crate::auth::caller;
use crate::state::AppState;
use crate::status::{opt_uuid, store_status, uuid};

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

/// A checked `CoderLogsRequest` (its tenant is authorized separately,
/// first): what CoderLogs reads, every field validated before the cluster
/// is called, so a bad id or count never reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoderLogsQuery {
    /// The coding task whose coder's log is read.
    pub task_id: uuid::Uuid,
    /// How much of the log (tail_lines 1..=10000, default 500; the lanes'
    /// 1 MiB ceiling).
    pub options: LogOptions,
}

impl TryFrom<&v1::CoderLogsRequest> for CoderLogsQuery {
    type Error = Status;

    fn try_from(req: &v1::CoderLogsRequest) -> Result<Self, Status> {
        let task_id = uuid("task_id", &req.task_id)?;
        let options = LogOptions::new(req.tail_lines.map(i64::from), None).map_err(lanes_status)?;
        Ok(Self { task_id, options })
    }
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

/// The setting naming control's endpoint for coders.
const CONTROL_URL_SETTING: &str = "GENESIS_CODER_CONTROL_URL";

/// Release the Windows session of a coder that runs no known task.
async fn wind_down_lane(state: &AppState, t: uuid::Uuid, coder: &str) {
    if let Some(lane) = &state.lanes.windows
        && let Err(e) = lane
            .task_settled(&genesis_lanes::windows::LaneKey::new(t, coder.to_owned()))
            .await
    {
        tracing::warn!(tenant = %t, coder = %coder, error = %e, "windows session release on stop failed");
    }
}

/// The provider keys a task's coder Job mounts: of the credentials its
/// chain names, those the tenant alone may use (genesis-core's
/// `mountable_for`), from `GENESIS_CODER_KEY_SECRET`. `None` when the chain
/// names none, or no Secret is configured (then the coder finds no
/// credential and its task fails saying so).
async fn coder_keys(
    state: &AppState,
    t: uuid::Uuid,
    row: &genesis_store::coding_tasks::CodingTaskRow,
) -> Result<Option<CoderKeys>, Status> {
    let task = row.id;
    let chain = super::coder_calls::chain_of(state, t, row.clone()).await?;
    let named: Vec<String> = chain
        .couples
        .iter()
        .flat_map(|c| c.credential_names.iter().cloned())
        .collect();
    let names = state.llm_keys.mountable_for(t, &named);
    let withheld = named.iter().filter(|n| !names.contains(n)).count();
    if withheld > 0 {
        tracing::warn!(
            tenant = %t, task = %task, withheld,
            "a coder is never handed a provider key shared with other tenants or held in a variable; bind a key file to this tenant alone for its coders"
        );
    }
    match state.config.coder_key_secret.as_deref().map(str::trim) {
        Some(secret) if !secret.is_empty() && !names.is_empty() => Ok(Some(CoderKeys {
            secret: secret.to_owned(),
            names,
        })),
        _ => Ok(None),
    }
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
            let task_id = opt_uuid("task_id", req.task_id.as_deref())?;
            record_ids(t, None);
            let spawner = spawner(&self.state)?;
            // Nothing is created for a coder that could not report back.
            let control_url = self
                .state
                .config
                .coder_control_url()
                .ok_or_else(|| {
                    coded(
                        ErrorCode::FailedPrecondition,
                        format!(
                            "{CONTROL_URL_SETTING} is not set: a coder needs control's endpoint to report to"
                        ),
                    )
                })?
                .to_owned();
            if task_id.is_none() {
                for (field, value) in [("title", &req.title), ("instructions", &req.instructions)] {
                    if value.as_deref().is_none_or(|v| v.trim().is_empty()) {
                        return Err(invalid_argument(
                            field,
                            "required when no task_id is given",
                        ));
                    }
                }
            }
            let store = &self.state.store;
            if req.enable_windows_mcp {
                let tenant = store.tenants().get(t).await.map_err(store_status)?;
                if !tenant.feature_enabled(WINDOWS_POOL_FLAG) {
                    return Err(Status::failed_precondition(
                        "enable_windows_mcp needs the tenant's windows-pool feature on",
                    ));
                }
            }
            if self.state.lanes.coder_image.trim().is_empty() {
                return Err(Status::failed_precondition("no coder image configured (GENESIS_CODER_IMAGE)"));
            }
            let row = match task_id {
                Some(id) => {
                    let row = store.coding_tasks().get(t, id).await.map_err(store_status)?;
                    if row.is_settled() {
                        return Err(coded(
                            ErrorCode::FailedPrecondition,
                            format!("the coding task is already settled ({})", row.status),
                        ));
                    }
                    if let Some(c) = &row.coder_id {
                        return Err(coded(
                            ErrorCode::FailedPrecondition,
                            format!("the coding task already has coder {c}"),
                        ));
                    }
                    row
                }
                None => {
                    create_task_row(
                        &self.state,
                        &caller,
                        t,
                        TaskFields {
                            title: req.title.as_deref().unwrap_or_default(),
                            instructions: req.instructions.as_deref().unwrap_or_default(),
                            repository: req.repository.as_deref().unwrap_or_default(),
                            branch: req.branch.as_deref().unwrap_or_default(),
                            preset_id,
                            model: &req.model,
                            provider: &req.provider,
                            backend: &req.backend,
                            coder_id: None,
                        },
                    )
                    .await?
                }
            };
            let couple = ResolvedCouple {
                model: row.model.clone(),
                provider: row.provider.clone(),
                backend: row.backend.clone(),
            };
            // Before the token is minted: a refusal here leaves nothing behind.
            let keys = coder_keys(&self.state, t, &row).await?;
            let ttl = chrono::Duration::seconds(
                i64::try_from(self.state.config.coder_token_ttl_secs).unwrap_or(86_400),
            );
            let token = genesis_proto::auth::generate_token();
            store
                .tokens()
                .insert_coder(
                    t,
                    row.id,
                    &genesis_proto::auth::token_sha256(&token),
                    &format!("coder {}", req.name),
                    chrono::Utc::now() + ttl,
                )
                .await
                .map_err(store_status)?;
            let mut env = std::collections::BTreeMap::new();
            env.insert(ENV_CODER_NAME.to_owned(), req.name.clone());
            if req.enable_windows_mcp {
                env.insert(ENV_ENABLE_WINDOWS_MCP.to_owned(), "true".to_owned());
            }
            let config = &self.state.config;
            for (name, url) in [
                (ENV_ANTHROPIC_BASE_URL, &config.coder_anthropic_base_url),
                (ENV_OPENAI_BASE_URL, &config.coder_openai_base_url),
            ] {
                if let Some(u) = url.as_deref().map(str::trim).filter(|u| !u.is_empty()) {
                    env.insert(name.to_owned(), u.to_owned());
                }
            }

            let spawned = spawner
                .spawn(
                    t,
                    CoderSpec {
                        image: self.state.lanes.coder_image.clone(),
                        resources: CoderResources::default(),
                        couple: couple.clone(),
                        env,
                        task_id: row.id,
                        contract: Some(CoderContract { control_url, token }),
                        command: config.coder_command.split_whitespace().map(str::to_owned).collect(),
                        keys,
                    },
                )
                .await;
            let handle = match spawned {
                Ok(h) => h,
                Err(e) => {
                    // No Job holds the token: it must not outlive this call.
                    wind_down(&self.state, t, row.id, None, false).await;
                    tracing::warn!(
                        tenant = %t, task = %row.id, error = %e,
                        "coder Job not created; the task stays pending for a later SpawnCoder with its task_id"
                    );
                    return Err(lanes_status(e));
                }
            };
            if let Err(e) = store.coding_tasks().assign_coder(t, row.id, &handle.name).await {
                // The task settled meanwhile: its coder has nothing to do.
                wind_down(&self.state, t, row.id, Some(&handle.name), true).await;
                return Err(store_status(e));
            }
            tracing::info!(tenant = %t, coder = %handle.name, actor = %caller.actor(), "coder spawned");
            let mut out = coder(&handle, &req.name, Some(&couple));
            out.preset_id = row.preset_id.map(|p| p.to_string());
            out.enable_windows_mcp = req.enable_windows_mcp;
            out.task_id = Some(row.id.to_string());
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
            match current.task_id {
                Some(task) => {
                    // The task's tokens end with its coder; the Job is gone.
                    wind_down(&self.state, t, task, Some(&req.coder_id), false).await;
                    // An unsettled task goes back to pending with no coder,
                    // so a new coder can be spawned for it; a settled one,
                    // or one another coder took, is left as it is.
                    match self
                        .state
                        .store
                        .coding_tasks()
                        .release_coder(t, task, &req.coder_id)
                        .await
                    {
                        Ok(_) | Err(genesis_store::StoreError::NotFound { .. }) => {}
                        Err(e) => {
                            tracing::warn!(tenant = %t, task = %task, error = %e, "handing the stopped coder's task back failed")
                        }
                    }
                }
                None => wind_down_lane(&self.state, t, &req.coder_id).await,
            }
            tracing::info!(tenant = %t, coder = %req.coder_id, actor = %caller.actor(), "coder stopped");
            let mut out = coder(&current, &current.name, None);
            out.task_id = current.task_id.map(|id| id.to_string());
            out.status = "stopped".to_owned();
            out.stopped_at = Some(genesis_proto::convert::timestamp_from_chrono(chrono::Utc::now()));
            Ok(out)
        })
        .await
    }

    async fn coder_logs(
        &self,
        request: Request<v1::CoderLogsRequest>,
    ) -> Result<Response<v1::CoderLogsResponse>, Status> {
        observe(&self.state, "/genesis.v1.CoderService/CoderLogs", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let query = CoderLogsQuery::try_from(req)?;
            record_ids(t, None);
            let logs = spawner(&self.state)?
                .logs(t, query.task_id, query.options)
                .await
                .map_err(lanes_status)?;
            Ok(v1::CoderLogsResponse {
                pod_name: logs.pod_name,
                text: logs.text,
                truncated: logs.truncated,
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn request(task_id: &str, tail_lines: Option<i32>) -> v1::CoderLogsRequest {
        v1::CoderLogsRequest {
            tenant_id: uuid::Uuid::new_v4().to_string(),
            task_id: task_id.to_owned(),
            tail_lines,
        }
    }

    #[test]
    fn coder_logs_requests_are_checked_field_by_field() {
        let task = uuid::Uuid::new_v4();
        let q = CoderLogsQuery::try_from(&request(&task.to_string(), None)).expect("valid");
        assert_eq!(q.task_id, task);
        assert_eq!(q.options, LogOptions::default());
        let q = CoderLogsQuery::try_from(&request(&task.to_string(), Some(10_000))).expect("max");
        assert_eq!(q.options.tail_lines(), 10_000);
        for (r, prefix) in [
            (request("", None), "task_id: required"),
            (request("coder-1234", None), "task_id: not a UUID"),
            (request(&task.to_string(), Some(0)), "tail_lines:"),
            (request(&task.to_string(), Some(-1)), "tail_lines:"),
            (request(&task.to_string(), Some(10_001)), "tail_lines:"),
        ] {
            let e = CoderLogsQuery::try_from(&r).expect_err("refused");
            assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
            assert!(e.message().starts_with(prefix), "{}", e.message());
        }
    }
}
