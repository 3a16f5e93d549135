//! `soa_propose_decision`: the agent's escalation to a human (spec §2.4).
//! Creates an open attention request of kind `decision` carrying
//! `{source: "soa", soaInstanceId}` so it lands on the operator's decision
//! queue and on this instance's open-items roster. A decision raised on
//! behalf of a mission names it (`missionId`, a mission this instance
//! steers, else refused with nothing written): its resolution also wakes
//! the mission's steering instance with `DecisionResolved` (spec §3.1).
//! Must never resolve or act on the decision itself: the operator's answer
//! comes back as an `OperatorAnsweredEscalation` event (and, for a
//! mission's decision, `DecisionResolved`) enqueued by control.

use genesis_core::ErrorCode;

use serde_json::{Value, json};

use super::args::{INVALID, optional_uuid};
use super::{Tool, ToolContext, ToolError};

/// The escalation verb.
pub struct SoaProposeDecision;

#[async_trait::async_trait]
impl Tool for SoaProposeDecision {
    fn name(&self) -> &'static str {
        "soa_propose_decision"
    }

    fn description(&self) -> &'static str {
        "Ask the operator to decide a genuine fork. Creates a decision on the operator's queue; \
         the answer resumes you on a later tick. Check the open-items roster first: never \
         propose a decision that is already open."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["title"],
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 500},
                "body": {"type": "string", "maxLength": 16384},
                "options": {
                    "type": "array",
                    "maxItems": 10,
                    "items": {"type": "string", "minLength": 1, "maxLength": 200}
                },
                "missionId": {
                    "type": "string", "minLength": 36, "maxLength": 36,
                    "description": "The mission (one you steer) this decision is raised on behalf of."
                }
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let title = args
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if title.trim().is_empty() {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                "$.title: must not be blank",
            ));
        }
        let body = args.get("body").and_then(Value::as_str).unwrap_or_default();
        let options = args.get("options").cloned().unwrap_or_else(|| json!([]));
        let mission_id = optional_uuid(args, "missionId")?;
        let mut metadata = json!({"source": "soa", "soaInstanceId": ctx.instance_id.to_string()});
        if let Some(mission_id) = mission_id {
            if !genesis_store::missions::is_steered_by_in(ctx.conn, mission_id, ctx.instance_id)
                .await?
            {
                return Err(ToolError::new(
                    INVALID,
                    format!("$.missionId: {mission_id} is not a mission you steer"),
                ));
            }
            metadata[genesis_core::signals::MISSION_ID_KEY] = json!(mission_id.to_string());
        }
        let row = genesis_store::attention::insert_in(
            ctx.conn,
            ctx.tenant_id,
            &genesis_store::NewAttentionRequest {
                instance_id: Some(ctx.instance_id),
                kind: genesis_core::AttentionKind::Decision,
                title: title.to_owned(),
                body: body.to_owned(),
                options,
                metadata,
            },
        )
        .await?;
        let (id, created_at) = (row.id, row.created_at);
        Ok(json!({"attentionRequestId": id, "status": "open", "createdAt": created_at}))
    }
}
