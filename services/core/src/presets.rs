//! The code-default preset (spec §3.7): the couples resolution lands on when
//! a tenant bound nothing on a site's chain, and the couples the default
//! seeder writes into a tenant's `Default` preset. Owns the one list of
//! default models per configured provider (`GENESIS_DEFAULT_PROVIDER`), so
//! the supervisor's fall-through and control's seeder can never drift apart.
//! Also owns the rule of which preset a tick's chain comes from
//! ([`choose_chain`]). Must never name a secret: couples carry credential
//! names only.

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
    /// Claude (`claude-opus-4-8`) alone: no fake model behind it.
    Anthropic,
    /// OpenAI-compatible (`gpt-4o`) alone: no fake model behind it.
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

/// The code-default chain for `provider`: anthropic → `claude-opus-4-8`;
/// openai → `gpt-4o`; scripted → `scripted-1`. A real provider's chain
/// never ends on the scripted one: an operator whose provider fails must
/// see the failure, not a canned answer billed as a real one.
pub fn code_default(provider: DefaultProvider) -> Vec<DefaultCouple> {
    match provider {
        DefaultProvider::Anthropic => vec![DefaultCouple {
            model: AGENT_DEFAULT_MODEL,
            provider: "anthropic",
            backend: "anthropic",
            credentials: &["ANTHROPIC_API_KEY"],
        }],
        DefaultProvider::Openai => vec![DefaultCouple {
            model: "gpt-4o",
            provider: "openai",
            backend: "openai",
            credentials: &["OPENAI_API_KEY"],
        }],
        DefaultProvider::Scripted => vec![SCRIPTED],
    }
}

/// The provider label of the offline scripted provider.
pub const SCRIPTED_PROVIDER: &str = "scripted";

/// A preset's chain of `(model, provider)` couples, primary first, as an
/// operator submits it: refused when it mixes the scripted provider with a
/// real one. The scripted provider answers with canned text; behind a real
/// provider it would turn an outage into a fake reply billed as a real one,
/// and in front of one it would never let the real one answer. A chain is
/// all-scripted (the demo, tests) or all-real.
pub fn check_chain<'a, I>(couples: I) -> Result<(), CoreError>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut scripted = None;
    let mut real = None;
    for (i, (model, provider)) in couples.into_iter().enumerate() {
        let slot = if provider == SCRIPTED_PROVIDER {
            &mut scripted
        } else {
            &mut real
        };
        slot.get_or_insert((i, model, provider));
    }
    if let (Some((si, sm, _)), Some((ri, rm, rp))) = (scripted, real) {
        return Err(CoreError::InvalidArgument {
            field: "preset".to_owned(),
            reason: format!(
                "couple {si} ({sm}) uses the offline scripted provider and couple {ri} \
                 ({rm}, {rp}) a real one; a chain is either all scripted (demo and tests) \
                 or all real, so a provider failure never falls back to canned answers"
            ),
        });
    }
    Ok(())
}

/// The models of a real-provider chain that no `llm_pricing` row prices
/// (by [`crate::pricing::priced_name`]), in chain order without repeats.
/// Scripted couples need no price: they spend nothing.
pub fn unpriced_models<'a, I, P>(couples: I, priced: P) -> Vec<&'a str>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
    P: IntoIterator<Item = &'a str> + Clone,
{
    let mut missing: Vec<&'a str> = Vec::new();
    for (model, provider) in couples {
        if provider != SCRIPTED_PROVIDER
            && crate::pricing::priced_name(model, priced.clone()).is_none()
            && !missing.contains(&model)
        {
            missing.push(model);
        }
    }
    missing
}

