//! Presets: the (model, provider, backend, credentials, fallback chain,
//! overlays) bundle an operator binds to a call-site (spec §2.5, §3.7).
//!
//! This module holds the shape and its validation only; which preset a site
//! resolves to is decided by the site registry and the store, never here.
//! Secrets inside a preset are redacted in `Debug`.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::secret::Secret;

/// The code default model for the agent family (spec §3.7).
pub const DEFAULT_AGENT_MODEL: &str = "claude-opus-4-8";
/// The backend label used when a preset does not name one.
pub const DEFAULT_BACKEND: &str = "api";

/// Which wire protocol a couple speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI-compatible chat completions.
    #[serde(rename = "openai")]
    OpenAi,
    /// The offline scripted provider.
    Scripted,
}

impl ProviderKind {
    /// The stored / wire spelling: `anthropic`, `openai`, `scripted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Scripted => "scripted",
        }
    }

    /// Whether calls need a credential (the scripted provider does not).
    pub fn needs_credential(self) -> bool {
        !matches!(self, ProviderKind::Scripted)
    }

    /// Whether calls cross the network, where a failure may be gone a
    /// moment later (the scripted provider answers in-process, and its
    /// failures are deliberate).
    pub fn is_remote(self) -> bool {
        !matches!(self, ProviderKind::Scripted)
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderKind {
    type Err = PresetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "anthropic" => Ok(ProviderKind::Anthropic),
            "openai" => Ok(ProviderKind::OpenAi),
            "scripted" => Ok(ProviderKind::Scripted),
            other => Err(PresetError::UnknownProvider(other.to_string())),
        }
    }
}

/// One named credential. Credentials are tried in the order the preset
/// lists them (e.g. an OAuth subscription token first, then an API key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialRef {
    /// A label for attempt records and logs (never the secret).
    pub name: String,
    /// The credential value, redacted in `Debug`.
    pub secret: Secret,
    /// The provider this credential is for; `None` means the preset's
    /// primary provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderKind>,
}

impl CredentialRef {
    /// A credential for the preset's primary provider.
    pub fn new(name: impl Into<String>, secret: impl Into<Secret>) -> Self {
        CredentialRef {
            name: name.into(),
            secret: secret.into(),
            provider: None,
        }
    }

    /// A credential for a specific provider (for fallback couples).
    pub fn for_provider(
        name: impl Into<String>,
        secret: impl Into<Secret>,
        provider: ProviderKind,
    ) -> Self {
        CredentialRef {
            provider: Some(provider),
            ..CredentialRef::new(name, secret)
        }
    }
}

/// A (model, provider, backend) couple: one link of the fallback chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelCouple {
    /// The model to request.
    pub model: String,
    /// The wire protocol.
    pub provider: ProviderKind,
    /// The backend label (which endpoint of that provider: `api`, a proxy,
    /// a regional gateway); mapped to a base URL by the provider factory.
    /// Empty means the provider's default endpoint.
    #[serde(default = "default_backend")]
    pub backend: String,
    /// Names of the preset credentials this couple uses, in priority order
    /// (the `llm_presets.fallback` shape). Empty means: the credentials
    /// tagged with this couple's provider, plus untagged ones when it is the
    /// primary provider.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<String>,
}

impl ModelCouple {
    /// A couple using the default credential selection.
    pub fn new(
        model: impl Into<String>,
        provider: ProviderKind,
        backend: impl Into<String>,
    ) -> Self {
        ModelCouple {
            model: model.into(),
            provider,
            backend: backend.into(),
            credentials: Vec::new(),
        }
    }
}

fn default_backend() -> String {
    DEFAULT_BACKEND.to_string()
}

/// Profiles and the prompt overlay attached with a preset (spec §3.5).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overlays {
    /// Text appended to the system prompt for calls through this preset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_overlay: Option<String>,
    /// Routing-chain profile id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_chain_id: Option<String>,
    /// Tool-policy profile id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_policy_id: Option<String>,
    /// Sampling profile id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_profile_id: Option<String>,
    /// Limits profile id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits_profile_id: Option<String>,
}

/// A model + provider + backend + overlay bundle, with its credentials and
/// fallback chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preset {
    /// Stable id (what a site binding points at).
    pub id: String,
    /// Display name.
    pub name: String,
    /// Primary model.
    pub model: String,
    /// Primary provider.
    pub provider: ProviderKind,
    /// Primary backend (empty means the provider's default endpoint).
    #[serde(default = "default_backend")]
    pub backend: String,
    /// Credentials in priority order.
    #[serde(default)]
    pub credentials: Vec<CredentialRef>,
    /// Couples tried after the primary one, in order.
    #[serde(default)]
    pub fallback: Vec<ModelCouple>,
    /// Attached overlays and profiles.
    #[serde(default)]
    pub overlays: Overlays,
}

