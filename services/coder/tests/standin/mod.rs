//! A strict in-process stand-in of control's `CodingTaskService` for one
//! task: it refuses a missing or wrong bearer (UNAUTHENTICATED), another
//! tenant's or task's id (PERMISSION_DENIED), an unknown artifact kind
//! (INVALID_ARGUMENT) and any write to a settled task, a second completion
//! included (FAILED_PRECONDITION); and it records every call it admitted,
//! in order, for the tests to assert on.
#![allow(clippy::unwrap_used, dead_code)]

use std::sync::{Arc, Mutex};

use genesis_proto::v1 as pb;
use pb::coding_task_service_server::{CodingTaskService, CodingTaskServiceServer};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

pub const TOKEN: &str = "gct_coder-test-token";
pub const TENANT: &str = "00000000-0000-0000-0000-000000000007";
pub const TASK: &str = "00000000-0000-0000-0000-0000000000aa";

/// One admitted call.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    GetTask,
    Progress {
        message: String,
        percent: Option<i32>,
    },
    Artifact {
        kind: String,
        name: String,
        content: String,
    },
    Complete {
        status: String,
        summary: String,
        result_json: String,
    },
    Chain,
    Reserve {
        models: Vec<String>,
        prompt_tokens: i64,
        max_output_tokens: i64,
    },
    Record {
        invocation_id: String,
        attempt: pb::CallAttempt,
    },
}

impl Call {
    /// Whether the call writes (everything but the two reads).
    pub fn is_write(&self) -> bool {
        !matches!(self, Call::GetTask | Call::Chain)
    }
}

/// How the stand-in behaves.
#[derive(Debug, Clone)]
pub struct Behaviour {
    pub task: pb::CodingTask,
    pub chain: pb::ResolvedPresetChain,
    /// Whether ReserveCoderCredit grants.
    pub grant: bool,
    /// An operator settles the task just before the coder completes it:
    /// the coder's CompleteTask answers FAILED_PRECONDITION.
    pub operator_settles: bool,
}

#[derive(Debug, Default)]
pub struct Recorded {
    pub calls: Vec<Call>,
    pub settled: bool,
}

#[derive(Clone)]
struct Stand {
    behaviour: Behaviour,
    recorded: Arc<Mutex<Recorded>>,
}

/// The handle a test keeps: the URL and what was recorded.
#[derive(Clone)]
pub struct Control {
    pub url: String,
    recorded: Arc<Mutex<Recorded>>,
}

impl Control {
    pub fn calls(&self) -> Vec<Call> {
        self.recorded.lock().unwrap().calls.clone()
    }

    pub fn completes(&self) -> Vec<(String, String, String)> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Complete {
                    status,
                    summary,
                    result_json,
                } => Some((status, summary, result_json)),
                _ => None,
            })
            .collect()
    }

    pub fn artifacts(&self) -> Vec<(String, String, String)> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Artifact {
                    kind,
                    name,
                    content,
                } => Some((kind, name, content)),
                _ => None,
            })
            .collect()
    }

    pub fn records(&self) -> Vec<(String, pb::CallAttempt)> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Record {
                    invocation_id,
                    attempt,
                } => Some((invocation_id, attempt)),
                _ => None,
            })
            .collect()
    }

    pub fn reserves(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| matches!(c, Call::Reserve { .. }))
            .count()
    }
}

/// A task on `repository` at `main`, pending.
pub fn task(repository: &str) -> pb::CodingTask {
    pb::CodingTask {
        id: TASK.into(),
        tenant_id: TENANT.into(),
        title: "Greet the coder".into(),
        instructions: "Change README.md to say hello to the coder.".into(),
        status: "pending".into(),
        repository: repository.into(),
        branch: "main".into(),
        ..Default::default()
    }
}

/// A chain of one scripted couple, with an overlay.
pub fn scripted_chain() -> pb::ResolvedPresetChain {
    pb::ResolvedPresetChain {
        requested_site_id: "Coder:Default".into(),
        resolved_site_id: "Coder:Default".into(),
        couples: vec![pb::PresetCouple {
            model: "scripted-1".into(),
            provider: "scripted".into(),
            backend: String::new(),
            credential_names: vec![],
        }],
        prompt_overlay: "OVERLAY: prefer small diffs.".into(),
        ..Default::default()
    }
}

