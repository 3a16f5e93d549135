//! Local argument checks, run before anything is sent: ids must be UUIDs,
//! enumeration names must be ones the wire accepts, JSON arguments must parse.
//! Each failure is a usage error (exit 2) naming the argument, the value and
//! what was expected, so a typo never costs a round trip or a partial change.
//!
//! Only shape and vocabulary live here; whether an entity exists or an
//! action is allowed is the control service's answer, never guessed here.

use std::fmt::Display;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use genesis_core::CoreError;
use uuid::Uuid;

use crate::error::CliError;

const ECHO_LIMIT: usize = 64;

fn echo(value: &str) -> String {
    crate::table::truncate(value, ECHO_LIMIT)
}

/// A required UUID argument, returned in canonical hyphenated lower case.
pub fn uuid(arg: &str, value: &str) -> Result<String, CliError> {
    if value.is_empty() {
        return Err(CliError::usage(format!("{arg}: required, expected a UUID")));
    }
    Uuid::try_parse(value)
        .map(|id| id.hyphenated().to_string())
        .map_err(|_| CliError::usage(format!("{arg}: not a UUID: {:?}", echo(value))))
}

/// An optional UUID argument.
pub fn opt_uuid(arg: &str, value: Option<&str>) -> Result<Option<String>, CliError> {
    value.map(|v| uuid(arg, v)).transpose()
}

/// The tenant every tenant-scoped command acts on: `--tenant` or
/// `GENESIS_TENANT`, which must be a UUID.
pub fn tenant(value: Option<&str>, command: &str) -> Result<String, CliError> {
    match value {
        None => Err(CliError::usage(format!(
            "--tenant (or GENESIS_TENANT) is required for `{command}`"
        ))),
        Some(v) => uuid("--tenant", v),
    }
}

/// One of genesis-core's stored enumerations, spelled exactly as stored.
/// The error lists every accepted spelling, as genesis-core's parse error
/// carries them.
pub fn stored<E: FromStr<Err = CoreError> + Display>(
    arg: &str,
    what: &str,
    value: &str,
) -> Result<String, CliError> {
    value
        .parse::<E>()
        .map(|v| v.to_string())
        .map_err(|e| match e {
            CoreError::UnknownEnum { expected, .. } if !expected.is_empty() => {
                CliError::usage(format!(
                    "{arg}: unknown {what} {:?} (expected one of {})",
                    echo(value),
                    expected.join(", ")
                ))
            }
            _ => CliError::usage(format!("{arg}: unknown {what} {:?}", echo(value))),
        })
}

/// One of a closed set of wire strings that genesis-core does not model
/// (registry roles, coder states, Windows conditions, ...).
pub fn choice(arg: &str, value: &str, allowed: &[&str]) -> Result<String, CliError> {
    if allowed.contains(&value) {
        Ok(value.to_owned())
    } else {
        Err(CliError::usage(format!(
            "{arg}: {:?} is not one of {}",
            echo(value),
            allowed.join(", ")
        )))
    }
}

/// Non-empty text (after trimming); the text itself is returned unchanged.
pub fn non_empty(arg: &str, value: &str) -> Result<String, CliError> {
    if value.trim().is_empty() {
        Err(CliError::usage(format!("{arg}: must not be empty")))
    } else {
        Ok(value.to_owned())
    }
}

/// A JSON argument (`--metadata`, `--result`, ...), returned as compact text.
/// An absent argument is the empty text the wire uses for "none".
pub fn json_text(arg: &str, value: Option<&str>) -> Result<String, CliError> {
    match value {
        None => Ok(String::new()),
        Some(text) => serde_json::from_str::<serde_json::Value>(text)
            .map(|v| v.to_string())
            .map_err(|e| CliError::usage(format!("{arg}: not valid JSON: {e}"))),
    }
}

/// An RFC 3339 instant (`2026-03-01T12:00:00Z`).
pub fn instant(arg: &str, value: &str) -> Result<prost_types::Timestamp, CliError> {
    let at = DateTime::parse_from_rfc3339(value)
        .map_err(|e| {
            CliError::usage(format!(
                "{arg}: not an RFC 3339 instant {:?}: {e}",
                echo(value)
            ))
        })?
        .with_timezone(&Utc);
    Ok(genesis_proto::convert::timestamp_from_chrono(at))
}

