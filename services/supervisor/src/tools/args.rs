//! Argument helpers shared by the governance tools: typed reads of an
//! already schema-checked arguments object, each refusing with an
//! `INVALID_ARGUMENTS` error that names the JSON path, so the model can fix
//! the call. Must never default a required value or repair bad input.

use genesis_core::ErrorCode;

use serde_json::Value;
use uuid::Uuid;

use super::ToolError;

/// The in-band code for a call whose arguments cannot be used.
pub const INVALID: ErrorCode = ErrorCode::InvalidArguments;

fn bad(field: &str, reason: impl std::fmt::Display) -> ToolError {
    ToolError::new(INVALID, format!("$.{field}: {reason}"))
}

/// A required, non-blank string.
pub fn required_str<'a>(args: &'a Value, field: &str) -> Result<&'a str, ToolError> {
    match args.get(field).and_then(Value::as_str) {
        Some(s) if !s.trim().is_empty() => Ok(s),
        Some(_) => Err(bad(field, "must not be blank")),
        None => Err(bad(field, "required")),
    }
}

/// An optional string (absent or null = `None`); present but blank is refused.
pub fn optional_str<'a>(args: &'a Value, field: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s)),
        Some(Value::String(_)) => Err(bad(field, "must not be blank when given")),
        Some(_) => Err(bad(field, "expected string")),
    }
}

/// An optional UUID string.
pub fn optional_uuid(args: &Value, field: &str) -> Result<Option<Uuid>, ToolError> {
    optional_str(args, field)?
        .map(|s| Uuid::try_parse(s).map_err(|_| bad(field, format!("{s:?} is not a UUID"))))
        .transpose()
}

/// A required UUID string.
pub fn required_uuid(args: &Value, field: &str) -> Result<Uuid, ToolError> {
    let s = required_str(args, field)?;
    Uuid::try_parse(s).map_err(|_| bad(field, format!("{s:?} is not a UUID")))
}

/// An optional integer within `min..=max`, else `default`.
pub fn limit(
    args: &Value,
    field: &str,
    default: i64,
    min: i64,
    max: i64,
) -> Result<i64, ToolError> {
    match args.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(bad(
                field,
                format!("must be an integer between {min} and {max}"),
            )),
        },
    }
}

/// An optional array of strings (absent = empty).
pub fn string_list(args: &Value, field: &str) -> Result<Vec<String>, ToolError> {
    match args.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad(&format!("{field}[{i}]"), "expected string"))
            })
            .collect(),
        Some(_) => Err(bad(field, "expected array")),
    }
}

/// A JSON value of a serialisable result (never fails for the store's row
/// types; a failure is reported as a handler failure, not a panic).
pub fn to_json<T: serde::Serialize>(value: &T) -> Result<Value, ToolError> {
    serde_json::to_value(value).map_err(|e| ToolError::new(ErrorCode::HandlerFailed, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn helpers_name_the_path_of_bad_input() {
        let a = json!({"q": " ", "id": "nope", "n": 99, "tags": ["a", 1]});
        assert_eq!(
            required_str(&a, "q").unwrap_err().message,
            "$.q: must not be blank"
        );
        assert_eq!(
            required_str(&a, "missing").unwrap_err().message,
            "$.missing: required"
        );
        assert!(
            optional_uuid(&a, "id")
                .unwrap_err()
                .message
                .contains("not a UUID")
        );
        assert_eq!(optional_uuid(&a, "absent").unwrap(), None);
        assert!(limit(&a, "n", 10, 1, 50).is_err());
        assert_eq!(limit(&a, "absent", 10, 1, 50).unwrap(), 10);
        assert_eq!(
            string_list(&a, "tags").unwrap_err().message,
            "$.tags[1]: expected string"
        );
    }
}
