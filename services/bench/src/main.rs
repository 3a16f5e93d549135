//! `genesis-bench`: the end-to-end benchmark of the tick path. It starts a
//! real fleet through the `genesis-e2e` harness (control, supervisor and agent
//! pods as child processes on a fresh database and a private stream), drives
//! it by enqueueing events with the SQL function `genesis_enqueue_event` from
//! this process, and reports every figure of one run: sustained ticks/s by
//! tenants and pods, wake latency at half the measured maximum, `pgbench -N`
//! on the same server, the idle fleet's CPU and query rate, resident memory,
//! a peer queue (graphile-worker), the plans of the hot queries, and the $
//! per tick of a three-turn episode for every priced model, with and without
//! prompt caching (computed from `llm_pricing` and the fleet's prompt sizes;
//! see `cost`).
//!
//! It must never touch what it did not create: only its own fleet database,
//! its scratch pgbench database and its own children, and of the server only
//! its `autovacuum`, on for the run and put back (see `autovacuum`). `--quick` asserts that
//! the run completed, its counts add up and the services' memory stayed
//! bounded under the backlog, never a speed.

mod autovacuum;
mod cost;
mod peer;
mod procs;
mod report;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use genesis_e2e::{Fleet, FleetOptions};
use genesis_store::{bench, inspect};
use sqlx::postgres::PgPool;
use uuid::Uuid;

use crate::report::{Check, LatencyFigures, Report, ThroughputRow};

/// The event kind the benchmark enqueues: it reaches the scripted provider's
/// catch-all rule (one `phase_complete`), so a tick is the protocol's cost
/// and not a tool's.
const BENCH_KIND: &str = "ExternalSignalReceived";
/// The publisher's back-pressure limit and batch in every run (the shipped
/// defaults).
const BACKLOG_MAX_PENDING: u64 = 100_000;
const BACKLOG_BATCH: u64 = 256;
/// The back-pressure window reads memory every 500 ms and counts the
/// published-unconsumed events every this many reads.
const BACKLOG_COUNT_EVERY: usize = 5;

/// Statements this process sent to the fleet database (each its own
/// transaction), subtracted from the server's commit counts so the figures
/// are the services' own.
static BENCH_STATEMENTS: AtomicU64 = AtomicU64::new(0);

fn counted() {
    BENCH_STATEMENTS.fetch_add(1, Ordering::Relaxed);
}

/// Write transactions of one tick: enqueue, claim, complete (the outbox mark
/// is batched across events and not counted per tick).
const WRITES_PER_TICK: f64 = 3.0;

#[derive(Debug, Parser)]
#[command(
    name = "genesis-bench",
    about = "End-to-end benchmarks of Genesis Agents"
)]
struct Args {
    /// A few seconds with small numbers; checks that counts add up, never a speed.
    #[arg(long)]
    quick: bool,
    /// Where the report (report.md, report.json) goes.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// Run only the throughput matrix and its count checks (for comparing
    /// builds); the report then has no latency, idle, peer or back-pressure
    /// figures.
    #[arg(long)]
    throughput_only: bool,
    /// Tenants per throughput row, comma-separated (default: 1,10,100; quick: 1,2).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=1000))]
    tenants: Option<Vec<u32>>,
    /// Most agent pods in the matrix (rows run with 1 up to this many; default 4, quick 2).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16))]
    pods: Option<u32>,
    /// Leave the database server's `autovacuum` as it is. Without it a full
    /// or throughput-only run turns it on for the run when the server has
    /// it off, as a deployment runs, and puts it back after; the quick mode
    /// never changes it.
    #[arg(long)]
    autovacuum_as_is: bool,
}

/// The sizes of one run.
#[derive(Debug, Clone)]
struct Plan {
    tenants: Vec<usize>,
    pods: usize,
    window: Duration,
    warmup: Duration,
    idle_instances: i64,
    idle_window: Duration,
    /// Each per-process window of the idle fleet (the other service
    /// stopped), and the wait before it for the stopped process's database
    /// backends to flush their statistics (PostgreSQL flushes an idle
    /// backend's within 10 s).
    idle_split_window: Duration,
    idle_split_settle: Duration,
    pgbench_secs: u32,
    peer_jobs: u64,
    backlog_events: i64,
    backlog_window: Duration,
    throughput_only: bool,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                tenants: vec![1, 2],
                pods: 2,
                window: Duration::from_millis(1500),
                warmup: Duration::from_millis(300),
                idle_instances: 1_000,
                idle_window: Duration::from_secs(3),
                idle_split_window: Duration::from_secs(1),
                idle_split_settle: Duration::ZERO,
                pgbench_secs: 1,
                peer_jobs: 0,
                backlog_events: 3_000,
                backlog_window: Duration::from_secs(3),
                throughput_only: false,
            }
        } else {
            Plan {
                tenants: vec![1, 10, 100],
                pods: 4,
                window: Duration::from_secs(10),
                warmup: Duration::from_secs(2),
                idle_instances: 100_000,
                idle_window: Duration::from_secs(60),
                idle_split_window: Duration::from_secs(30),
                idle_split_settle: Duration::from_secs(11),
                pgbench_secs: 10,
                peer_jobs: 50_000,
                backlog_events: 1_000_000,
                backlog_window: Duration::from_secs(60),
                throughput_only: false,
            }
        }
    }
}

