//! `compliance_dossier_list` (read-only): the recorded dossiers, filtered by
//! framework, project or status, with the languages each is translated
//! into. Must never write.

use genesis_store::dossiers::{self, DossierFilter, DossierStatus};
use serde_json::{Value, json};

use super::args::{limit, optional_str, optional_uuid};
use super::{Tool, ToolContext, ToolError};

/// The dossier list.
pub struct ComplianceDossierList;

#[async_trait::async_trait]
impl Tool for ComplianceDossierList {
    fn name(&self) -> &'static str {
        "compliance_dossier_list"
    }

    fn description(&self) -> &'static str {
        "List compliance dossiers (one per framework control), optionally filtered by framework, \
         project or status."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "framework": {"type": "string", "minLength": 1, "maxLength": 128},
                "projectId": {"type": "string"},
                "status": {"enum": ["compliant", "partial", "gap", "not_applicable"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 200}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let filter = DossierFilter {
            framework: optional_str(args, "framework")?.map(str::to_owned),
            project_id: optional_uuid(args, "projectId")?,
            status: optional_str(args, "status")?
                .map(|s| DossierStatus::parse("status", s))
                .transpose()?,
        };
        let n = limit(args, "limit", 50, 1, 200)?;
        let list = dossiers::list(ctx.conn, &filter, n).await?;
        Ok(json!({"dossiers": list}))
    }
}
