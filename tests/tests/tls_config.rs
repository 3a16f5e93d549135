//! The TLS settings' failure paths and the certificate reload, without a
//! fleet: half-given pairs, unreadable, empty and mismatched files refused
//! with the setting and path named (by the library and by the real
//! `genesis-control` and `genesis-supervisor` at start-up); a replaced pair
//! served to new connections, a broken one never.

use std::path::Path;
use std::time::Duration;

use anyhow::ensure;
use genesis_e2e::certs::{TestCa, presented_certificate};
use genesis_net::{ClientIdentity, ServerTlsArgs, SettingPath, TlsListener};

fn args(cert: Option<&Path>, key: Option<&Path>) -> ServerTlsArgs {
    ServerTlsArgs {
        tls_cert_file: cert.map(Path::to_path_buf),
        tls_key_file: key.map(Path::to_path_buf),
        tls_reload_secs: 30,
    }
}

fn refused(a: &ServerTlsArgs, ca: Option<&SettingPath>) -> String {
    match a.load(ca) {
        Ok(_) => panic!("accepted: {a:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn half_given_unreadable_and_mismatched_files_are_refused_by_name() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = TestCa::new("test CA")?;
    let (cert, key) = ca.server("server")?.write(dir.path(), "server")?;
    let (_, other_key) = ca.server("other")?.write(dir.path(), "other")?;
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "")?;

    let err = refused(&args(Some(&cert), None), None);
    ensure!(
        err.starts_with("GENESIS_TLS_CERT_FILE is set but GENESIS_TLS_KEY_FILE is not"),
        "{err}"
    );
    let err = refused(&args(None, Some(&key)), None);
    ensure!(
        err.starts_with("GENESIS_TLS_KEY_FILE is set but GENESIS_TLS_CERT_FILE is not"),
        "{err}"
    );
    let err = refused(
        &args(Some(Path::new("/nonexistent/tls.crt")), Some(&key)),
        None,
    );
    ensure!(
        err.starts_with("GENESIS_TLS_CERT_FILE /nonexistent/tls.crt: cannot read it:"),
        "{err}"
    );
    let err = refused(&args(Some(&empty), Some(&key)), None);
    ensure!(
        err.ends_with("empty.pem: holds no PEM CERTIFICATE block"),
        "{err}"
    );
    let err = refused(&args(Some(&cert), Some(&cert)), None);
    ensure!(
        err.starts_with("GENESIS_TLS_KEY_FILE") && err.contains("holds no PEM private key"),
        "{err}"
    );
    let err = refused(&args(Some(&cert), Some(&other_key)), None);
    ensure!(
        err.contains("other.key does not go with GENESIS_TLS_CERT_FILE"),
        "{err}"
    );
    let ca_file = SettingPath::new("GENESIS_TLS_CLIENT_CA_FILE", "/nonexistent/ca.pem");
    let err = refused(&args(None, None), Some(&ca_file));
    ensure!(
        err.contains("GENESIS_TLS_CLIENT_CA_FILE is set but GENESIS_TLS_CERT_FILE"),
        "{err}"
    );
    let err = refused(&args(Some(&cert), Some(&key)), Some(&ca_file));
    ensure!(
        err.starts_with("GENESIS_TLS_CLIENT_CA_FILE /nonexistent/ca.pem: cannot read it"),
        "{err}"
    );
    ensure!(args(None, None).load(None)?.is_none(), "neither: plaintext");
    ensure!(args(Some(&cert), Some(&key)).load(None)?.is_some());

    // A client identity is both files or neither.
    let err = ClientIdentity::pair(
        Some(SettingPath::new("GENESIS_TLS_CLIENT_CERT_FILE", &cert)),
        None,
    )
    .expect_err("a certificate alone")
    .to_string();
    ensure!(
        err == "GENESIS_TLS_CLIENT_CERT_FILE is set without its private key: a client certificate needs both",
        "{err}"
    );
    let err = ClientIdentity::pair(
        None,
        Some(SettingPath::new("GENESIS_TLS_CLIENT_KEY_FILE", &key)),
    )
    .expect_err("a key alone")
    .to_string();
    ensure!(
        err.starts_with("GENESIS_TLS_CLIENT_KEY_FILE is set without its certificate"),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn replaced_files_reach_new_connections_and_broken_ones_keep_the_old_certificate()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = TestCa::new("test CA")?;
    let ca_file = ca.write(dir.path(), "ca")?;
    let first = ca.server("first")?;
    let (cert, key) = first.write(dir.path(), "tls")?;
    let tls = args(Some(&cert), Some(&key))
        .load(None)?
        .ok_or_else(|| anyhow::anyhow!("TLS configured"))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    // A listener that answers anything after the handshake (the probe
    // waits for a byte).
    let mut incoming = TlsListener::new(listener, tls.server_config(&[b"h2"])?)?;
    tokio::spawn(async move {
        use axum::serve::Listener as _;
        use tokio::io::AsyncWriteExt as _;
        loop {
            let (mut conn, _) = incoming.accept().await;
            let _ = conn.write_all(b"ok").await;
            let _ = conn.flush().await;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                drop(conn);
            });
        }
    });
    let seen = presented_certificate(addr, &ca_file, None, &[b"h2"]).await?;
    ensure!(seen == first.der, "serves the first certificate");
    ensure!(!tls.reload_if_changed()?, "nothing changed yet");

    let second = ca.server("second")?;
    second.write(dir.path(), "tls")?;
    ensure!(tls.reload_if_changed()?, "the replaced pair is taken");
    let seen = presented_certificate(addr, &ca_file, None, &[b"h2"]).await?;
    ensure!(
        seen == second.der,
        "new connections see the new certificate"
    );

    // A key that does not match, then an unreadable certificate: refused,
    // the second certificate keeps serving.
    let third = ca.server("third")?;
    std::fs::write(&key, &third.key_pem)?;
    let err = tls
        .reload_if_changed()
        .expect_err("mismatched pair")
        .to_string();
    ensure!(err.contains("does not go with"), "{err}");
    std::fs::write(&cert, "garbage")?;
    let err = tls.reload_if_changed().expect_err("not PEM").to_string();
    ensure!(err.starts_with("GENESIS_TLS_CERT_FILE"), "{err}");
    let seen = presented_certificate(addr, &ca_file, None, &[b"h2"]).await?;
    ensure!(seen == second.der, "a broken pair replaced the certificate");
    // Repaired: taken at the next check.
    third.write(dir.path(), "tls")?;
    ensure!(tls.reload_if_changed()?, "the repaired pair is taken");
    let seen = presented_certificate(addr, &ca_file, None, &[b"h2"]).await?;
    ensure!(seen == third.der, "the repaired pair serves");
    Ok(())
}

