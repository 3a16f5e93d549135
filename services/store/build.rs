//! Embeds the schema migrations. Reads the workspace's
//! `migrations/NNNN_description.sql`, replaces each
//! `\ir ../services/store/sql/<name>.sql` line with that file's text (so
//! each server-side function has one definition, its file under this
//! crate's `sql/`), and
//! writes `$OUT_DIR/migrations.rs`, which `crate::migrations` turns into
//! sqlx's `Migrator`. The include line is psql's own, so a migration can also
//! be run by hand with `psql -f`.
//!
//! The checksum recorded for a migration is that of its text as written,
//! include lines unexpanded: a function's file changes together with a new
//! migration that includes it again, and the migrations already applied must
//! not then read as modified. Must never accept an include outside `sql/` or
//! a migration name sqlx would not accept, and fails the build on either.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

use sha2::{Digest, Sha384};

fn main() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let migrations = root.join("../../migrations");
    let sql = root.join("sql");
    println!("cargo:rerun-if-changed={}", migrations.display());
    println!("cargo:rerun-if-changed={}", sql.display());
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    let mut files: Vec<PathBuf> = fs::read_dir(&migrations)
        .expect("read migrations/")
        .map(|e| e.expect("read migrations/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();

    let mut code = String::from("const MIGRATIONS: &[EmbeddedMigration] = &[\n");
    let mut seen = std::collections::BTreeSet::new();
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("utf-8 migration name");
        let (version, description) = name
            .split_once('_')
            .unwrap_or_else(|| panic!("migration {name}: expected NNNN_description.sql"));
        let version: i64 = version
            .parse()
            .unwrap_or_else(|_| panic!("migration {name}: version {version:?} is not a number"));
        assert!(
            seen.insert(version),
            "migration version {version} appears twice"
        );
        let text = fs::read_to_string(&path).expect("read migration");
        let expanded = expand(&text, &path, &sql);
        let expanded_path = out.join(format!("{name}.sql"));
        fs::write(&expanded_path, &expanded).expect("write expanded migration");
        let checksum = Sha384::digest(text.as_bytes());
        let no_tx = text.starts_with("-- no-transaction");
        writeln!(
            code,
            "    EmbeddedMigration {{ version: {version}, description: {description:?}, \
             sql: include_str!({expanded:?}), checksum: &{checksum:?}, no_tx: {no_tx} }},",
            description = description.replace('_', " "),
            expanded = expanded_path.display().to_string(),
            checksum = checksum.as_slice(),
        )
        .expect("write to a String");
    }
    code.push_str("];\n");
    fs::write(out.join("migrations.rs"), code).expect("write migrations.rs");

    let mut functions: Vec<PathBuf> = fs::read_dir(&sql)
        .expect("read sql/")
        .map(|e| e.expect("read sql/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    functions.sort();
    let mut list = String::from("[\n");
    for path in functions {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("utf-8 file name");
        writeln!(
            list,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .expect("write to a String");
    }
    list.push_str("]\n");
    fs::write(out.join("functions.rs"), list).expect("write functions.rs");
}

/// The migration's text with every `\ir` line replaced by the file it names,
/// which must lie in `sql/`.
fn expand(text: &str, path: &Path, sql: &Path) -> String {
    let dir = path.parent().expect("a migration has a folder");
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.trim().strip_prefix("\\ir ") {
            Some(include) => {
                let target = dir.join(include.trim());
                let target = target
                    .canonicalize()
                    .unwrap_or_else(|e| panic!("{}: include {include}: {e}", path.display()));
                let sql = sql.canonicalize().expect("sql/ exists");
                assert!(
                    target.starts_with(&sql),
                    "{}: include {include} is outside sql/",
                    path.display()
                );
                println!("cargo:rerun-if-changed={}", target.display());
                let body = fs::read_to_string(&target).expect("read included sql file");
                out.push_str(&body);
                if !body.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}
