//! `agent_workset_complete`: the control terminator that ends the
//! foundational phase (spec §3.6): clears `is_building_starting_workset` so
//! the next tick runs under the normal per-tick budget. Must never touch the
//! tick counters, phase or lease: those belong to CompleteTick alone.

use genesis_core::ErrorCode;

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError};

/// The foundational-phase terminator.
pub struct AgentWorksetComplete;

#[async_trait::async_trait]
impl Tool for AgentWorksetComplete {
    fn name(&self) -> &'static str {
        "agent_workset_complete"
    }

    fn description(&self) -> &'static str {
        "Declare your starting workset built. Ends the foundational phase: later ticks run \
         under the normal per-tick budget."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "summary": {"type": "string", "maxLength": 4096}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, _args: &Value) -> Result<Value, ToolError> {
        let was = genesis_store::instances::complete_workset_in(ctx.conn, ctx.instance_id).await?;
        match was {
            Some(was) => Ok(json!({"worksetComplete": true, "wasBuildingStartingWorkset": was})),
            None => Err(ToolError::new(
                ErrorCode::NotFound,
                "agent instance not found",
            )),
        }
    }
}
