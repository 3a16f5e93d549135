//! Logging, telemetry and the config-file layer ([`config_file`]) of the
//! Genesis bins (`genesis-control`, `genesis-supervisor`,
//! `genesis-agent-pod`): one place that installs the
//! global `tracing` subscriber (text or JSON lines filtered by `RUST_LOG`,
//! default `info`) and, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, OTLP export
//! of spans (every `tracing` span, bridged by tracing-opentelemetry, batched)
//! and of metrics (a periodic reader behind the global meter provider, so
//! genesis-llm's `subagent.llm_call.*` counters leave the process). Each
//! service's own counters and gauges are listed once as [`metrics::Family`]
//! values: Prometheus `/metrics` (served by each bin regardless of OTLP)
//! writes them with this crate's [`prometheus::Exposition`], the one
//! formatter, and [`export_metrics`] exports the same
//! families over OTLP as observable instruments.
//!
//! Versions: the workspace uses opentelemetry / opentelemetry_sdk 0.33 so the
//! providers built here are the ones opentelemetry-otlp 0.33 and
//! tracing-opentelemetry 0.34 expect, and the global meter genesis-llm
//! records through is the one exported.
//!
//! Exports run as tasks on the bin's Tokio runtime (the SDK's async-runtime
//! batch processor and periodic reader), so [`init`] must be called inside
//! that runtime, and [`TelemetryGuard::shutdown`] must run on the graceful
//! shutdown path so the last batch is flushed.
//!
//! [`init`] must never be called from library code paths that tests drive
//! (the subscriber and the meter provider are process-global; only
//! [`export_metrics`], which registers on whatever provider is global, may
//! be called there). This crate must never fall
//! back silently when an `OTEL_*` value is unusable, and never log
//! configuration values that may be secrets (headers, tokens).

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod config;
pub mod config_file;
pub mod metrics;
pub mod prometheus;
pub mod shutdown;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::metrics::periodic_reader_with_async_runtime::PeriodicReader;
use opentelemetry_sdk::runtime::Tokio;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

pub use config::{
    ACCEPTED_PROTOCOLS, DEFAULT_METRIC_EXPORT_INTERVAL, LogFormat, METRIC_EXPORT_INTERVAL_ENV,
    OTLP_ENDPOINT_ENV, OTLP_PROTOCOL_ENV, OtlpConfig, OtlpProtocol, RESOURCE_ATTRIBUTES_ENV,
    SERVICE_NAME_ENV, TelemetryConfig, parse_resource_attributes,
};

