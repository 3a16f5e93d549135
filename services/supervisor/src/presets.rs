//! Preset-chain resolution (spec §3.7): the policy site of the agent type,
//! its own binding, else the nearest parent's, else the code default built
//! from `GENESIS_DEFAULT_PROVIDER`. Must never read or return a secret:
//! couples carry credential names only, and whether a credential exists is
//! the pod's concern.

use genesis_core::sites::{AGENT_DEFAULT_MODEL, site_chain};
use genesis_proto::v1 as pb;
use genesis_store::llm::PresetCouple;

use crate::bundle::Binding;

/// The provider of the code-default preset (when a tenant has bound
/// nothing on the chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DefaultProvider {
    /// Claude (`claude-opus-4-8`), then the scripted provider.
    Anthropic,
    /// OpenAI-compatible (`gpt-4o`), then the scripted provider.
    Openai,
    /// The offline scripted provider only (`scripted-1`): demo and tests.
    #[default]
    Scripted,
}

fn scripted() -> PresetCouple {
    PresetCouple {
        model: "scripted-1".into(),
        provider: "scripted".into(),
        backend: "scripted".into(),
        credentials: vec![],
    }
}

/// The code-default chain for `provider`.
pub fn code_default(provider: DefaultProvider) -> Vec<PresetCouple> {
    match provider {
        DefaultProvider::Anthropic => vec![
            PresetCouple {
                model: AGENT_DEFAULT_MODEL.into(),
                provider: "anthropic".into(),
                backend: "anthropic".into(),
                credentials: vec!["ANTHROPIC_API_KEY".into()],
            },
            scripted(),
        ],
        DefaultProvider::Openai => vec![
            PresetCouple {
                model: "gpt-4o".into(),
                provider: "openai".into(),
                backend: "openai".into(),
                credentials: vec!["OPENAI_API_KEY".into()],
            },
            scripted(),
        ],
        DefaultProvider::Scripted => vec![scripted()],
    }
}

/// Resolve the chain for `site_id` from the bindings found on its chain.
pub fn resolve_chain(
    site_id: &str,
    bindings: &[Binding],
    default: DefaultProvider,
) -> pb::ResolvedPresetChain {
    let to_pb = |c: PresetCouple| pb::PresetCouple {
        model: c.model,
        provider: c.provider,
        backend: c.backend,
        credential_names: c.credentials,
    };
    for site in site_chain(site_id) {
        if let Some(b) = bindings.iter().find(|b| b.site_id == site) {
            return pb::ResolvedPresetChain {
                requested_site_id: site_id.to_owned(),
                resolved_site_id: site.to_owned(),
                preset_id: b.preset.id.to_string(),
                preset_name: b.preset.name.clone(),
                couples: b.preset.couples().into_iter().map(to_pb).collect(),
            };
        }
    }
    let resolved = site_chain(site_id)
        .last()
        .copied()
        .unwrap_or(site_id)
        .to_owned();
    pb::ResolvedPresetChain {
        requested_site_id: site_id.to_owned(),
        resolved_site_id: resolved,
        preset_id: String::new(),
        preset_name: "code-default".into(),
        couples: code_default(default).into_iter().map(to_pb).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_binding_falls_through_to_the_code_default() {
        let chain = resolve_chain("Agent:Planning", &[], DefaultProvider::Anthropic);
        assert_eq!(chain.resolved_site_id, "Agent:Default");
        assert!(chain.preset_id.is_empty());
        assert_eq!(chain.couples[0].model, "claude-opus-4-8");
        assert_eq!(chain.couples[1].provider, "scripted");
        let offline = resolve_chain("Agent:Planning", &[], DefaultProvider::Scripted);
        assert_eq!(offline.couples.len(), 1);
        assert_eq!(offline.couples[0].model, "scripted-1");
    }
}
