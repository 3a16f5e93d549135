//! The database server's `autovacuum` for the length of a full run.
//!
//! A deployment's PostgreSQL vacuums and analyzes the fleet's tables as they
//! churn (PostgreSQL's default); a server configured with `autovacuum = off`
//! (a CI machine's, say) lets every window run on the dead row versions and
//! the stale statistics of the windows before it, which is not what a user
//! of the fleet would see (BENCHMARKS.md 0v). A full run therefore turns
//! the server's autovacuum on when it is off and puts the setting back as
//! it found it; the workers' CPU is counted with the server's
//! (`procs::sample`). `--autovacuum-as-is` and the quick mode leave the
//! server alone.
//!
//! This is the one server setting the bench changes, and only this way:
//! `ALTER SYSTEM` and a configuration reload, undone the same way.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::Row as _;

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
    let row = sqlx::query("SELECT setting, coalesce(sourcefile, '') AS file FROM pg_settings WHERE name = 'autovacuum'")
        .fetch_one(db)
        .await?;
    let setting: String = row.try_get("setting")?;
    let file: String = row.try_get("file")?;
    if !turn_on || setting == "on" {
        return Ok(Autovacuum::AsIs { setting });
    }
    let restore = if file.ends_with("postgresql.auto.conf") {
        Restore::SetOff
    } else {
        Restore::Reset
    };
    if let Err(e) = set(db, "ALTER SYSTEM SET autovacuum = on", "on").await {
        eprintln!("bench: could not turn the server's autovacuum on ({e}); running with it off");
        // A failure may have come after the ALTER SYSTEM: undo it.
        let _ = undo(db, restore).await;
        return Ok(Autovacuum::AsIs { setting });
    }
    Ok(Autovacuum::TurnedOn { restore })
}

/// Put the server's setting back as [`prepare`] found it.
pub async fn restore(db: &PgPool, autovacuum: &Autovacuum) -> anyhow::Result<()> {
    match autovacuum {
        Autovacuum::AsIs { .. } => Ok(()),
        Autovacuum::TurnedOn { restore } => undo(db, *restore).await,
    }
}

async fn undo(db: &PgPool, restore: Restore) -> anyhow::Result<()> {
    let statement = match restore {
        Restore::Reset => "ALTER SYSTEM RESET autovacuum",
        Restore::SetOff => "ALTER SYSTEM SET autovacuum = off",
    };
    set(db, statement, "off").await
}

/// Run `statement`, reload the configuration and wait (up to 5 s) until a
/// new session reads `expect`.
async fn set(db: &PgPool, statement: &'static str, expect: &str) -> anyhow::Result<()> {
    sqlx::query(statement).execute(db).await?;
    sqlx::query("SELECT pg_reload_conf()").execute(db).await?;
    for _ in 0..50 {
        // Each backend reads the reloaded file when its signal arrives.
        let now: String = sqlx::query_scalar("SHOW autovacuum").fetch_one(db).await?;
        if now == expect {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the server's autovacuum did not become {expect} within 5 s of `{statement}`")
}
