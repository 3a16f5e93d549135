//! The pod's validated view of a claimed tick: each wire message the
//! supervisor sends is converted here once, by `TryFrom`, and nothing past
//! this module sees a prost type of the bundle. The planning loop and the
//! invoker read typed ids, genesis-core's enums, the event payload as JSON
//! and the budget as limits; the requests the pod sends stay wire types built
//! where they are sent. (The planning module's two wire adapters, kept for
//! callers that assemble a bundle themselves, convert through here too.)
//!
//! A field the tick decides on (the session, the instance and its type, the
//! event and its kind and payload, the mode, the budget, the preset chain,
//! the credit status, the roster and the ops digest the supervisor always
//! sends) must be present and well formed, or the conversion fails with a
//! [`BundleError`] naming the field. What the model is only shown (the ledger
//! tail, the roster's rows, the corpus, the redaction target, the chat) is
//! carried as the supervisor rendered it: the supervisor read those rows
//! through genesis-core's strict types already, and a label the pod cannot
//! parse must not cost a tick the model could still plan.
//!
//! This module must never do I/O, and never fill in a default that hides a
//! missing field the tick needs: an absent message is an error, not an empty
//! one. The only readings of absence it makes are the wire's own documented
//! ones (an absent budget axis is unlimited, an empty plan hash means no
//! earlier planned tick, an empty payload means no payload).

use chrono::{DateTime, Utc};
use genesis_core::budget::Limit;
use genesis_core::redact::StoredFinding;
use genesis_core::{AgentEventKind, AgentType, PlanInputHash};
use genesis_proto::convert::echo;
use genesis_proto::v1 as pb;
use serde_json::Value;
use uuid::Uuid;

/// Why a claimed bundle cannot be run: the field (its path from the bundle)
/// and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct BundleError {
    /// The field's path, e.g. `bundle.instance.id`.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

impl BundleError {
    pub(crate) fn new(field: &'static str, problem: impl Into<String>) -> Self {
        BundleError {
            field,
            problem: problem.into(),
        }
    }

    fn missing(field: &'static str) -> Self {
        Self::new(field, "required")
    }
}

fn require<T>(field: &'static str, value: Option<T>) -> Result<T, BundleError> {
    value.ok_or_else(|| BundleError::missing(field))
}

fn uuid(field: &'static str, value: &str) -> Result<Uuid, BundleError> {
    if value.is_empty() {
        return Err(BundleError::missing(field));
    }
    Uuid::try_parse(value)
        .map_err(|_| BundleError::new(field, format!("not a UUID: {}", echo(value))))
}

fn stored_enum<T: std::str::FromStr>(
    field: &'static str,
    what: &str,
    value: &str,
) -> Result<T, BundleError> {
    value
        .parse()
        .map_err(|_| BundleError::new(field, format!("not a known {what}: {}", echo(value))))
}

/// One claimed tick: what the planning loop runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedTick {
    /// The lease session every later call of the tick carries.
    pub session_id: Uuid,
    /// When the granted lease lapses; `None` when the supervisor did not
    /// say (the pod then renews at its own interval).
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// The pre-tick instance snapshot.
    pub instance: InstanceSnapshot,
    /// The event the tick runs on.
    pub event: TickEvent,
    /// The resolved mode.
    pub mode: Mode,
    /// The per-tick envelope.
    pub budget: TickBudget,
    /// The LLM couples to try, and the preset's prompt overlay.
    pub preset_chain: PresetChain,
    /// The tenant's weekly credit window, as the gate reads it.
    pub credit: Credit,
    /// The forced re-plan is due: plan even if the inputs are unchanged.
    pub forced_replan_due: bool,
    /// What the objective shows the model.
    pub context: TickContext,
    /// The earlier episode of this event to resume, if a session before
    /// this one journaled any of it.
    pub resume: crate::resume::Resume,
}

/// The instance as the tick reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceSnapshot {
    /// The instance.
    pub id: Uuid,
    /// Its tenant (named in the system prompt).
    pub tenant_id: Uuid,
    /// Selects the base prompt and the type-specific objective blocks.
    pub agent_type: AgentType,
    /// The previous planned tick's hash; `None` before the first.
    pub plan_input_hash: Option<PlanInputHash>,
}

/// The event a tick runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct TickEvent {
    /// The event `CompleteTick` consumes.
    pub id: Uuid,
    /// Its kind.
    pub kind: AgentEventKind,
    /// Its payload (an empty object when it has none).
    pub payload: Value,
}

