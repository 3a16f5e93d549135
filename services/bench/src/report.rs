//! The figures of one benchmark run, the facts of the machine it ran on,
//! the `pgbench` and `EXPLAIN` probes, and the report rendered as Markdown
//! and JSON.
//!
//! It must never judge a speed as a failure: checks here are counts, and
//! bounds that hold on any machine (the backlog's memory), never a rate.

use std::fmt::Write as _;
use std::process::Command;

use anyhow::{Context as _, bail};
use genesis_store::bench;
use serde::Serialize;
use sqlx::postgres::PgPool;
use uuid::Uuid;

use crate::cost::CostFigures;
use crate::peer::PeerFigures;

/// A count that must add up.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Whether it held.
    pub ok: bool,
    /// What was compared.
    pub what: String,
}

impl Check {
    /// A check with its description.
    pub fn new(ok: bool, what: impl Into<String>) -> Check {
        Check {
            ok,
            what: what.into(),
        }
    }
}

/// One sustained-throughput window.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputRow {
    /// Tenants fed (one SOA each).
    pub tenants: usize,
    /// Agent pods running.
    pub pods: usize,
    /// Ledger turns committed in the window.
    pub ticks: i64,
    /// Window length.
    pub secs: f64,
    /// ticks / secs.
    pub ticks_per_sec: f64,
    /// Database commits per tick (pg_stat_database.xact_commit delta).
    pub commits_per_tick: f64,
    /// Rows inserted + updated + deleted per tick.
    pub rows_written_per_tick: f64,
    /// ClaimTick answers of LEASE_HELD per tick (a message of an instance
    /// whose previous tick still runs, NAKed and redelivered).
    pub lease_held_per_tick: f64,
    /// CPU seconds per service in the window.
    pub cpu_secs: Vec<(String, f64)>,
    /// VmRSS per service at the window's end (under load).
    pub rss_kib: Vec<(String, u64)>,
}

/// Wake latency at a fixed offered rate.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyFigures {
    /// Offered events/s.
    pub rate: f64,
    /// Events enqueued.
    pub sent: u64,
    /// Events with both stamps.
    pub measured: i64,
    /// visible_at → first claim, p50/p95/p99 ms.
    pub claim_ms: [f64; 3],
    /// enqueue → ledger turn committed, p50/p95/p99 ms.
    pub commit_ms: [f64; 3],
    /// The open loop's length, in seconds.
    pub secs: f64,
    /// CPU seconds per process over the open loop (services, servers, bench).
    pub cpu_secs: Vec<(String, f64)>,
    /// The whole machine's busy CPU seconds over the open loop: beside
    /// `cpu_secs`, what else ran while the latency was measured.
    pub machine_busy_secs: f64,
    /// Autovacuum and autoanalyze runs of the fleet database that ended in
    /// the open loop.
    pub autovacuum_runs: i64,
}

/// The idle fleet window.
#[derive(Debug, Clone, Serialize)]
pub struct IdleFigures {
    /// Active instances.
    pub instances: i64,
    /// Pending (unconsumed) events.
    pub pending_events: i64,
    /// Window length.
    pub secs: f64,
    /// CPU seconds per service.
    pub cpu_secs: Vec<(String, f64)>,
    /// All services' CPU as a percentage of one core.
    pub core_percent: f64,
    /// Database commits per minute on the fleet database.
    pub commits_per_min: f64,
    /// Ledger turns written in the window.
    pub turns: i64,
    /// LLM calls the pods made in the window.
    pub llm_calls: u64,
    /// VmRSS per service, idle.
    pub rss_kib: Vec<(String, u64)>,
    /// Connections to the fleet database at the window's end, by
    /// `application_name` (the services name theirs; the harness's pool,
    /// which the bench reads through, is `genesis-e2e`), the reading
    /// connection itself left out.
    pub connections: Vec<(String, i64)>,
    /// Database commits per minute of each service measured alone, the
    /// other stopped (control includes its publisher; pods never connect).
    pub commits_by_process: Vec<(String, f64)>,
    /// Autovacuum and autoanalyze runs in the window (PostgreSQL's own
    /// commits, counted in the fleet database's total).
    pub autovacuum_runs: i64,
}

