//! From a resolved preset chain (what the control plane hands a caller:
//! couples of model, provider, backend and credential *names*) to a callable
//! [`Preset`]: each couple's credentials looked up by name for the caller's
//! tenant, couples that cannot be called skipped, the first usable couple
//! the primary and the rest its fallbacks. Shared by every caller of a
//! resolved chain (the agent pod's planning loop, the coder), so a chain
//! resolves to the same preset whoever calls it.
//!
//! Also the worst-case prompt size such a caller reserves credit for before
//! each call ([`prompt_token_bound`]).
//!
//! This module must never look up a name that can never be a provider key
//! (`GENESIS_*`, `OTEL_*`, `DATABASE_*`, `NATS_*`, not a key's syntax), never
//! read the process environment itself, and never put a secret into an error
//! or a log line: only credential names travel in messages.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use crate::keys::ProviderKeys;
use crate::preset::{CredentialRef, ModelCouple, Preset, ProviderKind};
use crate::types::ChatRequest;

/// A preset chain as the control plane resolved it for a call-site: which
/// preset (if any) supplied it and the couples to try, in order. Names
/// only — the secrets are resolved by [`resolve_preset`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedChain {
    /// The site whose binding supplied the preset.
    pub resolved_site_id: String,
    /// Empty when resolution fell through to the code default.
    pub preset_id: String,
    /// Empty when the preset has no name.
    pub preset_name: String,
    /// The couples to try, in order.
    pub couples: Vec<ChainCouple>,
}

/// One couple of a [`ResolvedChain`]. The provider stays text: a couple
/// whose provider this build cannot call is skipped and the chain falls
/// back to the next, which is the chain's purpose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChainCouple {
    /// The model asked for.
    pub model: String,
    /// `anthropic`, `openai`, `scripted`, ...
    pub provider: String,
    /// The backend; empty means `api`.
    pub backend: String,
    /// Credential names, in priority order (never secrets).
    pub credential_names: Vec<String>,
}

/// Where provider credentials come from, by credential name (e.g.
/// `ANTHROPIC_API_KEY`) and the caller's tenant: the platform's provider keys
/// ([`ProviderKeys`]) in production, never the process environment as a
/// whole.
pub trait CredentialSource: Send + Sync {
    /// The secret `tenant` names as `name`, if there is one it may use.
    fn credential(&self, tenant: Uuid, name: &str) -> Option<String>;
}

/// The keys of the set bound to `tenant` only (genesis_core::llm_keys).
impl CredentialSource for ProviderKeys {
    fn credential(&self, tenant: Uuid, name: &str) -> Option<String> {
        self.secret(tenant, name).map(|s| s.expose().to_owned())
    }
}