/// A mode resolved for the tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Mode {
    /// The mode name (the objective's `MODE:` line).
    pub name: String,
    /// The tools the supervisor may be asked to run, in advertised order.
    pub toolset: Vec<String>,
    /// Appended to the type's base prompt when no ready-made prompt came.
    pub prompt_fragment: String,
    /// The supervisor's ready-made base + fragment, used as it is; `None`
    /// when it sent none (the pod composes it from the type's base).
    pub system_prompt: Option<String>,
}

/// The per-tick envelope in the wire's units (wall time in milliseconds, so
/// a sub-second cap is not rounded away). An absent axis is unlimited; a
/// negative one is a cap of zero, already exhausted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TickBudget {
    /// Input + output tokens across the episode.
    pub max_tokens: Limit,
    /// Output tokens one turn may produce.
    pub max_output_tokens_per_turn: Limit,
    /// Tool calls across the episode.
    pub max_tool_calls: Limit,
    /// Wall milliseconds of the episode.
    pub max_wall_ms: Limit,
    /// Dollars of the episode (computed by the supervisor).
    pub max_dollars: Limit<f64>,
    /// LLM turns of the episode.
    pub max_turns: Limit,
}

/// The preset chain resolved for the tick's call-site.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetChain {
    /// The site whose binding supplied the preset.
    pub resolved_site_id: String,
    /// Empty when resolution fell through to the code default.
    pub preset_id: String,
    /// Empty when the preset has no name.
    pub preset_name: String,
    /// The couples to try, in order.
    pub couples: Vec<PresetCouple>,
    /// Appended last to the system prompt; empty when there is none.
    pub prompt_overlay: String,
}

/// One couple of a preset chain. The provider stays text: the invoker skips
/// a couple whose provider this build cannot call and falls back to the
/// next, which is the chain's purpose.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetCouple {
    /// The model asked for.
    pub model: String,
    /// `anthropic`, `openai`, `scripted`, ...
    pub provider: String,
    /// The backend; empty means `api`.
    pub backend: String,
    /// Credential names, in priority order (never secrets).
    pub credential_names: Vec<String>,
}

/// The weekly credit window as the credit gate reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credit {
    /// Nothing remains of the window.
    pub exhausted: bool,
    /// Exhaustion is enforced (otherwise only metered); every paid turn
    /// then reserves its worst case first.
    pub enforced: bool,
}

impl Credit {
    /// Whether the tick must idle without calling the model (step 9).
    pub fn blocks_planning(&self) -> bool {
        self.exhausted && self.enforced
    }
}

/// What the objective shows the model besides the event.
#[derive(Debug, Clone, PartialEq)]
pub struct TickContext {
    /// The last ledger turns, oldest first.
    pub ledger_tail: Vec<TailTurn>,
    /// The open-items roster.
    pub open_items: OpenItems,
    /// The ops digest; its bucket enters the plan-input hash.
    pub ops_digest: OpsDigest,
    /// The schemas of the mode's tools.
    pub tools: Vec<ToolSchema>,
    /// Compliance instances only: the cold sweep's corpus.
    pub compliance_corpus: Option<ComplianceCorpus>,
    /// Prompt Engineer instances only: the overlay under review.
    pub redaction_target: Option<RedactionTarget>,
    /// Events that answer the operator only: the chat so far.
    pub chat_tail: Option<ChatTail>,
}

/// One earlier turn, as the continuity block shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct TailTurn {
    pub turn_number: i64,
    pub event_kind: String,
    pub decision_kind: String,
    pub phase: String,
    pub reasoning_summary: String,
    pub wait_condition: String,
    /// The tools the turn called, in order.
    pub tool_names: Vec<String>,
}

/// The open-items roster.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OpenItems {
    pub missions: Vec<OpenItem>,
    pub escalations: Vec<OpenItem>,
}

/// A roster row: a mission (with its status) or an escalation (with its
/// kind).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenItem {
    pub id: String,
    /// The mission status or the attention-request kind.
    pub label: String,
    pub title: String,
}

/// The ops digest.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OpsDigest {
    pub summary: String,
    pub bucket: String,
}

/// A tool schema as the bundle carries it (JSON text, parsed once per pod by
/// `planning::ToolSchemas`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    pub json_schema: String,
}