/// Why a preset is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PresetError {
    /// A required text field is blank.
    #[error("preset field {0} is empty")]
    EmptyField(&'static str),
    /// A provider name outside `anthropic|openai|scripted`.
    #[error("unknown provider {0:?} (expected anthropic, openai or scripted)")]
    UnknownProvider(String),
    /// Two credentials share a name, so attempt records would be ambiguous.
    #[error("credential name {0:?} appears twice")]
    DuplicateCredential(String),
    /// A credential has a blank name or value.
    #[error("credential #{0} has an empty name or secret")]
    EmptyCredential(usize),
    /// A fallback couple has a blank model.
    #[error("fallback couple #{0} has an empty model")]
    EmptyCouple(usize),
    /// A fallback couple names a credential the preset does not have.
    #[error("fallback couple #{couple} names unknown credential {name:?}")]
    UnknownCredential {
        /// Zero-based couple index.
        couple: usize,
        /// The missing name.
        name: String,
    },
    /// The chain mixes the scripted provider with a real one (genesis-core's
    /// rule): refused here too, so no chain can end an outage on canned text.
    #[error("{0}")]
    MixedChain(String),
}

impl Preset {
    /// A preset served by the offline scripted provider (demo, tests,
    /// benchmarks, and any deployment without provider credentials).
    pub fn scripted(id: impl Into<String>) -> Self {
        Preset {
            id: id.into(),
            name: "Scripted (offline)".into(),
            model: crate::scripted::SCRIPTED_MODEL.into(),
            provider: ProviderKind::Scripted,
            backend: DEFAULT_BACKEND.into(),
            credentials: Vec::new(),
            fallback: Vec::new(),
            overlays: Overlays::default(),
        }
    }

    /// Reject blank fields, blank or duplicate credentials, blank fallback
    /// couples and couples naming a credential the preset lacks.
    pub fn validate(&self) -> Result<(), PresetError> {
        for (field, value) in [
            ("id", &self.id),
            ("name", &self.name),
            ("model", &self.model),
        ] {
            if value.trim().is_empty() {
                return Err(PresetError::EmptyField(field));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (i, c) in self.credentials.iter().enumerate() {
            if c.name.trim().is_empty() || c.secret.is_empty() {
                return Err(PresetError::EmptyCredential(i));
            }
            if !seen.insert(c.name.as_str()) {
                return Err(PresetError::DuplicateCredential(c.name.clone()));
            }
        }
        for (i, couple) in self.fallback.iter().enumerate() {
            if couple.model.trim().is_empty() {
                return Err(PresetError::EmptyCouple(i));
            }
            if let Some(name) = couple
                .credentials
                .iter()
                .find(|n| !seen.contains(n.as_str()))
            {
                return Err(PresetError::UnknownCredential {
                    couple: i,
                    name: name.clone(),
                });
            }
        }
        let chain = self.chain();
        genesis_core::presets::check_chain(
            chain
                .iter()
                .map(|c| (c.model.as_str(), c.provider.as_str())),
        )
        .map_err(|e| PresetError::MixedChain(e.to_string()))?;
        Ok(())
    }

    /// The primary couple followed by the fallback couples.
    pub fn chain(&self) -> Vec<ModelCouple> {
        std::iter::once(ModelCouple::new(
            self.model.clone(),
            self.provider,
            self.backend.clone(),
        ))
        .chain(self.fallback.iter().cloned())
        .collect()
    }

    /// The requested models of the chain, in order, when a call may cost
    /// money (a couple needs a credential): what a turn's credit hold is
    /// computed from. `None` for a chain of free providers only (the
    /// scripted one), which holds no credit.
    pub fn paid_models(&self) -> Option<Vec<String>> {
        let chain = self.chain();
        chain
            .iter()
            .any(|c| c.provider.needs_credential())
            .then(|| chain.iter().map(|c| c.model.clone()).collect())
    }

    /// The credentials for one couple, in priority order: the ones it names,
    /// else those tagged with its provider plus untagged ones when it is the
    /// primary provider.
    pub fn credentials_for(&self, couple: &ModelCouple) -> Vec<&CredentialRef> {
        if !couple.credentials.is_empty() {
            return couple
                .credentials
                .iter()
                .filter_map(|n| self.credentials.iter().find(|c| &c.name == n))
                .collect();
        }
        self.credentials
            .iter()
            .filter(|c| match c.provider {
                Some(p) => p == couple.provider,
                None => couple.provider == self.provider,
            })
            .collect()
    }
}
