//! `soa_propose_task` (self-applying, SOA only): creates a mission in
//! status `proposed` steered by the calling SOA, with metadata `{source:
//! "soa", soaInstanceId, target}` so it appears on the instance's
//! open-items roster. The constitution (content, action limits and scope
//! boundaries on `kind`/`target`) has already run in the governance gate
//! when this handler is reached. Must never run for a non-SOA instance
//! (checked here too, beside the mode rail) and never start the mission.

use genesis_core::ErrorCode;

use genesis_core::AgentType;
use serde_json::{Value, json};

use super::args::{optional_str, required_str};
use super::{Tool, ToolContext, ToolError};

/// The mission kinds a SOA may propose (the mission agent types).
pub const MISSION_KINDS: &[&str] = &["MissionDevelopment", "MissionResearch", "MissionOperations"];

/// The governed mission-create.
pub struct SoaProposeTask;

#[async_trait::async_trait]
impl Tool for SoaProposeTask {
    fn name(&self) -> &'static str {
        "soa_propose_task"
    }

    fn description(&self) -> &'static str {
        "Propose a mission (development, research or operations) that you will steer. It is \
         created in status proposed and checked against the tenant constitution first; check \
         the open-items roster so you never propose a duplicate."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["kind", "title", "description"],
            "properties": {
                "kind": {"enum": MISSION_KINDS},
                "title": {"type": "string", "minLength": 1, "maxLength": 500},
                "description": {"type": "string", "minLength": 1, "maxLength": 16384},
                "target": {"type": "string", "minLength": 1, "maxLength": 512,
                           "description": "What the mission acts on (a repository, service or area)."}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let kind = required_str(args, "kind")?;
        if !MISSION_KINDS.contains(&kind) {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!("$.kind: must be one of {}", MISSION_KINDS.join(", ")),
            ));
        }
        let title = required_str(args, "title")?;
        let description = required_str(args, "description")?;
        let target = optional_str(args, "target")?;
        let agent_type = genesis_store::instances::get_in(ctx.conn, ctx.instance_id)
            .await?
            .agent_type;
        if agent_type != AgentType::Soa {
            return Err(ToolError::new(
                ErrorCode::NotPermitted,
                format!("soa_propose_task is reserved to the SOA; this instance is {agent_type}"),
            ));
        }
        let metadata = json!({"source": "soa", "soaInstanceId": ctx.instance_id.to_string(), "target": target});
        // The store's create checks the fields (lengths in bytes, where the
        // schema counts characters) and the steering instance; a refusal is
        // an in-band INVALID_ARGUMENTS and the call writes nothing.
        let mission = genesis_store::missions::create_in(
            ctx.conn,
            ctx.tenant_id,
            &genesis_store::NewMission {
                steering_instance_id: Some(ctx.instance_id),
                kind: kind.to_owned(),
                title: title.to_owned(),
                description: description.to_owned(),
                metadata,
            },
        )
        .await?;
        let (id, created_at) = (mission.id, mission.created_at);
        Ok(json!({"missionId": id, "status": "proposed", "kind": kind, "createdAt": created_at}))
    }
}
