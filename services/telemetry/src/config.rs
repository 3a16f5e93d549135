//! The telemetry configuration: the log format the bin was given, and the
//! standard `OTEL_*` variables read once, in one place, into a plain struct.
//!
//! Owns the parsing and validation of `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_METRIC_EXPORT_INTERVAL`. It must never
//! touch global state: building a configuration has no side effect, so tests
//! construct one from a map instead of mutating the process environment, and
//! a bad value is refused here, before anything is installed.

use std::str::FromStr;
use std::time::Duration;

use crate::TelemetryError;

/// Standard variable: the OTLP collector base URL. Unset or empty: no OTLP
/// export (Prometheus `/metrics` and the logs stay the surface).
pub const OTLP_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// Standard variable: `grpc` (default) or `http/protobuf`.
pub const OTLP_PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// Standard variable: overrides the bin's own `service.name`.
pub const SERVICE_NAME_ENV: &str = "OTEL_SERVICE_NAME";
/// Standard variable: extra resource attributes, `key1=value1,key2=value2`.
pub const RESOURCE_ATTRIBUTES_ENV: &str = "OTEL_RESOURCE_ATTRIBUTES";
/// Standard variable: milliseconds between metric exports (default 60000).
pub const METRIC_EXPORT_INTERVAL_ENV: &str = "OTEL_METRIC_EXPORT_INTERVAL";

/// The accepted values of [`OTLP_PROTOCOL_ENV`], as the error names them.
pub const ACCEPTED_PROTOCOLS: &str = "grpc, http/protobuf";

/// The standard default of [`METRIC_EXPORT_INTERVAL_ENV`].
pub const DEFAULT_METRIC_EXPORT_INTERVAL: Duration = Duration::from_secs(60);

/// How log lines are written to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

impl FromStr for LogFormat {
    type Err = TelemetryError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(TelemetryError::InvalidLogFormat(other.to_owned())),
        }
    }
}

/// The OTLP transport, as `OTEL_EXPORTER_OTLP_PROTOCOL` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (plaintext; the collector is usually in-cluster on 4317).
    #[default]
    Grpc,
    /// OTLP/HTTP with protobuf bodies (`/v1/traces`, `/v1/metrics`, usually 4318).
    HttpProtobuf,
}

impl FromStr for OtlpProtocol {
    type Err = TelemetryError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "grpc" => Ok(OtlpProtocol::Grpc),
            "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
            other => Err(TelemetryError::InvalidProtocol(other.to_owned())),
        }
    }
}

/// Where and how spans and metrics are exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// Collector base URL (`http://` or `https://`). For `http/protobuf` the
    /// signal paths `/v1/traces` and `/v1/metrics` are appended to it.
    pub endpoint: String,
    /// The transport.
    pub protocol: OtlpProtocol,
    /// Period of the metric reader.
    pub metric_export_interval: Duration,
}

impl OtlpConfig {
    /// The URL spans are sent to: the base endpoint for gRPC, the base plus
    /// `/v1/traces` for OTLP/HTTP (as the OTLP exporter specification
    /// derives a signal URL from `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn traces_url(&self) -> String {
        self.signal_url("v1/traces")
    }

    /// The URL metrics are sent to (see [`OtlpConfig::traces_url`]).
    pub fn metrics_url(&self) -> String {
        self.signal_url("v1/metrics")
    }

    fn signal_url(&self, path: &str) -> String {
        match self.protocol {
            OtlpProtocol::Grpc => self.endpoint.clone(),
            OtlpProtocol::HttpProtobuf => {
                format!("{}/{path}", self.endpoint.trim_end_matches('/'))
            }
        }
    }
}

/// Everything [`crate::init`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The `service.name` resource attribute of every exported span and metric.
    pub service_name: String,
    /// Further resource attributes from `OTEL_RESOURCE_ATTRIBUTES`.
    pub resource_attributes: Vec<(String, String)>,
    /// Log line format.
    pub log_format: LogFormat,
    /// `None`: no OTLP export at all.
    pub otlp: Option<OtlpConfig>,
}

impl TelemetryConfig {
    /// Read the `OTEL_*` variables of the process environment.
    /// `default_service_name` is the bin's own name (`genesis-agent-pod`, …).
    pub fn from_env(
        default_service_name: &str,
        log_format: LogFormat,
    ) -> Result<Self, TelemetryError> {
        Self::from_lookup(default_service_name, log_format, |key| {
            std::env::var(key).ok()
        })
    }