/// The back-pressure window: a large due backlog inserted at once.
#[derive(Debug, Clone, Serialize)]
pub struct BacklogFigures {
    /// Due events inserted.
    pub events: i64,
    /// Seconds the insert took.
    pub insert_secs: f64,
    /// Window length.
    pub secs: f64,
    /// The publisher's limit (GENESIS_OUTBOX_MAX_PENDING) and batch.
    pub max_pending: u64,
    pub batch: u64,
    /// Messages the pods may hold delivered but unacknowledged (pods × slots).
    pub in_flight: u64,
    /// Most events published but not yet consumed, over the samples.
    pub max_in_stream: i64,
    /// Backlog events consumed in the window.
    pub consumed: i64,
    /// Counts of the published-unconsumed events taken (every fifth
    /// memory reading).
    pub samples: usize,
    /// VmRSS per service: (first sample, largest sample) in KiB.
    pub rss_kib: Vec<(String, u64, u64)>,
}

/// One query plan.
#[derive(Debug, Clone, Serialize)]
pub struct Explain {
    /// Which hot query.
    pub name: String,
    /// The statement.
    pub sql: String,
    /// EXPLAIN (ANALYZE, BUFFERS) output.
    pub plan: String,
    /// Whether the plan uses an index (no Seq Scan on the queue), and the
    /// one it must use where a statement names one.
    pub index_scan: bool,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `--quick`.
    pub quick: bool,
    /// The fleet database (dropped at the end).
    pub database: String,
    /// Machine facts.
    pub machine: Vec<(String, String)>,
    /// Throughput matrix.
    pub throughput: Vec<ThroughputRow>,
    /// The fastest configuration.
    pub best: Option<ThroughputRow>,
    /// Latency at half the best rate.
    pub latency: Option<LatencyFigures>,
    /// pgbench -N TPS.
    pub pgbench_tps: Option<f64>,
    /// Write transactions per tick used for the ratio.
    pub writes_per_tick: f64,
    /// Idle fleet.
    pub idle: Option<IdleFigures>,
    /// Back-pressure under a large due backlog.
    pub backlog: Option<BacklogFigures>,
    /// Hot query plans.
    pub explains: Vec<Explain>,
    /// The peer queue.
    pub peer: Option<PeerFigures>,
    /// The $ per tick of a three-turn episode, by priced model.
    pub cost: Option<CostFigures>,
    /// Count checks.
    pub checks: Vec<Check>,
    /// Wall time of the run.
    pub total_secs: f64,
}

