//! The provider keys a tenant may name (spec §3.7): a preset lists credential
//! NAMES, and the agent pod turns each name into a secret it sends as the API
//! key to whatever base URL the chain names. Resolving a name against the
//! pod's whole environment would let a tenant send the agent-pod token, the
//! OTLP headers or another tenant's provider key to a server it chose, so a
//! name resolves only inside one platform-managed set of keys, each usable by
//! every tenant or bound to a list of tenants.
//!
//! Owns the name syntax, the prefixes that can never be a key, how the
//! deployment declares keys and bindings — `GENESIS_LLM_KEY_<NAME>` variables
//! (with `GENESIS_LLM_KEY_<NAME>_TENANTS=uuid,uuid`) and the files of the key
//! directory (`GENESIS_LLM_KEY_DIR`: `<NAME>`, with `<NAME>.tenants`) — and
//! the binding check. The two well-known names `ANTHROPIC_API_KEY` and
//! `OPENAI_API_KEY` (the code-default presets name them) are always members,
//! usable by every tenant unless the deployment binds them.
//!
//! Control refuses a preset with [`KeySet::check`]; the agent pod applies the
//! same check before it resolves a name, so a preset written before a key was
//! removed or rebound is refused again at call time. Nothing here reads the
//! environment or a file, or ever holds a key's value.

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;
use uuid::Uuid;

/// Prefix of the variables that declare a key: `GENESIS_LLM_KEY_<NAME>`
/// holds the value of the key named `<NAME>`.
pub const KEY_ENV_PREFIX: &str = "GENESIS_LLM_KEY_";
/// The variable naming the key directory (`--llm-key-dir`); under the key
/// prefix, so `DIR` is never a key name.
pub const KEY_DIR_ENV: &str = "GENESIS_LLM_KEY_DIR";
/// Suffix of the variable that binds a key to tenants:
/// `GENESIS_LLM_KEY_<NAME>_TENANTS=uuid,uuid`.
pub const TENANTS_ENV_SUFFIX: &str = "_TENANTS";
/// Suffix of the key directory's file that binds a key to tenants:
/// `<NAME>.tenants`, tenant ids separated by commas or white space.
pub const TENANTS_FILE_SUFFIX: &str = ".tenants";
/// The keys that are members of every deployment's set, usable by every
/// tenant unless bound: the code-default presets name them, and their bare
/// variables keep working as the values.
pub const WELL_KNOWN_KEYS: &[&str] = &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];
/// Names under these prefixes (in any case) are the platform's own settings
/// and secrets — the agent-pod token, the database and NATS URLs, the OTLP
/// headers — and can never be a provider key.
pub const FORBIDDEN_PREFIXES: &[&str] = &["GENESIS_", "OTEL_", "DATABASE_", "NATS_"];
/// Longest key name accepted.
pub const MAX_KEY_NAME_BYTES: usize = 64;

/// Why a name can never be a key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyNameError {
    /// Under one of [`FORBIDDEN_PREFIXES`].
    #[error("names under {prefix} belong to the platform and are never a provider key")]
    Forbidden {
        /// The prefix it starts with, as listed.
        prefix: &'static str,
    },
    /// Empty or longer than [`MAX_KEY_NAME_BYTES`].
    #[error("a key name is 1 to {MAX_KEY_NAME_BYTES} bytes")]
    Length,
    /// Not a letter followed by letters, digits and `_`.
    #[error("a key name is a letter followed by letters, digits and '_'")]
    Syntax,
    /// `DIR`, or a name ending in `_TENANTS`: the spelling of
    /// [`KEY_DIR_ENV`] and of a binding variable.
    #[error("the name is reserved for the key directory and the key bindings")]
    Reserved,
}

/// Whether `name` can be a provider key: no platform prefix, a letter then
/// letters, digits and `_`, at most [`MAX_KEY_NAME_BYTES`], and not one of
/// the reserved spellings.
pub fn check_key_name(name: &str) -> Result<(), KeyNameError> {
    if let Some(prefix) = FORBIDDEN_PREFIXES.iter().find(|p| {
        name.get(..p.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(p))
    }) {
        return Err(KeyNameError::Forbidden { prefix });
    }
    if name.is_empty() || name.len() > MAX_KEY_NAME_BYTES {
        return Err(KeyNameError::Length);
    }
    let mut bytes = name.bytes();
    if !bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        || !bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(KeyNameError::Syntax);
    }
    if name == "DIR" || name.ends_with(TENANTS_ENV_SUFFIX) {
        return Err(KeyNameError::Reserved);
    }
    Ok(())
}

