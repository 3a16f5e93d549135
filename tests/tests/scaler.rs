//! The KEDA signal (Deploy, part 5; issue 39, part 7), read exactly as
//! KEDA's `nats-jetstream` scaler reads it (kedacore/keda,
//! `pkg/scalers/nats_jetstream_scaler.go`): `GET
//! http://<natsServerMonitoringEndpoint>/jsz?acc=<account>&consumers=true&config=true`,
//! then, in `account_details[]` the entry whose `name` is the account, in its
//! `stream_detail[]` the stream by `name`, in its `consumer_detail[]` the
//! consumer by `name`: the lag is `num_pending + num_ack_pending`. A consumer
//! missing from a found stream reads as the stream's `state.last_seq`; a
//! missing account or stream as 0 (a fresh scaler's empty stream detail),
//! which is why a wrong `keda.account` never scales the fleet up.
//!
//! The names come from the chart: stream, consumer, account, endpoint and
//! scheme from `helm/genesis/values.yaml` (scripts/chart-check.sh asserts the
//! rendered ScaledObjects carry exactly these), and the dedicated pools,
//! whose consumers are `<consumer>-<pool>`, from
//! `helm/genesis/ci/pools-values.yaml`. Each test runs its own nats-server
//! (JetStream and monitoring on free ports, store in a temp dir).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use async_nats::jetstream::{self, AckKind, consumer::PullConsumer};
use futures::StreamExt;
use genesis_e2e::{
    Fleet, FleetOptions, NatsServer, binaries_missing, binary, bounded, free_port, log_dir,
    wait_for,
};
use genesis_store::inspect::fleet as checks;
use uuid::Uuid;

const K: u64 = 5;

/// What KEDA's scaler is configured with: the trigger metadata the chart
/// renders from its values.
#[derive(Debug, Clone)]
struct Trigger {
    account: String,
    stream: String,
    consumer: String,
    use_https: bool,
}

/// What one poll of KEDA's scaler finds for its trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KedaReading {
    /// The consumer, found by account, stream and consumer name.
    Consumer {
        num_pending: u64,
        num_ack_pending: u64,
    },
    /// The stream was found but not the consumer: KEDA reads the stream's
    /// `state.last_seq`.
    StreamOnly { last_seq: u64 },
    /// No such account or stream: a fresh scaler reads 0.
    Nothing,
}

impl KedaReading {
    /// The metric KEDA hands the HPA (`getMaxMsgLag`).
    fn lag(self) -> u64 {
        match self {
            KedaReading::Consumer {
                num_pending,
                num_ack_pending,
            } => num_pending + num_ack_pending,
            KedaReading::StreamOnly { last_seq } => last_seq,
            KedaReading::Nothing => 0,
        }
    }
}

/// `getNATSJetStreamMonitoringURL`: the endpoint is host:port, the scheme
/// comes from useHttps, the account goes in unescaped.
fn keda_monitoring_url(endpoint: &str, t: &Trigger) -> String {
    let scheme = if t.use_https { "https" } else { "http" };
    format!(
        "{scheme}://{endpoint}/jsz?acc={}&consumers=true&config=true",
        t.account
    )
}

/// `setNATSJetStreamMonitoringData` + `getMaxMsgLag` on one `/jsz` answer.
fn keda_reading(jsz: &serde_json::Value, t: &Trigger) -> KedaReading {
    let name = |v: &serde_json::Value| {
        v.get("name")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let n =
        |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    let list = |v: &serde_json::Value, k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for acc in list(jsz, "account_details") {
        if name(&acc).as_deref() != Some(&t.account) {
            continue;
        }
        for stream in list(&acc, "stream_detail") {
            if name(&stream).as_deref() != Some(&t.stream) {
                continue;
            }
            for c in list(&stream, "consumer_detail") {
                if name(&c).as_deref() == Some(&t.consumer) {
                    return KedaReading::Consumer {
                        num_pending: n(&c, "num_pending"),
                        num_ack_pending: n(&c, "num_ack_pending"),
                    };
                }
            }
            let last_seq = stream.get("state").map(|s| n(s, "last_seq")).unwrap_or(0);
            return KedaReading::StreamOnly { last_seq };
        }
    }
    KedaReading::Nothing
}

/// One poll, as KEDA makes it, of the private server's monitoring port.
async fn poll(nats: &NatsServer, t: &Trigger) -> anyhow::Result<KedaReading> {
    let endpoint = format!("127.0.0.1:{}", nats.monitor_port);
    let url = keda_monitoring_url(&endpoint, t);
    let jsz: serde_json::Value = reqwest::get(&url).await?.error_for_status()?.json().await?;
    Ok(keda_reading(&jsz, t))
}

fn chart_file(rel: &str) -> anyhow::Result<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../helm/genesis")
        .join(rel);
    std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))
}

