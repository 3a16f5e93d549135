//! genesis-net: how the Genesis services cross a network safely. It owns
//! the TLS server side (certificate and key files re-read when they change,
//! optional client-certificate verification, the TLS accept loop tonic and
//! axum serve from), the TLS client side (the system roots plus an extra CA
//! file, a client identity for mutual TLS), and the one place every NATS
//! connection's options are built (credentials, TLS, extra CA).
//!
//! This crate must never log or put in an error a password, a private key
//! or a URL's credentials, and never accept a half-given setting (a
//! certificate without its key, a user without a password): each is a
//! configuration error naming the setting. Every rustls configuration here
//! names its crypto provider (aws-lc-rs): the dependency graph enables two,
//! so a process default cannot be relied on.

pub mod client;
pub mod nats;
pub mod pem;
pub mod server;

use std::path::PathBuf;
use std::sync::Arc;

pub use client::{ClientIdentity, ClientTls, is_tls_failure};
pub use nats::{NatsArgs, NatsError};
pub use server::{ALPN_GRPC, ALPN_HTTP, ServerTls, ServerTlsArgs, TlsConn, TlsListener};

/// Why a TLS setting cannot be used. Each names the setting (its
/// environment variable or flag) and, for a file, its path; none carries
/// the file's content.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A setting that needs a partner was given alone, or two settings
    /// contradict each other.
    #[error("{0}")]
    Config(String),
    /// A file could not be read.
    #[error("{setting} {}: cannot read it: {source}", path.display())]
    Read {
        setting: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file was read but does not hold what the setting needs.
    #[error("{setting} {}: {reason}", path.display())]
    Content {
        setting: &'static str,
        path: PathBuf,
        reason: String,
    },
    /// rustls refused the assembled configuration.
    #[error("TLS configuration: {0}")]
    Rustls(String),
}

/// Make aws-lc-rs the process's default rustls provider, unless one is
/// set. A bin calls it first thing: libraries that build their rustls
/// configuration from the process default (sqlx's `sslmode=verify-ca`)
/// would otherwise panic, as the dependency graph enables two providers.
/// Idempotent.
pub fn install_default_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing the race to another installer is fine: a provider is set.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

/// The crypto provider of every rustls configuration this crate builds.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A file named by a setting: the setting is what an error names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingPath {
    /// The environment variable or flag that gave the path.
    pub setting: &'static str,
    /// The file.
    pub path: PathBuf,
}

impl SettingPath {
    /// `path`, as given by `setting`.
    pub fn new(setting: &'static str, path: impl Into<PathBuf>) -> Self {
        SettingPath {
            setting,
            path: path.into(),
        }
    }
}
