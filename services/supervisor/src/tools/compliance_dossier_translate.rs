//! `compliance_dossier_translate` (artifact-record): records (or replaces) a
//! dossier's translation into one language, stamped with the dossier
//! version it was made from. Must never alter the dossier itself.

use genesis_store::dossiers;
use serde_json::{Value, json};

use super::args::{required_str, required_uuid};
use super::{Tool, ToolContext, ToolError};

/// The dossier translation record.
pub struct ComplianceDossierTranslate;

#[async_trait::async_trait]
impl Tool for ComplianceDossierTranslate {
    fn name(&self) -> &'static str {
        "compliance_dossier_translate"
    }

    fn description(&self) -> &'static str {
        "Record your translation of a dossier into another language (a tag such as \"de\" or \
         \"pt-BR\"); replaces an earlier translation into the same language."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["dossierId", "language", "title", "body"],
            "properties": {
                "dossierId": {"type": "string"},
                "language": {"type": "string", "minLength": 2, "maxLength": 16},
                "title": {"type": "string", "minLength": 1, "maxLength": 500},
                "body": {"type": "string", "minLength": 1, "maxLength": 262144}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let dossier = required_uuid(args, "dossierId")?;
        let t = dossiers::translate(
            ctx.conn,
            ctx.tenant_id,
            dossier,
            required_str(args, "language")?,
            required_str(args, "title")?,
            required_str(args, "body")?,
        )
        .await?;
        Ok(
            json!({"translationId": t.id, "dossierId": t.dossier_id, "language": t.language,
                  "sourceVersion": t.source_version}),
        )
    }
}