fn progress(msg: &str) {
    eprintln!("[bench {}] {msg}", chrono::Utc::now().format("%H:%M:%S"));
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut plan = Plan::new(args.quick);
    if let Some(t) = &args.tenants {
        plan.tenants = t.iter().map(|&n| n as usize).collect();
    }
    if let Some(p) = args.pods {
        plan.pods = p as usize;
    }
    plan.throughput_only = args.throughput_only;
    let started = Instant::now();
    let mut fleet = start_fleet(args.quick).await?;
    let autovacuum =
        match autovacuum::prepare(&fleet.db, !args.quick && !args.autovacuum_as_is).await {
            Ok(a) => a,
            Err(e) => {
                fleet.shutdown();
                return Err(e.context("read the server's autovacuum setting"));
            }
        };
    if let autovacuum::Autovacuum::TurnedOn { .. } = autovacuum {
        progress(
            "the server's autovacuum is on for this run (it had it off); --autovacuum-as-is leaves it",
        );
    }
    let result = run(&mut fleet, &plan, args.quick).await;
    let restored = autovacuum::restore(&fleet.db, &autovacuum).await;
    fleet.shutdown();
    if let Err(e) = restored {
        eprintln!("bench: could not put the server's autovacuum back ({e}); set it by hand");
    }
    let mut report = result?;
    report
        .machine
        .push(("autovacuum".into(), autovacuum.describe()));
    report.total_secs = started.elapsed().as_secs_f64();
    std::fs::create_dir_all(&args.out).with_context(|| format!("create {}", args.out.display()))?;
    let md = report.markdown();
    std::fs::write(args.out.join("report.md"), &md)?;
    std::fs::write(
        args.out.join("report.json"),
        serde_json::to_string_pretty(&report.json())?,
    )?;
    println!("{md}");
    let failed: Vec<&Check> = report.checks.iter().filter(|c| !c.ok).collect();
    if !failed.is_empty() {
        for c in &failed {
            eprintln!("CHECK FAILED: {}", c.what);
        }
        bail!("{} check(s) failed", failed.len());
    }
    progress(&format!(
        "done in {:.1} s; report in {}",
        report.total_secs,
        args.out.display()
    ));
    Ok(())
}

async fn start_fleet(quick: bool) -> anyhow::Result<Fleet> {
    let threads = service_threads()?;
    if let Some(missing) = genesis_e2e::missing_binary() {
        bail!("{missing}");
    }
    progress(&format!(
        "starting the fleet from {}",
        genesis_e2e::bin_dir().display()
    ));
    let mut options = FleetOptions::new(if quick { "bench-quick" } else { "bench" }, 1);
    options.lease_ttl_secs = 30;
    // Where the consumer caps deliveries by the attempts limit, every
    // LEASE_HELD redelivery of a busy instance's message spends one of them;
    // attempts themselves only count successful claims, so a high limit
    // changes no dead-letter decision but keeps a queued instance's
    // messages from running out.
    options.max_attempts = 200;
    options.extra_env = vec![
        (
            "RUST_LOG".into(),
            std::env::var("GENESIS_BENCH_RUST_LOG").unwrap_or_else(|_| "warn".into()),
        ),
        // A tick of a busy instance waits for its predecessor's lease: a
        // short redelivery delay keeps that wait from dominating.
        ("GENESIS_LEASE_HELD_NAK_MS".into(), "20".into()),
        ("GENESIS_RETRY_NAK_MS".into(), "200".into()),
        // The shipped defaults, not the test harness's fast loops (a 1 s
        // bootstrap rescan over every tenant and a 500 ms outbox poll):
        // the idle figure is what a deployment pays.
        ("GENESIS_BOOTSTRAP_RESCAN_SECS".into(), "30".into()),
        ("GENESIS_OUTBOX_POLL_MS".into(), "5000".into()),
        (
            "GENESIS_OUTBOX_MAX_PENDING".into(),
            BACKLOG_MAX_PENDING.to_string(),
        ),
        ("GENESIS_OUTBOX_BATCH".into(), BACKLOG_BATCH.to_string()),
    ];
    // The pods' slots, the supervisor's statement batching and the
    // services' runtime threads, when the caller sets them (the harness
    // clears the children's environment, so they are passed on explicitly).
    for name in [
        "GENESIS_POD_CONCURRENCY",
        "GENESIS_STORE_BATCH_MAX",
        "GENESIS_STORE_BATCH_WORKERS",
        "GENESIS_STORE_BATCH_SHARED",
    ] {
        if let Ok(value) = std::env::var(name) {
            options.extra_env.push((name.into(), value));
        }
    }
    // One runtime thread per service unless the caller says otherwise, as a
    // cluster gives them: the chart limits each container to one CPU and
    // the runtime sizes itself from the cgroup's quota. On this bare machine
    // each would start one per core and wake the others for work a single
    // thread does.
    options
        .extra_env
        .push(("TOKIO_WORKER_THREADS".into(), threads.to_string()));
    Fleet::start(options).await
}

