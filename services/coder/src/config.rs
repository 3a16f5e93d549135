//! The tools' limits: caps on what a tool reads, returns or accepts, the
//! program allowlist and the command timeouts. Owns [`CoderConfig`], its
//! documented defaults and [`CoderConfig::check`]. Must never accept a
//! configuration that would disable a limit (a zero cap) or widen the
//! allowlist beyond bare program names.

use std::time::Duration;

use crate::error::CoderError;

/// The git subcommands `run_command` allows when `git` is on the allowlist:
/// the read-only ones. Anything else (`push`, `commit`, `config`, `fetch`,
/// options before the subcommand, ...) is refused.
pub const GIT_READ_ONLY_SUBCOMMANDS: &[&str] = &["status", "diff", "log", "show"];

/// The default program allowlist: build and test tools a coding task needs.
pub const DEFAULT_ALLOWLIST: &[&str] = &["cargo", "make", "npm", "python3", "pytest", "go", "git"];

/// The limits the governed tools enforce. Every field has a default (see
/// [`Default`]); [`CoderConfig::check`] refuses nonsense before use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoderConfig {
    /// `read_file`: most bytes of content returned (default 64 KiB); more is
    /// cut at a line boundary and marked `truncated: true`.
    pub max_read_bytes: usize,
    /// `read_file`: default `max_lines` (default 2000).
    pub default_read_lines: usize,
    /// `list_files`: most entries returned (default 1000), then `truncated`.
    pub max_list_entries: usize,
    /// `list_files`: default `max_depth` (default 3) ...
    pub default_list_depth: usize,
    /// ... and the largest accepted (default 32).
    pub max_list_depth: usize,
    /// `search`: default `max_results` (default 100) ...
    pub default_search_results: usize,
    /// ... and the largest accepted (default 1000).
    pub max_search_results: usize,
    /// `search`: files larger than this are skipped (default 1 MiB).
    pub max_search_file_bytes: u64,
    /// `search`: most files examined per call (default 20 000), then
    /// `truncated`.
    pub max_search_files: usize,
    /// `search`: longest pattern accepted in bytes (default 1024).
    pub max_pattern_bytes: usize,
    /// `apply_diff`: largest diff accepted (default 1 MiB).
    pub max_diff_bytes: usize,
    /// `apply_diff`: the timeout for each `git apply` (default 60 s).
    pub apply_timeout: Duration,
    /// `run_command`: the programs `argv[0]` may name — bare names, resolved
    /// through `PATH` (default [`DEFAULT_ALLOWLIST`]).
    pub allowlist: Vec<String>,
    /// `run_command`: the `PATH` commands are resolved through and run with
    /// (default: this process's `PATH`, or `/usr/local/bin:/usr/bin:/bin`).
    pub command_path: String,
    /// `run_command`: timeout when the call gives none (default 120 s) ...
    pub default_command_timeout: Duration,
    /// ... and the largest a call may ask for (default 900 s).
    pub max_command_timeout: Duration,
    /// `run_command`: bytes kept of stdout and of stderr each (default
    /// 64 KiB), then `stdout_truncated`/`stderr_truncated`.
    pub max_output_bytes: usize,
}

impl Default for CoderConfig {
    fn default() -> Self {
        Self {
            max_read_bytes: 64 * 1024,
            default_read_lines: 2000,
            max_list_entries: 1000,
            default_list_depth: 3,
            max_list_depth: 32,
            default_search_results: 100,
            max_search_results: 1000,
            max_search_file_bytes: 1024 * 1024,
            max_search_files: 20_000,
            max_pattern_bytes: 1024,
            max_diff_bytes: 1024 * 1024,
            apply_timeout: Duration::from_secs(60),
            allowlist: DEFAULT_ALLOWLIST.iter().map(|s| (*s).to_owned()).collect(),
            command_path: std::env::var("PATH")
                .ok()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_owned()),
            default_command_timeout: Duration::from_secs(120),
            max_command_timeout: Duration::from_secs(900),
            max_output_bytes: 64 * 1024,
        }
    }
}

fn positive(key: &'static str, value: usize) -> Result<(), CoderError> {
    if value == 0 {
        return Err(CoderError::InvalidConfig {
            key,
            reason: "must be greater than zero".into(),
        });
    }
    Ok(())
}

fn at_most(key: &'static str, value: usize, max_key: &str, max: usize) -> Result<(), CoderError> {
    if value > max {
        return Err(CoderError::InvalidConfig {
            key,
            reason: format!("{value} exceeds {max_key} ({max})"),
        });
    }
    Ok(())
}

impl CoderConfig {
    /// Refuse a configuration that would disable a limit or let the
    /// allowlist name something other than a bare program name.
    pub fn check(&self) -> Result<(), CoderError> {
        positive("max_read_bytes", self.max_read_bytes)?;
        positive("default_read_lines", self.default_read_lines)?;
        positive("max_list_entries", self.max_list_entries)?;
        positive("default_list_depth", self.default_list_depth)?;
        positive("max_list_depth", self.max_list_depth)?;
        at_most(
            "default_list_depth",
            self.default_list_depth,
            "max_list_depth",
            self.max_list_depth,
        )?;
        positive("default_search_results", self.default_search_results)?;
        positive("max_search_results", self.max_search_results)?;
        at_most(
            "default_search_results",
            self.default_search_results,
            "max_search_results",
            self.max_search_results,
        )?;
        if self.max_search_file_bytes == 0 {
            return Err(CoderError::InvalidConfig {
                key: "max_search_file_bytes",
                reason: "must be greater than zero".into(),
            });
        }
        positive("max_search_files", self.max_search_files)?;
        positive("max_pattern_bytes", self.max_pattern_bytes)?;
        positive("max_diff_bytes", self.max_diff_bytes)?;
        positive("max_output_bytes", self.max_output_bytes)?;
        for (key, d) in [
            ("apply_timeout", self.apply_timeout),
            ("default_command_timeout", self.default_command_timeout),
            ("max_command_timeout", self.max_command_timeout),
        ] {
            if d.is_zero() {
                return Err(CoderError::InvalidConfig {
                    key,
                    reason: "must be greater than zero".into(),
                });
            }
        }
        if self.default_command_timeout > self.max_command_timeout {
            return Err(CoderError::InvalidConfig {
                key: "default_command_timeout",
                reason: "exceeds max_command_timeout".into(),
            });
        }
        if self.command_path.is_empty() || self.command_path.contains('\0') {
            return Err(CoderError::InvalidConfig {
                key: "command_path",
                reason: "must be a non-empty PATH without NUL".into(),
            });
        }
        for name in &self.allowlist {
            let bad = if name.is_empty() {
                Some("an empty name")
            } else if name.contains('/') {
                Some("a name with '/' (allowlist entries are bare names resolved through PATH)")
            } else if name == "." || name == ".." {
                Some("'.' or '..'")
            } else if name.starts_with('-') {
                Some("a name starting with '-'")
            } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
                Some("a name with whitespace or control characters")
            } else {
                None
            };
            if let Some(bad) = bad {
                return Err(CoderError::InvalidConfig {
                    key: "allowlist",
                    reason: format!("{name:?} is {bad}"),
                });
            }
        }
        Ok(())
    }
}
