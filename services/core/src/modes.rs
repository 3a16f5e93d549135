//! The operating-mode catalogues (spec §2.5) and the tool/governance rail
//! (spec §3.8, DESIGN §5.8): per-type in-code seed modes, the tool superset
//! with each tool's class, the self-applying deny-list, the control
//! terminators, and the fail-closed mode resolver. Must never authorise a
//! tool outside the type's superset, and must never let a non-SOA mode carry
//! a self-applying tool — the resolver refuses rather than trims.

use crate::budget::BudgetOverride;
use crate::enums::AgentType;
use crate::error::CoreError;

/// What a tool can do, which decides who may ever reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolClass {
    /// Reads only.
    ReadOnly,
    /// Records an artifact (dossier, knowledge, research record).
    ArtifactRecord,
    /// Human-gated escalation / control verb.
    Control,
    /// Mutates the tenant without a human (governance-gated): SOA only.
    SelfApplying,
}

/// The §3 tool superset: every tool any standing agent (or mission) can ever
/// reach on the warm path, with its class.
pub const TOOL_SUPERSET: &[(&str, ToolClass)] = &[
    ("soa_query_telemetry", ToolClass::ReadOnly),
    ("agent_query_memory", ToolClass::ReadOnly),
    ("intelligence_knowledge_query", ToolClass::ReadOnly),
    ("intelligence_code_search", ToolClass::ReadOnly),
    ("compliance_query_posture", ToolClass::ReadOnly),
    ("compliance_knowledge_query", ToolClass::ReadOnly),
    ("orchestrator_research_get", ToolClass::ReadOnly),
    ("compliance_dossier_list", ToolClass::ReadOnly),
    ("compliance_dossier_record", ToolClass::ArtifactRecord),
    ("compliance_dossier_translate", ToolClass::ArtifactRecord),
    ("compliance_knowledge_ingest", ToolClass::ArtifactRecord),
    ("orchestrator_research_create", ToolClass::ArtifactRecord),
    ("soa_propose_decision", ToolClass::Control),
    ("soa_send_message", ToolClass::Control),
    ("soa_propose_mode_change", ToolClass::Control),
    ("agent_workset_complete", ToolClass::Control),
    ("soa_propose_task", ToolClass::SelfApplying),
    ("mission_ask_user", ToolClass::Control),
    ("redactor_propose_overlay", ToolClass::Control),
];

/// Tools only one agent type may ever reach (besides the self-applying
/// deny-list, which is the SOA's): the mission HITL channel and the
/// Prompt Engineer's typed redaction proposal.
fn reserved_for(tool: &str) -> Option<fn(AgentType) -> bool> {
    match tool {
        "mission_ask_user" => Some(AgentType::is_mission),
        "redactor_propose_overlay" => Some(|t| t == AgentType::PromptRedactor),
        _ => None,
    }
}

/// The machine-guarded deny-list: no Compliance or Prompt Engineer mode (nor
/// any non-SOA superset) may ever contain these.
pub const SELF_APPLYING_TOOLS: &[&str] = &["soa_propose_task"];

/// The named control-plane terminators that end an episode. Always
/// authorised, never part of the superset or a mode toolset.
pub const CONTROL_TERMINATORS: &[&str] = &["phase_complete", "phase_blocked"];

/// The class of a superset tool; `None` for anything outside the superset.
pub fn tool_class(tool: &str) -> Option<ToolClass> {
    TOOL_SUPERSET
        .iter()
        .find(|(name, _)| *name == tool)
        .map(|(_, class)| *class)
}

/// The tools whose successful call raises an escalation to a human (the
/// decision mapper's `Escalated`): the pod counts them, the supervisor's
/// registry reports them; one list so the two can never disagree.
pub const ESCALATION_TOOLS: &[&str] = &[
    "soa_propose_decision",
    "soa_propose_mode_change",
    "mission_ask_user",
    "redactor_propose_overlay",
];

/// Whether a successful call of `tool` raises an escalation.
pub fn raises_escalation(tool: &str) -> bool {
    ESCALATION_TOOLS.contains(&tool)
}

/// Whether a tool mutates tenant state (counts toward `ActedWithTool`):
/// artifact records and the self-applying verb. Escalation/control verbs are
/// counted by the caller as escalations or messages instead.
pub fn is_side_effecting(tool: &str) -> bool {
    matches!(
        tool_class(tool),
        Some(ToolClass::ArtifactRecord | ToolClass::SelfApplying)
    )
}

