//! NATS with TLS and credentials through genesis-net's one options builder
//! (what control's publisher and registry and the agent pods' consumer
//! use): a private `nats-server` requiring TLS (a test CA's certificate) and
//! a user and password. The right options connect; missing or wrong
//! credentials, a missing CA, TLS required of a plaintext server and bad
//! files fail with a precise error that never holds the password. And a
//! whole fleet (control's publisher and registry, the pods' consumer) on
//! such a server, its password in no log line.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::certs::TestCa;
use genesis_net::NatsArgs;

const PASSWORD: &str = "n4ts-s3cret-pass";

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `nats-server` on a free port requiring TLS with a certificate of a
/// test CA and the user `genesis` with [`PASSWORD`] (JetStream on; the CA,
/// the certificate and the store under `dir`), and the CA's file; `None`
/// when the binary is absent.
async fn start(dir: &Path) -> anyhow::Result<Option<(Server, PathBuf)>> {
    let ca = TestCa::new("nats test CA")?;
    let ca_file = ca.write(dir, "ca")?;
    let (cert, key) = ca.server("nats")?.write(dir, "nats")?;
    if Command::new("nats-server")
        .arg("--version")
        .output()
        .is_err()
    {
        return Ok(None);
    }
    let addr: SocketAddr = ([127, 0, 0, 1], genesis_e2e::free_port()?).into();
    let conf = dir.join("nats.conf");
    std::fs::write(
        &conf,
        format!(
            "listen: {addr}\njetstream {{\n  store_dir: {:?}\n}}\n\
             tls {{\n  cert_file: {:?}\n  key_file: {:?}\n}}\n\
             authorization {{\n  user: genesis\n  password: {PASSWORD:?}\n}}\n",
            dir.join("jetstream").display().to_string(),
            cert.display().to_string(),
            key.display().to_string(),
        ),
    )?;
    let child = Command::new("nats-server")
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(dir.join("nats.log"))?))
        .spawn()
        .context("spawn nats-server")?;
    let server = Server { child, addr };
    genesis_e2e::wait_for(
        "nats-server to listen",
        Duration::from_secs(15),
        || async move { Ok(tokio::net::TcpStream::connect(addr).await.ok().map(drop)) },
    )
    .await?;
    Ok(Some((server, ca_file)))
}

async fn connect(args: &NatsArgs, url: &str) -> Result<async_nats::Client, genesis_net::NatsError> {
    args.connect(url, "genesis-e2e", |o| {
        o.connection_timeout(Duration::from_secs(5))
    })
    .await
}

fn refusal(r: Result<async_nats::Client, genesis_net::NatsError>) -> String {
    match r {
        Ok(_) => panic!("connected"),
        Err(e) => {
            let text = e.to_string();
            assert!(!text.contains(PASSWORD), "the password leaked: {text}");
            assert!(!text.contains("wrong-pass"), "a password leaked: {text}");
            text
        }
    }
}

