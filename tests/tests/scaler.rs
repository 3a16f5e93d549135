//! The KEDA signal (Deploy, part 5): with no agent pods, K due events show
//! as `num_pending == K` on the durable consumer in the private nats-server's
//! `/jsz?acc=$G` (the exact path and account KEDA's nats-jetstream trigger
//! reads with the chart's defaults), under the chart's default stream and
//! consumer names, and the count falls to 0 once pods run.

use std::time::Duration;

use anyhow::ensure;
use genesis_e2e::{Fleet, FleetOptions, NatsServer, binaries_missing, bounded, log_dir, wait_for};

const K: u64 = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_pending_counts_due_events_and_drains_when_pods_start() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(150), async {
        let nats = NatsServer::start(&log_dir("scaler-nats")?).await?;
        // The names KEDA is configured with come from the chart's values.
        let values = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../helm/genesis/values.yaml"))?;
        for line in ["stream: GENESIS_TICKS", "consumer: agent-pods", "account: \"$G\""] {
            ensure!(values.lines().any(|l| l.trim() == line), "the chart's values no longer say {line}");
        }
        let mut opts = FleetOptions::new("scaler", 0);
        opts.nats_url = Some(nats.url());
        opts.chart_default_names = true;
        let mut fleet = Fleet::start(opts).await?;
        let (stream, consumer) = (fleet.stream.clone(), fleet.consumer.clone());
        ensure!(stream == "GENESIS_TICKS" && consumer == "agent-pods", "{stream}/{consumer}");

        // K tenants: each bootstrap seeds one AgentInitialized, due now.
        let mut instances = Vec::new();
        for i in 0..K {
            let t = fleet.create_tenant(&format!("scale-{i}")).await?;
            instances.push(fleet.wait_soa(&t, Duration::from_secs(30)).await?);
        }
        let pending = wait_for("num_pending == K on the consumer", Duration::from_secs(30), || async {
            let n = nats.consumer_pending(&stream, &consumer).await?;
            Ok((n == Some(K)).then_some(n))
        })
        .await;
        let seen = nats.consumer_pending(&stream, &consumer).await?;
        ensure!(pending.is_ok(), "consumer {consumer} on {stream} reports num_pending {seen:?}, expected {K}");
        // Nothing consumed it: the database agrees.
        let unconsumed: i64 =
            sqlx::query_scalar("SELECT count(*) FROM agent_event_queue WHERE consumed_at IS NULL AND visible_at <= now()")
                .fetch_one(&fleet.db)
                .await?;
        ensure!(unconsumed == K as i64, "{unconsumed} due events in the database, expected {K}");
        // With no pod the fleet cannot quiesce, and the harness's report names
        // what is left: each due event (at most ten) and the consumer holding
        // its wake-up.
        let stalled = match fleet.wait_quiescent(Duration::from_millis(300)).await {
            Ok(()) => anyhow::bail!("the fleet was reported quiescent with {K} due events and no pod"),
            Err(e) => format!("{e:#}"),
        };
        for inst in &instances {
            ensure!(stalled.contains(&format!("of {inst}: visible")), "the stall report misses {inst}: {stalled}");
        }
        ensure!(stalled.matches("due event ").count() == K as usize, "{stalled}");
        ensure!(stalled.contains(&format!("consumer {consumer}: {K} pending, 0 awaiting ack")), "{stalled}");

        // Scale from zero: two pods drain it.
        fleet.add_pod().await?;
        fleet.add_pod().await?;
        wait_for("num_pending to fall to 0", Duration::from_secs(60), || async {
            let n = nats.consumer_pending(&stream, &consumer).await?;
            Ok((n == Some(0)).then_some(()))
        })
        .await?;
        for inst in &instances {
            fleet.wait_decision(inst, 0, "Initialized", Duration::from_secs(30)).await?;
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
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM agent_event_queue WHERE published_at IS NULL AND consumed_at IS NULL",
        )
        .fetch_one(&fleet.db)
        .await?;
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
