//! genesis-lanes: the worker lanes of the agents subsystem (spec §2.1(b), §2.2, §2.3).
//!
//! It holds three clients, each behind a clean async API that the control
//! service exposes over gRPC:
//!
//! - [`registry`] — the coordination registry of external/worker agents
//!   (coders, reviewers, monitors), kept in a NATS JetStream key-value bucket
//!   so every control replica sees one directory;
//! - [`coders`] — on-demand coders as Kubernetes Jobs, and the resolution of a
//!   coding task's (model, provider, backend) couple;
//! - [`windows`] — the Windows lane, a client of the Windows pool's HTTP API.
//!
//! This crate must never touch PostgreSQL or decide tenant feature flags
//! itself: callers pass the tenant and the flag provider in.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod error;
pub mod registry;

pub use error::LanesError;
