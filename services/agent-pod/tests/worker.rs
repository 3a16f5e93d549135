//! The worker against the real NATS JetStream (a stream and durable consumer
//! of its own per test) and a fake AgentPod supervisor.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use common::*;
use futures::StreamExt;
use genesis_agent_pod::{PodConfig, PodDeps, PodMetrics, run_with};
use genesis_llm::{HttpProviderFactory, HttpTimeouts, ScriptedProvider};
use tokio_util::sync::CancellationToken;

const NATS_URL: &str = "nats://127.0.0.1:4222";

struct TestStream {
    js: jetstream::Context,
    stream: String,
    consumer: String,
    subject_prefix: String,
}

async fn test_stream() -> TestStream {
    test_stream_holding(0).await
}

/// A stream whose consumer delivers at most `max_ack_pending` unacked
/// messages (0: the server's default).
async fn test_stream_holding(max_ack_pending: i64) -> TestStream {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let client = async_nats::connect(NATS_URL)
        .await
        .expect("NATS is running");
    let js = jetstream::new(client);
    let name = format!("POD_TEST_{suffix}");
    let subject_prefix = format!("podtest.{suffix}");
    let s = js
        .create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![format!("{subject_prefix}.>")],
            retention: stream::RetentionPolicy::WorkQueue,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .unwrap();
    let consumer_name = format!("pods_{suffix}");
    s.create_consumer(consumer::pull::Config {
        durable_name: Some(consumer_name.clone()),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: Duration::from_secs(30),
        max_deliver: 7,
        max_ack_pending,
        ..Default::default()
    })
    .await
    .unwrap();
    TestStream {
        js,
        stream: name,
        consumer: consumer_name,
        subject_prefix,
    }
}

impl TestStream {
    /// A pod configuration bound to this stream's consumer and `fake`.
    fn pod_config(&self, fake: &FakeSupervisor) -> PodConfig {
        let mut config = PodConfig::new(NATS_URL, &fake.url(), TOKEN);
        config.stream = self.stream.clone();
        config.consumer = self.consumer.clone();
        config.http_addr = "127.0.0.1:0".parse().unwrap();
        config
    }

    /// Every settlement (ack, NAK, term) of a message the consumer
    /// delivers: each is published on the consumer's ack subject.
    async fn watch_settlements(&self) -> (async_nats::Client, async_nats::Subscriber) {
        let watcher = async_nats::connect(NATS_URL).await.unwrap();
        let settlements = watcher
            .subscribe(format!("$JS.ACK.{}.{}.>", self.stream, self.consumer))
            .await
            .unwrap();
        watcher.flush().await.unwrap();
        (watcher, settlements)
    }

    /// Every pull request sent to the consumer (its reply subject is the
    /// inbox it is answered on), seen by a watcher connection of its own.
    async fn watch_pull_requests(&self) -> (async_nats::Client, async_nats::Subscriber) {
        let watcher = async_nats::connect(NATS_URL).await.unwrap();
        let requests = watcher
            .subscribe(format!(
                "$JS.API.CONSUMER.MSG.NEXT.{}.{}",
                self.stream, self.consumer
            ))
            .await
            .unwrap();
        watcher.flush().await.unwrap();
        (watcher, requests)
    }

