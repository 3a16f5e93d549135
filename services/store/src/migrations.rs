//! The schema migrations, embedded at build time from `migrations/` with the
//! server-side functions of `sql/` included where a migration names them
//! (see `build.rs`). Owns [`MIGRATOR`], which `Store::migrate`, `genesis-control
//! migrate` and every `#[sqlx::test(migrator = "genesis_store::MIGRATOR")]`
//! run, and [`FUNCTION_FILES`], the function files the function-file test
//! compares with a migrated database. Must never run a statement itself.

use std::borrow::Cow;
use std::sync::LazyLock;

use sqlx::SqlStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// One migration as `build.rs` embedded it.
struct EmbeddedMigration {
    version: i64,
    description: &'static str,
    /// The text sqlx executes: the migration with its includes expanded.
    sql: &'static str,
    /// SHA-384 of the migration as written (includes unexpanded).
    checksum: &'static [u8],
    no_tx: bool,
}

include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// Every migration, in version order. A `LazyLock` because sqlx builds a
/// `Migrator` at run time only; `&MIGRATOR` still coerces to the
/// `&'static Migrator` that `sqlx::test` wants.
pub static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| {
    Migrator::with_migrations(
        MIGRATIONS
            .iter()
            .map(|m| Migration {
                version: m.version,
                description: Cow::Borrowed(m.description),
                migration_type: MigrationType::Simple,
                sql: SqlStr::from_static(m.sql),
                checksum: Cow::Borrowed(m.checksum),
                no_tx: m.no_tx,
            })
            .collect(),
    )
});

/// Each server-side function's file under `sql/`: (function name, text).
/// The file is the function's definition; the function-file test holds a
/// migrated database to it.
pub const FUNCTION_FILES: &[(&str, &str)] = &include!(concat!(env!("OUT_DIR"), "/functions.rs"));

/// A server-side function as a migrated database defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinedFunction {
    /// The function's name, e.g. `genesis_apply_complete`.
    pub name: String,
    /// `pg_get_functiondef` of it: the text PostgreSQL would print.
    pub definition: String,
}

/// Every function in the `public` schema of the database behind `pool`, one
/// entry per overload, ordered by name.
pub async fn defined_functions(
    pool: &sqlx::PgPool,
) -> Result<Vec<DefinedFunction>, crate::StoreError> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT p.proname::text, pg_get_functiondef(p.oid)
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = 'public'
          ORDER BY 1, 2",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(name, definition)| DefinedFunction { name, definition })
        .collect())
}

/// The body of a function file as `pg_get_functiondef` prints it: the file
/// without its leading comment block and its closing `;`.
fn file_definition(text: &str) -> &str {
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        if let Some(comment) = trimmed.strip_prefix("--") {
            rest = comment.split_once('\n').map_or("", |(_, after)| after);
        } else {
            rest = trimmed;
            break;
        }
    }
    rest.trim_end().trim_end_matches(';').trim_end()
}

/// Where a database and the function files disagree, one line each: a
/// function without a file, a file whose function the database lacks, a name
/// with more than one overload (one name, one definition), or a definition
/// that differs from its file. Empty when the files are the truth.
pub fn function_file_mismatches(
    defined: &[DefinedFunction],
    files: &[(&str, &str)],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut by_name: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for f in defined {
        by_name.entry(&f.name).or_default().push(&f.definition);
    }
    for (name, defs) in &by_name {
        if defs.len() > 1 {
            problems.push(format!(
                "{name}: {} overloads; keep one definition per name",
                defs.len()
            ));
        }
        match files.iter().find(|(file, _)| file == name) {
            None => problems.push(format!(
                "{name}: defined in the database but has no file sql/{name}.sql"
            )),
            Some((_, text)) => {
                let want = file_definition(text);
                if !defs.iter().any(|d| d.trim_end() == want) {
                    problems.push(format!(
                        "{name}: the database's definition differs from sql/{name}.sql \
                         (a migration must include the file after it changes)"
                    ));
                }
            }
        }
    }
    for (file, _) in files {
        if !by_name.contains_key(file) {
            problems.push(format!(
                "sql/{file}.sql: no migration defines this function"
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, body: &str) -> DefinedFunction {
        DefinedFunction {
            name: name.into(),
            definition: body.into(),
        }
    }

    const F: &str = "CREATE OR REPLACE FUNCTION public.f()\n RETURNS integer\n LANGUAGE sql\nAS $function$ SELECT 1 $function$\n";

    #[test]
    fn a_file_with_its_comment_and_semicolon_matches_its_definition() {
        let file = format!("-- Why f exists.\n-- Second line.\n{}; \n", F.trim_end());
        assert!(function_file_mismatches(&[def("f", F)], &[("f", &file)]).is_empty());
    }

    #[test]
    fn every_disagreement_is_named() {
        let changed = F.replace("SELECT 1", "SELECT 2");
        let got = function_file_mismatches(
            &[
                def("f", &changed),
                def("g", F),
                def("h", F),
                def("h", &changed),
            ],
            &[("f", F), ("h", F), ("orphan", F)],
        );
        assert_eq!(got.len(), 4, "{got:#?}");
        assert!(
            got[0].starts_with("f: the database's definition differs"),
            "{got:#?}"
        );
        assert!(
            got[1].starts_with("g: defined in the database but has no file"),
            "{got:#?}"
        );
        assert!(got[2].starts_with("h: 2 overloads"), "{got:#?}");
        assert!(
            got[3].starts_with("sql/orphan.sql: no migration defines"),
            "{got:#?}"
        );
    }
}