/// Which tenants may name a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// Unbound: every tenant.
    Everyone,
    /// Only these tenants.
    Tenants(BTreeSet<Uuid>),
}

impl Binding {
    /// Whether `tenant` may name the key.
    pub fn admits(&self, tenant: Uuid) -> bool {
        match self {
            Binding::Everyone => true,
            Binding::Tenants(t) => t.contains(&tenant),
        }
    }
}

/// Parse a binding's tenant list: tenant ids (UUIDs) separated by commas or
/// white space. An empty list is refused: it would bind the key to nobody,
/// which is what removing it does.
pub fn parse_tenants(text: &str) -> Result<BTreeSet<Uuid>, String> {
    let mut tenants = BTreeSet::new();
    for token in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
    {
        let id =
            Uuid::parse_str(token).map_err(|_| format!("{token:?} is not a tenant id (a UUID)"))?;
        tenants.insert(id);
    }
    if tenants.is_empty() {
        return Err("lists no tenant (remove the binding to let every tenant use the key)".into());
    }
    Ok(tenants)
}

/// Where a key's value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The variable `GENESIS_LLM_KEY_<NAME>`.
    Env,
    /// The file `<NAME>` of the key directory, read when a call needs it (a
    /// rotated Secret is picked up without a restart).
    Dir,
    /// The bare variable of a well-known name (`ANTHROPIC_API_KEY`).
    WellKnownEnv,
}

impl Origin {
    /// How an error names the declaration of `name` from this origin.
    fn describe(self, name: &str, binding: bool) -> String {
        match (self, binding) {
            (Origin::Env, false) => format!("{KEY_ENV_PREFIX}{name}"),
            (Origin::Env, true) => format!("{KEY_ENV_PREFIX}{name}{TENANTS_ENV_SUFFIX}"),
            (Origin::Dir, false) => format!("{KEY_DIR_ENV} file {name}"),
            (Origin::Dir, true) => format!("{KEY_DIR_ENV} file {name}{TENANTS_FILE_SUFFIX}"),
            (Origin::WellKnownEnv, _) => name.to_owned(),
        }
    }
}

/// What a variable or a file of the key directory declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Declared {
    /// The key of this name.
    Key(String),
    /// The binding of the key of this name.
    Tenants(String),
}

/// What the environment variable `var` declares: `None` when it is not
/// under [`KEY_ENV_PREFIX`] or is [`KEY_DIR_ENV`].
pub fn env_declaration(var: &str) -> Option<Declared> {
    if var == KEY_DIR_ENV {
        return None;
    }
    let rest = var.strip_prefix(KEY_ENV_PREFIX)?;
    Some(match rest.strip_suffix(TENANTS_ENV_SUFFIX) {
        Some(name) => Declared::Tenants(name.to_owned()),
        None => Declared::Key(rest.to_owned()),
    })
}

/// What the key directory's file `file` declares: `None` for hidden entries
/// (a Kubernetes Secret volume's `..data` and timestamped directories).
pub fn file_declaration(file: &str) -> Option<Declared> {
    if file.starts_with('.') {
        return None;
    }
    Some(match file.strip_suffix(TENANTS_FILE_SUFFIX) {
        Some(name) => Declared::Tenants(name.to_owned()),
        None => Declared::Key(file.to_owned()),
    })
}

/// A declaration that could not be built into the set.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct KeySetError(pub String);

/// A file of the key directory left out of the set: the directory is a
/// mounted Secret that may hold other entries (the agent token may share
/// it), so an entry that can never be a key is skipped, never a key, and
/// reported. A variable under [`KEY_ENV_PREFIX`] always declares a key, so a
/// bad one is an error instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// The file name.
    pub entry: String,
    /// Why it is not a key.
    pub reason: String,
}

/// One key of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// Where its value lives.
    pub origin: Origin,
    /// Who may name it.
    pub binding: Binding,
}

