//! Reliability, part 1: faults injected while events flow — SIGKILL of agent
//! pods at random points, restarts of the supervisor and of control, NATS
//! unreachable then back, PostgreSQL backends terminated. After each, the
//! fleet must settle by itself and the invariants hold: every event consumed
//! exactly once or dead-lettered with an attention request of its own,
//! ledger turns == consumed events, nothing pending for an active instance
//! but its one heartbeat, no lease held past its expiry. Each test prints one
//! `FAULT <name>: rounds=<n> events=<n> consumed=<n> dead_lettered=<n> ok` line.
//! `GENESIS_FAULT_SOAK=N` turns the suite into a soak: N times the rounds.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{
    Fleet, FleetOptions, NatsServer, QueueStats, binaries_missing, bounded, log_dir, wait_for,
};
use genesis_store::inspect::{self, fleet as checks};
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
    let messages = inspect::count_events_of_kind(&fleet.db, "OperatorMessage").await?;
    let settled = checks::count_settled_events_of_kind(&fleet.db, "OperatorMessage").await?;
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

/// Events claimed more than once: each is a tick a kill interrupted between
/// its claim and its completion, taken over by a later claim.
async fn reclaimed_events(fleet: &Fleet) -> anyhow::Result<i64> {
    Ok(checks::count_reclaimed_events(&fleet.db).await?)
}

