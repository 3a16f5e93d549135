//! Reliability, part 1: faults injected while events flow — SIGKILL of agent
//! pods at random points, restarts of the supervisor and of control, NATS
//! unreachable then back, PostgreSQL backends terminated. After each, the
//! fleet must settle by itself and the invariants hold: every event consumed
//! exactly once or dead-lettered with an attention request, ledger turns ==
//! consumed events, exactly one pending heartbeat per active instance, no
//! lease held past its TTL. Each test prints one
//! `FAULT <name>: rounds=<n> events=<n> consumed=<n> dead_lettered=<n> ok` line.
//! `GENESIS_FAULT_SOAK=N` turns the suite into a soak: N times the rounds.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{
    Fleet, FleetOptions, NatsServer, QueueStats, binaries_missing, bounded, log_dir, wait_for,
};
use rand::Rng as _;

const SETTLE: Duration = Duration::from_secs(60);

/// The soak multiplier: `GENESIS_FAULT_SOAK=N` runs N times the rounds of
/// every fault (with N times the time bound); unset, the suite's short run.
fn soak() -> usize {
    std::env::var("GENESIS_FAULT_SOAK")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| (1..=1000).contains(n))
        .unwrap_or(1)
}

/// A time bound scaled by [`soak`].
fn limit(secs: u64) -> Duration {
    Duration::from_secs(secs.saturating_mul(soak() as u64))
}

fn skipped() -> bool {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return true;
    }
    false
}

/// `n` tenants with their SOAs past the opener; returns (tenant, soa) pairs.
async fn agents(fleet: &Fleet, n: usize) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for i in 0..n {
        let t = fleet.create_tenant(&format!("fault-{i}")).await?;
        let soa = fleet.wait_soa(&t, Duration::from_secs(30)).await?;
        out.push((t, soa));
    }
    for (_, soa) in &out {
        fleet
            .wait_decision(soa, 0, "Initialized", Duration::from_secs(30))
            .await?;
    }
    Ok(out)
}

/// Send one operator message to every agent; returns how many were sent.
/// A send refused while control is down is retried until it lands.
async fn burst(fleet: &Fleet, agents: &[(String, String)], round: usize) -> anyhow::Result<usize> {
    for (t, soa) in agents {
        let mut tries = 0;
        loop {
            match fleet.send(t, soa, &format!("round {round}: status?")).await {
                Ok(_) => break,
                Err(_) if tries < 50 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e.context("send kept failing")),
            }
        }
    }
    Ok(agents.len())
}