/// The one `key: value` line of the chart's values.yaml, unquoted.
fn chart_value(values: &str, key: &str) -> anyhow::Result<String> {
    let prefix = format!("{key}: ");
    let found: Vec<&str> = values
        .lines()
        .filter_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .collect();
    ensure!(
        found.len() == 1,
        "values.yaml has {} `{key}:` lines, expected one",
        found.len()
    );
    Ok(found[0].trim().trim_matches('"').to_owned())
}

/// The shared pool's trigger and the monitoring endpoint, from values.yaml.
fn chart_trigger() -> anyhow::Result<(Trigger, String)> {
    let values = chart_file("values.yaml")?;
    let t = Trigger {
        account: chart_value(&values, "account")?,
        stream: chart_value(&values, "stream")?,
        consumer: chart_value(&values, "consumer")?,
        use_https: chart_value(&values, "useHttps")? == "true",
    };
    let endpoint = chart_value(&values, "natsServerMonitoringEndpoint")?;
    ensure!(
        t.account == "$G"
            && t.stream == "GENESIS_TICKS"
            && t.consumer == "agent-pods"
            && !t.use_https,
        "the chart's trigger changed: {t:?}"
    );
    ensure!(
        !endpoint.contains("://")
            && endpoint
                .rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok()),
        "natsServerMonitoringEndpoint {endpoint:?} is not host:port (KEDA adds the scheme)"
    );
    Ok((t, endpoint))
}

/// The dedicated pools of ci/pools-values.yaml: name -> tenants, in order.
fn chart_pools() -> anyhow::Result<Vec<(String, Vec<Uuid>)>> {
    let text = chart_file("ci/pools-values.yaml")?;
    let mut pools: Vec<(String, Vec<Uuid>)> = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- name: ") {
            pools.push((name.trim().to_owned(), Vec::new()));
        } else if let Some(item) = line.strip_prefix("- ")
            && let Ok(id) = item.trim().parse::<Uuid>()
        {
            let Some(pool) = pools.last_mut() else {
                bail!("tenant {id} before any pool")
            };
            pool.1.push(id);
        }
    }
    ensure!(
        pools.len() >= 2 && pools.iter().all(|(_, t)| !t.is_empty()),
        "pools-values.yaml: {pools:?}"
    );
    Ok(pools)
}

/// An agent pod bound to one pool's consumer, killed on drop.
struct PoolPod(Child);

impl PoolPod {
    async fn start(fleet: &Fleet, consumer: &str, name: &str) -> anyhow::Result<Self> {
        let http = format!("127.0.0.1:{}", free_port()?);
        let log = std::fs::File::create(fleet.logs.join(format!("{name}.log")))?;
        let child = Command::new(binary("genesis-agent-pod")?)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info")
            .env("GENESIS_LOG_FORMAT", "text")
            .env("GENESIS_HTTP_ADDR", &http)
            .env("GENESIS_NATS_URL", &fleet.nats_url)
            .env("GENESIS_STREAM", &fleet.stream)
            .env("GENESIS_CONSUMER", consumer)
            .env(
                "GENESIS_SUPERVISOR_URL",
                format!("http://{}", fleet.supervisor_grpc),
            )
            .env("GENESIS_AGENT_TOKEN", &fleet.pod_token)
            .env(
                "GENESIS_LEASE_TTL_SECS",
                fleet.options.lease_ttl_secs.to_string(),
            )
            .env("GENESIS_RETRY_NAK_MS", "500")
            .env("GENESIS_LEASE_HELD_NAK_MS", "500")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .context("spawn genesis-agent-pod")?;
        let pod = PoolPod(child);
        let url = format!("http://{http}/readyz");
        wait_for(&format!("{name} /readyz"), Duration::from_secs(30), || {
            let url = url.clone();
            async move {
                Ok(reqwest::get(&url)
                    .await
                    .ok()
                    .filter(|r| r.status().is_success())
                    .map(|_| ()))
            }
        })
        .await?;
        Ok(pod)
    }
}

