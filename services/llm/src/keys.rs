//! The platform's provider keys as a service reads them: the
//! `GENESIS_LLM_KEY_<NAME>` variables (bound with
//! `GENESIS_LLM_KEY_<NAME>_TENANTS`), the key directory (`GENESIS_LLM_KEY_DIR`:
//! one file `<NAME>` per key, as a Kubernetes Secret volume mounts them, bound
//! with `<NAME>.tenants`) and the bare variables of the well-known names
//! `ANTHROPIC_API_KEY` and `OPENAI_API_KEY`. The rule — which names can be
//! keys and who may use each — is genesis-core's
//! [`genesis_core::llm_keys`]; this module only reads the declarations and,
//! for the agent pod, the values.
//!
//! Control reads names and bindings only ([`load_key_set`]): it never opens
//! a key's file and drops a key variable's value as it reads the name. It
//! never calls a provider, and a value it held could only leak (through a
//! log line, an error, a dump); refusing a name a tenant may not use needs
//! nothing but the set.
//!
//! The agent pod ([`ProviderKeys`]) resolves a value only for a name of the
//! set that is bound to the tick's tenant; any other name — the agent-pod
//! token, an `OTEL_*` header, another tenant's key, anything outside the set
//! — resolves to nothing, whatever the process environment holds.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use genesis_core::llm_keys::{
    Declared, Ignored, KeySet, KeySetBuilder, Origin, env_declaration, file_declaration,
};
use uuid::Uuid;

use crate::secret::Secret;

/// Why the keys could not be read; names the variable, directory or file,
/// never a value.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// A declaration the rule refuses.
    #[error("provider keys: {0}")]
    Set(#[from] genesis_core::llm_keys::KeySetError),
    /// The key directory or a binding file could not be read.
    #[error("provider keys: {what}: {source}")]
    Read {
        /// The directory or file.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A binding's tenant list is not UTF-8.
    #[error("provider keys: {0} is not UTF-8")]
    NotUtf8(String),
}

/// The set of keys with the directory entries left out of it (each service
/// logs them at startup).
#[derive(Debug, Clone)]
pub struct LoadedKeySet {
    /// Names, origins and bindings.
    pub set: KeySet,
    /// Directory entries that can never be keys.
    pub ignored: Vec<Ignored>,
}

/// Read the declarations of `env` (the process environment in production;
/// a map in tests) and of the key directory `dir`. `keep` receives each key
/// variable's name and value, for the pod; control passes a closure that
/// drops it. Key files are never opened here.
fn scan<I>(
    env: I,
    dir: Option<&Path>,
    mut keep: impl FnMut(&str, OsString),
) -> Result<LoadedKeySet, KeysError>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut builder = KeySetBuilder::default();
    for (var, value) in env {
        let Some(var) = var.to_str() else { continue };
        match env_declaration(var) {
            Some(Declared::Key(name)) => {
                builder.key(Origin::Env, name);
                keep(var, value);
            }
            Some(Declared::Tenants(name)) => {
                let text = value
                    .into_string()
                    .map_err(|_| KeysError::NotUtf8(var.to_owned()))?;
                builder.tenants(Origin::Env, name, text);
            }
            None => {
                if genesis_core::llm_keys::WELL_KNOWN_KEYS.contains(&var) {
                    keep(var, value);
                }
            }
        }
    }
    if let Some(dir) = dir {
        let shown = || format!("{} {}", genesis_core::llm_keys::KEY_DIR_ENV, dir.display());
        let entries = std::fs::read_dir(dir).map_err(|source| KeysError::Read {
            what: shown(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| KeysError::Read {
                what: shown(),
                source,
            })?;
            let file = entry.file_name();
            let Some(file) = file.to_str() else {
                tracing::warn!(dir = %dir.display(), "provider keys: an entry whose name is not UTF-8 is not a key");
                continue;
            };
            let Some(declared) = file_declaration(file) else {
                continue;
            };
            // Follows symlinks: a Secret volume's files are links into its
            // current `..data`.
            if !entry.path().is_file() {
                continue;
            }
            match declared {
                Declared::Key(name) => {
                    builder.key(Origin::Dir, name);
                }
                Declared::Tenants(name) => {
                    let path = entry.path();
                    let text =
                        std::fs::read_to_string(&path).map_err(|source| KeysError::Read {
                            what: path.display().to_string(),
                            source,
                        })?;
                    builder.tenants(Origin::Dir, name, text);
                }
            }
        }
    }
    let (set, ignored) = builder.build()?;
    Ok(LoadedKeySet { set, ignored })
}

/// The names and bindings of the deployment's keys, for control: values are
/// never read (see the module documentation).
pub fn load_key_set<I>(env: I, dir: Option<&Path>) -> Result<LoadedKeySet, KeysError>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    scan(env, dir, |_, _| {})
}