/// The tools an agent type can ever reach: the SOA gets the shared set plus
/// `soa_propose_task`; Compliance and the Prompt Engineer the shared set
/// (read-only, artifact-record, control) without any self-applying tool,
/// the Prompt Engineer also `redactor_propose_overlay`; missions read-only
/// plus `mission_ask_user`.
pub fn tool_superset_for(agent_type: AgentType) -> Vec<&'static str> {
    TOOL_SUPERSET
        .iter()
        .filter(|(name, class)| {
            if let Some(owner) = reserved_for(name) {
                return owner(agent_type);
            }
            match agent_type {
                AgentType::Soa => true,
                AgentType::Compliance | AgentType::PromptRedactor => {
                    *class != ToolClass::SelfApplying
                }
                AgentType::MissionDevelopment
                | AgentType::MissionResearch
                | AgentType::MissionOperations => *class == ToolClass::ReadOnly,
            }
        })
        .map(|(name, _)| *name)
        .collect()
}

/// One mode of a type's catalogue: an `agent_modes` row or an in-code seed.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeDefinition {
    /// The mode name (spec verbatim, e.g. `Strategic`).
    pub name: String,
    /// What the mode is for, shown to operators.
    pub description: String,
    /// Appended to the invariant base system prompt.
    pub prompt_fragment: String,
    /// The tools this mode authorises; must be ⊆ the type's superset.
    pub toolset: Vec<String>,
    /// An optional preset pinned for this mode.
    pub preset: Option<String>,
    /// An optional per-mode budget override.
    pub budget_override: Option<BudgetOverride>,
    /// True for the rows seeded from this catalogue.
    pub system_seed: bool,
}

fn seed(
    name: &str,
    description: &str,
    prompt_fragment: &str,
    toolset: &[&str],
    budget_override: Option<BudgetOverride>,
) -> ModeDefinition {
    ModeDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        prompt_fragment: prompt_fragment.to_owned(),
        toolset: toolset.iter().map(|t| (*t).to_owned()).collect(),
        preset: None,
        budget_override,
        system_seed: true,
    }
}

/// The Compliance Research mode's widened budget (spec §3.6).
pub const COMPLIANCE_RESEARCH_BUDGET: BudgetOverride = BudgetOverride {
    max_tokens: Some(48_000),
    max_output_tokens_per_turn: None,
    max_tool_calls: Some(24),
    max_wall_seconds: Some(600),
    max_dollars: Some(4.00),
    max_turns: Some(24),
};

/// The budget override the in-code catalogue gives `name` of `agent_type`
/// (`None` for a mode without one or not in the seed): the platform's own
/// budget for that mode, which bounds what a tenant's edit of it may set
/// (`ceilings::mode_bound`).
pub fn seeded_budget(agent_type: AgentType, name: &str) -> Option<BudgetOverride> {
    seed_catalogue(agent_type)
        .into_iter()
        .find(|m| m.name == name)
        .and_then(|m| m.budget_override)
}

