//! TLS through the real binaries: genesisctl → control's gRPC and a browser
//! client → the dashboard over TLS with a test CA (untrusted and plaintext
//! clients refused, the session cookie `Secure`, a renewed certificate
//! served without a restart and a broken one never); agent pods → the
//! supervisor with client certificates (mutual TLS), a client without one
//! refused at the handshake.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::certs::{TestCa, presented_certificate};
use genesis_e2e::{Fleet, FleetOptions, bounded_e2e, genesisctl, wait_for};

const ALPN_H2: &[&[u8]] = &[b"h2"];

fn env(process: &str, key: &str, value: &Path) -> (String, String, String) {
    (
        process.to_owned(),
        key.to_owned(),
        value.display().to_string(),
    )
}

/// A plaintext HTTP/2 client's first bytes, sent to a TLS port: the server
/// must answer with a TLS alert record (content type 21) or close, never
/// with HTTP/2 (a SETTINGS frame).
async fn plaintext_is_refused(addr: SocketAddr) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await?;
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf))
        .await
        .context("a plaintext client was left hanging")?
        .unwrap_or(0);
    ensure!(
        n == 0 || buf[0] == 21,
        "a plaintext client got a non-TLS answer: {:?}",
        &buf[..n]
    );
    Ok(())
}

/// The `Set-Cookie` header of `response`, empty when it sets none.
fn set_cookie(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

fn tenant_id(stdout: &str) -> anyhow::Result<String> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v["id"].as_str().map(str::to_owned))
        .with_context(|| format!("no tenant id in {stdout:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn genesisctl_and_the_dashboard_reach_control_over_tls_with_a_test_ca() -> anyhow::Result<()>
{
    bounded_e2e(Duration::from_secs(150), async {
        let dir = tempfile::tempdir()?;
        let ca = TestCa::new("genesis test CA")?;
        let ca_file = ca.write(dir.path(), "ca")?;
        let first = ca.server("control")?;
        let (cert, key) = first.write(dir.path(), "control")?;
        let other_ca = TestCa::new("some other CA")?.write(dir.path(), "other-ca")?;

        let mut opts = FleetOptions::new("tls-control", 0);
        opts.process_env = vec![
            env("control", "GENESIS_TLS_CERT_FILE", &cert),
            env("control", "GENESIS_TLS_KEY_FILE", &key),
            (
                "control".into(),
                "GENESIS_TLS_RELOAD_SECS".into(),
                "1".into(),
            ),
        ];
        let fleet = Fleet::start(opts).await?;
        let https = format!("https://{}", fleet.control_grpc);
        let ca_arg = ca_file.display().to_string();

        // Trusted through --ca-file: the command runs.
        let (code, out, err) = genesisctl(
            &fleet,
            &[
                "--endpoint",
                &https,
                "--ca-file",
                &ca_arg,
                "-o",
                "json",
                "tenant",
                "create",
                "tls-acme",
            ],
        )?;
        ensure!(code == 0, "genesisctl over TLS exited {code}: {err}");
        let tenant = tenant_id(&out)?;

        // The system roots alone, or another CA: a TLS error, exit 1.
        let other_arg = other_ca.display().to_string();
        for args in [
            vec!["--endpoint", https.as_str(), "tenant", "list"],
            vec![
                "--endpoint",
                https.as_str(),
                "--ca-file",
                &other_arg,
                "tenant",
                "list",
            ],
        ] {
            let (code, out, err) = genesisctl(&fleet, &args)?;
            ensure!(code == 1, "{args:?} exited {code}: {out} {err}");
            ensure!(
                err.contains(&format!("TLS handshake with control at {https} failed"))
                    && err.contains("UnknownIssuer"),
                "{args:?}: {err}"
            );
        }
        // An unreadable CA file: a usage error naming the flag and path.
        let (code, _, err) = genesisctl(
            &fleet,
            &[
                "--endpoint",
                &https,
                "--ca-file",
                "/nonexistent/ca.pem",
                "tenant",
                "list",
            ],
        )?;
        ensure!(
            code == 2 && err.contains("--ca-file /nonexistent/ca.pem: cannot read it"),
            "exit {code}: {err}"
        );
        // A plaintext client gets nothing from the TLS port.
        let (code, out, _) = genesisctl(
            &fleet,
            &[
                "--endpoint",
                &format!("http://{}", fleet.control_grpc),
                "tenant",
                "list",
            ],
        )?;
        ensure!(code != 0 && !out.contains("tls-acme"), "plaintext answered");
        plaintext_is_refused(fleet.control_grpc).await?;
        plaintext_is_refused(fleet.dashboard).await?;

        // The dashboard over TLS: the sign-in cookie is Secure.
        let browser = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes())?)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let dash = format!("https://{}", fleet.dashboard);
        let page = browser.get(format!("{dash}/login")).send().await?;
        ensure!(page.status() == 200, "GET /login: {}", page.status());
        let signed_in = browser
            .post(format!("{dash}/login"))
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            // Both values are URL-safe (a `gen_` token, a UUID).
            .body(format!("token={}&tenant_id={tenant}", fleet.operator_token))
            .send()
            .await?;
        let cookie = set_cookie(&signed_in);
        ensure!(
            signed_in.status() == 303 && cookie.contains("; Secure"),
            "sign-in {}: cookie {cookie:?}",
            signed_in.status()
        );
        // Signing out clears it with a Secure cookie too.
        let session = cookie.split(';').next().unwrap_or_default().to_owned();
        let agents = browser
            .get(format!("{dash}/agents"))
            .header(reqwest::header::COOKIE, &session)
            .send()
            .await?
            .text()
            .await?;
        let csrf = agents
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .with_context(|| format!("no CSRF field on /agents: {agents}"))?
            .to_owned();
        let signed_out = browser
            .post(format!("{dash}/logout"))
            .header(reqwest::header::COOKIE, &session)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(format!("csrf={csrf}"))
            .send()
            .await?;
        let cleared = set_cookie(&signed_out);
        ensure!(
            cleared.contains("Max-Age=0") && cleared.contains("; Secure"),
            "sign-out {}: cookie {cleared:?}",
            signed_out.status()
        );

        // Renewal: replaced files reach new connections without a restart.
        let seen = presented_certificate(fleet.control_grpc, &ca_file, None, ALPN_H2).await?;
        ensure!(seen == first.der, "control did not present its certificate");
        let renewed = ca.server("control renewed")?;
        renewed.write(dir.path(), "control")?;
        wait_for(
            "control to present the renewed certificate",
            Duration::from_secs(15),
            || {
                let ca_file = ca_file.clone();
                let want = renewed.der.clone();
                let addr = fleet.control_grpc;
                async move {
                    let seen = presented_certificate(addr, &ca_file, None, ALPN_H2).await?;
                    Ok((seen == want).then_some(()))
                }
            },
        )
        .await?;
        let (code, out, err) = genesisctl(
            &fleet,
            &["--endpoint", &https, "--ca-file", &ca_arg, "tenant", "list"],
        )?;
        ensure!(
            code == 0 && out.contains("tls-acme"),
            "after renewal: {code} {err}"
        );
        // A broken key: logged, and the renewed certificate keeps serving.
        let unusable = |fleet: &Fleet| {
            fleet
                .log_tail("control", 400)
                .matches("cannot be used")
                .count()
        };
        let before = unusable(&fleet);
        std::fs::write(&key, "not a key")?;
        wait_for(
            "control to log the unusable key",
            Duration::from_secs(15),
            || {
                let logged = unusable(&fleet) > before;
                async move { Ok(logged.then_some(())) }
            },
        )
        .await?;
        let seen = presented_certificate(fleet.control_grpc, &ca_file, None, ALPN_H2).await?;
        ensure!(seen == renewed.der, "a broken key replaced the certificate");
        let tail = fleet.log_tail("control", 400);
        ensure!(
            tail.contains("GENESIS_TLS_KEY_FILE") && tail.contains("TLS handshake refused"),
            "control's log lacks the reload error or the refused plaintext handshake: {tail}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_reach_the_supervisor_with_client_certificates_and_clients_without_are_refused()
-> anyhow::Result<()> {
    bounded_e2e(Duration::from_secs(150), async {
        let dir = tempfile::tempdir()?;
        let ca = TestCa::new("genesis test CA")?;
        let ca_file = ca.write(dir.path(), "ca")?;
        let (cert, key) = ca.server("supervisor")?.write(dir.path(), "supervisor")?;
        let (pod_cert, pod_key) = ca.client("agent-pod")?.write(dir.path(), "pod")?;
        let stranger = TestCa::new("stranger CA")?;
        let (odd_cert, odd_key) = stranger.client("stranger")?.write(dir.path(), "stranger")?;

        let mut opts = FleetOptions::new("tls-supervisor", 1);
        opts.supervisor_https = true;
        opts.process_env = vec![
            env("supervisor", "GENESIS_TLS_CERT_FILE", &cert),
            env("supervisor", "GENESIS_TLS_KEY_FILE", &key),
            env("supervisor", "GENESIS_TLS_CLIENT_CA_FILE", &ca_file),
            env("agent-pod", "GENESIS_SUPERVISOR_CA_FILE", &ca_file),
            env("agent-pod", "GENESIS_TLS_CLIENT_CERT_FILE", &pod_cert),
            env("agent-pod", "GENESIS_TLS_CLIENT_KEY_FILE", &pod_key),
        ];
        let fleet = Fleet::start(opts).await?;

        // The greeting and a reply, end to end: the pod claimed, called and
        // completed over mutual TLS.
        let t = Duration::from_secs(45);
        let tenant = fleet.create_tenant("mtls-acme").await?;
        let soa = fleet.wait_soa(&tenant, t).await?;
        fleet.wait_decision(&soa, 0, "Initialized", t).await?;
        let before = fleet.last_turn(&soa).await?;
        fleet.send(&tenant, &soa, "hello over TLS").await?;
        let turn = fleet
            .wait_turn(&soa, before, t, "the message turn", |t| {
                t.event_kind == "OperatorMessage"
            })
            .await?;
        ensure!(
            turn.decision_kind == "MessageAcknowledged",
            "the message turn is {}",
            turn.decision_kind
        );

        // The supervisor asks for a client certificate: none, or one from
        // another CA, is refused at the handshake; the pods' is accepted.
        let addr = fleet.supervisor_grpc;
        let none = presented_certificate(addr, &ca_file, None, ALPN_H2).await;
        ensure!(none.is_err(), "a client without a certificate was served");
        let odd = presented_certificate(addr, &ca_file, Some((&odd_cert, &odd_key)), ALPN_H2).await;
        ensure!(odd.is_err(), "a certificate from another CA was accepted");
        presented_certificate(addr, &ca_file, Some((&pod_cert, &pod_key)), ALPN_H2)
            .await
            .context("the pods' certificate")?;
        plaintext_is_refused(addr).await?;
        let tail = fleet.log_tail("supervisor", 400);
        ensure!(
            tail.contains("TLS handshake refused"),
            "the supervisor did not log the refusals: {tail}"
        );
        Ok(())
    })
    .await
}
