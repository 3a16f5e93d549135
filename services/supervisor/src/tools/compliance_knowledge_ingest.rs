//! `compliance_knowledge_ingest` (artifact-record): adds a document to the
//! tenant's compliance knowledge corpus, searchable at once by
//! `compliance_knowledge_query`. Must never write to the intelligence
//! corpus.

use genesis_store::knowledge::{self, KnowledgeKind, NewKnowledgeDocument};
use serde_json::{Value, json};

use super::args::{optional_str, optional_uuid, required_str};
use super::{Tool, ToolContext, ToolError};

/// The compliance corpus ingest.
pub struct ComplianceKnowledgeIngest;

#[async_trait::async_trait]
impl Tool for ComplianceKnowledgeIngest {
    fn name(&self) -> &'static str {
        "compliance_knowledge_ingest"
    }

    fn description(&self) -> &'static str {
        "Add a document (a regulation excerpt, a policy, evidence) to the compliance knowledge corpus."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["title", "body"],
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 500},
                "body": {"type": "string", "minLength": 1, "maxLength": 262144},
                "source": {"type": "string", "maxLength": 2048},
                "projectId": {"type": "string"}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let doc = NewKnowledgeDocument {
            project_id: optional_uuid(args, "projectId")?,
            kind: KnowledgeKind::Compliance,
            title: required_str(args, "title")?.to_owned(),
            body: required_str(args, "body")?.to_owned(),
            source: optional_str(args, "source")?.unwrap_or_default().to_owned(),
        };
        let d = knowledge::ingest(ctx.conn, ctx.tenant_id, &doc).await?;
        Ok(json!({"documentId": d.id, "kind": "compliance", "createdAt": d.created_at}))
    }
}
