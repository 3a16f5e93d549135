//! The coder's error vocabulary. Owns [`CoderError`] (checking out a
//! repository, configuration) and [`ToolError`] (a refused or failed tool
//! call), and which catalogue code ([`ErrorCode`]) each carries, so the loop
//! can feed a stable code back to the model. Must never put a secret, an
//! environment value or an unbounded blob (git's stderr is trimmed and
//! capped) into a message.

use genesis_core::error_code::{Coded, ErrorCode};
use thiserror::Error;

/// The most characters of a child's error text carried in a message.
pub(crate) const MAX_ERROR_TEXT: usize = 2048;

/// Trim a child's error output and cap it, so a message stays readable and
/// bounded whatever the child printed.
pub(crate) fn trim_error_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.chars().count() <= MAX_ERROR_TEXT {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(MAX_ERROR_TEXT).collect();
    out.push_str(" […]");
    out
}

/// Every way checking out a repository or validating the configuration can
/// fail. Each variant names what was wrong so the caller can act on it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CoderError {
    /// A checkout input (`repository`, `branch`, `into`) is malformed or of
    /// a kind the coder refuses.
    #[error("invalid argument {field}: {reason}")]
    InvalidArgument {
        /// The offending field.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A [`crate::CoderConfig`] value is nonsense (a zero cap, a bad
    /// allowlist entry, ...).
    #[error("invalid config value for {key}: {reason}")]
    InvalidConfig {
        /// The configuration field.
        key: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A git command ran and failed; `stderr` is its trimmed, capped output.
    #[error("git {step} failed: {stderr}")]
    Git {
        /// Which step (`clone`, `rev-parse`, `diff`, ...).
        step: &'static str,
        /// git's error text, trimmed and capped.
        stderr: String,
    },
    /// A git command did not finish in time and was killed.
    #[error("git {step} timed out after {secs} s and was killed")]
    TimedOut {
        /// Which step.
        step: &'static str,
        /// The timeout that expired.
        secs: u64,
    },
    /// Spawning git or touching the file system failed.
    #[error("{what}: {reason}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The operating system's reason.
        reason: String,
    },
}

impl Coded for CoderError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidArgument { .. } => ErrorCode::InvalidArgument,
            Self::InvalidConfig { .. } => ErrorCode::InvalidConfig,
            Self::Git { .. } => ErrorCode::FailedPrecondition,
            Self::TimedOut { .. } | Self::Io { .. } => ErrorCode::Unavailable,
        }
    }

    fn public_message(&self) -> String {
        self.to_string()
    }
}

/// Every way a tool call can be refused or fail. A refusal changes nothing
/// in the work directory; the message is meant for the model, so it says
/// precisely what to fix.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ToolError {
    /// No tool of that name exists.
    #[error("unknown tool {name:?}; the tools are: {known}")]
    UnknownTool {
        /// The requested name, verbatim.
        name: String,
        /// The available tool names, comma-separated.
        known: String,
    },
    /// The arguments do not match the tool's schema (unknown field, wrong
    /// type, missing field, out of range).
    #[error("invalid arguments: {field}: {reason}")]
    InvalidArguments {
        /// The JSON field at fault (`argv[0]`, `path`, ...).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument is larger than its cap.
    #[error("{field} is too large: {size} bytes, the limit is {limit}")]
    TooLarge {
        /// The field at fault.
        field: String,
        /// Its size.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// A path would leave the work directory or enter `.git`.
    #[error("path {path:?} refused: {reason}")]
    PathRefused {
        /// The path as given.
        path: String,
        /// Why (absolute, escapes the root, a symlink out, `.git`, ...).
        reason: String,
    },
    /// A command is not allowed (not on the allowlist, a git subcommand
    /// that writes, an option that writes outside the tree).
    #[error("command refused: {reason}")]
    CommandRefused {
        /// Why.
        reason: String,
    },
    /// The path does not exist in the work directory.
    #[error("{path:?} does not exist")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// The target exists but the tool does not apply to it (a binary file,
    /// a directory given to `read_file`, ...).
    #[error("{path:?}: {reason}")]
    NotApplicable {
        /// The path as given.
        path: String,
        /// Why the tool does not apply.
        reason: String,
    },
    /// `git apply --check` refused the diff; nothing was changed.
    /// `forbidden_path` is set when git refused it for a path outside the
    /// tree, into `.git` or beyond a symlink.
    #[error("the diff was not applied (nothing changed): {git_error}")]
    PatchRejected {
        /// git's error text, trimmed and capped.
        git_error: String,
        /// Whether the refusal is about a forbidden path.
        forbidden_path: bool,
    },
    /// The tool's own machinery failed (I/O, spawning a program).
    #[error("{what}: {reason}")]
    Failed {
        /// What was being done.
        what: String,
        /// The reason.
        reason: String,
    },
}

impl ToolError {
    /// Shorthand for an argument error naming its field.
    pub(crate) fn arg(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidArguments {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for a refused path.
    pub(crate) fn path(path: &str, reason: impl Into<String>) -> Self {
        Self::PathRefused {
            path: path.to_owned(),
            reason: reason.into(),
        }
    }

    /// Shorthand for an internal failure.
    pub(crate) fn failed(what: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Self::Failed {
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    /// The error as the JSON the loop feeds back to the model:
    /// `{"error": {"code": "...", "message": "..."}}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "error": { "code": self.code().as_str(), "message": self.public_message() }
        })
    }
}

impl Coded for ToolError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::UnknownTool { .. } => ErrorCode::ToolNotAuthorized,
            Self::InvalidArguments { .. } => ErrorCode::InvalidArguments,
            Self::TooLarge { .. } => ErrorCode::PayloadTooLarge,
            Self::PathRefused { .. } | Self::CommandRefused { .. } => ErrorCode::NotPermitted,
            Self::PatchRejected {
                forbidden_path: true,
                ..
            } => ErrorCode::NotPermitted,
            Self::NotFound { .. } => ErrorCode::NotFound,
            Self::NotApplicable { .. } => ErrorCode::NotApplicable,
            Self::PatchRejected { .. } => ErrorCode::FailedPrecondition,
            Self::Failed { .. } => ErrorCode::HandlerFailed,
        }
    }

    fn public_message(&self) -> String {
        self.to_string()
    }
}
