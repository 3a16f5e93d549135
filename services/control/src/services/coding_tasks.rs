//! `genesis.v1.CodingTaskService` (spec §2.3): coding tasks, the unit of
//! work a coder executes. CreateTask resolves the couple through
//! `genesis_lanes::coders::resolve_couple` with the tenant's presets (a
//! presetId overrides the model/provider/backend triple; the preset's
//! credential names re-checked against the keys the tenant may use) and
//! records the tenant's SOA as the steering instance; ReportProgress and
//! AttachArtifact record what the task's coder reports (artifacts bounded
//! by control's caps); CompleteTask settles the task once, enqueues
//! `DependencyCompleted` to the steering instance (control owns every
//! enqueue), revokes the task's coder tokens, stops its coder Job and
//! releases the coder's Windows session. A coder's LLM calls (its chain,
//! credit holds and priced attempts) are [`super::coder_calls`]'. A coder
//! token reaches GetTask, ReportProgress, AttachArtifact, CompleteTask and
//! the three call RPCs for its own task only.
//! Must never write a task, an artifact or an event except through
//! genesis-store.

use genesis_core::{AgentEventKind, AgentType};
use genesis_lanes::coders::{CodingTaskRequest, resolve_couple};
use genesis_lanes::windows::LaneKey;
use genesis_proto::convert::{invalid_argument, optional_timestamp, timestamp_from_chrono};
use genesis_proto::v1::{self, coding_task_service_server::CodingTaskService};
use genesis_store::coding_tasks::{
    ArtifactRow, CodingTaskRow, NewCodingTask, SETTLED_STATUSES, TASK_STATUSES,
};
use serde_json::json;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use super::coder_calls;
use super::coders::{lane_presets, spawner};
use super::lanes::lanes_status;
use super::llm::require_preset_keys;
use super::{observe, record_ids};
use crate::auth::{Caller, caller, require_own_task, require_task_coder};
use crate::state::AppState;
use crate::status::{opt_text, opt_uuid, store_status, text, uuid};

/// Longest result_json accepted.
const MAX_RESULT_BYTES: usize = 64 * 1024;

/// The service.
#[derive(Clone)]
pub struct CodingTasks {
    state: AppState,
}

impl CodingTasks {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

/// The wire shape of a task.
pub fn task(t: &CodingTaskRow) -> v1::CodingTask {
    v1::CodingTask {
        id: t.id.to_string(),
        tenant_id: t.tenant_id.to_string(),
        title: t.title.clone(),
        instructions: t.instructions.clone(),
        status: t.status.clone(),
        coder_id: t.coder_id.clone(),
        preset_id: t.preset_id.map(|p| p.to_string()),
        couple: Some(v1::PresetCouple {
            model: t.model.clone(),
            provider: t.provider.clone(),
            backend: t.backend.clone(),
            credential_names: t.credential_names.clone(),
        }),
        repository: t.repository.clone(),
        branch: t.branch.clone(),
        result_summary: t.result_summary.clone(),
        result_json: t.result.to_string(),
        created_at: Some(timestamp_from_chrono(t.created_at)),
        updated_at: Some(timestamp_from_chrono(t.updated_at)),
        completed_at: optional_timestamp(t.completed_at),
        progress_message: t.progress_message.clone(),
        progress_percent: t.progress_percent.map(i32::from),
        progress_at: optional_timestamp(t.progress_at),
        artifacts: Vec::new(),
        artifact_count: t.artifact_count,
        windows_hold: t.windows_hold.as_ref().map(|h| v1::CodingTaskWindowsHold {
            state: h.state.clone(),
            host: h.host.clone().unwrap_or_default(),
            lease_expires_at: optional_timestamp(h.lease_expires_at),
        }),
        cost_usd: t.cost_usd,
    }
}

/// The wire shape of an artifact (never its content).
pub fn artifact(a: &ArtifactRow) -> v1::CodingTaskArtifact {
    v1::CodingTaskArtifact {
        id: a.id.to_string(),
        task_id: a.task_id.to_string(),
        kind: a.kind.clone(),
        name: a.name.clone(),
        size_bytes: i64::from(a.size_bytes),
        created_at: Some(timestamp_from_chrono(a.created_at)),
    }
}

/// What a new task is made of, as CreateTask and SpawnCoder receive it.
pub struct TaskFields<'a> {
    pub title: &'a str,
    pub instructions: &'a str,
    pub repository: &'a str,
    pub branch: &'a str,
    pub preset_id: Option<Uuid>,
    pub model: &'a str,
    pub provider: &'a str,
    pub backend: &'a str,
    pub coder_id: Option<&'a str>,
}

