//! `compliance_query_posture` (read-only): the compliance posture per
//! framework, derived from the dossiers (counts by status, score, gaps).
//! Must never write.

use genesis_store::dossiers;
use serde_json::{Value, json};

use super::args::{optional_str, optional_uuid};
use super::{Tool, ToolContext, ToolError};

/// The posture read.
pub struct ComplianceQueryPosture;

#[async_trait::async_trait]
impl Tool for ComplianceQueryPosture {
    fn name(&self) -> &'static str {
        "compliance_query_posture"
    }

    fn description(&self) -> &'static str {
        "The compliance posture per framework, derived from the recorded dossiers: controls by \
         status (compliant, partial, gap, not_applicable), a 0..1 score and the open gaps."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "framework": {"type": "string", "minLength": 1, "maxLength": 128},
                "projectId": {"type": "string"}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let framework = optional_str(args, "framework")?;
        let project = optional_uuid(args, "projectId")?;
        let posture = dossiers::posture(ctx.conn, framework, project).await?;
        Ok(json!({"frameworks": posture}))
    }
}
