//! A password in a service URL never reaches the logs: control, the
//! supervisor and an agent pod run with debug logging, OTLP export, and a
//! NATS URL (user and password for control, a token for the pod), an
//! Alertmanager URL and an OTLP endpoint that each carry a password and
//! point at a closed port, so every connect fails and is logged (control's
//! publisher, the pod's NATS retries, the supervisor's alert sampler, the
//! exporters). The database URL of control and the supervisor carries the
//! services' login password too. Once each failure path has logged, the
//! processes are stopped and every log line is searched for each password.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{
    SERVICE_ROLE_PASSWORD, TestDatabase, bin_command, bounded_e2e, free_port, log_dir, suffix,
    wait_for,
};

/// A child that is killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(bin: &str, logs: &Path, name: &str, env: &[(&str, String)]) -> anyhow::Result<Running> {
    let log = std::fs::File::create(logs.join(format!("{name}.log")))?;
    let args: &[&str] = if bin == "genesis-control" {
        &["serve"]
    } else {
        &[]
    };
    let mut cmd = bin_command(bin, args, env)?;
    cmd.stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    Ok(Running(
        cmd.spawn().with_context(|| format!("spawn {bin}"))?,
    ))
}

fn log_of(logs: &Path, name: &str) -> String {
    std::fs::read(logs.join(format!("{name}.log")))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_url_password_appears_in_any_log() -> anyhow::Result<()> {
    bounded_e2e(Duration::from_secs(120), async {
        let logs = log_dir("url-secrets")?;
        let sfx = suffix();
        let nats_password = format!("natspw{sfx}");
        let nats_token = format!("natstoken{sfx}");
        let alertmanager_password = format!("ampw{sfx}");
        let otlp_password = format!("otlppw{sfx}");
        // Nothing listens on these: every connect fails and is logged.
        let closed = free_port()?;
        let closed_otlp = free_port()?;

        let database = TestDatabase::create(&sfx).await?;
        let checked = async {
            // The services log in as their own role, with a password in the URL.
            let service_url = database.migrate_for_services()?;

            let otlp = format!("http://otel:{otlp_password}@127.0.0.1:{closed_otlp}");
            let common = |http: u16| -> Vec<(&str, String)> {
                vec![
                    ("RUST_LOG", "debug".to_owned()),
                    ("GENESIS_LOG_FORMAT", "text".to_owned()),
                    ("GENESIS_HTTP_ADDR", format!("127.0.0.1:{http}")),
                    ("GENESIS_DEFAULT_PROVIDER", "scripted".to_owned()),
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.clone()),
                    ("OTEL_METRIC_EXPORT_INTERVAL", "1000".to_owned()),
                ]
            };
            let supervisor_grpc = free_port()?;
            let mut control_env = common(free_port()?);
            control_env.extend([
                ("GENESIS_DATABASE_URL", service_url.clone()),
                (
                    "GENESIS_NATS_URL",
                    format!("nats://genesis:{nats_password}@127.0.0.1:{closed}"),
                ),
                ("GENESIS_GRPC_ADDR", format!("127.0.0.1:{}", free_port()?)),
                ("GENESIS_DASHBOARD_ADDR", "off".to_owned()),
                (
                    "GENESIS_STREAM",
                    format!("URL_SECRETS_{}", sfx.to_uppercase()),
                ),
            ]);
            let mut supervisor_env = common(free_port()?);
            supervisor_env.extend([
                ("GENESIS_DATABASE_URL", service_url.clone()),
                ("GENESIS_GRPC_ADDR", format!("127.0.0.1:{supervisor_grpc}")),
                (
                    "GENESIS_ALERTMANAGER_URL",
                    format!("http://am:{alertmanager_password}@127.0.0.1:{closed}"),
                ),
                ("GENESIS_OPS_SAMPLE_SECS", "1".to_owned()),
            ]);
            let mut pod_env = common(free_port()?);
            pod_env.extend([
                (
                    "GENESIS_NATS_URL",
                    format!("nats://{nats_token}@127.0.0.1:{closed}"),
                ),
                (
                    "GENESIS_SUPERVISOR_URL",
                    format!("http://127.0.0.1:{supervisor_grpc}"),
                ),
                ("GENESIS_AGENT_TOKEN", genesis_proto::auth::generate_token()),
            ]);
            let running = [
                spawn("genesis-control", &logs, "control", &control_env)?,
                spawn("genesis-supervisor", &logs, "supervisor", &supervisor_env)?,
                spawn("genesis-agent-pod", &logs, "agent-pod", &pod_env)?,
            ];
            // Each failure path has run and logged (naming the masked URL
            // where the line names one).
            for (name, proof) in [
                ("control", format!("nats://genesis:***@127.0.0.1:{closed}")),
                ("supervisor", "alertmanager unreachable".to_owned()),
                ("agent-pod", format!("nats://***@127.0.0.1:{closed}")),
                (
                    "supervisor",
                    "exporting spans and metrics over OTLP".to_owned(),
                ),
            ] {
                wait_for(
                    &format!("{name} to log {proof:?}"),
                    Duration::from_secs(45),
                    || {
                        let found = log_of(&logs, name).contains(&proof);
                        async move { Ok(found.then_some(())) }
                    },
                )
                .await?;
            }
            // A few more seconds of retries, samples and failed exports.
            tokio::time::sleep(Duration::from_secs(3)).await;
            drop(running);

            let secrets = [
                ("the NATS password", &nats_password),
                ("the NATS token", &nats_token),
                ("the Alertmanager password", &alertmanager_password),
                ("the OTLP password", &otlp_password),
                ("the database password", &SERVICE_ROLE_PASSWORD.to_owned()),
            ];
            let mut leaks = Vec::new();
            let mut bytes = 0;
            for name in ["control", "supervisor", "agent-pod"] {
                let text = log_of(&logs, name);
                bytes += text.len();
                for line in text.lines() {
                    for (what, secret) in &secrets {
                        if line.contains(secret.as_str()) {
                            leaks.push(format!("{what} in {name}: {line}"));
                        }
                    }
                }
            }
            ensure!(
                bytes > 2_000,
                "only {bytes} bytes logged: nothing was checked"
            );
            ensure!(leaks.is_empty(), "passwords logged:\n{}", leaks.join("\n"));
            anyhow::Ok(())
        };
        let outcome = checked.await;
        database.drop_database().await?;
        outcome
    })
    .await
}
