//! Shared fixtures: real git repositories in temporary directories.
#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use genesis_coder::{Checkout, CoderConfig, Tools, checkout};
use tempfile::TempDir;

/// Run git in `dir` with a fixed identity and no user config; panics on
/// failure and returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A source repository with one commit: `README.md`, `src/lib.rs` (five
/// numbered lines) and `data.bin` (binary).
pub fn source_repo() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("README.md"), "# demo\nhello world\n").unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "line 1\nline 2\nline 3 needle\nline 4\nline 5 needle\n",
    )
    .unwrap();
    std::fs::write(root.join("data.bin"), b"needle\0\x01\x02binary").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "initial"]);
    dir
}

/// A checkout of a fresh source repository, plus a directory outside the
/// work tree holding `secret.txt`.
pub struct Fixture {
    pub source: TempDir,
    pub scratch: TempDir,
    pub checkout: Checkout,
    pub tools: Tools,
}

impl Fixture {
    pub async fn new() -> Self {
        Self::with_config(CoderConfig::default()).await
    }

    pub async fn with_config(config: CoderConfig) -> Self {
        let source = source_repo();
        let scratch = tempfile::tempdir().unwrap();
        std::fs::create_dir(scratch.path().join("outside")).unwrap();
        std::fs::write(scratch.path().join("outside/secret.txt"), "top secret\n").unwrap();
        let into = scratch.path().join("work");
        let checkout = checkout(source.path().to_str().unwrap(), None, &into)
            .await
            .unwrap();
        let tools = Tools::new(checkout.root(), config).unwrap();
        Self {
            source,
            scratch,
            checkout,
            tools,
        }
    }

    pub fn root(&self) -> &Path {
        self.checkout.root()
    }

    pub fn outside(&self) -> PathBuf {
        self.scratch.path().join("outside")
    }

    /// Every file of the work tree outside `.git`, with its bytes, plus
    /// `.git/config` and the outside directory's listing: what a refused
    /// call must leave unchanged.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        let mut map = BTreeMap::new();
        walk(self.root(), self.root(), &mut map);
        map.insert(
            ".git/config".into(),
            std::fs::read(self.root().join(".git/config")).unwrap(),
        );
        walk(self.scratch.path(), self.scratch.path(), &mut map);
        map
    }
}

fn walk(base: &Path, dir: &Path, map: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if entry.file_name() == ".git" {
            continue;
        }
        let ft = entry.file_type().unwrap();
        let key = format!("{}:{}", base.display(), path.display());
        if ft.is_symlink() {
            map.insert(
                key,
                std::fs::read_link(&path)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
                    .into_bytes(),
            );
        } else if ft.is_dir() {
            map.insert(key, b"<dir>".to_vec());
            walk(base, &path, map);
        } else {
            map.insert(key, std::fs::read(&path).unwrap());
        }
    }
}
