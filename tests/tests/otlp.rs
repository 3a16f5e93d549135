//! OTLP export from the real binaries: with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at a loopback OTLP/HTTP receiver, a fleet's first tick reaches it
//! as spans of `genesis-agent-pod` (`tick`, with the tenant), of
//! `genesis-supervisor` (`ClaimTick`) and of `genesis-control` (`rpc`); the
//! pod's `subagent.llm_call.attempts` counter and, as the tenant's preset
//! fails over from an OpenAI endpoint that refuses every call to an Anthropic
//! stand-in, `subagent.llm_call.fallback_advance` arrive as metrics, and so do
//! each service's own counters (the pod's ticks, the supervisor's claims and
//! completes, control's RPCs) with the values the services hold; the
//! services flush on SIGTERM. An unusable `OTEL_EXPORTER_OTLP_PROTOCOL`
//! stops a bin at startup with an error naming the variable.
//!
//! The receiver checks the trace bodies for the UTF-8 strings they must
//! carry (names, attribute values), which is enough to tell one service's
//! export from another's without decoding; metric values are read with a
//! minimal walk of the OTLP protobuf (only the fields a sum or gauge point
//! needs), so this crate needs no generated OTLP types.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is the test failing

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::ensure;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use genesis_e2e::{Fleet, FleetOptions, binaries_missing, binary, bounded};
use genesis_proto::v1 as pb;

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

/// One field of a protobuf message, as the wire format carries it.
enum Field<'a> {
    Varint,
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

fn varint(buf: &mut &[u8]) -> anyhow::Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf
            .split_first()
            .ok_or_else(|| anyhow::anyhow!("truncated varint"))?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    anyhow::bail!("varint longer than 64 bits")
}

/// The fields of one message, in order.
fn fields(mut buf: &[u8]) -> anyhow::Result<Vec<(u64, Field<'_>)>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let field = match key & 7 {
            0 => {
                varint(&mut buf)?;
                Field::Varint
            }
            1 => {
                ensure!(buf.len() >= 8, "truncated fixed64");
                let (b, rest) = buf.split_at(8);
                buf = rest;
                Field::Fixed64(u64::from_le_bytes(b.try_into()?))
            }
            2 => {
                let len = usize::try_from(varint(&mut buf)?)?;
                ensure!(buf.len() >= len, "truncated length-delimited field");
                let (b, rest) = buf.split_at(len);
                buf = rest;
                Field::Bytes(b)
            }
            5 => {
                ensure!(buf.len() >= 4, "truncated fixed32");
                buf = &buf[4..];
                Field::Fixed32
            }
            other => anyhow::bail!("unsupported wire type {other}"),
        };
        out.push((key >> 3, field));
    }
    Ok(out)
}

/// The length-delimited fields numbered `n`.
fn sub(msg: &[u8], n: u64) -> anyhow::Result<Vec<&[u8]>> {
    Ok(fields(msg)?
        .into_iter()
        .filter_map(|(f, v)| match v {
            Field::Bytes(b) if f == n => Some(b),
            _ => None,
        })
        .collect())
}

fn string(msg: &[u8], n: u64) -> anyhow::Result<String> {
    Ok(sub(msg, n)?
        .last()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default())
}

/// `KeyValue` list (field `n` of `msg`) with string values, as `key=value`.
fn attributes(msg: &[u8], n: u64) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for kv in sub(msg, n)? {
        let key = string(kv, 1)?;
        let value = match sub(kv, 2)?.last() {
            Some(any) => string(any, 1)?,
            None => String::new(),
        };
        out.push(format!("{key}={value}"));
    }
    out.sort();
    Ok(out)
}

/// One exported sum or gauge point.
#[derive(Debug, Clone, PartialEq)]
struct Point {
    service: String,
    metric: String,
    attributes: Vec<String>,
    value: f64,
}

