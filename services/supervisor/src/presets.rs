//! Preset-chain resolution (spec §2.5, §3.7) on the wire: genesis-core's
//! `presets::choose_chain` decides the source (the active mode's own preset
//! when it names one that exists, else the policy site's own binding, else
//! the nearest parent's, else the code default built from
//! `GENESIS_DEFAULT_PROVIDER`, core's one list of default models); this
//! module looks the presets up and builds the resolved chain. The resolved preset's overlays travel
//! with its couples. Must never read or return a secret: couples carry
//! credential names only, and whether a credential exists is the pod's
//! concern.

use genesis_core::presets::{CODE_DEFAULT_PRESET_NAME, ChainSource, choose_chain, code_default};
use genesis_llm::preset::Overlays;
use genesis_proto::v1 as pb;
use genesis_store::llm::{PresetCouple, PresetRow};
use uuid::Uuid;

pub use genesis_core::presets::DefaultProvider;

use crate::bundle::Binding;

/// The preset the active mode names (`agent_modes.preset_id`), with the
/// tenant's presets it could refer to.
#[derive(Debug, Clone, Copy)]
pub struct ModePreset<'a> {
    /// The mode's name (for the log and `mode_preset_of`).
    pub mode: &'a str,
    /// The stored reference: a preset id, or a preset name (the catalogue
    /// is shared by every tenant, so a name lets one row name a preset each
    /// tenant has, e.g. `Default`).
    pub reference: &'a str,
    /// Candidate presets of the tenant (those whose id or name matches any
    /// reference in the type's catalogue).
    pub candidates: &'a [PresetRow],
}

impl<'a> ModePreset<'a> {
    /// The preset the reference names: by id when it parses as one, else by
    /// name.
    pub fn find(&self) -> Option<&'a PresetRow> {
        let reference = self.reference.trim();
        match reference.parse::<Uuid>() {
            Ok(id) => self.candidates.iter().find(|p| p.id == id),
            Err(_) => self.candidates.iter().find(|p| p.name == reference),
        }
    }
}

fn to_pb(c: PresetCouple) -> pb::PresetCouple {
    pb::PresetCouple {
        model: c.model,
        provider: c.provider,
        backend: c.backend,
        credential_names: c.credentials,
    }
}

/// The typed overlays of a preset row; a malformed `overlays` object is
/// logged and treated as none (a bad overlay never fails a claim).
pub fn overlays_of(preset: &PresetRow) -> Overlays {
    match serde_json::from_value::<Overlays>(preset.overlays.clone()) {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(preset = %preset.id, error = %e, "ignoring malformed preset overlays");
            Overlays::default()
        }
    }
}

fn from_preset(requested: &str, resolved: &str, preset: &PresetRow) -> pb::ResolvedPresetChain {
    let o = overlays_of(preset);
    pb::ResolvedPresetChain {
        requested_site_id: requested.to_owned(),
        resolved_site_id: resolved.to_owned(),
        preset_id: preset.id.to_string(),
        preset_name: preset.name.clone(),
        couples: preset.couples().into_iter().map(to_pb).collect(),
        prompt_overlay: o.prompt_overlay.unwrap_or_default(),
        routing_chain_id: o.routing_chain_id.unwrap_or_default(),
        tool_policy_id: o.tool_policy_id.unwrap_or_default(),
        sampling_profile_id: o.sampling_profile_id.unwrap_or_default(),
        limits_profile_id: o.limits_profile_id.unwrap_or_default(),
        mode_preset_of: String::new(),
    }
}

/// The chain a replay runs under: the operator's chosen preset, whole (its
/// couples in order and its overlays), whatever the turn's site is bound
/// to now.
pub fn replay_chain(site_id: &str, preset: &PresetRow) -> pb::ResolvedPresetChain {
    from_preset(site_id, site_id, preset)
}

