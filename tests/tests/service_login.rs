//! The database login, through the real binaries: `genesis-control serve`
//! and `genesis-supervisor` refuse to start logged in as the schema owner (a
//! superuser here), naming why, unless `GENESIS_ALLOW_OWNER_LOGIN=true`;
//! `genesis-control migrate --service-role` refuses a BYPASSRLS role naming
//! the violation and grants it nothing, and refuses a role that does not
//! exist before any migration runs. Every other e2e test runs its services
//! as the prepared service login ([`genesis_e2e::SERVICE_ROLE`]), so the
//! accepted path is exercised everywhere.

use std::process::{Output, Stdio};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{TestDatabase, bin_command, bounded_e2e, free_port, suffix};
use genesis_store::inspect::fleet as checks;

/// Run a bin with exactly `env` (and PATH) and `args`, killed after `limit`.
fn run(
    bin: &str,
    env: &[(&str, String)],
    args: &[&str],
    limit: Duration,
) -> anyhow::Result<Output> {
    let mut cmd = bin_command(bin, args, env)?;
    cmd.env("RUST_BACKTRACE", "0")
        .env("RUST_LIB_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("spawn {bin}"))?;
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait()?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(child.wait_with_output()?)
}

/// The env a service needs to get as far as its database check.
fn service_env(db_url: &str) -> Vec<(&'static str, String)> {
    let port = || free_port().map(|p| format!("127.0.0.1:{p}"));
    vec![
        ("GENESIS_DATABASE_URL", db_url.to_owned()),
        ("GENESIS_DEFAULT_PROVIDER", "scripted".to_owned()),
        ("GENESIS_GRPC_ADDR", port().unwrap_or_default()),
        ("GENESIS_HTTP_ADDR", port().unwrap_or_default()),
        ("GENESIS_DASHBOARD_ADDR", "off".to_owned()),
        ("GENESIS_NATS_URL", "nats://127.0.0.1:1".to_owned()),
        ("GENESIS_LOG_FORMAT", "text".to_owned()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_refuse_the_owner_login_and_migrate_refuses_an_unsafe_role()
-> anyhow::Result<()> {
    bounded_e2e(Duration::from_secs(120), async {
        let database = TestDatabase::create(&suffix()).await?;
        let admin = &database.admin;
        let owner_url = database.url.clone();
        let checked = async {
            // A role that does not exist: refused before any migration.
            let out = run(
                "genesis-control",
                &[("GENESIS_DATABASE_URL", owner_url.clone())],
                &["migrate", "--service-role", "genesis_e2e_no_such_role"],
                Duration::from_secs(30),
            )?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            ensure!(!out.status.success(), "migrate accepted a missing role");
            ensure!(
                stderr.contains("service role \"genesis_e2e_no_such_role\" does not exist"),
                "{stderr}"
            );
            let db = sqlx::postgres::PgPoolOptions::new()
                .max_connections(1)
                .connect(&owner_url)
                .await?;
            let migrated = checks::schema_migrated(&db).await?;
            ensure!(!migrated, "the refused migrate ran the migrations");

            // A BYPASSRLS role: refused, named, nothing granted.
            let bypass = "genesis_e2e_bypassrls";
            checks::fixture_bypassrls_role(admin, bypass).await?;
            let out = run(
                "genesis-control",
                &[
                    ("GENESIS_DATABASE_URL", owner_url.clone()),
                    ("GENESIS_SERVICE_ROLE", bypass.to_owned()),
                ],
                &["migrate"],
                Duration::from_secs(60),
            )?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            ensure!(!out.status.success(), "migrate accepted a BYPASSRLS role");
            ensure!(
                stderr.contains(&format!(
                    "database role \"{bypass}\" may not be the services' login: it has BYPASSRLS"
                )),
                "{stderr}"
            );
            let granted = checks::count_role_memberships(&db, bypass).await?;
            ensure!(
                granted == 0,
                "the refused role was granted {granted} role(s)"
            );

            // The owner's migrate alone, then the services as the owner.
            let out = run(
                "genesis-control",
                &[("GENESIS_DATABASE_URL", owner_url.clone())],
                &["migrate"],
                Duration::from_secs(60),
            )?;
            ensure!(out.status.success(), "migrate failed: {out:?}");
            for (bin, args) in [
                ("genesis-control", vec!["serve"]),
                ("genesis-supervisor", vec![]),
            ] {
                let out = run(
                    bin,
                    &service_env(&owner_url),
                    &args,
                    Duration::from_secs(30),
                )?;
                let stderr = String::from_utf8_lossy(&out.stderr);
                ensure!(
                    !out.status.success() && out.status.code().is_some(),
                    "{bin} served as the owner: {out:?}"
                );
                ensure!(
                    stderr.contains("may not be the services' login: it is a superuser")
                        && stderr.contains("it owns the schema"),
                    "{bin}: {stderr}"
                );
            }
            // With the development escape the check is skipped and says so.
            let mut env = service_env(&owner_url);
            env.push(("GENESIS_ALLOW_OWNER_LOGIN", "true".to_owned()));
            env.push(("RUST_LOG", "warn".to_owned()));
            let out = run("genesis-supervisor", &env, &[], Duration::from_secs(5))?;
            let logged = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            ensure!(
                out.status.code().is_none(),
                "the supervisor stopped with the escape set: {out:?}"
            );
            ensure!(
                logged.contains("GENESIS_ALLOW_OWNER_LOGIN is set"),
                "{logged}"
            );
            db.close().await;
            anyhow::Ok(())
        };
        let outcome = checked.await;
        database.drop_database().await?;
        outcome
    })
    .await
}
