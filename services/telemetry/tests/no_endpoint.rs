//! Without `OTEL_EXPORTER_OTLP_ENDPOINT` nothing is exported: `init` installs
//! the log subscriber only and succeeds (Prometheus `/metrics` stays the
//! metric surface), a second `init` is refused because the subscriber is
//! process-global, and a bad `OTEL_EXPORTER_OTLP_PROTOCOL` is refused before
//! anything is installed.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is the test failing

use genesis_telemetry::{
    LogFormat, OTLP_ENDPOINT_ENV, OTLP_PROTOCOL_ENV, TelemetryConfig, TelemetryError,
};

#[tokio::test]
async fn no_endpoint_installs_logging_only_and_a_bad_protocol_installs_nothing() {
    // A bad protocol fails while reading the configuration: nothing installed.
    let err = TelemetryConfig::from_lookup("genesis-test", LogFormat::Text, |key| match key {
        OTLP_ENDPOINT_ENV => Some("http://127.0.0.1:4317".into()),
        OTLP_PROTOCOL_ENV => Some("http/json".into()),
        _ => None,
    })
    .unwrap_err();
    assert!(matches!(err, TelemetryError::InvalidProtocol(_)));
    assert_eq!(
        err.to_string(),
        "OTEL_EXPORTER_OTLP_PROTOCOL must be one of grpc, http/protobuf, not \"http/json\""
    );
    assert!(
        !tracing::dispatcher::has_been_set(),
        "a refused configuration installs no subscriber"
    );

    let config = TelemetryConfig::from_lookup("genesis-test", LogFormat::Text, |_| None).unwrap();
    assert_eq!(config.otlp, None);
    let guard = genesis_telemetry::init(config.clone()).unwrap();
    assert!(!guard.exporting(), "no endpoint, no exporter");
    assert!(tracing::dispatcher::has_been_set());

    let again = genesis_telemetry::init(config).unwrap_err();
    assert!(
        matches!(again, TelemetryError::SubscriberInstalled(_)),
        "{again}"
    );
    guard.shutdown().await;
}