async fn run(fleet: &mut Fleet, plan: &Plan, quick: bool) -> anyhow::Result<Report> {
    let mut report = Report::new(quick, fleet.db_name.clone());
    report.machine = report::machine().await;

    let max_tenants = plan.tenants.iter().copied().max().unwrap_or(1);
    progress(&format!(
        "creating {max_tenants} tenants and waiting for their SOAs"
    ));
    let mut tenant_ids = Vec::new();
    for i in 0..max_tenants {
        let name = format!("bench-{i}-{}", genesis_e2e::suffix());
        tenant_ids.push(fleet.create_tenant(&name).await?);
    }
    let mut instances: Vec<(Uuid, Uuid)> = Vec::new();
    for t in &tenant_ids {
        let soa = fleet.wait_soa(t, Duration::from_secs(120)).await?;
        instances.push((t.parse()?, soa.parse()?));
    }
    fleet
        .wait_quiescent(Duration::from_secs(120))
        .await
        .context("initial ticks")?;
    let db = fleet.db.clone();

    // Throughput matrix: 1..=pods pods × tenants.
    let mut best: Option<ThroughputRow> = None;
    let mut seq = Arc::new(AtomicU64::new(0));
    for pods in 1..=plan.pods {
        if fleet.pod_count() < pods {
            fleet.add_pod().await?;
        }
        for &tenants in &plan.tenants {
            let targets = &instances[..tenants];
            progress(&format!(
                "throughput: {tenants} tenant(s), {pods} pod(s), {:?} window",
                plan.window
            ));
            let row = throughput(fleet, &db, targets, pods, plan, &seq).await?;
            progress(&format!(
                "  {:.1} ticks/s ({} ticks, {:.2} commits/tick, {:.2} row writes/tick, {:.2} LEASE_HELD/tick)",
                row.ticks_per_sec,
                row.ticks,
                row.commits_per_tick,
                row.rows_written_per_tick,
                row.lease_held_per_tick
            ));
            if best
                .as_ref()
                .is_none_or(|b| row.ticks_per_sec > b.ticks_per_sec)
            {
                best = Some(row.clone());
            }
            report.throughput.push(row);
        }
    }
    fleet
        .wait_quiescent(Duration::from_secs(120))
        .await
        .context("drain after throughput")?;
    count_checks(&db, &mut report, "throughput", seq.load(Ordering::SeqCst)).await?;

    // The $ per tick of a three-turn episode by model: computed from the
    // prices and the prompt sizes, so every mode reports it.
    progress("cost per tick: prices from llm_pricing, prompt sizes of the first SOA");
    let (tenant, soa) = instances[0];
    let costs = cost::figures(&db, tenant, soa).await?;
    let priced = inspect::count_rows(&db, "llm_pricing").await?;
    report.checks.push(Check::new(
        i64::try_from(costs.rows.len()).is_ok_and(|n| n == priced) && priced > 0,
        format!(
            "cost per tick: one row per llm_pricing row ({} of {priced})",
            costs.rows.len()
        ),
    ));
    report.cost = Some(costs);
    if plan.throughput_only {
        report.best = best;
        return Ok(report);
    }

    // Wake latency at half the best rate, on the best configuration's tenants.
    let best = best.context("no throughput run")?;
    report.best = Some(best.clone());
    let rate = (best.ticks_per_sec / 2.0).max(1.0);
    install_stamps(&db).await?;
    progress(&format!(
        "latency: open loop at {rate:.1} events/s over {} tenant(s)",
        best.tenants
    ));
    seq = Arc::new(AtomicU64::new(0));
    let lat_targets = &instances[..best.tenants];
    let window = Window::open(fleet, &db).await?;
    let t0 = Instant::now();
    let sent = open_loop(&db, lat_targets, rate, plan.window, &seq).await?;
    let secs = t0.elapsed().as_secs_f64();
    let seen = window.close(fleet, &db).await?;
    fleet
        .wait_quiescent(Duration::from_secs(120))
        .await
        .context("drain after latency")?;
    report.latency = Some(latency(&db, rate, sent, secs, seen).await?);
    count_checks(&db, &mut report, "latency", sent).await?;
    if let Some(l) = &report.latency {
        progress(&format!(
            "  visible→claim p50/p95/p99 {:.1}/{:.1}/{:.1} ms; enqueue→commit {:.1}/{:.1}/{:.1} ms",
            l.claim_ms[0],
            l.claim_ms[1],
            l.claim_ms[2],
            l.commit_ms[0],
            l.commit_ms[1],
            l.commit_ms[2]
        ));
    }
    let inv = fleet.check_invariants().await;
    report.checks.push(Check::new(
        inv.is_ok(),
        format!("fleet invariants hold: {inv:?}"),
    ));

    // pgbench -N on the same server.
    progress(&format!("pgbench -N -c 4 -T {}", plan.pgbench_secs));
    match report::pgbench(plan.pgbench_secs).await {
        Ok(tps) => {
            report.pgbench_tps = Some(tps);
            report
                .checks
                .push(Check::new(tps > 0.0, "pgbench reported a TPS"));
        }
        Err(e) => report
            .checks
            .push(Check::new(false, format!("pgbench ran: {e:#}"))),
    }
    report.writes_per_tick = WRITES_PER_TICK;

    // Idle fleet.
    progress(&format!(
        "idle fleet: inserting {} instances on the daily heartbeat",
        plan.idle_instances
    ));
    let idle = idle_fleet(fleet, &db, plan).await?;
    report.checks.push(Check::new(
        idle.turns == 0,
        format!("no turn during the idle window ({})", idle.turns),
    ));
    report.checks.push(Check::new(
        idle.llm_calls == 0,
        format!("no LLM call during the idle window ({})", idle.llm_calls),
    ));
    report.idle = Some(idle);

    // Plans of the hot queries, on the populated database.
    progress("EXPLAIN (ANALYZE, BUFFERS) of the hot queries");
    report.explains = report::explains(&db).await?;

    // Back-pressure: the last fleet section (its backlog is never drained).
    progress(&format!(
        "back-pressure: inserting {} due events",
        plan.backlog_events
    ));
    let backlog = backlog_window(fleet, &db, plan).await?;
    report.checks.push(Check::new(
        backlog.events == plan.backlog_events,
        format!(
            "{} backlog events inserted of {}",
            backlog.events, plan.backlog_events
        ),
    ));
    report.checks.push(Check::new(
        backlog.max_in_stream <= (backlog.max_pending + backlog.batch + backlog.in_flight) as i64,
        format!(
            "published-unconsumed stayed within the limit, a batch and the pods' slots ({} <= {} + {} + {})",
            backlog.max_in_stream, backlog.max_pending, backlog.batch, backlog.in_flight
        ),
    ));
    // Memory during the backlog, against the same services' idle reading
    // taken before the backlog was inserted.
    let idle_rss = report
        .idle
        .as_ref()
        .map(|i| i.rss_kib.clone())
        .unwrap_or_default();
    report
        .checks
        .extend(report::backlog_memory_checks(&idle_rss, &backlog.rss_kib));
    report.backlog = Some(backlog);

    // The peer queue.
    if plan.peer_jobs > 0 {
        progress(&format!(
            "peer: graphile-worker, {} no-op jobs",
            plan.peer_jobs
        ));
        report.peer = Some(peer::graphile(plan.peer_jobs).await);
    }
    Ok(report)
}

