//! The config-file layer the Genesis bins share (DESIGN §11): a setting is
//! taken from the service default, then a TOML file (`--config FILE` or
//! `GENESIS_CONFIG`), then its `GENESIS_*` environment variable, then its
//! flag, the later winning. The file's keys are the flag names without the
//! leading `--` (`lease-ttl-secs = 60`; `lease_ttl_secs` is read the same)
//! or their environment variables (`GENESIS_LEASE_TTL_SECS = 60`), so the
//! `--help` of each bin and docs/configuration.md's tables both list the keys.
//!
//! How: each value of the file becomes the default of its clap argument,
//! which clap already ranks below env and flags, so there is one precedence
//! rule and it is clap's. Every value is checked by its argument's own value
//! parser before anything starts, and the error names the file and the key.
//!
//! This module must never start a service on a file it could not read in
//! full: an unreadable file, a key no flag has, or a value its flag refuses
//! is an error, never a skipped line. It must never print a value either
//! (the file may hold the database password); errors name keys only.
//!
//! It also owns the other direction, `--dump-config`: [`dump`] prints a
//! bin's effective configuration as TOML under the same keys a file takes,
//! with secrets masked by [`redacted_url`] and [`redacted_secret`], so every
//! bin prints the same shape and redacts the same way. [`redact_url`] and
//! [`redact_urls_in`] are the one URL masking every log line and error uses.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Arg, Command, CommandFactory, FromArgMatches};

/// The environment variable naming the config file when `--config` is not
/// given.
pub const CONFIG_ENV: &str = "GENESIS_CONFIG";

/// The flag naming the config file.
const CONFIG_FLAG: &str = "config";

/// Keys a file may not set: they choose the file or make the bin print and
/// exit, which only the operator at the command line should decide.
const RESERVED: [&str; 4] = [CONFIG_FLAG, "dump-config", "help", "version"];

/// Why a config file could not be used. Each names the file, and a key when
/// one is at fault; none carries a value.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("config file {path}: cannot read it: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: not valid TOML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error(
        "config file {path}: unknown key `{key}` (a key is a flag name without `--`, or its GENESIS_* variable; `--help` lists both)"
    )]
    UnknownKey { path: PathBuf, key: String },
    #[error("config file {path}: key `{key}`: {reason}")]
    Value {
        path: PathBuf,
        key: String,
        reason: String,
    },
}

/// Parse the bin's configuration `C` from the process's arguments and
/// environment with the config-file layer beneath the environment; on any
/// error print it as clap does and exit with clap's code (2 for bad input,
/// 0 for `--help`).
pub fn parse<C: CommandFactory + FromArgMatches>() -> C {
    let args: Vec<OsString> = std::env::args_os().collect();
    match try_parse_from::<C>(&args, std::env::var_os(CONFIG_ENV)) {
        Ok(c) => c,
        Err(ParseError::Clap(e)) => e.exit(),
        Err(ParseError::File(e)) => {
            let bin = C::command().get_name().to_owned();
            eprintln!("{bin}: error: {e}");
            std::process::exit(2);
        }
    }
}

/// What [`try_parse_from`] refuses with.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The file itself (clap never saw it).
    #[error(transparent)]
    File(#[from] ConfigFileError),
    /// The command line or environment, as clap reports it (also `--help`).
    #[error(transparent)]
    Clap(#[from] clap::Error),
}

/// [`parse`] with the arguments (the bin's name first) and the value of
/// [`CONFIG_ENV`] given, for tests. The environment variables of the
/// settings themselves are still read from the process, as clap does.
pub fn try_parse_from<C: CommandFactory + FromArgMatches>(
    args: &[OsString],
    config_env: Option<OsString>,
) -> Result<C, ParseError> {
    let mut cmd = C::command().arg(config_arg());
    let path = config_flag(args)
        .or_else(|| config_env.filter(|v| !v.is_empty()))
        .map(PathBuf::from);
    if let Some(path) = path {
        for (id, value) in read(&cmd, &path)? {
            // Hidden from `--help`: the file may hold a password.
            cmd = cmd.mut_arg(id, |a| a.default_value(value).hide_default_value(true));
        }
    }
    let matches = cmd.try_get_matches_from(args)?;
    Ok(C::from_arg_matches(&matches)?)
}

fn config_arg() -> Arg {
    Arg::new(CONFIG_FLAG)
        .long(CONFIG_FLAG)
        .value_name("FILE")
        .value_parser(clap::value_parser!(PathBuf))
        .global(true)
        // GENESIS_CONFIG is read by `parse`, not clap: clap refuses an
        // empty variable, and an empty one must mean "no file".
        .help(
            "A TOML file of settings (keys: flag names or their GENESIS_* variables); \
             env and flags override it [env: GENESIS_CONFIG]",
        )
}

/// The value of `--config FILE` or `--config=FILE` on the command line, if
/// any (the last wins, as clap's would). Read before clap parses because the
/// file changes what clap is given.
fn config_flag(args: &[OsString]) -> Option<OsString> {
    let flag = format!("--{CONFIG_FLAG}");
    let with_eq = format!("--{CONFIG_FLAG}=");
    let mut found = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if *a == *flag {
            found = it.next().cloned();
        } else if let Some(rest) = a.to_str().and_then(|s| s.strip_prefix(&with_eq)) {
            found = Some(OsString::from(rest));
        }
    }
    found
}