    /// As [`TelemetryConfig::from_env`], reading variables through `lookup`
    /// so the rules are testable without touching the process environment.
    /// An empty value counts as unset, as the OpenTelemetry specification
    /// says.
    pub fn from_lookup(
        default_service_name: &str,
        log_format: LogFormat,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, TelemetryError> {
        let get = |key: &str| lookup(key).filter(|v| !v.trim().is_empty());

        let resource_attributes = get(RESOURCE_ATTRIBUTES_ENV)
            .map(|raw| parse_resource_attributes(&raw))
            .unwrap_or_default();
        // OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES,
        // which wins over the bin's own name.
        let service_name = get(SERVICE_NAME_ENV)
            .map(|s| s.trim().to_owned())
            .or_else(|| {
                resource_attributes
                    .iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v.clone())
            })
            .unwrap_or_else(|| default_service_name.to_owned());

        let otlp = match get(OTLP_ENDPOINT_ENV) {
            None => None,
            Some(endpoint) => {
                let protocol = match get(OTLP_PROTOCOL_ENV) {
                    None => OtlpProtocol::default(),
                    Some(raw) => raw.parse()?,
                };
                let endpoint = validate_endpoint(endpoint.trim(), protocol)?;
                let metric_export_interval = match get(METRIC_EXPORT_INTERVAL_ENV) {
                    None => DEFAULT_METRIC_EXPORT_INTERVAL,
                    Some(raw) => parse_export_interval(&raw)?,
                };
                Some(OtlpConfig {
                    endpoint,
                    protocol,
                    metric_export_interval,
                })
            }
        };

        Ok(TelemetryConfig {
            service_name,
            resource_attributes,
            log_format,
            otlp,
        })
    }
}

