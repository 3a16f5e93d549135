//! Logging setup for the bin: `text` or `json` tracing output filtered by
//! `RUST_LOG` (default `info`). Must never be called from library code paths
//! that tests drive: installing a global subscriber twice fails.

use tracing_subscriber::EnvFilter;

/// Install the global tracing subscriber in the configured format.
pub fn init(format: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = if format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
