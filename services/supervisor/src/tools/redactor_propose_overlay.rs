//! `redactor_propose_overlay`: the Prompt Engineer's Redact body hands its
//! redaction to the operator (spec §3.9). It re-reads the bound call-site's
//! preset and overlay inside the call's transaction, runs genesis-core's
//! detectors, and opens a `redaction` attention request whose metadata is a
//! [`RedactionProposal`]: the preset, the SHA-256 of the overlay it was
//! drafted against, the redacted overlay and the findings (kinds and
//! counts). The model may pass its own redaction (it may also remove
//! personal data the detectors miss); without one the detector-masked
//! overlay is proposed. Must never apply the overlay (only an operator's
//! approval does, in control's decision transaction), and never put the raw
//! overlay or a raw finding into its result, the request or an error.

use genesis_core::ErrorCode;

use genesis_core::redact::{
    MAX_PROPOSED_OVERLAY_BYTES, REDACTION_SOURCE, RedactionProposal, findings_summary, redact,
    stored_findings,
};
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError};
use crate::redaction::{Review, bindings_for};

/// The redaction proposal verb (Prompt Engineer only).
pub struct RedactorProposeOverlay;

#[async_trait::async_trait]
impl Tool for RedactorProposeOverlay {
    fn name(&self) -> &'static str {
        "redactor_propose_overlay"
    }

    fn description(&self) -> &'static str {
        "Propose a redacted prompt overlay for your call-site's preset to the operator. \
         Omit redactedOverlay to propose the REDACTION TARGET's masked overlay as it is; pass \
         it to propose your own redaction (it must keep every [REDACTED:<kind>] placeholder \
         and may remove more). Nothing changes until the operator approves."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "redactedOverlay": {"type": "string", "maxLength": MAX_PROPOSED_OVERLAY_BYTES},
                "rationale": {"type": "string", "maxLength": 4000}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        // Only the Prompt Engineer reaches this tool (genesis-core's
        // superset, checked by InvokeTool's gate); its call-site is the one
        // thing to read.
        let instance = genesis_store::instances::get_in(ctx.conn, ctx.instance_id).await?;
        let Some(call_site) = instance.call_site_id else {
            return Err(ToolError::new(
                ErrorCode::NotApplicable,
                "only a call-site-bound Prompt Engineer proposes overlays",
            ));
        };
        let bindings = bindings_for(ctx.conn, &call_site).await?;
        let review = Review::of(&call_site, &bindings);
        let (Some(preset), Some(base_sha)) = (review.preset.as_ref(), review.overlay_sha256())
        else {
            return Err(ToolError::new(
                ErrorCode::NothingToRedact,
                format!("call-site {call_site} resolves to no preset with a prompt overlay"),
            ));
        };
        let proposed = match args.get("redactedOverlay").and_then(Value::as_str) {
            Some(own) => own.to_owned(),
            None => review.masked_overlay.clone(),
        };
        let left = redact(&proposed);
        if !left.is_clean() {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!(
                    "$.redactedOverlay still holds what the detectors find ({}); keep every \
                     [REDACTED:<kind>] placeholder of the REDACTION TARGET",
                    findings_summary(&left.findings)
                ),
            ));
        }
        if proposed == review.raw_overlay {
            return Err(ToolError::new(
                ErrorCode::NothingToRedact,
                format!(
                    "the overlay of preset {} holds nothing to redact; nothing was raised",
                    preset.name
                ),
            ));
        }
        let proposal = RedactionProposal {
            source: REDACTION_SOURCE.to_owned(),
            redactor_instance_id: ctx.instance_id.to_string(),
            soa_instance_id: ctx.instance_id.to_string(),
            call_site_id: call_site.clone(),
            preset_id: preset.id.to_string(),
            base_overlay_sha256: base_sha.clone(),
            redacted_overlay: proposed,
            findings: stored_findings(&review.findings),
        };
        proposal
            .check()
            .map_err(|e| ToolError::new(ErrorCode::InvalidArguments, e.to_string()))?;
        // One open proposal per preset and base overlay: a repeat (a
        // re-delivered signal, a second signal before the operator answers)
        // points at the open one instead of queueing a duplicate.
        let open = genesis_store::attention::open_redaction_in(
            ctx.conn,
            ctx.instance_id,
            &preset.id.to_string(),
            &base_sha,
        )
        .await?;
        if let Some(id) = open {
            return Ok(json!({
                "attentionRequestId": id, "status": "open", "alreadyOpen": true,
                "note": "a proposal for this overlay is already waiting for the operator",
            }));
        }
        let summary = findings_summary(&review.findings);
        let rationale = args
            .get("rationale")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let body = format!(
            "The Prompt Engineer proposes a redacted prompt overlay for preset {} (call-site {}). \
             Detectors found: {summary}.{}{}\n\nApprove to replace the overlay; reject to keep it.",
            preset.name,
            call_site,
            if rationale.is_empty() {
                ""
            } else {
                "\n\nRationale: "
            },
            rationale,
        );
        let metadata = serde_json::to_value(&proposal)
            .map_err(|e| ToolError::new(ErrorCode::HandlerFailed, e.to_string()))?;
        let row = genesis_store::attention::insert_in(
            ctx.conn,
            ctx.tenant_id,
            &genesis_store::NewAttentionRequest {
                instance_id: Some(ctx.instance_id),
                kind: genesis_core::AttentionKind::Redaction,
                title: format!(
                    "Redact the prompt overlay of {call_site} (preset {})",
                    preset.name
                ),
                body,
                options: json!(["approved", "rejected"]),
                metadata,
            },
        )
        .await?;
        let (id, created_at) = (row.id, row.created_at);
        Ok(json!({
            "attentionRequestId": id, "status": "open", "createdAt": created_at,
            "presetId": preset.id, "findings": summary,
            "note": "the overlay is unchanged until an operator approves",
        }))
    }
}
