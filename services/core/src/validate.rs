//! Shared input limits used by every surface (gRPC admin, agent-pod, tool
//! handlers): payload and message sizes, name lengths and shapes. Each helper
//! returns `CoreError::InvalidArgument { field, reason }` naming the field, so
//! the edge can answer `INVALID_ARGUMENT` precisely before anything is
//! written. Must never trim, truncate or otherwise repair input: it accepts or
//! refuses.

use serde_json::Value;
use uuid::Uuid;

use crate::error::CoreError;

/// Largest event payload (serialised JSON), in bytes.
pub const MAX_EVENT_PAYLOAD_BYTES: usize = 64 * 1024;
/// Largest chat message body, in bytes (UTF-8).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;
/// Longest mode name.
pub const MAX_MODE_NAME_LEN: usize = 64;
/// Longest tool name.
pub const MAX_TOOL_NAME_LEN: usize = 64;
/// Longest general display name (tenant, preset, registry agent...).
pub const MAX_NAME_LEN: usize = 128;
/// Longest description.
pub const MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
/// Longest mode prompt fragment, in bytes.
pub const MAX_PROMPT_FRAGMENT_BYTES: usize = 16 * 1024;
/// Most tools in one mode toolset.
pub const MAX_TOOLSET_LEN: usize = 64;

fn invalid(field: &str, reason: impl Into<String>) -> CoreError {
    CoreError::invalid_argument(field, reason)
}

/// A chat message or free-text body: non-blank, at most `MAX_MESSAGE_BYTES`,
/// no NUL (PostgreSQL text cannot store it).
pub fn validate_message(field: &str, body: &str) -> Result<(), CoreError> {
    validate_text(field, body, MAX_MESSAGE_BYTES)
}

/// Free text with a byte ceiling: non-blank, within `max_bytes`, no NUL.
pub fn validate_text(field: &str, text: &str, max_bytes: usize) -> Result<(), CoreError> {
    if text.trim().is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if text.len() > max_bytes {
        return Err(invalid(
            field,
            format!("is {} bytes; the limit is {max_bytes}", text.len()),
        ));
    }
    if text.contains('\0') {
        return Err(invalid(field, "must not contain NUL characters"));
    }
    Ok(())
}