/// The compliance corpus the supervisor's cold sweep found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ComplianceCorpus {
    pub projects: Vec<CorpusProject>,
    pub tenant_wide_entries: i64,
    /// More projects exist than listed.
    pub truncated: bool,
}

/// One project of the corpus.
#[derive(Debug, Clone, PartialEq)]
pub struct CorpusProject {
    pub project_id: String,
    pub documents: i64,
    pub source_files: i64,
    pub dossiers: i64,
}

/// The overlay a redactor reviews, already masked by the supervisor.
#[derive(Debug, Clone, PartialEq)]
pub struct RedactionTarget {
    pub call_site_id: String,
    pub resolved_site_id: String,
    /// Empty when the site resolves to the code default.
    pub preset_id: String,
    pub preset_name: String,
    /// Empty when the preset has no overlay.
    pub overlay_sha256: String,
    pub masked_overlay: String,
    /// Kinds and counts, never values.
    pub findings: Vec<StoredFinding>,
}

/// The tail of the operator chat, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatTail {
    pub messages: Vec<ChatTailMessage>,
    /// Older messages exist than those listed.
    pub earlier_omitted: bool,
}

/// One chat message; `body` may be cut, `body_chars` is the whole length.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatTailMessage {
    /// `operator_to_agent` or `agent_to_operator` (shown verbatim otherwise).
    pub direction: String,
    pub body: String,
    pub body_chars: i64,
}

impl TryFrom<pb::TickBundle> for ClaimedTick {
    type Error = BundleError;

    /// Checks field by field in wire order, so the first bad field is the
    /// one reported.
    fn try_from(b: pb::TickBundle) -> Result<Self, BundleError> {
        let session_id = uuid("bundle.session_id", &b.session_id)?;
        let lease_expires_at = b
            .lease_expires_at
            .as_ref()
            .map(|t| instant("bundle.lease_expires_at", t))
            .transpose()?;
        let instance = InstanceSnapshot::try_from(require("bundle.instance", b.instance)?)?;
        let event = TickEvent::try_from(require("bundle.event", b.event)?)?;
        let open_items = require("bundle.open_items", b.open_items)?.into();
        let ops_digest = require("bundle.ops_digest", b.ops_digest)?.into();
        let mode = require("bundle.mode", b.mode)?.into();
        let budget = require("bundle.budget", b.budget)?.into();
        let preset_chain = require("bundle.preset_chain", b.preset_chain)?.into();
        let credit = require("bundle.credit", b.credit)?.into();
        Ok(ClaimedTick {
            session_id,
            lease_expires_at,
            instance,
            event,
            mode,
            budget,
            preset_chain,
            credit,
            forced_replan_due: b.forced_replan_due,
            context: TickContext {
                ledger_tail: b.ledger_tail.into_iter().map(TailTurn::from).collect(),
                open_items,
                ops_digest,
                tools: b.tools.into_iter().map(ToolSchema::from).collect(),
                compliance_corpus: b.compliance_corpus.map(ComplianceCorpus::from),
                redaction_target: b.redaction_target.map(RedactionTarget::from),
                chat_tail: b.chat_tail.map(ChatTail::from),
            },
            resume: crate::resume::Resume::from_steps(b.journal)?,
        })
    }
}

fn instant(field: &'static str, t: &prost_types::Timestamp) -> Result<DateTime<Utc>, BundleError> {
    u32::try_from(t.nanos)
        .ok()
        .filter(|n| *n < 1_000_000_000)
        .and_then(|nanos| DateTime::from_timestamp(t.seconds, nanos))
        .ok_or_else(|| {
            BundleError::new(
                field,
                format!("not a valid instant: {}s {}ns", t.seconds, t.nanos),
            )
        })
}

impl TryFrom<pb::AgentInstance> for InstanceSnapshot {
    type Error = BundleError;

    fn try_from(i: pb::AgentInstance) -> Result<Self, BundleError> {
        let plan_input_hash = match i.plan_input_hash.as_str() {
            "" => None,
            // The supervisor accepts the hash in either case and stores it
            // lower-cased; read it the same way.
            h => Some(
                h.to_ascii_lowercase()
                    .parse::<PlanInputHash>()
                    .map_err(|_| {
                        BundleError::new(
                            "bundle.instance.plan_input_hash",
                            format!("not 64 hex digits (SHA-256): {}", echo(h)),
                        )
                    })?,
            ),
        };
        Ok(InstanceSnapshot {
            id: uuid("bundle.instance.id", &i.id)?,
            tenant_id: uuid("bundle.instance.tenant_id", &i.tenant_id)?,
            agent_type: stored_enum("bundle.instance.agent_type", "agent type", &i.agent_type)?,
            plan_input_hash,
        })
    }
}

