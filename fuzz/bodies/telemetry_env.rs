//! Body of the `telemetry_env` fuzz target, shared with genesis-telemetry's
//! `tests/fuzz_corpus.rs`: arbitrary `OTEL_*` environments through
//! `TelemetryConfig::from_lookup` (the one place every service reads them),
//! plus `parse_resource_attributes`, `OtlpProtocol` and `LogFormat` on every
//! value. Must never panic; a refusal is the typed `TelemetryError` of the
//! variable at fault, carrying the value as given.

use std::collections::HashMap;

use genesis_telemetry::{
    LogFormat, METRIC_EXPORT_INTERVAL_ENV, OTLP_ENDPOINT_ENV, OTLP_PROTOCOL_ENV, OtlpProtocol,
    RESOURCE_ATTRIBUTES_ENV, SERVICE_NAME_ENV, TelemetryConfig, TelemetryError,
    parse_resource_attributes,
};

/// The variables `from_lookup` reads, in the order `#N` names them.
pub const VARS: [&str; 5] = [
    OTLP_ENDPOINT_ENV,
    OTLP_PROTOCOL_ENV,
    SERVICE_NAME_ENV,
    RESOURCE_ATTRIBUTES_ENV,
    METRIC_EXPORT_INTERVAL_ENV,
];

/// The bin name `from_lookup` falls back to.
pub const DEFAULT_SERVICE: &str = "genesis-fuzz";

/// Split an input into an environment: one `KEY=value` per line (a later
/// line wins, as in a real environment); a key written `#N` stands for
/// `VARS[N % 5]`, so the fuzzer reaches every variable without guessing
/// the names.
pub fn environment(data: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(data)
        .split('\n')
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| {
            let key = match k.strip_prefix('#').and_then(|n| n.parse::<usize>().ok()) {
                Some(n) => VARS[n % VARS.len()].to_owned(),
                None => k.to_owned(),
            };
            (key, v.to_owned())
        })
        .collect()
}

/// Run one input. Returns the configuration or the refusal.
pub fn run(data: &[u8]) -> Result<TelemetryConfig, TelemetryError> {
    let env = environment(data);
    for value in env.values() {
        for (k, v) in parse_resource_attributes(value) {
            assert!(!k.is_empty() && k == k.trim() && v == v.trim());
        }
        match value.parse::<OtlpProtocol>() {
            Ok(p) => assert_eq!(p == OtlpProtocol::Grpc, value.trim() == "grpc", "{value:?}"),
            Err(TelemetryError::InvalidProtocol(v)) => assert_eq!(v, value.trim()),
            Err(other) => panic!("protocol refused untyped: {other:?}"),
        }
        match value.parse::<LogFormat>() {
            Ok(_) => assert!(value == "text" || value == "json", "{value:?}"),
            Err(TelemetryError::InvalidLogFormat(v)) => assert_eq!(&v, value),
            Err(other) => panic!("log format refused untyped: {other:?}"),
        }
    }
    // Blank counts as unset, as `from_lookup` documents.
    let given = |key: &str| env.get(key).filter(|v| !v.trim().is_empty());
    let result = TelemetryConfig::from_lookup(DEFAULT_SERVICE, LogFormat::Json, |key| {
        env.get(key).cloned()
    });
    match &result {
        Ok(config) => {
            assert_eq!(config.log_format, LogFormat::Json);
            if let Some(name) = given(SERVICE_NAME_ENV) {
                assert_eq!(config.service_name, name.trim());
            }
            for (k, v) in &config.resource_attributes {
                assert!(!k.is_empty() && k == k.trim() && v == v.trim());
            }
            assert_eq!(config.otlp.is_some(), given(OTLP_ENDPOINT_ENV).is_some());
            if let Some(otlp) = &config.otlp {
                let endpoint = &otlp.endpoint;
                assert!(
                    endpoint.starts_with("http://") || endpoint.starts_with("https://"),
                    "{endpoint:?}"
                );
                assert!(!otlp.metric_export_interval.is_zero());
                match otlp.protocol {
                    OtlpProtocol::Grpc => {
                        assert!(endpoint.starts_with("http://"), "plaintext gRPC only");
                        assert_eq!(&otlp.traces_url(), endpoint);
                        assert_eq!(&otlp.metrics_url(), endpoint);
                    }
                    OtlpProtocol::HttpProtobuf => {
                        assert!(otlp.traces_url().ends_with("/v1/traces"));
                        assert!(otlp.metrics_url().ends_with("/v1/metrics"));
                    }
                }
            }
        }
        // Each refusal names the value of its own variable, as given.
        Err(TelemetryError::InvalidEndpoint { value, reason }) => {
            assert_eq!(
                Some(value.as_str()),
                given(OTLP_ENDPOINT_ENV).map(|v| v.trim())
            );
            assert!(!reason.is_empty());
        }
        Err(TelemetryError::InvalidProtocol(value)) => {
            assert_eq!(
                Some(value.as_str()),
                given(OTLP_PROTOCOL_ENV).map(|v| v.trim())
            );
        }
        Err(TelemetryError::InvalidExportInterval(value)) => {
            assert_eq!(Some(value), given(METRIC_EXPORT_INTERVAL_ENV));
        }
        Err(other) => panic!("from_lookup refused untyped: {other:?}"),
    }
    result
}