/// Send a burst, wait until a tick holds a live lease, and SIGKILL every pod
/// at once; whether a lease was left behind (a tick in flight died with its
/// pod: only a pod's claim takes a lease, and one that claims nothing clears
/// it in the same transaction). The pods are restarted either way.
async fn kill_mid_tick(
    fleet: &mut Fleet,
    agents: &[(String, String)],
    round: usize,
) -> anyhow::Result<(usize, bool)> {
    let sent = burst(fleet, agents, round).await?;
    // Poll tightly: a scripted tick lasts only tens of milliseconds.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < deadline {
        let live = checks::count_live_leases(&fleet.db).await?;
        if live > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for i in 0..fleet.pod_count() {
        fleet.kill_pod(i);
    }
    // A ClaimTick already at the supervisor still commits: let it land.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let orphaned = inspect::count_leased_instances(&fleet.db).await?;
    for i in 0..fleet.pod_count() {
        fleet.start_pod(i).await?;
    }
    Ok((sent, orphaned > 0))
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
        // Random moments may all find the pods idle. Kill mid-tick on
        // purpose until one kill is seen to leave a tick's lease behind, so
        // the run always includes an interrupted tick to recover from.
        let mut targeted = 0;
        let mut hit = false;
        while !hit && targeted < 8 {
            let (n, orphaned) = kill_mid_tick(&mut fleet, &agents, 1_000 + targeted).await?;
            sent += n;
            hit = orphaned;
            targeted += 1;
        }
        ensure!(
            hit,
            "pod-kill: {targeted} kills of every pod while a tick held a lease left no lease behind"
        );
        settle(&mut fleet, "pod-kill", rounds + targeted, sent).await?;
        // The interrupted ticks were taken over by a later claim and
        // consumed once (settle checked the turns): their events show it.
        let reclaimed = reclaimed_events(&fleet).await?;
        ensure!(
            reclaimed >= 1,
            "pod-kill: no event was claimed twice: no kill interrupted a tick in flight"
        );
        println!("FAULT pod-kill: targeted_kills={targeted} reclaimed_events={reclaimed}");
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
            let killed = checks::force_backends_terminated(&admin_pool, &fleet.db_name).await?;
            ensure!(
                !killed.is_empty(),
                "no backend of {} to terminate",
                fleet.db_name
            );
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

/// The crash points of a tick, in order (agent-pod's `fault::POINTS`).
const CRASH_POINTS: [&str; 5] = [
    "before_claim",
    "after_claim",
    "after_tool",
    "before_complete",
    "after_complete",
];

/// Whether a crash at `point` leaves a claimed, uncompleted event behind
/// (taken over later, so claimed twice). Before the claim nothing was
/// claimed; after the completion the event was already consumed.
fn crash_interrupts_a_claim(point: &str) -> bool {
    !matches!(point, "before_claim" | "after_complete")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_crashing_at_each_point_of_a_tick_loses_and_duplicates_nothing() -> anyhow::Result<()>
{
    if skipped() {
        return Ok(());
    }
    bounded(limit(300), async {
        // Round by round, every point in each: a soak stopped early has
        // run every point about as often.
        for round in 0..soak() {
            for point in CRASH_POINTS {
                crash_at(point, round).await?;
            }
        }
        Ok(())
    })
    .await
}

/// The opener the stand-in provider answers with: a greeting, a decision
/// put to the operator and a mission proposed, each through its tool in a
/// turn of its own, then the end of the episode.
const OPENER_GREETING: &str = "Hello, I am your orchestration agent.";

/// The opener's turns, each asked of the provider and paid once.
const OPENER_TURNS: usize = 4;

/// The strict Anthropic stand-in on `listen`, with a fresh key, scripted
/// with the opener's four turns: the greeting (`soa_send_message`), a
/// decision (`soa_propose_decision`), a mission (`soa_propose_task`), then
/// `phase_complete` (every later request gets its default `phase_complete`).
async fn opener_standin(
    listen: std::net::SocketAddr,
) -> anyhow::Result<(genesis_llm_standin::StandIn, String)> {
    use genesis_llm_standin::{Answer, Endpoint, Reply, StandIn};
    let key = format!("sk-ant-standin-{}", uuid::Uuid::new_v4().simple());
    let standin = StandIn::builder()
        .key(key.clone())
        .listen(listen)
        .start()
        .await?;
    standin.push(
        Endpoint::Anthropic,
        Answer::Reply(Reply::tool_call(
            "soa_send_message",
            serde_json::json!({"body": OPENER_GREETING}),
        )),
    );
    standin.push(
        Endpoint::Anthropic,
        Answer::Reply(Reply::tool_call(
            "soa_propose_decision",
            serde_json::json!({
                "title": "Which repository first?",
                "body": "Two repositories are in scope.",
                "options": ["api", "web"]
            }),
        )),
    );
    standin.push(
        Endpoint::Anthropic,
        Answer::Reply(Reply::tool_call(
            "soa_propose_task",
            serde_json::json!({
                "kind": "MissionResearch",
                "title": "Map the services",
                "description": "List the tenant's services and who owns each."
            }),
        )),
    );
    standin.push(
        Endpoint::Anthropic,
        Answer::Reply(Reply::tool_call(
            "phase_complete",
            serde_json::json!({"summary": "Greeted the operator, asked a decision, proposed a mission."}),
        )),
    );
    Ok((standin, key))
}

/// The provider requests of the SOA's opener (their objective names its
/// event), among every request the stand-in took.
fn opener_requests(standin: &genesis_llm_standin::StandIn) -> usize {
    standin
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains("EVENT: AgentInitialized"))
        .count()
}

/// The opener's effects after a fault, exactly once: the greeting, the
/// decision and the mission the first session made were answered from the
/// journal by the resumed episode, never made again; every turn the first
/// session was answered was replayed, so the provider saw each of the
/// opener's turns once and one paid attempt of each was recorded; and the
/// opener has one ledger turn. Returns what it counted.
async fn opener_once(
    fleet: &Fleet,
    standin: &genesis_llm_standin::StandIn,
    name: &str,
) -> anyhow::Result<OpenerEffects> {
    let turns = checks::count_turns_of_event_kind(&fleet.db, "AgentInitialized").await?;
    ensure!(turns == 1, "{name}: {turns} turns for the one opener");
    let greetings = checks::count_messages_to_operator_starting(&fleet.db, OPENER_GREETING).await?;
    ensure!(
        greetings == 1,
        "{name}: the greeting was sent {greetings} times"
    );
    let decisions = inspect::count_rows(&fleet.db, "attention_requests").await?;
    ensure!(
        decisions == 1,
        "{name}: {decisions} decisions put to the operator, not 1"
    );
    let missions = inspect::count_rows(&fleet.db, "missions").await?;
    ensure!(missions == 1, "{name}: {missions} missions proposed, not 1");
    let asked = opener_requests(standin);
    ensure!(
        asked == OPENER_TURNS,
        "{name}: the provider was asked {asked} times for the opener's {OPENER_TURNS} turns"
    );
    let paid =
        checks::count_successful_attempts_of_event_kind(&fleet.db, "AgentInitialized").await?;
    ensure!(
        paid == OPENER_TURNS as i64,
        "{name}: {paid} paid attempts recorded for the opener's {OPENER_TURNS} turns"
    );
    Ok(OpenerEffects {
        greetings,
        decisions,
        missions,
        asked,
    })
}

/// What [`opener_once`] counted, for the row's line.
struct OpenerEffects {
    greetings: i64,
    decisions: i64,
    missions: i64,
    asked: usize,
}

impl std::fmt::Display for OpenerEffects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "greetings={} decisions={} missions={} provider_requests={}",
            self.greetings, self.decisions, self.missions, self.asked
        )
    }
}