/// The in-code seed catalogue of a type (empty for missions, which have no
/// operating modes). The first entry is the type's default mode.
pub fn seed_catalogue(agent_type: AgentType) -> Vec<ModeDefinition> {
    match agent_type {
        AgentType::Soa => vec![
            seed(
                "Strategic",
                "Steady-state orchestration: survey the tenant, steer missions, escalate forks.",
                "MODE: Strategic — steady-state orchestration. Move the tenant's goals forward \
                 with the fewest well-grounded actions.\n\
                 1. Ground first: the objective gives you the open items, the event and your \
                 recent turns. Query agent_query_memory, soa_query_telemetry, \
                 intelligence_knowledge_query, intelligence_code_search, \
                 orchestrator_research_get or compliance_query_posture only for what you still \
                 need to decide.\n\
                 2. Check the open-items roster: a mission or escalation already listed is in \
                 hand; do not raise it again.\n\
                 3. Act on at most one or two things. Propose a mission with soa_propose_task \
                 when the work is clear, within the tenant's goals and reversible; record a \
                 finding worth keeping with orchestrator_research_create; escalate with \
                 soa_propose_decision when the work is consequential, costly, irreversible or a \
                 genuine choice between options.\n\
                 4. Message the operator with soa_send_message only when there is something they \
                 need to know; do not narrate routine heartbeats.\n\
                 5. When the situation is an incident, a conversation or open exploration, \
                 propose the matching mode (Incident, Dialogue, Discovery) with \
                 soa_propose_mode_change instead of stretching this one. Call \
                 agent_workset_complete once your starting workset is built.",
                &[
                    "soa_query_telemetry",
                    "agent_query_memory",
                    "intelligence_knowledge_query",
                    "intelligence_code_search",
                    "orchestrator_research_get",
                    "compliance_query_posture",
                    "orchestrator_research_create",
                    "soa_propose_task",
                    "soa_propose_decision",
                    "soa_send_message",
                    "soa_propose_mode_change",
                    "agent_workset_complete",
                ],
                None,
            ),
            seed(
                "Incident",
                "An operational incident is under way: diagnose, contain, escalate.",
                "MODE: Incident — an operational incident is under way. Containment comes before \
                 any progress on goals.\n\
                 1. Read the OPS DIGEST in the objective, then soa_query_telemetry: what is \
                 failing, since when, and how widely.\n\
                 2. Look for the cause and for a similar past incident with agent_query_memory \
                 and intelligence_code_search.\n\
                 3. Propose only containment work with soa_propose_task: small, reversible steps \
                 (pause, roll back, isolate the failing part), each naming how to undo it. No \
                 speculative fixes, no feature work.\n\
                 4. Anything irreversible, customer-visible or costly goes to the operator with \
                 soa_propose_decision, with the evidence and your recommendation.\n\
                 5. Keep the operator informed with one short soa_send_message per episode: what \
                 you see, what you proposed, what you need from them.\n\
                 6. When telemetry shows the incident is over, propose returning to Strategic \
                 with soa_propose_mode_change. End with phase_blocked when you cannot see enough \
                 to act.",
                &[
                    "soa_query_telemetry",
                    "agent_query_memory",
                    "intelligence_code_search",
                    "soa_propose_task",
                    "soa_propose_decision",
                    "soa_send_message",
                    "soa_propose_mode_change",
                ],
                None,
            ),
            seed(
                "Dialogue",
                "Conversation with the operator: answer, clarify, propose next steps.",
                "MODE: Dialogue — a conversation with the operator.\n\
                 1. Read the operator's latest message and the conversation before it in the \
                 objective, and answer what they actually asked.\n\
                 2. Ground the answer: use agent_query_memory, intelligence_knowledge_query or \
                 soa_query_telemetry when it depends on facts you do not have, and say plainly \
                 when you do not know.\n\
                 3. Reply with one soa_send_message per operator message: direct, specific and \
                 short. When the request is ambiguous, ask one clarifying question instead of \
                 guessing. Do not repeat what you already said in the conversation.\n\
                 4. Start no work in this mode. When the operator asks for something to be done, \
                 put it to them as a soa_propose_decision with the options, or propose Strategic \
                 with soa_propose_mode_change.\n\
                 5. End with phase_complete once you have replied.",
                &[
                    "agent_query_memory",
                    "intelligence_knowledge_query",
                    "soa_query_telemetry",
                    "soa_send_message",
                    "soa_propose_decision",
                    "soa_propose_mode_change",
                ],
                None,
            ),
            seed(
                "Housekeeping",
                "Tidy the open-items roster and the starting workset.",
                "MODE: Housekeeping — tidy up; create nothing new.\n\
                 1. Walk the open-items roster: find missions that look stalled, blocked or \
                 superseded and escalations that have waited long.\n\
                 2. Check the facts with agent_query_memory, soa_query_telemetry and \
                 orchestrator_research_get before calling anything stale.\n\
                 3. Report in one concise soa_send_message: each stale item by id, with the \
                 action you recommend (close it, re-scope it, or chase the operator). You cannot \
                 close or create work in this mode.\n\
                 4. If your starting workset is built, say so with agent_workset_complete.\n\
                 5. Once the roster is tidy, propose Strategic with soa_propose_mode_change.",
                &[
                    "agent_query_memory",
                    "soa_query_telemetry",
                    "orchestrator_research_get",
                    "soa_send_message",
                    "soa_propose_mode_change",
                    "agent_workset_complete",
                ],
                None,
            ),
            seed(
                "Idle",
                "Quiet: only answer the operator.",
                "MODE: Idle — stay quiet; the operator has asked you to do nothing on your own.\n\
                 1. On a heartbeat, or any event other than an operator message, end at once with \
                 phase_complete: no queries, no messages.\n\
                 2. On an operator message, answer briefly with soa_send_message, using \
                 agent_query_memory only if the answer needs it.\n\
                 3. If the operator asks you to resume work, propose the mode they want with \
                 soa_propose_mode_change. Start no work in this mode.",
                &[
                    "agent_query_memory",
                    "soa_send_message",
                    "soa_propose_mode_change",
                ],
                None,
            ),
            seed(
                "Discovery",
                "Explore the tenant's knowledge and code to find opportunities.",
                "MODE: Discovery — explore the tenant's knowledge and code for opportunities.\n\
                 1. Research broadly: intelligence_knowledge_query for knowledge, \
                 intelligence_code_search for code, orchestrator_research_get for earlier \
                 findings, agent_query_memory and soa_query_telemetry for context.\n\
                 2. Record each real finding with orchestrator_research_create: what you found, \
                 the evidence, and why it matters. Check orchestrator_research_get first so the \
                 same finding is never recorded twice.\n\
                 3. Surface at most one or two opportunities per episode to the operator with \
                 soa_propose_decision, each with its expected value, cost and risk. You create no \
                 missions in this mode.\n\
                 4. When your findings are recorded and surfaced, propose Strategic with \
                 soa_propose_mode_change. End with phase_blocked when the knowledge you need is \
                 not there.",
                &[
                    "intelligence_knowledge_query",
                    "intelligence_code_search",
                    "orchestrator_research_get",
                    "orchestrator_research_create",
                    "agent_query_memory",
                    "soa_query_telemetry",
                    "soa_send_message",
                    "soa_propose_decision",
                    "soa_propose_mode_change",
                ],
                None,
            ),
        ],
        AgentType::Compliance => vec![
            seed(
                "Cadence",
                "The regular compliance sweep: posture, dossiers, drift.",
                "MODE: Cadence — the regular compliance sweep.\n\
                 1. The COMPLIANCE CORPUS line in the objective names what to sweep: the \
                 projects, or the tenant-wide knowledge.\n\
                 2. Check the posture with compliance_query_posture and the dossiers with \
                 compliance_dossier_list; query compliance_knowledge_query for the controls whose \
                 evidence may have changed.\n\
                 3. Keep dossiers current: record an update with compliance_dossier_record only \
                 when the evidence changed a control's status or content. Never re-record an \
                 unchanged dossier.\n\
                 4. Escalate every gap or regression (a control that lost its evidence, a status \
                 that fell from compliant) with soa_propose_decision, naming the framework, the \
                 control and what would close it. You fix nothing yourself.\n\
                 5. For whole-chapter authoring propose Research, for a release or change gate \
                 GateReview, with soa_propose_mode_change. Call agent_workset_complete once your \
                 baseline dossiers exist.",
                &[
                    "compliance_query_posture",
                    "compliance_knowledge_query",
                    "compliance_dossier_list",
                    "agent_query_memory",
                    "compliance_dossier_record",
                    "soa_send_message",
                    "soa_propose_decision",
                    "soa_propose_mode_change",
                    "agent_workset_complete",
                ],
                None,
            ),
            seed(
                "GateReview",
                "Review a release or change gate against the compliance posture.",
                "MODE: GateReview — assess one release or change gate against the compliance \
                 posture.\n\
                 1. Identify the gate from the event or the operator's message. If it is unclear \
                 which gate is meant, ask with soa_send_message and end with phase_blocked.\n\
                 2. Check it against the posture (compliance_query_posture), the dossiers \
                 (compliance_dossier_list) and the corpus (compliance_knowledge_query): which \
                 controls the change touches, and whether their evidence still holds.\n\
                 3. Your verdict is a recommendation, never a decision: escalate it with \
                 soa_propose_decision, options Pass / Fail / Pass with conditions, listing each \
                 finding with its control and evidence.\n\
                 4. Record nothing in this mode. Send the operator a short summary with \
                 soa_send_message if they asked for the review, and end with phase_complete once \
                 the verdict is escalated.",
                &[
                    "compliance_query_posture",
                    "compliance_knowledge_query",
                    "compliance_dossier_list",
                    "agent_query_memory",
                    "soa_propose_decision",
                    "soa_send_message",
                    "soa_propose_mode_change",
                ],
                None,
            ),
            seed(
                "Research",
                "Whole-chapter dossier authoring with a widened budget.",
                "MODE: Research — author whole dossier chapters; this mode runs on a widened \
                 budget.\n\
                 1. Work one chapter (one framework section) at a time. List the existing \
                 dossiers first with compliance_dossier_list, so you extend rather than \
                 duplicate.\n\
                 2. Gather the evidence with compliance_knowledge_query, \
                 intelligence_knowledge_query, orchestrator_research_get and agent_query_memory. \
                 Ingest a source the corpus lacks with compliance_knowledge_ingest.\n\
                 3. Write each control's dossier completely with compliance_dossier_record: the \
                 control, the evidence and its source, the status (compliant, partial, gap or \
                 not_applicable) and what is missing. Translate it with \
                 compliance_dossier_translate when the tenant needs another language.\n\
                 4. State only what the evidence supports; mark a control as a gap rather than \
                 guess.\n\
                 5. You cannot escalate in this mode: report gaps and progress with \
                 soa_send_message, and propose Cadence with soa_propose_mode_change when the \
                 chapter is done. End with phase_blocked when the corpus lacks the evidence.",
                &[
                    "compliance_knowledge_query",
                    "compliance_knowledge_ingest",
                    "compliance_dossier_list",
                    "compliance_dossier_record",
                    "compliance_dossier_translate",
                    "intelligence_knowledge_query",
                    "orchestrator_research_get",
                    "agent_query_memory",
                    "soa_send_message",
                    "soa_propose_mode_change",
                    "agent_workset_complete",
                ],
                Some(COMPLIANCE_RESEARCH_BUDGET),
            ),
        ],
        AgentType::PromptRedactor => vec![seed(
            "Redact",
            "Rework one call-site's prompt from the signal that triggered it.",
            "MODE: Redact — rework one call-site's prompt overlay.\n\
             1. Read the signal in the objective and the REDACTION TARGET block: the bound \
             call-site, its preset, and its overlay with every detected secret and personal \
             datum already masked as [REDACTED:<kind>].\n\
             2. If there is no overlay, or nothing in it to redact, end with phase_complete \
             without messaging.\n\
             3. Otherwise draft the redaction: keep the overlay's intent and instructions, \
             keep every [REDACTED:<kind>] placeholder exactly as it is, and remove any \
             further secret or personal datum the detectors missed.\n\
             4. Route it to the operator for review with redactor_propose_overlay, with a \
             rationale naming what was masked, by kind. Never repeat, reconstruct or guess a \
             masked value, anywhere.\n\
             5. Use soa_propose_decision only for a question the proposal cannot carry, and \
             soa_send_message only to answer the operator.",
            &[
                "agent_query_memory",
                "intelligence_knowledge_query",
                "redactor_propose_overlay",
                "soa_propose_decision",
                "soa_send_message",
            ],
            None,
        )],
        // Missions have no operator-facing catalogue (spec §2.5); a mission
        // instance runs "as an agent type" only at the LLM-invocation seam
        // (spec §2.1), and this one seed mode is that seam's tool surface:
        // the mission superset (read-only tools plus `mission_ask_user`, the
        // Mission HITL channel of spec §2.4).
        AgentType::MissionDevelopment
        | AgentType::MissionResearch
        | AgentType::MissionOperations => vec![seed(
            MISSION_MODE,
            "A mission sub-agent's invocation seam: read, research, ask the operator.",
            "Mode: Mission. Work the mission's objective with the read-only tools; when a \
             fork needs a human, ask with mission_ask_user and keep working on what does not \
             depend on the answer. An answer arrives on a later tick as refinement guidance.",
            &tool_superset_for(agent_type),
            None,
        )],
    }
}