/// Why a tenant may not name a credential.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Refusal {
    /// The name can never be a key (a platform prefix, bad syntax).
    #[error("can never be named: {0}")]
    Forbidden(KeyNameError),
    /// Not a key of the deployment, or bound to other tenants: the two read
    /// the same, so a tenant never learns another tenant's key names.
    #[error("is not a provider key this tenant may use")]
    NotAllowed,
}

/// The deployment's provider keys: names, where each value lives and who may
/// use it. Never holds a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySet {
    keys: BTreeMap<String, Key>,
}

impl Default for KeySet {
    fn default() -> Self {
        KeySet::well_known()
    }
}

/// Collects the declarations of one deployment's keys, then checks them as a
/// whole ([`KeySetBuilder::build`]).
#[derive(Debug, Default)]
pub struct KeySetBuilder {
    keys: Vec<(Origin, String)>,
    bindings: Vec<(Origin, String, String)>,
}

impl KeySetBuilder {
    /// `name` is declared as a key by `origin` ([`Origin::Env`] or
    /// [`Origin::Dir`]).
    pub fn key(&mut self, origin: Origin, name: impl Into<String>) -> &mut Self {
        self.keys.push((origin, name.into()));
        self
    }

    /// `name` is bound by `origin` to the tenants listed in `text`.
    pub fn tenants(
        &mut self,
        origin: Origin,
        name: impl Into<String>,
        text: impl Into<String>,
    ) -> &mut Self {
        self.bindings.push((origin, name.into(), text.into()));
        self
    }

    /// The set, with the directory entries left out of it. Refused, naming
    /// the variable or file: a variable's name that can never be a key, a
    /// key declared both as a variable and as a file, a binding of a name
    /// that is not a key, a key bound twice, and a tenant list that does not
    /// parse (a binding that cannot be read never widens to every tenant).
    pub fn build(self) -> Result<(KeySet, Vec<Ignored>), KeySetError> {
        let mut set = KeySet::well_known();
        let mut ignored = Vec::new();
        for (origin, name) in self.keys {
            if let Err(e) = check_key_name(&name) {
                if origin == Origin::Dir {
                    ignored.push(Ignored {
                        entry: name,
                        reason: e.to_string(),
                    });
                    continue;
                }
                return Err(KeySetError(format!(
                    "{}: {e}",
                    origin.describe(&name, false)
                )));
            }
            match set.keys.get_mut(&name) {
                Some(key) if key.origin != Origin::WellKnownEnv => {
                    return Err(KeySetError(format!(
                        "the key {name} is declared twice, as {} and as {}; declare it once",
                        key.origin.describe(&name, false),
                        origin.describe(&name, false)
                    )));
                }
                Some(key) => key.origin = origin,
                None => {
                    set.keys.insert(
                        name,
                        Key {
                            origin,
                            binding: Binding::Everyone,
                        },
                    );
                }
            }
        }
        let mut bound: BTreeMap<String, Origin> = BTreeMap::new();
        for (origin, name, text) in self.bindings {
            let what = origin.describe(&name, true);
            if let Err(e) = check_key_name(&name) {
                if origin == Origin::Dir {
                    ignored.push(Ignored {
                        entry: format!("{name}{TENANTS_FILE_SUFFIX}"),
                        reason: e.to_string(),
                    });
                    continue;
                }
                return Err(KeySetError(format!("{what}: {e}")));
            }
            if let Some(first) = bound.get(&name) {
                return Err(KeySetError(format!(
                    "the key {name} is bound twice, by {} and by {what}; bind it once",
                    first.describe(&name, true)
                )));
            }
            let Some(key) = set.keys.get_mut(&name) else {
                return Err(KeySetError(format!(
                    "{what} binds {name}, which is not a key: declare {} or the {KEY_DIR_ENV} \
                     file {name}",
                    Origin::Env.describe(&name, false)
                )));
            };
            let tenants = parse_tenants(&text).map_err(|e| KeySetError(format!("{what}: {e}")))?;
            key.binding = Binding::Tenants(tenants);
            bound.insert(name, origin);
        }
        Ok((set, ignored))
    }
}

impl KeySet {
    /// The set of a deployment that declares nothing: the well-known names,
    /// usable by every tenant, their values in their bare variables.
    pub fn well_known() -> KeySet {
        KeySet {
            keys: WELL_KNOWN_KEYS
                .iter()
                .map(|n| {
                    (
                        (*n).to_owned(),
                        Key {
                            origin: Origin::WellKnownEnv,
                            binding: Binding::Everyone,
                        },
                    )
                })
                .collect(),
        }
    }