impl TryFrom<pb::TickEvent> for TickEvent {
    type Error = BundleError;

    fn try_from(e: pb::TickEvent) -> Result<Self, BundleError> {
        let id = uuid("bundle.event.id", &e.id)?;
        let kind = stored_enum("bundle.event.kind", "event kind", &e.kind)?;
        // The wire sends "{}" for an event without a payload; empty text is
        // read the same way.
        let payload = if e.payload_json.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(&e.payload_json).map_err(|err| {
                BundleError::new("bundle.event.payload_json", format!("not JSON: {err}"))
            })?
        };
        Ok(TickEvent { id, kind, payload })
    }
}

impl From<pb::ResolvedMode> for Mode {
    fn from(m: pb::ResolvedMode) -> Self {
        Mode {
            name: m.name,
            toolset: m.toolset,
            prompt_fragment: m.prompt_fragment,
            system_prompt: Some(m.system_prompt).filter(|p| !p.trim().is_empty()),
        }
    }
}

/// A wire count as a limit: absent is unlimited, negative a cap of zero.
fn limit(v: Option<i64>) -> Limit {
    v.map_or(Limit::Unlimited, |m| {
        Limit::Limited(u64::try_from(m).unwrap_or(0))
    })
}

impl From<pb::BudgetEnvelope> for TickBudget {
    fn from(b: pb::BudgetEnvelope) -> Self {
        TickBudget {
            max_tokens: limit(b.max_tokens),
            max_output_tokens_per_turn: limit(b.max_output_tokens_per_turn),
            max_tool_calls: limit(b.max_tool_calls.map(i64::from)),
            max_wall_ms: limit(b.max_wall_ms),
            max_dollars: b.max_cost_usd.map_or(Limit::Unlimited, Limit::Limited),
            max_turns: limit(b.max_turns.map(i64::from)),
        }
    }
}

impl From<pb::ResolvedPresetChain> for PresetChain {
    fn from(c: pb::ResolvedPresetChain) -> Self {
        PresetChain {
            resolved_site_id: c.resolved_site_id,
            preset_id: c.preset_id,
            preset_name: c.preset_name,
            couples: c.couples.into_iter().map(PresetCouple::from).collect(),
            prompt_overlay: c.prompt_overlay,
        }
    }
}

impl From<pb::PresetCouple> for PresetCouple {
    fn from(c: pb::PresetCouple) -> Self {
        PresetCouple {
            model: c.model,
            provider: c.provider,
            backend: c.backend,
            credential_names: c.credential_names,
        }
    }
}

impl From<pb::CreditStatus> for Credit {
    fn from(c: pb::CreditStatus) -> Self {
        Credit {
            exhausted: c.exhausted,
            enforced: c.enforcement_enabled,
        }
    }
}

impl From<pb::LedgerTurn> for TailTurn {
    fn from(t: pb::LedgerTurn) -> Self {
        TailTurn {
            turn_number: t.turn_number,
            event_kind: t.event_kind,
            decision_kind: t.decision_kind,
            phase: t.phase,
            reasoning_summary: t.reasoning_summary,
            wait_condition: t.wait_condition,
            tool_names: t.actions.into_iter().map(|a| a.tool_name).collect(),
        }
    }
}

impl From<pb::OpenItems> for OpenItems {
    fn from(i: pb::OpenItems) -> Self {
        OpenItems {
            missions: i
                .missions
                .into_iter()
                .map(|m| OpenItem {
                    id: m.id,
                    label: m.status,
                    title: m.title,
                })
                .collect(),
            escalations: i
                .escalations
                .into_iter()
                .map(|e| OpenItem {
                    id: e.id,
                    label: e.kind,
                    title: e.title,
                })
                .collect(),
        }
    }
}

impl From<pb::OpsDigest> for OpsDigest {
    fn from(o: pb::OpsDigest) -> Self {
        OpsDigest {
            summary: o.summary,
            bucket: o.bucket,
        }
    }
}

impl From<pb::ToolSchema> for ToolSchema {
    fn from(t: pb::ToolSchema) -> Self {
        ToolSchema {
            name: t.name,
            description: t.description,
            json_schema: t.json_schema,
        }
    }
}