/// The one mode of the mission types: their invocation seam (see
/// [`seed_catalogue`]). Never in `agent_modes`, so the mode chokepoint never
/// switches a mission to or from it.
pub const MISSION_MODE: &str = "Mission";

/// The mode an instance runs when `active_mode` is unset (for the mission
/// types, their one seam mode [`MISSION_MODE`]).
pub fn default_mode(agent_type: AgentType) -> Option<&'static str> {
    match agent_type {
        AgentType::Soa => Some("Strategic"),
        AgentType::Compliance => Some("Cadence"),
        AgentType::PromptRedactor => Some("Redact"),
        AgentType::MissionDevelopment
        | AgentType::MissionResearch
        | AgentType::MissionOperations => Some(MISSION_MODE),
    }
}

/// A mode ready for a tick: its toolset has been checked against the
/// superset.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedMode {
    /// The type whose catalogue it came from.
    pub agent_type: AgentType,
    /// The mode name.
    pub name: String,
    /// Appended to the base system prompt.
    pub prompt_fragment: String,
    /// The authorised tools (also the objective's advertised action menu).
    pub toolset: Vec<String>,
    /// The preset pinned for this mode, if any.
    pub preset: Option<String>,
    /// The mode's budget override, if any.
    pub budget_override: Option<BudgetOverride>,
    /// True when it came from the in-code seed rather than a table row.
    pub from_seed: bool,
}