/// Every key of the file as (argument id, value text), each checked by its
/// argument's own value parser.
fn read(cmd: &Command, path: &Path) -> Result<Vec<(String, String)>, ConfigFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        ConfigFileError::Syntax {
            path: path.to_owned(),
            message: match line {
                Some(n) => format!("line {n}: {}", e.message()),
                None => e.message().to_owned(),
            },
        }
    })?;
    let mut out: Vec<(String, String)> = Vec::with_capacity(table.len());
    // argument id → the key that set it, to name the first of two keys for one setting
    let mut set_by: HashMap<String, String> = HashMap::new();
    for (key, value) in table {
        let long = key.replace('_', "-");
        let value_error = |reason: String| ConfigFileError::Value {
            path: path.to_owned(),
            key: key.clone(),
            reason,
        };
        if RESERVED.contains(&long.as_str()) {
            return Err(value_error(
                "cannot be set from a file; give it on the command line".into(),
            ));
        }
        let Some(arg) = cmd.get_arguments().find(|a| {
            a.get_long() == Some(&long) || a.get_env() == Some(std::ffi::OsStr::new(&key))
        }) else {
            return Err(ConfigFileError::UnknownKey {
                path: path.to_owned(),
                key,
            });
        };
        let text = scalar(&value).map_err(|what| {
            value_error(format!(
                "{what}; give the value as its flag takes it (a string, number or boolean)"
            ))
        })?;
        check(cmd, arg, arg.get_long().unwrap_or(&long), &text).map_err(value_error)?;
        let id = arg.get_id().to_string();
        if let Some(first) = set_by.get(&id) {
            return Err(value_error(format!(
                "sets the same setting as key `{first}`; keep one"
            )));
        }
        set_by.insert(id.clone(), key.clone());
        out.push((id, text));
    }
    Ok(out)
}

/// The placeholder a secret is printed as.
pub const REDACTED: &str = "***";

/// Schemes whose userinfo without a `:` is itself a secret: NATS reads
/// `nats://TOKEN@host` as token authentication.
const TOKEN_USERINFO_SCHEMES: &[&str] = &["nats", "tls", "ws", "wss"];

/// Whether `scheme` is one of [`TOKEN_USERINFO_SCHEMES`]. It is compared
/// by its end: in a coloured log line the characters of an escape sequence
/// (`\x1b[0m`) run into the scheme a scan of the text finds.
fn is_token_scheme(scheme: &str) -> bool {
    let b = scheme.as_bytes();
    TOKEN_USERINFO_SCHEMES
        .iter()
        .any(|s| b.len() >= s.len() && b[b.len() - s.len()..].eq_ignore_ascii_case(s.as_bytes()))
}

/// Query parameters whose value is a secret (`postgres://h/db?password=…`
/// is a libpq spelling; tokens and keys ride in query strings too).
const SECRET_QUERY_KEYS: &[&str] = &[
    "password",
    "sslpassword",
    "pass",
    "pwd",
    "passwd",
    "token",
    "access_token",
    "auth_token",
    "secret",
    "api_key",
    "apikey",
];