/// A chain of one paid couple (its calls hold credit), whose credential
/// [`CODER_KEY`] the tests' key source holds.
pub fn paid_chain() -> pb::ResolvedPresetChain {
    pb::ResolvedPresetChain {
        couples: vec![pb::PresetCouple {
            model: "claude-opus-4-8".into(),
            provider: "anthropic".into(),
            backend: String::new(),
            credential_names: vec![CODER_KEY.into()],
        }],
        ..scripted_chain()
    }
}

/// The credential name of [`paid_chain`].
pub const CODER_KEY: &str = "CODER_KEY";

impl Behaviour {
    /// The paid chain's behaviour: every turn holds credit first.
    pub fn paid(task: pb::CodingTask) -> Self {
        Behaviour {
            chain: paid_chain(),
            ..Behaviour::new(task)
        }
    }

    pub fn new(task: pb::CodingTask) -> Self {
        Behaviour {
            task,
            chain: scripted_chain(),
            grant: true,
            operator_settles: false,
        }
    }
}

/// Serve the stand-in on a loopback port.
pub async fn serve(behaviour: Behaviour) -> Control {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let stand = Stand {
        behaviour,
        recorded: recorded.clone(),
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(CodingTaskServiceServer::new(stand))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    Control {
        url: format!("http://{addr}"),
        recorded,
    }
}

impl Stand {
    /// The bearer must be the coder's token, the ids its tenant's and task's.
    fn admit<T>(&self, request: &Request<T>, tenant: &str, task: &str) -> Result<(), Status> {
        let token = genesis_proto::auth::bearer_token(request.metadata())?;
        if token != TOKEN {
            return Err(Status::unauthenticated("unknown token"));
        }
        if tenant != TENANT || task != TASK {
            return Err(Status::permission_denied(
                "the coder token is bound to another task",
            ));
        }
        Ok(())
    }

    fn record(&self, call: Call) {
        self.recorded.lock().unwrap().calls.push(call);
    }

    /// A write to a settled task is refused.
    fn unsettled(&self) -> Result<(), Status> {
        if self.recorded.lock().unwrap().settled {
            return Err(Status::failed_precondition("the task is already settled"));
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl CodingTaskService for Stand {
    async fn create_task(
        &self,
        _request: Request<pb::CreateTaskRequest>,
    ) -> Result<Response<pb::CodingTask>, Status> {
        Err(Status::permission_denied(
            "a coder token cannot create tasks",
        ))
    }

    async fn get_task(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::CodingTask>, Status> {
        let r = request.get_ref();
        self.admit(&request, &r.tenant_id, &r.task_id)?;
        self.record(Call::GetTask);
        Ok(Response::new(self.behaviour.task.clone()))
    }

    async fn list_tasks(
        &self,
        _request: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        Err(Status::permission_denied("a coder token cannot list tasks"))
    }

    async fn get_artifact(
        &self,
        _request: Request<pb::GetArtifactRequest>,
    ) -> Result<Response<pb::CodingTaskArtifactContent>, Status> {
        Err(Status::permission_denied(
            "a coder token may not read artifacts back",
        ))
    }

    async fn complete_task(
        &self,
        request: Request<pb::CompleteTaskRequest>,
    ) -> Result<Response<pb::CodingTask>, Status> {
        let r = request.get_ref();
        self.admit(&request, &r.tenant_id, &r.task_id)?;
        self.record(Call::Complete {
            status: r.status.clone(),
            summary: r.result_summary.clone(),
            result_json: r.result_json.clone(),
        });
        if self.behaviour.operator_settles {
            self.recorded.lock().unwrap().settled = true;
        }
        self.unsettled()?;
        if r.status != "completed" && r.status != "failed" {
            return Err(Status::invalid_argument("status: completed or failed"));
        }
        self.recorded.lock().unwrap().settled = true;
        Ok(Response::new(pb::CodingTask {
            status: r.status.clone(),
            ..self.behaviour.task.clone()
        }))
    }

    async fn report_progress(
        &self,
        request: Request<pb::ReportProgressRequest>,
    ) -> Result<Response<pb::CodingTask>, Status> {
        let r = request.get_ref();
        self.admit(&request, &r.tenant_id, &r.task_id)?;
        self.record(Call::Progress {
            message: r.message.clone(),
            percent: r.percent,
        });
        self.unsettled()?;
        if r.percent.is_some_and(|p| !(0..=100).contains(&p)) {
            return Err(Status::invalid_argument("percent: 0..=100"));
        }
        Ok(Response::new(self.behaviour.task.clone()))
    }

    async fn attach_artifact(
        &self,
        request: Request<pb::AttachArtifactRequest>,
    ) -> Result<Response<pb::CodingTaskArtifact>, Status> {
        let r = request.get_ref();
        self.admit(&request, &r.tenant_id, &r.task_id)?;
        self.record(Call::Artifact {
            kind: r.kind.clone(),
            name: r.name.clone(),
            content: r.content.clone(),
        });
        self.unsettled()?;
        if !["patch", "log", "summary"].contains(&r.kind.as_str()) {
            return Err(Status::invalid_argument(format!(
                "kind: {:?} is not patch, log or summary",
                r.kind
            )));
        }
        if r.name.is_empty() {
            return Err(Status::invalid_argument("name: required"));
        }
        Ok(Response::new(pb::CodingTaskArtifact {
            id: "artifact".into(),
            task_id: TASK.into(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            size_bytes: r.content.len() as i64,
            created_at: None,
        }))
    }

    async fn task_preset_chain(
        &self,
        request: Request<pb::TaskPresetChainRequest>,
    ) -> Result<Response<pb::ResolvedPresetChain>, Status> {
        let r = request.get_ref();
        self.admit(&request, &r.tenant_id, &r.task_id)?;
        self.record(Call::Chain);
        self.unsettled()?;
        Ok(Response::new(self.behaviour.chain.clone()))
    }

    async fn reserve_coder_credit(
        &self,
        request: Request<pb::ReserveCoderCreditRequest>,
    ) -> Result<Response<pb::ReserveCreditResponse>, Status> {
        let r = request.get_ref();
        self.admit(&request, &r.tenant_id, &r.task_id)?;
        self.record(Call::Reserve {
            models: r.models.clone(),
            prompt_tokens: r.prompt_tokens,
            max_output_tokens: r.max_output_tokens,
        });
        self.unsettled()?;
        if r.models.is_empty() || r.prompt_tokens < 0 || r.max_output_tokens < 0 {
            return Err(Status::invalid_argument(
                "models, prompt_tokens, max_output_tokens",
            ));
        }
        Ok(Response::new(pb::ReserveCreditResponse {
            granted: self.behaviour.grant,
            reserved_usd: if self.behaviour.grant { 0.01 } else { 0.0 },
            spent_usd: 24.5,
            held_usd: 0.5,
            limit_usd: 25.0,
        }))
    }

    async fn record_coder_attempt(
        &self,
        request: Request<pb::RecordCoderAttemptRequest>,
    ) -> Result<Response<pb::RecordCallAttemptResponse>, Status> {
        let r = request.get_ref();
        self.admit(&request, &r.tenant_id, &r.task_id)?;
        let attempt = r
            .attempt
            .clone()
            .ok_or_else(|| Status::invalid_argument("attempt: required"))?;
        self.record(Call::Record {
            invocation_id: r.invocation_id.clone(),
            attempt: attempt.clone(),
        });
        self.unsettled()?;
        const OUTCOMES: &[&str] = &[
            "success",
            "rate_limited",
            "unauthorized",
            "server_error",
            "timeout",
            "error",
        ];
        if !OUTCOMES.contains(&attempt.outcome.as_str())
            || r.invocation_id.is_empty()
            || attempt.requested_model.is_empty()
        {
            return Err(Status::invalid_argument(
                "outcome, invocation_id, requested_model",
            ));
        }
        Ok(Response::new(pb::RecordCallAttemptResponse {
            snapshot_id: format!("snapshot-{}", r.invocation_id),
            cost_usd: 0.0,
            snapshot_cost_usd: 0.0,
        }))
    }
}
