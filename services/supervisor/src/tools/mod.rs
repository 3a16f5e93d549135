//! The governed tool registry (spec §3.8): one file per tool under this
//! folder, each implementing [`Tool`] (name, description, JSON schema of its
//! arguments, whether it is side-effecting or raises an escalation, and the
//! handler that runs inside the caller's tenant transaction); the
//! [`Governance`] gate every call passes before its handler; and the schema
//! validator. To add a tool: write `src/tools/<name>.rs`, add it to
//! [`ToolRegistry::standard`]. Must never authorise a tool: whether the
//! instance's mode grants it is decided by genesis-core's resolver before a
//! handler is looked up, and a handler must never commit or open its own
//! transaction.

use genesis_core::ErrorCode;

pub mod agent_query_memory;
pub mod agent_workset_complete;
pub mod args;
pub mod compliance_dossier_list;
pub mod compliance_dossier_record;
pub mod compliance_dossier_translate;
pub mod compliance_knowledge_ingest;
pub mod compliance_query_posture;
pub mod constitution_gate;
pub mod intelligence_code_search;
pub mod knowledge_query;
pub mod mission_ask_user;
pub mod orchestrator_research_create;
pub mod orchestrator_research_get;
pub mod redactor_propose_overlay;
pub mod schema;
pub mod soa_propose_decision;
pub mod soa_propose_mode_change;
pub mod soa_propose_task;
pub mod soa_query_telemetry;
pub mod soa_send_message;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

/// What a handler runs against: the tenant transaction the invocation row is
/// written in, and who is calling.
pub struct ToolContext<'a> {
    /// The tenant-scoped connection (RLS set); the handler's writes and the
    /// invocation record commit or roll back together.
    pub conn: &'a mut sqlx::PgConnection,
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub session: Uuid,
}

/// An in-band failure of a handler, fed back to the model; the transaction
/// is rolled back, so nothing of the call is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    /// Its catalogue code (`NOT_FOUND`, `HANDLER_FAILED`, ...).
    pub code: ErrorCode,
    pub message: String,
}

impl ToolError {
    /// A failure with `code`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<genesis_store::StoreError> for ToolError {
    fn from(err: genesis_store::StoreError) -> Self {
        match err {
            genesis_store::StoreError::NotFound { .. } => {
                Self::new(ErrorCode::NotFound, err.to_string())
            }
            genesis_store::StoreError::InvalidArgument { .. } => {
                Self::new(ErrorCode::InvalidArguments, err.to_string())
            }
            other => Self::new(ErrorCode::HandlerFailed, other.to_string()),
        }
    }
}

impl From<sqlx::Error> for ToolError {
    fn from(err: sqlx::Error) -> Self {
        genesis_store::StoreError::from(err).into()
    }
}

/// One governed tool.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// The superset name (genesis-core `TOOL_SUPERSET`).
    fn name(&self) -> &'static str;
    /// Shown to the model.
    fn description(&self) -> &'static str;
    /// JSON Schema of the arguments object (the subset [`schema::validate`]
    /// checks).
    fn schema(&self) -> Value;
    /// Changes tenant state outside the agent (copied into the ActionRecord,
    /// counted by the decision mapper). The classification is genesis-core's
    /// (artifact-record and self-applying tools), never a per-handler choice:
    /// a chat message or an escalation is not a side effect.
    fn side_effecting(&self) -> bool {
        genesis_core::modes::is_side_effecting(self.name())
    }
    /// A successful call raises an escalation (counts for the mapper);
    /// genesis-core's list, as the pod reads it.
    fn raises_escalation(&self) -> bool {
        genesis_core::modes::raises_escalation(self.name())
    }
    /// Run the call in `ctx`'s transaction; `args` already passed the schema
    /// and the governance gate. Returns the result JSON for the model.
    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError>;
}

/// One rule a call broke.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub rule: String,
    pub message: String,
}

/// A governance refusal: fed back to the model as `{blockedReason,
/// violations}`, never raised as an error (DESIGN invariant 13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violations {
    pub blocked_reason: String,
    pub violations: Vec<Violation>,
}

impl Violations {
    /// The result JSON the model receives.
    pub fn to_result(&self) -> Value {
        serde_json::json!({
            "blockedReason": self.blocked_reason,
            "violations": self.violations,
        })
    }
}

/// The governance gate every tool call passes before its handler. The
/// constitution plugs in here; [`AllowAll`] is the default.
#[async_trait::async_trait]
pub trait Governance: Send + Sync {
    /// `Err` blocks the call (nothing of the handler runs). `calls` are the
    /// earlier unblocked calls of this tool by this instance, in this tick
    /// and today (what action-limit rules count).
    async fn check(
        &self,
        tenant_id: Uuid,
        tool: &str,
        args: &Value,
        calls: CallCounts,
    ) -> Result<(), Violations>;
}

/// Earlier unblocked calls of one tool by one instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// In the current tick (the lease session).
    pub this_tick: u32,
    /// In the current UTC day.
    pub today: u32,
}

/// The default gate: every call passes.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

#[async_trait::async_trait]
impl Governance for AllowAll {
    async fn check(
        &self,
        _tenant_id: Uuid,
        _tool: &str,
        _args: &Value,
        _calls: CallCounts,
    ) -> Result<(), Violations> {
        Ok(())
    }
}

/// The tools this supervisor can run, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<&'static str, Registered>,
}

