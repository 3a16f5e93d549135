//! OTLP/HTTP export end to end on loopback: `init` pointed at a receiver with
//! `http/protobuf` and a short metric interval exports a `tracing` span with
//! its fields as attributes, and a counter recorded through the global meter
//! (as genesis-llm records `subagent.llm_call.attempts`) under the
//! configured `service.name`. One test per file: the subscriber and the
//! meter provider are process-global.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is the test failing

mod common;

use std::time::Duration;

use genesis_telemetry::{
    LogFormat, METRIC_EXPORT_INTERVAL_ENV, OTLP_ENDPOINT_ENV, OTLP_PROTOCOL_ENV,
    RESOURCE_ATTRIBUTES_ENV, TelemetryConfig,
};
use opentelemetry::KeyValue;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_metrics_reach_an_otlp_http_receiver() {
    let (addr, received) = common::start_http_receiver().await;
    let endpoint = format!("http://{addr}");
    let config =
        TelemetryConfig::from_lookup("genesis-telemetry-test", LogFormat::Json, |key| match key {
            OTLP_ENDPOINT_ENV => Some(endpoint.clone()),
            OTLP_PROTOCOL_ENV => Some("http/protobuf".into()),
            METRIC_EXPORT_INTERVAL_ENV => Some("200".into()),
            RESOURCE_ATTRIBUTES_ENV => Some("deployment.environment=loopback".into()),
            _ => None,
        })
        .unwrap();
    let guard = genesis_telemetry::init(config).unwrap();
    assert!(guard.exporting());

    let tenant = "7d4f3c1e-0000-4000-8000-000000000001";
    {
        let span =
            tracing::info_span!("tick", tenant_id = %tenant, session_id = tracing::field::Empty);
        let _entered = span.enter();
        span.record("session_id", "s-1");
        tracing::info!("inside the tick");
    }
    opentelemetry::global::meter("genesis-llm")
        .u64_counter("subagent.llm_call.attempts")
        .build()
        .add(3, &[KeyValue::new("provider", "scripted")]);

    // The periodic reader exports on its own, well before shutdown.
    received
        .wait_for(Duration::from_secs(10), "a periodic metric export", |r| {
            r.sum_points()
                .iter()
                .any(|p| p.metric == "subagent.llm_call.attempts" && p.value == 3)
        })
        .await;

    guard.shutdown().await;

    let spans = received.spans();
    let tick = spans
        .iter()
        .find(|s| s.name == "tick")
        .unwrap_or_else(|| panic!("no `tick` span among {spans:?}"));
    assert_eq!(tick.service_name.as_deref(), Some("genesis-telemetry-test"));
    assert!(
        tick.attributes
            .contains(&("tenant_id".to_owned(), tenant.to_owned())),
        "{tick:?}"
    );
    assert!(
        tick.attributes
            .contains(&("session_id".to_owned(), "s-1".to_owned())),
        "a field recorded after the span opened is exported too: {tick:?}"
    );

    let points = received.sum_points();
    let attempts = points
        .iter()
        .find(|p| p.metric == "subagent.llm_call.attempts")
        .unwrap_or_else(|| panic!("no subagent.llm_call.attempts among {points:?}"));
    assert_eq!(attempts.value, 3);
    assert_eq!(
        attempts.service_name.as_deref(),
        Some("genesis-telemetry-test")
    );
    assert!(
        attempts
            .resource
            .contains(&("deployment.environment".to_owned(), "loopback".to_owned())),
        "{attempts:?}"
    );
    assert!(
        attempts
            .attributes
            .contains(&("provider".to_owned(), "scripted".to_owned())),
        "{attempts:?}"
    );
}