/// Enqueue one bench event for each `(tenant, instance)` given, in one
/// statement (instance rows locked in id order, so it never deadlocks with
/// another enqueue).
async fn enqueue_batch(
    db: &PgPool,
    batch: &[(Uuid, Uuid)],
    run: &str,
    seq: &AtomicU64,
) -> anyhow::Result<u64> {
    if batch.is_empty() {
        return Ok(0);
    }
    let mut sorted = batch.to_vec();
    sorted.sort_by_key(|(_, i)| *i);
    let tenants: Vec<Uuid> = sorted.iter().map(|(t, _)| *t).collect();
    let insts: Vec<Uuid> = sorted.iter().map(|(_, i)| *i).collect();
    let first = seq.fetch_add(sorted.len() as u64, Ordering::SeqCst);
    counted();
    let outcomes =
        bench::enqueue_events(db, &tenants, &insts, BENCH_KIND, run, first as i64).await?;
    if let Some(bad) = outcomes.iter().find(|o| o.as_str() != "created") {
        bail!("enqueue answered {bad}");
    }
    Ok(outcomes.len() as u64)
}

/// Unconsumed bench events per instance of `targets`.
async fn backlog(
    db: &PgPool,
    targets: &[(Uuid, Uuid)],
) -> anyhow::Result<std::collections::HashMap<Uuid, i64>> {
    let ids: Vec<Uuid> = targets.iter().map(|(_, i)| *i).collect();
    counted();
    Ok(bench::pending_per_instance(db, &ids, BENCH_KIND)
        .await?
        .into_iter()
        .collect())
}

