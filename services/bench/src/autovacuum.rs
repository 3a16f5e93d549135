//! The database server's `autovacuum` for the length of a full run.
//!
//! A deployment's PostgreSQL vacuums and analyzes the fleet's tables as they
//! churn (PostgreSQL's default); a server configured with `autovacuum = off`
//! (a CI machine's, say) lets every window run on the dead row versions and
//! the stale statistics of the windows before it, which is not what a user
//! of the fleet would see. A full run therefore turns
//! the server's autovacuum on when it is off and puts the setting back as
//! it found it; the workers' CPU is counted with the server's
//! (`procs::sample`). `--autovacuum-as-is` and the quick mode leave the
//! server alone.
//!
//! This is the one server setting the bench changes, and only this way:
//! `ALTER SYSTEM` and a configuration reload, undone the same way.

use std::time::Duration;

use genesis_store::bench::{self, AutovacuumChange};
use sqlx::PgPool;

/// What the run did with the server's setting, and how to undo it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Autovacuum {
    /// Left as the server has it.
    AsIs { setting: String },
    /// Turned on for the run; `restore` puts back what the server had.
    TurnedOn { restore: Restore },
}

/// How the server had its `autovacuum = off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// From a configuration file: the run's `ALTER SYSTEM` entry is removed.
    Reset,
    /// From an earlier `ALTER SYSTEM` (`postgresql.auto.conf`): set back
    /// to off, keeping that entry.
    SetOff,
}

impl Autovacuum {
    /// The report's line.
    pub fn describe(&self) -> String {
        match self {
            Autovacuum::AsIs { setting } => format!("{setting} (as the server has it)"),
            Autovacuum::TurnedOn { .. } => {
                "on for the run (the server has it off; put back after the run)".into()
            }
        }
    }
}

/// Read the server's setting and, when `turn_on` and it is off, turn it on
/// and wait until a new session sees it. A failure (no superuser, say)
/// leaves the server as it was, and the run goes on as is.
pub async fn prepare(db: &PgPool, turn_on: bool) -> anyhow::Result<Autovacuum> {
    let (setting, file) = bench::autovacuum_setting(db).await?;
    if !turn_on || setting == "on" {
        return Ok(Autovacuum::AsIs { setting });
    }
    let restore = restore_for(&file);
    if let Err(e) = set(db, AutovacuumChange::On, "on").await {
        eprintln!("bench: could not turn the server's autovacuum on ({e}); running with it off");
        // A failure may have come after the ALTER SYSTEM: undo it.
        let _ = undo(db, restore).await;
        return Ok(Autovacuum::AsIs { setting });
    }
    Ok(Autovacuum::TurnedOn { restore })
}

/// How to undo the run's `ALTER SYSTEM`, by the file the server's `off`
/// came from.
fn restore_for(sourcefile: &str) -> Restore {
    if sourcefile.ends_with("postgresql.auto.conf") {
        Restore::SetOff
    } else {
        Restore::Reset
    }
}

/// Put the server's setting back as [`prepare`] found it.
pub async fn restore(db: &PgPool, autovacuum: &Autovacuum) -> anyhow::Result<()> {
    match autovacuum {
        Autovacuum::AsIs { .. } => Ok(()),
        Autovacuum::TurnedOn { restore } => undo(db, *restore).await,
    }
}

async fn undo(db: &PgPool, restore: Restore) -> anyhow::Result<()> {
    let change = match restore {
        Restore::Reset => AutovacuumChange::Reset,
        Restore::SetOff => AutovacuumChange::Off,
    };
    set(db, change, "off").await
}

/// Apply `change`, reload the configuration and wait (up to 5 s) until a
/// session reads `expect`: each backend reads the reloaded file when its
/// signal arrives.
async fn set(db: &PgPool, change: AutovacuumChange, expect: &str) -> anyhow::Result<()> {
    bench::alter_autovacuum(db, change).await?;
    let statement = change.statement();
    genesis_e2e::wait_for(
        &format!("the server's autovacuum to be {expect} after `{statement}`"),
        Duration::from_secs(5),
        || async {
            let now = bench::show_autovacuum(db).await?;
            Ok((now == expect).then_some(()))
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use std::str::FromStr as _;

    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

    use super::*;

    #[test]
    fn an_off_set_by_alter_system_is_set_back_and_one_from_a_file_is_reset() {
        assert_eq!(
            restore_for("/var/lib/postgresql/15/main/postgresql.auto.conf"),
            Restore::SetOff
        );
        assert_eq!(
            restore_for("/etc/postgresql/15/main/conf.d/90-ci.conf"),
            Restore::Reset
        );
        // Not readable to the role (no pg_read_all_settings): a file.
        assert_eq!(restore_for(""), Restore::Reset);
        assert!(
            Autovacuum::AsIs {
                setting: "off".into()
            }
            .describe()
            .starts_with("off (as the server has it)")
        );
        assert!(
            Autovacuum::TurnedOn {
                restore: Restore::Reset
            }
            .describe()
            .starts_with("on for the run")
        );
    }

    #[tokio::test]
    async fn a_role_that_may_not_alter_the_system_runs_with_the_server_as_it_is() {
        let url = genesis_e2e::base_database_url();
        let admin = PgPool::connect(&url).await.expect("the test server");
        let before = bench::show_autovacuum(&admin).await.expect("show");
        let role = format!("genesis_bench_plain_{}", genesis_e2e::suffix());
        bench::fixture_create_plain_role(&admin, &role)
            .await
            .expect("create role");
        let plain = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(
                PgConnectOptions::from_str(&url)
                    .expect("url")
                    .username(&role),
            )
            .await
            .expect("connect as the plain role");

        let got = prepare(&plain, true).await;
        let restored = match &got {
            Ok(a) => restore(&plain, a).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        plain.close().await;
        let after = bench::show_autovacuum(&admin).await.expect("show");
        bench::fixture_drop_role(&admin, &role)
            .await
            .expect("drop role");

        assert_eq!(
            got.expect("prepare answers"),
            Autovacuum::AsIs {
                setting: before.clone()
            }
        );
        assert_eq!(restored, Ok(()));
        assert_eq!(after, before, "the server's setting changed");
    }
}