impl Drop for PoolPod {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_pending_counts_due_events_and_drains_when_pods_start() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(150), async {
        let nats = NatsServer::start(&log_dir("scaler-nats")?).await?;
        // The names KEDA is configured with come from the chart's values.
        let (trigger, _) = chart_trigger()?;
        let mut opts = FleetOptions::new("scaler", 0);
        opts.nats_url = Some(nats.url());
        opts.chart_default_names = true;
        let mut fleet = Fleet::start(opts).await?;
        let (stream, consumer) = (fleet.stream.clone(), fleet.consumer.clone());
        ensure!(
            stream == "GENESIS_TICKS" && consumer == "agent-pods",
            "{stream}/{consumer}"
        );

        // K tenants: each bootstrap seeds one AgentInitialized, due now.
        let mut instances = Vec::new();
        for i in 0..K {
            let t = fleet.create_tenant(&format!("scale-{i}")).await?;
            instances.push(fleet.wait_soa(&t, Duration::from_secs(30)).await?);
        }
        let pending = wait_for(
            "KEDA's lag == K on the consumer",
            Duration::from_secs(30),
            || async {
                let r = poll(&nats, &trigger).await?;
                Ok((r
                    == KedaReading::Consumer {
                        num_pending: K,
                        num_ack_pending: 0,
                    })
                .then_some(r))
            },
        )
        .await;
        let seen = poll(&nats, &trigger).await?;
        ensure!(
            pending.is_ok(),
            "consumer {consumer} on {stream}: KEDA reads {seen:?}, expected {K} pending"
        );
        // Nothing consumed it: the database agrees.
        let unconsumed = checks::count_due_unconsumed_events(&fleet.db).await?;
        ensure!(
            unconsumed == K as i64,
            "{unconsumed} due events in the database, expected {K}"
        );
        // With no pod the fleet cannot quiesce, and the harness's report names
        // what is left: each due event (at most ten) and the consumer holding
        // its wake-up.
        let stalled = match fleet.wait_quiescent(Duration::from_millis(300)).await {
            Ok(()) => {
                anyhow::bail!("the fleet was reported quiescent with {K} due events and no pod")
            }
            Err(e) => format!("{e:#}"),
        };
        for inst in &instances {
            ensure!(
                stalled.contains(&format!("of {inst}: visible")),
                "the stall report misses {inst}: {stalled}"
            );
        }
        ensure!(
            stalled.matches("due event ").count() == K as usize,
            "{stalled}"
        );
        ensure!(
            stalled.contains(&format!("consumer {consumer}: {K} pending, 0 awaiting ack")),
            "{stalled}"
        );

        // Scale from zero: two pods drain it.
        fleet.add_pod().await?;
        fleet.add_pod().await?;
        wait_for(
            "KEDA's lag to fall to 0",
            Duration::from_secs(60),
            || async { Ok((poll(&nats, &trigger).await?.lag() == 0).then_some(())) },
        )
        .await?;
        for inst in &instances {
            fleet
                .wait_decision(inst, 0, "Initialized", Duration::from_secs(30))
                .await?;
        }
        fleet.wait_quiescent(Duration::from_secs(30)).await?;
        fleet.check_invariants().await?;
        drop(fleet);
        drop(nats);
        Ok(())
    })
    .await
}