/// `key1=value1,key2=value2` → pairs, as the OpenTelemetry SDK's own
/// environment resource detector reads it: entries without `=` are skipped,
/// keys and values are trimmed.
pub fn parse_resource_attributes(raw: &str) -> Vec<(String, String)> {
    raw.split_terminator(',')
        .filter_map(|entry| entry.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// The endpoint must be an absolute `http://` or `https://` URL with a host.
/// gRPC export is built without TLS, so an `https://` gRPC endpoint would
/// fail every export; it is refused at startup instead.
fn validate_endpoint(raw: &str, protocol: OtlpProtocol) -> Result<String, TelemetryError> {
    let bad = |reason: &str| TelemetryError::InvalidEndpoint {
        // The error is printed at startup: never with a password.
        value: crate::config_file::redact_url(raw),
        reason: reason.to_owned(),
    };
    let uri: http::Uri = raw
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    let scheme = uri
        .scheme_str()
        .ok_or_else(|| bad("it has no scheme (expected http:// or https://)"))?;
    if scheme != "http" && scheme != "https" {
        return Err(bad("the scheme must be http or https"));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("it has no host"));
    }
    if scheme == "https" && protocol == OtlpProtocol::Grpc {
        return Err(bad(
            "gRPC export is plaintext in this build; use an http:// collector address \
             or OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf for HTTPS",
        ));
    }
    Ok(raw.to_owned())
}

/// Whole milliseconds, greater than zero (the specification's unit).
fn parse_export_interval(raw: &str) -> Result<Duration, TelemetryError> {
    match raw.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(TelemetryError::InvalidExportInterval(raw.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<TelemetryConfig, TelemetryError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        TelemetryConfig::from_lookup("genesis-test", LogFormat::Text, |k| map.get(k).cloned())
    }

    #[test]
    fn endpoint_unset_or_empty_means_no_export() {
        let c = config(&[]).unwrap();
        assert_eq!(c.otlp, None);
        assert_eq!(c.service_name, "genesis-test");
        let c = config(&[(OTLP_ENDPOINT_ENV, "  "), (OTLP_PROTOCOL_ENV, "bogus")]).unwrap();
        assert_eq!(
            c.otlp, None,
            "an empty endpoint is unset; the protocol is then unused"
        );
    }

    #[test]
    fn defaults_are_grpc_and_sixty_seconds() {
        let c = config(&[(OTLP_ENDPOINT_ENV, "http://collector:4317")]).unwrap();
        let otlp = c.otlp.unwrap();
        assert_eq!(otlp.protocol, OtlpProtocol::Grpc);
        assert_eq!(otlp.metric_export_interval, Duration::from_secs(60));
        assert_eq!(otlp.traces_url(), "http://collector:4317");
        assert_eq!(otlp.metrics_url(), "http://collector:4317");
    }

    #[test]
    fn http_protobuf_appends_the_signal_paths() {
        let c = config(&[
            (OTLP_ENDPOINT_ENV, "https://collector:4318/"),
            (OTLP_PROTOCOL_ENV, "http/protobuf"),
            (METRIC_EXPORT_INTERVAL_ENV, "250"),
        ])
        .unwrap();
        let otlp = c.otlp.unwrap();
        assert_eq!(otlp.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(otlp.traces_url(), "https://collector:4318/v1/traces");
        assert_eq!(otlp.metrics_url(), "https://collector:4318/v1/metrics");
        assert_eq!(otlp.metric_export_interval, Duration::from_millis(250));
    }

    #[test]
    fn invalid_protocol_names_the_variable_and_the_accepted_values() {
        for bad in ["http/json", "HTTP", "tcp"] {
            let err = config(&[
                (OTLP_ENDPOINT_ENV, "http://collector:4317"),
                (OTLP_PROTOCOL_ENV, bad),
            ])
            .unwrap_err();
            assert!(matches!(&err, TelemetryError::InvalidProtocol(v) if v == bad));
            let msg = err.to_string();
            assert!(msg.contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "{msg}");
            assert!(msg.contains("grpc, http/protobuf"), "{msg}");
            assert!(msg.contains(bad), "{msg}");
        }
    }

    #[test]
    fn unusable_endpoints_are_refused_with_the_reason() {
        for (endpoint, protocol, reason) in [
            ("collector:4317", "grpc", "scheme"),
            ("ftp://collector", "grpc", "http or https"),
            ("http://", "grpc", ""),
            ("not a url", "http/protobuf", ""),
            ("https://collector:4317", "grpc", "plaintext"),
        ] {
            let err = config(&[(OTLP_ENDPOINT_ENV, endpoint), (OTLP_PROTOCOL_ENV, protocol)])
                .unwrap_err();
            let msg = err.to_string();
            assert!(
                matches!(&err, TelemetryError::InvalidEndpoint { value, .. } if value == endpoint),
                "{endpoint}: {msg}"
            );
            assert!(msg.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{msg}");
            assert!(msg.contains(reason), "{endpoint}: {msg}");
        }
    }

    #[test]
    fn an_unusable_endpoints_password_is_not_in_the_error() {
        let err = config(&[
            (OTLP_ENDPOINT_ENV, "ftp://otel:hunter2@collector:4317"),
            (OTLP_PROTOCOL_ENV, "grpc"),
        ])
        .unwrap_err();
        let msg = err.to_string();
        assert!(!msg.contains("hunter2"), "{msg}");
        assert!(msg.contains("ftp://otel:***@collector:4317"), "{msg}");
    }

    #[test]
    fn invalid_export_interval_is_refused() {
        for bad in ["0", "-5", "60s", "1.5"] {
            let err = config(&[
                (OTLP_ENDPOINT_ENV, "http://collector:4317"),
                (METRIC_EXPORT_INTERVAL_ENV, bad),
            ])
            .unwrap_err();
            assert!(matches!(&err, TelemetryError::InvalidExportInterval(v) if v == bad));
            assert!(err.to_string().contains("OTEL_METRIC_EXPORT_INTERVAL"));
        }
    }

    #[test]
    fn service_name_precedence() {
        let c = config(&[(RESOURCE_ATTRIBUTES_ENV, "service.name=from-attrs,team=core")]).unwrap();
        assert_eq!(c.service_name, "from-attrs");
        let c = config(&[
            (RESOURCE_ATTRIBUTES_ENV, "service.name=from-attrs"),
            (SERVICE_NAME_ENV, "from-env"),
        ])
        .unwrap();
        assert_eq!(c.service_name, "from-env");
    }

    #[test]
    fn resource_attributes_parse_like_the_sdk() {
        assert_eq!(
            parse_resource_attributes(" deployment.environment = prod ,broken,k8s.cluster=c1,=x,"),
            vec![
                ("deployment.environment".to_owned(), "prod".to_owned()),
                ("k8s.cluster".to_owned(), "c1".to_owned()),
            ]
        );
    }

    #[test]
    fn log_format_accepts_text_and_json_only() {
        assert_eq!("text".parse::<LogFormat>().unwrap(), LogFormat::Text);
        assert_eq!("json".parse::<LogFormat>().unwrap(), LogFormat::Json);
        let err = "yaml".parse::<LogFormat>().unwrap_err();
        assert!(err.to_string().contains("\"yaml\""));
    }
}