/// A price in dollars per million tokens: finite and not negative.
pub fn price(arg: &str, value: f64) -> Result<f64, CliError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(CliError::usage(format!(
            "{arg}: must be a finite, non-negative number of dollars per million tokens, got {value}"
        )))
    }
}

/// An LLM call-site id: `Family:Name`, both parts identifiers
/// (`Agent:Planning`, `PromptRedactor:Redact`).
pub fn site_id(arg: &str, value: &str) -> Result<String, CliError> {
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    match value.split_once(':') {
        Some((family, name)) if ident(family) && ident(name) => Ok(value.to_owned()),
        _ => Err(CliError::usage(format!(
            "{arg}: {:?} is not a call-site id (expected Family:Name, e.g. Agent:Planning)",
            echo(value)
        ))),
    }
}

/// A mode name: an identifier such as `Strategic` or `GateReview`. Whether
/// the mode is in the instance's catalogue is the server's check (catalogues
/// are table-backed and may grow).
pub fn mode_name(arg: &str, value: &str) -> Result<String, CliError> {
    if !value.is_empty() && value.chars().all(|c| c.is_ascii_alphanumeric()) {
        Ok(value.to_owned())
    } else {
        Err(CliError::usage(format!(
            "{arg}: {:?} is not a mode name (letters and digits, e.g. Strategic)",
            echo(value)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use genesis_core::AgentType;

    #[test]
    fn uuids_are_canonicalised_and_garbage_is_named() {
        let id = "67E55044-10B1-426F-9247-BB680E5FE0C8";
        assert_eq!(
            uuid("INSTANCE", id).expect("valid"),
            "67e55044-10b1-426f-9247-bb680e5fe0c8"
        );
        let err = uuid("INSTANCE", "1234").expect_err("refused");
        assert_eq!(err.to_string(), "INSTANCE: not a UUID: \"1234\"");
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
        assert!(uuid("INSTANCE", "").is_err());
    }

    #[test]
    fn a_missing_tenant_names_the_flag_and_the_command() {
        let err = tenant(None, "agent list").expect_err("refused");
        assert_eq!(
            err.to_string(),
            "--tenant (or GENESIS_TENANT) is required for `agent list`"
        );
        let err = tenant(Some("acme"), "agent list").expect_err("refused");
        assert_eq!(err.to_string(), "--tenant: not a UUID: \"acme\"");
    }

    #[test]
    fn stored_enums_accept_exact_spellings_and_list_the_rest() {
        assert_eq!(
            stored::<AgentType>("--type", "agent type", "Compliance").expect("known"),
            "Compliance"
        );
        let err = stored::<AgentType>("--type", "agent type", "soa").expect_err("case matters");
        let text = err.to_string();
        assert!(
            text.starts_with("--type: unknown agent type \"soa\""),
            "{text}"
        );
        assert!(text.contains("Soa, Compliance, PromptRedactor"), "{text}");
    }

    #[test]
    fn choices_json_prices_sites_and_modes_are_checked() {
        assert!(choice("--role", "Developer", &["Developer", "Generic"]).is_ok());
        assert_eq!(
            choice("--role", "dev", &["Developer", "Generic"])
                .expect_err("refused")
                .to_string(),
            "--role: \"dev\" is not one of Developer, Generic"
        );
        assert_eq!(
            json_text("--metadata", Some(r#"{ "a" : 1 }"#)).expect("ok"),
            r#"{"a":1}"#
        );
        assert_eq!(json_text("--metadata", None).expect("ok"), "");
        assert!(json_text("--metadata", Some("{")).is_err());
        assert!(price("IN", 3.0).is_ok());
        assert!(price("IN", -1.0).is_err());
        assert!(price("IN", f64::NAN).is_err());
        assert!(site_id("SITE", "Agent:Planning").is_ok());
        assert!(site_id("SITE", "Agent").is_err());
        assert!(site_id("SITE", "Agent:").is_err());
        assert!(mode_name("MODE", "GateReview").is_ok());
        assert!(mode_name("MODE", "Gate Review").is_err());
        assert!(non_empty("BODY", "  ").is_err());
    }

    #[test]
    fn instants_parse_rfc3339_only() {
        let ts = instant("--before", "2026-03-01T12:00:00+01:00").expect("valid");
        assert_eq!(ts.seconds, 1_772_362_800);
        assert!(instant("--before", "yesterday").is_err());
    }
}