/// Wait until the SOA's opener has its ledger turn (an `Escalated` one:
/// the opener puts a decision to the operator).
async fn wait_opener(fleet: &Fleet, name: &str) -> anyhow::Result<()> {
    wait_for("the opener's turn", SETTLE, || {
        let turns = checks::count_turns_of_event_kind(&fleet.db, "AgentInitialized");
        async move { Ok((turns.await? >= 1).then_some(())) }
    })
    .await
    .with_context(|| format!("{name}: the opener was never completed"))
}

/// One round of one crash point: a fresh fleet at the chart's default
/// replica counts (two controls, two supervisors, two pods, each pod on
/// its own supervisor) whose pods are armed to abort at `point`; the one
/// that takes the first tick aborts (the marker lets only one), the other
/// may take the event over, and the dead one is restarted by hand, then
/// everything is checked. The fleet's provider is the strict Anthropic
/// stand-in, scripted with the opener's four turns (a greeting, a
/// decision, a mission, then `phase_complete`): after the crash the
/// resumed episode replays what the journal kept, so each effect happens
/// once and no turn is asked of the provider twice.
async fn crash_at(point: &str, round: usize) -> anyhow::Result<()> {
    let name = format!("crash-{}", point.replace('_', "-"));
    let logs = log_dir(&format!("faults-{name}-{round}"))?;
    let marker = logs.join(format!("{point}.fired"));
    let _ = std::fs::remove_file(&marker);
    let (standin, key) = opener_standin(([127, 0, 0, 1], 0).into()).await?;
    let mut opts = FleetOptions::new(&format!("faults-{name}-{round}-fleet"), 2);
    opts.controls = 2;
    opts.supervisors = 2;
    opts.lease_ttl_secs = 3;
    opts.provider = "anthropic".into();
    opts.extra_env.extend([
        ("ANTHROPIC_BASE_URL".to_owned(), standin.base_url()),
        ("ANTHROPIC_API_KEY".to_owned(), key.clone()),
        (
            "GENESIS_FAULT_EXIT_AT".to_owned(),
            format!("{point}:{}", marker.display()),
        ),
    ]);
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
    let asked_before_restart = opener_requests(&standin);
    // Restart it (the marker disarms it) and let the fleet recover.
    let restarted = fleet.restart_dead_pods().await?;
    ensure!(
        restarted == 1,
        "{name}: {restarted} pods died at {point}, not one"
    );
    wait_opener(&fleet, &name).await?;
    let sent = burst(&fleet, &[(tenant.clone(), soa.clone())], 0).await?;
    // One round per fleet: the reliability script sums `rounds=` over lines.
    let s = settle(&mut fleet, &name, 1, sent).await?;
    // The crash happened where it was named: only a crash between a claim
    // and its completion leaves an event to be claimed a second time.
    let reclaimed = reclaimed_events(&fleet).await?;
    if crash_interrupts_a_claim(point) {
        ensure!(
            reclaimed >= 1,
            "{name}: no event was claimed twice, yet the pod died holding a claim"
        );
    } else {
        ensure!(
            reclaimed == 0,
            "{name}: {reclaimed} events claimed twice, yet the pod died holding no claim"
        );
    }
    let opener = opener_once(&fleet, &standin, &name)
        .await
        .with_context(|| format!("{asked_before_restart} provider requests before the crash"))?;
    println!(
        "FAULT {name}: round={round} reclaimed_events={reclaimed} {opener} asked_before_the_crash={asked_before_restart}"
    );
    ensure!(
        s.dead_lettered == 0,
        "{name}: {} dead-lettered",
        s.dead_lettered
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_event_is_dead_lettered_while_the_tenants_other_agents_keep_ticking()
-> anyhow::Result<()> {
    poison_case(Poison::Crashes).await
}

/// The same, for a tick that fails without crashing the pod (the pod NAKs
/// it as if the supervisor were unavailable, every time): the lease it left
/// expires, the event is retried to the limit and set aside, and no pod dies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_that_always_fails_is_dead_lettered_and_no_pod_dies() -> anyhow::Result<()> {
    poison_case(Poison::Fails).await
}

/// How the poison event breaks its tick.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Poison {
    /// `GENESIS_FAULT_EXIT_ON`: the pod aborts after claiming it.
    Crashes,
    /// `GENESIS_FAULT_FAIL_ON`: the pod fails the tick and NAKs it.
    Fails,
}