/// The first binding on `site_chain(site_id)`: the site that holds it and
/// its preset; `None` when the chain has no binding (the code default).
pub fn bound_preset<'s, 'a>(
    site_id: &'s str,
    bindings: &'a [Binding],
) -> Option<(&'s str, &'a PresetRow)> {
    match choose_chain(site_id, None, binding_of(bindings)) {
        ChainSource::Bound { site, preset } => Some((site, preset)),
        _ => None,
    }
}

/// The tenant's binding of one site.
fn binding_of<'a>(bindings: &'a [Binding]) -> impl Fn(&str) -> Option<&'a PresetRow> + 'a {
    move |site: &str| {
        bindings
            .iter()
            .find(|b| b.site_id == site)
            .map(|b| &b.preset)
    }
}

/// Resolve the chain for `site_id` as genesis-core's [`choose_chain`]
/// decides: the mode's preset in preference to the site binding (spec §2.5:
/// modes carry an optional preset); a mode preset that no longer exists
/// falls back to the site chain with a warning.
pub fn resolve_chain(
    site_id: &str,
    bindings: &[Binding],
    mode_preset: Option<ModePreset<'_>>,
    default: DefaultProvider,
) -> pb::ResolvedPresetChain {
    let named = mode_preset.filter(|m| !m.reference.trim().is_empty());
    let found = named.and_then(|mp| {
        let found = mp.find();
        if found.is_none() {
            tracing::warn!(
                mode = mp.mode,
                preset = mp.reference,
                site = site_id,
                "the mode's preset no longer exists; resolving through the site chain"
            );
        }
        found
    });
    match choose_chain(site_id, found, binding_of(bindings)) {
        ChainSource::ModePreset(preset) => pb::ResolvedPresetChain {
            mode_preset_of: named.map(|m| m.mode.to_owned()).unwrap_or_default(),
            ..from_preset(site_id, site_id, preset)
        },
        ChainSource::Bound { site, preset } => from_preset(site_id, site, preset),
        ChainSource::CodeDefault { root_site } => pb::ResolvedPresetChain {
            requested_site_id: site_id.to_owned(),
            resolved_site_id: root_site.to_owned(),
            preset_name: CODE_DEFAULT_PRESET_NAME.into(),
            couples: code_default(default)
                .iter()
                .map(PresetCouple::from)
                .map(to_pb)
                .collect(),
            ..Default::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn preset(name: &str, model: &str, overlays: serde_json::Value) -> PresetRow {
        PresetRow {
            id: Uuid::new_v4(),
            tenant_id: Uuid::nil(),
            name: name.into(),
            model: model.into(),
            provider: "scripted".into(),
            backend: String::new(),
            credentials: vec![],
            fallback: vec![],
            overlays,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    fn bound(site: &str, p: &PresetRow) -> Binding {
        Binding {
            site_id: site.into(),
            preset: p.clone(),
        }
    }

    #[test]
    fn no_binding_falls_through_to_the_code_default() {
        let chain = resolve_chain("Agent:Planning", &[], None, DefaultProvider::Anthropic);
        assert_eq!(chain.resolved_site_id, "Agent:Default");
        assert!(chain.preset_id.is_empty());
        assert_eq!(chain.preset_name, "code-default");
        assert_eq!(chain.couples[0].model, "claude-opus-4-8");
        assert_eq!(chain.couples.len(), 1, "no fake model behind a real one");
        assert!(chain.prompt_overlay.is_empty());
        let offline = resolve_chain("Agent:Planning", &[], None, DefaultProvider::Scripted);
        assert_eq!(offline.couples.len(), 1);
        assert_eq!(offline.couples[0].model, "scripted-1");
    }

    #[test]
    fn the_bound_presets_overlays_travel_with_its_couples() {
        let p = preset(
            "family",
            "m-family",
            serde_json::json!({"prompt_overlay": "Be terse.", "routing_chain_id": "rc-1",
                "tool_policy_id": "tp-1", "sampling_profile_id": "sp-1", "limits_profile_id": "lp-1"}),
        );
        let chain = resolve_chain(
            "Agent:Planning",
            &[bound("Agent:Default", &p)],
            None,
            DefaultProvider::Scripted,
        );
        assert_eq!(chain.resolved_site_id, "Agent:Default");
        assert_eq!(chain.prompt_overlay, "Be terse.");
        assert_eq!(chain.routing_chain_id, "rc-1");
        assert_eq!(chain.tool_policy_id, "tp-1");
        assert_eq!(chain.sampling_profile_id, "sp-1");
        assert_eq!(chain.limits_profile_id, "lp-1");
        assert!(chain.mode_preset_of.is_empty());
    }

    #[test]
    fn malformed_overlays_are_treated_as_none() {
        let p = preset("bad", "m", serde_json::json!({"prompt_overlay": 7}));
        let chain = resolve_chain(
            "Agent:Planning",
            &[bound("Agent:Planning", &p)],
            None,
            DefaultProvider::Scripted,
        );
        assert_eq!(chain.preset_id, p.id.to_string());
        assert!(chain.prompt_overlay.is_empty());
    }

    #[test]
    fn a_mode_preset_wins_over_the_leaf_and_family_bindings() {
        let leaf = preset("leaf", "m-leaf", serde_json::json!({}));
        let family = preset("family", "m-family", serde_json::json!({}));
        let pinned = preset(
            "incident",
            "m-incident",
            serde_json::json!({"prompt_overlay": "O"}),
        );
        let candidates = [pinned.clone()];
        let bindings = [
            bound("Agent:Planning", &leaf),
            bound("Agent:Default", &family),
        ];
        for reference in [pinned.id.to_string(), "incident".to_owned()] {
            let chain = resolve_chain(
                "Agent:Planning",
                &bindings,
                Some(ModePreset {
                    mode: "Incident",
                    reference: &reference,
                    candidates: &candidates,
                }),
                DefaultProvider::Scripted,
            );
            assert_eq!(chain.preset_id, pinned.id.to_string(), "{reference}");
            assert_eq!(chain.couples[0].model, "m-incident");
            assert_eq!(chain.mode_preset_of, "Incident");
            assert_eq!(chain.resolved_site_id, "Agent:Planning");
            assert_eq!(chain.prompt_overlay, "O");
        }
    }

    #[test]
    fn a_missing_mode_preset_falls_back_to_the_site_chain() {
        let leaf = preset("leaf", "m-leaf", serde_json::json!({}));
        let other = preset("other", "m-other", serde_json::json!({}));
        let bindings = [bound("Agent:Planning", &leaf)];
        let gone = Uuid::new_v4().to_string();
        for reference in [gone.as_str(), "no-such-name", "  "] {
            let chain = resolve_chain(
                "Agent:Planning",
                &bindings,
                Some(ModePreset {
                    mode: "Incident",
                    reference,
                    candidates: std::slice::from_ref(&other),
                }),
                DefaultProvider::Scripted,
            );
            assert_eq!(chain.preset_id, leaf.id.to_string(), "{reference:?}");
            assert!(chain.mode_preset_of.is_empty());
        }
        // With nothing bound either, the code default.
        let chain = resolve_chain(
            "Agent:Planning",
            &[],
            Some(ModePreset {
                mode: "Incident",
                reference: &gone,
                candidates: &[],
            }),
            DefaultProvider::Scripted,
        );
        assert_eq!(chain.preset_name, "code-default");
    }

    #[test]
    fn a_uuid_reference_matches_by_id_only() {
        // A preset *named* like a uuid is not found through an id reference
        // to a different preset.
        let id = Uuid::new_v4().to_string();
        let named = preset(&id, "m", serde_json::json!({}));
        let mp = ModePreset {
            mode: "Incident",
            reference: &id,
            candidates: std::slice::from_ref(&named),
        };
        assert!(mp.find().is_none());
    }
}
