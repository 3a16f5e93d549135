//! Getting a task's repository into the work directory and, at the end,
//! the patch of what changed. Owns the validation of a task's `repository`
//! and `branch`, the `git clone` invocation, the base commit, and
//! [`Checkout::patch`]. Must never pass a repository or branch git could
//! read as an option, never allow a transport other than https/http/ssh/
//! scp-like/file/local path (`ext::` runs programs), never run git through
//! a shell or with a terminal prompt, and never let git outlive its timeout.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;

use crate::error::{CoderError, trim_error_text};
use crate::process;

/// How long a clone may take by default.
pub const DEFAULT_CHECKOUT_TIMEOUT: Duration = Duration::from_secs(600);

/// The most bytes of `git diff` output [`Checkout::patch`] accepts (a patch
/// this large is not a reviewable change).
pub const MAX_PATCH_BYTES: usize = 64 * 1024 * 1024;

/// Git's stderr is only used for error messages; a small cap is enough.
const GIT_STDERR_CAP: usize = 64 * 1024;

/// A cloned repository: its root and the commit it was cloned at.
#[derive(Debug, Clone)]
pub struct Checkout {
    root: PathBuf,
    base_commit: String,
    timeout: Duration,
}

/// What kind of source a `repository` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A local directory holding a git repository.
    Local,
    /// A URL git fetches from.
    Remote,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> CoderError {
    CoderError::InvalidArgument {
        field,
        reason: reason.into(),
    }
}

/// A host part must not look like an option to ssh (`-oProxyCommand=...`).
fn check_host(host: &str) -> Result<(), CoderError> {
    if host.is_empty() {
        return Err(invalid("repository", "the URL has no host"));
    }
    if host.starts_with('-') {
        return Err(invalid("repository", "the URL's host starts with '-'"));
    }
    Ok(())
}

/// Classify and validate a task's `repository`.
fn classify(repository: &str) -> Result<Source, CoderError> {
    if repository.is_empty() {
        return Err(invalid("repository", "is empty"));
    }
    if repository.starts_with('-') {
        return Err(invalid(
            "repository",
            "starts with '-' (it would be read as an option)",
        ));
    }
    if repository.chars().any(|c| c.is_control()) {
        return Err(invalid("repository", "contains control characters"));
    }
    if repository.trim() != repository {
        return Err(invalid("repository", "has leading or trailing whitespace"));
    }
    for scheme in ["https://", "http://", "ssh://", "file://"] {
        if let Some(rest) = repository.strip_prefix(scheme) {
            if scheme == "file://" {
                if rest.is_empty() {
                    return Err(invalid("repository", "the file:// URL has no path"));
                }
                return Ok(Source::Remote);
            }
            let authority = rest.split('/').next().unwrap_or_default();
            let host = authority.rsplit('@').next().unwrap_or_default();
            check_host(host)?;
            return Ok(Source::Remote);
        }
    }
    if repository.contains("::") {
        return Err(invalid(
            "repository",
            "remote-helper transports (`<transport>::<address>`, e.g. ext::) are refused",
        ));
    }
    if repository.contains("://") {
        return Err(invalid(
            "repository",
            "only https://, http://, ssh://, file://, git@host:path URLs or a local path are accepted",
        ));
    }
    // scp-like `user@host:path`: a ':' before any '/'.
    if let Some((before, path)) = repository.split_once(':')
        && !before.contains('/')
    {
        let Some((user, host)) = before.split_once('@') else {
            return Err(invalid(
                "repository",
                "a host:path address needs a user (git@host:path)",
            ));
        };
        if user.is_empty() {
            return Err(invalid(
                "repository",
                "the git@host:path address has no user",
            ));
        }
        check_host(host)?;
        if path.is_empty() || path.starts_with('-') {
            return Err(invalid(
                "repository",
                "the git@host:path address has an empty or option-like path",
            ));
        }
        return Ok(Source::Remote);
    }
    let local = Path::new(repository);
    if !local.is_dir() {
        return Err(invalid(
            "repository",
            format!("{repository:?} is neither an accepted URL nor an existing directory"),
        ));
    }
    // Checked without running git inside it: a foreign repository's config
    // could name programs git would run.
    let is_repo = local.join(".git").exists()
        || (local.join("HEAD").is_file() && local.join("objects").is_dir());
    if !is_repo {
        return Err(invalid(
            "repository",
            format!("{repository:?} is a directory but not a git repository"),
        ));
    }
    Ok(Source::Local)
}

