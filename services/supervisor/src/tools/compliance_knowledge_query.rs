//! `compliance_knowledge_query` (read-only): ranked full-text search of the
//! tenant's compliance knowledge corpus (`knowledge_documents` of kind
//! `compliance`), optionally one project. Must never write nor search the
//! other corpus.

use genesis_store::knowledge::{self, KnowledgeKind};
use serde_json::{Value, json};

use super::args::{limit, optional_uuid, required_str};
use super::{Tool, ToolContext, ToolError};

/// The compliance corpus search.
pub struct ComplianceKnowledgeQuery;

#[async_trait::async_trait]
impl Tool for ComplianceKnowledgeQuery {
    fn name(&self) -> &'static str {
        "compliance_knowledge_query"
    }

    fn description(&self) -> &'static str {
        "Full-text search of the tenant's compliance knowledge (web-search syntax: words, \"phrases\", \
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
            knowledge::search(ctx.conn, KnowledgeKind::Compliance, query, project, n).await?;
        Ok(json!({"query": query, "results": hits}))
    }
}