/// A fixed map, for tests and embedders: each name it holds serves every
/// tenant. [`resolve_preset`] still never looks up a name that can never be
/// a key.
impl CredentialSource for HashMap<String, String> {
    fn credential(&self, _tenant: Uuid, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

/// Build the preset from a resolved chain, taking each couple's credentials
/// from `credentials` by name for `tenant` (`None` when the caller's tenant
/// id is not a UUID, and then no credential resolves). A name that can never
/// be a provider key (`GENESIS_*`, `OTEL_*`, `DATABASE_*`, `NATS_*`, not a
/// key's syntax) is never looked up. A couple whose provider is unknown, or
/// that needs a credential this tenant does not have, is skipped. `Err`
/// names why no couple is usable.
pub fn resolve_preset(
    chain: &ResolvedChain,
    tenant: Option<Uuid>,
    credentials: &dyn CredentialSource,
) -> Result<Preset, String> {
    let mut couples: Vec<ModelCouple> = Vec::new();
    let mut refs: Vec<CredentialRef> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    let mut seen_names: HashSet<String> = HashSet::new();
    for couple in &chain.couples {
        let Ok(provider) = couple.provider.parse::<ProviderKind>() else {
            skipped.push(format!(
                "{}/{} (unknown provider)",
                couple.provider, couple.model
            ));
            continue;
        };
        if couple.model.trim().is_empty() {
            skipped.push(format!("{} (empty model)", couple.provider));
            continue;
        }
        let mut found_names: Vec<String> = Vec::new();
        if provider.needs_credential() {
            for name in &couple.credential_names {
                if let Err(e) = genesis_core::llm_keys::check_key_name(name) {
                    tracing::warn!(credential = %name, reason = %e, "a preset names a credential that can never be a provider key; not resolved");
                    continue;
                }
                if let Some(secret) = tenant.and_then(|t| credentials.credential(t, name)) {
                    found_names.push(name.clone());
                    // One credential may serve several couples of the same
                    // provider; the preset lists it once.
                    if seen_names.insert(name.clone()) {
                        refs.push(CredentialRef::for_provider(name.clone(), secret, provider));
                    }
                }
            }
            if found_names.is_empty() {
                skipped.push(format!(
                    "{}/{} (no credential)",
                    couple.provider, couple.model
                ));
                continue;
            }
        }
        let backend = if couple.backend.trim().is_empty() {
            "api".to_string()
        } else {
            couple.backend.clone()
        };
        couples.push(ModelCouple {
            model: couple.model.clone(),
            provider,
            backend,
            credentials: found_names,
        });
    }
    let mut iter = couples.into_iter();
    let Some(primary) = iter.next() else {
        return Err(if skipped.is_empty() {
            "the resolved preset chain has no couples".to_string()
        } else {
            format!(
                "no usable couple in the preset chain: {}",
                skipped.join(", ")
            )
        });
    };
    let id = if chain.preset_id.is_empty() {
        format!("site:{}", chain.resolved_site_id)
    } else {
        chain.preset_id.clone()
    };
    let name = if chain.preset_name.is_empty() {
        id.clone()
    } else {
        chain.preset_name.clone()
    };
    Ok(Preset {
        id,
        name,
        model: primary.model,
        provider: primary.provider,
        backend: primary.backend,
        credentials: refs,
        fallback: iter.collect(),
        overlays: Default::default(),
    })
}

/// An upper bound of a request's prompt tokens: its bytes (every token of a
/// byte-level tokenizer covers at least one byte). What a caller holds
/// against a weekly credit ceiling before sending `request` to a resolved
/// preset: an over-estimate only holds too much for one turn, an
/// under-estimate could let concurrent turns cross the ceiling.
pub fn prompt_token_bound(request: &ChatRequest) -> u64 {
    let messages: usize = request
        .messages
        .iter()
        .map(|m| serde_json::to_vec(m).map_or(0, |v| v.len()))
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    u64::try_from(request.system.len() + messages + tools).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TENANT: Uuid = Uuid::from_u128(7);

    #[test]
    fn couples_without_a_credential_are_skipped_and_scripted_needs_none() {
        let chain = ResolvedChain {
            resolved_site_id: "Agent:Default".into(),
            preset_id: "p1".into(),
            preset_name: "P1".into(),
            couples: vec![
                ChainCouple {
                    model: "claude-opus-4-8".into(),
                    provider: "anthropic".into(),
                    backend: "api".into(),
                    credential_names: vec!["ANTHROPIC_API_KEY".into()],
                },
                ChainCouple {
                    model: "scripted-1".into(),
                    provider: "scripted".into(),
                    backend: String::new(),
                    credential_names: vec![],
                },
            ],
        };
        let none: HashMap<String, String> = HashMap::new();
        let preset =
            resolve_preset(&chain, Some(TENANT), &none).expect("scripted couple is usable");
        assert_eq!(preset.provider, ProviderKind::Scripted);
        assert!(preset.fallback.is_empty());

        let with_key: HashMap<String, String> =
            [("ANTHROPIC_API_KEY".to_string(), "sk-test".to_string())].into();
        let preset = resolve_preset(&chain, Some(TENANT), &with_key).expect("both usable");
        assert_eq!(preset.provider, ProviderKind::Anthropic);
        assert_eq!(preset.credentials.len(), 1);
        assert_eq!(preset.credentials[0].name, "ANTHROPIC_API_KEY");
        assert_eq!(preset.fallback.len(), 1);

        let only_anthropic = ResolvedChain {
            couples: chain.couples[..1].to_vec(),
            ..chain.clone()
        };
        let err =
            resolve_preset(&only_anthropic, Some(TENANT), &none).expect_err("no usable couple");
        assert!(err.contains("no credential"), "{err}");
        // A caller whose tenant id is not a UUID resolves no credential.
        let err = resolve_preset(&only_anthropic, None, &with_key).expect_err("no tenant");
        assert!(err.contains("no credential"), "{err}");
    }

    #[test]
    fn a_name_that_can_never_be_a_key_is_never_looked_up() {
        let couple = |names: &[&str]| ChainCouple {
            model: "gpt-4o".into(),
            provider: "openai".into(),
            backend: "api".into(),
            credential_names: names.iter().map(|n| (*n).to_owned()).collect(),
        };
        let chain = ResolvedChain {
            couples: vec![couple(&[
                "GENESIS_AGENT_TOKEN",
                "OTEL_EXPORTER_OTLP_HEADERS",
                "DATABASE_URL",
                "NATS_URL",
                "oauth-max",
            ])],
            ..ResolvedChain::default()
        };
        // Even a source that holds every one of them.
        let everything: HashMap<String, String> = chain.couples[0]
            .credential_names
            .iter()
            .map(|n| (n.clone(), format!("value-of-{n}")))
            .collect();
        let err = resolve_preset(&chain, Some(TENANT), &everything).expect_err("refused");
        assert!(err.contains("openai/gpt-4o (no credential)"), "{err}");
        assert!(!err.contains("value-of"), "{err}");
    }

    #[test]
    fn the_preset_is_named_after_its_site_when_no_preset_supplied_it() {
        let chain = ResolvedChain {
            resolved_site_id: "Coder:Default".into(),
            couples: vec![ChainCouple {
                model: "scripted-1".into(),
                provider: "scripted".into(),
                ..ChainCouple::default()
            }],
            ..ResolvedChain::default()
        };
        let preset = resolve_preset(&chain, Some(TENANT), &HashMap::new()).expect("usable");
        assert_eq!(preset.id, "site:Coder:Default");
        assert_eq!(preset.name, "site:Coder:Default");
        assert_eq!(preset.backend, "api");
        let empty = ResolvedChain::default();
        assert_eq!(
            resolve_preset(&empty, Some(TENANT), &HashMap::new()),
            Err("the resolved preset chain has no couples".to_string())
        );
        let unknown = ResolvedChain {
            couples: vec![ChainCouple {
                model: "m".into(),
                provider: "carrier-pigeon".into(),
                ..ChainCouple::default()
            }],
            ..ResolvedChain::default()
        };
        assert_eq!(
            resolve_preset(&unknown, Some(TENANT), &HashMap::new()),
            Err(
                "no usable couple in the preset chain: carrier-pigeon/m (unknown provider)"
                    .to_string()
            )
        );
    }

    #[test]
    fn the_prompt_bound_counts_every_byte_sent() {
        use std::sync::Arc;

        use crate::types::{ChatMessage, ToolSpec};

        let request = |system: &str, user: &str| ChatRequest {
            model: "m".into(),
            system: system.into(),
            messages: vec![ChatMessage::user(user)].into(),
            tools: vec![ToolSpec {
                name: "t".into(),
                description: "d".into(),
                parameters: Arc::new(serde_json::json!({"type": "object"})),
            }]
            .into(),
            max_output_tokens: 1,
            temperature: None,
        };
        let small = prompt_token_bound(&request("s", "u"));
        let message = serde_json::to_vec(&ChatMessage::user("u")).expect("serializes");
        let tool = 1 + 1 + serde_json::json!({"type": "object"}).to_string().len();
        assert_eq!(small, (1 + message.len() + tool) as u64);
        // Ten more bytes of system prompt, ten more tokens at most.
        assert_eq!(prompt_token_bound(&request("s0123456789", "u")), small + 10);
    }
}
