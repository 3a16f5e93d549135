//! `genesis.v1.DecisionService` (spec §2.4): the operator decision queue.
//! RespondDecision validates an approved mode change's proposal, then in
//! ONE store transaction (`Store::decisions().respond`) resolves the request
//! exactly once, applies the approved mode through the mode chokepoint's
//! statements with source `approval`, and enqueues the idempotent
//! `OperatorAnsweredEscalation` to the originating instance carrying
//! `{resolution, resolutionNotes, attentionRequestId}`; resolving a
//! decision raised on behalf of a mission, or a mission question, also
//! enqueues `DecisionResolved` to the steering instance in that
//! transaction, by the resolving call only. An approved
//! `redaction` (the Prompt Engineer's proposal) replaces the preset's
//! prompt overlay in that same transaction; a stale proposal (the overlay
//! changed since) is FAILED_PRECONDITION with nothing resolved. Must never
//! enqueue a second resume for one request, nor apply a mode or an overlay
//! the call did not resolve.

use genesis_core::redact::RedactionProposal;
use genesis_core::validate::validate_mode_name;
use genesis_core::{AttentionKind, AttentionStatus};
use genesis_proto::convert::invalid_argument;
use genesis_proto::v1::{self, decision_service_server::DecisionService};
use genesis_store::{AttentionRequest, DecisionAnswer, OverlayReplacement};
use serde_json::json;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use super::{observe, record_ids};
use crate::auth::caller;
use crate::convert;
use crate::state::AppState;
use crate::status::{opt_text, parse_opt_enum, store_status, text, uuid};

/// Longest resolution accepted (the store's limit).
const MAX_RESOLUTION_BYTES: usize = 200;
/// Longest resolution notes accepted.
const MAX_NOTES_BYTES: usize = 64 * 1024;
/// The resolution that applies a `mode_change` or `redaction` request.
pub const APPROVED: &str = "approved";

/// The service.
#[derive(Clone)]
pub struct Decisions {
    state: AppState,
}