/// The agent pod's provider keys: the set, the values of the variables that
/// hold keys, and the key directory whose files are read when a call needs
/// one (so a rotated Secret is used without a restart).
#[derive(Clone)]
pub struct ProviderKeys {
    set: KeySet,
    ignored: Vec<Ignored>,
    values: HashMap<String, Secret>,
    dir: Option<PathBuf>,
}

impl std::fmt::Debug for ProviderKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderKeys")
            .field("names", &self.set.names().collect::<Vec<_>>())
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl ProviderKeys {
    /// Read the keys of `env` and `dir`. Only the values of variables that
    /// hold a key of the set are kept: `GENESIS_LLM_KEY_<NAME>`, and the
    /// bare variable of a well-known name whose value is not declared
    /// elsewhere.
    pub fn load<I>(env: I, dir: Option<&Path>) -> Result<ProviderKeys, KeysError>
    where
        I: IntoIterator<Item = (OsString, OsString)>,
    {
        let mut vars: Vec<(String, OsString)> = Vec::new();
        let loaded = scan(env, dir, |var, value| vars.push((var.to_owned(), value)))?;
        let mut values = HashMap::new();
        for (var, value) in vars {
            // The value counts only where the set says this key's value lives.
            let (name, origin) = match env_declaration(&var) {
                Some(Declared::Key(name)) => (name, Origin::Env),
                _ => (var, Origin::WellKnownEnv),
            };
            if loaded.set.get(&name).is_some_and(|k| k.origin == origin)
                && let Ok(value) = value.into_string()
            {
                values.insert(name, Secret::new(value));
            }
        }
        Ok(ProviderKeys {
            set: loaded.set,
            ignored: loaded.ignored,
            values,
            dir: dir.map(Path::to_path_buf),
        })
    }

    /// [`ProviderKeys::load`] from this process's environment.
    pub fn from_process_env(dir: Option<&Path>) -> Result<ProviderKeys, KeysError> {
        ProviderKeys::load(std::env::vars_os(), dir)
    }

    /// The set: names, origins and bindings.
    pub fn set(&self) -> &KeySet {
        &self.set
    }

    /// Directory entries left out of the set.
    pub fn ignored(&self) -> &[Ignored] {
        &self.ignored
    }

    /// The secret `tenant` names as `name`: `None` when the name is not a key
    /// of the set bound to `tenant` (logged, by name), or when its value is
    /// unset or empty. A file of the key directory is read now, trimmed.
    pub fn secret(&self, tenant: Uuid, name: &str) -> Option<Secret> {
        let key = match self.set.check(name, tenant) {
            Ok(key) => key,
            Err(refusal) => {
                tracing::warn!(%tenant, credential = name, "provider keys: the credential {refusal}; not resolved");
                return None;
            }
        };
        let value = match key.origin {
            Origin::Env | Origin::WellKnownEnv => self.values.get(name)?.expose().to_owned(),
            Origin::Dir => {
                let path = self.dir.as_ref()?.join(name);
                match std::fs::read_to_string(&path) {
                    Ok(v) => v,
                    Err(e) => {
                        tracing::warn!(credential = name, file = %path.display(), error = %e, "provider keys: the key's file could not be read");
                        return None;
                    }
                }
            }
        };
        let value = value.trim();
        (!value.is_empty()).then(|| Secret::new(value))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const A: Uuid = Uuid::from_u128(0xa);
    const B: Uuid = Uuid::from_u128(0xb);

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    /// A fresh directory under the system's temporary directory.
    struct Dir(PathBuf);

    impl Dir {
        fn new(files: &[(&str, &str)]) -> Dir {
            let path = std::env::temp_dir().join(format!("genesis-keys-{}", Uuid::new_v4()));
            std::fs::create_dir_all(&path).unwrap();
            for (name, text) in files {
                std::fs::write(path.join(name), text).unwrap();
            }
            Dir(path)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn value(keys: &ProviderKeys, tenant: Uuid, name: &str) -> Option<String> {
        keys.secret(tenant, name).map(|s| s.expose().to_owned())
    }

    #[test]
    fn only_keys_of_the_set_bound_to_the_tenant_resolve_from_the_environment() {
        let keys = ProviderKeys::load(
            env(&[
                ("GENESIS_AGENT_TOKEN", "gen_pod_token"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer otlp"),
                ("DATABASE_URL", "postgres://u:p@db/x"),
                ("PATH", "/usr/bin"),
                ("ANTHROPIC_API_KEY", "sk-ant-shared"),
                ("GENESIS_LLM_KEY_TEAM_A", "sk-team-a"),
                ("GENESIS_LLM_KEY_TEAM_A_TENANTS", &A.to_string()),
                ("GENESIS_LLM_KEY_SPARE", " sk-spare\n"),
                ("GENESIS_LLM_KEY_EMPTY", ""),
            ]),
            None,
        )
        .unwrap();
        for name in [
            "GENESIS_AGENT_TOKEN",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "DATABASE_URL",
            "PATH",
            "GENESIS_LLM_KEY_TEAM_A",
        ] {
            assert_eq!(value(&keys, A, name), None, "{name}");
        }
        assert_eq!(value(&keys, A, "TEAM_A").as_deref(), Some("sk-team-a"));
        assert_eq!(value(&keys, B, "TEAM_A"), None, "bound to tenant A only");
        assert_eq!(value(&keys, B, "SPARE").as_deref(), Some("sk-spare"));
        assert_eq!(
            value(&keys, B, "ANTHROPIC_API_KEY").as_deref(),
            Some("sk-ant-shared")
        );
        assert_eq!(value(&keys, A, "OPENAI_API_KEY"), None, "unset");
        assert_eq!(value(&keys, A, "EMPTY"), None, "empty");
        assert!(!format!("{keys:?}").contains("sk-"), "{keys:?}");
    }

    #[test]
    fn a_declared_value_wins_over_the_bare_well_known_variable() {
        let keys = ProviderKeys::load(
            env(&[
                ("OPENAI_API_KEY", "sk-bare"),
                ("GENESIS_LLM_KEY_OPENAI_API_KEY", "sk-declared"),
                ("GENESIS_LLM_KEY_OPENAI_API_KEY_TENANTS", &B.to_string()),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(
            value(&keys, B, "OPENAI_API_KEY").as_deref(),
            Some("sk-declared")
        );
        assert_eq!(value(&keys, A, "OPENAI_API_KEY"), None);
    }

    #[test]
    fn the_key_directory_is_read_when_a_call_needs_a_key() {
        let dir = Dir::new(&[
            ("TEAM_B", "sk-team-b\n"),
            ("TEAM_B.tenants", &format!("{B}\n")),
            ("ANTHROPIC_API_KEY", "sk-ant-file"),
            ("GENESIS_AGENT_TOKEN", "gen_pod_token"),
            ("agent-token", "gen_pod_token"),
            (".hidden", "x"),
        ]);
        std::fs::create_dir(dir.0.join("..data")).unwrap();
        let keys =
            ProviderKeys::load(env(&[("ANTHROPIC_API_KEY", "sk-ant-env")]), Some(&dir.0)).unwrap();
        let mut ignored: Vec<&str> = keys.ignored().iter().map(|i| i.entry.as_str()).collect();
        ignored.sort_unstable();
        assert_eq!(ignored, ["GENESIS_AGENT_TOKEN", "agent-token"]);
        assert_eq!(value(&keys, A, "GENESIS_AGENT_TOKEN"), None);
        assert_eq!(value(&keys, A, "agent-token"), None);
        assert_eq!(value(&keys, B, "TEAM_B").as_deref(), Some("sk-team-b"));
        assert_eq!(value(&keys, A, "TEAM_B"), None);
        // The file is the key's one origin: the bare variable is not used.
        assert_eq!(
            value(&keys, A, "ANTHROPIC_API_KEY").as_deref(),
            Some("sk-ant-file")
        );
        // A rotated value is used without reloading; a removed file is no key.
        std::fs::write(dir.0.join("TEAM_B"), "sk-team-b-2").unwrap();
        assert_eq!(value(&keys, B, "TEAM_B").as_deref(), Some("sk-team-b-2"));
        std::fs::remove_file(dir.0.join("TEAM_B")).unwrap();
        assert_eq!(value(&keys, B, "TEAM_B"), None);
    }

    #[test]
    fn control_reads_names_and_bindings_and_a_bad_declaration_stops_the_load() {
        let dir = Dir::new(&[("TEAM_B", "sk"), ("TEAM_B.tenants", &B.to_string())]);
        let loaded = load_key_set(env(&[("GENESIS_LLM_KEY_X", "sk-x")]), Some(&dir.0)).unwrap();
        assert_eq!(
            loaded.set.allowed_for(A),
            ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "X"]
        );
        assert_eq!(
            loaded.set.allowed_for(B),
            ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "TEAM_B", "X"]
        );

        let e = load_key_set(env(&[("GENESIS_LLM_KEY_NATS_URL", "x")]), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GENESIS_LLM_KEY_NATS_URL: names under NATS_"),
            "{e}"
        );
        let bad = Dir::new(&[("TEAM_B", "sk"), ("TEAM_B.tenants", "acme")]);
        let e = load_key_set(env(&[]), Some(&bad.0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("file TEAM_B.tenants: \"acme\""), "{e}");
        let missing = dir.0.join("absent");
        let e = load_key_set(env(&[]), Some(&missing))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GENESIS_LLM_KEY_DIR") && e.contains("absent"),
            "{e}"
        );
    }
}
