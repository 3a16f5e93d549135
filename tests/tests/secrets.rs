//! Secrets never reach the logs: a fleet of the real binaries runs with debug
//! logging, provider keys in every service's environment, the platform and
//! agent-pod tokens, a tenant-bound token minted over the API and a dashboard
//! session; it greets, replies and takes a dashboard sign-in. After a clean
//! shutdown, every log file of the run is searched for each secret.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{Fleet, FleetOptions, binaries_missing, bounded};
use genesis_proto::v1 as pb;
use uuid::Uuid;

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_key_or_session_secret_appears_in_any_log() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(150), async {
        let anthropic = format!("sk-ant-test-{}", Uuid::new_v4().simple());
        let openai = format!("sk-test-{}", Uuid::new_v4().simple());
        let mut opts = FleetOptions::new("secrets-in-logs", 1);
        opts.extra_env.extend([
            ("ANTHROPIC_API_KEY".to_owned(), anthropic.clone()),
            ("OPENAI_API_KEY".to_owned(), openai.clone()),
            (
                "RUST_LOG".to_owned(),
                "debug,h2=info,hyper=info,tower=info".to_owned(),
            ),
        ]);
        let fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("acme").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;
        fleet.wait_decision(&soa, 0, "Initialized", T).await?;
        fleet.send(&tenant, &soa, "hello there").await?;
        fleet
            .wait_decision(&soa, 1, "MessageAcknowledged", T)
            .await?;

        let tenant_token = fleet
            .admin()
            .await?
            .tokens()
            .create_token(pb::CreateTokenRequest {
                scope: "operator".into(),
                tenant_id: Some(tenant.clone()),
                label: "secrets".into(),
                ttl_seconds: None,
            })
            .await?
            .into_inner()
            .token;
        // A dashboard sign-in: the token goes in a form body, the session
        // secret comes back in a cookie; neither may be logged.
        let resp = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?
            .post(format!("http://{}/login", fleet.dashboard))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={tenant_token}&tenant_id="))
            .send()
            .await?;
        ensure!(resp.status() == 303, "sign-in answered {}", resp.status());
        let session = resp
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("genesis_session="))
            .and_then(|v| v.split(';').next())
            .context("no session cookie")?
            .to_owned();

        let secrets = [
            ("ANTHROPIC_API_KEY", anthropic),
            ("OPENAI_API_KEY", openai),
            ("the platform operator token", fleet.operator_token.clone()),
            ("the agent-pod token", fleet.pod_token.clone()),
            ("a tenant token minted over the API", tenant_token),
            ("a dashboard session secret", session),
        ];
        let logs = fleet.logs.clone();
        drop(fleet); // every child stopped; each wrote its log file directly.

        let mut files = 0;
        let mut bytes = 0;
        let mut leaks = Vec::new();
        for entry in std::fs::read_dir(&logs)? {
            let path = entry?.path();
            if !path.is_file() {
                continue;
            }
            let text = String::from_utf8_lossy(&std::fs::read(&path)?).into_owned();
            files += 1;
            bytes += text.len();
            for (what, secret) in &secrets {
                if text.contains(secret.as_str()) {
                    leaks.push(format!("{what} in {}", path.display()));
                }
            }
        }
        ensure!(
            files >= 3,
            "expected the logs of control, supervisor and a pod, found {files}"
        );
        ensure!(
            bytes > 10_000,
            "debug logging produced only {bytes} bytes: nothing was checked"
        );
        ensure!(leaks.is_empty(), "secrets in logs: {leaks:?}");
        println!(
            "secrets: {} secrets absent from {files} log files ({bytes} bytes)",
            secrets.len()
        );
        Ok(())
    })
    .await
}
