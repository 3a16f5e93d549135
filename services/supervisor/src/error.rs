//! The supervisor's error vocabulary and its ONE mapping to `tonic::Status`
//! with stable codes (DESIGN §6). Owns that mapping; must never let a
//! database message about internal rows or a raw token reach the wire beyond
//! the typed text of a store error.

use genesis_core::CoreError;
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

/// Maps a store error to its stable status code. `LeaseHeld` only reaches
/// here from calls other than ClaimTick (which answers it as a response
/// variant); `LeaseLost` is `ABORTED` with a message starting `LEASE_LOST`,
/// as the AgentPod contract and `genesis_proto::convert::is_lease_lost` fix.
pub fn store_status(err: &StoreError) -> Status {
    match err {
        StoreError::NotFound { what } => Status::not_found(format!("{what} not found")),
        StoreError::InvalidArgument { field, reason } => {
            genesis_proto::convert::invalid_argument(field, reason)
        }
        StoreError::LeaseHeld => {
            Status::failed_precondition("LEASE_HELD: another session holds the tick lease")
        }
        StoreError::LeaseLost => {
            genesis_proto::convert::lease_lost("the session no longer holds the tick lease")
        }
        StoreError::Conflict { what } => Status::already_exists(format!("conflict: {what}")),
        StoreError::FailedPrecondition { reason } => Status::failed_precondition(reason.clone()),
        StoreError::PayloadTooLarge { .. } => Status::invalid_argument(err.to_string()),
        StoreError::PermissionDenied { reason } => Status::permission_denied(reason.clone()),
        StoreError::Database(text) => {
            tracing::error!(error = %text, "database failure");
            Status::unavailable("database unavailable; nothing was written")
        }
    }
}

impl From<SupervisorError> for Status {
    fn from(err: SupervisorError) -> Self {
        match err {
            SupervisorError::Store(e) => store_status(&e),
            SupervisorError::Core(e) => Status::invalid_argument(format!("{}: {e}", e.code())),
            SupervisorError::ModeResolution(e) => {
                tracing::error!(error = %e, "mode resolution failed closed; the tick does not run");
                Status::failed_precondition(format!("MODE_RESOLUTION_FAILED: {e}"))
            }
            SupervisorError::Invalid { field, reason } => {
                genesis_proto::convert::invalid_argument(&field, reason)
            }
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
