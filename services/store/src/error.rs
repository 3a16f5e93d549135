//! The store's error vocabulary. Owns the mapping from `sqlx::Error` to typed
//! variants; must never let a `sqlx::Error` (or its message about internal
//! rows) cross the crate boundary as anything but [`StoreError::Database`].

use genesis_core::ErrorCode;
use thiserror::Error;

/// Every failure a store call can report. Each carries a catalogue code
/// ([`genesis_core::Coded`]), which genesis-proto maps to the wire without
/// inspecting database details.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// The row does not exist, or exists but belongs to another tenant
    /// (row-level security makes the two indistinguishable on purpose).
    #[error("{what} not found")]
    NotFound { what: String },
    /// Input refused before (or by) the database; nothing was written.
    #[error("invalid {field}: {reason}")]
    InvalidArgument { field: String, reason: String },
    /// Another live session holds the instance's tick lease.
    #[error("the tick lease is held by another session")]
    LeaseHeld,
    /// The caller's session no longer holds the lease; nothing was written.
    #[error("the tick lease was lost")]
    LeaseLost,
    /// A uniqueness rule refused the write (duplicate name, hash, ...).
    #[error("conflict: {what}")]
    Conflict { what: String },
    /// The operation is not allowed in the current state.
    #[error("failed precondition: {reason}")]
    FailedPrecondition { reason: String },
    /// A JSON payload exceeds the configured size limit.
    #[error("payload of {size} bytes exceeds the limit of {limit} bytes")]
    PayloadTooLarge { size: usize, limit: usize },
    /// The database refused the statement for lack of privilege (a role or
    /// row-level-security boundary).
    #[error("permission denied: {reason}")]
    PermissionDenied { reason: String },
    /// Any other database or connection failure, as text.
    #[error("database error: {0}")]
    Database(String),
}

impl genesis_core::Coded for StoreError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::NotFound { .. } => ErrorCode::NotFound,
            Self::InvalidArgument { .. } => ErrorCode::InvalidArgument,
            Self::LeaseHeld => ErrorCode::LeaseHeld,
            Self::LeaseLost => ErrorCode::LeaseLost,
            Self::Conflict { .. } => ErrorCode::Conflict,
            Self::FailedPrecondition { .. } => ErrorCode::FailedPrecondition,
            Self::PayloadTooLarge { .. } => ErrorCode::PayloadTooLarge,
            Self::PermissionDenied { .. } => ErrorCode::PermissionDenied,
            Self::Database(_) => ErrorCode::Unavailable,
        }
    }

    /// What the caller is told. A database failure says only that nothing
    /// was written: its text may name internal rows, and is logged instead.
    fn public_message(&self) -> String {
        match self {
            Self::NotFound { what } => format!("{what} not found"),
            Self::InvalidArgument { field, reason } => format!("{field}: {reason}"),
            Self::LeaseHeld => "another session holds the tick lease".to_owned(),
            Self::LeaseLost => "the session no longer holds the tick lease".to_owned(),
            Self::Conflict { what } => format!("conflict: {what}"),
            Self::FailedPrecondition { reason } | Self::PermissionDenied { reason } => {
                reason.clone()
            }
            Self::PayloadTooLarge { size, limit } => {
                format!("payload: is {size} bytes; the limit is {limit}")
            }
            Self::Database(_) => "the database is unavailable; nothing was written".to_owned(),
        }
    }
}

impl StoreError {
    /// Shorthand for [`StoreError::NotFound`].
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::NotFound { what: what.into() }
    }

    /// Shorthand for [`StoreError::InvalidArgument`].
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for [`StoreError::FailedPrecondition`].
    pub fn precondition(reason: impl Into<String>) -> Self {
        Self::FailedPrecondition {
            reason: reason.into(),
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match &err {
            sqlx::Error::RowNotFound => Self::not_found("row"),
            sqlx::Error::Database(db) => {
                let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                let constraint = db.constraint().unwrap_or("constraint").to_owned();
                match code.as_str() {
                    "23505" => Self::Conflict { what: constraint },
                    "23503" => Self::NotFound {
                        what: format!("referenced row ({constraint})"),
                    },
                    "23514" | "23502" => Self::InvalidArgument {
                        field: constraint,
                        reason: db.message().to_owned(),
                    },
                    "22P02" | "22007" | "22008" | "22023" | "22003" => Self::InvalidArgument {
                        field: "value".to_owned(),
                        reason: db.message().to_owned(),
                    },
                    "42501" => Self::PermissionDenied {
                        reason: db.message().to_owned(),
                    },
                    "P0002" => Self::NotFound {
                        what: db.message().to_owned(),
                    },
                    _ => Self::Database(format!("{code}: {}", db.message())),
                }
            }
            sqlx::Error::PoolTimedOut => Self::Database("connection pool timed out".to_owned()),
            other => Self::Database(other.to_string()),
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        Self::Database(format!("unexpected row shape: {err}"))
    }
}

impl From<genesis_core::CoreError> for StoreError {
    fn from(err: genesis_core::CoreError) -> Self {
        use genesis_core::CoreError as C;
        let field = match &err {
            C::UnknownEnum { kind, .. } => (*kind).to_owned(),
            C::InvalidArgument { field, .. } => field.clone(),
            C::InvalidConfig { key, .. } => key.clone(),
            C::UnknownMode { .. } => "mode".to_owned(),
            _ => err.code().as_str().to_owned(),
        };
        Self::InvalidArgument {
            field,
            reason: err.to_string(),
        }
    }
}

#[cfg(test)]
mod coded_tests {
    use super::*;
    use genesis_core::Coded;

    #[test]
    fn a_database_failure_is_unavailable_and_never_tells_its_text() {
        let err = StoreError::Database("relation agent_instances row 42: secret".into());
        assert_eq!(err.code(), ErrorCode::Unavailable);
        assert!(
            !err.public_message().contains("secret"),
            "{}",
            err.public_message()
        );
        assert_eq!(StoreError::LeaseLost.code(), ErrorCode::LeaseLost);
        assert_eq!(
            StoreError::PayloadTooLarge { size: 9, limit: 4 }.public_message(),
            "payload: is 9 bytes; the limit is 4"
        );
    }
}
