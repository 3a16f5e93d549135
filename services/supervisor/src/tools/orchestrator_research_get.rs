//! `orchestrator_research_get` (read-only): one research record by id, or
//! records matching a full-text query, or the most recent. Must never write.

use genesis_store::research;
use serde_json::{Value, json};

use super::args::{INVALID, limit, optional_str, optional_uuid, to_json};
use super::{Tool, ToolContext, ToolError};

/// The research read.
pub struct OrchestratorResearchGet;

#[async_trait::async_trait]
impl Tool for OrchestratorResearchGet {
    fn name(&self) -> &'static str {
        "orchestrator_research_get"
    }

    fn description(&self) -> &'static str {
        "Read research records: give id for one record, query for a full-text search, or \
         neither for the most recent."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "id": {"type": "string"},
                "query": {"type": "string", "minLength": 1, "maxLength": 1024},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let id = optional_uuid(args, "id")?;
        let query = optional_str(args, "query")?;
        if id.is_some() && query.is_some() {
            return Err(ToolError::new(
                INVALID,
                "$: give either id or query, not both",
            ));
        }
        if let Some(id) = id {
            let record = research::get(ctx.conn, id).await?;
            return Ok(json!({"record": to_json(&record)?}));
        }
        let n = limit(args, "limit", 10, 1, 50)?;
        let records = research::search(ctx.conn, query, n).await?;
        Ok(json!({"records": records}))
    }
}