async fn poison_case(poison: Poison) -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(limit(180), async {
        let (name, var) = match poison {
            Poison::Crashes => ("faults-poison", "GENESIS_FAULT_EXIT_ON"),
            Poison::Fails => ("faults-poison-fail", "GENESIS_FAULT_FAIL_ON"),
        };
        let mut opts = FleetOptions::new(name, 2);
        opts.lease_ttl_secs = 2;
        opts.max_attempts = 3;
        opts.extra_env.push((var.into(), "POISON-PILL".into()));
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
        let mut restarts = 0;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        let dead_lettered = loop {
            // Restart whatever died; keep the other agent busy meanwhile.
            restarts += fleet.restart_dead_pods().await?;
            if healthy_sent < 5 {
                fleet.send(&tenant, &comp, &format!("status {healthy_sent}")).await?;
                healthy_sent += 1;
            }
            let n = checks::count_dead_lettered_with_body(&fleet.db, "POISON-PILL").await?;
            if n == 1 {
                break true;
            }
            if tokio::time::Instant::now() > deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        ensure!(dead_lettered, "the poison event was never dead-lettered");
        restarts += fleet.restart_dead_pods().await?;
        match poison {
            Poison::Crashes => ensure!(restarts > 0, "the poison never crashed a pod"),
            Poison::Fails => ensure!(restarts == 0, "{restarts} pods died on a failing tick"),
        }
        let attempts = checks::attempts_of_event_with_body(&fleet.db, "POISON-PILL").await?;
        ensure!(attempts == 3, "dead-lettered after {attempts} attempts, expected the configured 3");
        let attention = inspect::count_attention_requests_of_kind(&fleet.db, "dead_letter").await?;
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
            "FAULT {}: attempts={attempts} events={} consumed={} dead_lettered={} pod_restarts={restarts} ok; the other agent acknowledged {healthy_sent} messages",
            if poison == Poison::Crashes { "poison" } else { "poison-fail" },
            s.events, s.consumed, s.dead_lettered
        );
        Ok(())
    })
    .await
}

/// Assert `check_invariants` refuses the fleet's current state, naming
/// `what` in its message.
async fn refused(fleet: &Fleet, case: &str, what: &str) -> anyhow::Result<()> {
    match fleet.check_invariants().await {
        Ok(s) => anyhow::bail!("checker: {case} passed the invariants ({s:?})"),
        Err(e) => {
            let msg = format!("{e:#}");
            ensure!(
                msg.contains(what),
                "checker: {case} refused for another reason: {msg}"
            );
            Ok(())
        }
    }
}