/// Validate a `branch` the way `git check-ref-format --branch` would, and
/// refuse anything option-like.
fn check_branch(branch: &str) -> Result<(), CoderError> {
    let bad = if branch.is_empty() {
        Some("is empty")
    } else if branch.starts_with('-') {
        Some("starts with '-' (it would be read as an option)")
    } else if branch
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
    {
        Some("contains a character git refuses in ref names")
    } else if branch.contains("..") || branch.contains("@{") || branch.contains("//") {
        Some("contains '..', '@{' or '//'")
    } else if branch.starts_with('/')
        || branch.ends_with('/')
        || branch.ends_with('.')
        || branch.ends_with(".lock")
        || branch.split('/').any(|p| p.starts_with('.'))
    {
        Some("is not a valid ref name")
    } else {
        None
    };
    match bad {
        Some(reason) => Err(invalid("branch", reason)),
        None => Ok(()),
    }
}

/// A git command with the settings every invocation here shares: no
/// terminal prompt (a missing credential fails instead of hanging).
fn git() -> Command {
    let mut cmd = Command::new("git");
    cmd.env("GIT_TERMINAL_PROMPT", "0");
    cmd
}

/// A git command inside the checkout, for the steps after the clone. By
/// then allowlisted build tools may have run project code that could edit
/// `.git/config` (an fsmonitor or filter program), so git here gets a cleared
/// environment (no credential of this process is visible to such a program),
/// no system or global config, and fsmonitor off.
fn local_git(root: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(["-c", "core.fsmonitor=false"]);
    cmd
}

/// Run git, mapping spawn errors, timeouts and failures to [`CoderError`].
async fn run_git(
    step: &'static str,
    cmd: &mut Command,
    timeout: Duration,
    cap: usize,
) -> Result<Vec<u8>, CoderError> {
    let out = process::run(cmd, None, timeout, cap)
        .await
        .map_err(|e| CoderError::Io {
            what: "spawn git",
            reason: e.to_string(),
        })?;
    if out.timed_out {
        return Err(CoderError::TimedOut {
            step,
            secs: timeout.as_secs(),
        });
    }
    if !out.success() {
        return Err(CoderError::Git {
            step,
            stderr: trim_error_text(&out.stderr),
        });
    }
    if out.stdout_truncated {
        return Err(CoderError::Git {
            step,
            stderr: format!("output exceeds {cap} bytes"),
        });
    }
    Ok(out.stdout)
}

/// Clone `repository` (at `branch`, or its default branch) into `into` with
/// the default timeout. See [`checkout_with_timeout`].
pub async fn checkout(
    repository: &str,
    branch: Option<&str>,
    into: &Path,
) -> Result<Checkout, CoderError> {
    checkout_with_timeout(repository, branch, into, DEFAULT_CHECKOUT_TIMEOUT).await
}

/// Clone `repository` into `into` (which must not exist, or be an empty
/// directory) and record the commit checked out.
///
/// A local directory is cloned with `--no-hardlinks`, so the work tree's
/// objects are copies and nothing done here can corrupt the source; a URL
/// is cloned shallow (`--depth 1`), since only the tip is worked on.
pub async fn checkout_with_timeout(
    repository: &str,
    branch: Option<&str>,
    into: &Path,
    timeout: Duration,
) -> Result<Checkout, CoderError> {
    let source = classify(repository)?;
    if let Some(branch) = branch {
        check_branch(branch)?;
    }
    if into.as_os_str().is_empty() {
        return Err(invalid("into", "is empty"));
    }
    let mut cmd = git();
    cmd.arg("clone");
    match source {
        Source::Local => {
            cmd.arg("--no-hardlinks");
        }
        Source::Remote => {
            cmd.args(["--depth", "1"]);
        }
    }
    if let Some(branch) = branch {
        cmd.arg("--branch").arg(branch);
    }
    // `--` ends option parsing: the repository and the target are operands
    // whatever they look like.
    cmd.arg("--").arg(repository).arg(into);
    run_git("clone", &mut cmd, timeout, GIT_STDERR_CAP).await?;

    let root = into.canonicalize().map_err(|e| CoderError::Io {
        what: "canonicalize the checkout",
        reason: e.to_string(),
    })?;
    let mut cmd = local_git(&root);
    cmd.args(["rev-parse", "--verify", "HEAD"]);
    let head = run_git("rev-parse", &mut cmd, timeout, GIT_STDERR_CAP).await?;
    let base_commit = String::from_utf8_lossy(&head).trim().to_owned();
    if base_commit.len() < 40 || !base_commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CoderError::Git {
            step: "rev-parse",
            stderr: format!("unexpected HEAD {base_commit:?}"),
        });
    }
    tracing::info!(root = %root.display(), %base_commit, "checked out");
    Ok(Checkout {
        root,
        base_commit,
        timeout,
    })
}

