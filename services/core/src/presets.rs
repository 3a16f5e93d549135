//! The code-default preset (spec §3.7): the couples resolution lands on when
//! a tenant bound nothing on a site's chain, and the couples the default
//! seeder writes into a tenant's `Default` preset. Owns the one list of
//! default models per configured provider (`GENESIS_DEFAULT_PROVIDER`), so
//! the supervisor's fall-through and control's seeder can never drift apart.
//! Must never name a secret: couples carry credential names only.

use std::str::FromStr;

use crate::error::CoreError;
use crate::sites::AGENT_DEFAULT_MODEL;

/// The name of the preset the default seeder creates.
pub const DEFAULT_PRESET_NAME: &str = "Default";

/// The name resolution reports when it fell through to the code default.
pub const CODE_DEFAULT_PRESET_NAME: &str = "code-default";

/// The sites the default seeder binds (the two family defaults every agent
/// leaf inherits from).
pub const SEEDED_SITES: &[&str] = &[
    crate::sites::AGENT_DEFAULT,
    crate::sites::PROMPT_REDACTOR_DEFAULT,
];

/// The provider of the code-default preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
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

impl DefaultProvider {
    /// Every provider, in documentation order.
    pub const ALL: &'static [DefaultProvider] = &[
        DefaultProvider::Anthropic,
        DefaultProvider::Openai,
        DefaultProvider::Scripted,
    ];

    /// The configured spelling: `anthropic`, `openai`, `scripted`.
    pub fn as_str(self) -> &'static str {
        match self {
            DefaultProvider::Anthropic => "anthropic",
            DefaultProvider::Openai => "openai",
            DefaultProvider::Scripted => "scripted",
        }
    }
}

impl std::fmt::Display for DefaultProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DefaultProvider {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DefaultProvider::ALL
            .iter()
            .copied()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| CoreError::UnknownDefaultProvider {
                provider: s.to_owned(),
            })
    }
}

impl DefaultProvider {
    /// `GENESIS_DEFAULT_PROVIDER` as clap's value parser wants it (control
    /// and the supervisor read the same variable).
    pub fn parse_arg(s: &str) -> Result<DefaultProvider, String> {
        s.parse().map_err(|e: CoreError| e.to_string())
    }
}

/// One couple of the code default: model, provider, backend and the
/// credential names it uses in priority order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultCouple {
    pub model: &'static str,
    pub provider: &'static str,
    pub backend: &'static str,
    pub credentials: &'static [&'static str],
}

const SCRIPTED: DefaultCouple = DefaultCouple {
    model: "scripted-1",
    provider: "scripted",
    backend: "scripted",
    credentials: &[],
};

/// The code-default chain for `provider`, tried in order: anthropic →
/// `claude-opus-4-8` then scripted; openai → `gpt-4o` then scripted;
/// scripted → `scripted-1`.
pub fn code_default(provider: DefaultProvider) -> Vec<DefaultCouple> {
    match provider {
        DefaultProvider::Anthropic => vec![
            DefaultCouple {
                model: AGENT_DEFAULT_MODEL,
                provider: "anthropic",
                backend: "anthropic",
                credentials: &["ANTHROPIC_API_KEY"],
            },
            SCRIPTED,
        ],
        DefaultProvider::Openai => vec![
            DefaultCouple {
                model: "gpt-4o",
                provider: "openai",
                backend: "openai",
                credentials: &["OPENAI_API_KEY"],
            },
            SCRIPTED,
        ],
        DefaultProvider::Scripted => vec![SCRIPTED],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_provider_has_its_default_chain() {
        let models = |p| code_default(p).iter().map(|c| c.model).collect::<Vec<_>>();
        assert_eq!(
            models(DefaultProvider::Anthropic),
            ["claude-opus-4-8", "scripted-1"]
        );
        assert_eq!(models(DefaultProvider::Openai), ["gpt-4o", "scripted-1"]);
        assert_eq!(models(DefaultProvider::Scripted), ["scripted-1"]);
        assert_eq!(
            code_default(DefaultProvider::Anthropic)[0].credentials,
            ["ANTHROPIC_API_KEY"]
        );
        assert!(
            code_default(DefaultProvider::Scripted)[0]
                .credentials
                .is_empty()
        );
    }

    #[test]
    fn providers_parse_their_own_spelling_and_refuse_others() {
        for p in DefaultProvider::ALL {
            assert_eq!(p.as_str().parse::<DefaultProvider>().unwrap(), *p);
        }
        assert_eq!(
            "Anthropic".parse::<DefaultProvider>(),
            Err(CoreError::UnknownDefaultProvider {
                provider: "Anthropic".into()
            })
        );
    }
}
