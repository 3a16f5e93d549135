//! `mission_ask_user` (control): a mission agent's question to the operator
//! (spec §2.4, Mission HITL). Creates an open attention request of kind
//! `mission_question` whose metadata is
//! `{source: "mission", missionInstanceId, question, context}`; its
//! `options` are the suggested answers. When the operator resolves it,
//! control enqueues the answer back to the asking instance (an
//! `OperatorAnsweredEscalation` carrying `{attentionRequestId, resolution,
//! resolutionNotes}`), which the mission resumes from as refinement
//! guidance, and `DecisionResolved` to the steering instance (the tenant's
//! SOA; see `genesis_core::signals`). Must never enqueue either event
//! itself (the agent never enqueues) nor block the tick.

use serde_json::{Value, json};

use super::args::{optional_str, required_str, string_list};
use super::{Tool, ToolContext, ToolError};

/// The mission question.
pub struct MissionAskUser;

#[async_trait::async_trait]
impl Tool for MissionAskUser {
    fn name(&self) -> &'static str {
        "mission_ask_user"
    }

    fn description(&self) -> &'static str {
        "Ask the operator a question about this mission. The answer arrives on a later tick as \
         refinement guidance; keep working on what does not depend on it."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["question"],
            "properties": {
                "question": {"type": "string", "minLength": 1, "maxLength": 4096},
                "context": {"type": "string", "maxLength": 16384},
                "options": {"type": "array", "maxItems": 10,
                            "items": {"type": "string", "minLength": 1, "maxLength": 200}}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let question = required_str(args, "question")?;
        let context = optional_str(args, "context")?.unwrap_or_default();
        let options = string_list(args, "options")?;
        let title: String = question.chars().take(200).collect();
        let metadata = json!({
            "source": "mission",
            "missionInstanceId": ctx.instance_id.to_string(),
            "question": question,
            "context": context,
        });
        let row = genesis_store::attention::insert_in(
            ctx.conn,
            ctx.tenant_id,
            &genesis_store::NewAttentionRequest {
                instance_id: Some(ctx.instance_id),
                kind: genesis_core::AttentionKind::MissionQuestion,
                title: title.to_owned(),
                body: context.to_owned(),
                options: json!(options),
                metadata,
            },
        )
        .await?;
        let (id, created_at) = (row.id, row.created_at);
        Ok(json!({"attentionRequestId": id, "status": "open", "createdAt": created_at}))
    }
}