/// Back-pressure: with no pods, the publisher stops publishing once the
/// consumer's undelivered backlog reaches `GENESIS_OUTBOX_MAX_PENDING` (give
/// or take one batch), the rest of the due events wait in PostgreSQL, and
/// when pods start every event is still delivered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publisher_holds_at_the_backlog_limit_and_loses_nothing() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    const MAX: u64 = 10;
    const BATCH: u64 = 4;
    const MESSAGES: usize = 40;
    bounded(Duration::from_secs(150), async {
        let nats = NatsServer::start(&log_dir("backpressure-nats")?).await?;
        let mut opts = FleetOptions::new("backpressure", 0);
        opts.nats_url = Some(nats.url());
        opts.extra_env.extend([
            ("GENESIS_OUTBOX_MAX_PENDING".to_owned(), MAX.to_string()),
            ("GENESIS_OUTBOX_BATCH".to_owned(), BATCH.to_string()),
        ]);
        let mut fleet = Fleet::start(opts).await?;
        let (stream, consumer) = (fleet.stream.clone(), fleet.consumer.clone());
        let t = fleet.create_tenant("backlog").await?;
        let soa = fleet.wait_soa(&t, Duration::from_secs(30)).await?;
        for i in 0..MESSAGES {
            fleet.send(&t, &soa, &format!("queued {i}")).await?;
        }
        // The publisher reaches the limit and holds there.
        let held = wait_for("the publisher to hold", Duration::from_secs(30), || async {
            let held = fleet.counter("control", "genesis_outbox_held_total").await?;
            Ok((held >= 3.0).then_some(held))
        })
        .await?;
        let pending = nats.consumer_pending(&stream, &consumer).await?.unwrap_or(0);
        ensure!(
            (MAX..MAX + BATCH).contains(&pending),
            "num_pending {pending} while held {held} times; expected {MAX}..{} (the limit plus less than one batch)",
            MAX + BATCH
        );
        let waiting = checks::count_unpublished_events(&fleet.db).await?;
        ensure!(
            waiting as u64 + pending >= MESSAGES as u64,
            "{waiting} unpublished + {pending} pending < {MESSAGES} messages"
        );

        // Pods start: everything is delivered, each message answered once.
        fleet.add_pod().await?;
        fleet.add_pod().await?;
        wait_for("every message answered", Duration::from_secs(90), || async {
            let n = fleet.answered_messages(&soa).await?;
            Ok((n == MESSAGES as i64).then_some(()))
        })
        .await?;
        fleet.wait_quiescent(Duration::from_secs(60)).await?;
        let s = fleet.check_invariants().await?;
        println!(
            "FAULT backpressure: limit={MAX} batch={BATCH} held={held} pending_at_hold={pending} messages={MESSAGES} events={} consumed={} dead_lettered={} ok",
            s.events, s.consumed, s.dead_lettered
        );
        drop(fleet);
        drop(nats);
        Ok(())
    })
    .await
}