/// `scheme://user:secret@host/…` → `scheme://user:***@host/…`: the
/// password of a URL's userinfo masked, everything else kept so an operator
/// can still see where a service connects. A NATS userinfo with no password
/// is a token and is masked whole (`nats://***@host`); a secret query
/// parameter (`?password=…`, `?token=…`) has its value masked. A URL without
/// any of them is returned as it is.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The last `@`, not the first: a password written unencoded may hold
    // `@` or `/`, and masking too much is better than printing part of it.
    let rest = match rest.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:{REDACTED}@{host}"),
            None if is_token_scheme(scheme) => {
                format!("{REDACTED}@{host}")
            }
            None => rest.to_owned(),
        },
        None => rest.to_owned(),
    };
    format!("{scheme}://{}", redact_query(&rest))
}

/// `rest` (a URL after its `scheme://`) with the values of its secret query
/// parameters masked.
fn redact_query(rest: &str) -> String {
    let Some((head, query)) = rest.split_once('?') else {
        return rest.to_owned();
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _))
                if SECRET_QUERY_KEYS
                    .iter()
                    .any(|k| k.eq_ignore_ascii_case(key)) =>
            {
                format!("{key}={REDACTED}")
            }
            _ => param.to_owned(),
        })
        .collect();
    let mut out = format!("{head}?{}", params.join("&"));
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// The text between `field` and the closing quote of the string value that
/// follows it, wherever it stands in `text`, replaced by [`REDACTED`] when
/// `mask(value start)` says so. The value may be quoted plainly or with a
/// backslash (a `Debug` string inside a JSON line).
fn mask_quoted_after(text: &str, field: &str, mask: impl Fn(&str) -> bool) -> Option<String> {
    let mut out = String::new();
    let mut rest = text;
    let mut changed = false;
    while let Some(i) = rest.find(field) {
        let after = i + field.len();
        let open = if rest[after..].starts_with("\\\"") {
            2
        } else if rest[after..].starts_with('"') {
            1
        } else {
            out.push_str(&rest[..after]);
            rest = &rest[after..];
            continue;
        };
        let start = after + open;
        let Some(len) = rest[start..].find('"') else {
            break;
        };
        let mut end = start + len;
        if open == 2 && rest[..end].ends_with('\\') {
            end -= 1;
        }
        out.push_str(&rest[..start]);
        if mask(&rest[..i]) {
            out.push_str(REDACTED);
            changed = true;
        } else {
            out.push_str(&rest[start..end]);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    changed.then_some(out)
}

/// [`redact_urls_in`]'s part for URLs printed by `Debug`.
fn redact_debug_urls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("Url {") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut current = std::borrow::Cow::Borrowed(text);
    if let Some(masked) = mask_quoted_after(&current, "password: Some(", |_| true) {
        current = std::borrow::Cow::Owned(masked);
    }
    // A NATS URL's user is a token when it has no password: the user of the
    // nearest `Url {` before it decides by its scheme.
    let token_scheme = |before: &str| {
        before.rfind("Url {").is_some_and(|u| {
            let scheme = before[u..]
                .split("scheme: ")
                .nth(1)
                .unwrap_or_default()
                .trim_start_matches('\\')
                .trim_start_matches('"');
            TOKEN_USERINFO_SCHEMES.iter().any(|s| {
                let b = scheme.as_bytes();
                b.len() > s.len()
                    && b[..s.len()].eq_ignore_ascii_case(s.as_bytes())
                    && matches!(b[s.len()], b'"' | b'\\')
            })
        })
    };
    if let Some(masked) = mask_quoted_after(&current, "username: ", token_scheme) {
        current = std::borrow::Cow::Owned(masked);
    }
    current
}

/// Every URL in free text (an error message, a log line) with its secrets
/// masked as [`redact_url`] masks them. A URL runs from its scheme to the
/// next whitespace, quote, backslash, backtick or angle bracket. A URL
/// printed by its `Debug` (`Url { scheme: "nats", username: "…", password:
/// Some("…"), … }`, as async-nats logs the server it connects to) has its
/// password masked, and its username too for a NATS scheme (a token). Text
/// with neither is returned borrowed.
pub fn redact_urls_in(text: &str) -> std::borrow::Cow<'_, str> {
    match redact_debug_urls(text) {
        std::borrow::Cow::Borrowed(t) => redact_scheme_urls(t),
        std::borrow::Cow::Owned(o) => std::borrow::Cow::Owned(redact_scheme_urls(&o).into_owned()),
    }
}

