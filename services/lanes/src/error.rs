//! The error vocabulary of the registry and coder lanes.
//!
//! It owns [`LanesError`]; the Windows lane has its own coded error
//! ([`crate::windows::WindowsError`]) because its codes are a wire contract.
//! Nothing here may carry a broker or cluster client type in its public shape
//! beyond a rendered message: callers map these to stable gRPC codes.

use thiserror::Error;

/// Errors of the registry and coder lanes, each precise enough to map to a
/// stable gRPC status at the edge.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LanesError {
    /// An input failed validation; `field` names the offending field so the
    /// edge can answer `INVALID_ARGUMENT` with a field-level message.
    #[error("invalid {field}: {message}")]
    Validation {
        /// The request field that was rejected.
        field: &'static str,
        /// Why it was rejected.
        message: String,
    },
    /// The addressed registry entry or coder does not exist for this tenant
    /// (also returned for another tenant's entry, so existence never leaks).
    #[error("{kind} {id} not found")]
    NotFound {
        /// What kind of thing was looked up (`agent`, `coder`, `preset`).
        kind: &'static str,
        /// The identifier that was looked up.
        id: String,
    },
    /// The coder exists but has nothing to read yet: its Job has no pod, or
    /// its pod's container has not started. Asking again later may succeed,
    /// so the edge answers it as a precondition, not as a missing coder.
    #[error("{0}")]
    NotStarted(String),
    /// No Kubernetes configuration (kubeconfig or in-cluster) could be found
    /// or the cluster could not be reached.
    #[error("kubernetes cluster unavailable: {0}")]
    ClusterUnavailable(String),
    /// The Kubernetes API refused or failed a request.
    #[error("kubernetes API error ({status}): {message}")]
    Kubernetes {
        /// HTTP status the API server answered, 0 when none.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// The NATS key-value bucket could not be opened or written.
    #[error("registry store error: {0}")]
    Store(String),
    /// A concurrent writer kept winning the compare-and-set; the caller may retry.
    #[error("registry entry {0} is contended; retry")]
    Contended(String),
    /// A stored entry could not be decoded.
    #[error("corrupt registry entry {key}: {message}")]
    Corrupt {
        /// The bucket key of the entry.
        key: String,
        /// The decode failure.
        message: String,
    },
}

impl LanesError {
    pub(crate) fn validation(field: &'static str, message: impl Into<String>) -> Self {
        Self::Validation {
            field,
            message: message.into(),
        }
    }
}