/// Run a service bin with only `env` (and PATH) until it exits; its exit
/// code and stderr.
fn run_bin(name: &str, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<(i32, String)> {
    let out = genesis_e2e::bin_command(name, args, env)?.output()?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[test]
fn services_refuse_to_start_on_bad_tls_settings() -> anyhow::Result<()> {
    if let Some(why) = genesis_e2e::binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let (cert, _) = TestCa::new("test CA")?
        .server("server")?
        .write(dir.path(), "server")?;
    let cert = cert.display().to_string();
    // The database and NATS are never reached: the settings fail first.
    let base = [
        ("GENESIS_DEFAULT_PROVIDER", "scripted"),
        ("GENESIS_DATABASE_URL", "postgres://127.0.0.1:1/none"),
        ("GENESIS_NATS_URL", "nats://127.0.0.1:1"),
        ("GENESIS_GRPC_ADDR", "127.0.0.1:0"),
        ("GENESIS_HTTP_ADDR", "127.0.0.1:0"),
        ("GENESIS_DASHBOARD_ADDR", "off"),
    ];
    let with = |extra: &[(&'static str, &str)]| -> Vec<(&str, String)> {
        base.iter()
            .map(|(k, v)| (*k, (*v).to_owned()))
            .chain(extra.iter().map(|(k, v)| (*k, (*v).to_owned())))
            .collect()
    };
    // (bin, args, env, what its error must say)
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, String)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "genesis-control",
            vec!["serve"],
            with(&[("GENESIS_TLS_CERT_FILE", &cert)]),
            "GENESIS_TLS_CERT_FILE is set but GENESIS_TLS_KEY_FILE is not",
        ),
        (
            "genesis-control",
            vec!["serve"],
            with(&[
                ("GENESIS_TLS_CERT_FILE", "/nonexistent/tls.crt"),
                ("GENESIS_TLS_KEY_FILE", "/nonexistent/tls.key"),
            ]),
            "GENESIS_TLS_CERT_FILE /nonexistent/tls.crt: cannot read it",
        ),
        (
            "genesis-control",
            vec!["serve"],
            with(&[("GENESIS_NATS_USER", "genesis")]),
            "GENESIS_NATS_USER is set but GENESIS_NATS_PASSWORD is not",
        ),
        (
            "genesis-supervisor",
            vec![],
            with(&[("GENESIS_TLS_KEY_FILE", &cert)]),
            "GENESIS_TLS_KEY_FILE is set but GENESIS_TLS_CERT_FILE is not",
        ),
        (
            "genesis-supervisor",
            vec![],
            with(&[("GENESIS_TLS_CLIENT_CA_FILE", &cert)]),
            "GENESIS_TLS_CLIENT_CA_FILE is set but GENESIS_TLS_CERT_FILE and GENESIS_TLS_KEY_FILE are not",
        ),
        (
            "genesis-agent-pod",
            vec![],
            with(&[
                ("GENESIS_AGENT_TOKEN", "gen_x"),
                ("GENESIS_SUPERVISOR_URL", "http://127.0.0.1:1"),
                ("GENESIS_SUPERVISOR_CA_FILE", &cert),
            ]),
            "apply to an https:// GENESIS_SUPERVISOR_URL only",
        ),
        (
            "genesis-agent-pod",
            vec![],
            with(&[
                ("GENESIS_AGENT_TOKEN", "gen_x"),
                ("GENESIS_SUPERVISOR_URL", "https://127.0.0.1:1"),
                ("GENESIS_TLS_CLIENT_CERT_FILE", &cert),
            ]),
            "GENESIS_TLS_CLIENT_CERT_FILE is set without its private key",
        ),
    ];
    for (bin, args, env, want) in cases {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (code, err) = run_bin(bin, &args, &env)?;
        ensure!(
            code != 0 && err.contains(want),
            "{bin} with {env:?}: exit {code}, stderr {err}"
        );
    }
    Ok(())
}