fn sh(cmd: &str) -> String {
    Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// nproc, memory, CPU model, load average, PostgreSQL and NATS versions.
pub async fn machine() -> Vec<(String, String)> {
    vec![
        ("nproc".into(), sh("nproc")),
        (
            "cpu".into(),
            sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-"),
        ),
        (
            "memory".into(),
            sh("free -h | awk '/^Mem:/ {print $2\" total, \"$7\" available\"}'"),
        ),
        (
            "load average at start".into(),
            sh("cut -d' ' -f1-3 /proc/loadavg"),
        ),
        (
            "postgresql".into(),
            sh("psql -h 127.0.0.1 -U postgres -Atc 'show server_version' postgres"),
        ),
        ("nats-server".into(), sh("nats-server --version")),
    ]
}

/// `pgbench -i` on a scratch database, then `pgbench -N -c 4 -j 2 -T secs`;
/// returns the TPS (without initial connection time). Drops the database.
pub async fn pgbench(secs: u32) -> anyhow::Result<f64> {
    let db = format!("genesis_bench_pgbench_{:08x}", rand_suffix());
    let pg = ["-h", "127.0.0.1", "-U", "postgres"];
    let run = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new(args[0])
            .args(&args[1..])
            .output()
            .with_context(|| format!("run {}", args[0]))?;
        if !out.status.success() {
            bail!(
                "{args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    run(&[&["createdb"], &pg[..], &[db.as_str()]].concat())?;
    let result = (|| {
        run(&[&["pgbench"], &pg[..], &["-i", "-q", "-s", "1", db.as_str()]].concat())?;
        let t = secs.to_string();
        let out = run(&[
            &["pgbench"],
            &pg[..],
            &["-N", "-c", "4", "-j", "2", "-T", t.as_str(), db.as_str()],
        ]
        .concat())?;
        parse_tps(&out).with_context(|| format!("no tps line in pgbench output: {out}"))
    })();
    let _ = run(&[&["dropdb"], &pg[..], &["--if-exists", db.as_str()]].concat());
    result
}

fn rand_suffix() -> u32 {
    Uuid::new_v4().as_u128() as u32
}

/// The TPS of a pgbench summary (`tps = N (without initial connection time)`).
pub fn parse_tps(out: &str) -> Option<f64> {
    out.lines()
        .filter(|l| l.starts_with("tps = "))
        .find(|l| l.contains("without"))
        .or_else(|| out.lines().find(|l| l.starts_with("tps = ")))
        .and_then(|l| l.trim_start_matches("tps = ").split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// EXPLAIN (ANALYZE, BUFFERS) of claim's due-event stamp, the outbox
/// select, complete's guarded instance update, complete's heartbeat check,
/// complete's next turn number and the
/// bootstrap re-scan's census
/// (the one statement an idle control repeats per re-scan), each under the role and tenant
/// the services use (so row-level security is in the plan), rolled back.
pub async fn explains(db: &PgPool) -> anyhow::Result<Vec<Explain>> {
    let (tenant, instance) = bench::idle_fleet_instance(db)
        .await?
        .context("no idle-fleet instance to explain against")?;
    let mut out = Vec::new();
    for statement in &bench::HOT_STATEMENTS {
        let lines = bench::explain(db, statement, tenant, instance).await?;
        let plan = lines.join("\n");
        let index_scan = plan.contains("Index")
            && !plan.contains("Seq Scan on agent_event_queue")
            && statement.must_use.is_none_or(|index| plan.contains(index));
        out.push(Explain {
            name: statement.name.into(),
            sql: statement
                .sql
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            plan,
            index_scan,
        });
    }
    Ok(out)
}

fn kib(v: u64) -> String {
    format!("{:.1} MiB", v as f64 / 1024.0)
}

impl Report {
    /// An empty report.
    pub fn new(quick: bool, database: String) -> Report {
        Report {
            quick,
            database,
            machine: Vec::new(),
            throughput: Vec::new(),
            best: None,
            latency: None,
            pgbench_tps: None,
            writes_per_tick: 0.0,
            idle: None,
            backlog: None,
            explains: Vec::new(),
            peer: None,
            cost: None,
            checks: Vec::new(),
            total_secs: 0.0,
        }
    }

    /// ticks/s ÷ (pgbench TPS / writes per tick).
    pub fn pgbench_ratio(&self) -> Option<f64> {
        let tps = self.pgbench_tps?;
        let best = self.best.as_ref()?;
        (tps > 0.0 && self.writes_per_tick > 0.0)
            .then(|| best.ticks_per_sec / (tps / self.writes_per_tick))
    }

    /// Best ticks/s ÷ the peer's jobs/s in the same run (a tick is a
    /// planned LLM episode with a ledger turn; the peer's job is a no-op).
    pub fn peer_ratio(&self) -> Option<f64> {
        let peer = self.peer.as_ref().filter(|p| p.error.is_none())?;
        let best = self.best.as_ref()?;
        (peer.jobs_per_sec.is_finite() && peer.jobs_per_sec > 0.0)
            .then(|| best.ticks_per_sec / peer.jobs_per_sec)
    }

    /// The JSON form (report.json).
    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "pgbench_ratio".into(),
                serde_json::json!(self.pgbench_ratio()),
            );
            o.insert("peer_ratio".into(), serde_json::json!(self.peer_ratio()));
        }
        v
    }

    /// The Markdown form (report.md, also printed).
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# genesis-bench report{}\n",
            if self.quick {
                " (--quick: counts only, not speeds)"
            } else {
                ""
            }
        );
        let _ = writeln!(s, "## Machine\n");
        for (k, v) in &self.machine {
            let _ = writeln!(s, "- {k}: {v}");
        }
        let _ = writeln!(s, "- wall time of the run: {:.1} s\n", self.total_secs);
        let _ = writeln!(
            s,
            "## Sustained end-to-end ticks/s (enqueue via SQL genesis_enqueue_event from the bench)\n"
        );
        let _ = writeln!(
            s,
            "| tenants | pods | ticks | window s | ticks/s | service commits/tick | rows written/tick | LEASE_HELD claims/tick | CPU s (control / supervisor / pods / postgres / nats / bench) |"
        );
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for r in &self.throughput {
            let cpu = cpu_summary(&r.cpu_secs, true);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {cpu} |",
                r.tenants,
                r.pods,
                r.ticks,
                r.secs,
                r.ticks_per_sec,
                r.commits_per_tick,
                r.rows_written_per_tick,
                r.lease_held_per_tick
            );
        }
        if let Some(l) = &self.latency {
            let _ = writeln!(
                s,
                "\n## Wake latency at {:.1} events/s (half the best rate), {} events, {} measured\n",
                l.rate, l.sent, l.measured
            );
            let _ = writeln!(
                s,
                "| span | p50 ms | p95 ms | p99 ms |\n|---|---:|---:|---:|"
            );
            let _ = writeln!(
                s,
                "| visible_at → claim | {:.1} | {:.1} | {:.1} |",
                l.claim_ms[0], l.claim_ms[1], l.claim_ms[2]
            );
            let _ = writeln!(
                s,
                "| enqueue → turn committed | {:.1} | {:.1} | {:.1} |",
                l.commit_ms[0], l.commit_ms[1], l.commit_ms[2]
            );
            let fleet: f64 = l.cpu_secs.iter().map(|(_, v)| v).sum();
            let _ = writeln!(
                s,
                "\nCPU over the {:.1} s of enqueueing: the fleet, its servers and the bench {:.2} s ({}), \
                 the whole machine {:.2} s of its busy time, so {:.2} s elsewhere; {} autovacuum/autoanalyze runs of the fleet database ended in it.",
                l.secs,
                fleet,
                cpu_summary(&l.cpu_secs, true),
                l.machine_busy_secs,
                (l.machine_busy_secs - fleet).max(0.0),
                l.autovacuum_runs
            );
        }
        let _ = writeln!(s, "\n## pgbench on the same server\n");
        match (self.pgbench_tps, self.best.as_ref()) {
            (Some(tps), Some(best)) => {
                let _ = writeln!(s, "- `pgbench -N -c 4 -j 2` TPS: {tps:.0}");
                let _ = writeln!(
                    s,
                    "- writes per tick (write transactions: enqueue, claim, complete): {}",
                    self.writes_per_tick
                );
                let _ = writeln!(
                    s,
                    "- best ticks/s {:.1} ({} tenants, {} pods) ÷ (TPS / {}) = **{:.3}**",
                    best.ticks_per_sec,
                    best.tenants,
                    best.pods,
                    self.writes_per_tick,
                    self.pgbench_ratio().unwrap_or(f64::NAN)
                );
            }
            _ => {
                let _ = writeln!(s, "- not measured");
            }
        }
        if let Some(i) = &self.idle {
            let _ = writeln!(
                s,
                "\n## Idle fleet ({} active instances, {} pending events, {:.0} s)\n",
                i.instances, i.pending_events, i.secs
            );
            let _ = writeln!(
                s,
                "- CPU: {} = **{:.3} % of one core**",
                cpu_summary(&i.cpu_secs, false),
                i.core_percent
            );
            let _ = writeln!(
                s,
                "- database commits per minute (fleet database): {:.0}, with {} autovacuum/autoanalyze runs in the window",
                i.commits_per_min, i.autovacuum_runs
            );
            let alone: Vec<String> = i
                .commits_by_process
                .iter()
                .map(|(name, per_min)| format!("{name} {per_min:.0}"))
                .collect();
            let _ = writeln!(
                s,
                "- of them by process, each measured alone with the other stopped (SIGSTOP): {} (control includes its publisher; the pods never connect)",
                alone.join(", ")
            );
            let held: Vec<String> = i
                .connections
                .iter()
                .map(|(name, n)| {
                    format!("{} {n}", if name.is_empty() { "(unnamed)" } else { name })
                })
                .collect();
            let _ = writeln!(
                s,
                "- database connections held (by application_name): {}",
                held.join(", ")
            );
            let _ = writeln!(
                s,
                "- ledger turns in the window: {}; LLM calls (pod /metrics): {}",
                i.turns, i.llm_calls
            );
        }
        let _ = writeln!(
            s,
            "\n## Resident memory (VmRSS)\n\n| service | idle | under load |\n|---|---:|---:|"
        );
        let idle_rss = self
            .idle
            .as_ref()
            .map(|i| i.rss_kib.clone())
            .unwrap_or_default();
        let load_rss = self
            .best
            .as_ref()
            .map(|b| b.rss_kib.clone())
            .unwrap_or_default();
        for (name, v) in &idle_rss {
            let load = load_rss
                .iter()
                .find(|(n, _)| n == name)
                .map_or("-".into(), |(_, v)| kib(*v));
            let _ = writeln!(s, "| {name} | {} | {load} |", kib(*v));
        }
        if let Some(b) = &self.backlog {
            let _ = writeln!(
                s,
                "\n## Back-pressure ({} due events inserted in {:.1} s, {:.0} s window)\n",
                b.events, b.insert_secs, b.secs
            );
            let _ = writeln!(
                s,
                "- published but unconsumed, most seen over {} samples: **{}** (limit {} + batch {} + {} in the pods' hands)",
                b.samples, b.max_in_stream, b.max_pending, b.batch, b.in_flight
            );
            let _ = writeln!(s, "- backlog events consumed in the window: {}", b.consumed);
            let _ = writeln!(
                s,
                "\n| service | VmRSS at start | largest VmRSS |\n|---|---:|---:|"
            );
            for (name, first, most) in &b.rss_kib {
                let _ = writeln!(s, "| {name} | {} | {} |", kib(*first), kib(*most));
            }
        }
        if let Some(p) = &self.peer {
            let _ = writeln!(s, "\n## Peer: {}\n", p.name);
            match &p.error {
                Some(e) => {
                    let _ = writeln!(s, "- not measured: {e}");
                }
                None => {
                    let _ = writeln!(
                        s,
                        "- {} no-op jobs in {:.2} s = **{:.0} jobs/s**",
                        p.jobs, p.secs, p.jobs_per_sec
                    );
                    let _ = writeln!(
                        s,
                        "- latency (run_at → completed) p50/p95/p99: {:.1}/{:.1}/{:.1} ms (every job queued at once: the queue's drain time, not its wake latency)",
                        p.latency_ms[0], p.latency_ms[1], p.latency_ms[2]
                    );
                    if let (Some(r), Some(best)) = (self.peer_ratio(), self.best.as_ref()) {
                        let _ = writeln!(
                            s,
                            "- best ticks/s {:.1} ÷ the peer's jobs/s {:.0} = **{r:.3}**",
                            best.ticks_per_sec, p.jobs_per_sec
                        );
                    }
                }
            }
        }
        if let Some(c) = &self.cost {
            s.push_str(&cost_markdown(c));
        }
        let _ = writeln!(
            s,
            "\n## Hot query plans (EXPLAIN (ANALYZE, BUFFERS), {} instances)\n",
            self.idle.as_ref().map_or(0, |i| i.instances)
        );
        for e in &self.explains {
            let _ = writeln!(
                s,
                "### {} — {}\n\n`{}`\n\n```\n{}\n```\n",
                e.name,
                if e.index_scan {
                    "index scan"
                } else {
                    "NO index scan"
                },
                e.sql,
                e.plan
            );
        }
        let _ = writeln!(s, "## Count checks\n");
        for c in &self.checks {
            let _ = writeln!(s, "- [{}] {}", if c.ok { "x" } else { " " }, c.what);
        }
        s
    }
}