    /// Publish one tick message of `tenant` for a fresh instance and event.
    async fn publish_tick(&self, tenant: uuid::Uuid) {
        let body = serde_json::json!({
            "tenant_id": tenant,
            "instance_id": uuid::Uuid::new_v4(),
            "event_id": uuid::Uuid::new_v4(),
        });
        self.js
            .publish(
                format!("{}.{tenant}", self.subject_prefix),
                body.to_string().into(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }

    /// The stream's durable pull consumer.
    async fn consumer(&self) -> jetstream::consumer::PullConsumer {
        self.js
            .get_stream(&self.stream)
            .await
            .unwrap()
            .get_consumer::<consumer::pull::Config>(&self.consumer)
            .await
            .unwrap()
    }
}

fn deps(scripted: Arc<ScriptedProvider>) -> PodDeps {
    PodDeps {
        provider_factory: Arc::new(
            HttpProviderFactory::new(HttpTimeouts::default())
                .unwrap()
                .with_scripted(scripted),
        ),
        credentials: Arc::new(std::collections::HashMap::<String, String>::new()),
        metrics: Arc::new(PodMetrics::default()),
    }
}

/// Run a pod with a scripted provider of its own; cancel the token to stop it.
fn spawn_pod(
    config: PodConfig,
) -> (
    tokio::task::JoinHandle<anyhow::Result<()>>,
    CancellationToken,
) {
    let shutdown = CancellationToken::new();
    let pod = tokio::spawn(run_with(
        config,
        deps(Arc::new(ScriptedProvider::new())),
        shutdown.clone(),
    ));
    (pod, shutdown)
}

/// Cancel `shutdown` and wait for the pod to end cleanly.
async fn stop_pod(pod: tokio::task::JoinHandle<anyhow::Result<()>>, shutdown: CancellationToken) {
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), pod)
        .await
        .expect("the pod stops on shutdown")
        .unwrap()
        .unwrap();
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn lease_held_is_naked_redelivered_and_then_completed_once() {
    let ts = test_stream().await;
    let fake = start_fake().await;
    let b = bundle("AgentInitialized", "{}");
    let instance = b.instance.clone().unwrap();
    let event_id = b.event.clone().unwrap().id;
    fake.state.push_claim(lease_held());
    fake.state.push_claim(claimed(b));

    let mut config = ts.pod_config(&fake);
    config.lease_held_nak_ms = 200;
    config.concurrency = 2;
    let scripted = Arc::new(ScriptedProvider::new());
    let deps = deps(scripted.clone());
    let metrics = deps.metrics.clone();
    let shutdown = CancellationToken::new();
    let pod = tokio::spawn(run_with(config, deps, shutdown.clone()));

    let body = serde_json::json!({
        "tenant_id": instance.tenant_id,
        "instance_id": instance.id,
        "event_id": event_id,
    });
    ts.js
        .publish(
            format!("{}.{}", ts.subject_prefix, instance.tenant_id),
            body.to_string().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();

    let state = fake.state.clone();
    wait_for("the tick to complete", || !state.completes().is_empty()).await;
    // Give a wrong redelivery a chance to show up before asserting "once".
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        fake.state.claims.load(Ordering::SeqCst),
        2,
        "claimed, NAKed, redelivered, claimed"
    );
    let completes = fake.state.completes();
    assert_eq!(completes.len(), 1);
    assert_eq!(completes[0].event_id, event_id);
    assert_eq!(scripted.calls(), 2);
    assert_eq!(metrics.snapshot().ticks_run, 1);

    let mut c = ts.consumer().await;
    let info = c.info().await.unwrap();
    assert_eq!(info.num_pending, 0, "nothing left to deliver");
    assert_eq!(info.num_ack_pending, 0, "the message was acked");
    assert_eq!(info.delivered.stream_sequence, 1);
    assert!(info.delivered.consumer_sequence >= 2, "delivered twice");

    stop_pod(pod, shutdown).await;
    ts.js.delete_stream(&ts.stream).await.unwrap();
}

#[tokio::test]
async fn the_pod_waits_for_the_consumer_and_stops_cleanly_on_shutdown() {
    let fake = start_fake().await;
    let mut config = PodConfig::new(NATS_URL, &fake.url(), TOKEN);
    config.stream = format!("POD_ABSENT_{}", uuid::Uuid::new_v4().simple());
    config.http_addr = "127.0.0.1:0".parse().unwrap();
    let (pod, shutdown) = spawn_pod(config);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!pod.is_finished(), "keeps retrying until the stream exists");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), pod)
        .await
        .expect("stops promptly")
        .unwrap()
        .unwrap();
    assert_eq!(fake.state.claims.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_config_without_a_token_is_refused_before_anything_starts() {
    let mut config = PodConfig::new(NATS_URL, "http://127.0.0.1:1", "x");
    config.agent_token = None;
    let err = run_with(
        config,
        deps(Arc::new(ScriptedProvider::new())),
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("GENESIS_AGENT_TOKEN"), "{err}");
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn http_probes_report_health_readiness_and_metrics() {
    let fake = start_fake().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut config = PodConfig::new(NATS_URL, &fake.url(), TOKEN);
    config.stream = format!("POD_ABSENT_{}", uuid::Uuid::new_v4().simple());
    config.http_addr = addr;
    let (pod, shutdown) = spawn_pod(config);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let ready = loop {
        if let Ok(s) = tokio::net::TcpStream::connect(addr).await {
            drop(s);
            let r = http_get(addr, "/readyz").await;
            if r.starts_with("HTTP/1.0 200") || tokio::time::Instant::now() > deadline {
                break r;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(ready.starts_with("HTTP/1.0 200"), "{ready}");
    assert!(ready.contains("nats: up") && ready.contains("supervisor: up"));
    assert!(http_get(addr, "/healthz").await.starts_with("HTTP/1.0 200"));
    let metrics = http_get(addr, "/metrics").await;
    assert!(
        metrics.contains("genesis_pod_ticks_run_total 0"),
        "{metrics}"
    );
    assert!(metrics.contains("genesis_pod_short_circuits_total"));
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), pod)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn readyz_fails_when_the_supervisor_is_unreachable() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut config = PodConfig::new(NATS_URL, &format!("http://{dead_addr}"), TOKEN);
    config.stream = format!("POD_ABSENT_{}", uuid::Uuid::new_v4().simple());
    config.http_addr = addr;
    let (pod, shutdown) = spawn_pod(config);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = http_get(addr, "/readyz").await;
    assert!(r.starts_with("HTTP/1.0 503"), "{r}");
    assert!(r.contains("supervisor: down"), "{r}");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), pod)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// Messages pending that the consumer may not deliver yet (its ack-pending
/// limit is reached) while another fetch waits for them: the server answers
/// the pod's fetches at once with nothing. The pod must not fetch again at
/// once, or it spins a core for as long as that lasts.
#[tokio::test]
async fn held_back_messages_do_not_make_the_pod_fetch_in_a_spin() {
    let ts = test_stream_holding(1).await;
    let fake = start_fake().await;
    for n in 0..3 {
        ts.js
            .publish(format!("{}.t{n}", ts.subject_prefix), "{}".into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let consumer = ts.consumer().await;
    // One message taken and held unacked: the limit of one is reached and
    // the other two stay pending.
    let mut held = consumer.fetch().max_messages(1).messages().await.unwrap();
    let _held = held.next().await.unwrap().unwrap();
    // Another fetch waits for 16 messages: more than are pending.
    let _waiting = consumer
        .batch()
        .max_messages(16)
        .expires(Duration::from_secs(30))
        .messages()
        .await
        .unwrap();

    // Every fetch is a request on this subject.
    let (_watcher, mut requests) = ts.watch_pull_requests().await;

    let mut config = ts.pod_config(&fake);
    config.concurrency = 16;
    let (pod, shutdown) = spawn_pod(config);
    // Skip the pod's start-up and the run's first, short pauses, then count
    // its fetches over two seconds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::ZERO, requests.next()).await {}
    let until = tokio::time::Instant::now() + Duration::from_secs(2);
    let mut fetches = 0;
    while let Ok(Some(_)) = tokio::time::timeout_at(until, requests.next()).await {
        fetches += 1;
    }
    // By then the pause is a second: two fetches. Pauses capped at 50 ms
    // sent 38 in two seconds; a spin sent 4,522 in one.
    assert!(fetches >= 1, "the pod kept fetching");
    assert!(fetches <= 3, "{fetches} fetches in two seconds");
    assert_eq!(
        fake.state.claims.load(Ordering::SeqCst),
        0,
        "nothing delivered"
    );

    stop_pod(pod, shutdown).await;
    ts.js.delete_stream(&ts.stream).await.unwrap();
}

/// A message whose tenant already holds its share of the pod goes back to
/// the stream unclaimed, and each time it comes back it waits twice as long
/// as before, up to 16 times the configured delay: a tenant's surplus does
/// not keep the broker and the pod cycling it every 50 ms.
#[tokio::test]
async fn a_busy_tenants_surplus_comes_back_later_with_each_redelivery() {
    let ts = test_stream().await;
    let fake = start_fake().await;
    // The first message's claim holds the tenant's one slot while the
    // delays are watched, then answers (nothing due) so the pod can stop.
    fake.state.claim_delay_ms.store(6_000, Ordering::SeqCst);

    let (_watcher, mut acks) = ts.watch_settlements().await;
    let mut config = ts.pod_config(&fake);
    config.concurrency = 4;
    config.tenant_concurrency = 1;
    config.tenant_busy_nak_ms = 50;
    let (pod, shutdown) = spawn_pod(config);

    let tenant = uuid::Uuid::new_v4();
    for _ in 0..2 {
        ts.publish_tick(tenant).await;
    }

    // The delays the pod asked for, in order, over four seconds.
    let mut delays_ms = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(4);
    while let Ok(Some(ack)) = tokio::time::timeout_at(until, acks.next()).await {
        let body = String::from_utf8_lossy(&ack.payload).into_owned();
        let ns: u64 = body
            .strip_prefix("-NAK {\"delay\":")
            .and_then(|r| r.strip_suffix('}'))
            .unwrap_or_else(|| panic!("not a NAK with a delay: {body:?}"))
            .parse()
            .unwrap();
        delays_ms.push(ns / 1_000_000);
    }
    assert!(delays_ms.len() >= 6, "too few redeliveries: {delays_ms:?}");
    assert_eq!(delays_ms[..5], [50, 100, 200, 400, 800], "{delays_ms:?}");
    assert!(delays_ms[5..].iter().all(|&d| d == 800), "{delays_ms:?}");
    // Only the first message was ever claimed.
    assert_eq!(fake.state.claims.load(Ordering::SeqCst), 1);

    stop_pod(pod, shutdown).await;
    ts.js.delete_stream(&ts.stream).await.unwrap();
}

/// A claim the supervisor does not answer is given up at the shutdown
/// deadline like a tick in progress: the pod stops on time, the message is
/// left unacknowledged for redelivery, and nothing is completed.
#[tokio::test]
async fn a_claim_that_does_not_answer_does_not_hold_the_pod_past_its_shutdown_deadline() {
    let ts = test_stream().await;
    let fake = start_fake().await;
    fake.state.claim_delay_ms.store(60_000, Ordering::SeqCst);

    let (_watcher, mut acks) = ts.watch_settlements().await;
    let mut config = ts.pod_config(&fake);
    config.shutdown_deadline_secs = 1;
    let (pod, shutdown) = spawn_pod(config);
    ts.publish_tick(uuid::Uuid::new_v4()).await;
    let state = fake.state.clone();
    wait_for("the claim to be asked", || {
        state.claims.load(Ordering::SeqCst) == 1
    })
    .await;

    // The deadline is one second; the claim would take a minute.
    let stopping = tokio::time::Instant::now();
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), pod)
        .await
        .expect("the pod stops at its shutdown deadline, not when the claim answers")
        .unwrap()
        .unwrap();
    assert!(
        stopping.elapsed() >= Duration::from_millis(900),
        "it did not wait for the deadline"
    );
    // Neither acknowledged nor handed back: redelivered after its ack wait.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), acks.next())
            .await
            .is_err(),
        "the message was settled"
    );
    assert!(fake.state.completes().is_empty());
    let info = ts.consumer().await.info().await.unwrap().clone();
    assert_eq!(info.num_ack_pending, 1, "{info:?}");
    ts.js.delete_stream(&ts.stream).await.unwrap();
}

/// Read a pull answer to its end: its messages' tenants (the subject's last
/// token) and the error it ended with, if any.
async fn read_answer(
    answer: &mut genesis_agent_pod::pull::Answer<'_>,
) -> (Vec<String>, Option<String>) {
    let mut tenants = Vec::new();
    while let Some(next) = answer.next().await {
        match next {
            Ok(m) => {
                tenants.push(m.subject.split('.').next_back().unwrap().to_string());
                m.ack().await.unwrap();
            }
            Err(e) => return (tenants, Some(e.to_string())),
        }
    }
    (tenants, None)
}

#[tokio::test]
async fn one_pull_inbox_answers_request_after_request_each_ending_where_it_should() {
    let ts = test_stream().await;
    let (a, b, c) = (
        uuid::Uuid::new_v4(),
        uuid::Uuid::new_v4(),
        uuid::Uuid::new_v4(),
    );
    for t in [a, b, c] {
        ts.publish_tick(t).await;
    }
    // Every pull request the pod sends, with the inbox it is answered on.
    let (_watcher, mut requests) = ts.watch_pull_requests().await;
    let mut puller = genesis_agent_pod::pull::Puller::new(ts.js.clone(), ts.consumer().await)
        .await
        .unwrap();
    // The expiry is long: an answer that ends before it was ended by the
    // count asked for or by the server's "no more messages", not by waiting.
    let expires = Duration::from_secs(20);
    let short = Duration::from_secs(10);

    // Fewer asked for than pending: the answer ends at the count.
    let started = std::time::Instant::now();
    let mut answer = puller.request(2, expires).await.unwrap();
    let (got, err) = read_answer(&mut answer).await;
    assert_eq!(got, vec![a.to_string(), b.to_string()]);
    assert_eq!(err, None);
    assert!(answer.next().await.is_none(), "an ended answer stays ended");

    // More asked for than pending: the one left, then the server ends it.
    let mut answer = puller.request(2, expires).await.unwrap();
    let (got, err) = read_answer(&mut answer).await;
    assert_eq!(got, vec![c.to_string()]);
    assert_eq!(err, None);
    assert!(
        started.elapsed() < short,
        "answers waited for the expiry: {:?}",
        started.elapsed()
    );

    // Nothing pending: the request waits and is answered by the first
    // message published, on the same inbox, and then ends.
    let d = uuid::Uuid::new_v4();
    let waited = std::time::Instant::now();
    let mut answer = puller.request(4, expires).await.unwrap();
    let publisher = {
        let ts_js = ts.js.clone();
        let subject = format!("{}.{d}", ts.subject_prefix);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let body = serde_json::json!({"tenant_id": d, "instance_id": uuid::Uuid::new_v4()});
            ts_js
                .publish(subject, body.to_string().into())
                .await
                .unwrap()
                .await
                .unwrap();
        })
    };
    let (got, err) = read_answer(&mut answer).await;
    publisher.await.unwrap();
    assert_eq!(got, vec![d.to_string()]);
    assert_eq!(err, None);
    assert!(
        waited.elapsed() >= Duration::from_millis(250),
        "answered before the publish"
    );
    assert!(
        waited.elapsed() < short,
        "the answer waited for the expiry: {:?}",
        waited.elapsed()
    );

    // Every message was delivered once and acked: nothing pending anywhere.
    let info = ts.consumer().await.info().await.unwrap().clone();
    assert_eq!(
        (info.num_pending, info.num_ack_pending, info.num_redelivered),
        (0, 0, 0),
        "{info:?}"
    );

    // A request nothing answers ends at its expiry, quietly.
    let mut answer = puller.request(1, Duration::from_millis(300)).await.unwrap();
    assert_eq!(read_answer(&mut answer).await, (vec![], None));

    // Four requests, each as asked, all answered on one inbox.
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let r = tokio::time::timeout(Duration::from_secs(5), requests.next())
            .await
            .expect("the watcher sees each request")
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&r.payload).unwrap();
        seen.push((
            r.reply.unwrap().to_string(),
            body["batch"].as_u64().unwrap(),
            body["no_wait"].as_bool(),
        ));
    }
    let inboxes: std::collections::BTreeSet<&String> =
        seen.iter().map(|(inbox, _, _)| inbox).collect();
    assert_eq!(inboxes.len(), 1, "one inbox for every request: {seen:?}");
    let asked: Vec<(u64, Option<bool>)> = seen.iter().map(|(_, n, w)| (*n, *w)).collect();
    assert_eq!(
        asked,
        vec![
            (2, Some(true)),
            (2, Some(true)),
            (4, Some(true)),
            (1, Some(true))
        ]
    );
    ts.js.delete_stream(&ts.stream).await.unwrap();
}

#[tokio::test]
async fn a_pull_request_ended_by_the_server_reads_as_an_error_naming_its_status() {
    let ts = test_stream().await;
    let mut puller = genesis_agent_pod::pull::Puller::new(ts.js.clone(), ts.consumer().await)
        .await
        .unwrap();
    let mut answer = puller.request(4, Duration::from_secs(20)).await.unwrap();
    // The request waits (nothing pending) while its consumer is deleted.
    let deleter = {
        let js = ts.js.clone();
        let (stream, consumer) = (ts.stream.clone(), ts.consumer.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            js.get_stream(&stream)
                .await
                .unwrap()
                .delete_consumer(&consumer)
                .await
                .unwrap();
        })
    };
    let (got, err) = tokio::time::timeout(Duration::from_secs(10), read_answer(&mut answer))
        .await
        .expect("the deletion ends the answer before its expiry");
    deleter.await.unwrap();
    assert!(got.is_empty());
    let err = err.expect("the deletion is an error, not a quiet end");
    assert!(err.contains("409"), "{err}");
    assert!(answer.next().await.is_none(), "an ended answer stays ended");
    ts.js.delete_stream(&ts.stream).await.unwrap();
}
