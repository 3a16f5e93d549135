//! The decision transaction (spec §2.4, DESIGN §5.6): answering an
//! attention request resolves it, applies an approved mode change through
//! the mode chokepoint's statements (with its `agent_mode_change_events`
//! audit row, source `approval`) and enqueues the idempotent
//! `OperatorAnsweredEscalation` resume, all in ONE tenant transaction, so a
//! crash can never leave a request approved with its mode unapplied or its
//! resume missing. An approved Prompt Engineer proposal replaces the
//! preset's prompt overlay in the same transaction, refused (and nothing
//! resolved) when the overlay changed since the proposal was drafted. The
//! call that resolves a decision raised on behalf of a mission, or a
//! mission question, also enqueues `DecisionResolved` to the steering
//! instance in the same transaction (the rule and the payload are
//! genesis-core's [`genesis_core::signals`]), so resolving twice or two
//! replicas racing enqueue it exactly once: the conditional resolve is the
//! arbiter. Owns only the sequencing; the statements are those of
//! [`crate::attention`], [`crate::modes`], [`crate::missions`] and
//! [`crate::events`]. Must never apply a mode the call did not resolve
//! itself, nor decide which mode a request proposes or what the resume
//! carries (the caller passes both).

use genesis_core::ModeChangeSource;
use genesis_core::signals::DecisionResolvedSignal;
use uuid::Uuid;

use crate::attention::{AttentionRequest, ResolveOutcome, check_resolution, resolve_in};
use crate::error::StoreError;
use crate::events::{EnqueueOutcome, enqueue_in};
use crate::llm::replace_prompt_overlay_in;
use crate::missions::steering_instance_in;
use crate::modes::{ModeChange, set_active_mode_in};
use crate::store::Store;

/// What [`Decisions::respond`] needs.
#[derive(Debug, Clone, Copy)]
pub struct DecisionAnswer<'a> {
    pub resolution: &'a str,
    pub resolution_notes: Option<&'a str>,
    pub resolved_by: &'a str,
    /// The mode to apply to the request's instance when this call resolves
    /// it (an approved `mode_change`); `None` for every other answer.
    pub approved_mode: Option<&'a str>,
    /// The overlay to install when this call resolves the request (an
    /// approved `redaction`); `None` for every other answer.
    pub approved_overlay: Option<OverlayReplacement<'a>>,
}

/// An approved Prompt Engineer proposal: replace `preset_id`'s prompt
/// overlay with `overlay`, provided the overlay is still the one the
/// proposal was drafted against (`base_sha256`).
#[derive(Debug, Clone, Copy)]
pub struct OverlayReplacement<'a> {
    pub preset_id: Uuid,
    pub base_sha256: &'a str,
    pub overlay: &'a str,
}

/// What [`Decisions::respond`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionOutcome {
    /// The request as it now stands and whether this call resolved it.
    pub resolve: ResolveOutcome,
    /// The mode change this call applied (only when it resolved the request
    /// and an approved mode was given).
    pub mode_change: Option<ModeChange>,
    /// The resume of the request's instance (`created: false` when an
    /// earlier answer already enqueued it); `None` for an instance-less
    /// request.
    pub resume: Option<EnqueueOutcome>,
    /// The `DecisionResolved` this call enqueued to the steering instance
    /// (only when it resolved a request that signals one, and a steering
    /// instance exists); `None` on a repeat, which enqueues nothing.
    pub steering_signal: Option<EnqueueOutcome>,
}

/// Repository handle, from [`Store::decisions`].
pub struct Decisions<'a> {
    store: &'a Store,
}

impl Store {
    /// The decision transaction.
    pub fn decisions(&self) -> Decisions<'_> {
        Decisions { store: self }
    }
}

impl Decisions<'_> {
    /// Answer a request in one transaction: resolve it exactly once; when
    /// this call resolved it and `approved_mode` is set, set the request's
    /// instance to that mode (source `approval`, linked to the request);
    /// then enqueue the resume built by `resume_payload` from the stored
    /// row (never from a later caller's answer); when this call resolved a
    /// request that signals a steering instance (a decision raised on
    /// behalf of a mission, a mission question), enqueue its
    /// `DecisionResolved` too. A retry of a resolved request changes no
    /// mode, enqueues no `DecisionResolved` and returns (or heals) the one
    /// resume. Any
    /// failure — unknown mode, missing instance, oversized payload, a
    /// database error — rolls everything back: the request stays open.
    pub async fn respond(
        &self,
        tenant_id: Uuid,
        id: Uuid,
        answer: DecisionAnswer<'_>,
        resume_payload: impl FnOnce(&AttentionRequest) -> serde_json::Value,
    ) -> Result<DecisionOutcome, StoreError> {
        check_resolution(
            answer.resolution,
            answer.resolution_notes,
            answer.resolved_by,
        )?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let resolve = resolve_in(
            tx.conn(),
            id,
            answer.resolution,
            answer.resolution_notes,
            answer.resolved_by,
        )
        .await?;
        let request = &resolve.request;
        let mode_change = match answer.approved_mode {
            Some(mode) if resolve.resolved_now => {
                let instance_id = request.instance_id.ok_or_else(|| {
                    StoreError::invalid("instance_id", "the mode change names no instance")
                })?;
                Some(
                    set_active_mode_in(
                        tx.conn(),
                        tenant_id,
                        instance_id,
                        mode,
                        ModeChangeSource::Approval,
                        answer.resolved_by,
                        Some(request.id),
                    )
                    .await?,
                )
            }
            _ => None,
        };
        if let Some(replace) = answer.approved_overlay
            && resolve.resolved_now
        {
            replace_prompt_overlay_in(tx.conn(), replace).await?;
        }
        let resume = match request.instance_id {
            Some(instance_id) => Some(
                enqueue_in(
                    tx.conn(),
                    self.store.options().max_event_payload_bytes,
                    tenant_id,
                    instance_id,
                    genesis_core::AgentEventKind::OperatorAnsweredEscalation,
                    &resume_payload(request),
                    None,
                    Some(request.id),
                )
                .await?,
            ),
            None => None,
        };
        // Only the resolving call signals, inside its own transaction: a
        // repeat (or the loser of a race, which waited on the row lock and
        // found it resolved) enqueues nothing, and a rollback takes the
        // event with the resolution.
        let signal = resolve
            .resolved_now
            .then(|| {
                DecisionResolvedSignal::for_request(
                    request.kind,
                    request.instance_id,
                    &request.metadata,
                )
            })
            .flatten();
        let steering_signal = match signal {
            Some(signal) => match steering_instance_in(tx.conn(), signal.target).await? {
                Some(steering) => Some(
                    enqueue_in(
                        tx.conn(),
                        self.store.options().max_event_payload_bytes,
                        tenant_id,
                        steering,
                        genesis_core::AgentEventKind::DecisionResolved,
                        &signal.payload(
                            request.id,
                            request.kind,
                            request.instance_id,
                            request.resolution.as_deref(),
                            request.resolution_notes.as_deref(),
                        ),
                        None,
                        None,
                    )
                    .await?,
                ),
                None => None,
            },
            None => None,
        };
        tx.commit().await?;
        Ok(DecisionOutcome {
            resolve,
            mode_change,
            resume,
            steering_signal,
        })
    }
}