    /// The key named `name`, whoever may use it.
    pub fn get(&self, name: &str) -> Option<&Key> {
        self.keys.get(name)
    }

    /// Every key name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// The key `tenant` names as `name`, or why it may not name it.
    pub fn check(&self, name: &str, tenant: Uuid) -> Result<&Key, Refusal> {
        check_key_name(name).map_err(Refusal::Forbidden)?;
        self.keys
            .get(name)
            .filter(|k| k.binding.admits(tenant))
            .ok_or(Refusal::NotAllowed)
    }

    /// Of `names`, the keys that may be handed to a container running
    /// `tenant`'s own code (a coder's Job, whose allowlisted build tools run
    /// the tenant's project): only files of the key directory bound to
    /// `tenant` alone, sorted and once each. A key every tenant or several
    /// tenants may use is the platform's shared credential, and a key held
    /// in a variable cannot be mounted: neither is ever handed over, so a
    /// tenant's code can read no credential but its own.
    pub fn mountable_for(&self, tenant: Uuid, names: &[String]) -> Vec<String> {
        let mut out: Vec<String> = names
            .iter()
            .filter(|n| {
                check_key_name(n).is_ok()
                    && self.keys.get(n.as_str()).is_some_and(|k| {
                        k.origin == Origin::Dir
                            && matches!(&k.binding, Binding::Tenants(t) if t.len() == 1 && t.contains(&tenant))
                    })
            })
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The names `tenant` may use, sorted.
    pub fn allowed_for(&self, tenant: Uuid) -> Vec<&str> {
        self.keys
            .iter()
            .filter(|(_, k)| k.binding.admits(tenant))
            .map(|(n, _)| n.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_directory_key_bound_to_the_tenant_alone_is_mountable() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut builder = KeySetBuilder::default();
        builder
            .key(Origin::Dir, "A_ONLY")
            .key(Origin::Dir, "A_AND_B")
            .key(Origin::Dir, "SHARED")
            .key(Origin::Env, "A_ENV")
            .key(Origin::Dir, "B_ONLY");
        builder.tenants(Origin::Dir, "A_ONLY", a.to_string());
        builder.tenants(Origin::Dir, "A_AND_B", format!("{a},{b}"));
        builder.tenants(Origin::Env, "A_ENV", a.to_string());
        builder.tenants(Origin::Dir, "B_ONLY", b.to_string());
        let (set, _) = builder.build().expect("a valid set");
        let names: Vec<String> = [
            "SHARED",
            "A_ONLY",
            "A_AND_B",
            "A_ENV",
            "B_ONLY",
            "ANTHROPIC_API_KEY",
            "GENESIS_AGENT_POD_TOKEN",
            "UNKNOWN",
            "A_ONLY",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(set.mountable_for(a, &names), ["A_ONLY"]);
        assert_eq!(set.mountable_for(b, &names), ["B_ONLY"]);
        assert!(set.mountable_for(Uuid::from_u128(3), &names).is_empty());
    }

    const A: Uuid = Uuid::from_u128(0xa);
    const B: Uuid = Uuid::from_u128(0xb);

    fn set(b: KeySetBuilder) -> KeySet {
        b.build().unwrap().0
    }

    #[test]
    fn platform_names_are_never_keys_in_any_case() {
        for name in [
            "GENESIS_AGENT_TOKEN",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "DATABASE_URL",
            "NATS_URL",
            "genesis_agent_token",
            "Otel_anything",
            "GENESIS_",
        ] {
            assert!(
                matches!(check_key_name(name), Err(KeyNameError::Forbidden { .. })),
                "{name}"
            );
        }
        assert_eq!(
            check_key_name("GENESIS_AGENT_TOKEN"),
            Err(KeyNameError::Forbidden { prefix: "GENESIS_" })
        );
        // A prefix only counts at the start, and GENESIS alone is a name.
        assert_eq!(check_key_name("MY_GENESIS_KEY"), Ok(()));
        assert_eq!(check_key_name("GENESIS"), Ok(()));
    }

    #[test]
    fn the_name_syntax_is_an_environment_variable_name() {
        for ok in ["ANTHROPIC_API_KEY", "team_a_key", "K", "K1_2"] {
            assert_eq!(check_key_name(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_key_name(""), Err(KeyNameError::Length));
        assert_eq!(
            check_key_name(&"K".repeat(MAX_KEY_NAME_BYTES + 1)),
            Err(KeyNameError::Length)
        );
        assert_eq!(check_key_name(&"K".repeat(MAX_KEY_NAME_BYTES)), Ok(()));
        for bad in ["1KEY", "_KEY", "oauth-max", "a.b", "a:b", "KEY ", "KÉY"] {
            assert_eq!(check_key_name(bad), Err(KeyNameError::Syntax), "{bad}");
        }
        assert_eq!(check_key_name("DIR"), Err(KeyNameError::Reserved));
        assert_eq!(check_key_name("TEAM_TENANTS"), Err(KeyNameError::Reserved));
    }

    #[test]
    fn variables_and_files_declare_keys_and_bindings() {
        assert_eq!(
            env_declaration("GENESIS_LLM_KEY_TEAM_A"),
            Some(Declared::Key("TEAM_A".into()))
        );
        assert_eq!(
            env_declaration("GENESIS_LLM_KEY_TEAM_A_TENANTS"),
            Some(Declared::Tenants("TEAM_A".into()))
        );
        assert_eq!(env_declaration(KEY_DIR_ENV), None);
        assert_eq!(env_declaration("ANTHROPIC_API_KEY"), None);
        assert_eq!(env_declaration("GENESIS_AGENT_TOKEN"), None);
        assert_eq!(
            env_declaration("GENESIS_LLM_KEY_"),
            Some(Declared::Key(String::new()))
        );
        assert_eq!(
            file_declaration("TEAM_A"),
            Some(Declared::Key("TEAM_A".into()))
        );
        assert_eq!(
            file_declaration("TEAM_A.tenants"),
            Some(Declared::Tenants("TEAM_A".into()))
        );
        assert_eq!(file_declaration("..data"), None);
        assert_eq!(file_declaration("..2026_01_01_00_00_00.1"), None);
    }

    #[test]
    fn tenant_lists_take_commas_or_white_space_and_refuse_anything_else() {
        let text = format!("{A}, {B}\n{A}\n");
        assert_eq!(parse_tenants(&text), Ok([A, B].into()));
        let e = parse_tenants(&format!("{A},acme")).expect_err("not a uuid");
        assert!(e.contains("\"acme\" is not a tenant id"), "{e}");
        assert!(parse_tenants(" , \n").is_err());
        assert!(parse_tenants("").is_err());
    }

    #[test]
    fn the_well_known_names_serve_every_tenant_and_nothing_else_does() {
        let s = KeySet::well_known();
        assert_eq!(s.allowed_for(A), WELL_KNOWN_KEYS);
        assert_eq!(
            s.check("ANTHROPIC_API_KEY", A).map(|k| k.origin),
            Ok(Origin::WellKnownEnv)
        );
        assert_eq!(s.check("PATH", A), Err(Refusal::NotAllowed));
        assert_eq!(
            s.check("GENESIS_AGENT_TOKEN", A),
            Err(Refusal::Forbidden(KeyNameError::Forbidden {
                prefix: "GENESIS_"
            }))
        );
        assert!(matches!(
            s.check("OTEL_EXPORTER_OTLP_HEADERS", A),
            Err(Refusal::Forbidden(_))
        ));
        // Every credential the code-default presets name is usable by any
        // tenant of a deployment that declares nothing.
        for p in crate::presets::DefaultProvider::ALL {
            for c in crate::presets::code_default(*p) {
                for name in c.credentials {
                    assert!(s.check(name, B).is_ok(), "{name}");
                }
            }
        }
    }

    #[test]
    fn a_bound_key_serves_its_tenants_only() {
        let mut b = KeySetBuilder::default();
        b.key(Origin::Env, "TEAM_A")
            .tenants(Origin::Env, "TEAM_A", A.to_string())
            .key(Origin::Dir, "SHARED")
            .key(Origin::Dir, "ANTHROPIC_API_KEY")
            .tenants(Origin::Dir, "ANTHROPIC_API_KEY", format!("{A}\n{B}\n"))
            .tenants(Origin::Env, "OPENAI_API_KEY", B.to_string());
        let s = set(b);
        assert_eq!(s.check("TEAM_A", A).map(|k| k.origin), Ok(Origin::Env));
        assert_eq!(s.check("TEAM_A", B), Err(Refusal::NotAllowed));
        assert_eq!(s.check("SHARED", B).map(|k| k.origin), Ok(Origin::Dir));
        assert_eq!(
            s.get("ANTHROPIC_API_KEY").map(|k| k.origin),
            Some(Origin::Dir)
        );
        // A well-known name may be bound while its value stays in its bare
        // variable.
        assert_eq!(s.check("OPENAI_API_KEY", A), Err(Refusal::NotAllowed));
        assert_eq!(
            s.check("OPENAI_API_KEY", B).map(|k| k.origin),
            Ok(Origin::WellKnownEnv)
        );
        assert_eq!(s.allowed_for(A), ["ANTHROPIC_API_KEY", "SHARED", "TEAM_A"]);
        assert_eq!(
            s.allowed_for(B),
            ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "SHARED"]
        );
        assert_eq!(
            s.names().collect::<Vec<_>>(),
            ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "SHARED", "TEAM_A"]
        );
    }

    #[test]
    fn directory_entries_that_cannot_be_keys_are_left_out_and_reported() {
        let mut b = KeySetBuilder::default();
        b.key(Origin::Dir, "GENESIS_AGENT_TOKEN")
            .key(Origin::Dir, "database-url")
            .tenants(Origin::Dir, "GENESIS_AGENT_TOKEN", A.to_string())
            .key(Origin::Dir, "TEAM_A");
        let (s, ignored) = b.build().unwrap();
        assert_eq!(
            ignored.iter().map(|i| i.entry.as_str()).collect::<Vec<_>>(),
            [
                "GENESIS_AGENT_TOKEN",
                "database-url",
                "GENESIS_AGENT_TOKEN.tenants"
            ]
        );
        assert!(ignored[0].reason.contains("GENESIS_"), "{:?}", ignored[0]);
        assert!(s.get("GENESIS_AGENT_TOKEN").is_none());
        assert!(matches!(
            s.check("GENESIS_AGENT_TOKEN", A),
            Err(Refusal::Forbidden(_))
        ));
        assert!(s.check("TEAM_A", A).is_ok());
    }

    #[test]
    fn bad_declarations_are_refused_naming_the_variable_or_file() {
        let refused = |b: KeySetBuilder| b.build().expect_err("refused").0;
        let mut b = KeySetBuilder::default();
        b.key(Origin::Env, "GENESIS_AGENT_TOKEN");
        let e = refused(b);
        assert!(
            e.starts_with("GENESIS_LLM_KEY_GENESIS_AGENT_TOKEN: names under GENESIS_"),
            "{e}"
        );
        let mut b = KeySetBuilder::default();
        b.key(Origin::Env, "");
        assert!(refused(b).starts_with("GENESIS_LLM_KEY_: a key name is"));
        let mut b = KeySetBuilder::default();
        b.key(Origin::Env, "TEAM").key(Origin::Dir, "TEAM");
        let e = refused(b);
        assert!(
            e.contains(
                "declared twice, as GENESIS_LLM_KEY_TEAM and as GENESIS_LLM_KEY_DIR file TEAM"
            ),
            "{e}"
        );
        let mut b = KeySetBuilder::default();
        b.tenants(Origin::Dir, "NOPE", A.to_string());
        let e = refused(b);
        assert!(
            e.starts_with("GENESIS_LLM_KEY_DIR file NOPE.tenants binds NOPE, which is not a key"),
            "{e}"
        );
        let mut b = KeySetBuilder::default();
        b.key(Origin::Dir, "TEAM")
            .tenants(Origin::Dir, "TEAM", A.to_string())
            .tenants(Origin::Env, "TEAM", B.to_string());
        assert!(refused(b).contains("bound twice"));
        let mut b = KeySetBuilder::default();
        b.key(Origin::Env, "TEAM")
            .tenants(Origin::Env, "TEAM", "acme");
        let e = refused(b);
        assert!(
            e.starts_with("GENESIS_LLM_KEY_TEAM_TENANTS: \"acme\" is not a tenant id"),
            "{e}"
        );
        let mut b = KeySetBuilder::default();
        b.key(Origin::Env, "TEAM").tenants(Origin::Env, "TEAM", "");
        assert!(refused(b).contains("lists no tenant"));
    }
}