/// The checker the fault tests rely on fails on each broken invariant it
/// names, including the ones a count comparison or a TTL grace let through:
/// a dead letter covered only by another event's request, an operator
/// message left pending beside the heartbeat, and a lease just past its
/// expiry. Each breakage is written into a quiescent fleet's database (its
/// pod stopped, so nothing repairs it) and undone before the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_invariant_checker_refuses_each_broken_invariant() -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(limit(90), async {
        let mut opts = FleetOptions::new("faults-checker", 1);
        opts.lease_ttl_secs = 3;
        let mut fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("checked").await?;
        let soa = fleet.wait_soa(&tenant, Duration::from_secs(30)).await?;
        fleet
            .wait_decision(&soa, 0, "Initialized", Duration::from_secs(30))
            .await?;
        fleet.wait_quiescent(SETTLE).await?;
        fleet.kill_pod(0);
        fleet
            .check_invariants()
            .await
            .context("the untouched fleet")?;
        let soa_id: uuid::Uuid = soa.parse()?;
        let tenant_id: uuid::Uuid = tenant.parse()?;
        let db = &fleet.db;

        // A dead letter whose only dead_letter request names another event:
        // the counts agree (one and one), the join does not.
        let now = chrono::Utc::now;
        let dead =
            checks::fixture_event(db, tenant_id, soa_id, "OperatorMessage", now(), Some(now()))
                .await?;
        let elsewhere =
            checks::fixture_dead_letter_request(db, tenant_id, soa_id, uuid::Uuid::new_v4())
                .await?;
        refused(
            &fleet,
            "a dead letter with another event's request",
            "without exactly one dead_letter attention request",
        )
        .await?;
        checks::fixture_delete_attention_request(db, elsewhere).await?;
        let own = checks::fixture_dead_letter_request(db, tenant_id, soa_id, dead).await?;
        fleet
            .check_invariants()
            .await
            .context("a dead letter with its own request")?;
        checks::fixture_delete_attention_request(db, own).await?;
        checks::fixture_delete_event(db, dead).await?;

        // An operator message pending beside the heartbeat (not yet due, so
        // quiescence alone would not notice it).
        let stray = checks::fixture_event(
            db,
            tenant_id,
            soa_id,
            "OperatorMessage",
            now() + chrono::Duration::hours(1),
            None,
        )
        .await?;
        refused(
            &fleet,
            "a pending operator message",
            "other than their heartbeat",
        )
        .await?;
        checks::fixture_delete_event(db, stray).await?;

        // An event consumed without its ledger turn (invariant 3).
        let orphan = checks::fixture_consumed_event_without_turn(db, tenant_id, soa_id).await?;
        refused(
            &fleet,
            "a consumed event without its turn",
            "!= consumed events",
        )
        .await?;
        checks::fixture_delete_event(db, orphan).await?;

        // An active instance left without its pending heartbeat (invariant 2's
        // other half: exactly one, not at most one).
        let heartbeat = checks::force_pending_heartbeat_dead_lettered(db, soa_id).await?;
        refused(
            &fleet,
            "no pending heartbeat",
            "without exactly one pending heartbeat",
        )
        .await?;
        checks::force_dead_letter_undone(db, heartbeat).await?;

        // A lease one second past its expiry, within the old TTL grace.
        checks::force_stale_lease(db, soa_id).await?;
        refused(&fleet, "an expired lease", "leases held past their expiry").await?;
        inspect::force_lease_released(db, soa_id).await?;

        fleet
            .check_invariants()
            .await
            .context("every breakage undone")?;
        println!("FAULT checker: 5 breakages refused, the repaired fleet accepted ok");
        Ok(())
    })
    .await
}