impl From<pb::ComplianceCorpus> for ComplianceCorpus {
    fn from(c: pb::ComplianceCorpus) -> Self {
        ComplianceCorpus {
            projects: c
                .projects
                .into_iter()
                .map(|p| CorpusProject {
                    project_id: p.project_id,
                    documents: p.documents,
                    source_files: p.source_files,
                    dossiers: p.dossiers,
                })
                .collect(),
            tenant_wide_entries: c.tenant_wide_entries,
            truncated: c.truncated,
        }
    }
}

impl From<pb::RedactionTarget> for RedactionTarget {
    fn from(t: pb::RedactionTarget) -> Self {
        RedactionTarget {
            call_site_id: t.call_site_id,
            resolved_site_id: t.resolved_site_id,
            preset_id: t.preset_id,
            preset_name: t.preset_name,
            overlay_sha256: t.overlay_sha256,
            masked_overlay: t.masked_overlay,
            findings: t
                .findings
                .into_iter()
                .map(|f| StoredFinding {
                    kind: f.kind,
                    count: usize::try_from(f.count).unwrap_or(usize::MAX),
                })
                .collect(),
        }
    }
}

impl From<pb::ChatTail> for ChatTail {
    fn from(t: pb::ChatTail) -> Self {
        ChatTail {
            messages: t
                .messages
                .into_iter()
                .map(|m| ChatTailMessage {
                    direction: m.direction,
                    body: m.body,
                    body_chars: m.body_chars,
                })
                .collect(),
            earlier_omitted: t.earlier_omitted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INSTANCE: &str = "7d1e5f0c-8a3b-4c2d-9e6f-1a2b3c4d5e60";
    const TENANT: &str = "7d1e5f0c-8a3b-4c2d-9e6f-1a2b3c4d5e6f";
    const EVENT: &str = "7d1e5f0c-8a3b-4c2d-9e6f-1a2b3c4d5e61";
    const SESSION: &str = "7d1e5f0c-8a3b-4c2d-9e6f-1a2b3c4d5e62";

    fn wire() -> pb::TickBundle {
        pb::TickBundle {
            journal: Vec::new(),
            session_id: SESSION.into(),
            lease_expires_at: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 500,
            }),
            instance: Some(pb::AgentInstance {
                id: INSTANCE.into(),
                tenant_id: TENANT.into(),
                agent_type: "Compliance".into(),
                status: "active".into(),
                plan_input_hash: "AB".repeat(32),
                ..Default::default()
            }),
            event: Some(pb::TickEvent {
                id: EVENT.into(),
                kind: "OperatorMessage".into(),
                payload_json: r#"{"message":"hi"}"#.into(),
                sequence_number: 3,
                attempts: 1,
                visible_at: None,
            }),
            ledger_tail: vec![pb::LedgerTurn {
                turn_number: 4,
                event_kind: "AgentTick".into(),
                decision_kind: "Planned".into(),
                phase: "idle".into(),
                reasoning_summary: "Looked around.".into(),
                wait_condition: "the next event".into(),
                actions: vec![pb::ActionRecord {
                    tool_name: "agent_query_memory".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            open_items: Some(pb::OpenItems {
                missions: vec![pb::OpenMission {
                    id: "m1".into(),
                    title: "Migrate billing".into(),
                    status: "active".into(),
                    created_at: None,
                }],
                escalations: vec![pb::OpenEscalation {
                    id: "e1".into(),
                    kind: "decision".into(),
                    title: "Pick a vendor".into(),
                    created_at: None,
                }],
            }),
            ops_digest: Some(pb::OpsDigest {
                summary: "all quiet".into(),
                bucket: "errors=ok".into(),
            }),
            mode: Some(pb::ResolvedMode {
                name: "Research".into(),
                toolset: vec!["agent_query_memory".into()],
                prompt_fragment: "Dig.".into(),
                system_prompt: "  ".into(),
            }),
            budget: Some(pb::BudgetEnvelope {
                max_tokens: Some(24_000),
                max_tool_calls: Some(-1),
                max_wall_ms: Some(1_500),
                max_cost_usd: Some(0.5),
                max_turns: None,
                max_output_tokens_per_turn: Some(2_048),
            }),
            preset_chain: Some(pb::ResolvedPresetChain {
                resolved_site_id: "Agent:Default".into(),
                preset_id: "p1".into(),
                preset_name: "P1".into(),
                couples: vec![pb::PresetCouple {
                    model: "scripted-1".into(),
                    provider: "scripted".into(),
                    backend: String::new(),
                    credential_names: vec!["KEY".into()],
                }],
                prompt_overlay: "Answer in French.".into(),
                ..Default::default()
            }),
            credit: Some(pb::CreditStatus {
                exhausted: true,
                enforcement_enabled: false,
                ..Default::default()
            }),
            forced_replan_due: true,
            tools: vec![pb::ToolSchema {
                name: "agent_query_memory".into(),
                description: "search".into(),
                json_schema: r#"{"type":"object"}"#.into(),
            }],
            compliance_corpus: Some(pb::ComplianceCorpus {
                projects: vec![pb::CorpusProject {
                    project_id: "p-1".into(),
                    documents: 2,
                    source_files: 3,
                    dossiers: 1,
                }],
                tenant_wide_entries: 5,
                truncated: true,
            }),
            redaction_target: Some(pb::RedactionTarget {
                call_site_id: "Agent:Planning".into(),
                findings: vec![pb::RedactionFinding {
                    kind: "email".into(),
                    count: 2,
                }],
                ..Default::default()
            }),
            chat_tail: Some(pb::ChatTail {
                messages: vec![pb::ChatTailMessage {
                    direction: "operator_to_agent".into(),
                    body: "hi".into(),
                    body_chars: 2,
                    created_at: None,
                }],
                earlier_omitted: true,
            }),
        }
    }

    fn refused(b: pb::TickBundle) -> BundleError {
        ClaimedTick::try_from(b).expect_err("the bundle is malformed")
    }

    #[test]
    fn a_well_formed_bundle_converts_field_for_field() {
        let tick = ClaimedTick::try_from(wire()).unwrap();
        assert_eq!(tick.session_id, Uuid::parse_str(SESSION).unwrap());
        assert_eq!(
            tick.lease_expires_at,
            DateTime::from_timestamp(1_700_000_000, 500)
        );
        assert_eq!(
            tick.instance,
            InstanceSnapshot {
                id: Uuid::parse_str(INSTANCE).unwrap(),
                tenant_id: Uuid::parse_str(TENANT).unwrap(),
                agent_type: AgentType::Compliance,
                plan_input_hash: Some("ab".repeat(32).parse().unwrap()),
            }
        );
        assert_eq!(
            tick.event,
            TickEvent {
                id: Uuid::parse_str(EVENT).unwrap(),
                kind: AgentEventKind::OperatorMessage,
                payload: serde_json::json!({"message": "hi"}),
            }
        );
        // The ids print back exactly as the supervisor sent them.
        assert_eq!(tick.session_id.to_string(), SESSION);
        assert_eq!(tick.event.id.to_string(), EVENT);
        assert_eq!(tick.instance.tenant_id.to_string(), TENANT);
        assert_eq!(
            tick.mode,
            Mode {
                name: "Research".into(),
                toolset: vec!["agent_query_memory".into()],
                prompt_fragment: "Dig.".into(),
                system_prompt: None,
            }
        );
        assert_eq!(
            tick.budget,
            TickBudget {
                max_tokens: Limit::Limited(24_000),
                max_output_tokens_per_turn: Limit::Limited(2_048),
                max_tool_calls: Limit::Limited(0),
                max_wall_ms: Limit::Limited(1_500),
                max_dollars: Limit::Limited(0.5),
                max_turns: Limit::Unlimited,
            }
        );
        assert_eq!(tick.preset_chain.couples[0].credential_names, ["KEY"]);
        assert_eq!(tick.preset_chain.prompt_overlay, "Answer in French.");
        assert_eq!(
            tick.credit,
            Credit {
                exhausted: true,
                enforced: false
            }
        );
        assert!(!tick.credit.blocks_planning());
        assert!(tick.forced_replan_due);
        let c = &tick.context;
        assert_eq!(
            c.ledger_tail,
            [TailTurn {
                turn_number: 4,
                event_kind: "AgentTick".into(),
                decision_kind: "Planned".into(),
                phase: "idle".into(),
                reasoning_summary: "Looked around.".into(),
                wait_condition: "the next event".into(),
                tool_names: vec!["agent_query_memory".into()],
            }]
        );
        assert_eq!(c.open_items.missions[0].label, "active");
        assert_eq!(c.open_items.escalations[0].label, "decision");
        assert_eq!(c.ops_digest.bucket, "errors=ok");
        assert_eq!(c.tools[0].json_schema, r#"{"type":"object"}"#);
        let corpus = c.compliance_corpus.as_ref().unwrap();
        assert_eq!((corpus.tenant_wide_entries, corpus.truncated), (5, true));
        assert_eq!(corpus.projects[0].source_files, 3);
        assert_eq!(
            c.redaction_target.as_ref().unwrap().findings,
            [StoredFinding {
                kind: "email".into(),
                count: 2
            }]
        );
        let chat = c.chat_tail.as_ref().unwrap();
        assert!(chat.earlier_omitted);
        assert_eq!(chat.messages[0].direction, "operator_to_agent");
    }

    #[test]
    fn a_bundle_without_an_instance_names_the_field() {
        let mut b = wire();
        b.instance = None;
        let err = refused(b);
        assert_eq!(err.field, "bundle.instance");
        assert_eq!(err.to_string(), "bundle.instance: required");
    }

    #[test]
    fn a_bad_uuid_names_the_field_and_echoes_the_value() {
        let mut b = wire();
        b.instance.as_mut().unwrap().id = "not-a-uuid".into();
        assert_eq!(
            refused(b).to_string(),
            r#"bundle.instance.id: not a UUID: "not-a-uuid""#
        );
        let mut b = wire();
        b.session_id = String::new();
        assert_eq!(refused(b).to_string(), "bundle.session_id: required");
        let mut b = wire();
        b.event.as_mut().unwrap().id = "x".repeat(500);
        let err = refused(b);
        assert_eq!(err.field, "bundle.event.id");
        assert!(err.problem.len() < 100, "{}", err.problem);
    }

    #[test]
    fn an_unknown_event_kind_or_agent_type_names_the_field() {
        let mut b = wire();
        b.event.as_mut().unwrap().kind = "Tick".into();
        assert_eq!(
            refused(b).to_string(),
            r#"bundle.event.kind: not a known event kind: "Tick""#
        );
        let mut b = wire();
        b.instance.as_mut().unwrap().agent_type = "FutureAgent".into();
        assert_eq!(
            refused(b).to_string(),
            r#"bundle.instance.agent_type: not a known agent type: "FutureAgent""#
        );
    }

    #[test]
    fn each_message_the_tick_needs_is_required() {
        type Strip = fn(&mut pb::TickBundle);
        let cases: [(&str, Strip); 7] = [
            ("bundle.event", |b| b.event = None),
            ("bundle.open_items", |b| b.open_items = None),
            ("bundle.ops_digest", |b| b.ops_digest = None),
            ("bundle.mode", |b| b.mode = None),
            ("bundle.budget", |b| b.budget = None),
            ("bundle.preset_chain", |b| b.preset_chain = None),
            ("bundle.credit", |b| b.credit = None),
        ];
        for (field, strip) in cases {
            let mut b = wire();
            strip(&mut b);
            assert_eq!(refused(b), BundleError::missing(field));
        }
        // The type-specific context is optional.
        let mut b = wire();
        b.compliance_corpus = None;
        b.redaction_target = None;
        b.chat_tail = None;
        b.lease_expires_at = None;
        assert!(ClaimedTick::try_from(b).is_ok());
    }

    #[test]
    fn payload_hash_and_lease_instant_are_checked() {
        let mut b = wire();
        b.event.as_mut().unwrap().payload_json = "{not json".into();
        assert_eq!(refused(b).field, "bundle.event.payload_json");
        let mut b = wire();
        b.event.as_mut().unwrap().payload_json = String::new();
        let tick = ClaimedTick::try_from(b).unwrap();
        assert_eq!(tick.event.payload, serde_json::json!({}));

        let mut b = wire();
        b.instance.as_mut().unwrap().plan_input_hash = "xyz".into();
        assert_eq!(refused(b).field, "bundle.instance.plan_input_hash");
        let mut b = wire();
        b.instance.as_mut().unwrap().plan_input_hash = String::new();
        assert_eq!(
            ClaimedTick::try_from(b).unwrap().instance.plan_input_hash,
            None
        );

        let mut b = wire();
        b.lease_expires_at = Some(prost_types::Timestamp {
            seconds: 0,
            nanos: -1,
        });
        assert_eq!(refused(b).field, "bundle.lease_expires_at");
    }
}
