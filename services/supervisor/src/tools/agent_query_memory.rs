//! `agent_query_memory` (read-only): full-text search over this instance's
//! own ledger (reasoning summaries and wait conditions, served by the
//! ledger's GIN expression index), newest first. Must never read another
//! instance's turns nor write anything.

use serde_json::{Value, json};

use super::args::{limit, required_str};
use super::{Tool, ToolContext, ToolError};

/// The ledger-memory search.
pub struct AgentQueryMemory;

#[async_trait::async_trait]
impl Tool for AgentQueryMemory {
    fn name(&self) -> &'static str {
        "agent_query_memory"
    }

    fn description(&self) -> &'static str {
        "Search your own past turns (reasoning summaries and wait conditions) for words; newest first."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["query"],
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 1024},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let query = required_str(args, "query")?;
        let n = limit(args, "limit", 10, 1, 50)?;
        let turns =
            genesis_store::ledger::memory_search_in(ctx.conn, ctx.instance_id, query, n).await?;
        Ok(json!({"query": query, "turns": turns}))
    }
}