/// Dollars as the cost table shows them: `$0` for nothing, else to the
/// hundred-thousandth.
fn usd(v: f64) -> String {
    if v == 0.0 {
        "$0".into()
    } else {
        format!("${v:.5}")
    }
}

/// The cost section: the token assumptions, then one row per priced model.
pub fn cost_markdown(c: &CostFigures) -> String {
    let t = &c.tokens;
    let prompt: u64 =
        crate::cost::episode_usage(t, crate::cost::Caching::None, crate::cost::Tick::First)
            .iter()
            .map(|u| u.input_tokens)
            .sum();
    let output: u64 = t.calls.iter().sum();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n## $ per tick: a three-turn episode by model, with and without prompt caching\n"
    );
    let _ = writeln!(
        s,
        "Computed, not measured on this machine: the prices of this database's `llm_pricing` \
         and the sizes of what the fleet sends for one tick of an SOA in its Strategic mode, \
         in tokens estimated as bytes / 4 (no tokenizer ships here, so every figure is an estimate).\n"
    );
    let _ = writeln!(
        s,
        "- prefix, the same on every tick of an instance: tools {} + system prompt {} = **{}** tokens; \
         objective (first user message, per tick) **{}**",
        t.tools,
        t.system,
        t.prefix(),
        t.objective
    );
    let _ = writeln!(
        s,
        "- turn 1 sends prefix + objective and calls `{}` ({} out); turn 2 adds that call and its \
         result ({}) and calls `{}` ({} out); turn 3 adds those ({}) and calls `{}` ({} out): \
         {prompt} prompt and {output} output tokens per episode",
        t.call_names[0],
        t.calls[0],
        t.results[0],
        t.call_names[1],
        t.calls[1],
        t.results[1],
        t.call_names[2],
        t.calls[2]
    );
    let _ = writeln!(
        s,
        "- without caching: every prompt token at the input price. With caching, first tick: \
         nothing cached before it; steady state: the next tick within the cache's lifetime \
         (Anthropic's 5-minute cache, renewed by each read; OpenAI's, typically 5–10 minutes idle), \
         which finds the tools and system prompt cached by the tick before"
    );
    let _ = writeln!(
        s,
        "- Anthropic: breakpoints where the provider puts them (tools, system prompt, objective, \
         and from turn 2 the last block), written at the cache-write price, read at the cache-read \
         price, none below the model's minimum prefix. OpenAI: the longest prefix sent before, from \
         1,024 tokens in steps of 128, at the cache-read price, no write surcharge"
    );
    let _ = writeln!(
        s,
        "- not counted: the providers' own tool-use preamble and message framing, reasoning \
         tokens, text beside the tool calls\n"
    );
    let _ = writeln!(
        s,
        "| model | caching | $/tick without caching | with caching, first tick | with caching, steady state | saving, steady state |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|");
    for r in &c.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            r.model,
            r.caching.label(),
            usd(r.uncached_usd),
            usd(r.first_tick_usd),
            usd(r.steady_usd),
            r.saving_percent()
                .map_or_else(|| "-".to_owned(), |p| format!("{p:.0} %"))
        );
    }
    s
}