/// Check a new task's fields, resolve its couple through the tenant's
/// presets and store it with the tenant's SOA as its steering instance.
/// Shared by CreateTask and SpawnCoder, so a task is the same whichever
/// RPC made it.
pub async fn create_task_row(
    state: &AppState,
    caller: &Caller,
    t: Uuid,
    f: TaskFields<'_>,
) -> Result<CodingTaskRow, Status> {
    text(
        "title",
        f.title,
        genesis_store::coding_tasks::MAX_TITLE_BYTES,
    )?;
    text(
        "instructions",
        f.instructions,
        genesis_store::coding_tasks::MAX_INSTRUCTIONS_BYTES,
    )?;
    opt_text(
        "repository",
        f.repository,
        genesis_store::coding_tasks::MAX_REF_BYTES,
    )?;
    opt_text(
        "branch",
        f.branch,
        genesis_store::coding_tasks::MAX_REF_BYTES,
    )?;
    let store = &state.store;
    let presets = store.llm().list_presets(t).await.map_err(store_status)?;
    let couple = resolve_couple(
        &CodingTaskRequest {
            preset_id: f.preset_id,
            model: opt(f.model),
            provider: opt(f.provider),
            backend: opt(f.backend),
            instructions: f.instructions.to_owned(),
            repository: opt(f.repository),
        },
        &lane_presets(&presets),
    )
    .map_err(lanes_status)?;
    let preset = f
        .preset_id
        .and_then(|id| presets.iter().find(|p| p.id == id));
    // The task records the preset's credential names: only names
    // the tenant may use today (a key may have been removed or
    // rebound since the preset was accepted).
    if let Some(p) = preset {
        require_preset_keys(&state.llm_keys, t, p)?;
    }
    let credential_names = preset.map(|p| p.credentials.clone()).unwrap_or_default();
    if let Some(c) = f.coder_id {
        let known = spawner(state)?
            .list(t)
            .await
            .map_err(lanes_status)?
            .iter()
            .any(|h| h.name == c);
        if !known {
            return Err(Status::not_found(format!("coder {c} not found")));
        }
    }
    let steering = store
        .instances()
        .list(t, Some(AgentType::Soa))
        .await
        .map_err(store_status)?
        .first()
        .map(|i| i.id);
    let row = store
        .coding_tasks()
        .create(
            t,
            NewCodingTask {
                title: f.title.to_owned(),
                instructions: f.instructions.to_owned(),
                coder_id: f.coder_id.map(str::to_owned),
                preset_id: f.preset_id,
                model: couple.model,
                provider: couple.provider,
                backend: couple.backend,
                credential_names,
                repository: f.repository.to_owned(),
                branch: f.branch.to_owned(),
                steering_instance_id: steering,
            },
        )
        .await
        .map_err(store_status)?;
    tracing::info!(tenant = %t, task = %row.id, actor = %caller.actor(), "coding task created");
    Ok(row)
}

/// What settling a task (or stopping its coder) ends: the task's coder
/// tokens are revoked, then its coder Job is stopped and its Windows
/// session released. Each step is logged when it fails and never undoes
/// the settle: a token left behind still expires, and every coder write
/// refuses a settled task.
pub async fn wind_down(
    state: &AppState,
    t: Uuid,
    task_id: Uuid,
    coder: Option<&str>,
    stop_job: bool,
) {
    match state.store.tokens().revoke_for_task(t, task_id).await {
        Ok(n) if n > 0 => {
            tracing::info!(tenant = %t, task = %task_id, revoked = n, "coder tokens revoked")
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(tenant = %t, task = %task_id, error = %e, "coder token revocation failed; the tokens expire on their own")
        }
    }
    let Some(coder) = coder else {
        return;
    };
    if stop_job && let Ok(spawner) = state.lanes.coders.as_ref() {
        match spawner.stop(t, coder).await {
            Ok(()) | Err(genesis_lanes::LanesError::NotFound { .. }) => {}
            Err(e) => {
                tracing::warn!(tenant = %t, coder = %coder, error = %e, "coder stop on settle failed")
            }
        }
    }
    if let Some(lane) = &state.lanes.windows
        && let Err(e) = lane.task_settled(&LaneKey::new(t, coder.to_owned())).await
    {
        tracing::warn!(tenant = %t, coder = %coder, error = %e, "windows session release on settle failed");
    }
}

