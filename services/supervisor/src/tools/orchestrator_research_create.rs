//! `orchestrator_research_create` (artifact-record): records research
//! findings attributed to the calling instance. Must never edit an existing
//! record (a correction is a new record).

use genesis_store::research::{self, NewResearchRecord};
use serde_json::{Value, json};

use super::args::{optional_str, optional_uuid, required_str, string_list};
use super::{Tool, ToolContext, ToolError};

/// The research record.
pub struct OrchestratorResearchCreate;

#[async_trait::async_trait]
impl Tool for OrchestratorResearchCreate {
    fn name(&self) -> &'static str {
        "orchestrator_research_create"
    }

    fn description(&self) -> &'static str {
        "Record research findings (title, findings, optional question, sources and tags) so they \
         can be found again with orchestrator_research_get."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["title", "findings"],
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 500},
                "question": {"type": "string", "maxLength": 131072},
                "findings": {"type": "string", "minLength": 1, "maxLength": 131072},
                "sources": {"type": "array", "maxItems": 50, "items": {"type": "string", "minLength": 1, "maxLength": 2048}},
                "tags": {"type": "array", "maxItems": 50, "items": {"type": "string", "minLength": 1, "maxLength": 2048}},
                "projectId": {"type": "string"}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let new = NewResearchRecord {
            project_id: optional_uuid(args, "projectId")?,
            title: required_str(args, "title")?.to_owned(),
            question: optional_str(args, "question")?
                .unwrap_or_default()
                .to_owned(),
            findings: required_str(args, "findings")?.to_owned(),
            sources: string_list(args, "sources")?,
            tags: string_list(args, "tags")?,
        };
        let r = research::create(ctx.conn, ctx.tenant_id, Some(ctx.instance_id), &new).await?;
        Ok(json!({"researchId": r.id, "createdAt": r.created_at}))
    }
}
