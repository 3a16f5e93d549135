//! `compliance_dossier_record` (artifact-record): records a framework
//! control's dossier (re-recording the same control replaces it and bumps
//! its version). Must never touch anything but the dossier tables.

use genesis_store::dossiers::{self, DossierStatus, NewDossier};
use serde_json::{Value, json};

use super::args::{optional_str, optional_uuid, required_str, to_json};
use super::{Tool, ToolContext, ToolError};

/// The dossier record.
pub struct ComplianceDossierRecord;

#[async_trait::async_trait]
impl Tool for ComplianceDossierRecord {
    fn name(&self) -> &'static str {
        "compliance_dossier_record"
    }

    fn description(&self) -> &'static str {
        "Record the dossier of one framework control: its assessment text and status. Recording \
         the same framework + controlId again replaces it and bumps the version."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["framework", "controlId", "title", "body", "status"],
            "properties": {
                "framework": {"type": "string", "minLength": 1, "maxLength": 128},
                "controlId": {"type": "string", "minLength": 1, "maxLength": 128},
                "title": {"type": "string", "minLength": 1, "maxLength": 500},
                "body": {"type": "string", "minLength": 1, "maxLength": 262144},
                "status": {"enum": ["compliant", "partial", "gap", "not_applicable"]},
                "language": {"type": "string", "minLength": 2, "maxLength": 16},
                "projectId": {"type": "string"}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let new = NewDossier {
            project_id: optional_uuid(args, "projectId")?,
            framework: required_str(args, "framework")?.to_owned(),
            control_id: required_str(args, "controlId")?.to_owned(),
            title: required_str(args, "title")?.to_owned(),
            body: required_str(args, "body")?.to_owned(),
            status: DossierStatus::parse("status", required_str(args, "status")?)?,
            language: optional_str(args, "language")?.unwrap_or("en").to_owned(),
            recorded_by: Some(ctx.instance_id),
        };
        let d = dossiers::record(ctx.conn, ctx.tenant_id, &new).await?;
        Ok(json!({"dossierId": d.id, "version": d.version, "dossier": to_json(&d)?}))
    }
}