/// A display name: non-empty, at most `max_chars` characters, no control
/// characters, no leading or trailing whitespace.
pub fn validate_name(field: &str, name: &str, max_chars: usize) -> Result<(), CoreError> {
    if name.is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    let chars = name.chars().count();
    if chars > max_chars {
        return Err(invalid(
            field,
            format!("is {chars} characters; the limit is {max_chars}"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(invalid(field, "must not contain control characters"));
    }
    if name.trim() != name {
        return Err(invalid(field, "must not start or end with whitespace"));
    }
    Ok(())
}

/// An identifier made of `allowed` ASCII characters, non-empty and bounded.
fn validate_identifier(
    field: &str,
    value: &str,
    max_len: usize,
    allowed: fn(u8) -> bool,
    shape: &str,
) -> Result<(), CoreError> {
    if value.is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if value.len() > max_len {
        return Err(invalid(
            field,
            format!("is {} bytes; the limit is {max_len}", value.len()),
        ));
    }
    if !value.bytes().all(allowed) {
        return Err(invalid(field, format!("must contain only {shape}")));
    }
    Ok(())
}

/// A mode name: ASCII letters, digits, `_` or `-`, at most 64.
pub fn validate_mode_name(field: &str, name: &str) -> Result<(), CoreError> {
    validate_identifier(
        field,
        name,
        MAX_MODE_NAME_LEN,
        |b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-',
        "ASCII letters, digits, '_' or '-'",
    )
}

/// A tool name: lower-case ASCII letters, digits or `_`, at most 64.
pub fn validate_tool_name(field: &str, name: &str) -> Result<(), CoreError> {
    validate_identifier(
        field,
        name,
        MAX_TOOL_NAME_LEN,
        |b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_',
        "lower-case ASCII letters, digits or '_'",
    )
}

/// An event (or tool-argument) JSON payload: serialised size within
/// `max_bytes`, and no `\u0000` in any string or key (jsonb rejects it).
pub fn validate_payload(field: &str, payload: &Value, max_bytes: usize) -> Result<(), CoreError> {
    let size = payload.to_string().len();
    if size > max_bytes {
        return Err(invalid(
            field,
            format!("is {size} bytes of JSON; the limit is {max_bytes}"),
        ));
    }
    if contains_nul(payload) {
        return Err(invalid(field, "must not contain \\u0000 in any string"));
    }
    Ok(())
}

fn contains_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(contains_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || contains_nul(v)),
        _ => false,
    }
}

/// Parses a UUID argument (hyphenated form) with a field-level error.
pub fn parse_uuid(field: &str, value: &str) -> Result<Uuid, CoreError> {
    Uuid::try_parse(value).map_err(|_| invalid(field, format!("{value:?} is not a UUID")))
}

/// A page size or count: 1 ..= `max`.
pub fn validate_limit(field: &str, value: u64, max: u64) -> Result<(), CoreError> {
    if value == 0 || value > max {
        return Err(invalid(field, format!("must be between 1 and {max}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reason(r: Result<(), CoreError>) -> String {
        match r {
            Err(CoreError::InvalidArgument { reason, .. }) => reason,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn messages_within_limits_pass_and_others_are_refused_by_field() {
        assert!(validate_message("body", "hello").is_ok());
        assert!(validate_message("body", &"x".repeat(MAX_MESSAGE_BYTES)).is_ok());
        let err = validate_message("body", &"x".repeat(MAX_MESSAGE_BYTES + 1)).unwrap_err();
        assert_eq!(
            err,
            CoreError::InvalidArgument {
                field: "body".into(),
                reason: "is 16385 bytes; the limit is 16384".into()
            }
        );
        assert_eq!(
            reason(validate_message("body", "  \n")),
            "must not be empty"
        );
        assert_eq!(
            reason(validate_message("body", "a\0b")),
            "must not contain NUL characters"
        );
        // Multi-byte text is measured in bytes.
        assert!(validate_message("body", &"é".repeat(MAX_MESSAGE_BYTES / 2 + 1)).is_err());
    }

    #[test]
    fn names_are_bounded_and_clean() {
        assert!(validate_name("name", "Acme Corp", MAX_NAME_LEN).is_ok());
        assert!(validate_name("name", &"é".repeat(MAX_NAME_LEN), MAX_NAME_LEN).is_ok());
        assert!(validate_name("name", &"a".repeat(MAX_NAME_LEN + 1), MAX_NAME_LEN).is_err());
        assert_eq!(reason(validate_name("name", "", 10)), "must not be empty");
        assert_eq!(
            reason(validate_name("name", " a", 10)),
            "must not start or end with whitespace"
        );
        assert_eq!(
            reason(validate_name("name", "a\nb", 10)),
            "must not contain control characters"
        );
    }

    #[test]
    fn identifiers_have_a_fixed_shape() {
        assert!(validate_mode_name("mode", "GateReview").is_ok());
        assert!(validate_mode_name("mode", "Gate Review").is_err());
        assert!(validate_mode_name("mode", &"A".repeat(65)).is_err());
        assert!(validate_tool_name("tool", "soa_send_message").is_ok());
        assert!(validate_tool_name("tool", "soa-send").is_err());
        assert!(validate_tool_name("tool", "SoaSend").is_err());
        assert_eq!(reason(validate_tool_name("tool", "")), "must not be empty");
    }

    #[test]
    fn payloads_are_bounded_and_nul_free() {
        assert!(
            validate_payload("payload", &json!({"a": [1, "b"]}), MAX_EVENT_PAYLOAD_BYTES).is_ok()
        );
        let big = json!({"blob": "x".repeat(MAX_EVENT_PAYLOAD_BYTES)});
        let r = reason(validate_payload("payload", &big, MAX_EVENT_PAYLOAD_BYTES));
        assert!(r.ends_with("the limit is 65536"), "{r}");
        assert!(validate_payload("payload", &json!({"a": ["ok", "bad\u{0}"]}), 1024).is_err());
        assert!(validate_payload("payload", &json!({"k\u{0}": 1}), 1024).is_err());
    }

    #[test]
    fn uuids_and_limits() {
        let id = Uuid::new_v4();
        assert_eq!(parse_uuid("instance_id", &id.to_string()).unwrap(), id);
        let err = parse_uuid("instance_id", "nope").unwrap_err();
        assert_eq!(err.code(), crate::ErrorCode::InvalidArgument);
        assert!(err.to_string().contains("instance_id"));
        assert!(validate_limit("limit", 1, 100).is_ok());
        assert!(validate_limit("limit", 100, 100).is_ok());
        assert!(validate_limit("limit", 0, 100).is_err());
        assert!(validate_limit("limit", 101, 100).is_err());
    }

    #[test]
    fn payload_ceiling_agrees_with_the_options_default() {
        assert_eq!(
            crate::options::AgentDispatcherOptions::default().max_event_payload_bytes,
            MAX_EVENT_PAYLOAD_BYTES
        );
    }
}
