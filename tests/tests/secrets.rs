//! Secrets never reach the logs: a fleet of the real binaries runs with trace
//! logging, provider keys in every service's environment, the platform and
//! agent-pod tokens, a tenant-bound token minted over the API and a dashboard
//! session; it greets, replies and takes a dashboard sign-in. Its provider is
//! an OpenAI-compatible server on loopback, so the OpenAI key really goes out
//! in an `Authorization` header on every tick (the server checks it, and the
//! turns name the model it served). After a clean shutdown, every log file of
//! the run is searched for each secret.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{Fleet, FleetOptions, binaries_missing, bounded};
use genesis_proto::v1 as pb;
use uuid::Uuid;

const T: Duration = Duration::from_secs(60);
/// The model the loopback provider says it served: the default preset's
/// OpenAI couple asks for it, and the scripted fallback would say `scripted-1`.
const SERVED: &str = "gpt-4o";

/// An OpenAI-compatible chat completions server on loopback that records
/// the `Authorization` header of every request and ends every episode with
/// `phase_complete`.
async fn loopback_openai() -> anyhow::Result<(String, Arc<Mutex<Vec<String>>>)> {
    let auth = Arc::new(Mutex::new(Vec::new()));
    let seen = auth.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let seen = seen.clone();
            async move {
                let value = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                if let Ok(mut s) = seen.lock() {
                    s.push(value);
                }
                axum::Json(serde_json::json!({
                    "id": "chatcmpl-secrets",
                    "object": "chat.completion",
                    "model": SERVED,
                    "choices": [{
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": null,
                            "tool_calls": [{
                                "id": "call_done",
                                "type": "function",
                                "function": {"name": "phase_complete", "arguments": "{\"summary\":\"done\"}"}
                            }]
                        },
                        "finish_reason": "tool_calls"
                    }],
                    "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}
                }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, auth))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_key_or_session_secret_appears_in_any_log() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(150), async {
        let anthropic = format!("sk-ant-test-{}", Uuid::new_v4().simple());
        let openai = format!("sk-test-{}", Uuid::new_v4().simple());
        let (provider_url, auth_headers) = loopback_openai().await?;
        let mut opts = FleetOptions::new("secrets-in-logs", 1);
        // The tenants' default preset: OpenAI first (the loopback server).
        opts.provider = "openai".to_owned();
        opts.extra_env.extend([
            ("ANTHROPIC_API_KEY".to_owned(), anthropic.clone()),
            ("OPENAI_API_KEY".to_owned(), openai.clone()),
            ("OPENAI_BASE_URL".to_owned(), provider_url.clone()),
            // Everything every service and library can say.
            ("RUST_LOG".to_owned(), "trace".to_owned()),
        ]);
        let fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("acme").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;
        fleet.wait_decision(&soa, 0, "Initialized", T).await?;
        fleet.send(&tenant, &soa, "hello there").await?;
        fleet
            .wait_decision(&soa, 1, "MessageAcknowledged", T)
            .await?;
        // The key was really used: the provider got it on every call, and
        // both turns were served by it (not by the scripted fallback).
        let headers = auth_headers
            .lock()
            .map_err(|_| anyhow::anyhow!("the header log is poisoned"))?
            .clone();
        let expected = format!("Bearer {openai}");
        ensure!(
            headers.len() >= 2,
            "the loopback provider got {} requests, expected one per tick",
            headers.len()
        );
        ensure!(
            headers.iter().all(|h| *h == expected),
            "a request to the provider did not carry the configured key"
        );
        let served: Vec<Option<String>> = fleet
            .turns(&soa)
            .await?
            .into_iter()
            .map(|t| t.served_model)
            .collect();
        ensure!(
            served.len() == 2 && served.iter().all(|m| m.as_deref() == Some(SERVED)),
            "the turns were served by {served:?}, not all by the loopback {SERVED}"
        );

        let tenant_token = fleet
            .admin()
            .await?
            .tokens()
            .create_token(pb::CreateTokenRequest {
                scope: "operator".into(),
                tenant_id: Some(tenant.clone()),
                label: "secrets".into(),
                ttl_seconds: None,
                pod_tenant_ids: vec![],
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

        // The address the pod's HTTP client logs when it connects, at trace:
        // proof the searched logs cover the calls that carried the key.
        let provider_addr = provider_url.trim_start_matches("http://").to_owned();
        let mut logged_provider_calls = false;
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
            logged_provider_calls |= text.contains(&provider_addr);
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
        ensure!(
            logged_provider_calls,
            "no log names the provider's address {provider_addr}: the calls that carried the key were not traced"
        );
        ensure!(leaks.is_empty(), "secrets in logs: {leaks:?}");
        println!(
            "secrets: {} secrets absent from {files} log files ({bytes} bytes, RUST_LOG=trace); the provider key went out in {} requests",
            secrets.len(),
            headers.len()
        );
        Ok(())
    })
    .await
}
