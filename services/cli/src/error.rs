//! The CLI's error vocabulary and how each error reaches the operator: one
//! line on stderr (`error: <code>: <message>`) and an exit code (2 for usage,
//! 1 for everything that happened after a request could have been sent).
//!
//! This module must never print anything itself, nor carry a token in any
//! message.

use std::fmt;

/// Exit code of a usage error: bad flags, malformed ids, unknown enum names.
/// Nothing was sent to the control service.
pub const EXIT_USAGE: i32 = 2;

/// Exit code of a failure after argument validation: an RPC error, an
/// unreachable endpoint, an in-band Windows lane error, an I/O failure.
pub const EXIT_FAILURE: i32 = 1;

/// Every way a `genesisctl` invocation can fail.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The arguments are wrong; nothing was sent. The message names the
    /// argument and what is wrong with it.
    #[error("{0}")]
    Usage(String),
    /// The control service answered with a non-OK status.
    #[error("{}: {}", code_name(.0.code()), .0.message())]
    Rpc(tonic::Status),
    /// No connection could be made to the endpoint.
    #[error("cannot reach control at {endpoint}: {detail}")]
    Unreachable {
        /// The endpoint as given by `--endpoint`.
        endpoint: String,
        /// The transport error chain, joined with `: `.
        detail: String,
    },
    /// The TLS handshake with the endpoint failed: its certificate is not
    /// trusted (see `--ca-file`) or it does not speak TLS.
    #[error("TLS handshake with control at {endpoint} failed: {detail}")]
    Tls {
        /// The endpoint as given by `--endpoint`.
        endpoint: String,
        /// The transport error chain, joined with `: `.
        detail: String,
    },
    /// The Windows lane answered an in-band pool error (the RPC itself
    /// succeeded; the pool refused the verb).
    #[error("{code}: {message}")]
    Lane {
        /// The pool's error code (`ELEMENT_NOT_FOUND`, `POOL_UNAVAILABLE`, ...).
        code: String,
        /// The pool's message, with its reason when it gave one.
        message: String,
    },
    /// The live stream ended before what `watch` was asked to wait for
    /// (`--count` turns, a `--until-decision` turn) arrived.
    #[error("watch stream ended {0}")]
    StreamEnded(String),
    /// A local file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: String,
        /// The underlying failure.
        source: std::io::Error,
    },
    /// Writing to stdout failed (e.g. a closed pipe).
    #[error("writing output: {0}")]
    Output(#[from] std::io::Error),
    /// A response could not be rendered (a descriptor mismatch between this
    /// binary and its own generated code: a build defect, not user input).
    #[error("rendering output: {0}")]
    Render(String),
}

impl CliError {
    /// The process exit code this error ends the invocation with.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => EXIT_USAGE,
            _ => EXIT_FAILURE,
        }
    }

    /// A usage error, built from anything printable.
    pub fn usage(message: impl fmt::Display) -> Self {
        CliError::Usage(message.to_string())
    }
}

impl From<tonic::Status> for CliError {
    fn from(status: tonic::Status) -> Self {
        CliError::Rpc(status)
    }
}

/// The canonical upper-case name of a gRPC status code, as the gRPC spec and
/// every other gRPC tool spell it (`PERMISSION_DENIED`, `UNAVAILABLE`, ...).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Joins an error and its `source()` chain with `: `, skipping links that
/// only repeat the previous one, so transport failures read as one line
/// ("transport error: tcp connect error: Connection refused (os error 111)").
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        let text = e.to_string();
        if !text.is_empty() && parts.last().is_none_or(|last| !last.contains(&text)) {
            parts.push(text);
        }
        current = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_errors_print_the_code_name_and_message() {
        let err = CliError::from(tonic::Status::permission_denied(
            "token is not valid for tenant 7",
        ));
        assert_eq!(
            err.to_string(),
            "PERMISSION_DENIED: token is not valid for tenant 7"
        );
        assert_eq!(err.exit_code(), EXIT_FAILURE);
    }

    #[test]
    fn usage_errors_exit_with_two() {
        let err = CliError::usage("instance_id: not a UUID: \"x\"");
        assert_eq!(err.exit_code(), EXIT_USAGE);
        assert_eq!(err.to_string(), "instance_id: not a UUID: \"x\"");
    }

    #[test]
    fn unreachable_names_the_endpoint() {
        let err = CliError::Unreachable {
            endpoint: "http://127.0.0.1:1".into(),
            detail: "connection refused".into(),
        };
        assert_eq!(
            err.to_string(),
            "cannot reach control at http://127.0.0.1:1: connection refused"
        );
        assert_eq!(err.exit_code(), EXIT_FAILURE);
    }

    #[test]
    fn error_chain_joins_sources() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let err = Outer(std::io::Error::other("inner cause"));
        assert_eq!(error_chain(&err), "outer: inner cause");
    }
}
