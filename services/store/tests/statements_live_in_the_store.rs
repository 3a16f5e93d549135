//! Every SQL statement of the services lives in genesis-store, so the
//! store's checks apply to every caller (a tool, control, a background
//! loop) alike. This scans the production sources of the other service
//! crates (`services/*/src`, not their tests, and not the bench, which
//! measures the database itself) and fails naming each file and line that
//! builds a statement with sqlx instead of calling the store.

use std::path::{Path, PathBuf};

/// What a statement built outside the store looks like.
const PATTERNS: &[&str] = &["sqlx::query", "sqlx::raw_sql", "QueryBuilder"];

/// Service crates allowed to issue statements: the store itself, and the
/// bench, which measures the database rather than the services.
const EXEMPT: &[&str] = &["store", "bench"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            // Test modules and fixtures under src/ are tests, as under tests/.
            if path.file_name().is_some_and(|n| n == "tests") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_service_outside_the_store_issues_sql() {
    let services = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("services/ holds the store crate");
    let mut crates: Vec<PathBuf> = std::fs::read_dir(services)
        .expect("services/ is readable")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !EXEMPT.contains(&n))
        })
        .collect();
    crates.sort();
    assert!(
        crates.iter().any(|c| c.ends_with("supervisor")),
        "the scan found no supervisor crate under {}",
        services.display()
    );
    let mut files = Vec::new();
    for c in &crates {
        rust_files(&c.join("src"), &mut files);
    }
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("source is UTF-8");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if let Some(p) = PATTERNS.iter().find(|p| code.contains(*p)) {
                let shown = file.strip_prefix(services).unwrap_or(file);
                found.push(format!("services/{}:{}: {p}", shown.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "SQL issued outside genesis-store; move each statement into a store function \
         (in the module that owns the table) and call that:\n{}",
        found.join("\n")
    );
}
