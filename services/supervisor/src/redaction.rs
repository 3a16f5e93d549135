//! The Prompt Engineer's view of its call-site (spec §3.9): which preset the
//! bound call-site resolves to, and its prompt overlay run through
//! genesis-core's detectors. Both the claim (the bundle's
//! `RedactionTarget`) and `redactor_propose_overlay` read it from here, so
//! the model reviews exactly what an approval would replace. Owns only that
//! reading. Must never put the raw overlay, or a raw finding, into anything
//! that leaves the supervisor: the wire gets the masked text, the hash and
//! kinds with counts.

use genesis_core::prompt::overlay_sha256;
use genesis_core::redact::{FindingCount, redact};
use genesis_proto::v1 as pb;
use genesis_store::llm::PresetRow;

use crate::bundle::Binding;
use crate::presets::{bound_preset, overlays_of};

/// The call-site's overlay as the redactor reviews it.
#[derive(Debug, Clone, PartialEq)]
pub struct Review {
    pub call_site_id: String,
    /// The site whose binding supplied the preset; `None` with `preset`.
    pub resolved_site_id: Option<String>,
    /// The bound preset; `None` when the chain has no binding (the code
    /// default, which carries no overlay).
    pub preset: Option<PresetRow>,
    /// The raw overlay (empty when none). Stays in the supervisor.
    pub raw_overlay: String,
    /// The overlay with every finding masked.
    pub masked_overlay: String,
    pub findings: Vec<FindingCount>,
}

impl Review {
    /// Review `call_site_id` against the tenant's `bindings` (which must
    /// include every site of its chain).
    pub fn of(call_site_id: &str, bindings: &[Binding]) -> Self {
        let bound = bound_preset(call_site_id, bindings);
        let raw_overlay = bound
            .map(|(_, p)| overlays_of(p).prompt_overlay.unwrap_or_default())
            .unwrap_or_default();
        let r = redact(&raw_overlay);
        Review {
            call_site_id: call_site_id.to_owned(),
            resolved_site_id: bound.map(|(s, _)| s.to_owned()),
            preset: bound.map(|(_, p)| p.clone()),
            raw_overlay,
            masked_overlay: r.text,
            findings: r.findings,
        }
    }

    /// SHA-256 of the raw overlay; `None` when there is none.
    pub fn overlay_sha256(&self) -> Option<String> {
        overlay_sha256(&self.raw_overlay)
    }

    /// The bundle's wire form: masked text, hash, kinds and counts.
    pub fn to_proto(&self) -> pb::RedactionTarget {
        pb::RedactionTarget {
            call_site_id: self.call_site_id.clone(),
            resolved_site_id: self.resolved_site_id.clone().unwrap_or_default(),
            preset_id: self
                .preset
                .as_ref()
                .map(|p| p.id.to_string())
                .unwrap_or_default(),
            preset_name: self
                .preset
                .as_ref()
                .map(|p| p.name.clone())
                .unwrap_or_default(),
            overlay_sha256: self.overlay_sha256().unwrap_or_default(),
            masked_overlay: self.masked_overlay.clone(),
            findings: self
                .findings
                .iter()
                .map(|f| pb::RedactionFinding {
                    kind: f.kind.as_str().to_owned(),
                    count: u32::try_from(f.count).unwrap_or(u32::MAX),
                })
                .collect(),
        }
    }
}

/// The bindings of every site on `call_site_id`'s chain, read on the
/// caller's tenant connection (RLS scopes them to the tenant).
pub async fn bindings_for(
    conn: &mut sqlx::PgConnection,
    call_site_id: &str,
) -> Result<Vec<Binding>, genesis_store::StoreError> {
    let sites: Vec<String> = genesis_core::sites::site_chain(call_site_id)
        .into_iter()
        .map(str::to_owned)
        .collect();
    Ok(genesis_store::llm::bindings_for_in(conn, &sites)
        .await?
        .into_iter()
        .map(|(site_id, preset)| Binding { site_id, preset })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(site: &str, overlay: &str) -> Binding {
        let preset: PresetRow = serde_json::from_value(serde_json::json!({
            "id": uuid::Uuid::nil(), "tenant_id": uuid::Uuid::nil(), "name": "P",
            "model": "m", "provider": "scripted", "backend": "",
            "credentials": [], "fallback": [], "overlays": {"prompt_overlay": overlay},
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"
        }))
        .unwrap_or_else(|e| panic!("preset row: {e}"));
        Binding {
            site_id: site.into(),
            preset,
        }
    }

    #[test]
    fn the_wire_form_carries_the_masked_overlay_never_the_raw_one() {
        let secret = "sk-ant-abcdefghijklmnopqrstuvwxyz0123";
        let bindings = [binding(
            "Agent:Default",
            &format!("Call the API with {secret} and mail ops@example.com."),
        )];
        let review = Review::of("Agent:Planning", &bindings);
        assert_eq!(review.resolved_site_id.as_deref(), Some("Agent:Default"));
        let wire = review.to_proto();
        assert!(!format!("{wire:?}").contains(secret));
        assert!(!format!("{wire:?}").contains("ops@example.com"));
        assert_eq!(
            wire.masked_overlay,
            "Call the API with [REDACTED:api_key] and mail [REDACTED:email]."
        );
        assert_eq!(wire.findings.len(), 2);
        assert_eq!(wire.overlay_sha256.len(), 64);
    }

    #[test]
    fn an_unbound_site_has_no_preset_and_nothing_to_review() {
        let review = Review::of("Agent:Default", &[]);
        assert!(review.preset.is_none());
        assert!(review.findings.is_empty());
        assert_eq!(review.to_proto().preset_id, "");
        assert_eq!(review.overlay_sha256(), None);
    }
}
