//! The `genesis-coder` binary: its settings come from the Job's environment,
//! `--dry-run` prints the plan and writes nothing, and the exit code says
//! what went wrong (2 bad configuration, 3 control unreachable).
#![allow(clippy::unwrap_used)]

mod common;
mod standin;

use std::process::Output;

use standin::{Behaviour, Call, TASK, TENANT, TOKEN};

/// Run the binary with only `vars` (and `PATH`) in its environment.
async fn coder(vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_genesis-coder"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(vars.iter().copied())
        .args(args);
    cmd.output().await.unwrap()
}

fn job_env<'a>(url: &'a str, token: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("GENESIS_TASK_ID", TASK),
        ("GENESIS_TENANT_ID", TENANT),
        ("GENESIS_CODER_ID", "coder-test"),
        ("GENESIS_CONTROL_URL", url),
        ("GENESIS_CODER_TOKEN", token),
    ]
}

#[tokio::test]
async fn dry_run_from_the_job_environment_prints_the_plan_and_writes_nothing() {
    let source = common::source_repo();
    let control = standin::serve(Behaviour::new(standin::task(
        source.path().to_str().unwrap(),
    )))
    .await;
    let out = coder(&job_env(&control.url, TOKEN), &["--dry-run"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains(TASK), "{stdout}");
    assert!(stdout.contains("scripted/scripted-1@api"), "{stdout}");
    assert!(
        stdout.contains("max 40 turns, 4096 output tokens per turn, 3600 s"),
        "{stdout}"
    );
    assert!(!stdout.contains(TOKEN) && !stderr.contains(TOKEN));
    assert_eq!(control.calls(), [Call::GetTask, Call::Chain]);
}

#[tokio::test]
async fn a_missing_setting_or_a_refused_token_exits_2() {
    let out = coder(&[("GENESIS_TASK_ID", TASK)], &["--dry-run"]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--tenant-id"), "{stderr}");

    let control = standin::serve(Behaviour::new(standin::task("/nowhere"))).await;
    let out = coder(&job_env(&control.url, "gct_not-the-token"), &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("gct_not-the-token"), "{stderr}");
    assert!(control.calls().is_empty());
}

#[tokio::test]
async fn an_unreachable_control_exits_3() {
    // A port nothing listens on: bound, then released.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let out = coder(&job_env(&url, TOKEN), &["--dry-run"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("cannot reach control"), "{stderr}");
}

#[tokio::test]
async fn version_prints_the_binary_name_and_version() {
    let out = coder(&[], &["--version"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("genesis-coder {}", env!("CARGO_PKG_VERSION"))
    );
}