/// A network namespace for a partition row, or the one line saying why this
/// machine cannot make one (not root, no iproute2). Under `CI=true` the
/// suite runs as root, so a namespace that cannot be made fails the row
/// instead of letting it pass unrun.
fn namespace_or_skip(row: &str) -> anyhow::Result<Option<genesis_e2e::netns::NetNs>> {
    match genesis_e2e::netns::NetNs::create() {
        Ok(ns) => Ok(Some(ns)),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            Err(e.context(format!("{row}: CI=true runs the partition rows")))
        }
        Err(e) => {
            println!("SKIP {row}: cannot make a network namespace here ({e:#})");
            Ok(None)
        }
    }
}

/// The pod cut from the supervisor (and from everything else) in the middle
/// of a tick, right after its tool call: the pod runs in a network
/// namespace whose only link to the host the test takes down while the pod
/// is held just after the call. Its lease runs out; a pod on the host takes
/// the event over and resumes the journaled episode; the link comes back
/// and the cut pod carries on. The provider is the strict Anthropic
/// stand-in: the greeting, the decision and the mission are each made once
/// and each of the opener's turns is asked of the provider once (the cut
/// pod's second request never left its namespace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_cut_from_the_supervisor_after_a_tool_call_is_taken_over_exactly_once()
-> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    let name = "partition-pod";
    let Some(ns) = namespace_or_skip(name)? else {
        return Ok(());
    };
    bounded(limit(180), async {
        for round in 0..soak() {
            partition_pod_round(name, &ns, round).await?;
        }
        Ok(())
    })
    .await
}

/// One round of the `partition-pod` row, on a fresh fleet.
async fn partition_pod_round(
    name: &str,
    ns: &genesis_e2e::netns::NetNs,
    round: usize,
) -> anyhow::Result<()> {
    let logs = log_dir(&format!("faults-{name}-{round}"))?;
    let marker = logs.join("after_tool.paused");
    let _ = std::fs::remove_file(&marker);
    let nats = NatsServer::start_listening(&logs, "0.0.0.0").await?;
    // On the link's host address: both sides reach it.
    let (standin, key) = opener_standin((ns.host_ip, 0).into()).await?;
    let mut opts = FleetOptions::new(&format!("faults-{name}-{round}-fleet"), 0);
    opts.lease_ttl_secs = 3;
    opts.provider = "anthropic".into();
    opts.nats_url = Some(nats.url());
    opts.supervisor_listen_any = true;
    opts.extra_env.extend([
        ("ANTHROPIC_BASE_URL".to_owned(), standin.base_url()),
        ("ANTHROPIC_API_KEY".to_owned(), key.clone()),
    ]);
    let mut fleet = Fleet::start(opts).await?;
    let cut = fleet
        .add_pod_in(
            ns,
            &format!("nats://{}:{}", ns.host_ip, nats.port),
            vec![(
                "GENESIS_FAULT_PAUSE_AT".into(),
                format!("after_tool:{}:8", marker.display()),
            )],
        )
        .await?;
    let tenant = fleet.create_tenant("partition").await?;
    let soa = fleet.wait_soa(&tenant, Duration::from_secs(30)).await?;
    wait_for(
        "the namespaced pod to be held after its tool call",
        Duration::from_secs(30),
        || {
            let held = marker.is_file();
            async move { Ok(held.then_some(())) }
        },
    )
    .await?;
    ns.cut()?;
    let greeted = checks::count_messages_to_operator_starting(&fleet.db, OPENER_GREETING).await?;
    ensure!(
        greeted == 1,
        "{name}: the tool had not run when the link was cut"
    );
    // A pod on the host takes the event over once the lease runs out.
    let host = fleet.add_pod().await?;
    ensure!(host != cut);
    wait_opener(&fleet, name).await?;
    // The cut pod's hold ends while it is still cut off: its next turn
    // finds no route to the provider and the tick is given up. Only
    // then does the link come back.
    let log = fleet.logs.join(format!("agent-pod-{cut}.log"));
    wait_for(
        "the cut pod to give its tick up after the hold",
        Duration::from_secs(90),
        || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let after = text
                .split_once("resuming after the pause")
                .map(|(_, rest)| rest.contains("NAK"));
            async move { Ok(after.unwrap_or(false).then_some(())) }
        },
    )
    .await?;
    ns.heal()?;
    let sent = burst(&fleet, &[(tenant.clone(), soa.clone())], 0).await?;
    let s = settle(&mut fleet, name, 1, sent).await?;
    let reclaimed = reclaimed_events(&fleet).await?;
    ensure!(reclaimed >= 1, "{name}: the opener was never taken over");
    let opener = opener_once(&fleet, &standin, name).await?;
    ensure!(
        s.dead_lettered == 0,
        "{name}: {} dead-lettered",
        s.dead_lettered
    );
    println!("FAULT {name}: round={round} reclaimed_events={reclaimed} {opener}");
    drop(fleet);
    drop(nats);
    Ok(())
}

