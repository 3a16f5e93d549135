//! The static LlmSiteRegistry for the agent sites (spec §3.7, §2.5): every
//! agent LLM call is attributed to one of these call-sites; a leaf inherits
//! its parent's family-default preset binding until pinned. Owns the site
//! table, the parent chain and the policy site per agent type. Must never
//! hold bindings or credentials — those live in the store and are resolved by
//! walking [`site_chain`].

use crate::enums::AgentType;
use crate::error::CoreError;

/// The code default model of the agent family.
pub const AGENT_DEFAULT_MODEL: &str = "claude-opus-4-8";

/// Site ids, spec verbatim.
pub const AGENT_DEFAULT: &str = "Agent:Default";
/// The SOA's planning site.
pub const AGENT_PLANNING: &str = "Agent:Planning";
/// The Compliance agent's site.
pub const AGENT_COMPLIANCE: &str = "Agent:Compliance";
/// The Prompt Engineer family default.
pub const PROMPT_REDACTOR_DEFAULT: &str = "PromptRedactor:Default";
/// The Prompt Engineer's redaction site.
pub const PROMPT_REDACTOR_REDACT: &str = "PromptRedactor:Redact";
/// The remote agent-pod surface.
pub const AGENT_POD: &str = "Agent:Pod";
/// The site a coder's calls are attributed to (their snapshots' `site_id`,
/// under the call tag `Coder`). Not in the agent registry and not bindable:
/// a coding task carries its own preset or couple, chosen when the task is
/// created, so a binding here would choose nothing.
pub const CODER_DEFAULT: &str = "Coder:Default";

/// Backends every agent site supports.
pub const AGENT_BACKENDS: &[&str] = &["anthropic", "openai", "scripted"];

/// The Agent:Pod advisory deny-list. Tool filtering matches exact names (no
/// glob), so every dangerous tool is enumerated; the authoritative boundary
/// is the agent-pod token's class gate, not this list.
pub const AGENT_POD_DENIED_TOOLS: &[&str] = &[
    "decision_respond",
    "decision_approve",
    "mission_approve",
    "modification_approve",
    "config_set",
    "config_delete",
    "constitution_set",
    "constitution_delete",
    "llm_site_attach_preset",
    "llm_site_detach_preset",
    "llm_preset_create",
    "llm_preset_update",
    "llm_preset_delete",
    "llm_pricing_set",
    "project_delete",
    "gitlab_commit_push",
    "gitlab_branch_delete",
    "gitlab_merge_request_create",
    "gitlab_merge_request_merge",
    "coder_spawn",
    "modification_apply",
    "browser_navigate",
    "browser_click",
    "browser_type",
    "browser_evaluate",
    "browser_screenshot",
];

/// The verbs the agent-pod surface exposes.
pub const AGENT_POD_ALLOWED_TOOLS: &[&str] = &[
    "agent_tick_claim",
    "agent_tick_complete",
    "agent_record_call_attempt",
];

/// One call-site of the registry, with its catalog axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmCallSite {
    /// The stable site id, e.g. `Agent:Planning`.
    pub site_id: &'static str,
    /// Shown on the call-sites page.
    pub display_name: &'static str,
    /// The model used when no preset is bound anywhere on the chain.
    pub default_model: &'static str,
    /// Backends a preset bound here may use.
    pub supported_backends: &'static [&'static str],
    /// Tools advertised by default (empty: the mode's toolset decides).
    pub default_allowed_tools: &'static [&'static str],
    /// Tools trimmed from tools/list by default.
    pub default_denied_tools: &'static [&'static str],
    /// Catalog category.
    pub category: &'static str,
    /// The track boundary the site belongs to.
    pub track: &'static str,
    /// How calls at this site are dispatched (`in_process` or `pod`).
    pub dispatch_mode: &'static str,
    /// Default routing-chain id, if any.
    pub default_routing_chain_id: Option<&'static str>,
    /// Default tool-policy id, if any.
    pub default_tool_policy_id: Option<&'static str>,
    /// Default overlay id, if any.
    pub default_overlay_id: Option<&'static str>,
}

const fn agent_site(
    site_id: &'static str,
    display_name: &'static str,
    category: &'static str,
    track: &'static str,
) -> LlmCallSite {
    LlmCallSite {
        site_id,
        display_name,
        default_model: AGENT_DEFAULT_MODEL,
        supported_backends: AGENT_BACKENDS,
        default_allowed_tools: &[],
        default_denied_tools: &[],
        category,
        track,
        dispatch_mode: "in_process",
        default_routing_chain_id: None,
        default_tool_policy_id: None,
        default_overlay_id: None,
    }
}

/// The agent sites of the static registry.
pub const LLM_SITES: &[LlmCallSite] = &[
    agent_site(
        AGENT_DEFAULT,
        "Agent (family default)",
        "agent",
        "standing-agents",
    ),
    agent_site(
        AGENT_PLANNING,
        "Agent planning (SOA)",
        "agent",
        "standing-agents",
    ),
    agent_site(
        AGENT_COMPLIANCE,
        "Agent planning (Compliance)",
        "agent",
        "standing-agents",
    ),
    agent_site(
        PROMPT_REDACTOR_DEFAULT,
        "Prompt Engineer (family default)",
        "prompt-engineering",
        "prompt-engineer",
    ),
    agent_site(
        PROMPT_REDACTOR_REDACT,
        "Prompt Engineer redaction",
        "prompt-engineering",
        "prompt-engineer",
    ),
    LlmCallSite {
        site_id: AGENT_POD,
        display_name: "Agent pod (remote surface)",
        default_model: AGENT_DEFAULT_MODEL,
        supported_backends: AGENT_BACKENDS,
        default_allowed_tools: AGENT_POD_ALLOWED_TOOLS,
        default_denied_tools: AGENT_POD_DENIED_TOOLS,
        category: "agent",
        track: "standing-agents",
        dispatch_mode: "pod",
        default_routing_chain_id: None,
        default_tool_policy_id: None,
        default_overlay_id: None,
    },
];