impl ResolvedMode {
    /// The invoker's system prompt: `base + "\n\n" + fragment` (the base stays
    /// mode-invariant). An empty fragment leaves the base unchanged.
    pub fn system_prompt(&self, base: &str) -> String {
        crate::prompt::compose_system_prompt(base, &self.prompt_fragment, "")
    }

    /// Whether the tick may call `tool`: a member of the toolset, or a
    /// control terminator.
    pub fn is_authorized(&self, tool: &str) -> bool {
        CONTROL_TERMINATORS.contains(&tool) || self.toolset.iter().any(|t| t == tool)
    }
}

/// Checks a mode definition against the type's superset, fail-closed: the
/// first tool outside it is a [`CoreError::ToolOutsideSuperset`]. Use it on
/// every write to `agent_modes` as well as at resolve time.
pub fn validate_mode_definition(
    agent_type: AgentType,
    mode: &ModeDefinition,
) -> Result<(), CoreError> {
    let superset = tool_superset_for(agent_type);
    for tool in &mode.toolset {
        if !superset.contains(&tool.as_str()) {
            return Err(CoreError::ToolOutsideSuperset {
                mode: mode.name.clone(),
                tool: tool.clone(),
            });
        }
    }
    Ok(())
}

/// Resolves the mode a tick runs (spec §3.4 step 7): `active_mode` or the
/// type's default; the `agent_modes` rows of this type first, the in-code
/// seed as fallback; `UnknownMode` for a name in neither; and
/// `ToolOutsideSuperset` (fail closed) when the chosen toolset leaves the
/// type's superset. `catalogue_rows` must already be filtered to
/// `agent_type`.
pub fn resolve_mode(
    agent_type: AgentType,
    active_mode: Option<&str>,
    catalogue_rows: &[ModeDefinition],
) -> Result<ResolvedMode, CoreError> {
    let unknown = |mode: &str| CoreError::UnknownMode {
        agent_type,
        mode: mode.to_owned(),
    };
    let name = match active_mode.or(default_mode(agent_type)) {
        Some(name) => name,
        None => return Err(unknown("")),
    };
    let (def, from_seed) = match catalogue_rows.iter().find(|m| m.name == name) {
        Some(row) => (row.clone(), false),
        None => match seed_catalogue(agent_type)
            .into_iter()
            .find(|m| m.name == name)
        {
            Some(seeded) => (seeded, true),
            None => return Err(unknown(name)),
        },
    };
    validate_mode_definition(agent_type, &def)?;
    Ok(ResolvedMode {
        agent_type,
        name: def.name,
        prompt_fragment: def.prompt_fragment,
        toolset: def.toolset,
        preset: def.preset,
        budget_override: def.budget_override,
        from_seed,
    })
}