/// A registered tool with its schema as the bundle carries it, rendered
/// once at registration: every claim sends the schemas of its mode's
/// toolset, and building each schema's JSON and its text per claim was the
/// supervisor's largest single cost in the tick.
#[derive(Clone)]
struct Registered {
    tool: Arc<dyn Tool>,
    wire: genesis_proto::v1::ToolSchema,
}

impl ToolRegistry {
    /// Every tool shipped in this folder.
    pub fn standard() -> Self {
        let mut r = Self::default();
        r.register(Arc::new(soa_send_message::SoaSendMessage));
        r.register(Arc::new(soa_propose_decision::SoaProposeDecision));
        r.register(Arc::new(agent_workset_complete::AgentWorksetComplete));
        r.register(Arc::new(soa_query_telemetry::SoaQueryTelemetry));
        r.register(Arc::new(agent_query_memory::AgentQueryMemory));
        r.register(Arc::new(knowledge_query::KnowledgeQuery::INTELLIGENCE));
        r.register(Arc::new(knowledge_query::KnowledgeQuery::COMPLIANCE));
        r.register(Arc::new(intelligence_code_search::IntelligenceCodeSearch));
        r.register(Arc::new(compliance_query_posture::ComplianceQueryPosture));
        r.register(Arc::new(orchestrator_research_get::OrchestratorResearchGet));
        r.register(Arc::new(compliance_dossier_list::ComplianceDossierList));
        r.register(Arc::new(compliance_dossier_record::ComplianceDossierRecord));
        r.register(Arc::new(
            compliance_dossier_translate::ComplianceDossierTranslate,
        ));
        r.register(Arc::new(
            compliance_knowledge_ingest::ComplianceKnowledgeIngest,
        ));
        r.register(Arc::new(
            orchestrator_research_create::OrchestratorResearchCreate,
        ));
        r.register(Arc::new(soa_propose_mode_change::SoaProposeModeChange));
        r.register(Arc::new(soa_propose_task::SoaProposeTask));
        r.register(Arc::new(mission_ask_user::MissionAskUser));
        r.register(Arc::new(redactor_propose_overlay::RedactorProposeOverlay));
        r
    }

    /// Add (or replace) a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let wire = genesis_proto::v1::ToolSchema {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            json_schema: tool.schema().to_string(),
        };
        self.tools.insert(tool.name(), Registered { tool, wire });
    }

    /// The tool called `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name).map(|r| &r.tool)
    }

    /// Registered tool names.
    pub fn names(&self) -> Vec<&'static str> {
        self.tools.keys().copied().collect()
    }

    /// Schemas of the registered members of `toolset`, in toolset order
    /// (tools of the superset not implemented here are left out, so the
    /// model is never offered a tool that cannot run).
    pub fn schemas_for(&self, toolset: &[String]) -> Vec<genesis_proto::v1::ToolSchema> {
        toolset
            .iter()
            .filter_map(|name| self.tools.get(name.as_str()))
            .map(|r| r.wire.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_tool_is_in_the_superset_with_an_object_schema() {
        let r = ToolRegistry::standard();
        for name in r.names() {
            assert!(
                genesis_core::modes::tool_class(name).is_some(),
                "{name} is outside the superset"
            );
            let tool = r.get(name).expect("registered");
            assert_eq!(tool.schema()["type"], "object", "{name}");
        }
        assert_eq!(r.names().len(), genesis_core::TOOL_SUPERSET.len());
    }

    #[test]
    fn schemas_follow_toolset_order_and_skip_unimplemented_tools() {
        let r = ToolRegistry::standard();
        let set = vec![
            "soa_send_message".to_owned(),
            "soa_query_telemetry".to_owned(),
            "not_a_served_tool".to_owned(),
            "soa_propose_decision".to_owned(),
        ];
        let schemas = r.schemas_for(&set);
        // The held text is the tool's own schema and description.
        for s in &schemas {
            let tool = r.get(&s.name).expect("registered");
            assert_eq!(s.description, tool.description());
            let held: Value = serde_json::from_str(&s.json_schema).expect("JSON");
            assert_eq!(held, tool.schema(), "{}", s.name);
        }
        let names: Vec<_> = schemas.into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "soa_send_message",
                "soa_query_telemetry",
                "soa_propose_decision"
            ]
        );
    }

    /// A stand-in registered under a served tool's name, with its own schema.
    struct Stand(&'static str);

    #[async_trait::async_trait]
    impl Tool for Stand {
        fn name(&self) -> &'static str {
            "soa_send_message"
        }
        fn description(&self) -> &'static str {
            self.0
        }
        fn schema(&self) -> Value {
            serde_json::json!({"type": "object", "title": self.0})
        }
        async fn run(&self, _ctx: &mut ToolContext<'_>, _args: &Value) -> Result<Value, ToolError> {
            Ok(Value::Null)
        }
    }

    #[test]
    fn a_replaced_tool_is_sent_with_its_own_schema() {
        let mut r = ToolRegistry::standard();
        r.register(Arc::new(Stand("stand-in")));
        let sent = r.schemas_for(&["soa_send_message".to_owned()]);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].description, "stand-in");
        assert_eq!(
            serde_json::from_str::<Value>(&sent[0].json_schema).expect("JSON"),
            serde_json::json!({"type": "object", "title": "stand-in"})
        );
    }

    #[test]
    fn violations_render_as_blocked_reason_and_list() {
        let v = Violations {
            blocked_reason: "constitution".into(),
            violations: vec![Violation {
                rule: "r1".into(),
                message: "no".into(),
            }],
        };
        assert_eq!(
            v.to_result(),
            serde_json::json!({"blockedReason": "constitution", "violations": [{"rule": "r1", "message": "no"}]})
        );
    }
}
