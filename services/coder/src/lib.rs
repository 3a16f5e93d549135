//! genesis-coder: the reference coder — the work directory, the governed
//! tools a coding model may call in it, the client of control's
//! `CodingTaskService` ([`control`]) and the agentic loop that runs one
//! coding task ([`mod@run`]); the `genesis-coder` binary is a thin shell over
//! [`run::run`] and [`run::dry_run`].
//!
//! A coder executes a *coding task*: it checks the task's repository out
//! into a work directory ([`checkout()`]), lets a model act on it through a
//! small tool set ([`Tools`]: `read_file`, `list_files`, `search`,
//! `apply_diff`, `run_command`), and hands back the resulting patch
//! ([`Checkout::patch`]) to control. The model's tool arguments are untrusted input —
//! a tenant's model may be adversarial — so every tool validates strictly,
//! refuses with a precise error carrying a stable catalogue code
//! ([`genesis_core::ErrorCode`]), and changes nothing when it refuses.
//!
//! This crate must never:
//! - touch anything outside its work directory, or anything inside `.git`;
//! - follow a symlink out of the tree;
//! - run a program that is not on the allowlist (by exact bare name), or run
//!   anything through a shell;
//! - keep a child process (or its process group) alive past its timeout;
//! - log or report the coder token, a provider key or a password in a URL.
//!
//! The allowlisted build tools (`cargo`, `make`, `python3`, ...) run the
//! project's own code by design (build scripts, Makefiles, tests): what they
//! do is bounded by the container the coder runs in, not by this crate.

pub mod checkout;
pub mod config;
pub mod control;
pub mod error;
mod process;
pub mod run;
pub mod tools;
pub mod workspace;

pub use checkout::{Checkout, checkout, checkout_with_timeout, start_empty};
pub use config::CoderConfig;
pub use control::{ControlClient, ControlError, call_attempt_to_pb};
pub use error::{CoderError, ToolError};
pub use run::{DryRun, Limits, Llm, Outcome, RunConfig, RunError, dry_run, run};
pub use tools::Tools;
pub use workspace::Workspace;
