//! `sslmode` and `sslrootcert` in a database URL are honoured on the path
//! every service takes (`genesis_store::connect_options`): against the
//! shared server, `disable` connects in clear, `require` over TLS, and
//! `verify-full` refuses a certificate not issued to its host; against a
//! throwaway PostgreSQL with a test CA's certificate, `verify-full` with
//! `sslrootcert` connects, a server that only takes TLS refuses `disable`,
//! and once it stops offering TLS `require` fails saying TLS was required.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use genesis_e2e::certs::TestCa;
use sqlx::postgres::PgPoolOptions;

/// Connect through the services' options builder; whether the session is
/// encrypted (`pg_stat_ssl`).
async fn encrypted(url: &str) -> anyhow::Result<bool> {
    // As every service bin does first thing (sqlx's verify-ca takes the
    // process default).
    genesis_net::install_default_provider();
    let options = genesis_store::connect_options(url, Some("genesis-e2e-tls"))?;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await?;
    let ssl = genesis_store::inspect::fleet::connection_encrypted(&pool).await?;
    pool.close().await;
    Ok(ssl)
}

fn with_params(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

#[tokio::test]
async fn sslmode_is_honoured_against_the_shared_server() -> anyhow::Result<()> {
    let base = genesis_e2e::base_database_url();
    let Ok(ssl_on) = encrypted(&with_params(&base, "sslmode=prefer")).await else {
        println!("skipped: the shared PostgreSQL is not reachable");
        return Ok(());
    };
    ensure!(
        !encrypted(&with_params(&base, "sslmode=disable")).await?,
        "sslmode=disable must connect in clear"
    );
    if !ssl_on {
        // The server offers no TLS: require must fail, saying so.
        let err = encrypted(&with_params(&base, "sslmode=require"))
            .await
            .expect_err("require against a plaintext server")
            .to_string();
        ensure!(err.contains("server does not support TLS"), "{err}");
        return Ok(());
    }
    ensure!(
        encrypted(&with_params(&base, "sslmode=require")).await?,
        "sslmode=require must encrypt"
    );
    // The shared server's certificate (a distribution's self-signed one,
    // issued to `localhost`) is not valid for the address the URL names,
    // whatever this host trusts: verify-full refuses it.
    let err = encrypted(&with_params(&base, "sslmode=verify-full"))
        .await
        .expect_err("a certificate not issued to the URL's host")
        .to_string();
    ensure!(err.contains("certificate"), "{err}");
    Ok(())
}

/// The PostgreSQL bin directory, if its server binaries are here.
fn pg_bin() -> Option<PathBuf> {
    let dir = PathBuf::from("/usr/lib/postgresql/15/bin");
    (dir.join("initdb").is_file() && dir.join("pg_ctl").is_file()).then_some(dir)
}

/// Run a PostgreSQL tool, as the `postgres` user when this process is
/// root (the server refuses to run as root).
fn pg(bin: &Path, tool: &str, args: &[&str]) -> anyhow::Result<()> {
    let as_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let program = bin.join(tool);
    let mut cmd = if as_root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&program);
        c
    } else {
        Command::new(&program)
    };
    let out = cmd
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("run {tool}"))?;
    if !out.status.success() {
        bail!(
            "{tool} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

struct Cluster {
    bin: PathBuf,
    data: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = pg(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                &self.data.display().to_string(),
                "-m",
                "immediate",
                "stop",
            ],
        );
    }
}

#[tokio::test]
async fn verify_full_with_sslrootcert_connects_to_a_server_with_a_test_ca() -> anyhow::Result<()> {
    let Some(bin) = pg_bin() else {
        println!("skipped: no PostgreSQL server binaries in /usr/lib/postgresql/15/bin");
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    let ca = TestCa::new("postgres test CA")?;
    let ca_file = ca.write(root, "ca")?;
    let (cert, key) = ca.server("postgres")?.write(root, "server")?;
    let data = root.join("data");
    // The server runs as `postgres` when this is root: it must own its
    // files, and its key must be private.
    let owner = Command::new("id")
        .args(["-u", "postgres"])
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<u32>()
                .ok()
        });
    std::fs::create_dir(&data)?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))?;
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700))?;
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755))?;
    }
    if let Some(uid) = owner {
        for p in [
            root,
            data.as_path(),
            cert.as_path(),
            key.as_path(),
            ca_file.as_path(),
        ] {
            std::os::unix::fs::chown(p, Some(uid), None)?;
        }
    }
    let data_arg = data.display().to_string();
    if let Err(e) = pg(
        &bin,
        "initdb",
        &["-D", &data_arg, "-U", "postgres", "-A", "trust"],
    ) {
        println!("skipped: initdb failed: {e}");
        return Ok(());
    }
    let port = genesis_e2e::free_port()?;
    std::fs::write(
        data.join("postgresql.auto.conf"),
        format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\nfsync = off\n",
            root.display(),
            cert.display(),
            key.display()
        ),
    )?;
    // TLS only: a plaintext login is refused by the server.
    std::fs::write(
        data.join("pg_hba.conf"),
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
    )?;
    let cluster = Cluster {
        bin: bin.clone(),
        data: data.clone(),
    };
    let log = root.join("pg.log").display().to_string();
    pg(
        &bin,
        "pg_ctl",
        &["-D", &data_arg, "-l", &log, "-w", "-t", "30", "start"],
    )?;

    let url = format!("postgres://postgres@localhost:{port}/postgres");
    let verified = with_params(
        &url,
        &format!("sslmode=verify-full&sslrootcert={}", ca_file.display()),
    );
    ensure!(encrypted(&verified).await?, "verify-full must encrypt");
    let err = encrypted(&with_params(&url, "sslmode=disable"))
        .await
        .expect_err("a TLS-only server refuses a plaintext login")
        .to_string();
    ensure!(err.contains("no encryption"), "{err}");

    // The server stops offering TLS: `require` fails, saying TLS was
    // required.
    std::fs::write(
        data.join("pg_hba.conf"),
        "local all all trust\nhost all all 127.0.0.1/32 trust\n",
    )?;
    let conf = std::fs::read_to_string(data.join("postgresql.auto.conf"))?;
    std::fs::write(
        data.join("postgresql.auto.conf"),
        conf.replace("ssl = on", "ssl = off"),
    )?;
    pg(&bin, "pg_ctl", &["-D", &data_arg, "reload"])?;
    let plain = with_params(&url, "sslmode=disable");
    genesis_e2e::wait_for("the reload", Duration::from_secs(15), || {
        let plain = plain.clone();
        async move { Ok(encrypted(&plain).await.ok().map(drop)) }
    })
    .await?;
    let err = encrypted(&with_params(&url, "sslmode=require"))
        .await
        .expect_err("require against a server without TLS")
        .to_string();
    ensure!(err.contains("server does not support TLS"), "{err}");
    drop(cluster);
    Ok(())
}
