//! A fake AgentPod supervisor for the pod's tests: a real tonic server on
//! 127.0.0.1:0 with scripted answers that records every call, plus builders
//! for tick bundles and pod contexts over the real scripted LLM provider.
//! It implements the supervisor's wire contract only; it must never grow
//! storage or tick logic of its own.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use genesis_agent_pod::{Invoker, PodContext, PodMetrics, Supervisor, TickIds};
use genesis_llm::{
    FallbackInvoker, HttpProviderFactory, HttpTimeouts, LlmMetrics, ScriptedProvider,
};
use genesis_proto::v1 as pb;
use pb::agent_pod_server::{AgentPod, AgentPodServer};
use tonic::{Request, Response, Status};

pub const TOKEN: &str = "gen_test-agent-pod-token";

#[derive(Default)]
pub struct FakeState {
    pub claim_script: Mutex<VecDeque<pb::ClaimTickResponse>>,
    pub claims: AtomicU32,
    pub renews: AtomicU32,
    pub renew_lease_lost: AtomicBool,
    pub complete_lease_lost: AtomicBool,
    pub cost_per_attempt: Mutex<f64>,
    pub tool_overrides: Mutex<HashMap<String, pb::InvokeToolResponse>>,
    pub invokes: Mutex<Vec<pb::InvokeToolRequest>>,
    pub attempts: Mutex<Vec<pb::RecordCallAttemptRequest>>,
    pub completes: Mutex<Vec<pb::CompleteTickRequest>>,
    pub unauthenticated: AtomicU32,
    /// How long each claim takes before it answers, in milliseconds (a
    /// supervisor under load; it holds the tenant's slot meanwhile).
    pub claim_delay_ms: AtomicU64,
    /// ReserveCredit requests received.
    pub reservations: Mutex<Vec<pb::ReserveCreditRequest>>,
    /// Refuse reservations once this many were granted (`u32::MAX`: never).
    pub grant_reservations: AtomicU32,
}

impl FakeState {
    pub fn completes(&self) -> Vec<pb::CompleteTickRequest> {
        self.completes.lock().unwrap().clone()
    }
    pub fn invokes(&self) -> Vec<pb::InvokeToolRequest> {
        self.invokes.lock().unwrap().clone()
    }
    pub fn attempts(&self) -> Vec<pb::RecordCallAttemptRequest> {
        self.attempts.lock().unwrap().clone()
    }
    pub fn reservations(&self) -> Vec<pb::ReserveCreditRequest> {
        self.reservations.lock().unwrap().clone()
    }
    pub fn push_claim(&self, answer: pb::ClaimTickResponse) {
        self.claim_script.lock().unwrap().push_back(answer);
    }
}

#[derive(Clone)]
struct Fake(Arc<FakeState>);

impl Fake {
    fn check<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let expected = format!("Bearer {TOKEN}");
        match request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
        {
            Some(v) if v == expected => Ok(()),
            _ => {
                self.0.unauthenticated.fetch_add(1, Ordering::SeqCst);
                Err(Status::unauthenticated("bad token"))
            }
        }
    }
}

#[tonic::async_trait]
impl AgentPod for Fake {
    async fn claim_tick(
        &self,
        request: Request<pb::ClaimTickRequest>,
    ) -> Result<Response<pb::ClaimTickResponse>, Status> {
        self.check(&request)?;
        self.0.claims.fetch_add(1, Ordering::SeqCst);
        let delay = self.0.claim_delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        let next = self.0.claim_script.lock().unwrap().pop_front();
        Ok(Response::new(next.unwrap_or(pb::ClaimTickResponse {
            result: Some(pb::claim_tick_response::Result::NothingDue(
                pb::NothingDue {
                    heartbeat_seeded: false,
                    next_tick_at: None,
                },
            )),
        })))
    }

    async fn renew_lease(
        &self,
        request: Request<pb::RenewLeaseRequest>,
    ) -> Result<Response<pb::RenewLeaseResponse>, Status> {
        self.check(&request)?;
        self.0.renews.fetch_add(1, Ordering::SeqCst);
        if self.0.renew_lease_lost.load(Ordering::SeqCst) {
            return Err(genesis_proto::convert::lease_lost(
                "session no longer holds the lease",
            ));
        }
        Ok(Response::new(pb::RenewLeaseResponse {
            lease_expires_at: None,
        }))
    }