/// [`redact_urls_in`]'s part for URLs written out (`scheme://…`).
fn redact_scheme_urls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("://") {
        return std::borrow::Cow::Borrowed(text);
    }
    let ends_url = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | '`' | '<' | '>');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let scheme_start = rest[..i]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |p| p + 1);
        let after = i + 3;
        let end = rest[after..]
            .find(ends_url)
            .map_or(rest.len(), |e| after + e);
        out.push_str(&rest[..scheme_start]);
        out.push_str(&redact_url(&rest[scheme_start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    if out == text {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(out)
    }
}

/// `#[serde(serialize_with)]` for a URL that may carry a password.
pub fn redacted_url<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(url))
}

/// [`redacted_url`] for an optional URL (pair it with
/// `skip_serializing_if = "Option::is_none"`).
pub fn redacted_optional_url<S: serde::Serializer>(
    url: &Option<String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match url {
        Some(url) => redacted_url(url, s),
        None => s.serialize_none(),
    }
}

/// `#[serde(serialize_with)]` for an optional secret: [`REDACTED`] when it
/// is set (pair it with `skip_serializing_if = "Option::is_none"`, so an
/// unset one is left out, as every unset option is).
pub fn redacted_secret<S: serde::Serializer>(
    secret: &Option<String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match secret {
        Some(_) => s.serialize_str(REDACTED),
        None => s.serialize_none(),
    }
}

/// `--dump-config` output: the configuration as TOML `key = value` lines,
/// under the keys a config file takes (unset options are left out).
pub fn dump<T: serde::Serialize>(config: &T) -> String {
    toml::to_string(config)
        .unwrap_or_else(|e| format!("# the configuration cannot be printed: {e}\n"))
}

/// Run `text` through `arg`'s own value parser, alone (no env, nothing
/// required), as `--long=text` would be.
fn check(cmd: &Command, arg: &Arg, long: &str, text: &str) -> Result<(), String> {
    if !arg.get_action().takes_values() {
        // A switch: only a boolean may stand for it.
        return match text {
            "true" | "false" => Ok(()),
            _ => Err("invalid value; possible values: true, false".into()),
        };
    }
    let probe = Command::new(cmd.get_name().to_owned())
        .no_binary_name(true)
        .arg(arg.clone().env(None).required(false).global(false));
    probe
        .try_get_matches_from([format!("--{long}={text}")])
        .map(drop)
        .map_err(|e| clap_reason(&e, text))
}

/// A TOML scalar as the text its flag would be given.
fn scalar(value: &toml::Value) -> Result<String, &'static str> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        toml::Value::Datetime(_) => Err("a date-time"),
        toml::Value::Array(_) => Err("an array"),
        toml::Value::Table(_) => Err("a table"),
    }
}

