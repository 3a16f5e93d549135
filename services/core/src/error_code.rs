//! The one catalogue of stable error codes (DESIGN §6). Every code a caller
//! can see — on a gRPC status, in a tool call's in-band error fed back to the
//! model, as a metric label — is a variant of [`ErrorCode`], with one line
//! saying what it means and what the caller should do about it. Owns the
//! codes' text forms and the gRPC status class each belongs to (as the
//! transport-free [`StatusClass`]); genesis-proto's `status` module turns a
//! [`Coded`] error into `tonic::Status` in one place. Must never depend on a
//! transport type, and never change a published text form: clients and
//! dashboards match on them.

use crate::enums::stored_enum;

stored_enum! {
    /// A stable, machine-readable error code.
    ErrorCode {
        // Refusals of a request (gRPC status codes).
        /// A request field is missing, malformed or out of range; the message
        /// names the field. Fix the request; nothing was written.
        InvalidArgument => "INVALID_ARGUMENT",
        /// A closed-vocabulary value (kind, status, scope, ...) is not one of
        /// its members; the message lists the accepted ones.
        UnknownEnum => "UNKNOWN_ENUM",
        /// A configuration value could not be applied; the message names the
        /// key and why.
        InvalidConfig => "INVALID_CONFIG",
        /// A mode's budget override JSON is malformed or names a bad axis.
        InvalidBudgetJson => "INVALID_BUDGET_JSON",
        /// A mode name outside the agent type's catalogue.
        UnknownMode => "UNKNOWN_MODE",
        /// A mode toolset grants a tool outside the agent type's superset.
        ToolOutsideSuperset => "TOOL_OUTSIDE_SUPERSET",
        /// An LLM call-site id the registry does not know.
        UnknownSite => "UNKNOWN_SITE",
        /// A default provider outside anthropic, openai and scripted.
        UnknownDefaultProvider => "UNKNOWN_DEFAULT_PROVIDER",
        /// A JSON payload exceeds its size cap; send less.
        PayloadTooLarge => "PAYLOAD_TOO_LARGE",
        /// The named row does not exist, or belongs to another tenant (the
        /// two are indistinguishable on purpose).
        NotFound => "NOT_FOUND",
        /// A uniqueness rule refused the write (a duplicate name or hash);
        /// nothing was written.
        Conflict => "CONFLICT",
        /// The operation is not allowed in the row's current state (paused,
        /// closed, settled, ...).
        FailedPrecondition => "FAILED_PRECONDITION",
        /// The caller's token may not do this: its scope, its tenant, or a
        /// database privilege boundary refused it.
        PermissionDenied => "PERMISSION_DENIED",
        /// No usable token: missing, malformed, unknown, expired or revoked.
        Unauthenticated => "UNAUTHENTICATED",
        /// Too many calls or failed authentications from this caller; retry
        /// after the wait the message gives.
        RateLimited => "RATE_LIMITED",
        /// Another live session holds the instance's tick lease; retry later.
        LeaseHeld => "LEASE_HELD",
        /// The calling session no longer holds the tick lease: drop the tick
        /// without retrying; nothing was written.
        LeaseLost => "LEASE_LOST",
        /// The instance's mode could not be resolved (unknown mode, or a
        /// toolset outside the superset): the tick does not run until an
        /// operator fixes the catalogue.
        ModeResolutionFailed => "MODE_RESOLUTION_FAILED",
        /// The database could not be reached or failed; nothing was written.
        /// Retry.
        Unavailable => "UNAVAILABLE",
        // In-band tool errors: the `error.code` of an InvokeTool answer, fed
        // back to the model so it can correct its next call.
        /// The tool's arguments do not match its schema; the message names
        /// the JSON path.
        InvalidArguments => "INVALID_ARGUMENTS",
        /// The instance's resolved toolset does not grant this tool.
        ToolNotAuthorized => "TOOL_NOT_AUTHORIZED",
        /// The tool is in the agent type's superset but this supervisor has
        /// no handler for it.
        ToolNotImplemented => "TOOL_NOT_IMPLEMENTED",
        /// The tool may not act on this target (outside the caller's scope).
        NotPermitted => "NOT_PERMITTED",
        /// The tool does not apply to this instance or call-site.
        NotApplicable => "NOT_APPLICABLE",
        /// The prompt redactor found nothing in the overlay to change.
        NothingToRedact => "NOTHING_TO_REDACT",
        /// The tool's handler failed for a reason of its own; the message
        /// says which.
        HandlerFailed => "HANDLER_FAILED",
    }
}

