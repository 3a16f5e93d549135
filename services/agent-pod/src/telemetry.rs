//! Logging and telemetry setup for the bin: a tracing subscriber (text or
//! JSON per `GENESIS_LOG_FORMAT`, filtered by `RUST_LOG`), and the decision
//! about OTLP export.
//!
//! OTLP export: the workspace pins opentelemetry / opentelemetry_sdk 0.32
//! (genesis-llm's counters record through the 0.32 global meter), while
//! opentelemetry-otlp 0.33 is built on opentelemetry 0.33.1 and
//! opentelemetry_sdk 0.33.1 (see Cargo.lock). An exporter of that set cannot
//! be installed as the 0.32 global provider, and no tracing→OpenTelemetry
//! bridge is in the dependency set, so this pod does not export OTLP: when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set it says so once at startup, and
//! Prometheus `/metrics` plus structured logs remain the telemetry surface.
//!
//! This module must never log configuration values that are secrets.

use tracing_subscriber::EnvFilter;

/// The environment variable that asks for OTLP export.
pub const OTLP_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// Install the global subscriber. Idempotent: a second call is a no-op.
pub fn init(log_format: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = if log_format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    if std::env::var_os(OTLP_ENDPOINT_ENV).is_some() {
        tracing::warn!(
            "{OTLP_ENDPOINT_ENV} is set but OTLP export is not available in this build \
             (opentelemetry-otlp 0.33 does not match the pinned opentelemetry 0.32); \
             use /metrics and the logs"
        );
    }
}
