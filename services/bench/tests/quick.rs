//! Runs `genesis-bench --quick` end to end (real PostgreSQL, NATS and the
//! service binaries) so the benchmark cannot rot: it asserts that the run
//! completed and that its counts add up, never a speed.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn quick_run_completes_and_its_counts_add_up() -> anyhow::Result<()> {
    if let Some(missing) = genesis_e2e::binaries_missing() {
        eprintln!("skipped: {missing}");
        return Ok(());
    }
    let out_dir = tempfile::tempdir()?;
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_genesis-bench"))
        .args(["--quick", "--out"])
        .arg(out_dir.path())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "genesis-bench --quick failed ({}):\n{stderr}",
        out.status
    );
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "quick run took {:?}",
        started.elapsed()
    );
    assert!(
        stderr.contains("[bench "),
        "no progress line on stderr:\n{stderr}"
    );

    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        out_dir.path().join("report.json"),
    )?)?;
    autovacuum_left_alone(&report);
    let checks = report["checks"].as_array().cloned().unwrap_or_default();
    assert!(checks.len() >= 10, "too few count checks: {checks:?}");
    for c in &checks {
        assert_eq!(c["ok"], serde_json::Value::Bool(true), "check failed: {c}");
    }
    // Every figure of the run is present (values are not judged).
    let rows = report["throughput"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 4, "1–2 tenants × 1–2 pods: {rows:?}");
    assert!(
        rows.iter()
            .all(|r| r["ticks"].as_i64().is_some_and(|t| t > 0)),
        "a window committed nothing: {rows:?}"
    );
    assert!(
        report["latency"]["measured"]
            .as_i64()
            .is_some_and(|n| n > 0),
        "no latency sample"
    );
    assert!(
        report["pgbench_tps"].as_f64().is_some(),
        "no pgbench figure"
    );
    assert_eq!(report["idle"]["llm_calls"], 0);
    // Each service's connections are named, so the idle report attributes
    // them (serialised as [name, count] pairs).
    let held: Vec<(String, i64)> = serde_json::from_value(report["idle"]["connections"].clone())?;
    let alone: Vec<(String, f64)> =
        serde_json::from_value(report["idle"]["commits_by_process"].clone())?;
    let names: Vec<&str> = alone.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["control", "supervisor"], "{alone:?}");
    for service in ["genesis-control", "genesis-supervisor"] {
        assert!(
            held.iter().any(|(name, n)| name == service && *n > 0),
            "{service} holds no named connection: {held:?}"
        );
    }
    assert!(
        report["idle"]["instances"]
            .as_i64()
            .is_some_and(|n| n >= 1_000)
    );
    // Claim, outbox, the completion's instance update, heartbeat check,
    // next turn number, and the census.
    assert_eq!(report["explains"].as_array().map(Vec::len), Some(6));
    // The cost table: one row per seeded price (its count check compares
    // with the table), the scripted model at $0, and measured sizes.
    let costs = report["cost"]["rows"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(costs.len() >= 15, "{costs:?}");
    let scripted = costs.iter().find(|r| r["model"] == "scripted-1");
    assert_eq!(
        scripted.map(|r| r["uncached_usd"].clone()),
        Some(serde_json::json!(0.0))
    );
    for part in ["tools", "system", "objective"] {
        assert!(
            report["cost"]["tokens"][part]
                .as_u64()
                .is_some_and(|n| n > 0),
            "{part}: {}",
            report["cost"]["tokens"]
        );
    }
    let md = std::fs::read_to_string(out_dir.path().join("report.md"))?;
    assert!(md.contains("## $ per tick"), "no cost section in report.md");
    Ok(())
}

/// `--throughput-only` with an explicit matrix runs exactly those rows and
/// their count checks, and nothing after them.
#[test]
fn a_throughput_only_run_has_exactly_its_rows() -> anyhow::Result<()> {
    if let Some(missing) = genesis_e2e::binaries_missing() {
        eprintln!("skipped: {missing}");
        return Ok(());
    }
    let out_dir = tempfile::tempdir()?;
    let out = Command::new(env!("CARGO_BIN_EXE_genesis-bench"))
        .args([
            "--quick",
            "--throughput-only",
            "--tenants",
            "3",
            "--pods",
            "1",
            "--out",
        ])
        .arg(out_dir.path())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "failed ({}):\n{stderr}", out.status);
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        out_dir.path().join("report.json"),
    )?)?;
    let rows = report["throughput"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["tenants"], 3);
    assert_eq!(rows[0]["pods"], 1);
    assert!(rows[0]["ticks"].as_i64().is_some_and(|t| t > 0), "{rows:?}");
    assert!(rows[0]["lease_held_per_tick"].as_f64().is_some());
    autovacuum_left_alone(&report);
    let checks = report["checks"].as_array().cloned().unwrap_or_default();
    assert!(!checks.is_empty());
    for c in &checks {
        assert_eq!(c["ok"], serde_json::Value::Bool(true), "check failed: {c}");
    }
    assert!(
        report["latency"].is_null(),
        "latency ran: {}",
        report["latency"]
    );
    assert!(
        report["idle"].is_null(),
        "the idle fleet ran: {}",
        report["idle"]
    );
    Ok(())
}

#[test]
fn a_bad_matrix_is_refused_before_anything_starts() -> anyhow::Result<()> {
    for args in [["--tenants", "0"], ["--tenants", "x"], ["--pods", "17"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_genesis-bench"))
            .args(args)
            .output()?;
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(args[0]), "{args:?}: {stderr}");
        assert!(!stderr.contains("[bench "), "started: {stderr}");
    }
    Ok(())
}

#[test]
fn bad_runtime_threads_are_refused_before_anything_starts() -> anyhow::Result<()> {
    for value in ["0", "two", "-1", ""] {
        let out = Command::new(env!("CARGO_BIN_EXE_genesis-bench"))
            .args(["--quick", "--throughput-only"])
            .env("GENESIS_BENCH_SERVICE_THREADS", value)
            .output()?;
        assert!(!out.status.success(), "{value:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("GENESIS_BENCH_SERVICE_THREADS must be a whole number above 0"),
            "{value:?}: {stderr}"
        );
        assert!(!stderr.contains("[bench "), "started: {stderr}");
    }
    Ok(())
}

#[test]
fn unknown_flag_is_refused_before_anything_starts() -> anyhow::Result<()> {
    let out = Command::new(env!("CARGO_BIN_EXE_genesis-bench"))
        .arg("--no-such-flag")
        .output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--no-such-flag"), "{stderr}");
    assert!(
        !stderr.contains("[bench "),
        "started despite a bad flag: {stderr}"
    );
    Ok(())
}

/// The quick mode never changes the server's autovacuum: the report's
/// Machine section says it was left as the server has it.
fn autovacuum_left_alone(report: &serde_json::Value) {
    let autovacuum = report["machine"]
        .as_array()
        .and_then(|m| m.iter().find(|kv| kv[0] == "autovacuum"))
        .and_then(|kv| kv[1].as_str())
        .unwrap_or_default();
    assert!(
        autovacuum.ends_with("(as the server has it)"),
        "quick mode touched the server's autovacuum: {autovacuum:?}"
    );
}