/// The gRPC status class of a code, without the transport's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    PermissionDenied,
    Unauthenticated,
    ResourceExhausted,
    Aborted,
    Unavailable,
}

impl ErrorCode {
    /// The gRPC status class a refusal with this code is answered with;
    /// `None` for the in-band tool codes, which travel inside a successful
    /// InvokeTool answer and never as a status.
    pub const fn status_class(self) -> Option<StatusClass> {
        use StatusClass as S;
        Some(match self {
            Self::InvalidArgument
            | Self::UnknownEnum
            | Self::InvalidConfig
            | Self::InvalidBudgetJson
            | Self::UnknownMode
            | Self::ToolOutsideSuperset
            | Self::UnknownSite
            | Self::UnknownDefaultProvider
            | Self::PayloadTooLarge => S::InvalidArgument,
            Self::NotFound => S::NotFound,
            Self::Conflict => S::AlreadyExists,
            Self::FailedPrecondition | Self::LeaseHeld | Self::ModeResolutionFailed => {
                S::FailedPrecondition
            }
            Self::PermissionDenied => S::PermissionDenied,
            Self::Unauthenticated => S::Unauthenticated,
            Self::RateLimited => S::ResourceExhausted,
            Self::LeaseLost => S::Aborted,
            Self::Unavailable => S::Unavailable,
            Self::InvalidArguments
            | Self::ToolNotAuthorized
            | Self::ToolNotImplemented
            | Self::NotPermitted
            | Self::NotApplicable
            | Self::NothingToRedact
            | Self::HandlerFailed => return None,
        })
    }

    /// Whether a status message starts with the code itself (`LEASE_LOST:
    /// …`): the codes a client branches on that share their gRPC class with
    /// others (a pod tells a lost lease from any other ABORTED this way).
    /// Field refusals instead start with the field's name.
    pub const fn prefixes_message(self) -> bool {
        matches!(
            self,
            Self::LeaseHeld
                | Self::LeaseLost
                | Self::ModeResolutionFailed
                | Self::UnknownEnum
                | Self::InvalidConfig
                | Self::InvalidBudgetJson
                | Self::UnknownMode
                | Self::ToolOutsideSuperset
                | Self::UnknownSite
                | Self::UnknownDefaultProvider
        )
    }
}

/// An error that belongs to the catalogue: its code, and the message that is
/// safe to send to the caller (never database internals or a secret).
pub trait Coded {
    /// The catalogue code.
    fn code(&self) -> ErrorCode;
    /// The message for the caller, without the code prefix (the status
    /// mapping adds it where [`ErrorCode::prefixes_message`] says so).
    fn public_message(&self) -> String;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_is_distinct() {
        let mut seen = std::collections::BTreeSet::new();
        for code in ErrorCode::ALL {
            assert_eq!(code.as_str().parse::<ErrorCode>().unwrap(), *code);
            assert!(seen.insert(code.as_str()), "{code} twice");
            assert!(
                code.as_str()
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c == '_'),
                "{code} is not SCREAMING_SNAKE_CASE"
            );
        }
    }

    #[test]
    fn only_the_tool_codes_travel_in_band() {
        let in_band: Vec<&str> = ErrorCode::ALL
            .iter()
            .filter(|c| c.status_class().is_none())
            .map(|c| c.as_str())
            .collect();
        assert_eq!(
            in_band,
            [
                "INVALID_ARGUMENTS",
                "TOOL_NOT_AUTHORIZED",
                "TOOL_NOT_IMPLEMENTED",
                "NOT_PERMITTED",
                "NOT_APPLICABLE",
                "NOTHING_TO_REDACT",
                "HANDLER_FAILED"
            ]
        );
        assert_eq!(
            ErrorCode::LeaseLost.status_class(),
            Some(StatusClass::Aborted)
        );
        assert!(ErrorCode::LeaseLost.prefixes_message());
        assert!(!ErrorCode::InvalidArgument.prefixes_message());
    }
}
