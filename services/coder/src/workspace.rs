//! The work directory and the one place a tool's path argument becomes a
//! file-system path. Owns [`Workspace`] and its resolution rules: relative
//! paths only; no NUL; no `..` above the root; no `.git` component; and the
//! canonical form of the target (or, for a path not yet created, of its
//! nearest existing ancestor) must lie inside the canonical root, so a
//! symlink pointing out of the tree is refused. Must never hand out a path
//! outside the root or inside `.git`.

use std::path::{Component, Path, PathBuf};

use crate::error::{CoderError, ToolError};

/// The name of git's metadata directory, never readable or writable by a
/// tool (its config can name programs git runs, its hooks are programs).
const GIT_DIR: &str = ".git";

/// A coder's work directory, rooted at a canonical path.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

/// A path a tool may act on: its canonical absolute form and its form
/// relative to the root (with `/` separators), for results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The absolute path inside the root (canonical when it exists).
    pub absolute: PathBuf,
    /// The path relative to the root; empty for the root itself.
    pub relative: String,
}

impl Workspace {
    /// Root a workspace at `root`, which must be an existing directory; it
    /// is canonicalized so later containment checks compare like with like.
    pub fn new(root: &Path) -> Result<Self, CoderError> {
        let root = root
            .canonicalize()
            .map_err(|e| CoderError::InvalidArgument {
                field: "root",
                reason: format!("{}: {e}", root.display()),
            })?;
        if !root.is_dir() {
            return Err(CoderError::InvalidArgument {
                field: "root",
                reason: format!("{} is not a directory", root.display()),
            });
        }
        Ok(Self { root })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolve an existing path (file or directory). `.` or an empty string
    /// is the root.
    pub fn resolve_existing(&self, path: &str) -> Result<Resolved, ToolError> {
        let relative = lexical(path)?;
        let joined = self.root.join(&relative);
        let canonical = match joined.canonicalize() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A dangling symlink is reported as what it is only if it
                // stays inside; otherwise the refusal must not reveal more.
                self.nearest_inside(path, &joined)?;
                return Err(ToolError::NotFound {
                    path: path.to_owned(),
                });
            }
            Err(e) => return Err(ToolError::failed(format!("resolve {path:?}"), e)),
        };
        let relative = self.contained(path, &canonical)?;
        Ok(Resolved {
            absolute: canonical,
            relative,
        })
    }

    /// Resolve a path that may not exist yet (a file to be created): its
    /// nearest existing ancestor must resolve inside the root and outside
    /// `.git`. If the path itself exists it must resolve inside too.
    pub fn resolve_for_write(&self, path: &str) -> Result<Resolved, ToolError> {
        let relative = lexical(path)?;
        if relative.as_os_str().is_empty() {
            return Err(ToolError::path(
                path,
                "the work directory root is not a file",
            ));
        }
        let joined = self.root.join(&relative);
        if joined.symlink_metadata().is_ok() {
            // Exists (possibly as a symlink): its target must stay inside.
            if let Ok(canonical) = joined.canonicalize() {
                let rel = self.contained(path, &canonical)?;
                return Ok(Resolved {
                    absolute: canonical,
                    relative: rel,
                });
            }
            // A dangling symlink: writing through it would create its
            // target wherever it points.
            return Err(ToolError::path(
                path,
                "is a symlink whose target does not exist",
            ));
        }
        self.nearest_inside(path, &joined)?;
        Ok(Resolved {
            absolute: joined,
            relative: to_slash(&relative),
        })
    }

    /// The nearest existing ancestor of `joined` must canonicalize inside
    /// the root and outside `.git`.
    fn nearest_inside(&self, path: &str, joined: &Path) -> Result<(), ToolError> {
        let mut ancestor = joined.parent();
        while let Some(a) = ancestor {
            if a.symlink_metadata().is_ok() {
                let canonical = a
                    .canonicalize()
                    .map_err(|_| ToolError::path(path, "has a dangling symlink in its parents"))?;
                self.contained(path, &canonical)?;
                return Ok(());
            }
            ancestor = a.parent();
        }
        Err(ToolError::path(path, "has no existing ancestor"))
    }

    /// `canonical` must be the root or below it, with no `.git` component
    /// in its relative form; returns that relative form.
    fn contained(&self, path: &str, canonical: &Path) -> Result<String, ToolError> {
        let rel = canonical
            .strip_prefix(&self.root)
            .map_err(|_| ToolError::path(path, "resolves outside the work directory (symlink)"))?;
        if rel.components().any(|c| is_git_dir(c.as_os_str())) {
            return Err(ToolError::path(
                path,
                "resolves into .git, which tools may not touch",
            ));
        }
        Ok(to_slash(rel))
    }
}

/// Whether a path component names git's metadata directory. Compared
/// case-insensitively, as git itself does, so `.GIT` on a case-insensitive
/// file system is refused too.
pub(crate) fn is_git_dir(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.eq_ignore_ascii_case(GIT_DIR))
}

/// Normalize a tool's path argument without touching the file system:
/// relative only, no NUL, `.` dropped, `..` resolved lexically and never
/// above the root, no `.git` component.
fn lexical(path: &str) -> Result<PathBuf, ToolError> {
    if path.contains('\0') {
        return Err(ToolError::path(path, "contains a NUL byte"));
    }
    let p = Path::new(path);
    if p.is_absolute() || path.starts_with('/') {
        return Err(ToolError::path(
            path,
            "is absolute; give a path relative to the work directory",
        ));
    }
    let mut out = PathBuf::new();
    for component in p.components() {
        match component {
            Component::Normal(name) => {
                if is_git_dir(name) {
                    return Err(ToolError::path(
                        path,
                        "is inside .git, which tools may not touch",
                    ));
                }
                out.push(name);
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err(ToolError::path(path, "leaves the work directory (..)"));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ToolError::path(
                    path,
                    "is absolute; give a path relative to the work directory",
                ));
            }
        }
    }
    Ok(out)
}

/// A relative path with `/` separators, for results shown to the model.
fn to_slash(p: &Path) -> String {
    p.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}
