//! The pod's error vocabulary: why a tick could not run or finish, sorted by
//! what the worker does about it (drop the tick on a lost lease, NAK and retry
//! on a transient supervisor failure, terminate a malformed message).
//!
//! This module must never carry the agent token or a provider credential in a
//! message: errors end up in logs and spans.

use tonic::{Code, Status};

use crate::model::BundleError;

/// Why a pod-side operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PodError {
    /// The session no longer holds the instance's lease (`ABORTED
    /// "LEASE_LOST"`): the tick must stop without completing.
    #[error("lease lost during {rpc}: {message}")]
    LeaseLost {
        /// The RPC that was answered LEASE_LOST.
        rpc: &'static str,
        /// The supervisor's message.
        message: String,
    },
    /// The supervisor could not be reached or answered a retryable status
    /// (UNAVAILABLE, DEADLINE_EXCEEDED, ...): nothing was written, the
    /// message is NAKed and redelivered.
    #[error("supervisor unavailable during {rpc}: {message}")]
    SupervisorUnavailable {
        /// The RPC that failed.
        rpc: &'static str,
        /// What tonic reported.
        message: String,
    },
    /// The supervisor refused the call with a non-retryable status.
    #[error("supervisor refused {rpc}: {code:?}: {message}")]
    SupervisorRejected {
        /// The RPC that was refused.
        rpc: &'static str,
        /// The gRPC status code.
        code: Code,
        /// The supervisor's message.
        message: String,
    },
    /// A JetStream message body is not `{tenant_id, instance_id, event_id}`.
    #[error("invalid tick message: {0}")]
    InvalidMessage(String),
    /// The claimed tick bundle is missing, or has malformed, a field the
    /// pod cannot run the tick without (the error names it).
    #[error("invalid tick bundle: {0}")]
    InvalidBundle(#[from] BundleError),
    /// The configuration is unusable (bad URL, missing token, bad address).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Talking to NATS failed.
    #[error("nats: {0}")]
    Nats(String),
}

/// A conversion that cannot fail (an already converted tick handed to
/// [`crate::planning::run_tick`]) has no error to report.
impl From<std::convert::Infallible> for PodError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

impl PodError {
    /// Classify a status answered by the supervisor for `rpc`.
    pub fn from_status(rpc: &'static str, status: &Status) -> Self {
        if genesis_proto::convert::is_lease_lost(status) {
            return PodError::LeaseLost {
                rpc,
                message: status.message().to_string(),
            };
        }
        match status.code() {
            Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Unknown
            | Code::Cancelled
            | Code::ResourceExhausted
            | Code::Internal => PodError::SupervisorUnavailable {
                rpc,
                message: status.message().to_string(),
            },
            code => PodError::SupervisorRejected {
                rpc,
                code,
                message: status.message().to_string(),
            },
        }
    }

    /// True for a lost lease (the tick is dropped, never completed).
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, PodError::LeaseLost { .. })
    }

    /// True when retrying later may succeed (the message is NAKed).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            PodError::SupervisorUnavailable { .. } | PodError::Nats(_)
        )
    }
}
