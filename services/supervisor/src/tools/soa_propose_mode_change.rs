//! `soa_propose_mode_change` (control): the agent's request to switch its
//! own operating mode (spec §2.5, rails R3/R7). Creates an open attention
//! request of kind `mode_change` carrying `{source: "soa", soaInstanceId,
//! targetMode, fromMode}`, after validating `targetMode` against the
//! agent's own catalogue (the `agent_modes` rows of its type, then the
//! in-code seed). Must NEVER write `active_mode` nor append
//! `agent_mode_change_events`: only a human (the UI or the approval of this
//! request, through control's chokepoint) changes a mode.

use genesis_core::modes::seed_catalogue;
use serde_json::{Value, json};

use super::args::{INVALID, optional_str, required_str};
use super::{Tool, ToolContext, ToolError};

/// The mode-switch proposal.
pub struct SoaProposeModeChange;

#[async_trait::async_trait]
impl Tool for SoaProposeModeChange {
    fn name(&self) -> &'static str {
        "soa_propose_mode_change"
    }

    fn description(&self) -> &'static str {
        "Ask the operator to switch your operating mode. You cannot switch it yourself: this \
         raises a request on the operator's decision queue; an approval changes the mode for \
         later ticks."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["targetMode", "reason"],
            "properties": {
                "targetMode": {"type": "string", "minLength": 1, "maxLength": 64},
                "reason": {"type": "string", "minLength": 1, "maxLength": 4096}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let target = required_str(args, "targetMode")?;
        let reason = optional_str(args, "reason")?.unwrap_or_default();
        let genesis_store::modes::InstanceModeNames {
            agent_type,
            active_mode: active,
            names: table_modes,
        } = genesis_store::modes::mode_names_in(ctx.conn, ctx.instance_id).await?;
        let seed: Vec<String> = seed_catalogue(agent_type)
            .into_iter()
            .map(|m| m.name)
            .collect();
        if !table_modes.iter().chain(seed.iter()).any(|m| m == target) {
            let mut known: Vec<&String> = table_modes.iter().chain(seed.iter()).collect();
            known.sort();
            known.dedup();
            return Err(ToolError::new(
                INVALID,
                format!(
                    "$.targetMode: {target:?} is not a mode of {agent_type}; choose one of {}",
                    known
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let current = active.or_else(|| seed.first().cloned());
        if current.as_deref() == Some(target) {
            return Err(ToolError::new(
                INVALID,
                format!("$.targetMode: you are already in mode {target}"),
            ));
        }
        let metadata = json!({
            "source": "soa",
            "soaInstanceId": ctx.instance_id.to_string(),
            "targetMode": target,
            "fromMode": current,
        });
        let row = genesis_store::attention::insert_in(
            ctx.conn,
            ctx.tenant_id,
            &genesis_store::NewAttentionRequest {
                instance_id: Some(ctx.instance_id),
                kind: genesis_core::AttentionKind::ModeChange,
                title: format!("Switch mode to {target}"),
                body: reason.to_owned(),
                options: json!(["approve", "reject"]),
                metadata,
            },
        )
        .await?;
        let (id, created_at) = (row.id, row.created_at);
        Ok(
            json!({"attentionRequestId": id, "status": "open", "targetMode": target,
                  "createdAt": created_at, "note": "the mode is unchanged until an operator approves"}),
        )
    }
}