    async fn invoke_tool(
        &self,
        request: Request<pb::InvokeToolRequest>,
    ) -> Result<Response<pb::InvokeToolResponse>, Status> {
        self.check(&request)?;
        let req = request.into_inner();
        self.0.invokes.lock().unwrap().push(req.clone());
        let overridden = self
            .0
            .tool_overrides
            .lock()
            .unwrap()
            .get(&req.tool_name)
            .cloned();
        Ok(Response::new(overridden.unwrap_or(
            pb::InvokeToolResponse {
                result_json: r#"{"ok":true}"#.into(),
                blocked: false,
                error: None,
                side_effecting: req.tool_name.starts_with("soa_"),
                replayed: false,
            },
        )))
    }

    async fn record_call_attempt(
        &self,
        request: Request<pb::RecordCallAttemptRequest>,
    ) -> Result<Response<pb::RecordCallAttemptResponse>, Status> {
        self.check(&request)?;
        let req = request.into_inner();
        let mut attempts = self.0.attempts.lock().unwrap();
        attempts.push(req.clone());
        let cost = *self.0.cost_per_attempt.lock().unwrap();
        Ok(Response::new(pb::RecordCallAttemptResponse {
            snapshot_id: format!("snap-{}", req.invocation_id),
            cost_usd: cost,
            snapshot_cost_usd: cost * attempts.len() as f64,
        }))
    }

    async fn reserve_credit(
        &self,
        request: Request<pb::ReserveCreditRequest>,
    ) -> Result<Response<pb::ReserveCreditResponse>, Status> {
        self.check(&request)?;
        let req = request.into_inner();
        let mut reservations = self.0.reservations.lock().unwrap();
        reservations.push(req);
        let granted = (reservations.len() as u64)
            <= u64::from(self.0.grant_reservations.load(Ordering::SeqCst));
        Ok(Response::new(pb::ReserveCreditResponse {
            granted,
            reserved_usd: if granted { 0.5 } else { 0.0 },
            spent_usd: 59.9,
            held_usd: 0.0,
            limit_usd: 60.0,
        }))
    }

    async fn complete_tick(
        &self,
        request: Request<pb::CompleteTickRequest>,
    ) -> Result<Response<pb::CompleteTickResponse>, Status> {
        self.check(&request)?;
        let req = request.into_inner();
        if self.0.complete_lease_lost.load(Ordering::SeqCst) {
            return Err(genesis_proto::convert::lease_lost("lease expired"));
        }
        let mut completes = self.0.completes.lock().unwrap();
        completes.push(req);
        Ok(Response::new(pb::CompleteTickResponse {
            decision_kind: "Planned".into(),
            phase: "idle".into(),
            next_tick_at: None,
            halted: false,
            ledger_id: format!("ledger-{}", completes.len()),
            turn_number: completes.len() as i64,
            attention_request_id: None,
            deferred: false,
            consecutive_provider_failures: 0,
        }))
    }

    // The tick tests send no replay; a replay reaching this fake is a bug
    // in the test, answered as the real service answers an unknown method.
    async fn claim_replay(
        &self,
        _: Request<pb::ClaimReplayRequest>,
    ) -> Result<Response<pb::ClaimReplayResponse>, Status> {
        Err(Status::unimplemented("the fake supervisor runs no replay"))
    }

    async fn reserve_replay_credit(
        &self,
        _: Request<pb::ReserveReplayCreditRequest>,
    ) -> Result<Response<pb::ReserveCreditResponse>, Status> {
        Err(Status::unimplemented("the fake supervisor runs no replay"))
    }

    async fn record_replay_attempt(
        &self,
        _: Request<pb::RecordReplayAttemptRequest>,
    ) -> Result<Response<pb::RecordReplayAttemptResponse>, Status> {
        Err(Status::unimplemented("the fake supervisor runs no replay"))
    }

    async fn complete_replay(
        &self,
        _: Request<pb::CompleteReplayRequest>,
    ) -> Result<Response<pb::CompleteReplayResponse>, Status> {
        Err(Status::unimplemented("the fake supervisor runs no replay"))
    }
}

pub struct FakeSupervisor {
    pub state: Arc<FakeState>,
    pub addr: SocketAddr,
}