/// Let the fleet settle, check the invariants and that every sent message
/// has its turn, and print the summary line.
async fn settle(
    fleet: &mut Fleet,
    name: &str,
    rounds: usize,
    sent: usize,
) -> anyhow::Result<QueueStats> {
    fleet.wait_quiescent(SETTLE).await.with_context(|| {
        format!(
            "{name}: the fleet did not settle on its own (logs in {})",
            fleet.logs.display()
        )
    })?;
    if let Err(e) = fleet.all_alive() {
        anyhow::bail!("{name}: {e}");
    }
    let s = fleet
        .check_invariants()
        .await
        .with_context(|| format!("{name}: after the fault"))?;
    let messages: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue WHERE event_kind = 'OperatorMessage'",
    )
    .fetch_one(&fleet.db)
    .await?;
    let settled: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM agent_event_queue WHERE event_kind = 'OperatorMessage'
           AND (consumed_at IS NOT NULL OR dead_lettered_at IS NOT NULL)",
    )
    .fetch_one(&fleet.db)
    .await?;
    ensure!(
        messages == sent as i64,
        "{name}: {messages} OperatorMessage events for {sent} sends"
    );
    ensure!(
        settled == messages,
        "{name}: {settled} of {messages} messages settled"
    );
    println!(
        "FAULT {name}: rounds={rounds} events={} consumed={} dead_lettered={} ok",
        s.events, s.consumed, s.dead_lettered
    );
    Ok(s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_killed_at_random_points_lose_and_duplicate_nothing() -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(limit(150), async {
        let mut opts = FleetOptions::new("faults-pod-kill", 2);
        opts.lease_ttl_secs = 3;
        let mut fleet = Fleet::start(opts).await?;
        let agents = agents(&fleet, 3).await?;
        let rounds = 4 * soak();
        let mut sent = 0;
        for round in 0..rounds {
            sent += burst(&fleet, &agents, round).await?;
            let delay = rand::rng().random_range(0..400);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let victim = rand::rng().random_range(0..fleet.pod_count());
            fleet.kill_pod(victim);
            tokio::time::sleep(Duration::from_millis(300)).await;
            fleet.start_pod(victim).await?;
        }
        settle(&mut fleet, "pod-kill", rounds, sent).await?;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervisor_and_control_restarts_under_load_recover() -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(limit(150), async {
        let mut opts = FleetOptions::new("faults-restarts", 2);
        opts.lease_ttl_secs = 3;
        let mut fleet = Fleet::start(opts).await?;
        let agents = agents(&fleet, 3).await?;
        let mut sent = 0;
        let rounds = 2 * soak();
        for round in 0..rounds {
            sent += burst(&fleet, &agents, round).await?;
            tokio::time::sleep(Duration::from_millis(rand::rng().random_range(0..300))).await;
            fleet.restart_supervisor().await?;
            sent += burst(&fleet, &agents, round + 10_000).await?;
            tokio::time::sleep(Duration::from_millis(rand::rng().random_range(0..300))).await;
            fleet.restart_control().await?;
        }
        sent += burst(&fleet, &agents, 99_999).await?;
        settle(&mut fleet, "supervisor-and-control-restart", rounds, sent).await?;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_unreachable_then_back_recovers_without_a_restart() -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(limit(150), async {
        let mut nats = NatsServer::start(&log_dir("faults-nats-server")?).await?;
        let mut opts = FleetOptions::new("faults-nats", 1);
        opts.lease_ttl_secs = 3;
        opts.nats_url = Some(nats.url());
        let mut fleet = Fleet::start(opts).await?;
        let agents = agents(&fleet, 2).await?;
        let mut sent = 0;
        let rounds = 2 * soak();
        for round in 0..rounds {
            sent += burst(&fleet, &agents, round).await?;
            nats.stop();
            // Enqueues land in PostgreSQL while the broker is gone.
            sent += burst(&fleet, &agents, round + 10_000).await?;
            tokio::time::sleep(Duration::from_secs(3)).await;
            nats.resume().await?;
        }
        settle(&mut fleet, "nats-outage", rounds, sent).await?;
        drop(fleet);
        drop(nats);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_backends_terminated_under_load_recover() -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(limit(150), async {
        let mut opts = FleetOptions::new("faults-pg-terminate", 2);
        opts.lease_ttl_secs = 3;
        let mut fleet = Fleet::start(opts).await?;
        let agents = agents(&fleet, 3).await?;
        let admin_pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&genesis_e2e::base_database_url())
            .await?;
        let rounds = 3 * soak();
        let mut sent = 0;
        for round in 0..rounds {
            sent += burst(&fleet, &agents, round).await?;
            tokio::time::sleep(Duration::from_millis(rand::rng().random_range(0..200))).await;
            let killed: Vec<bool> = sqlx::query_scalar(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            )
            .bind(&fleet.db_name)
            .fetch_all(&admin_pool)
            .await?;
            ensure!(!killed.is_empty(), "no backend of {} to terminate", fleet.db_name);
        }
        admin_pool.close().await;
        settle(&mut fleet, "pg-terminate", rounds, sent).await?;
        Ok(())
    })
    .await
}

/// Whether pod `i` has exited on its own (reaping it if so).
fn pod_died(fleet: &mut Fleet) -> bool {
    fleet.all_alive().is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_crashing_at_each_point_of_a_tick_loses_and_duplicates_nothing() -> anyhow::Result<()>
{
    if skipped() {
        return Ok(());
    }
    bounded(limit(240), async {
        for point in [
            "after_claim",
            "after_tool",
            "before_complete",
            "after_complete",
        ] {
            let name = format!("crash-{}", point.replace('_', "-"));
            let logs = log_dir(&format!("faults-{name}"))?;
            let marker = logs.join(format!("{point}.fired"));
            let _ = std::fs::remove_file(&marker);
            let mut opts = FleetOptions::new(&format!("faults-{name}-fleet"), 1);
            opts.lease_ttl_secs = 3;
            opts.extra_env.push((
                "GENESIS_FAULT_EXIT_AT".into(),
                format!("{point}:{}", marker.display()),
            ));
            let mut fleet = Fleet::start(opts).await?;
            // The SOA's opener is the first tick: the pod aborts at `point`.
            let tenant = fleet.create_tenant("crash").await?;
            let soa = fleet.wait_soa(&tenant, Duration::from_secs(30)).await?;
            let died = wait_for(
                &format!("the pod to abort at {point}"),
                Duration::from_secs(30),
                || {
                    let gone = pod_died(&mut fleet);
                    async move { Ok(gone.then_some(())) }
                },
            )
            .await;
            ensure!(died.is_ok(), "{name}: the pod never reached {point}");
            ensure!(marker.is_file(), "{name}: aborted without its marker");
            // Restart it (the marker disarms it) and let the fleet recover.
            fleet.kill_pod(0);
            fleet.start_pod(0).await?;
            fleet
                .wait_decision(&soa, 0, "Initialized", SETTLE)
                .await
                .with_context(|| format!("{name}: the opener was never completed"))?;
            let sent = burst(&fleet, &[(tenant.clone(), soa.clone())], 0).await?;
            let s = settle(&mut fleet, &name, 1, sent).await?;
            let turns: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM agent_state_ledger l
                   JOIN agent_event_queue e ON e.id = l.event_id
                  WHERE e.event_kind = 'AgentInitialized'",
            )
            .fetch_one(&fleet.db)
            .await?;
            ensure!(turns == 1, "{name}: {turns} turns for the one opener");
            // Tool side effects are at-least-once across a crash: a greeting
            // sent before the abort is sent again by the reclaimed tick.
            let greetings: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM agent_messages WHERE direction = 'agent_to_operator'
                   AND body LIKE 'Hello, I am your%'",
            )
            .fetch_one(&fleet.db)
            .await?;
            println!("FAULT {name}: greetings sent for the one opener: {greetings}");
            ensure!(
                s.dead_lettered == 0,
                "{name}: {} dead-lettered",
                s.dead_lettered
            );
        }
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_event_is_dead_lettered_while_the_tenants_other_agents_keep_ticking()
-> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(limit(180), async {
        let mut opts = FleetOptions::new("faults-poison", 2);
        opts.lease_ttl_secs = 2;
        opts.max_attempts = 3;
        opts.extra_env
            .push(("GENESIS_FAULT_EXIT_ON".into(), "POISON-PILL".into()));
        let mut fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("poisoned").await?;
        let soa = fleet.wait_soa(&tenant, Duration::from_secs(30)).await?;
        fleet
            .wait_decision(&soa, 0, "Initialized", Duration::from_secs(30))
            .await?;
        // A second agent of the same tenant: its work must keep flowing.
        let admin = fleet.admin().await?;
        let comp = admin
            .agents()
            .start_compliance(genesis_proto::v1::StartComplianceRequest {
                tenant_id: tenant.clone(),
            })
            .await?
            .into_inner()
            .id;
        fleet
            .wait_decision(&comp, 0, "Initialized", Duration::from_secs(30))
            .await?;

        // Every tick of the poisoned event kills the pod that claims it.
        fleet.send(&tenant, &soa, "POISON-PILL").await?;
        let mut healthy_sent = 0;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        let dead_lettered = loop {
            // Restart whatever died; keep the other agent busy meanwhile.
            fleet.restart_dead_pods().await?;
            if healthy_sent < 5 {
                fleet.send(&tenant, &comp, &format!("status {healthy_sent}")).await?;
                healthy_sent += 1;
            }
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM agent_event_queue
                  WHERE payload->>'body' = 'POISON-PILL' AND dead_lettered_at IS NOT NULL",
            )
            .fetch_one(&fleet.db)
            .await?;
            if n == 1 {
                break true;
            }
            if tokio::time::Instant::now() > deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        ensure!(dead_lettered, "the poison event was never dead-lettered");
        fleet.restart_dead_pods().await?;
        let attempts: i32 = sqlx::query_scalar(
            "SELECT attempts FROM agent_event_queue WHERE payload->>'body' = 'POISON-PILL'",
        )
        .fetch_one(&fleet.db)
        .await?;
        ensure!(attempts >= 3, "dead-lettered after {attempts} attempts, expected the configured 3");
        let attention: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM attention_requests WHERE kind = 'dead_letter'",
        )
        .fetch_one(&fleet.db)
        .await?;
        ensure!(attention == 1, "{attention} dead-letter attention requests");
        // The other agent acknowledged every one of its messages.
        wait_for("the healthy agent's messages", Duration::from_secs(60), || async {
            let acked = fleet.answered_messages(&comp).await?;
            Ok((acked == 5).then_some(()))
        })
        .await?;
        fleet.wait_quiescent(SETTLE).await?;
        let s = fleet.check_invariants().await?;
        println!(
            "FAULT poison: attempts={attempts} events={} consumed={} dead_lettered={} ok; the other agent acknowledged {healthy_sent} messages",
            s.events, s.consumed, s.dead_lettered
        );
        Ok(())
    })
    .await
}
