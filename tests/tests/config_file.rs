//! The config-file layer on the real bins: each of `genesis-control`,
//! `genesis-supervisor` and `genesis-agent-pod` takes `--config FILE` (or
//! `GENESIS_CONFIG`), ranks it above its defaults and below `GENESIS_*` env
//! and flags, and refuses a file it cannot use in full, before it starts
//! anything.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use genesis_e2e::{binaries_missing, binary};

/// One bin and three of its settings: one set by flag name in the file,
/// one set by variable name in the file, and one the file sets but env
/// overrides; and a line of the file that holds a secret.
struct Case {
    bin: &'static str,
    secret: &'static str,
    file: &'static str,
    env: (&'static str, &'static str),
    flag: [&'static str; 2],
    expect: [&'static str; 3],
}

const CASES: [Case; 3] = [
    Case {
        bin: "genesis-control",
        secret: "database-url = \"postgres://app:hunter2@db/x\"",
        file: "lease-ttl-secs = 42\nGENESIS_OUTBOX_BATCH = 77\nmax_attempts = 9\n",
        env: ("GENESIS_MAX_ATTEMPTS", "8"),
        flag: ["--outbox-batch", "78"],
        expect: [
            "lease_ttl_secs = 42",
            "outbox_batch = 78",
            "max_attempts = 8",
        ],
    },
    Case {
        bin: "genesis-supervisor",
        secret: "database-url = \"postgres://app:hunter2@db/x\"",
        file: "lease-ttl-secs = 42\nGENESIS_STORE_BATCH_MAX = 7\nmax_attempts = 9\n",
        env: ("GENESIS_MAX_ATTEMPTS", "8"),
        flag: ["--store-batch-max", "6"],
        expect: [
            "lease_ttl_secs = 42",
            "store_batch_max = 6",
            "max_attempts = 8",
        ],
    },
    Case {
        bin: "genesis-agent-pod",
        secret: "agent-token = \"hunter2\"",
        file: "lease-ttl-secs = 42\nGENESIS_POD_CONCURRENCY = 7\nretry_nak_ms = 900\n",
        env: ("GENESIS_RETRY_NAK_MS", "800"),
        flag: ["--concurrency", "6"],
        expect: [
            "lease_ttl_secs = 42",
            "concurrency = 6",
            "retry_nak_ms = 800",
        ],
    },
];

/// Run `bin` with a clean environment (no GENESIS_* of the caller's) and
/// `env` added; a bin that does not exit within 20 s fails the test.
/// Control and the supervisor are given the one setting they require.
fn run(bin: &str, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Output> {
    let mut cmd = Command::new(binary(bin)?);
    cmd.args(args).env_clear();
    if bin != "genesis-agent-pod" {
        cmd.env("GENESIS_DEFAULT_PROVIDER", "scripted");
    }
    let mut child = cmd
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("start {bin}"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            anyhow::bail!("{bin} {args:?} did not exit: it started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child.wait_with_output()?)
}

fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<String> {
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path.display().to_string())
}

/// A temporary directory with each case's file written in it, paired with
/// its case; `None` (the test skips) when the binaries are not built.
type WrittenCases = (tempfile::TempDir, Vec<(&'static Case, String)>);

fn written_cases() -> anyhow::Result<Option<WrittenCases>> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(None);
    }
    let dir = tempfile::tempdir()?;
    let mut cases = Vec::new();
    for case in &CASES {
        let path = write(dir.path(), &format!("{}.toml", case.bin), case.file)?;
        cases.push((case, path));
    }
    Ok(Some((dir, cases)))
}

#[test]
fn each_bin_reads_its_config_file_beneath_env_and_flags() -> anyhow::Result<()> {
    let Some((_dir, cases)) = written_cases()? else {
        return Ok(());
    };
    for (case, path) in cases {
        // By flag, with env and a flag over two of the file's values.
        let out = run(
            case.bin,
            &[
                "--config",
                &path,
                case.flag[0],
                case.flag[1],
                "--dump-config",
            ],
            &[case.env],
        )?;
        ensure!(out.status.success(), "{}: {out:?}", case.bin);
        let dump = String::from_utf8(out.stdout)?;
        for line in case.expect {
            ensure!(
                dump.lines().any(|l| l == line),
                "{}: `{line}` missing from\n{dump}",
                case.bin
            );
        }
        // An empty GENESIS_CONFIG (as a template may render it) is no file.
        let out = run(case.bin, &["--dump-config"], &[("GENESIS_CONFIG", "")])?;
        ensure!(
            out.status.success(),
            "{}: empty GENESIS_CONFIG: {out:?}",
            case.bin
        );
        // By GENESIS_CONFIG, alone: the file's own values.
        let out = run(case.bin, &["--dump-config"], &[("GENESIS_CONFIG", &path)])?;
        ensure!(out.status.success(), "{}: {out:?}", case.bin);
        let dump = String::from_utf8(out.stdout)?;
        ensure!(
            dump.lines().any(|l| l == "lease_ttl_secs = 42"),
            "{}: GENESIS_CONFIG not read:\n{dump}",
            case.bin
        );
    }
    Ok(())
}

/// A dump is TOML under the keys a file takes: written back as a config
/// file, it is accepted and prints the same configuration. (Only a dump
/// without secrets round-trips: a masked one would set `***`.)
#[test]
fn each_bin_s_dump_is_a_config_file_it_accepts() -> anyhow::Result<()> {
    let Some((dir, cases)) = written_cases()? else {
        return Ok(());
    };
    for (case, path) in cases {
        let out = run(case.bin, &["--config", &path, "--dump-config"], &[])?;
        ensure!(out.status.success(), "{}: {out:?}", case.bin);
        let dump = String::from_utf8(out.stdout)?;
        let table: toml::Table = dump
            .parse()
            .with_context(|| format!("{}: the dump is not TOML:\n{dump}", case.bin))?;
        ensure!(
            table.len() > 10 && !table.contains_key("dump_config"),
            "{}: {table:?}",
            case.bin
        );
        let again = write(dir.path(), &format!("{}-dump.toml", case.bin), &dump)?;
        let out = run(case.bin, &["--config", &again, "--dump-config"], &[])?;
        ensure!(
            out.status.success(),
            "{}: its own dump refused as a config file: {}",
            case.bin,
            String::from_utf8_lossy(&out.stderr)
        );
        ensure!(
            String::from_utf8(out.stdout)? == dump,
            "{}: the dump read back prints another configuration",
            case.bin
        );
    }
    Ok(())
}

#[test]
fn a_file_a_bin_cannot_use_stops_it_before_it_starts() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let unknown = write(
        dir.path(),
        "unknown.toml",
        "lease-ttl-secs = 42\nleese-ttl = 5\n",
    )?;
    let missing = dir.path().join("absent.toml").display().to_string();
    for case in &CASES {
        let bad_value = write(
            dir.path(),
            &format!("{}-value.toml", case.bin),
            &format!("{}\nlease-ttl-secs = 0\n", case.secret),
        )?;
        for (path, says) in [
            (&unknown, "unknown key `leese-ttl`".to_owned()),
            (
                &bad_value,
                "key `lease-ttl-secs`: invalid value: the value is not in 1..=86400".to_owned(),
            ),
            (&missing, format!("config file {missing}: cannot read it")),
        ] {
            // Without --dump-config: the bin would serve, so a refusal here
            // is a refusal to start.
            let out = run(case.bin, &["--config", path], &[])?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            ensure!(
                out.status.code() == Some(2),
                "{} with {path}: exit {:?}, stderr {stderr}",
                case.bin,
                out.status.code()
            );
            ensure!(
                stderr.contains(path.as_str()) && stderr.contains(&says),
                "{} with {path}: stderr does not say `{says}`: {stderr}",
                case.bin
            );
            ensure!(
                !stderr.contains("hunter2"),
                "{}: a secret leaked: {stderr}",
                case.bin
            );
            ensure!(
                out.stdout.is_empty(),
                "{}: printed {:?}",
                case.bin,
                out.stdout
            );
        }
    }
    Ok(())
}
