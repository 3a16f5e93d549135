//! OTLP export from the real binaries: with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at a loopback OTLP/HTTP receiver, a fleet's first tick reaches it
//! as spans of `genesis-agent-pod` (`tick`, with the tenant), of
//! `genesis-supervisor` (`ClaimTick`) and of `genesis-control` (`rpc`), and
//! the pod's `subagent.llm_call.attempts` counter arrives as a metric; the
//! services flush on SIGTERM. An unusable `OTEL_EXPORTER_OTLP_PROTOCOL` stops
//! a bin at startup with an error naming the variable.
//!
//! The receiver checks the protobuf bodies for the UTF-8 strings they must
//! carry (names, attribute values), which is enough to tell one service's
//! export from another's without decoding.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is the test failing

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::ensure;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use genesis_e2e::{Fleet, FleetOptions, binaries_missing, binary, bounded};

const T: Duration = Duration::from_secs(60);

#[derive(Clone, Default)]
struct Bodies {
    traces: Arc<Mutex<Vec<Vec<u8>>>>,
    metrics: Arc<Mutex<Vec<Vec<u8>>>>,
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Whether one request body carries every one of `needles`.
fn one_body_has(bodies: &Mutex<Vec<Vec<u8>>>, needles: &[&str]) -> bool {
    bodies
        .lock()
        .unwrap()
        .iter()
        .any(|b| needles.iter().all(|n| contains(b, n)))
}

async fn receiver() -> anyhow::Result<(String, Bodies)> {
    let bodies = Bodies::default();
    let app = Router::new()
        .route(
            "/v1/traces",
            post(|State(b): State<Bodies>, body: Bytes| async move {
                b.traces.lock().unwrap().push(body.to_vec());
            }),
        )
        .route(
            "/v1/metrics",
            post(|State(b): State<Bodies>, body: Bytes| async move {
                b.metrics.lock().unwrap().push(body.to_vec());
            }),
        )
        .with_state(bodies.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://{addr}"), bodies))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_exports_its_spans_and_the_pod_its_llm_counters() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(150), async {
        let (endpoint, bodies) = receiver().await?;
        let mut opts = FleetOptions::new("otlp-export", 1);
        opts.extra_env = vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "http/protobuf".into()),
            ("OTEL_METRIC_EXPORT_INTERVAL".into(), "500".into()),
        ];
        let mut fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("acme").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;
        fleet.wait_decision(&soa, 0, "Initialized", T).await?;

        // The periodic reader exports the pod's counter while it runs.
        let metrics = bodies.metrics.clone();
        genesis_e2e::wait_for("the pod's LLM attempt counter", T, || {
            let metrics = metrics.clone();
            async move {
                Ok(one_body_has(
                    &metrics,
                    &["genesis-agent-pod", "subagent.llm_call.attempts"],
                )
                .then_some(()))
            }
        })
        .await?;

        // SIGTERM flushes the span batches still buffered.
        for name in ["agent-pod-0", "supervisor", "control"] {
            let status = fleet.terminate(name, Duration::from_secs(20)).await?;
            ensure!(status.success(), "{name} exited with {status} on SIGTERM");
        }
        ensure!(
            one_body_has(
                &bodies.traces,
                &["genesis-agent-pod", "tick", &tenant, &soa]
            ),
            "no `tick` span of genesis-agent-pod with the tenant and instance"
        );
        ensure!(
            one_body_has(
                &bodies.traces,
                &["genesis-supervisor", "ClaimTick", &tenant]
            ),
            "no ClaimTick span of genesis-supervisor with the tenant"
        );
        ensure!(
            one_body_has(
                &bodies.traces,
                &["genesis-control", "/genesis.v1.TenantService/CreateTenant"]
            ),
            "no CreateTenant rpc span of genesis-control"
        );
        println!(
            "otlp: {} trace and {} metric exports received",
            bodies.traces.lock().unwrap().len(),
            bodies.metrics.lock().unwrap().len()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_unusable_protocol_stops_the_bin_at_startup() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    for bin in ["genesis-agent-pod", "genesis-supervisor", "genesis-control"] {
        let out = tokio::process::Command::new(binary(bin)?)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
            .env("GENESIS_HTTP_ADDR", "127.0.0.1:0")
            .env("GENESIS_GRPC_ADDR", "127.0.0.1:0")
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(20), out).await??;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(!out.status.success(), "{bin} started with a bad protocol");
        ensure!(
            stderr.contains(
                "OTEL_EXPORTER_OTLP_PROTOCOL must be one of grpc, http/protobuf, not \"http/json\""
            ),
            "{bin} stderr: {stderr}"
        );
    }
    Ok(())
}