/// Where a tick's preset chain comes from (spec §2.5, §3.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainSource<'s, 'p, P> {
    /// The active mode's own preset (a mode may carry one; it wins over
    /// the site's binding).
    ModePreset(&'p P),
    /// The nearest binding on the site's chain (the site itself, else the
    /// nearest parent that has one).
    Bound { site: &'s str, preset: &'p P },
    /// Nothing bound anywhere on the chain: the code default, reported at
    /// the chain's root site.
    CodeDefault { root_site: &'s str },
}

/// Choose the preset a tick on `site_id` runs through: the mode's own
/// preset when it names one that exists, else the first binding on
/// [`crate::sites::site_chain`], else the code default. `mode_preset` is
/// the preset the mode names, already looked up (`None`: the mode names
/// none, or one that no longer exists — a deleted preset is an operator's
/// fix to make, never a reason to fail the claim); `bound` answers the
/// tenant's binding of one site.
pub fn choose_chain<'s, 'p, P>(
    site_id: &'s str,
    mode_preset: Option<&'p P>,
    bound: impl Fn(&str) -> Option<&'p P>,
) -> ChainSource<'s, 'p, P> {
    if let Some(preset) = mode_preset {
        return ChainSource::ModePreset(preset);
    }
    let chain = crate::sites::site_chain(site_id);
    if let Some((site, preset)) = chain
        .iter()
        .find_map(|site| bound(site).map(|preset| (*site, preset)))
    {
        return ChainSource::Bound { site, preset };
    }
    ChainSource::CodeDefault {
        root_site: chain.last().copied().unwrap_or(site_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_is_all_scripted_or_all_real() {
        assert!(check_chain([("claude-opus-4-8", "anthropic"), ("gpt-4o", "openai")]).is_ok());
        assert!(check_chain([("scripted-1", "scripted"), ("scripted-2", "scripted")]).is_ok());
        let err = check_chain([("gpt-4o", "openai"), ("scripted-1", "scripted")])
            .expect_err("a real chain ending on scripted is refused");
        let text = err.to_string();
        assert!(text.contains("couple 1 (scripted-1)"), "{text}");
        assert!(text.contains("couple 0 (gpt-4o, openai)"), "{text}");
        assert!(
            check_chain([("scripted-1", "scripted"), ("claude-opus-4-8", "anthropic")]).is_err()
        );
    }

    #[test]
    fn unpriced_models_are_listed_once_and_scripted_needs_no_price() {
        let priced = ["gpt-4o", "claude-opus-4-8"];
        let it = || priced.iter().copied();
        assert_eq!(
            unpriced_models(
                [
                    ("gpt-4o-2024-08-06", "openai"),
                    ("o3", "openai"),
                    ("scripted-1", "scripted"),
                    ("o3", "openai"),
                    ("claude-opus-4-8", "anthropic"),
                ],
                it()
            ),
            ["o3"]
        );
        assert!(unpriced_models([("gpt-4o", "openai")], it()).is_empty());
    }

    #[test]
    fn each_provider_has_its_default_chain() {
        let models = |p| code_default(p).iter().map(|c| c.model).collect::<Vec<_>>();
        // No real provider's default chain falls back to the fake one.
        assert_eq!(models(DefaultProvider::Anthropic), ["claude-opus-4-8"]);
        assert_eq!(models(DefaultProvider::Openai), ["gpt-4o"]);
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

    fn bindings<'a>(binds: &'a [(&'a str, &'a String)]) -> impl Fn(&str) -> Option<&'a String> {
        move |site| binds.iter().find(|(s, _)| *s == site).map(|(_, p)| *p)
    }

    #[test]
    fn the_modes_preset_wins_then_the_nearest_binding_then_the_code_default() {
        let (mode, leaf, family) = ("mode".to_owned(), "leaf".to_owned(), "family".to_owned());
        let both = [("Agent:Planning", &leaf), ("Agent:Default", &family)];
        assert_eq!(
            choose_chain("Agent:Planning", Some(&mode), bindings(&both)),
            ChainSource::ModePreset(&mode)
        );
        assert_eq!(
            choose_chain("Agent:Planning", None, bindings(&both)),
            ChainSource::Bound {
                site: "Agent:Planning",
                preset: &leaf
            }
        );
        let parent_only = [("Agent:Default", &family)];
        assert_eq!(
            choose_chain("Agent:Planning", None, bindings(&parent_only)),
            ChainSource::Bound {
                site: "Agent:Default",
                preset: &family
            }
        );
        assert_eq!(
            choose_chain("Agent:Planning", None, bindings(&[])),
            ChainSource::CodeDefault {
                root_site: "Agent:Default"
            }
        );
    }
}