/// clap's reason for refusing `value`, without its `error: ` prefix, its
/// usage block, or the value itself (which may be a secret).
fn clap_reason(e: &clap::Error, value: &str) -> String {
    use clap::error::{ContextKind, ContextValue};
    let mut reason = match e.kind() {
        clap::error::ErrorKind::InvalidValue => "invalid value".to_owned(),
        clap::error::ErrorKind::ValueValidation => "invalid value".to_owned(),
        other => other.to_string(),
    };
    if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
        reason.push_str(&format!("; possible values: {}", valid.join(", ")));
    }
    if let Some(source) = std::error::Error::source(e) {
        let source = source.to_string();
        // Value parsers open with the value ("0 is not in 1..=86400"); a
        // long value is masked wherever it appears, a short one (a digit
        // may recur in the range) only there.
        let source = match source.strip_prefix(value) {
            Some(rest) if !value.is_empty() => format!("the value{rest}"),
            _ if value.len() >= 8 => source.replace(value, "the value"),
            _ => source,
        };
        reason.push_str(&format!(": {source}"));
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for a bin's configuration, with the kinds of argument the
    /// real ones use.
    #[derive(Debug, clap::Parser)]
    #[command(name = "genesis-test")]
    struct Conf {
        #[arg(
            long,
            env = "GENESIS_CONFIG_FILE_TEST_URL",
            default_value = "postgres://d/x"
        )]
        database_url: String,
        #[arg(long, env = "GENESIS_CONFIG_FILE_TEST_SLOTS", default_value_t = 16,
              value_parser = clap::value_parser!(u32).range(1..=4096))]
        pod_concurrency: u32,
        #[arg(long, env = "GENESIS_CONFIG_FILE_TEST_FLAG", default_value_t = true, action = clap::ArgAction::Set)]
        auto_bootstrap: bool,
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        log_format: String,
        #[arg(long)]
        dump_config: bool,
        #[arg(long)]
        ratio: Option<f64>,
    }

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("genesis.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn args(extra: &[&str]) -> Vec<OsString> {
        std::iter::once("genesis-test")
            .chain(extra.iter().copied())
            .map(OsString::from)
            .collect()
    }

    fn parse_with(path: &Path, extra: &[&str]) -> Result<Conf, ParseError> {
        let p = path.to_str().unwrap();
        let mut a = vec!["--config", p];
        a.extend_from_slice(extra);
        try_parse_from::<Conf>(&args(&a), None)
    }

    #[test]
    fn without_a_file_the_defaults_stand() {
        let c = try_parse_from::<Conf>(&args(&[]), None).unwrap();
        assert_eq!(c.database_url, "postgres://d/x");
        assert_eq!(c.pod_concurrency, 16);
        assert!(c.auto_bootstrap);
    }

    #[test]
    fn a_file_sets_values_under_flag_or_variable_names() {
        let (_d, path) = file(
            "database-url = \"postgres://app@db/genesis\"\n\
             pod_concurrency = 32\nGENESIS_CONFIG_FILE_TEST_FLAG = false\n\
             log-format = \"json\"\nratio = 0.5\n",
        );
        let c = parse_with(&path, &[]).unwrap();
        assert_eq!(c.database_url, "postgres://app@db/genesis");
        assert_eq!(c.pod_concurrency, 32);
        assert!(!c.auto_bootstrap);
        assert_eq!(c.log_format, "json");
        assert_eq!(c.ratio, Some(0.5));
        assert!(!c.dump_config);
    }

    #[test]
    fn the_env_variable_names_the_file_and_the_flag_wins_over_it() {
        let (_d, path) = file("pod-concurrency = 32\n");
        let (_d2, other) = file("pod-concurrency = 64\n");
        let c = try_parse_from::<Conf>(&args(&[]), Some(path.clone().into_os_string())).unwrap();
        assert_eq!(c.pod_concurrency, 32);
        let flag = format!("--config={}", other.display());
        let c = try_parse_from::<Conf>(&args(&[&flag]), Some(path.into_os_string())).unwrap();
        assert_eq!(c.pod_concurrency, 64);
    }

    #[test]
    fn a_flag_overrides_the_file() {
        let (_d, path) = file("pod-concurrency = 32\nauto-bootstrap = false\n");
        // A flag beats the file.
        let c = parse_with(&path, &["--pod-concurrency", "8"]).unwrap();
        assert_eq!(c.pod_concurrency, 8);
        assert!(!c.auto_bootstrap);
        // Env over the file is clap's own order (file values are defaults);
        // tests/tests/config_file.rs checks it on the real bins.
    }

    fn refused(text: &str) -> String {
        let (_d, path) = file(text);
        let e = parse_with(&path, &[]).unwrap_err();
        let ParseError::File(e) = e else {
            panic!("expected a file error, got {e}")
        };
        let msg = e.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        msg
    }

    #[test]
    fn a_key_no_flag_has_is_refused_by_name() {
        let msg = refused("pod-concurency = 32\n");
        assert!(msg.contains("unknown key `pod-concurency`"), "{msg}");
    }

    #[test]
    fn a_value_its_flag_refuses_is_refused_without_echoing_it() {
        let msg = refused("pod-concurrency = 5000\n");
        assert!(
            msg.ends_with("key `pod-concurrency`: invalid value: the value is not in 1..=4096"),
            "{msg}"
        );
        let msg = refused("pod-concurrency = 0\n");
        assert!(msg.ends_with("the value is not in 1..=4096"), "{msg}");
        let msg = refused("log-format = \"xml-secret\"\n");
        assert!(msg.contains("possible values: text, json"), "{msg}");
        assert!(!msg.contains("xml-secret"), "{msg}");
        let msg = refused("auto-bootstrap = \"maybe\"\n");
        assert!(msg.contains("key `auto-bootstrap`: invalid value"), "{msg}");
    }

    #[test]
    fn two_keys_for_one_setting_are_refused() {
        let msg = refused("pod-concurrency = 8\nGENESIS_CONFIG_FILE_TEST_SLOTS = 9\n");
        assert!(msg.contains("sets the same setting as key"), "{msg}");
        let msg = refused("pod-concurrency = 8\npod_concurrency = 9\n");
        assert!(msg.contains("sets the same setting as key"), "{msg}");
    }

    #[test]
    fn arrays_tables_and_dates_are_refused() {
        assert!(refused("database-url = [\"a\"]\n").contains("an array"));
        assert!(refused("[database-url]\nx = 1\n").contains("a table"));
        assert!(refused("database-url = 1979-05-27\n").contains("a date-time"));
    }

    #[test]
    fn the_file_cannot_choose_a_file_or_a_printout() {
        for key in ["config", "dump-config", "dump_config", "help"] {
            let msg = refused(&format!("{key} = \"x\"\n"));
            assert!(msg.contains("cannot be set from a file"), "{key}: {msg}");
        }
    }

    #[test]
    fn an_unreadable_or_malformed_file_is_refused() {
        let missing =
            try_parse_from::<Conf>(&args(&["--config", "/nonexistent/genesis.toml"]), None)
                .unwrap_err()
                .to_string();
        assert!(
            missing.contains("/nonexistent/genesis.toml: cannot read it"),
            "{missing}"
        );
        let msg = refused("log-format = \"json\"\npod-concurrency = \n");
        assert!(msg.contains("not valid TOML: line 2:"), "{msg}");
    }

    #[test]
    fn an_empty_variable_means_no_file() {
        let c = try_parse_from::<Conf>(&args(&[]), Some(OsString::new())).unwrap();
        assert_eq!(c.pod_concurrency, 16);
    }

    #[test]
    fn the_config_flag_is_found_anywhere_before_a_double_dash() {
        let a = args(&[
            "serve",
            "--config",
            "a.toml",
            "--x",
            "--config=b.toml",
            "--",
            "--config",
            "c",
        ]);
        assert_eq!(config_flag(&a), Some(OsString::from("b.toml")));
        assert_eq!(config_flag(&args(&["--config"])), None);
    }

    #[test]
    fn bad_command_line_input_is_still_clap_s_error() {
        let (_d, path) = file("pod-concurrency = 32\n");
        let e = parse_with(&path, &["--pod-concurrency", "0"]).unwrap_err();
        assert!(matches!(e, ParseError::Clap(_)), "{e}");
    }

    #[test]
    fn a_url_password_is_masked_and_nothing_else() {
        for (url, want) in [
            (
                "postgres://app:hunter2@db:5432/genesis",
                "postgres://app:***@db:5432/genesis",
            ),
            // Unencoded `@` and `/` in the password: all of it is masked.
            ("nats://u:p@ss/w0rd@nats:4222", "nats://u:***@nats:4222"),
            ("postgres://127.0.0.1/x", "postgres://127.0.0.1/x"),
            // A user alone is a role name to PostgreSQL, a token to NATS.
            ("postgres://app@db/x", "postgres://app@db/x"),
            ("nats://s3cr3t-token@nats:4222", "nats://***@nats:4222"),
            ("NATS://s3cr3t-token@nats:4222", "NATS://***@nats:4222"),
            (
                "postgres://db/x?sslmode=require&Password=hunter2&application_name=a",
                "postgres://db/x?sslmode=require&Password=***&application_name=a",
            ),
            (
                "http://am:9093/api?token=t0k#frag",
                "http://am:9093/api?token=***#frag",
            ),
            ("not a url", "not a url"),
        ] {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }

    #[test]
    fn urls_in_free_text_are_masked_wherever_they_stand() {
        for (text, want) in [
            (
                "connect nats://u:hunter2@127.0.0.1:1: connection refused",
                "connect nats://u:***@127.0.0.1:1: connection refused",
            ),
            (
                "error sending request for url (http://am:pw@127.0.0.1:9/api/v2/alerts)",
                "error sending request for url (http://am:***@127.0.0.1:9/api/v2/alerts)",
            ),
            (
                r#"{"url":"nats://tok@h:4222","b":"https://x:y@z/"}"#,
                r#"{"url":"nats://***@h:4222","b":"https://x:***@z/"}"#,
            ),
            (r#"url=\"wss://a:b@h\" two"#, r#"url=\"wss://a:***@h\" two"#),
            ("no url here: a@b", "no url here: a@b"),
            // A coloured log line: an escape sequence runs into the scheme.
            (
                "url\x1b[0m=\x1b[0mnats://s3cr3t@h:4222 x",
                "url\x1b[0m=\x1b[0mnats://***@h:4222 x",
            ),
            (
                "http://plain.example/path ok",
                "http://plain.example/path ok",
            ),
        ] {
            assert_eq!(redact_urls_in(text), want, "{text}");
        }
        assert!(matches!(
            redact_urls_in("http://plain.example/x"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    /// async-nats logs the server it dials as `ServerAddr(Url { … })`.
    #[test]
    fn urls_printed_by_debug_lose_their_password_and_nats_token() {
        for (text, want) in [
            (
                r#"server=ServerAddr(Url { scheme: "nats", cannot_be_a_base: false, username: "genesis", password: Some("hunter2"), host: Some(Domain("h")), port: Some(1) }) x"#,
                r#"server=ServerAddr(Url { scheme: "nats", cannot_be_a_base: false, username: "***", password: Some("***"), host: Some(Domain("h")), port: Some(1) }) x"#,
            ),
            (
                r#"server=ServerAddr(Url { scheme: "nats", cannot_be_a_base: false, username: "s3cr3t", password: None, host: Some(Domain("h")) })"#,
                r#"server=ServerAddr(Url { scheme: "nats", cannot_be_a_base: false, username: "***", password: None, host: Some(Domain("h")) })"#,
            ),
            // A JSON line: the Debug string's quotes are escaped.
            (
                r#"{"server":"ServerAddr(Url { scheme: \"nats\", username: \"s3cr3t\", password: Some(\"hunter2\"), host: None })"}"#,
                r#"{"server":"ServerAddr(Url { scheme: \"nats\", username: \"***\", password: Some(\"***\"), host: None })"}"#,
            ),
            // Another scheme keeps its user name.
            (
                r#"Url { scheme: "postgres", username: "app", password: Some("hunter2"), host: None }"#,
                r#"Url { scheme: "postgres", username: "app", password: Some("***"), host: None }"#,
            ),
            (
                r#"Url { scheme: "natsx", username: "app", password: None }"#,
                r#"Url { scheme: "natsx", username: "app", password: None }"#,
            ),
            // Anything else that looks half like one passes as it is.
            ("Url { scheme: \"néé", "Url { scheme: \"néé"),
            ("Url { password: Some(", "Url { password: Some("),
            ("Url { username: \"open", "Url { username: \"open"),
        ] {
            assert_eq!(redact_urls_in(text), want, "{text}");
        }
    }

    #[derive(serde::Serialize)]
    struct Printed {
        #[serde(serialize_with = "redacted_url")]
        database_url: String,
        #[serde(
            serialize_with = "redacted_secret",
            skip_serializing_if = "Option::is_none"
        )]
        token: Option<String>,
        #[serde(
            serialize_with = "redacted_secret",
            skip_serializing_if = "Option::is_none"
        )]
        unset_token: Option<String>,
        base_url: Option<String>,
        slots: u32,
        rate: f64,
        on: bool,
    }

    #[test]
    fn a_dump_is_toml_under_the_file_keys_with_secrets_masked() {
        let d = dump(&Printed {
            database_url: "postgres://app:hunter2@db/x".into(),
            token: Some("s3cret-token".into()),
            unset_token: None,
            base_url: None,
            slots: 16,
            rate: 2.5,
            on: true,
        });
        assert!(!d.contains("hunter2") && !d.contains("s3cret"), "{d}");
        let t: toml::Table = d.parse().expect("a dump is TOML");
        assert_eq!(t["database_url"].as_str(), Some("postgres://app:***@db/x"));
        assert_eq!(t["token"].as_str(), Some(REDACTED));
        assert!(
            !t.contains_key("unset_token") && !t.contains_key("base_url"),
            "{d}"
        );
        assert_eq!(t["slots"].as_integer(), Some(16));
        assert_eq!(t["rate"].as_float(), Some(2.5));
        assert_eq!(t["on"].as_bool(), Some(true));
        // Every key is one a config file takes (snake_case long names).
        assert!(d.lines().any(|l| l == "slots = 16"), "{d}");
    }
}