/// Keep every target instance's queue non-empty (topped up to `depth`).
fn spawn_feeder(
    db: PgPool,
    targets: Vec<(Uuid, Uuid)>,
    depth: i64,
    seq: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<anyhow::Result<u64>> {
    tokio::spawn(async move {
        let mut sent = 0u64;
        while !stop.load(Ordering::SeqCst) {
            let have = backlog(&db, &targets).await?;
            let mut batch = Vec::new();
            for (t, i) in &targets {
                let n = have.get(i).copied().unwrap_or(0);
                for _ in n..depth {
                    batch.push((*t, *i));
                }
            }
            for chunk in batch.chunks(100) {
                sent += enqueue_batch(&db, chunk, "throughput", &seq).await?;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(sent)
    })
}

/// The fleet database's counters so far, read in one statement.
struct DbCounters {
    /// Commits of the services: the server's `xact_commit` less this
    /// process's own statements.
    commits: i64,
    /// Rows inserted, updated and deleted.
    writes: i64,
    /// Autovacuum and autoanalyze runs on its tables: their transactions
    /// count in `xact_commit` too, and a freshly loaded idle fleet may draw some.
    autovacuum_runs: i64,
}

async fn db_counters(db: &PgPool) -> anyhow::Result<DbCounters> {
    counted();
    counted();
    let r = bench::server_counters(db).await?;
    let own = BENCH_STATEMENTS.load(Ordering::Relaxed) as i64;
    Ok(DbCounters {
        commits: r.xact_commit - own,
        writes: r.writes,
        autovacuum_runs: r.autovacuum_runs,
    })
}

/// A measured window's start: every process's CPU, the machine's busy time
/// and the fleet database's counters. The throughput rows and the latency
/// window read the same three at both ends; callers keep their own clocks.
struct Window {
    cpu: Vec<procs::ProcSample>,
    busy: Option<u64>,
    db: DbCounters,
}

/// What a [`Window`] saw between its two ends.
struct WindowDelta {
    /// CPU seconds per process.
    cpu_secs: Vec<(String, f64)>,
    /// The closing sample (its resident memory figures).
    cpu_end: Vec<procs::ProcSample>,
    /// The whole machine's busy CPU seconds (NaN where `/proc/stat` is unreadable).
    machine_busy_secs: f64,
    commits: i64,
    writes: i64,
    autovacuum_runs: i64,
}

impl Window {
    async fn open(fleet: &Fleet, db: &PgPool) -> anyhow::Result<Window> {
        let cpu = procs::sample(fleet);
        let busy = procs::machine_busy_ticks();
        let db = db_counters(db).await?;
        Ok(Window { cpu, busy, db })
    }

    async fn close(self, fleet: &Fleet, db: &PgPool) -> anyhow::Result<WindowDelta> {
        let d1 = db_counters(db).await?;
        let busy1 = procs::machine_busy_ticks();
        let cpu_end = procs::sample(fleet);
        Ok(WindowDelta {
            cpu_secs: procs::cpu_delta(&self.cpu, &cpu_end),
            cpu_end,
            machine_busy_secs: match (self.busy, busy1) {
                (Some(a), Some(b)) => procs::ticks_to_secs(b.saturating_sub(a)),
                _ => f64::NAN,
            },
            commits: d1.commits - self.db.commits,
            writes: d1.writes - self.db.writes,
            autovacuum_runs: d1.autovacuum_runs - self.db.autovacuum_runs,
        })
    }
}

async fn bench_turns(db: &PgPool) -> anyhow::Result<i64> {
    counted();
    Ok(bench::count_turns_of_kind(db, BENCH_KIND).await?)
}

async fn throughput(
    fleet: &Fleet,
    db: &PgPool,
    targets: &[(Uuid, Uuid)],
    pods: usize,
    plan: &Plan,
    seq: &Arc<AtomicU64>,
) -> anyhow::Result<ThroughputRow> {
    // One event in flight and one waiting per instance: the instance's
    // queue never runs dry between top-ups, and no more of its messages
    // than that wait on its lease.
    let depth = 2;
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = spawn_feeder(
        db.clone(),
        targets.to_vec(),
        depth,
        seq.clone(),
        stop.clone(),
    );
    tokio::time::sleep(plan.warmup).await;
    let window = Window::open(fleet, db).await?;
    let held0 = procs::claims(fleet, "lease_held").await;
    let n0 = bench_turns(db).await?;
    let t0 = Instant::now();
    tokio::time::sleep(plan.window).await;
    let n1 = bench_turns(db).await?;
    let elapsed = t0.elapsed().as_secs_f64();
    let held1 = procs::claims(fleet, "lease_held").await;
    let seen = window.close(fleet, db).await?;
    stop.store(true, Ordering::SeqCst);
    feeder.await??;
    let ticks = n1 - n0;
    let per = |d: i64| {
        if ticks > 0 {
            d as f64 / ticks as f64
        } else {
            0.0
        }
    };
    Ok(ThroughputRow {
        tenants: targets.len(),
        pods,
        ticks,
        secs: elapsed,
        ticks_per_sec: ticks as f64 / elapsed,
        commits_per_tick: per(seen.commits),
        rows_written_per_tick: per(seen.writes),
        lease_held_per_tick: per(i64::try_from(held1.saturating_sub(held0)).unwrap_or(i64::MAX)),
        cpu_secs: seen.cpu_secs,
        rss_kib: seen
            .cpu_end
            .iter()
            .filter(|s| !s.shared)
            .map(|s| (s.name.clone(), s.rss_kib))
            .collect(),
    })
}

/// After a drain: every bench event enqueued is in the queue, consumed, and
/// has exactly one ledger turn.
async fn count_checks(
    db: &PgPool,
    report: &mut Report,
    phase: &str,
    sent: u64,
) -> anyhow::Result<()> {
    let bench::RunCounts {
        events,
        consumed,
        dead_lettered: dead,
        turns,
    } = bench::run_counts(db, phase).await?;
    let sent = sent as i64;
    report.checks.push(Check::new(
        sent > 0,
        format!("{phase}: events were enqueued ({sent})"),
    ));
    report.checks.push(Check::new(
        events == sent,
        format!("{phase}: events stored {events} == enqueued {sent}"),
    ));
    report.checks.push(Check::new(
        consumed == sent,
        format!("{phase}: consumed {consumed} == enqueued {sent}"),
    ));
    report.checks.push(Check::new(
        turns == sent,
        format!("{phase}: ledger turns {turns} == enqueued {sent}"),
    ));
    report.checks.push(Check::new(
        dead == 0,
        format!("{phase}: dead-lettered {dead} == 0"),
    ));
    Ok(())
}

/// Bench-only instrumentation in the fleet's own database: the first claim
/// and the ledger insert of each event stamped with `clock_timestamp()` into
/// side tables (the stored rows' shapes stay as the services expect).
/// Installed after the throughput runs so they do not pay for it.
async fn install_stamps(db: &PgPool) -> anyhow::Result<()> {
    Ok(bench::install_stamps(db).await?)
}

/// Enqueue at `rate` events/s (open loop, round robin over `targets`) for
/// `window`; returns the number enqueued.
async fn open_loop(
    db: &PgPool,
    targets: &[(Uuid, Uuid)],
    rate: f64,
    window: Duration,
    seq: &AtomicU64,
) -> anyhow::Result<u64> {
    let start = Instant::now();
    let mut sent = 0u64;
    let mut next = 0usize;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    while start.elapsed() < window {
        tick.tick().await;
        let due = (start.elapsed().as_secs_f64() * rate) as u64;
        let n = due.saturating_sub(sent) as usize;
        let mut batch = Vec::with_capacity(n);
        for _ in 0..n {
            batch.push(targets[next % targets.len()]);
            next += 1;
        }
        // One event per instance per statement, so a batch never locks one
        // instance row twice.
        for chunk in batch.chunks(targets.len().max(1)) {
            sent += enqueue_batch(db, chunk, "latency", seq).await?;
        }
    }
    Ok(sent)
}

async fn latency(
    db: &PgPool,
    rate: f64,
    sent: u64,
    secs: f64,
    seen: WindowDelta,
) -> anyhow::Result<LatencyFigures> {
    let bench::StampedLatency {
        claim_ms: claim,
        commit_ms: commit,
        measured: n,
    } = bench::stamped_latency(db, "latency").await?;
    let three = |v: Option<Vec<f64>>| -> [f64; 3] {
        let v = v.unwrap_or_default();
        [
            v.first().copied().unwrap_or(f64::NAN),
            v.get(1).copied().unwrap_or(f64::NAN),
            v.get(2).copied().unwrap_or(f64::NAN),
        ]
    };
    Ok(LatencyFigures {
        rate,
        sent,
        measured: n,
        claim_ms: three(claim),
        commit_ms: three(commit),
        secs,
        cpu_secs: seen.cpu_secs,
        machine_busy_secs: seen.machine_busy_secs,
        autovacuum_runs: seen.autovacuum_runs,
    })
}

/// Insert the idle fleet in bulk, move every pending heartbeat a day out,
/// then measure the services' CPU, the database's commits and the pods' LLM
/// calls over the idle window.
async fn idle_fleet(
    fleet: &Fleet,
    db: &PgPool,
    plan: &Plan,
) -> anyhow::Result<report::IdleFigures> {
    // The benchmark's SOAs join the idle fleet: their heartbeats move a day
    // out too.
    bench::seed_idle_fleet(db, plan.idle_instances).await?;
    let total = bench::count_active_instances(db).await?;
    let pending = bench::count_pending_events(db).await?;
    // Let the publisher re-arm its timer on the new earliest visible_at.
    tokio::time::sleep(Duration::from_secs(2)).await;
    progress(&format!(
        "  {total} active instances, {pending} pending events; measuring {:?}",
        plan.idle_window
    ));
    let llm0 = procs::llm_calls(fleet).await;
    // The services' own spend: the shared servers are left out here.
    let services = |fleet: &Fleet| -> Vec<procs::ProcSample> {
        procs::sample(fleet)
            .into_iter()
            .filter(|s| !s.shared)
            .collect()
    };
    let cpu0 = services(fleet);
    let d0 = db_counters(db).await?;
    counted();
    let turns0 = bench::count_turns(db).await?;
    let t0 = Instant::now();
    tokio::time::sleep(plan.idle_window).await;
    let secs = t0.elapsed().as_secs_f64();
    let d1 = db_counters(db).await?;
    let cpu1 = services(fleet);
    let llm1 = procs::llm_calls(fleet).await;
    let turns1 = bench::count_turns(db).await?;
    counted();
    let connections = bench::client_connections(db).await?;
    let commits = (d1.commits - d0.commits).max(0);
    let commits_by_process = commits_by_process(fleet, db, plan).await?;
    let cpu = procs::cpu_delta(&cpu0, &cpu1);
    let cpu_total: f64 = cpu.iter().map(|(_, s)| s).sum();
    let figures = report::IdleFigures {
        instances: total,
        pending_events: pending,
        secs,
        cpu_secs: cpu,
        core_percent: 100.0 * cpu_total / secs,
        commits_per_min: commits as f64 * 60.0 / secs,
        turns: turns1 - turns0,
        llm_calls: llm1.saturating_sub(llm0),
        rss_kib: cpu1.iter().map(|s| (s.name.clone(), s.rss_kib)).collect(),
        connections,
        commits_by_process,
        autovacuum_runs: d1.autovacuum_runs - d0.autovacuum_runs,
    };
    progress(&format!(
        "  {:.3} % of one core, {:.0} commits/min, {} turns, {} LLM calls",
        figures.core_percent, figures.commits_per_min, figures.turns, figures.llm_calls
    ));
    Ok(figures)
}

/// Database commits per minute of control and of the supervisor apart, on
/// the idle fleet: each is measured alone while the other is stopped
/// (SIGSTOP, continued after its window). The pods never connect to the
/// database; the publisher runs inside control.
async fn commits_by_process(
    fleet: &Fleet,
    db: &PgPool,
    plan: &Plan,
) -> anyhow::Result<Vec<(String, f64)>> {
    let pid = |name: &str| {
        fleet
            .processes()
            .into_iter()
            .find(|p| p.name == name)
            .and_then(|p| p.pid)
            .with_context(|| format!("{name} is not running"))
    };
    let mut out = Vec::new();
    for (alone, stopped) in [("control", "supervisor"), ("supervisor", "control")] {
        let _held = procs::Stopped::new(pid(stopped)?)?;
        tokio::time::sleep(plan.idle_split_settle).await;
        let c0 = db_counters(db).await?.commits;
        let t0 = Instant::now();
        tokio::time::sleep(plan.idle_split_window).await;
        let c1 = db_counters(db).await?.commits;
        let per_min = (c1 - c0).max(0) as f64 * 60.0 / t0.elapsed().as_secs_f64();
        progress(&format!(
            "  {alone} alone ({stopped} stopped): {per_min:.0} commits/min"
        ));
        out.push((alone.to_owned(), per_min));
    }
    Ok(out)
}

/// Insert `plan.backlog_events` due events at once (spread over the idle
/// fleet's instances, ten deep), wake the publisher, and sample for
/// `plan.backlog_window`: how many events sit published but unconsumed (the
/// stream's share of the backlog, bounded by GENESIS_OUTBOX_MAX_PENDING) and
/// each service's resident memory.
async fn backlog_window(
    fleet: &Fleet,
    db: &PgPool,
    plan: &Plan,
) -> anyhow::Result<report::BacklogFigures> {
    const DEPTH: i64 = 10;
    let t0 = Instant::now();
    // The events, their instances' sequence counters and the wake-up in one
    // transaction: committed apart, the outbox could publish the events and
    // the supervisor claim them (locking instance rows in id order) while
    // the counter update still walked the same rows in another order, and
    // PostgreSQL broke the deadlock by failing one side.
    counted();
    let inserted = bench::insert_backlog(db, plan.backlog_events, DEPTH, BENCH_KIND).await?;
    let insert_secs = t0.elapsed().as_secs_f64();
    progress(&format!(
        "  {inserted} events in {insert_secs:.1} s; sampling {:?}",
        plan.backlog_window
    ));
    let start = Instant::now();
    let mut max_in_stream = 0i64;
    let mut samples = 0usize;
    let mut rss: Vec<(String, u64, u64)> = Vec::new();
    let mut round = 0usize;
    while start.elapsed() < plan.backlog_window {
        // The count reads the 100,000 published events of the backlog, about
        // 0.2 s of PostgreSQL's CPU each time: every half second it took a
        // fifth of the server from the fleet it measures. The publisher holds
        // the stream at its limit for seconds at a time, so a count every
        // fifth round still sees that plateau; memory is read every round.
        if round.is_multiple_of(BACKLOG_COUNT_EVERY) {
            counted();
            let in_stream = bench::count_published_unconsumed(db).await?;
            max_in_stream = max_in_stream.max(in_stream);
            samples += 1;
        }
        round += 1;
        for s in procs::sample(fleet).into_iter().filter(|s| !s.shared) {
            match rss.iter_mut().find(|(n, _, _)| *n == s.name) {
                Some(r) => r.2 = r.2.max(s.rss_kib),
                None => rss.push((s.name, s.rss_kib, s.rss_kib)),
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    counted();
    let consumed = bench::count_consumed_of_run(db, "backlog").await?;
    progress(&format!(
        "  most published-unconsumed {max_in_stream}, {consumed} consumed, {samples} samples"
    ));
    Ok(report::BacklogFigures {
        events: inserted,
        insert_secs,
        secs: start.elapsed().as_secs_f64(),
        max_pending: BACKLOG_MAX_PENDING,
        batch: BACKLOG_BATCH,
        in_flight: fleet.pod_count() as u64 * pod_slots(),
        max_in_stream,
        consumed,
        samples,
        rss_kib: rss,
    })
}

/// Runtime threads of each service (`TOKIO_WORKER_THREADS` in its
/// environment): `GENESIS_BENCH_SERVICE_THREADS`, else one, the CPU the Helm
/// chart's limits give each container. Checked before anything starts: the
/// services' runtime would panic on anything but a whole number above 0.
fn service_threads() -> anyhow::Result<usize> {
    match std::env::var_os("GENESIS_BENCH_SERVICE_THREADS") {
        None => Ok(1),
        Some(v) => v
            .to_str()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "GENESIS_BENCH_SERVICE_THREADS must be a whole number above 0, got {v:?}"
                )
            }),
    }
}

/// Ticks each pod runs at once: `GENESIS_POD_CONCURRENCY` when the bench
/// passes it on, otherwise the pods' default.
fn pod_slots() -> u64 {
    std::env::var("GENESIS_POD_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(genesis_core::DEFAULT_POD_CONCURRENCY as u64)
}
