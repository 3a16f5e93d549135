//! OTLP/gRPC export (the default protocol) on loopback: a span and a counter
//! reach a collector speaking the OTLP trace and metrics gRPC services, under
//! the `service.name` `OTEL_SERVICE_NAME` gives. One test per file: the
//! subscriber and the meter provider are process-global.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is the test failing

mod common;

use std::time::Duration;

use genesis_telemetry::{LogFormat, OTLP_ENDPOINT_ENV, SERVICE_NAME_ENV, TelemetryConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_metrics_reach_an_otlp_grpc_receiver() {
    let (addr, received) = common::start_grpc_receiver().await;
    let endpoint = format!("http://{addr}");
    let config =
        TelemetryConfig::from_lookup("genesis-agent-pod", LogFormat::Text, |key| match key {
            OTLP_ENDPOINT_ENV => Some(endpoint.clone()),
            SERVICE_NAME_ENV => Some("pod-eu-1".into()),
            _ => None,
        })
        .unwrap();
    let guard = genesis_telemetry::init(config).unwrap();

    tracing::info_span!("tick", instance_id = "i-9").in_scope(|| tracing::info!("work"));
    opentelemetry::global::meter("genesis-llm")
        .u64_counter("subagent.llm_call.all_providers_exhausted")
        .build()
        .add(2, &[]);
    guard.shutdown().await;

    received
        .wait_for(Duration::from_secs(5), "the flushed span and metric", |r| {
            !r.spans().is_empty() && !r.sum_points().is_empty()
        })
        .await;
    let spans = received.spans();
    assert!(
        spans.iter().any(|s| s.name == "tick"
            && s.service_name.as_deref() == Some("pod-eu-1")
            && s.attributes.contains(&("instance_id".into(), "i-9".into()))),
        "{spans:?}"
    );
    let points = received.sum_points();
    assert!(
        points
            .iter()
            .any(|p| p.metric == "subagent.llm_call.all_providers_exhausted"
                && p.value == 2
                && p.service_name.as_deref() == Some("pod-eu-1")),
        "{points:?}"
    );
}