/// The registry entry for `site_id`, if it is an agent site.
pub fn site(site_id: &str) -> Option<&'static LlmCallSite> {
    LLM_SITES.iter().find(|s| s.site_id == site_id)
}

/// As [`site`], as a typed error for the edge.
pub fn require_site(site_id: &str) -> Result<&'static LlmCallSite, CoreError> {
    site(site_id).ok_or_else(|| CoreError::UnknownSite {
        site: site_id.to_owned(),
    })
}

/// GetParentSiteId: the family default a leaf inherits from.
pub fn parent_site_id(site_id: &str) -> Option<&'static str> {
    match site_id {
        AGENT_PLANNING | AGENT_COMPLIANCE => Some(AGENT_DEFAULT),
        PROMPT_REDACTOR_REDACT => Some(PROMPT_REDACTOR_DEFAULT),
        _ => None,
    }
}

/// The binding lookup order, leaf first then each parent. An unknown site
/// yields just itself (it may still carry its own binding).
pub fn site_chain(site_id: &str) -> Vec<&str> {
    let mut chain = vec![site_id];
    let mut current = site_id;
    while let Some(parent) = parent_site_id(current) {
        chain.push(parent);
        current = parent;
    }
    chain
}

/// The preset site key the agent type's policy supplies.
pub fn policy_site_for(agent_type: AgentType) -> &'static str {
    match agent_type {
        AgentType::Soa => AGENT_PLANNING,
        AgentType::Compliance => AGENT_COMPLIANCE,
        AgentType::PromptRedactor => PROMPT_REDACTOR_REDACT,
        AgentType::MissionDevelopment
        | AgentType::MissionResearch
        | AgentType::MissionOperations => AGENT_DEFAULT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_holds_the_six_agent_sites() {
        let ids: Vec<_> = LLM_SITES.iter().map(|s| s.site_id).collect();
        assert_eq!(
            ids,
            [
                "Agent:Default",
                "Agent:Planning",
                "Agent:Compliance",
                "PromptRedactor:Default",
                "PromptRedactor:Redact",
                "Agent:Pod"
            ]
        );
        assert!(
            LLM_SITES
                .iter()
                .all(|s| s.default_model == "claude-opus-4-8")
        );
        assert!(
            LLM_SITES
                .iter()
                .all(|s| s.supported_backends.contains(&"scripted"))
        );
    }

    #[test]
    fn parent_chain_walks_to_the_family_default() {
        assert_eq!(
            site_chain("Agent:Planning"),
            ["Agent:Planning", "Agent:Default"]
        );
        assert_eq!(
            site_chain("Agent:Compliance"),
            ["Agent:Compliance", "Agent:Default"]
        );
        assert_eq!(
            site_chain("PromptRedactor:Redact"),
            ["PromptRedactor:Redact", "PromptRedactor:Default"]
        );
        assert_eq!(site_chain("Agent:Default"), ["Agent:Default"]);
        assert_eq!(site_chain("Agent:Pod"), ["Agent:Pod"]);
        assert_eq!(site_chain("Other:Site"), ["Other:Site"]);
        assert_eq!(parent_site_id("Agent:Default"), None);
        // Every parent is itself a registered site.
        for s in LLM_SITES {
            if let Some(p) = parent_site_id(s.site_id) {
                assert!(site(p).is_some());
            }
        }
    }

    #[test]
    fn policy_sites_per_type() {
        assert_eq!(policy_site_for(AgentType::Soa), "Agent:Planning");
        assert_eq!(policy_site_for(AgentType::Compliance), "Agent:Compliance");
        assert_eq!(
            policy_site_for(AgentType::PromptRedactor),
            "PromptRedactor:Redact"
        );
        for t in AgentType::ALL.iter().filter(|t| t.is_mission()) {
            assert_eq!(policy_site_for(*t), "Agent:Default");
        }
        for t in AgentType::ALL {
            assert!(site(policy_site_for(*t)).is_some());
        }
    }

    #[test]
    fn pod_deny_list_names_each_dangerous_tool_exactly() {
        let pod = require_site("Agent:Pod").unwrap();
        for t in [
            "decision_respond",
            "config_set",
            "constitution_set",
            "llm_site_attach_preset",
            "llm_site_detach_preset",
            "coder_spawn",
            "modification_apply",
            "project_delete",
        ] {
            assert!(pod.default_denied_tools.contains(&t), "{t}");
        }
        assert!(pod.default_denied_tools.iter().all(|t| !t.contains('*')));
        assert_eq!(pod.dispatch_mode, "pod");
        // Nothing a mode may grant is on the deny-list.
        for (tool, _) in crate::modes::TOOL_SUPERSET {
            assert!(!pod.default_denied_tools.contains(tool));
        }
    }

    #[test]
    fn unknown_site_is_a_typed_error() {
        assert_eq!(
            require_site("Agent:Nope"),
            Err(CoreError::UnknownSite {
                site: "Agent:Nope".into()
            })
        );
    }
}