impl FakeSupervisor {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

pub async fn start_fake() -> FakeSupervisor {
    let state = Arc::new(FakeState {
        grant_reservations: AtomicU32::new(u32::MAX),
        ..FakeState::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let svc = AgentPodServer::new(Fake(state.clone()));
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .unwrap();
    });
    FakeSupervisor { state, addr }
}

pub fn context(fake: &FakeSupervisor, scripted: Arc<ScriptedProvider>) -> PodContext {
    let factory = HttpProviderFactory::new(HttpTimeouts::default())
        .unwrap()
        .with_scripted(scripted);
    let llm = FallbackInvoker::new(Arc::new(factory)).with_metrics(Arc::new(LlmMetrics::default()));
    let credentials: HashMap<String, String> = HashMap::new();
    PodContext {
        supervisor: Supervisor::connect_lazy(&fake.url(), TOKEN).unwrap(),
        invoker: Invoker::new(llm, Arc::new(credentials)),
        metrics: Arc::new(PodMetrics::default()),
        tool_schemas: Default::default(),
    }
}

pub const OPS_BUCKET: &str = "deadlocks=ok;rollbacks=ok;errors=ok;alerts=none";

fn schema(name: &str) -> pb::ToolSchema {
    pb::ToolSchema {
        name: name.into(),
        description: format!("the {name} tool"),
        json_schema: r#"{"type":"object"}"#.into(),
    }
}

pub fn bundle(kind: &str, payload_json: &str) -> pb::TickBundle {
    let instance_id = uuid::Uuid::new_v4().to_string();
    let tenant_id = uuid::Uuid::new_v4().to_string();
    let toolset = [
        "soa_send_message",
        "soa_propose_decision",
        "agent_query_memory",
    ];
    pb::TickBundle {
        journal: Vec::new(),
        session_id: uuid::Uuid::new_v4().to_string(),
        lease_expires_at: None,
        instance: Some(pb::AgentInstance {
            id: instance_id.clone(),
            tenant_id,
            agent_type: "Soa".into(),
            status: "active".into(),
            active_mode: "Strategic".into(),
            phase: "idle".into(),
            ..Default::default()
        }),
        event: Some(pb::TickEvent {
            id: uuid::Uuid::new_v4().to_string(),
            kind: kind.into(),
            payload_json: payload_json.into(),
            sequence_number: 1,
            attempts: 1,
            visible_at: None,
        }),
        ledger_tail: vec![],
        open_items: Some(pb::OpenItems::default()),
        ops_digest: Some(pb::OpsDigest {
            summary: "all quiet".into(),
            bucket: OPS_BUCKET.into(),
        }),
        mode: Some(pb::ResolvedMode {
            name: "Strategic".into(),
            toolset: toolset.iter().map(|s| s.to_string()).collect(),
            prompt_fragment: "Focus on strategy.".into(),
            system_prompt: String::new(),
        }),
        budget: Some(pb::BudgetEnvelope {
            max_tokens: Some(24_000),
            max_tool_calls: Some(12),
            max_wall_ms: Some(300_000),
            max_cost_usd: Some(1.5),
            max_turns: Some(12),
            max_output_tokens_per_turn: Some(4_096),
        }),
        preset_chain: Some(pb::ResolvedPresetChain {
            requested_site_id: "Agent:Planning".into(),
            resolved_site_id: "Agent:Default".into(),
            preset_id: "scripted".into(),
            preset_name: "Scripted".into(),
            couples: vec![pb::PresetCouple {
                model: "scripted-1".into(),
                provider: "scripted".into(),
                backend: "api".into(),
                credential_names: vec![],
            }],
            ..Default::default()
        }),
        credit: Some(pb::CreditStatus {
            limit_usd: 60.0,
            spent_usd: 1.0,
            remaining_usd: 59.0,
            exhausted: false,
            enforcement_enabled: true,
            window_start: None,
            window_end: None,
        }),
        forced_replan_due: false,
        tools: toolset.iter().map(|n| schema(n)).collect(),
        compliance_corpus: None,
        redaction_target: None,
        chat_tail: None,
    }
}

pub fn ids(bundle: &pb::TickBundle) -> TickIds {
    let instance = bundle.instance.clone().unwrap_or_default();
    TickIds {
        session_id: bundle.session_id.clone(),
        instance_id: instance.id,
        tenant_id: instance.tenant_id,
    }
}

pub fn claimed(bundle: pb::TickBundle) -> pb::ClaimTickResponse {
    pb::ClaimTickResponse {
        result: Some(pb::claim_tick_response::Result::Bundle(bundle)),
    }
}

pub fn lease_held() -> pb::ClaimTickResponse {
    pb::ClaimTickResponse {
        result: Some(pb::claim_tick_response::Result::LeaseHeld(pb::LeaseHeld {
            lease_expires_at: None,
        })),
    }
}
