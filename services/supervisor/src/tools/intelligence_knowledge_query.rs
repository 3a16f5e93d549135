//! `intelligence_knowledge_query` (read-only): ranked full-text search of the
//! tenant's intelligence knowledge corpus (`knowledge_documents` of kind
//! `intelligence`), optionally one project. Must never write nor search the
//! other corpus.

use genesis_store::knowledge::{self, KnowledgeKind};
use serde_json::{Value, json};

use super::args::{limit, optional_uuid, required_str};
use super::{Tool, ToolContext, ToolError};

/// The intelligence corpus search.
pub struct IntelligenceKnowledgeQuery;

#[async_trait::async_trait]
impl Tool for IntelligenceKnowledgeQuery {
    fn name(&self) -> &'static str {
        "intelligence_knowledge_query"
    }

    fn description(&self) -> &'static str {
        "Full-text search of the tenant's intelligence knowledge (web-search syntax: words, \"phrases\", \
         -exclusions, or). Best matches first, each with a highlighted snippet."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["query"],
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 1024},
                "projectId": {"type": "string", "description": "Only this project (UUID)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let query = required_str(args, "query")?;
        let project = optional_uuid(args, "projectId")?;
        let n = limit(args, "limit", 10, 1, 50)?;
        let hits =
            knowledge::search(ctx.conn, KnowledgeKind::Intelligence, query, project, n).await?;
        Ok(json!({"query": query, "results": hits}))
    }
}
