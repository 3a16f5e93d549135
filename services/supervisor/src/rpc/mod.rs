//! The `genesis.v1.AgentPod` service (DESIGN §4, spec §3.3): ClaimTick with
//! its bundle, RenewLease, governed InvokeTool, RecordCallAttempt and
//! ReserveCredit with server-side cost, CompleteTick as the single
//! passivation write, and the four replay RPCs ([`replay`]). This module owns the service value, its settings, the
//! sizing of its caches ([`crate::cache`]) and the dispatch of each RPC,
//! after the tenant check and inside the RPC's span, to the module named
//! for it, with its request converted once into the domain value of
//! [`model`] (INVALID_ARGUMENT naming the field); store and core errors are
//! mapped once in [`crate::error`]. Must never write on a lost lease, never
//! trust a cost or decision kind from the pod, and never run a tool outside
//! the instance's resolved toolset.

mod claim;
mod complete;
mod invoke;
mod mode;
pub mod model;
mod record;
mod renew;
mod replay;

use std::sync::Arc;
use std::time::Duration;

use genesis_core::AgentDispatcherOptions;
use genesis_proto::v1 as pb;
use genesis_proto::v1::agent_pod_server::AgentPod;
use genesis_store::{Store, StoreError};
use tonic::{Request, Response, Status};
use tracing::{Instrument as _, Span};
use uuid::Uuid;

use crate::auth::check_tenant;
use crate::cache::catalogue::CatalogueCache;
use crate::cache::ledger::LedgerTailCache;
use crate::cache::tick_memo::TickMemos;
use crate::cache::{ClaimCaches, ClaimKinds};
use crate::error::store_status;
use crate::metrics::Metrics;
use crate::ops::OpsProbe;
use crate::presets::DefaultProvider;
use crate::tools::{Governance, ToolRegistry};

pub use model::MAX_TOOL_ARGUMENTS_BYTES;

/// Supervisor settings the service needs.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// Code/env options; the `system_configs` layer is applied per call.
    pub options: AgentDispatcherOptions,
    pub lease_ttl: Duration,
    pub max_attempts: u32,
    pub default_provider: DefaultProvider,
    /// Bytes of ledger tails held between claims (0: none; every claim
    /// reads the whole tail).
    pub ledger_cache_bytes: usize,
    /// Bytes of bundle catalogues held between claims (0: none; every claim
    /// is sent the catalogue).
    pub catalogue_cache_bytes: usize,
    /// What an attempt of a model with no price row is charged.
    pub unpriced_price: genesis_core::pricing::ModelPrice,
    /// The byte cap of one episode's journal.
    pub journal_max_episode_bytes: u32,
}

/// The AgentPod implementation.
#[derive(Clone)]
pub struct AgentPodService {
    store: Store,
    settings: Arc<ServiceSettings>,
    registry: Arc<ToolRegistry>,
    governance: Arc<dyn Governance>,
    metrics: Arc<Metrics>,
    ops: Arc<OpsProbe>,
    caches: Arc<ClaimCaches>,
    /// What each claim in flight read, spared from being read again.
    memos: Arc<TickMemos>,
}

/// The share of the catalogue budget (`GENESIS_CATALOGUE_CACHE_MB`) that
/// holds the memos of ticks in flight: a quarter, 4 MiB by default, room
/// for some 15,000 ticks claimed at once.
const TICK_MEMO_SHARE: usize = 4;

/// The share of the ledger-tail budget (`GENESIS_LEDGER_CACHE_MB`) that
/// holds each claimed instance's type and site chain, so its next claim
/// reads the bundle in the same round trip: a sixteenth, 4 MiB by default,
/// room for some 30,000 instances.
const CLAIM_KIND_SHARE: usize = 16;

impl AgentPodService {
    /// Build the service.
    pub fn new(
        store: Store,
        settings: ServiceSettings,
        registry: ToolRegistry,
        governance: Arc<dyn Governance>,
        metrics: Arc<Metrics>,
        ops: Arc<OpsProbe>,
    ) -> Self {
        Self {
            store,
            caches: Arc::new(ClaimCaches {
                ledger: LedgerTailCache::new(settings.ledger_cache_bytes),
                catalogue: CatalogueCache::new(settings.catalogue_cache_bytes),
                kinds: ClaimKinds::new(settings.ledger_cache_bytes / CLAIM_KIND_SHARE),
            }),
            memos: Arc::new(TickMemos::new(
                settings.catalogue_cache_bytes / TICK_MEMO_SHARE,
            )),
            settings: Arc::new(settings),
            registry: Arc::new(registry),
            governance,
            metrics,
            ops,
        }
    }
}

/// A store error as the pod is answered with it; a lost lease is counted
/// here, once, whichever RPC found it.
fn status_of(err: StoreError, metrics: &Metrics) -> Status {
    if err == StoreError::LeaseLost {
        metrics.lease_lost();
    }
    store_status(&err)
}

