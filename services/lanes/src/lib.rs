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
//! itself: callers pass the tenant, the flag provider and the Windows hold
//! table in.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod coders;
pub mod error;
pub mod registry;
pub mod windows;

pub use error::LanesError;

/// Installs aws-lc-rs as the process-wide rustls crypto provider if none is
/// installed yet. The dependency graph enables both rustls providers, in which
/// case rustls refuses to guess and the first TLS-capable client (kube,
/// reqwest) would panic; call this before building a `kube::Client` yourself.
/// The lane constructors here call it. Idempotent.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing the race to another installer is fine: a provider is set.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}
