//! `intelligence_code_search` (read-only): the lines of the tenant's source
//! files that match a query, each with its path and 1-based line number.
//! Must never write nor return a whole file.

use genesis_store::knowledge;
use serde_json::{Value, json};

use super::args::{limit, optional_uuid, required_str};
use super::{Tool, ToolContext, ToolError};

/// The code search.
pub struct IntelligenceCodeSearch;

#[async_trait::async_trait]
impl Tool for IntelligenceCodeSearch {
    fn name(&self) -> &'static str {
        "intelligence_code_search"
    }

    fn description(&self) -> &'static str {
        "Search the tenant's source code for identifiers or words; returns matching lines with \
         path and line number (files must contain every term)."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["query"],
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 1024},
                "projectId": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let query = required_str(args, "query")?;
        let project = optional_uuid(args, "projectId")?;
        let n = limit(args, "limit", 20, 1, 50)?;
        let matches = knowledge::code_search(ctx.conn, query, project, n).await?;
        Ok(json!({"query": query, "matches": matches}))
    }
}