/// How far a service's resident memory may rise above its idle reading
/// while the back-pressure backlog is due. The publisher (in control) reads
/// due events in batches of `GENESIS_OUTBOX_BATCH` and holds at
/// `GENESIS_OUTBOX_MAX_PENDING` without reading further, and the pods fetch no
/// more messages than their free slots, so nothing in any service grows with
/// the backlog: the measured growth at 1,000,000 events is under 1 MiB.
/// Holding even a 64-byte record per due event would take
/// 61 MiB at that size, so 64 MiB tells a bounded service from one that
/// loads the backlog, with room for allocator noise on any machine.
pub const BACKLOG_RSS_GROWTH_BOUND_KIB: u64 = 64 * 1024;

/// One check per service read while idle: its largest VmRSS during the
/// back-pressure window stays within its idle VmRSS plus
/// [`BACKLOG_RSS_GROWTH_BOUND_KIB`]. A service with no idle or no backlog
/// reading fails (nothing was measured), as does an empty idle reading.
pub fn backlog_memory_checks(idle: &[(String, u64)], backlog: &[(String, u64, u64)]) -> Vec<Check> {
    if idle.is_empty() {
        return vec![Check::new(
            false,
            "back-pressure memory: no idle VmRSS reading to compare with",
        )];
    }
    idle.iter()
        .map(|(name, at_idle)| {
            let most = backlog
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, _, most)| *most);
            match most {
                Some(most) if *at_idle > 0 && most > 0 => {
                    let limit = at_idle + BACKLOG_RSS_GROWTH_BOUND_KIB;
                    Check::new(
                        most <= limit,
                        format!(
                            "back-pressure memory: {name}'s largest VmRSS {} <= idle {} + {} ({})",
                            kib(most),
                            kib(*at_idle),
                            kib(BACKLOG_RSS_GROWTH_BOUND_KIB),
                            kib(limit)
                        ),
                    )
                }
                _ => Check::new(
                    false,
                    format!(
                        "back-pressure memory: {name} has no VmRSS reading (idle {at_idle} KiB, backlog {most:?})"
                    ),
                ),
            }
        })
        .collect()
}