/// The span of one AgentPod RPC: the method and the tenant, instance and
/// session the request names. Ids are recorded only once they parse as UUIDs,
/// so a malformed request never puts its raw text into logs or exported
/// spans; the handler still refuses it with INVALID_ARGUMENT.
fn rpc_span(method: &'static str, tenant_id: &str, instance_id: &str, session_id: &str) -> Span {
    let span = tracing::info_span!(
        "rpc",
        method,
        tenant_id = tracing::field::Empty,
        instance_id = tracing::field::Empty,
        session_id = tracing::field::Empty,
    );
    for (field, raw) in [
        ("tenant_id", tenant_id),
        ("instance_id", instance_id),
        ("session_id", session_id),
    ] {
        if let Ok(id) = raw.parse::<Uuid>() {
            span.record(field, tracing::field::display(id));
        }
    }
    span
}

/// The span of one replay RPC: the method, the tenant and the replay, each
/// recorded only once it parses as a UUID (as [`rpc_span`] does).
fn replay_span(method: &'static str, tenant_id: &str, replay_id: &str) -> Span {
    let span = tracing::info_span!(
        "rpc",
        method,
        tenant_id = tracing::field::Empty,
        replay_id = tracing::field::Empty,
    );
    for (field, raw) in [("tenant_id", tenant_id), ("replay_id", replay_id)] {
        if let Ok(id) = raw.parse::<Uuid>() {
            span.record(field, tracing::field::display(id));
        }
    }
    span
}

#[tonic::async_trait]
impl AgentPod for AgentPodService {
    async fn claim_tick(
        &self,
        request: Request<pb::ClaimTickRequest>,
    ) -> Result<Response<pb::ClaimTickResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span("ClaimTick", &req.tenant_id, &req.instance_id, "");
        let req = span.in_scope(|| model::ClaimTick::try_from(req))?;
        self.claim(req).instrument(span).await.map(Response::new)
    }

    async fn renew_lease(
        &self,
        request: Request<pb::RenewLeaseRequest>,
    ) -> Result<Response<pb::RenewLeaseResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span(
            "RenewLease",
            &req.tenant_id,
            &req.instance_id,
            &req.session_id,
        );
        let req = span.in_scope(|| model::RenewLease::try_from(req))?;
        self.renew(req).instrument(span).await.map(Response::new)
    }

    async fn invoke_tool(
        &self,
        request: Request<pb::InvokeToolRequest>,
    ) -> Result<Response<pb::InvokeToolResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span(
            "InvokeTool",
            &req.tenant_id,
            &req.instance_id,
            &req.session_id,
        );
        let req = span.in_scope(|| model::InvokeTool::try_from(req))?;
        self.invoke(req).instrument(span).await.map(Response::new)
    }

    async fn record_call_attempt(
        &self,
        request: Request<pb::RecordCallAttemptRequest>,
    ) -> Result<Response<pb::RecordCallAttemptResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span(
            "RecordCallAttempt",
            &req.tenant_id,
            &req.instance_id,
            &req.session_id,
        );
        let req = span.in_scope(|| model::RecordCallAttempt::try_from(req))?;
        self.record_attempt(req)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn reserve_credit(
        &self,
        request: Request<pb::ReserveCreditRequest>,
    ) -> Result<Response<pb::ReserveCreditResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span(
            "ReserveCredit",
            &req.tenant_id,
            &req.instance_id,
            &req.session_id,
        );
        let req = span.in_scope(|| model::ReserveCredit::try_from(req))?;
        self.reserve(req).instrument(span).await.map(Response::new)
    }

    async fn claim_replay(
        &self,
        request: Request<pb::ClaimReplayRequest>,
    ) -> Result<Response<pb::ClaimReplayResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = replay_span("ClaimReplay", &req.tenant_id, &req.replay_id);
        let req = span.in_scope(|| model::ClaimReplay::try_from(req))?;
        self.claim_replay(req)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn reserve_replay_credit(
        &self,
        request: Request<pb::ReserveReplayCreditRequest>,
    ) -> Result<Response<pb::ReserveCreditResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = replay_span("ReserveReplayCredit", &req.tenant_id, &req.replay_id);
        let req = span.in_scope(|| model::ReserveReplayCredit::try_from(req))?;
        self.reserve_replay(req)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn record_replay_attempt(
        &self,
        request: Request<pb::RecordReplayAttemptRequest>,
    ) -> Result<Response<pb::RecordReplayAttemptResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = replay_span("RecordReplayAttempt", &req.tenant_id, &req.replay_id);
        let req = span.in_scope(|| model::RecordReplayAttempt::try_from(req))?;
        self.record_replay_attempt(req)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn complete_replay(
        &self,
        request: Request<pb::CompleteReplayRequest>,
    ) -> Result<Response<pb::CompleteReplayResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = replay_span("CompleteReplay", &req.tenant_id, &req.replay_id);
        let req = span.in_scope(|| model::CompleteReplay::try_from(req))?;
        self.complete_replay(req)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn complete_tick(
        &self,
        request: Request<pb::CompleteTickRequest>,
    ) -> Result<Response<pb::CompleteTickResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span(
            "CompleteTick",
            &req.tenant_id,
            &req.instance_id,
            &req.session_id,
        );
        let req = span.in_scope(|| model::CompleteTick::try_from(req))?;
        self.complete(req).instrument(span).await.map(Response::new)
    }
}
