//! Control's entry to the one catalogue mapping (`genesis_proto::status`)
//! for store and domain errors, plus the edge's input checks that answer
//! `INVALID_ARGUMENT` naming the field. Must never build a status for a
//! store or domain error any other way, so a code never differs between
//! RPCs or servers.

use std::str::FromStr;

use genesis_core::CoreError;
use genesis_proto::convert::invalid_argument;
use genesis_store::StoreError;

use crate::error::ControlError;
use tonic::Status;
use uuid::Uuid;

/// A store error's status, through the one catalogue mapping.
pub fn store_status(err: StoreError) -> Status {
    genesis_proto::status::status(&err)
}

/// A domain rule's refusal, through the one catalogue mapping.
pub fn core_status(err: CoreError) -> Status {
    genesis_proto::status::status(&err)
}

/// A `CoreError` refusal re-attributed to the request field the caller named.
pub fn field_status(field: &str, err: CoreError) -> Status {
    match err {
        CoreError::InvalidArgument { reason, .. } => invalid_argument(field, reason),
        other => invalid_argument(field, other.to_string()),
    }
}

/// A required UUID field.
pub fn uuid(field: &str, value: &str) -> Result<Uuid, Status> {
    genesis_proto::convert::parse_uuid(field, value)
}

/// An optional UUID field (unset or empty means none).
pub fn opt_uuid(field: &str, value: Option<&str>) -> Result<Option<Uuid>, Status> {
    match value {
        None | Some("") => Ok(None),
        Some(v) => uuid(field, v).map(Some),
    }
}

/// A stored enumeration spelled as text; unknown names name the field.
pub fn parse_enum<T: FromStr<Err = CoreError>>(field: &str, value: &str) -> Result<T, Status> {
    if value.is_empty() {
        return Err(invalid_argument(field, "required"));
    }
    value
        .parse()
        .map_err(|e: CoreError| invalid_argument(field, e.to_string()))
}

/// An optional enumeration (unset or empty means no filter).
pub fn parse_opt_enum<T: FromStr<Err = CoreError>>(
    field: &str,
    value: Option<&str>,
) -> Result<Option<T>, Status> {
    match value {
        None | Some("") => Ok(None),
        Some(v) => parse_enum(field, v).map(Some),
    }
}

/// Free text with a byte ceiling (non-blank, no NUL), from genesis-core.
pub fn text(field: &str, value: &str, max_bytes: usize) -> Result<(), Status> {
    genesis_core::validate::validate_text(field, value, max_bytes)
        .map_err(|e| field_status(field, e))
}

/// Optional free text: empty is fine, otherwise bounded and NUL-free.
pub fn opt_text(field: &str, value: &str, max_bytes: usize) -> Result<(), Status> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > max_bytes {
        return Err(invalid_argument(
            field,
            format!("is {} bytes; the limit is {max_bytes}", value.len()),
        ));
    }
    if value.contains('\0') {
        return Err(invalid_argument(field, "must not contain NUL characters"));
    }
    Ok(())
}

/// A page size: 0 means `default`, otherwise 1..=`max`.
pub fn limit(field: &str, value: i32, default: i64, max: i64) -> Result<i64, Status> {
    match i64::from(value) {
        0 => Ok(default),
        v if (1..=max).contains(&v) => Ok(v),
        v => Err(invalid_argument(
            field,
            format!("must be between 1 and {max}, got {v}"),
        )),
    }
}

/// The one mapping of a control failure to a status: store errors keep
/// their precise code; anything else (a broker or lock failure) is
/// UNAVAILABLE with nothing written.
pub fn control_status(err: ControlError) -> Status {
    match err {
        ControlError::Store(e) => store_status(e),
        other => {
            tracing::error!(error = %other, "control failure answered UNAVAILABLE");
            Status::unavailable("a backing service is unavailable; nothing was written")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn store_errors_map_to_stable_codes() {
        assert_eq!(
            store_status(StoreError::not_found("x")).code(),
            Code::NotFound
        );
        assert_eq!(
            store_status(StoreError::invalid("body", "empty")).message(),
            "body: empty"
        );
        assert_eq!(
            store_status(StoreError::LeaseHeld).code(),
            Code::FailedPrecondition
        );
        assert_eq!(
            store_status(StoreError::precondition("mid-tick")).code(),
            Code::FailedPrecondition
        );
        assert_eq!(
            store_status(StoreError::Conflict {
                what: "name".into()
            })
            .code(),
            Code::AlreadyExists
        );
        let db = store_status(StoreError::Database("password=hunter2 refused".into()));
        assert_eq!(db.code(), Code::Unavailable);
        assert!(!db.message().contains("hunter2"));
    }

    #[test]
    fn enum_and_limit_checks_name_the_field() {
        let e = parse_enum::<genesis_core::AgentType>("agent_type", "Robot").expect_err("unknown");
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().starts_with("agent_type:"));
        assert!(
            e.message().ends_with(
                "(expected one of Soa, Compliance, PromptRedactor, MissionDevelopment, \
                 MissionResearch, MissionOperations)"
            ),
            "{}",
            e.message()
        );
        let m = parse_enum::<genesis_core::MissionStatus>("status", "done").expect_err("unknown");
        assert!(
            m.message()
                .contains("expected one of proposed, active, blocked, completed, cancelled"),
            "{}",
            m.message()
        );
        assert!(parse_enum::<genesis_core::AgentType>("agent_type", "").is_err());
        assert_eq!(limit("limit", 0, 50, 500).expect("default"), 50);
        assert!(
            limit("limit", 501, 50, 500)
                .expect_err("too big")
                .message()
                .starts_with("limit:")
        );
        assert!(limit("limit", -1, 50, 500).is_err());
        assert!(opt_text("note", &"x".repeat(11), 10).is_err());
    }
}