fn opt(s: &str) -> Option<String> {
    (!s.trim().is_empty()).then(|| s.to_owned())
}

#[tonic::async_trait]
impl CodingTaskService for CodingTasks {
    async fn create_task(
        &self,
        request: Request<v1::CreateTaskRequest>,
    ) -> Result<Response<v1::CodingTask>, Status> {
        observe(
            &self.state,
            "/genesis.v1.CodingTaskService/CreateTask",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let preset_id = opt_uuid("preset_id", req.preset_id.as_deref())?;
                let coder_id = req.coder_id.as_deref().filter(|c| !c.is_empty());
                record_ids(t, None);
                let row = create_task_row(
                    &self.state,
                    &caller,
                    t,
                    TaskFields {
                        title: &req.title,
                        instructions: &req.instructions,
                        repository: &req.repository,
                        branch: &req.branch,
                        preset_id,
                        model: &req.model,
                        provider: &req.provider,
                        backend: &req.backend,
                        coder_id,
                    },
                )
                .await?;
                Ok(task(&row))
            },
        )
        .await
    }

    async fn get_task(
        &self,
        request: Request<v1::GetTaskRequest>,
    ) -> Result<Response<v1::CodingTask>, Status> {
        observe(
            &self.state,
            "/genesis.v1.CodingTaskService/GetTask",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("task_id", &req.task_id)?;
                require_own_task(&request, id)?;
                record_ids(t, None);
                let tasks = self.state.store.coding_tasks();
                let row = tasks.get(t, id).await.map_err(store_status)?;
                let artifacts = tasks.list_artifacts(t, id).await.map_err(store_status)?;
                let mut out = task(&row);
                out.artifacts = artifacts.iter().map(artifact).collect();
                Ok(out)
            },
        )
        .await
    }

    async fn list_tasks(
        &self,
        request: Request<v1::ListTasksRequest>,
    ) -> Result<Response<v1::ListTasksResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.CodingTaskService/ListTasks",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let status = req.status.as_deref().filter(|s| !s.is_empty());
                if let Some(s) = status
                    && !TASK_STATUSES.contains(&s)
                {
                    return Err(invalid_argument(
                        "status",
                        format!("unknown status {s:?}; known: {}", TASK_STATUSES.join(", ")),
                    ));
                }
                let coder = req.coder_id.as_deref().filter(|s| !s.is_empty());
                record_ids(t, None);
                let rows = self
                    .state
                    .store
                    .coding_tasks()
                    .list(t, status, coder)
                    .await
                    .map_err(store_status)?;
                Ok(v1::ListTasksResponse {
                    tasks: rows.iter().map(task).collect(),
                })
            },
        )
        .await
    }

    async fn complete_task(
        &self,
        request: Request<v1::CompleteTaskRequest>,
    ) -> Result<Response<v1::CodingTask>, Status> {
        observe(&self.state, "/genesis.v1.CodingTaskService/CompleteTask", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let id = uuid("task_id", &req.task_id)?;
            require_own_task(&request, id)?;
            if !SETTLED_STATUSES.contains(&req.status.as_str()) {
                return Err(invalid_argument(
                    "status",
                    format!("must be completed or failed, got {:?}", req.status),
                ));
            }
            opt_text(
                "result_summary",
                &req.result_summary,
                genesis_store::coding_tasks::MAX_SUMMARY_BYTES,
            )?;
            let result = if req.result_json.trim().is_empty() {
                json!({})
            } else {
                opt_text("result_json", &req.result_json, MAX_RESULT_BYTES)?;
                let v: serde_json::Value = serde_json::from_str(&req.result_json)
                    .map_err(|e| invalid_argument("result_json", format!("not JSON: {e}")))?;
                if !v.is_object() {
                    return Err(invalid_argument("result_json", "must be a JSON object"));
                }
                v
            };
            record_ids(t, None);
            let store = &self.state.store;
            let row = store
                .coding_tasks()
                .complete(t, id, &req.status, &req.result_summary, &result)
                .await
                .map_err(store_status)?;
            // The coder's credential ends with its task, whatever follows.
            wind_down(&self.state, t, row.id, row.coder_id.as_deref(), true).await;
            if let Some(instance) = row.steering_instance_id {
                let payload = json!({
                    "codingTaskId": row.id,
                    "status": row.status,
                    "title": row.title,
                    "resultSummary": row.result_summary,
                });
                store
                    .events()
                    .enqueue(t, instance, AgentEventKind::DependencyCompleted, &payload, None)
                    .await
                    .map_err(store_status)?;
            }
            tracing::info!(tenant = %t, task = %row.id, status = %row.status, actor = %caller.actor(), "coding task settled");
            Ok(task(&row))
        })
        .await
    }

    async fn report_progress(
        &self,
        request: Request<v1::ReportProgressRequest>,
    ) -> Result<Response<v1::CodingTask>, Status> {
        observe(
            &self.state,
            "/genesis.v1.CodingTaskService/ReportProgress",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("task_id", &req.task_id)?;
                require_own_task(&request, id)?;
                opt_text(
                    "message",
                    &req.message,
                    genesis_store::coding_tasks::MAX_PROGRESS_BYTES,
                )?;
                let percent = match req.percent {
                    None => None,
                    Some(p) if (0..=100).contains(&p) => i16::try_from(p).ok(),
                    Some(p) => {
                        return Err(invalid_argument(
                            "percent",
                            format!("must be between 0 and 100, got {p}"),
                        ));
                    }
                };
                record_ids(t, None);
                let row = self
                    .state
                    .store
                    .coding_tasks()
                    .report_progress(t, id, &req.message, percent)
                    .await
                    .map_err(store_status)?;
                Ok(task(&row))
            },
        )
        .await
    }

    async fn attach_artifact(
        &self,
        request: Request<v1::AttachArtifactRequest>,
    ) -> Result<Response<v1::CodingTaskArtifact>, Status> {
        observe(&self.state, "/genesis.v1.CodingTaskService/AttachArtifact", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let id = uuid("task_id", &req.task_id)?;
            require_own_task(&request, id)?;
            let caps = self.state.config.artifact_caps();
            if req.content.len() > caps.max_bytes {
                return Err(invalid_argument(
                    "content",
                    format!(
                        "is {} bytes; the limit is {} per artifact (GENESIS_CODER_ARTIFACT_MAX_BYTES)",
                        req.content.len(),
                        caps.max_bytes
                    ),
                ));
            }
            record_ids(t, None);
            let row = self
                .state
                .store
                .coding_tasks()
                .attach_artifact(t, id, &req.kind, &req.name, &req.content, caps)
                .await
                .map_err(store_status)?;
            tracing::info!(tenant = %t, task = %id, kind = %row.kind, bytes = row.size_bytes, actor = %caller.actor(), "artifact attached");
            Ok(artifact(&row))
        })
        .await
    }

    async fn get_artifact(
        &self,
        request: Request<v1::GetArtifactRequest>,
    ) -> Result<Response<v1::CodingTaskArtifactContent>, Status> {
        observe(
            &self.state,
            "/genesis.v1.CodingTaskService/GetArtifact",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let task_id = uuid("task_id", &req.task_id)?;
                let artifact_id = uuid("artifact_id", &req.artifact_id)?;
                record_ids(t, None);
                let row = self
                    .state
                    .store
                    .coding_tasks()
                    .artifact(t, task_id, artifact_id)
                    .await
                    .map_err(store_status)?;
                Ok(v1::CodingTaskArtifactContent {
                    artifact: Some(artifact(&row)),
                    content: row.content,
                })
            },
        )
        .await
    }

    async fn task_preset_chain(
        &self,
        request: Request<v1::TaskPresetChainRequest>,
    ) -> Result<Response<v1::ResolvedPresetChain>, Status> {
        observe(
            &self.state,
            "/genesis.v1.CodingTaskService/TaskPresetChain",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("task_id", &req.task_id)?;
                require_own_task(&request, id)?;
                record_ids(t, None);
                let for_coder = crate::auth::coder_grant(&request).is_some();
                coder_calls::preset_chain(&self.state, t, id, for_coder).await
            },
        )
        .await
    }

    async fn reserve_coder_credit(
        &self,
        request: Request<v1::ReserveCoderCreditRequest>,
    ) -> Result<Response<v1::ReserveCreditResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.CodingTaskService/ReserveCoderCredit",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("task_id", &req.task_id)?;
                require_task_coder(&request, id)?;
                record_ids(t, None);
                coder_calls::reserve(&self.state, t, id, req).await
            },
        )
        .await
    }

    async fn record_coder_attempt(
        &self,
        request: Request<v1::RecordCoderAttemptRequest>,
    ) -> Result<Response<v1::RecordCallAttemptResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.CodingTaskService/RecordCoderAttempt",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("task_id", &req.task_id)?;
                require_task_coder(&request, id)?;
                record_ids(t, None);
                coder_calls::record(&self.state, t, id, req).await
            },
        )
        .await
    }
}