/// Why telemetry could not be set up. Every variant is a startup error: the
/// bin prints it and exits non-zero.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` is not one this build exports with.
    #[error("OTEL_EXPORTER_OTLP_PROTOCOL must be one of {ACCEPTED_PROTOCOLS}, not {0:?}")]
    InvalidProtocol(String),
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` cannot be exported to.
    #[error("OTEL_EXPORTER_OTLP_ENDPOINT {value:?} is unusable: {reason}")]
    InvalidEndpoint {
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `OTEL_METRIC_EXPORT_INTERVAL` is not a positive number of milliseconds.
    #[error(
        "OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds greater than 0, not {0:?}"
    )]
    InvalidExportInterval(String),
    /// The log format is neither `text` nor `json`.
    #[error("GENESIS_LOG_FORMAT must be text or json, not {0:?}")]
    InvalidLogFormat(String),
    /// The OTLP exporter refused its configuration.
    #[error("building the OTLP {signal} exporter failed: {source}")]
    Exporter {
        /// `span` or `metric`.
        signal: &'static str,
        /// The exporter's own error.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// A global subscriber was installed before.
    #[error("a global tracing subscriber is already installed: {0}")]
    SubscriberInstalled(#[source] tracing_subscriber::util::TryInitError),
}

/// Keeps the OTLP providers of the process; [`TelemetryGuard::shutdown`]
/// flushes them. Without OTLP export it holds nothing.
#[derive(Debug, Default)]
#[must_use = "call shutdown() on the graceful shutdown path, or the last batch is lost"]
pub struct TelemetryGuard {
    tracer_provider: Option<SdkTracerProvider>,
    meter_provider: Option<SdkMeterProvider>,
}

impl TelemetryGuard {
    /// Whether spans and metrics are exported over OTLP.
    pub fn exporting(&self) -> bool {
        self.tracer_provider.is_some()
    }

    /// Export what is still buffered (the open span batch, a last metric
    /// collection) and shut the providers down. The SDK's shutdown blocks
    /// until the runtime's export tasks answer, so it runs on a blocking
    /// thread to leave the runtime's workers free to do that work. Failures
    /// are logged, not returned: the process is stopping either way.
    pub async fn shutdown(self) {
        let TelemetryGuard {
            tracer_provider,
            meter_provider,
        } = self;
        if tracer_provider.is_none() && meter_provider.is_none() {
            return;
        }
        let outcome = tokio::task::spawn_blocking(move || {
            let traces = tracer_provider.map(|p| p.shutdown());
            let metrics = meter_provider.map(|p| p.shutdown());
            (traces, metrics)
        })
        .await;
        match outcome {
            Ok((traces, metrics)) => {
                if let Some(Err(e)) = traces {
                    tracing::warn!(error = %e, "flushing the OTLP span exporter failed");
                }
                if let Some(Err(e)) = metrics {
                    tracing::warn!(error = %e, "flushing the OTLP metric exporter failed");
                }
            }
            Err(e) => tracing::warn!(error = %e, "OTLP shutdown task failed"),
        }
    }
}

/// Export the families `source` lists over OTLP, under the instrumentation
/// scope `scope` (the bin's name), as observable instruments of the global
/// meter provider that [`init`] installed, read at every collection: the
/// values are the ones `/metrics` renders from the same `source`, with no
/// second set of counters to keep in step.
///
/// Called where a service builds its metrics, after [`init`]. Without OTLP
/// export (or before [`init`], as in tests that start a service in-process)
/// the global provider is OpenTelemetry's no-op one, which drops the
/// callbacks: nothing is retained and nothing is read. Call it once per
/// source: a second call for the same scope would register the instruments
/// again.
pub fn export_metrics<F>(scope: &'static str, source: F)
where
    F: Fn() -> Vec<metrics::Family> + Send + Sync + 'static,
{
    metrics::observe(&opentelemetry::global::meter(scope), source);
}

/// Crates whose own spans and events are never exported: they are the
/// exporter's transport, and exporting them would make every export produce
/// more telemetry to export.
const TRANSPORT_TARGETS: [&str; 8] = [
    "opentelemetry",
    "opentelemetry_sdk",
    "opentelemetry_otlp",
    "hyper",
    "hyper_util",
    "h2",
    "tonic",
    "reqwest",
];

/// Install the global subscriber and, when `config.otlp` is set, the OTLP
/// span and metric pipelines (the meter provider becomes the global one).
/// Must be called once, inside the Tokio runtime.
pub fn init(config: TelemetryConfig) -> Result<TelemetryGuard, TelemetryError> {
    let (tracer_provider, meter_provider) = match &config.otlp {
        None => (None, None),
        Some(otlp) => {
            let resource = resource(&config);
            let tracer_provider = tracer_provider(otlp, resource.clone())?;
            let meter_provider = meter_provider(otlp, resource)?;
            (Some(tracer_provider), Some(meter_provider))
        }
    };

    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Every line is written through the URL masking: a password in a URL
    // never reaches the logs, whoever formatted it (a dependency's error
    // message included).
    let fmt = match config.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(RedactingStdout)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(RedactingStdout)
            .boxed(),
    };
    let otel = tracer_provider.as_ref().map(|provider| {
        let transport = TRANSPORT_TARGETS.iter().fold(
            Targets::new().with_default(LevelFilter::TRACE),
            |t, target| t.with_target(*target, LevelFilter::OFF),
        );
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("genesis"))
            .with_filter(transport)
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init()
        .map_err(TelemetryError::SubscriberInstalled)?;

    if let Some(provider) = &tracer_provider {
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    if let Some(provider) = &meter_provider {
        opentelemetry::global::set_meter_provider(provider.clone());
    }
    match &config.otlp {
        Some(otlp) => tracing::info!(
            service = %config.service_name,
            endpoint = %config_file::redact_url(&otlp.endpoint),
            protocol = ?otlp.protocol,
            metric_export_interval_ms = otlp.metric_export_interval.as_millis() as u64,
            "exporting spans and metrics over OTLP"
        ),
        None => tracing::debug!(
            "{OTLP_ENDPOINT_ENV} is unset: no OTLP export; /metrics and the logs are the telemetry"
        ),
    }

    Ok(TelemetryGuard {
        tracer_provider,
        meter_provider,
    })
}

/// Standard output, each line's URLs masked ([`config_file::redact_urls_in`]).
#[derive(Debug, Clone, Copy)]
struct RedactingStdout;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactingStdout {
    type Writer = RedactingWriter<std::io::Stdout>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter(std::io::stdout())
    }
}

/// A writer that masks the URL secrets of what it is given before passing
/// it on. The fmt layer writes each event as one buffer, so a URL is never
/// split across two writes.
#[derive(Debug)]
pub struct RedactingWriter<W>(pub W);

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::str::from_utf8(buf) {
            Ok(text) => self
                .0
                .write_all(config_file::redact_urls_in(text).as_bytes())?,
            // Not text (the fmt layer only writes UTF-8): masked as text
            // read leniently, so nothing passes unmasked.
            Err(_) => self
                .0
                .write_all(config_file::redact_urls_in(&String::from_utf8_lossy(buf)).as_bytes())?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `service.name`, the SDK's `telemetry.sdk.*` attributes and the operator's
/// `OTEL_RESOURCE_ATTRIBUTES`. Built from the configuration only (not the
/// process environment), so what tests configure is what is exported.
fn resource(config: &TelemetryConfig) -> Resource {
    Resource::builder_empty()
        .with_detector(Box::new(
            opentelemetry_sdk::resource::TelemetryResourceDetector,
        ))
        .with_attributes(
            config
                .resource_attributes
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .with_service_name(config.service_name.clone())
        .build()
}

fn tracer_provider(
    otlp: &OtlpConfig,
    resource: Resource,
) -> Result<SdkTracerProvider, TelemetryError> {
    let built = match otlp.protocol {
        OtlpProtocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(otlp.traces_url())
            .build(),
        OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(otlp.traces_url())
            .build(),
    };
    let exporter = built.map_err(|source| TelemetryError::Exporter {
        signal: "span",
        source,
    })?;
    Ok(SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter, Tokio).build())
        .with_resource(resource)
        .build())
}

fn meter_provider(
    otlp: &OtlpConfig,
    resource: Resource,
) -> Result<SdkMeterProvider, TelemetryError> {
    let built = match otlp.protocol {
        OtlpProtocol::Grpc => opentelemetry_otlp::MetricExporter::builder()
            .with_tonic()
            .with_endpoint(otlp.metrics_url())
            .build(),
        OtlpProtocol::HttpProtobuf => opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(otlp.metrics_url())
            .build(),
    };
    let exporter = built.map_err(|source| TelemetryError::Exporter {
        signal: "metric",
        source,
    })?;
    let reader = PeriodicReader::builder(exporter, Tokio)
        .with_interval(otlp.metric_export_interval)
        .build();
    Ok(SdkMeterProvider::builder()
        .with_reader(reader)
        .with_resource(resource)
        .build())
}

/// The Genesis bins' global allocator, for [`global_allocator!`].
pub type Allocator = tikv_jemallocator::Jemalloc;

/// Declares the bins' global allocator; call it once at the top of a bin's
/// `main.rs`, never in a library (a library's allocator would bind every
/// test binary too).
///
/// jemalloc rather than glibc malloc: under load the services allocate and
/// free many small buffers per tick (protobuf and JSON values, sqlx rows),
/// and glibc's free-list consolidation was a measured share of their CPU.
/// mimalloc saved as much CPU but kept about 11 MiB more resident per
/// process; jemalloc keeps about 2 MiB more.
#[macro_export]
macro_rules! global_allocator {
    () => {
        #[global_allocator]
        static GLOBAL: $crate::Allocator = $crate::Allocator {};
    };
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = RedactingWriter<Captured>;

        fn make_writer(&'a self) -> Self::Writer {
            RedactingWriter(self.clone())
        }
    }

    #[test]
    fn the_writer_masks_url_passwords_and_passes_the_rest() {
        let out = Captured::default();
        let mut w = RedactingWriter(out.clone());
        w.write_all(b"connect nats://genesis:hunter2@127.0.0.1:1 failed\n")
            .unwrap();
        w.write_all(&[0xff, b' ', b'o', b'k']).unwrap();
        let text = String::from_utf8_lossy(&out.0.lock().unwrap()).into_owned();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(
            text.contains("nats://genesis:***@127.0.0.1:1 failed"),
            "{text}"
        );
        assert!(text.ends_with(" ok"), "{text}");
    }

    /// A URL logged as a field, in a message or inside a dependency's error
    /// text leaves no password in text or JSON lines.
    #[test]
    fn logged_urls_lose_their_passwords_in_text_and_json_lines() {
        for json in [false, true] {
            let out = Captured::default();
            let builder = tracing_subscriber::fmt().with_writer(out.clone());
            let dispatch: tracing::Dispatch = if json {
                builder.json().finish().into()
            } else {
                builder.finish().into()
            };
            tracing::dispatcher::with_default(&dispatch, || {
                let url = "nats://genesis:hunter2@127.0.0.1:4222";
                tracing::warn!(url, "NATS connect failed; retrying");
                tracing::warn!("connect {url}: refused");
                let e = "error sending request for url (http://am:hunter2@am:9093/api/v2/alerts)";
                tracing::warn!(error = %e, "alertmanager unreachable");
                tracing::warn!(token = "nats://s3cr3t@nats:4222", "token auth");
            });
            let text = String::from_utf8_lossy(&out.0.lock().unwrap()).into_owned();
            assert_eq!(text.lines().count(), 4, "{text}");
            assert!(!text.contains("hunter2"), "{text}");
            assert!(!text.contains("s3cr3t"), "{text}");
            assert!(text.contains("genesis:***@127.0.0.1:4222"), "{text}");
        }
    }
}
