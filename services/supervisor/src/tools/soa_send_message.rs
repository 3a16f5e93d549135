//! `soa_send_message`: the agent → operator chat message (spec §2.4). Appends
//! an `agent_messages` row (direction `agent_to_operator`) and notifies
//! `genesis_messages` so control can stream it live; both land with the
//! invocation record or not at all. Must never enqueue an event: the
//! operator's reply is enqueued by control.

use genesis_core::ErrorCode;

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError};

/// The chat verb.
pub struct SoaSendMessage;

#[async_trait::async_trait]
impl Tool for SoaSendMessage {
    fn name(&self) -> &'static str {
        "soa_send_message"
    }

    fn description(&self) -> &'static str {
        "Send a short message to the operator (the agent's chat transcript). Non-blocking: \
         the operator's reply arrives as an OperatorMessage event on a later tick."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["body"],
            "properties": {
                "body": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": genesis_core::validate::MAX_MESSAGE_BYTES,
                    "description": "The message text."
                }
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let body = args.get("body").and_then(Value::as_str).unwrap_or_default();
        genesis_core::validate::validate_message("body", body)
            .map_err(|e| ToolError::new(ErrorCode::InvalidArguments, e.to_string()))?;
        let message = genesis_store::messages::append_in(
            ctx.conn,
            ctx.tenant_id,
            ctx.instance_id,
            genesis_core::MessageDirection::AgentToOperator,
            body,
        )
        .await?;
        let (id, created_at) = (message.id, message.created_at);
        // The `agent_messages` insert trigger notifies `genesis_messages`
        // for WatchTurns; a second notify here would show the message twice.
        Ok(json!({"messageId": id, "createdAt": created_at, "delivered": true}))
    }
}