/// Every agent-pod pool of the chart scales on its own consumer: with the
/// pools of ci/pools-values.yaml routed by control (GENESIS_POD_POOLS as the
/// chart renders it) and no pod running, KEDA's reading of each pool's
/// trigger finds its consumer and counts exactly that pool's due ticks; a
/// message a pod holds unacknowledged still counts (num_ack_pending), so a
/// busy pool is not scaled down under its work; a wrong account reads as
/// zero and a consumer the stream lacks as the stream's last sequence (the
/// failure modes the chart's values warn of); and once each pool's pods run,
/// every pool's lag falls to 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_reads_the_lag_of_every_chart_pool_from_its_own_consumer() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(180), async {
        let (shared, endpoint) = chart_trigger()?;
        let pools = chart_pools()?;
        let nats = NatsServer::start(&log_dir("scaler-pools-nats")?).await?;
        // As the chart renders GENESIS_POD_POOLS for control.
        let pod_pools = pools
            .iter()
            .map(|(name, tenants)| {
                let ids: Vec<String> = tenants.iter().map(Uuid::to_string).collect();
                format!("{name}={}", ids.join(","))
            })
            .collect::<Vec<_>>()
            .join(";");
        let mut opts = FleetOptions::new("scaler-pools", 0);
        opts.nats_url = Some(nats.url());
        opts.chart_default_names = true;
        opts.extra_env.push(("GENESIS_POD_POOLS".to_owned(), pod_pools));
        let mut fleet = Fleet::start(opts).await?;
        ensure!(
            fleet.stream == shared.stream && fleet.consumer == shared.consumer,
            "the fleet runs {}/{}, the chart {}/{}",
            fleet.stream,
            fleet.consumer,
            shared.stream,
            shared.consumer
        );

        // The triggers the chart renders: the shared pool's, then one per
        // pool on <consumer>-<name>, each expecting one due tick (the
        // bootstrapped SOA's AgentInitialized) per tenant it serves.
        let mut expected: BTreeMap<String, (Trigger, u64)> = BTreeMap::new();
        const SHARED_TENANTS: u64 = 2;
        expected.insert("agent-pod".to_owned(), (shared.clone(), SHARED_TENANTS));
        for (name, tenants) in &pools {
            let t = Trigger { consumer: format!("{}-{name}", shared.consumer), ..shared.clone() };
            expected.insert(format!("agent-pod-{name}"), (t, tenants.len() as u64));
        }

        // Shared tenants through the API; the pools' tenants carry the ids
        // the pools name (as in a deployment, where the ids are known
        // before the values are written), so they are inserted as
        // CreateTenant inserts them and bootstrapped by control's re-scan.
        let mut tenants: Vec<String> = Vec::new();
        for i in 0..SHARED_TENANTS {
            tenants.push(fleet.create_tenant(&format!("shared-{i}")).await?);
        }
        for (name, ids) in &pools {
            for (i, id) in ids.iter().enumerate() {
                checks::fixture_tenant_with_id(&fleet.db, *id, &format!("{name}-{i}"), true).await?;
                tenants.push(id.to_string());
            }
        }
        let mut instances = Vec::new();
        for t in &tenants {
            instances.push(fleet.wait_soa(t, Duration::from_secs(30)).await?);
        }

        let all_read = wait_for("every pool's trigger to read its due ticks", Duration::from_secs(30), || async {
            for (t, want) in expected.values() {
                if poll(&nats, t).await? != (KedaReading::Consumer { num_pending: *want, num_ack_pending: 0 }) {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        })
        .await;
        let mut seen = Vec::new();
        for (component, (t, want)) in &expected {
            seen.push(format!("{component} ({}): {:?}, want {want}", t.consumer, poll(&nats, t).await?));
        }
        ensure!(all_read.is_ok(), "KEDA's readings: {}", seen.join("; "));
        println!(
            "KEDA lag per pool at {}: {}",
            keda_monitoring_url(&endpoint, &shared),
            seen.join("; ")
        );

        // A message in a pod's hands is lag too: take one of the last
        // pool's ticks without acknowledging it.
        let (last, (held_trigger, held_want)) = expected
            .iter()
            .next_back()
            .map(|(c, v)| (c.clone(), v.clone()))
            .context("no trigger")?;
        let client = async_nats::connect(&fleet.nats_url).await?;
        let js = jetstream::new(client);
        let consumer: PullConsumer = js
            .get_stream(&fleet.stream)
            .await?
            .get_consumer(&held_trigger.consumer)
            .await
            .map_err(|e| anyhow::anyhow!("consumer {}: {e}", held_trigger.consumer))?;
        let mut batch = consumer.fetch().max_messages(1).messages().await?;
        let held = batch.next().await.context("no message to hold")?.map_err(|e| anyhow::anyhow!("{e}"))?;
        let r = poll(&nats, &held_trigger).await?;
        ensure!(
            r == KedaReading::Consumer { num_pending: held_want - 1, num_ack_pending: 1 } && r.lag() == held_want,
            "{last}: with one message held unacknowledged KEDA reads {r:?} (lag {}), expected {held_want}",
            r.lag()
        );
        held.ack_with(AckKind::Nak(None)).await.map_err(|e| anyhow::anyhow!("{e}"))?;

        // The failure modes: a wrong account reads as zero lag (the fleet
        // would never scale up), a consumer the stream lacks as the stream's
        // last sequence.
        let wrong_account = Trigger { account: "GENESIS".to_owned(), ..shared.clone() };
        ensure!(
            poll(&nats, &wrong_account).await? == KedaReading::Nothing,
            "a wrong account must read as nothing (lag 0)"
        );
        let no_consumer = Trigger { consumer: format!("{}-nosuchpool", shared.consumer), ..shared.clone() };
        let r = poll(&nats, &no_consumer).await?;
        let total: u64 = expected.values().map(|(_, n)| n).sum();
        ensure!(
            matches!(r, KedaReading::StreamOnly { last_seq } if last_seq >= total),
            "a consumer the stream lacks must read as the stream's last sequence: {r:?}"
        );

        // Each pool's pods drain its own consumer, and only it.
        fleet.add_pod().await?;
        let mut pool_pods = Vec::new();
        for (name, _) in &pools {
            let consumer = format!("{}-{name}", shared.consumer);
            pool_pods.push(PoolPod::start(&fleet, &consumer, &format!("agent-pod-{name}")).await?);
        }
        wait_for("every pool's lag to fall to 0", Duration::from_secs(60), || async {
            for (t, _) in expected.values() {
                if poll(&nats, t).await?.lag() != 0 {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        })
        .await?;
        for inst in &instances {
            fleet.wait_decision(inst, 0, "Initialized", Duration::from_secs(30)).await?;
        }
        fleet.wait_quiescent(Duration::from_secs(30)).await?;
        fleet.check_invariants().await?;
        drop(pool_pods);
        drop(fleet);
        drop(nats);
        Ok(())
    })
    .await
}
