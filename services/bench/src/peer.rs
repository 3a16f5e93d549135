//! The peer queue measured in the same run: graphile-worker (npm, run with
//! node) processing no-op jobs on the same PostgreSQL server, in a scratch
//! database of its own, in the configuration its documentation gives for
//! throughput (24 concurrent jobs, a pool to match, a local queue, batched
//! completion, every job queued by one `add_jobs` call), so the ratio to it
//! compares against the peer at its best, not a throttled one. `scripts/bench.sh` installs the package under
//! `target/bench-peer`; without it the figure says why it is missing.
//!
//! It must never install anything itself or touch a database it did not
//! create.

use std::path::PathBuf;
use std::process::Command;

use serde::Serialize;

/// The peer's figures, or why there are none.
#[derive(Debug, Clone, Serialize)]
pub struct PeerFigures {
    /// Which peer.
    pub name: String,
    /// Jobs processed.
    pub jobs: u64,
    /// Wall time from the first job taken to the last completed.
    pub secs: f64,
    /// jobs / secs.
    pub jobs_per_sec: f64,
    /// run_at → task completed, p50/p95/p99 ms.
    pub latency_ms: [f64; 3],
    /// Why it was not measured.
    pub error: Option<String>,
}

fn peer_dir() -> PathBuf {
    std::env::var_os("GENESIS_BENCH_PEER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/bench-peer"
            ))
        })
}

/// Run `peer/graphile.mjs` with `jobs` no-op jobs and read its one JSON line.
pub async fn graphile(jobs: u64) -> PeerFigures {
    let name = "graphile-worker (node)".to_owned();
    let fail = |e: String| PeerFigures {
        name: name.clone(),
        jobs: 0,
        secs: 0.0,
        jobs_per_sec: 0.0,
        latency_ms: [f64::NAN; 3],
        error: Some(e),
    };
    let dir = peer_dir();
    if !dir.join("node_modules/graphile-worker").is_dir() {
        return fail(format!(
            "graphile-worker not installed in {} (scripts/bench.sh installs it)",
            dir.display()
        ));
    }
    // ES modules resolve packages beside the script, so it runs from there.
    let script = dir.join("graphile.mjs");
    if let Err(e) = std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/peer/graphile.mjs"),
        &script,
    ) {
        return fail(format!("copy the peer script into {}: {e}", dir.display()));
    }
    let base = genesis_e2e::base_database_url();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .current_dir(&dir)
            .env("PEER_BASE_URL", base)
            .env("PEER_JOBS", jobs.to_string())
            .output()
    })
    .await;
    let out = match out {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return fail(format!("run node: {e}")),
        Err(e) => return fail(format!("join: {e}")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(line) = stdout.lines().rev().find(|l| l.starts_with('{')) else {
        return fail(format!(
            "no result line ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    };
    let v: serde_json::Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return fail(format!("bad result line {line:?}: {e}")),
    };
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        return fail(e.to_owned());
    }
    let name = v.get("config").map_or(name.clone(), |c| {
        let n = |k: &str| c.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        format!(
            "graphile-worker (node): {} concurrent jobs, pool {}, local queue {}, batched completion",
            n("concurrentJobs"),
            n("maxPoolSize"),
            n("localQueueSize")
        )
    });
    let f = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(f64::NAN)
    };
    let secs = f("secs");
    let done = v
        .get("jobs")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    PeerFigures {
        name,
        jobs: done,
        secs,
        jobs_per_sec: done as f64 / secs,
        latency_ms: [f("p50"), f("p95"), f("p99")],
        error: None,
    }
}