/// CPU seconds as "control / supervisor / pods", followed by
/// " / postgres / nats / bench" when `shared` (the throughput rows sample
/// the shared servers; the idle figure is the services' own spend).
fn cpu_summary(cpu: &[(String, f64)], shared: bool) -> String {
    let get = |p: &str| -> f64 {
        cpu.iter()
            .filter(|(n, _)| n.starts_with(p))
            .map(|(_, v)| *v)
            .fold(0.0, |a, b| a + b)
    };
    let mut names = vec!["control", "supervisor", "agent-pod"];
    if shared {
        names.extend(["postgres", "nats-server", "bench"]);
    }
    names
        .iter()
        .map(|n| format!("{:.2}", get(n)))
        .collect::<Vec<_>>()
        .join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_summary_sums_by_name_and_shows_the_shared_servers_only_when_asked() {
        let cpu = vec![
            ("control".to_owned(), 0.5),
            ("supervisor".to_owned(), 1.25),
            ("agent-pod-0".to_owned(), 0.5),
            ("agent-pod-1".to_owned(), 0.25),
            ("postgres".to_owned(), 4.0),
            ("nats-server".to_owned(), 0.75),
            ("bench".to_owned(), 0.1),
        ];
        assert_eq!(
            cpu_summary(&cpu, true),
            "0.50 / 1.25 / 0.75 / 4.00 / 0.75 / 0.10"
        );
        assert_eq!(cpu_summary(&cpu, false), "0.50 / 1.25 / 0.75");
        // Nothing sampled reads as zero, never "-0.00".
        assert_eq!(
            cpu_summary(&[], true),
            "0.00 / 0.00 / 0.00 / 0.00 / 0.00 / 0.00"
        );
    }

    #[test]
    fn tps_is_read_from_the_without_connection_line() {
        let out = "latency average = 1.2 ms\ntps = 812.5 (including connections establishing)\ntps = 830.25 (without initial connection time)\n";
        assert_eq!(parse_tps(out), Some(830.25));
        assert_eq!(parse_tps("tps = 99.0\n"), Some(99.0));
        assert_eq!(parse_tps("nothing"), None);
    }

    #[test]
    fn backlog_memory_is_bounded_by_the_idle_reading_per_service() {
        let idle = vec![
            ("control".to_owned(), 20_000),
            ("agent-pod-0".to_owned(), 14_000),
        ];
        let within = vec![
            (
                "control".to_owned(),
                21_000,
                20_000 + BACKLOG_RSS_GROWTH_BOUND_KIB,
            ),
            ("agent-pod-0".to_owned(), 14_000, 15_000),
        ];
        let checks = backlog_memory_checks(&idle, &within);
        assert_eq!(checks.len(), 2);
        assert!(checks.iter().all(|c| c.ok), "{checks:?}");

        let over = vec![
            (
                "control".to_owned(),
                21_000,
                20_001 + BACKLOG_RSS_GROWTH_BOUND_KIB,
            ),
            ("agent-pod-0".to_owned(), 14_000, 15_000),
        ];
        let checks = backlog_memory_checks(&idle, &over);
        assert!(!checks[0].ok && checks[0].what.contains("control"));
        assert!(checks[1].ok);

        // A service missing from the window, or read as 0, is a failure.
        let missing = vec![("control".to_owned(), 21_000, 21_000)];
        assert!(!backlog_memory_checks(&idle, &missing)[1].ok);
        let unread = vec![
            ("control".to_owned(), 0, 0),
            ("agent-pod-0".to_owned(), 1, 1),
        ];
        assert!(!backlog_memory_checks(&idle, &unread)[0].ok);
        // Nothing read while idle: one failed check, not an empty pass.
        let none = backlog_memory_checks(&[], &within);
        assert_eq!(none.len(), 1);
        assert!(!none[0].ok);
    }

    #[test]
    fn ratio_needs_both_sides() {
        let mut r = Report::new(true, "x".into());
        assert_eq!(r.pgbench_ratio(), None);
        r.pgbench_tps = Some(900.0);
        r.writes_per_tick = 3.0;
        r.best = Some(ThroughputRow {
            tenants: 1,
            pods: 1,
            ticks: 10,
            secs: 1.0,
            ticks_per_sec: 150.0,
            commits_per_tick: 3.0,
            rows_written_per_tick: 6.0,
            lease_held_per_tick: 0.0,
            cpu_secs: vec![],
            rss_kib: vec![],
        });
        assert_eq!(r.pgbench_ratio(), Some(0.5));
        // The peer's ratio needs a measured peer: none, failed, or zero
        // jobs/s give none rather than a division by nothing.
        assert_eq!(r.peer_ratio(), None);
        let peer = |jobs_per_sec: f64, error: Option<&str>| PeerFigures {
            name: "p".into(),
            jobs: 1,
            secs: 1.0,
            jobs_per_sec,
            latency_ms: [0.0; 3],
            error: error.map(str::to_owned),
        };
        r.peer = Some(peer(300.0, Some("not installed")));
        assert_eq!(r.peer_ratio(), None);
        r.peer = Some(peer(0.0, None));
        assert_eq!(r.peer_ratio(), None);
        r.peer = Some(peer(300.0, None));
        assert_eq!(r.peer_ratio(), Some(0.5));
        assert_eq!(r.json()["peer_ratio"], serde_json::json!(0.5));
    }
}