/// Wait until `instance` has `n` operator messages answered.
async fn wait_answered(fleet: &Fleet, instance: &str, n: i64, what: &str) -> anyhow::Result<()> {
    wait_for(what, Duration::from_secs(60), || {
        let answered = fleet.answered_messages(instance);
        async move { Ok((answered.await? == n).then_some(())) }
    })
    .await
}

/// Whether this machine can cut a namespace one way (`nft`, nftables), or
/// the one line saying why not; as [`namespace_or_skip`], a row that cannot
/// run fails under `CI=true`.
fn one_way_cut_or_skip(row: &str) -> anyhow::Result<bool> {
    let found = std::process::Command::new("nft")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    match found {
        true => Ok(true),
        false if std::env::var("CI").as_deref() == Ok("true") => anyhow::bail!(
            "{row}: CI=true runs the partition rows, and `nft` (nftables) is missing \
             (scripts/services.sh installs it as root)"
        ),
        false => {
            println!("SKIP {row}: no `nft` (nftables) here to cut a namespace one way");
            Ok(false)
        }
    }
}

/// Control cut from NATS between a publish and its mark: control runs in a
/// network namespace where every segment from NATS is dropped, so what it
/// publishes reaches the stream and the ack never comes back. The event
/// stays unmarked: control gives the connection up after the ack timeout
/// and cannot connect again while cut (the server's answers are lost too).
/// Once the cut heals, control connects and publishes the event again, the
/// stream drops that copy as a duplicate (its duplicate window keeps one
/// per message id), the event is marked, and the one pod answers it once.
/// A second message is cut the same way while the pod runs: the pod answers
/// it from the stream before control ever sees the ack, and control,
/// healed, does not publish an event already consumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_cut_from_nats_between_publish_and_mark_publishes_once() -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    let name = "partition-control";
    let Some(ns) = namespace_or_skip(name)? else {
        return Ok(());
    };
    if !one_way_cut_or_skip(name)? {
        return Ok(());
    }
    bounded(limit(180), async {
        let logs = log_dir(&format!("faults-{name}"))?;
        let nats = NatsServer::start_listening(&logs, "0.0.0.0").await?;
        let mut opts = FleetOptions::new(&format!("faults-{name}-fleet"), 1);
        opts.nats_url = Some(nats.url());
        // A lost ack is given up quickly, so control publishes the same
        // event again several times while cut.
        opts.process_env.push((
            "control".into(),
            "GENESIS_PUBLISH_ACK_TIMEOUT_MS".into(),
            "1000".into(),
        ));
        let mut fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("partition").await?;
        let soa = fleet.wait_soa(&tenant, Duration::from_secs(30)).await?;
        fleet
            .wait_decision(&soa, 0, "Initialized", SETTLE)
            .await
            .with_context(|| format!("{name}: the opener was never completed"))?;

        // Control moves into the namespace: NATS at the link's host end,
        // PostgreSQL through a relay there.
        let pg = genesis_e2e::database_addr(&fleet.service_db_url)?;
        let relay = genesis_e2e::netns::Relay::start((ns.host_ip, 0).into(), pg).await?;
        let db_url = genesis_e2e::with_database_addr(&fleet.service_db_url, relay.addr)?;
        let nats_in_ns = format!("nats://{}:{}", ns.host_ip, nats.port);
        fleet.move_control_into(&ns, &nats_in_ns, &db_url).await?;

        let rounds = soak();
        let mut ids = Vec::new();
        let mut lost_acks = 0.0;
        for round in 0..rounds {
            let before = 3 * round as i64;
            // 0. A message published, marked and answered over the whole
            // link: control is connected before the cut.
            let probe = fleet.send(&tenant, &soa, &format!("round {round}: before the cut")).await?;
            wait_for("the probe to be marked", Duration::from_secs(60), || {
                let at = checks::event_published_at(&fleet.db, probe);
                async move { Ok(at.await?.map(|_| ())) }
            })
            .await?;
            wait_answered(&fleet, &soa, before + 1, "the probe's answer").await?;

            // 1. No pod runs: the copy waits in the stream.
            fleet.terminate("agent-pod-0", Duration::from_secs(30)).await?;
            let errors_before = fleet
                .counter("control", "genesis_outbox_publish_errors_total")
                .await?;
            ns.drop_inbound_from(nats.port)?;
            let first = fleet
                .send(&tenant, &soa, &format!("round {round}: while control's acks are lost"))
                .await?;
            wait_for(
                "the cut control's publish to reach the stream",
                Duration::from_secs(30),
                || {
                    let copies = fleet.stream_copies(first);
                    async move { Ok((copies.await? == 1).then_some(())) }
                },
            )
            .await?;
            // Past several ack timeouts: the ack is lost, and nothing is marked.
            tokio::time::sleep(Duration::from_secs(4)).await;
            let errors = fleet
                .counter("control", "genesis_outbox_publish_errors_total")
                .await?;
            ensure!(
                errors > errors_before,
                "{name}: control reported no lost ack while cut ({errors_before} then {errors})"
            );
            lost_acks += errors - errors_before;
            ensure!(
                checks::event_published_at(&fleet.db, first).await?.is_none(),
                "{name}: an event was marked published with its ack lost"
            );
            let copies = fleet.stream_copies(first).await?;
            ensure!(copies == 1, "{name}: {copies} copies of one event in the stream while cut");
            ns.allow_inbound()?;
            wait_for(
                "the healed control to mark the event",
                Duration::from_secs(60),
                || {
                    let at = checks::event_published_at(&fleet.db, first);
                    async move { Ok(at.await?.map(|_| ())) }
                },
            )
            .await?;
            let copies = fleet.stream_copies(first).await?;
            ensure!(copies == 1, "{name}: {copies} copies of one event after the heal");
            fleet.start_pod(0).await?;
            wait_answered(&fleet, &soa, before + 2, "the restarted pod's answer").await?;

            // 2. The pod runs: it answers from the stream while the ack is
            // still lost.
            ns.drop_inbound_from(nats.port)?;
            let second = fleet
                .send(&tenant, &soa, &format!("round {round}: while control's acks are lost, again"))
                .await?;
            wait_answered(&fleet, &soa, before + 3, "the answer while control is cut").await?;
            ensure!(
                checks::event_published_at(&fleet.db, second).await?.is_none(),
                "{name}: the second event was marked published with its ack lost"
            );
            ns.allow_inbound()?;
            ids.extend([probe, first, second]);
        }
        let sent = ids.len();
        let s = settle(&mut fleet, name, rounds, sent).await?;
        let answered = fleet.answered_messages(&soa).await?;
        ensure!(answered == sent as i64, "{name}: {answered} turns for {sent} messages");
        for id in ids {
            let copies = fleet.stream_copies(id).await?;
            ensure!(copies == 0, "{name}: event {id} is in the stream again after its turn");
        }
        let reclaimed = reclaimed_events(&fleet).await?;
        ensure!(reclaimed == 0, "{name}: {reclaimed} events claimed twice");
        ensure!(s.dead_lettered == 0, "{name}: {} dead-lettered", s.dead_lettered);
        println!(
            "FAULT {name}: lost_acks_while_cut={lost_acks} answered={answered} copies_in_stream_while_cut=1"
        );
        drop(fleet);
        drop(relay);
        drop(nats);
        Ok(())
    })
    .await
}