#[tokio::test]
async fn nats_over_tls_with_credentials_connects_and_refuses_precisely() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let Some((server, ca_file)) = start(dir.path()).await? else {
        println!("skipped: nats-server is not installed");
        return Ok(());
    };
    let tls_url = format!("tls://{}", server.addr);
    let good = NatsArgs {
        nats_user: Some("genesis".into()),
        nats_password: Some(PASSWORD.into()),
        nats_ca_file: Some(ca_file.clone()),
        ..NatsArgs::default()
    };

    // The right options: connected, and a round trip works.
    let client = connect(&good, &tls_url).await?;
    client.publish("genesis.tls.check", "hi".into()).await?;
    client.flush().await?;
    drop(client);
    // A nats:// URL to a TLS server upgrades (the server asks for it).
    connect(&good, &format!("nats://{}", server.addr)).await?;
    // Credentials in the URL keep working.
    let in_url = NatsArgs {
        nats_ca_file: Some(ca_file.clone()),
        ..NatsArgs::default()
    };
    connect(
        &in_url,
        &format!("tls://genesis:{PASSWORD}@{}", server.addr),
    )
    .await?;

    // No credentials, or a wrong password: refused by name.
    let err = refusal(connect(&in_url, &tls_url).await);
    ensure!(
        err.starts_with(&format!(
            "NATS {tls_url}: the server refused the credentials"
        )),
        "{err}"
    );
    let wrong = NatsArgs {
        nats_password: Some("wrong-pass".into()),
        ..good.clone()
    };
    let err = refusal(connect(&wrong, &tls_url).await);
    ensure!(err.contains("the server refused the credentials"), "{err}");
    // Without the CA the server's certificate is not trusted; the URL's
    // password is redacted in the error.
    let no_ca = NatsArgs {
        nats_ca_file: None,
        ..NatsArgs::default()
    };
    let url_with_password = format!("tls://genesis:{PASSWORD}@{}", server.addr);
    let err = refusal(connect(&no_ca, &url_with_password).await);
    ensure!(
        err.starts_with(&format!(
            "NATS tls://genesis:***@{}: TLS failed",
            server.addr
        )) && err.contains("GENESIS_NATS_CA_FILE"),
        "{err}"
    );

    // Bad files and half-given settings: refused before any connection.
    let missing = NatsArgs {
        nats_ca_file: Some("/nonexistent/ca.pem".into()),
        ..good.clone()
    };
    let err = refusal(connect(&missing, &tls_url).await);
    ensure!(
        err.starts_with("GENESIS_NATS_CA_FILE /nonexistent/ca.pem: cannot read it"),
        "{err}"
    );
    let bad_creds = dir.path().join("bad.creds");
    std::fs::write(&bad_creds, "not a creds file")?;
    let creds = NatsArgs {
        nats_creds_file: Some(bad_creds),
        ..in_url.clone()
    };
    let err = refusal(connect(&creds, &tls_url).await);
    ensure!(
        err.starts_with("GENESIS_NATS_CREDS_FILE") && err.contains("not a NATS credentials file"),
        "{err}"
    );
    let half = NatsArgs {
        nats_password: None,
        ..good.clone()
    };
    let err = refusal(connect(&half, &tls_url).await);
    ensure!(
        err == "GENESIS_NATS_USER is set but GENESIS_NATS_PASSWORD is not",
        "{err}"
    );
    let twice = good.clone();
    let err = refusal(connect(&twice, &url_with_password).await);
    ensure!(
        err == "GENESIS_NATS_URL carries credentials and GENESIS_NATS_USER is set too: give them once",
        "{err}"
    );
    let both = NatsArgs {
        nats_creds_file: Some(dir.path().join("any.creds")),
        ..good.clone()
    };
    let err = refusal(connect(&both, &tls_url).await);
    ensure!(err.contains("two ways to log in"), "{err}");
    Ok(())
}

#[tokio::test]
async fn tls_required_refuses_a_plaintext_server() -> anyhow::Result<()> {
    // The shared NATS serves plaintext.
    let url = genesis_e2e::shared_nats_url();
    if async_nats::connect(&url).await.is_err() {
        println!("skipped: the shared NATS at {url} is not reachable");
        return Ok(());
    }
    let required = NatsArgs {
        nats_tls_required: true,
        ..NatsArgs::default()
    };
    let err = refusal(connect(&required, &url).await);
    ensure!(err.contains("TLS"), "{err}");
    connect(&NatsArgs::default(), &url).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_runs_on_nats_with_tls_and_a_password_that_no_log_line_holds() -> anyhow::Result<()>
{
    if let Some(why) = genesis_e2e::binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let Some((server, ca_file)) = start(dir.path()).await? else {
        println!("skipped: nats-server is not installed");
        return Ok(());
    };
    genesis_e2e::bounded(Duration::from_secs(120), async {
        let mut opts = genesis_e2e::FleetOptions::new("nats-tls-fleet", 1);
        opts.nats_url = Some(format!("tls://{}", server.addr));
        opts.extra_env.extend([
            ("GENESIS_NATS_USER".to_owned(), "genesis".to_owned()),
            ("GENESIS_NATS_PASSWORD".to_owned(), PASSWORD.to_owned()),
            (
                "GENESIS_NATS_CA_FILE".to_owned(),
                ca_file.display().to_string(),
            ),
            ("GENESIS_NATS_TLS_REQUIRED".to_owned(), "true".to_owned()),
            ("RUST_LOG".to_owned(), "debug".to_owned()),
        ]);
        let fleet = genesis_e2e::Fleet::start(opts).await?;
        // The greeting needs the outbox to publish and a pod to consume.
        let tenant = fleet.create_tenant("nats-tls-acme").await?;
        let soa = fleet.wait_soa(&tenant, Duration::from_secs(45)).await?;
        fleet
            .wait_decision(&soa, 0, "Initialized", Duration::from_secs(45))
            .await?;
        for process in ["control", "supervisor", "agent-pod-0"] {
            let log = fleet.log_tail(process, 100_000);
            ensure!(!log.is_empty(), "{process} logged nothing");
            ensure!(
                !log.contains(PASSWORD),
                "{process} logged the NATS password"
            );
        }
        Ok(())
    })
    .await
}
