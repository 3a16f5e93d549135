//! The guard's `shutdown` flushes what is still buffered: with a metric
//! interval of an hour and the span batch not yet due, nothing reaches the
//! receiver until `shutdown`, and then the span and the counter do. This is
//! what the bins rely on when they stop on SIGTERM.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is the test failing

mod common;

use std::time::Duration;

use genesis_telemetry::{LogFormat, OtlpConfig, OtlpProtocol, TelemetryConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_exports_the_last_batch() {
    let (addr, received) = common::start_http_receiver().await;
    let config = TelemetryConfig {
        service_name: "genesis-flush-test".into(),
        resource_attributes: Vec::new(),
        log_format: LogFormat::Text,
        otlp: Some(OtlpConfig {
            endpoint: format!("http://{addr}"),
            protocol: OtlpProtocol::HttpProtobuf,
            metric_export_interval: Duration::from_secs(3600),
        }),
    };
    let guard = genesis_telemetry::init(config).unwrap();

    tracing::info_span!("rpc", method = "StartInstance", tenant = "t-1").in_scope(|| {
        tracing::info!("handled");
    });
    opentelemetry::global::meter("genesis-llm")
        .u64_counter("subagent.llm_call.fallback_advance")
        .build()
        .add(1, &[]);

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(received.spans().is_empty(), "the batch is not due yet");
    assert!(
        received.sum_points().is_empty(),
        "the metric interval is an hour"
    );

    guard.shutdown().await;

    assert!(
        received
            .spans()
            .iter()
            .any(|s| s.name == "rpc" && s.service_name.as_deref() == Some("genesis-flush-test")),
        "{:?}",
        received.spans()
    );
    assert!(
        received
            .sum_points()
            .iter()
            .any(|p| p.metric == "subagent.llm_call.fallback_advance" && p.value == 1),
        "{:?}",
        received.sum_points()
    );
}
