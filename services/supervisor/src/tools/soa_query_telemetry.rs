//! `soa_query_telemetry` (read-only): the system's own turn, cost, error and
//! latency statistics for the caller's tenant over a recent window, from
//! the ledger, `llm_call_snapshots`, `llm_call_attempts` and
//! `tool_invocations`. Must never write, and never read another tenant
//! (the connection is RLS-scoped).

use serde_json::{Value, json};

use super::args::limit;
use super::{Tool, ToolContext, ToolError};

/// The self-telemetry read.
pub struct SoaQueryTelemetry;

#[async_trait::async_trait]
impl Tool for SoaQueryTelemetry {
    fn name(&self) -> &'static str {
        "soa_query_telemetry"
    }

    fn description(&self) -> &'static str {
        "Read this tenant's agent telemetry for the last windowHours (default 24): turns by \
         decision kind, LLM calls, tokens and cost, provider errors, call latency, blocked tool calls."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "windowHours": {"type": "integer", "minimum": 1, "maximum": 720}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let hours = limit(args, "windowHours", 24, 1, 720)?;
        let hours = i32::try_from(hours).unwrap_or(24);
        let stats = genesis_store::telemetry::window_in(ctx.conn, hours).await?;
        Ok(stats)
    }
}