/// A fresh repository in `into` (which must not exist, or be an empty
/// directory) with one empty commit as its base: the work directory of a
/// task that names no repository and writes its code from nothing. Its
/// patch then holds every file the task created.
pub async fn start_empty(into: &Path) -> Result<Checkout, CoderError> {
    if into.as_os_str().is_empty() {
        return Err(invalid("into", "is empty"));
    }
    std::fs::create_dir_all(into).map_err(|e| CoderError::Io {
        what: "create the work directory",
        reason: e.to_string(),
    })?;
    let root = into.canonicalize().map_err(|e| CoderError::Io {
        what: "canonicalize the work directory",
        reason: e.to_string(),
    })?;
    let timeout = DEFAULT_CHECKOUT_TIMEOUT;
    let mut init = local_git(&root);
    init.args(["init", "-q", "-b", "main"]);
    run_git("init", &mut init, timeout, GIT_STDERR_CAP).await?;
    let mut commit = local_git(&root);
    commit.args([
        "-c",
        "user.name=genesis-coder",
        "-c",
        "user.email=genesis-coder@localhost",
        "commit",
        "-q",
        "--allow-empty",
        "--no-verify",
        "-m",
        "empty start",
    ]);
    run_git("commit", &mut commit, timeout, GIT_STDERR_CAP).await?;
    let mut head = local_git(&root);
    head.args(["rev-parse", "--verify", "HEAD"]);
    let out = run_git("rev-parse", &mut head, timeout, GIT_STDERR_CAP).await?;
    let base_commit = String::from_utf8_lossy(&out).trim().to_owned();
    tracing::info!(root = %root.display(), %base_commit, "started from an empty work directory");
    Ok(Checkout {
        root,
        base_commit,
        timeout,
    })
}

impl Checkout {
    /// The work tree's canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The commit the work tree was checked out at.
    pub fn base_commit(&self) -> &str {
        &self.base_commit
    }

    /// The unified diff (`--binary`, applicable with `git apply`) of the work
    /// tree against the base commit, new untracked files included (files
    /// matched by `.gitignore` are left out, as build output should be).
    ///
    /// It stages everything into a *temporary* index (`GIT_INDEX_FILE`,
    /// seeded from the base commit) and diffs that index against the base.
    /// The repository's real index is never written: `git add -N` would
    /// leave intent-to-add entries behind and change what `git status` and
    /// `git diff` show to anyone (the model included) afterwards, and
    /// `git add -A` on the real index would stage the whole tree.
    pub async fn patch(&self) -> Result<String, CoderError> {
        let index = self
            .root
            .join(".git")
            .join(format!("genesis-coder-patch-{}.index", std::process::id()));
        let result = self.patch_with_index(&index).await;
        let _ = std::fs::remove_file(&index);
        result
    }

    async fn patch_with_index(&self, index: &Path) -> Result<String, CoderError> {
        let steps: [(&'static str, Vec<&str>); 2] = [
            ("read-tree", vec!["read-tree", self.base_commit.as_str()]),
            ("add", vec!["add", "-A", "--", "."]),
        ];
        for (step, args) in steps {
            let mut cmd = local_git(&self.root);
            cmd.env("GIT_INDEX_FILE", index).args(args);
            run_git(step, &mut cmd, self.timeout, GIT_STDERR_CAP).await?;
        }
        let mut cmd = local_git(&self.root);
        cmd.env("GIT_INDEX_FILE", index).args([
            "diff",
            "--cached",
            "--binary",
            "--full-index",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            self.base_commit.as_str(),
        ]);
        let diff = run_git("diff", &mut cmd, self.timeout, MAX_PATCH_BYTES).await?;
        String::from_utf8(diff).map_err(|_| CoderError::Git {
            step: "diff",
            stderr: "the diff is not valid UTF-8".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_accepts_urls_and_refuses_the_rest() {
        for ok in [
            "https://example.invalid/a.git",
            "http://example.invalid/a",
            "ssh://git@example.invalid/a.git",
            "git@example.invalid:org/a.git",
            "file:///srv/a.git",
        ] {
            assert_eq!(classify(ok), Ok(Source::Remote), "{ok}");
        }
        for bad in [
            "",
            "-oops",
            "--upload-pack=x",
            "ext::sh -c x",
            "fd::3",
            "ftp://example.invalid/a",
            "ssh://-oProxyCommand=x/a",
            "git@-oProxyCommand=x:a",
            "host:path",
            "/definitely/not/here",
            " https://example.invalid/a",
        ] {
            match classify(bad) {
                Err(CoderError::InvalidArgument { field, .. }) => assert_eq!(field, "repository"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn branch_names_are_checked() {
        for ok in ["main", "feature/x-1", "release-1.2"] {
            assert!(check_branch(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-b", "a..b", "a b", "a~1", ".hidden", "x.lock", "a/"] {
            assert!(
                matches!(
                    check_branch(bad),
                    Err(CoderError::InvalidArgument {
                        field: "branch",
                        ..
                    })
                ),
                "{bad:?}"
            );
        }
    }
}