impl Decisions {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

/// The mode a `mode_change` request proposes: `metadata.targetMode` (what
/// `soa_propose_mode_change` writes), else `metadata.mode`, else
/// `metadata.proposedMode`.
pub fn proposed_mode(req: &AttentionRequest) -> Option<&str> {
    req.metadata
        .get("targetMode")
        .or_else(|| req.metadata.get("mode"))
        .or_else(|| req.metadata.get("proposedMode"))
        .and_then(|m| m.as_str())
}

#[tonic::async_trait]
impl DecisionService for Decisions {
    async fn list_decisions(
        &self,
        request: Request<v1::ListDecisionsRequest>,
    ) -> Result<Response<v1::ListDecisionsResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.DecisionService/ListDecisions",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let status: Option<AttentionStatus> =
                    parse_opt_enum("status", req.status.as_deref())?;
                record_ids(t, None);
                let rows = self
                    .state
                    .store
                    .attention()
                    .list(t, status)
                    .await
                    .map_err(store_status)?;
                Ok(v1::ListDecisionsResponse {
                    decisions: rows.iter().rev().map(convert::decision).collect(),
                })
            },
        )
        .await
    }

    async fn get_decision(
        &self,
        request: Request<v1::GetDecisionRequest>,
    ) -> Result<Response<v1::Decision>, Status> {
        observe(
            &self.state,
            "/genesis.v1.DecisionService/GetDecision",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("decision_id", &req.decision_id)?;
                record_ids(t, None);
                let row = self
                    .state
                    .store
                    .attention()
                    .get(t, id)
                    .await
                    .map_err(store_status)?;
                Ok(convert::decision(&row))
            },
        )
        .await
    }

    async fn respond_decision(
        &self,
        request: Request<v1::RespondDecisionRequest>,
    ) -> Result<Response<v1::RespondDecisionResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.DecisionService/RespondDecision",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("decision_id", &req.decision_id)?;
                text("resolution", &req.resolution, MAX_RESOLUTION_BYTES)?;
                opt_text("notes", &req.notes, MAX_NOTES_BYTES)?;
                record_ids(t, None);
                let store = &self.state.store;
                let before = store.attention().get(t, id).await.map_err(store_status)?;
                let approve_mode =
                    before.kind == AttentionKind::ModeChange && req.resolution == APPROVED;
                // Check the proposal before resolving, so an unusable one is
                // refused with nothing changed.
                let mode = if approve_mode && before.status == AttentionStatus::Open {
                    let instance = before.instance_id.ok_or_else(|| {
                        Status::failed_precondition("the mode change names no instance")
                    })?;
                    let mode = proposed_mode(&before).ok_or_else(|| {
                        Status::failed_precondition("the mode change names no mode")
                    })?;
                    validate_mode_name("metadata.mode", mode)
                        .map_err(crate::status::core_status)?;
                    let inst = store
                        .instances()
                        .get(t, instance)
                        .await
                        .map_err(store_status)?;
                    let known = store
                        .modes()
                        .catalogue_for(t, inst.agent_type)
                        .await
                        .map_err(store_status)?
                        .iter()
                        .any(|m| m.name == mode);
                    if !known {
                        return Err(invalid_argument(
                            "metadata.mode",
                            format!("{mode:?} is not in the {} catalogue", inst.agent_type),
                        ));
                    }
                    Some(mode.to_owned())
                } else {
                    None
                };
                // An approved redaction must carry an applicable proposal;
                // checked before anything is resolved.
                let proposal = if before.kind == AttentionKind::Redaction
                    && req.resolution == APPROVED
                    && before.status == AttentionStatus::Open
                {
                    let p = RedactionProposal::from_metadata(&before.metadata)
                        .map_err(|e| Status::failed_precondition(e.to_string()))?;
                    let preset_id = p.preset_id.parse::<Uuid>().map_err(|_| {
                        Status::failed_precondition("the redaction names no valid preset id")
                    })?;
                    Some((p, preset_id))
                } else {
                    None
                };
                let notes = (!req.notes.is_empty()).then_some(req.notes.as_str());
                let actor = caller.actor();
                // One transaction: resolve, the approved mode (with its
                // audit row) and the resume commit together or not at all.
                // The resume carries the stored answer (never a later
                // caller's) and is idempotent: a retry heals a lost one.
                let outcome = store
                    .decisions()
                    .respond(
                        t,
                        id,
                        DecisionAnswer {
                            resolution: &req.resolution,
                            resolution_notes: notes,
                            resolved_by: &actor,
                            approved_mode: mode.as_deref(),
                            approved_overlay: proposal.as_ref().map(|(p, preset_id)| {
                                OverlayReplacement {
                                    preset_id: *preset_id,
                                    base_sha256: &p.base_overlay_sha256,
                                    overlay: &p.redacted_overlay,
                                }
                            }),
                        },
                        |resolved| {
                            json!({
                                "resolution": resolved.resolution,
                                "resolutionNotes": resolved.resolution_notes,
                                "attentionRequestId": resolved.id,
                            })
                        },
                    )
                    .await
                    .map_err(store_status)?;
                let resolved = &outcome.resolve.request;
                if let Some(signal) = &outcome.steering_signal {
                    tracing::info!(
                        tenant = %t, decision = %resolved.id, instance = %signal.event.instance_id,
                        "decision resolved; DecisionResolved enqueued to the steering instance"
                    );
                }
                let resume_event_id = outcome.resume.map(|r| r.event.id);
                Ok(v1::RespondDecisionResponse {
                    decision: Some(convert::decision(resolved)),
                    resume_event_id: resume_event_id.map(|e| e.to_string()),
                    already_resolved: !outcome.resolve.resolved_now,
                })
            },
        )
        .await
    }
}
