//! `genesis.v1.CodingTaskService` (spec §2.3): coding tasks, the unit of
//! work a coder executes. CreateTask resolves the couple through
//! `genesis_lanes::coders::resolve_couple` with the tenant's presets (a
//! presetId overrides the model/provider/backend triple; the preset's
//! credential names re-checked against the keys the tenant may use) and
//! records the tenant's SOA as the steering instance; CompleteTask settles
//! the task once, releases the coder's Windows session and enqueues
//! `DependencyCompleted` to the steering instance (control owns every
//! enqueue). Must never write a task or an event except through
//! genesis-store.

use genesis_core::{AgentEventKind, AgentType};
use genesis_lanes::coders::{CodingTaskRequest, resolve_couple};
use genesis_lanes::windows::LaneKey;
use genesis_proto::convert::{invalid_argument, optional_timestamp, timestamp_from_chrono};
use genesis_proto::v1::{self, coding_task_service_server::CodingTaskService};
use genesis_store::coding_tasks::{CodingTaskRow, NewCodingTask, SETTLED_STATUSES, TASK_STATUSES};
use serde_json::json;
use tonic::{Request, Response, Status};

use super::coders::{lane_presets, spawner};
use super::lanes::lanes_status;
use super::llm::require_preset_keys;
use super::{observe, record_ids};
use crate::auth::caller;
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
        observe(&self.state, "/genesis.v1.CodingTaskService/CreateTask", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            text("title", &req.title, genesis_store::coding_tasks::MAX_TITLE_BYTES)?;
            text(
                "instructions",
                &req.instructions,
                genesis_store::coding_tasks::MAX_INSTRUCTIONS_BYTES,
            )?;
            opt_text("repository", &req.repository, genesis_store::coding_tasks::MAX_REF_BYTES)?;
            opt_text("branch", &req.branch, genesis_store::coding_tasks::MAX_REF_BYTES)?;
            let preset_id = opt_uuid("preset_id", req.preset_id.as_deref())?;
            let coder_id = req.coder_id.as_deref().filter(|c| !c.is_empty());
            record_ids(t, None);
            let store = &self.state.store;
            let presets = store.llm().list_presets(t).await.map_err(store_status)?;
            let couple = resolve_couple(
                &CodingTaskRequest {
                    preset_id,
                    model: opt(&req.model),
                    provider: opt(&req.provider),
                    backend: opt(&req.backend),
                    instructions: req.instructions.clone(),
                    repository: opt(&req.repository),
                },
                &lane_presets(&presets),
            )
            .map_err(lanes_status)?;
            let preset = preset_id.and_then(|id| presets.iter().find(|p| p.id == id));
            // The task records the preset's credential names: only names
            // the tenant may use today (a key may have been removed or
            // rebound since the preset was accepted).
            if let Some(p) = preset {
                require_preset_keys(&self.state.llm_keys, t, p)?;
            }
            let credential_names = preset.map(|p| p.credentials.clone()).unwrap_or_default();
            if let Some(c) = coder_id {
                let known = spawner(&self.state)?
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
                        title: req.title.clone(),
                        instructions: req.instructions.clone(),
                        coder_id: coder_id.map(str::to_owned),
                        preset_id,
                        model: couple.model,
                        provider: couple.provider,
                        backend: couple.backend,
                        credential_names,
                        repository: req.repository.clone(),
                        branch: req.branch.clone(),
                        steering_instance_id: steering,
                    },
                )
                .await
                .map_err(store_status)?;
            tracing::info!(tenant = %t, task = %row.id, actor = %caller.actor(), "coding task created");
            Ok(task(&row))
        })
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
                record_ids(t, None);
                let row = self
                    .state
                    .store
                    .coding_tasks()
                    .get(t, id)
                    .await
                    .map_err(store_status)?;
                Ok(task(&row))
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
            if let (Some(lane), Some(coder)) = (&self.state.lanes.windows, &row.coder_id)
                && let Err(e) = lane.task_settled(&LaneKey::new(t, coder.clone())).await
            {
                tracing::warn!(tenant = %t, coder = %coder, error = %e, "windows session release on settle failed");
            }
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
}
