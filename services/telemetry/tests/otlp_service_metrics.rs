//! A service's own metrics, listed once as families, leave the process over
//! OTLP through `export_metrics`: counters (plain and labelled) and gauges
//! arrive under the bin's service name with the values the service holds
//! when the reader collects, not when it registered; a family with no sample
//! yet exports no point.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is the test failing

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use genesis_telemetry::metrics::Family;
use genesis_telemetry::prometheus::Kind;
use genesis_telemetry::{LogFormat, OtlpConfig, OtlpProtocol, TelemetryConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exported_families_carry_the_values_read_at_collection() {
    let (addr, received) = common::start_http_receiver().await;
    let config = TelemetryConfig {
        service_name: "genesis-families-test".into(),
        resource_attributes: Vec::new(),
        log_format: LogFormat::Text,
        otlp: Some(OtlpConfig {
            endpoint: format!("http://{addr}"),
            protocol: OtlpProtocol::HttpProtobuf,
            // Only the shutdown collects: the values are the final ones.
            metric_export_interval: Duration::from_secs(3600),
        }),
    };
    let guard = genesis_telemetry::init(config).unwrap();

    let ticks = Arc::new(AtomicU64::new(0));
    let read = ticks.clone();
    genesis_telemetry::export_metrics("genesis-families-test", move || {
        vec![
            Family::single(
                "genesis.test.ticks",
                "Ticks.",
                Kind::Counter,
                read.load(Ordering::Relaxed),
            ),
            Family::labelled(
                "genesis.test.claims",
                "Claims by outcome.",
                Kind::Counter,
                [(vec![("outcome", "bundle".to_owned())], 2)],
            ),
            Family::labelled("genesis.test.unused", "Nothing yet.", Kind::Counter, []),
            Family::decimal("genesis.test.lag_seconds", "Lag.", Kind::Gauge, 3, 1.25),
        ]
    });
    // Registered at 0; the export must carry what the counter holds later.
    ticks.store(7, Ordering::Relaxed);

    guard.shutdown().await;

    let sums = received.sum_points();
    let of = |metric: &str| -> Vec<_> {
        sums.iter()
            .filter(|p| {
                p.metric == metric && p.service_name.as_deref() == Some("genesis-families-test")
            })
            .collect()
    };
    let ticks_points = of("genesis.test.ticks");
    assert_eq!(ticks_points.len(), 1, "{sums:?}");
    assert_eq!(ticks_points[0].value, 7, "{sums:?}");
    let claims = of("genesis.test.claims");
    assert_eq!(claims.len(), 1, "{sums:?}");
    assert_eq!(claims[0].value, 2);
    assert_eq!(
        claims[0].attributes,
        [("outcome".to_owned(), "bundle".to_owned())]
    );
    assert!(of("genesis.test.unused").is_empty(), "{sums:?}");
    let gauges = received.gauge_points();
    assert!(
        gauges.iter().any(|g| {
            g.service_name.as_deref() == Some("genesis-families-test")
                && g.metric == "genesis.test.lag_seconds"
                && g.attributes.is_empty()
                && g.value == 1.25
        }),
        "{gauges:?}"
    );
}
