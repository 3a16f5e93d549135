//! The supervisor's error vocabulary and the catalogue code of each error
//! (DESIGN §6); the status itself comes from genesis-proto's one mapping.
//! Owns the vocabulary; must never let a
//! database message about internal rows or a raw token reach the wire beyond
//! the typed text of a store error.

use genesis_core::{Coded, CoreError, ErrorCode};
use genesis_store::StoreError;
use tonic::Status;

/// Everything a supervisor call can fail with before it reaches the wire.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// A store failure (lease, not found, invalid, database).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A domain rule refused the input.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The instance's mode could not be resolved fail-closed (unknown mode or
    /// a toolset outside the type's superset): the tick cannot run.
    #[error("mode resolution failed: {0}")]
    ModeResolution(CoreError),
    /// A request field failed validation at the edge.
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
}

impl SupervisorError {
    /// Shorthand for [`SupervisorError::Invalid`].
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// A store error's status, through the one catalogue mapping. `LeaseHeld`
/// only reaches here from calls other than ClaimTick (which answers it as a
/// response variant); `LeaseLost` is `ABORTED` with a message starting
/// `LEASE_LOST`, as the AgentPod contract and
/// `genesis_proto::convert::is_lease_lost` fix.
pub fn store_status(err: &StoreError) -> Status {
    genesis_proto::status::status(err)
}

impl Coded for SupervisorError {
    fn code(&self) -> ErrorCode {
        match self {
            SupervisorError::Store(e) => e.code(),
            SupervisorError::Core(e) => Coded::code(e),
            SupervisorError::ModeResolution(_) => ErrorCode::ModeResolutionFailed,
            SupervisorError::Invalid { .. } => ErrorCode::InvalidArgument,
        }
    }

    fn public_message(&self) -> String {
        match self {
            SupervisorError::Store(e) => e.public_message(),
            SupervisorError::Core(e) => e.public_message(),
            SupervisorError::ModeResolution(e) => e.to_string(),
            SupervisorError::Invalid { field, reason } => format!("{field}: {reason}"),
        }
    }
}

impl From<SupervisorError> for Status {
    fn from(err: SupervisorError) -> Self {
        if let SupervisorError::ModeResolution(e) = &err {
            tracing::error!(error = %e, "mode resolution failed closed; the tick does not run");
        }
        genesis_proto::status::status(&err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn store_errors_map_to_stable_codes() {
        assert_eq!(
            store_status(&StoreError::not_found("agent instance")).code(),
            Code::NotFound
        );
        let lost = store_status(&StoreError::LeaseLost);
        assert!(genesis_proto::convert::is_lease_lost(&lost), "{lost:?}");
        let inv = store_status(&StoreError::invalid("event_id", "not claimed"));
        assert_eq!(inv.code(), Code::InvalidArgument);
        assert!(inv.message().starts_with("event_id:"));
        assert_eq!(
            store_status(&StoreError::Database("x".into())).code(),
            Code::Unavailable
        );
        assert_eq!(
            store_status(&StoreError::precondition("paused")).code(),
            Code::FailedPrecondition
        );
    }
}