/// Every sum and gauge point of every `ExportMetricsServiceRequest` body, in
/// export order: with cumulative temporality the last point of a series is
/// its latest value.
fn points(bodies: &Mutex<Vec<Vec<u8>>>) -> anyhow::Result<Vec<Point>> {
    let mut out = Vec::new();
    for body in bodies.lock().unwrap().iter() {
        for rm in sub(body, 1)? {
            let service = match sub(rm, 1)?.last() {
                Some(resource) => attributes(resource, 1)?
                    .into_iter()
                    .find_map(|a| a.strip_prefix("service.name=").map(str::to_owned))
                    .unwrap_or_default(),
                None => String::new(),
            };
            for sm in sub(rm, 2)? {
                for metric in sub(sm, 2)? {
                    let name = string(metric, 1)?;
                    // Metric.gauge = 5, Metric.sum = 7; both hold
                    // NumberDataPoint as field 1.
                    let data: Vec<&[u8]> =
                        sub(metric, 5)?.into_iter().chain(sub(metric, 7)?).collect();
                    for d in data {
                        for p in sub(d, 1)? {
                            let mut value = None;
                            for (f, v) in fields(p)? {
                                match (f, v) {
                                    (4, Field::Fixed64(bits)) => value = Some(f64::from_bits(bits)),
                                    (6, Field::Fixed64(bits)) => value = Some(bits as i64 as f64),
                                    _ => {}
                                }
                            }
                            if let Some(value) = value {
                                out.push(Point {
                                    service: service.clone(),
                                    metric: name.clone(),
                                    attributes: attributes(p, 7)?,
                                    value,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The latest exported value of `metric` from `service` with exactly
/// `attrs` (`key=value`, any order), if one arrived.
fn latest(points: &[Point], service: &str, metric: &str, attrs: &[&str]) -> Option<f64> {
    let mut want: Vec<String> = attrs.iter().map(|a| (*a).to_owned()).collect();
    want.sort();
    points
        .iter()
        .rev()
        .find(|p| p.service == service && p.metric == metric && p.attributes == want)
        .map(|p| p.value)
}

/// An OpenAI-compatible endpoint that answers every request 401, counting
/// them: a provider the fallback chain must move past.
async fn refusing_provider() -> anyhow::Result<(String, Arc<AtomicUsize>)> {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = Router::new().fallback(move || {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::Relaxed);
            (
                StatusCode::UNAUTHORIZED,
                r#"{"error":{"message":"invalid api key","type":"invalid_request_error"}}"#,
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://{addr}/v1"), hits))
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
async fn every_service_exports_its_spans_its_own_counters_and_the_pod_its_llm_counters()
-> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(150), async {
        let (endpoint, bodies) = receiver().await?;
        let (refusing_openai, refused) = refusing_provider().await?;
        let anthropic = genesis_llm_standin::StandIn::start("sk-ant-standin").await?;
        let mut opts = FleetOptions::new("otlp-export", 1);
        // The tenant's preset is gpt-4o, then claude-sonnet-4-5. The pod's
        // OpenAI endpoint refuses every call with 401 (the key is a
        // placeholder), so each call fails over to the Anthropic stand-in.
        // The SOA is bootstrapped paused, so its opener runs on that preset.
        opts.provider = "openai".into();
        opts.extra_env = vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "http/protobuf".into()),
            ("OTEL_METRIC_EXPORT_INTERVAL".into(), "500".into()),
            ("OPENAI_BASE_URL".into(), refusing_openai),
            ("OPENAI_API_KEY".into(), "placeholder-key".into()),
            ("ANTHROPIC_BASE_URL".into(), anthropic.base_url()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-standin".into()),
            (
                "GENESIS_STANDING_AGENTS_IDLE_BY_DEFAULT".into(),
                "false".into(),
            ),
        ];
        let mut fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("acme").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;
        let admin = fleet.admin().await?;
        let preset = admin
            .llm()
            .upsert_preset(pb::UpsertPresetRequest {
                tenant_id: tenant.clone(),
                preset: Some(pb::Preset {
                    name: "openai-then-anthropic".into(),
                    primary: Some(pb::PresetCouple {
                        model: "gpt-4o".into(),
                        provider: "openai".into(),
                        backend: String::new(),
                        credential_names: vec!["OPENAI_API_KEY".into()],
                    }),
                    fallback_chain: vec![pb::PresetCouple {
                        model: "claude-sonnet-4-5".into(),
                        provider: "anthropic".into(),
                        backend: String::new(),
                        credential_names: vec!["ANTHROPIC_API_KEY".into()],
                    }],
                    ..Default::default()
                }),
            })
            .await?
            .into_inner();
        admin
            .llm()
            .attach_preset(pb::AttachPresetRequest {
                tenant_id: tenant.clone(),
                site_id: "Agent:Default".into(),
                preset_id: preset.id,
            })
            .await?;
        admin
            .agents()
            .start_agent(pb::StartAgentRequest {
                tenant_id: tenant.clone(),
                instance_id: soa.clone(),
            })
            .await?;
        fleet.wait_decision(&soa, 0, "Initialized", T).await?;
        ensure!(
            anthropic.request_count() >= 1,
            "the chain never reached the Anthropic stand-in"
        );

        // The periodic reader exports the pod's counters while it runs.
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

        // SIGTERM flushes the span batches still buffered and collects the
        // metrics one last time. The pod stops first, so the supervisor's
        // completes are final when it stops in turn.
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

        let points = points(&bodies.metrics)?;
        let names = |service: &str| -> Vec<&str> {
            let mut n: Vec<&str> = points
                .iter()
                .filter(|p| p.service == service)
                .map(|p| p.metric.as_str())
                .collect();
            n.sort_unstable();
            n.dedup();
            n
        };
        // The chain advanced past the refusing couple.
        ensure!(
            refused.load(Ordering::Relaxed) > 0,
            "the pod never called the OpenAI endpoint"
        );
        let advanced: Vec<&Point> = points
            .iter()
            .filter(|p| {
                p.service == "genesis-agent-pod"
                    && p.metric == "subagent.llm_call.fallback_advance"
                    && p.attributes.iter().any(|a| a == "kind=provider")
                    && p.value >= 1.0
            })
            .collect();
        ensure!(
            !advanced.is_empty(),
            "no provider fallback_advance from genesis-agent-pod; its LLM points: {:?}",
            points
                .iter()
                .filter(|p| p.metric.starts_with("subagent."))
                .collect::<Vec<_>>()
        );
        // The pod's ticks are the ones the supervisor completed for it.
        let ticks = latest(&points, "genesis-agent-pod", "genesis.pod.ticks_run", &[]);
        let completes = latest(
            &points,
            "genesis-supervisor",
            "genesis.supervisor.completes",
            &[],
        );
        ensure!(
            ticks.is_some_and(|n| n >= 1.0) && ticks == completes,
            "pod ticks_run {ticks:?} vs supervisor completes {completes:?}; pod exported {:?}, supervisor {:?}",
            names("genesis-agent-pod"),
            names("genesis-supervisor")
        );
        let bundles = latest(
            &points,
            "genesis-supervisor",
            "genesis.supervisor.claims",
            &["outcome=bundle"],
        );
        ensure!(
            bundles.is_some_and(|n| n >= 1.0),
            "no bundle claims from genesis-supervisor: {bundles:?}"
        );
        // One CreateTenant call was made, and control counted exactly it.
        let created = latest(
            &points,
            "genesis-control",
            "genesis.rpc",
            &["method=/genesis.v1.TenantService/CreateTenant", "code=Ok"],
        );
        ensure!(
            created == Some(1.0),
            "control's CreateTenant rpc count is {created:?}; control exported {:?}",
            names("genesis-control")
        );
        println!(
            "otlp: {} trace and {} metric exports received; pod ticks {ticks:?}, bundles {bundles:?}",
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
            .env("GENESIS_DEFAULT_PROVIDER", "scripted")
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