/// Whether `name` is a mode of the type (table rows or seed): the check the
/// mode-control chokepoint runs before writing `active_mode`.
pub fn is_catalogue_mode(
    agent_type: AgentType,
    name: &str,
    catalogue_rows: &[ModeDefinition],
) -> bool {
    catalogue_rows.iter().any(|m| m.name == name)
        || seed_catalogue(agent_type).iter().any(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogues_hold_the_spec_modes_with_the_default_first() {
        let names = |t| {
            seed_catalogue(t)
                .into_iter()
                .map(|m| m.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(AgentType::Soa),
            [
                "Strategic",
                "Incident",
                "Dialogue",
                "Housekeeping",
                "Idle",
                "Discovery"
            ]
        );
        assert_eq!(
            names(AgentType::Compliance),
            ["Cadence", "GateReview", "Research"]
        );
        assert_eq!(names(AgentType::PromptRedactor), ["Redact"]);
        assert_eq!(names(AgentType::MissionDevelopment), [MISSION_MODE]);
        for t in AgentType::ALL {
            let cat = seed_catalogue(*t);
            assert_eq!(cat.first().map(|m| m.name.as_str()), default_mode(*t));
            assert!(
                cat.iter()
                    .all(|m| m.system_seed && !m.prompt_fragment.is_empty())
            );
        }
    }

    /// Every seeded fragment says something of its own, opens with its
    /// mode's name, and advertises only tools its toolset holds: the model
    /// is never told of a tool it cannot call.
    #[test]
    fn seeded_fragments_are_distinct_and_name_only_their_modes_tools() {
        let mut seen = std::collections::HashSet::new();
        for t in [
            AgentType::Soa,
            AgentType::Compliance,
            AgentType::PromptRedactor,
        ] {
            for mode in seed_catalogue(t) {
                let f = &mode.prompt_fragment;
                assert!(f.starts_with(&format!("MODE: {} — ", mode.name)), "{t} {f}");
                assert!(f.len() > 200, "{t} {}", mode.name);
                assert!(
                    seen.insert(f.clone()),
                    "{t} {} repeats a fragment",
                    mode.name
                );
                let words: std::collections::HashSet<&str> = f
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .collect();
                for (tool, _) in TOOL_SUPERSET {
                    if words.contains(tool) {
                        assert!(
                            mode.toolset.iter().any(|m| m == tool),
                            "{t} {} names {tool}, which it cannot call",
                            mode.name
                        );
                    }
                }
            }
        }
        assert_eq!(seen.len(), 10);
    }

    #[test]
    fn every_seeded_toolset_is_within_its_superset() {
        for t in AgentType::ALL {
            let superset = tool_superset_for(*t);
            for m in seed_catalogue(*t) {
                for tool in &m.toolset {
                    assert!(superset.contains(&tool.as_str()), "{t} {} {tool}", m.name);
                }
                assert!(validate_mode_definition(*t, &m).is_ok());
                assert!(resolve_mode(*t, Some(&m.name), &[]).is_ok());
            }
        }
    }

    #[test]
    fn no_self_applying_tool_outside_the_soa() {
        for t in AgentType::ALL.iter().filter(|t| **t != AgentType::Soa) {
            let superset = tool_superset_for(*t);
            for s in SELF_APPLYING_TOOLS {
                assert!(!superset.contains(s), "{t} superset holds {s}");
            }
            assert!(
                superset
                    .iter()
                    .all(|tool| tool_class(tool) != Some(ToolClass::SelfApplying))
            );
            for m in seed_catalogue(*t) {
                assert!(
                    !m.toolset
                        .iter()
                        .any(|tool| SELF_APPLYING_TOOLS.contains(&tool.as_str()))
                );
            }
        }
        // The only self-applying tool in the whole superset is the deny-listed one, and the SOA has it.
        let self_applying: Vec<_> = TOOL_SUPERSET
            .iter()
            .filter(|(_, c)| *c == ToolClass::SelfApplying)
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(self_applying, SELF_APPLYING_TOOLS);
        assert!(tool_superset_for(AgentType::Soa).contains(&"soa_propose_task"));
    }

    #[test]
    fn a_compliance_row_granting_soa_propose_task_fails_closed() {
        let mut row = seed_catalogue(AgentType::Compliance).remove(0);
        row.system_seed = false;
        row.toolset.push("soa_propose_task".into());
        assert_eq!(
            resolve_mode(AgentType::Compliance, Some("Cadence"), &[row]),
            Err(CoreError::ToolOutsideSuperset {
                mode: "Cadence".into(),
                tool: "soa_propose_task".into()
            })
        );
    }

    #[test]
    fn a_crafted_row_with_an_outside_tool_fails_to_resolve() {
        let row = ModeDefinition {
            name: "Strategic".into(),
            description: "tampered".into(),
            prompt_fragment: "x".into(),
            toolset: vec!["agent_query_memory".into(), "config_set".into()],
            preset: None,
            budget_override: None,
            system_seed: false,
        };
        let err = resolve_mode(AgentType::Soa, None, &[row]).unwrap_err();
        assert_eq!(
            err,
            CoreError::ToolOutsideSuperset {
                mode: "Strategic".into(),
                tool: "config_set".into()
            }
        );
        assert_eq!(err.code(), crate::ErrorCode::ToolOutsideSuperset);
        // Terminators are authorised implicitly, never granted through a toolset.
        let row = ModeDefinition {
            toolset: vec!["phase_complete".into()],
            ..seed_catalogue(AgentType::Soa).remove(4)
        };
        assert!(resolve_mode(AgentType::Soa, Some("Idle"), &[row]).is_err());
    }

    #[test]
    fn table_rows_win_over_the_seed() {
        let mut row = seed_catalogue(AgentType::Soa).remove(1);
        row.prompt_fragment = "operator-tuned".into();
        row.toolset = vec!["soa_query_telemetry".into()];
        row.system_seed = false;
        let r = resolve_mode(AgentType::Soa, Some("Incident"), &[row]).unwrap();
        assert!(!r.from_seed);
        assert_eq!(r.toolset, ["soa_query_telemetry"]);
        assert_eq!(r.system_prompt("BASE"), "BASE\n\noperator-tuned");
        let seeded = resolve_mode(AgentType::Soa, Some("Dialogue"), &[]).unwrap();
        assert!(seeded.from_seed);
    }

    #[test]
    fn unset_mode_resolves_to_the_default() {
        let r = resolve_mode(AgentType::Compliance, None, &[]).unwrap();
        assert_eq!(r.name, "Cadence");
        let r = resolve_mode(AgentType::PromptRedactor, None, &[]).unwrap();
        assert_eq!(r.name, "Redact");
    }

    #[test]
    fn unknown_mode_names_are_refused_per_type() {
        assert_eq!(
            resolve_mode(AgentType::Compliance, Some("Strategic"), &[]),
            Err(CoreError::UnknownMode {
                agent_type: AgentType::Compliance,
                mode: "Strategic".into()
            })
        );
        assert!(resolve_mode(AgentType::Soa, Some("strategic"), &[]).is_err());
        assert!(resolve_mode(AgentType::Soa, Some(""), &[]).is_err());
        // A mission resolves to its seam mode: the mission superset, so it
        // can ask the operator but never propose or self-apply.
        let mission = resolve_mode(AgentType::MissionResearch, None, &[]).unwrap();
        assert_eq!(mission.name, MISSION_MODE);
        assert!(mission.from_seed);
        assert_eq!(
            mission.toolset,
            tool_superset_for(AgentType::MissionResearch)
        );
        assert!(mission.toolset.iter().any(|t| t == "mission_ask_user"));
        assert!(!mission.toolset.iter().any(|t| t == "soa_propose_decision"));
        assert_eq!(
            resolve_mode(AgentType::MissionResearch, Some("Strategic"), &[])
                .unwrap_err()
                .code(),
            crate::ErrorCode::UnknownMode
        );
        assert!(is_catalogue_mode(AgentType::Soa, "Idle", &[]));
        assert!(!is_catalogue_mode(AgentType::PromptRedactor, "Idle", &[]));
    }

    #[test]
    fn compliance_research_carries_the_widened_budget() {
        let r = resolve_mode(AgentType::Compliance, Some("Research"), &[]).unwrap();
        let o = r.budget_override.unwrap();
        assert_eq!(o.max_tokens, Some(48_000));
        assert_eq!(o.max_tool_calls, Some(24));
        assert_eq!(o.max_wall_seconds, Some(600));
        assert_eq!(o.max_dollars, Some(4.00));
        assert_eq!(o.max_turns, Some(24));
        let others = seed_catalogue(AgentType::Soa)
            .into_iter()
            .chain(seed_catalogue(AgentType::Compliance));
        assert_eq!(others.filter(|m| m.budget_override.is_some()).count(), 1);
    }

    #[test]
    fn terminators_are_always_authorized_and_never_in_the_superset() {
        let r = resolve_mode(AgentType::Soa, Some("Idle"), &[]).unwrap();
        for t in CONTROL_TERMINATORS {
            assert!(r.is_authorized(t));
            assert!(tool_class(t).is_none());
        }
        assert!(r.is_authorized("soa_send_message"));
        assert!(!r.is_authorized("soa_propose_task"));
        assert!(!r.is_authorized("config_set"));
    }

    #[test]
    fn superset_shape_per_type() {
        assert_eq!(TOOL_SUPERSET.len(), 19);
        assert_eq!(tool_superset_for(AgentType::Soa).len(), 17);
        assert_eq!(tool_superset_for(AgentType::Compliance).len(), 16);
        assert_eq!(tool_superset_for(AgentType::PromptRedactor).len(), 17);
        for t in AgentType::ALL {
            assert_eq!(
                tool_superset_for(*t).contains(&"redactor_propose_overlay"),
                *t == AgentType::PromptRedactor,
                "{t}"
            );
        }
        let m = tool_superset_for(AgentType::MissionOperations);
        assert!(m.contains(&"mission_ask_user"));
        assert!(!m.contains(&"soa_propose_decision"));
        assert!(!tool_superset_for(AgentType::Soa).contains(&"mission_ask_user"));
        assert!(is_side_effecting("compliance_dossier_record"));
        assert!(is_side_effecting("soa_propose_task"));
        assert!(!is_side_effecting("soa_send_message"));
        assert!(!is_side_effecting("unknown_tool"));
        for tool in ESCALATION_TOOLS {
            assert_eq!(tool_class(tool), Some(ToolClass::Control), "{tool}");
        }
        assert!(raises_escalation("redactor_propose_overlay"));
        assert!(!raises_escalation("soa_send_message"));
        assert!(!raises_escalation("agent_workset_complete"));
    }
}
