//! The one mapping from the error catalogue to `tonic::Status`: every
//! service answers a refusal through [`status`], so a code never differs
//! between RPCs or servers. Owns the catalogue's gRPC codes and the message
//! shape (`field: reason`, or `CODE: detail` for the codes a client branches
//! on). Must never put database internals or a secret in a message: a
//! database failure is logged here once and answered UNAVAILABLE.

use genesis_core::{Coded, ErrorCode, StatusClass};
use tonic::{Code, Status};

/// The gRPC code of a status class.
pub const fn grpc_code(class: StatusClass) -> Code {
    match class {
        StatusClass::InvalidArgument => Code::InvalidArgument,
        StatusClass::NotFound => Code::NotFound,
        StatusClass::AlreadyExists => Code::AlreadyExists,
        StatusClass::FailedPrecondition => Code::FailedPrecondition,
        StatusClass::PermissionDenied => Code::PermissionDenied,
        StatusClass::Unauthenticated => Code::Unauthenticated,
        StatusClass::ResourceExhausted => Code::ResourceExhausted,
        StatusClass::Aborted => Code::Aborted,
        StatusClass::Unavailable => Code::Unavailable,
    }
}

/// The status a refusal with `code` and `message` is answered with. An
/// in-band tool code (which never travels as a status) is answered
/// INTERNAL, so a misuse is loud rather than silently retyped.
pub fn coded(code: ErrorCode, message: impl Into<String>) -> Status {
    let message = message.into();
    let Some(class) = code.status_class() else {
        tracing::error!(%code, %message, "an in-band tool code was answered as a status");
        return Status::internal(format!("{code}: {message}"));
    };
    if code.prefixes_message() {
        Status::new(grpc_code(class), format!("{code}: {message}"))
    } else {
        Status::new(grpc_code(class), message)
    }
}

/// The status of any catalogue error. A database failure's own text is
/// logged here, never sent.
pub fn status<E: Coded + std::fmt::Display>(err: &E) -> Status {
    let code = err.code();
    if code == ErrorCode::Unavailable {
        tracing::error!(error = %err, "database failure answered UNAVAILABLE");
    }
    coded(code, err.public_message())
}

#[cfg(test)]
mod tests {
    use super::*;
    use genesis_core::CoreError;

    #[test]
    fn every_status_code_has_its_grpc_class_and_message_shape() {
        let lost = coded(ErrorCode::LeaseLost, "gone");
        assert_eq!(lost.code(), Code::Aborted);
        assert_eq!(lost.message(), "LEASE_LOST: gone");
        assert!(crate::convert::is_lease_lost(&lost));
        let field = status(&CoreError::invalid_argument("tenant_id", "required"));
        assert_eq!(field.code(), Code::InvalidArgument);
        assert_eq!(field.message(), "tenant_id: required");
        let mode = status(&CoreError::UnknownSite { site: "x".into() });
        assert_eq!(mode.code(), Code::InvalidArgument);
        assert!(mode.message().starts_with("UNKNOWN_SITE: "), "{mode:?}");
        for code in ErrorCode::ALL {
            let s = coded(*code, "m");
            match code.status_class() {
                Some(class) => assert_eq!(s.code(), grpc_code(class), "{code}"),
                None => assert_eq!(s.code(), Code::Internal, "{code} travels in band"),
            }
        }
    }
}
