//! Logging and telemetry setup for the bin: a tracing subscriber (text or
//! JSON per `GENESIS_LOG_FORMAT`, filtered by `RUST_LOG`).
//!
//! This module must never log configuration values that are secrets.

use tracing_subscriber::EnvFilter;

/// Install the global subscriber. Idempotent: a second call is a no-op.
pub fn init(log_format: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = if log_format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
