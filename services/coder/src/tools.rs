//! The governed tools a coding model may call: `read_file`, `list_files`,
//! `search`, `apply_diff` and `run_command`. Owns each tool's name, JSON
//! schema, argument parsing (strict: unknown field, wrong type or missing
//! field is refused naming the field) and execution, and the [`Tools`]
//! registry the loop calls through. The arguments are untrusted input: a
//! tool must never act outside the work directory or inside `.git`, follow a
//! symlink out of the tree, run a program not on the allowlist or through a
//! shell, or return more than its caps — and a refused call changes nothing.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::process::Command;

use crate::config::{CoderConfig, GIT_READ_ONLY_SUBCOMMANDS};
use crate::error::{CoderError, ToolError, trim_error_text};
use crate::process;
use crate::workspace::{Workspace, is_git_dir};

/// How many leading bytes are examined for a NUL to call a file binary.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// The longest line text a `search` match carries, in characters.
const MAX_MATCH_LINE_CHARS: usize = 500;

/// The most `argv` entries `run_command` accepts ...
const MAX_ARGV_ENTRIES: usize = 256;
/// ... and their largest total size in bytes.
const MAX_ARGV_BYTES: usize = 128 * 1024;

/// git options refused even on a read-only subcommand: they write a file
/// (`--output`), read files outside the tree (`--no-index`, `-O`), or run a
/// configured program (`--ext-diff`, `--textconv`).
const GIT_REFUSED_OPTIONS: &[&str] = &["--output", "--no-index", "-O", "--ext-diff", "--textconv"];

/// The tool names, in the order [`Tools::schemas`] lists them.
pub const TOOL_NAMES: &[&str] = &[
    "read_file",
    "list_files",
    "search",
    "apply_diff",
    "run_command",
];

/// The governed tools over one work directory.
#[derive(Debug, Clone)]
pub struct Tools {
    workspace: Workspace,
    config: CoderConfig,
}

/// A tool's arguments: a JSON object whose fields are checked against the
/// tool's field list before anything is read from it.
struct Args<'a> {
    fields: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// `value` must be an object with no field outside `allowed` (a `null`
    /// value stands for an empty object: some providers send it for tools
    /// without required arguments).
    fn parse(value: &'a Value, allowed: &[&str]) -> Result<Self, ToolError> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let fields = match value {
            Value::Object(map) => map,
            Value::Null => EMPTY.get_or_init(Map::new),
            other => {
                return Err(ToolError::arg(
                    "(arguments)",
                    format!("must be a JSON object, got {}", type_name(other)),
                ));
            }
        };
        if let Some(unknown) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(ToolError::arg(
                unknown.as_str(),
                format!(
                    "unknown field; the accepted fields are: {}",
                    allowed.join(", ")
                ),
            ));
        }
        Ok(Self { fields })
    }

    fn opt_str(&self, field: &str) -> Result<Option<&'a str>, ToolError> {
        match self.fields.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(ToolError::arg(
                field,
                format!("must be a string, got {}", type_name(other)),
            )),
        }
    }

    fn req_str(&self, field: &str) -> Result<&'a str, ToolError> {
        self.opt_str(field)?
            .ok_or_else(|| ToolError::arg(field, "is required"))
    }

    /// An optional integer in `min..=max`.
    fn opt_uint(&self, field: &str, min: u64, max: u64) -> Result<Option<u64>, ToolError> {
        match self.fields.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if (min..=max).contains(&v) => Ok(Some(v)),
                _ => Err(ToolError::arg(
                    field,
                    format!("must be an integer from {min} to {max}, got {n}"),
                )),
            },
            Some(other) => Err(ToolError::arg(
                field,
                format!("must be an integer, got {}", type_name(other)),
            )),
        }
    }

    fn req_str_array(&self, field: &str) -> Result<Vec<&'a str>, ToolError> {
        match self.fields.get(field) {
            None | Some(Value::Null) => Err(ToolError::arg(field, "is required")),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s.as_str()),
                    other => Err(ToolError::arg(
                        format!("{field}[{i}]"),
                        format!("must be a string, got {}", type_name(other)),
                    )),
                })
                .collect(),
            Some(other) => Err(ToolError::arg(
                field,
                format!("must be an array of strings, got {}", type_name(other)),
            )),
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn usize_to_u64(v: usize) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

fn u64_to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Whether the first bytes of `head` mark a binary file.
fn looks_binary(head: &[u8]) -> bool {
    head.iter().take(BINARY_SNIFF_BYTES).any(|b| *b == 0)
}

/// Skip one line of `reader`; false at end of file.
fn skip_line<R: BufRead>(reader: &mut R) -> std::io::Result<bool> {
    let mut any = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(any);
        }
        any = true;
        if let Some(i) = buf.iter().position(|b| *b == b'\n') {
            reader.consume(i + 1);
            return Ok(true);
        }
        let n = buf.len();
        reader.consume(n);
    }
}

/// The longest prefix of `s` of at most `max` bytes ending on a character
/// boundary.
fn prefix_at_boundary(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A tree walker that never follows symlinks and never enters `.git`.
struct Walk {
    /// Entries found, as (relative path, absolute path, file type).
    entries: Vec<(String, PathBuf, std::fs::FileType, u64)>,
    /// Stop once this many entries have been found.
    limit: usize,
    /// Whether the limit cut the walk short.
    truncated: bool,
}

impl Walk {
    fn visit(&mut self, dir: &Path, rel: &str, depth: usize) -> Result<(), ToolError> {
        let mut children: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| ToolError::failed(format!("list {rel:?}"), e))?
            .filter_map(Result::ok)
            .filter(|e| !is_git_dir(&e.file_name()))
            .collect();
        children.sort_by_key(|e| e.file_name());
        for child in children {
            if self.entries.len() >= self.limit {
                self.truncated = true;
                return Ok(());
            }
            let Ok(meta) = child.path().symlink_metadata() else {
                continue;
            };
            let name = child.file_name().to_string_lossy().into_owned();
            let child_rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let file_type = meta.file_type();
            self.entries
                .push((child_rel.clone(), child.path(), file_type, meta.len()));
            if file_type.is_dir() && depth > 1 {
                self.visit(&child.path(), &child_rel, depth - 1)?;
                if self.truncated {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

impl Tools {
    /// The tools over `root` (canonicalized) with `config` (checked).
    pub fn new(root: &Path, config: CoderConfig) -> Result<Self, CoderError> {
        config.check()?;
        Ok(Self {
            workspace: Workspace::new(root)?,
            config,
        })
    }

    /// The work directory.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The limits in force.
    pub fn config(&self) -> &CoderConfig {
        &self.config
    }

    /// Every tool as `{"name", "description", "input_schema"}`, the schema
    /// in the shape LLM tool-use APIs take.
    pub fn schemas(&self) -> Vec<Value> {
        let c = &self.config;
        let allow = c.allowlist.join(", ");
        vec![
            json!({
                "name": "read_file",
                "description": format!(
                    "Read a text file of the work directory. Returns whole lines from offset_line \
                     (1-based), at most max_lines of them and at most {} bytes; `truncated` is true \
                     when more remains. Binary files are refused.", c.max_read_bytes),
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Path relative to the work directory."},
                        "offset_line": {"type": "integer", "minimum": 1, "description": "First line to return (1-based, default 1)."},
                        "max_lines": {"type": "integer", "minimum": 1, "description": format!("Most lines to return (default {}).", c.default_read_lines)}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }
            }),
            json!({
                "name": "list_files",
                "description": format!(
                    "List a directory of the work directory recursively, depth-first with names \
                     sorted, skipping .git and not following symlinks. At most {} entries; \
                     `truncated` is true when more remain.", c.max_list_entries),
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Directory relative to the work directory (default: the root)."},
                        "max_depth": {"type": "integer", "minimum": 1, "maximum": c.max_list_depth, "description": format!("1 lists only the directory's children (default {}).", c.default_list_depth)}
                    },
                    "additionalProperties": false
                }
            }),
            json!({
                "name": "search",
                "description": "Search text files for a literal substring (not a regex), \
                    case-sensitive, line by line. Skips .git, binary files, symlinks and large \
                    files. `truncated` is true when results or files were cut short.",
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "pattern": {"type": "string", "description": "The literal text to find (one line)."},
                        "path": {"type": "string", "description": "File or directory to search (default: the root)."},
                        "max_results": {"type": "integer", "minimum": 1, "maximum": c.max_search_results, "description": format!("Most matches to return (default {}).", c.default_search_results)}
                    },
                    "required": ["pattern"],
                    "additionalProperties": false
                }
            }),
            json!({
                "name": "apply_diff",
                "description": format!(
                    "Apply a unified diff (git format, paths relative to the work directory, a/ b/ \
                     prefixes) to the work directory. It is checked first; if any hunk does not \
                     apply, nothing changes and git's error is returned. At most {} bytes.",
                    c.max_diff_bytes),
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "diff": {"type": "string", "description": "The unified diff."}
                    },
                    "required": ["diff"],
                    "additionalProperties": false
                }
            }),
            json!({
                "name": "run_command",
                "description": format!(
                    "Run a program in the work directory, without a shell (no pipes, redirections \
                     or globbing). argv[0] must be one of: {allow}; git only with status, diff, \
                     log or show. stdout and stderr are returned, each capped at {} bytes. The \
                     command is killed after timeout_secs (default {}, at most {}).",
                    c.max_output_bytes,
                    c.default_command_timeout.as_secs(),
                    c.max_command_timeout.as_secs()),
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "The program and its arguments."},
                        "timeout_secs": {"type": "integer", "minimum": 1, "maximum": c.max_command_timeout.as_secs()}
                    },
                    "required": ["argv"],
                    "additionalProperties": false
                }
            }),
        ]
    }

    /// Call the tool `name` with `args`. An unknown name is an error naming
    /// it; every refusal leaves the work directory unchanged.
    ///
    /// `read_file`, `list_files` and `search` do their (capped) file-system
    /// work inline on the calling task; `apply_diff` and `run_command` await
    /// their child processes.
    pub async fn call(&self, name: &str, args: &Value) -> Result<Value, ToolError> {
        let result = match name {
            "read_file" => self.read_file(args),
            "list_files" => self.list_files(args),
            "search" => self.search(args),
            "apply_diff" => self.apply_diff(args).await,
            "run_command" => self.run_command(args).await,
            _ => Err(ToolError::UnknownTool {
                name: name.to_owned(),
                known: TOOL_NAMES.join(", "),
            }),
        };
        if let Err(e) = &result {
            tracing::debug!(tool = name, error = %e, "tool call refused");
        }
        result
    }

    /// `read_file {path, offset_line?, max_lines?}`.
    pub fn read_file(&self, args: &Value) -> Result<Value, ToolError> {
        let args = Args::parse(args, &["path", "offset_line", "max_lines"])?;
        let path = args.req_str("path")?;
        let offset = args.opt_uint("offset_line", 1, u64::MAX)?.unwrap_or(1);
        let max_lines = args
            .opt_uint("max_lines", 1, u64::MAX)?
            .map_or(self.config.default_read_lines, u64_to_usize);
        let resolved = self.workspace.resolve_existing(path)?;
        let meta = std::fs::metadata(&resolved.absolute)
            .map_err(|e| ToolError::failed(format!("stat {path:?}"), e))?;
        if !meta.is_file() {
            return Err(ToolError::NotApplicable {
                path: path.to_owned(),
                reason: "is not a regular file".into(),
            });
        }
        let file = File::open(&resolved.absolute)
            .map_err(|e| ToolError::failed(format!("open {path:?}"), e))?;
        let mut reader = BufReader::with_capacity(64 * 1024, file);
        let mut head = Vec::with_capacity(BINARY_SNIFF_BYTES);
        (&mut reader)
            .take(usize_to_u64(BINARY_SNIFF_BYTES))
            .read_to_end(&mut head)
            .map_err(|e| ToolError::failed(format!("read {path:?}"), e))?;
        if looks_binary(&head) {
            return Err(ToolError::NotApplicable {
                path: path.to_owned(),
                reason:
                    "is a binary file (NUL byte in its first 8 KiB); read_file returns text only"
                        .into(),
            });
        }
        // Start again from the beginning: the sniffed bytes are part of the
        // first lines.
        let reader = head.as_slice().chain(reader);
        let mut reader = BufReader::new(reader);
        let io = |e: std::io::Error| ToolError::failed(format!("read {path:?}"), e);

        let mut line_no: u64 = 1;
        while line_no < offset {
            if !skip_line(&mut reader).map_err(io)? {
                break;
            }
            line_no += 1;
        }
        let cap = self.config.max_read_bytes;
        let mut content = String::new();
        let mut lines = 0usize;
        let mut truncated = false;
        while lines < max_lines {
            let room = cap.saturating_sub(content.len());
            let mut line = Vec::new();
            (&mut reader)
                .take(usize_to_u64(room).saturating_add(1))
                .read_until(b'\n', &mut line)
                .map_err(io)?;
            if line.is_empty() {
                break;
            }
            let text = String::from_utf8_lossy(&line);
            if content.len() + text.len() > cap {
                truncated = true;
                if lines == 0 {
                    // A single line longer than the cap: return its start.
                    content.push_str(prefix_at_boundary(&text, cap));
                    lines = 1;
                }
                break;
            }
            content.push_str(&text);
            lines += 1;
        }
        if !truncated && lines == max_lines {
            truncated = !reader.fill_buf().map_err(io)?.is_empty();
        }
        let first_line = if lines == 0 {
            Value::Null
        } else {
            json!(line_no)
        };
        let last_line = if lines == 0 {
            Value::Null
        } else {
            json!(line_no + usize_to_u64(lines) - 1)
        };
        Ok(json!({
            "path": resolved.relative,
            "content": content,
            "first_line": first_line,
            "last_line": last_line,
            "truncated": truncated,
        }))
    }

    /// `list_files {path?, max_depth?}`.
    pub fn list_files(&self, args: &Value) -> Result<Value, ToolError> {
        let args = Args::parse(args, &["path", "max_depth"])?;
        let path = args.opt_str("path")?.unwrap_or(".");
        let depth = args
            .opt_uint("max_depth", 1, usize_to_u64(self.config.max_list_depth))?
            .map_or(self.config.default_list_depth, u64_to_usize);
        let resolved = self.workspace.resolve_existing(path)?;
        if !resolved.absolute.is_dir() {
            return Err(ToolError::NotApplicable {
                path: path.to_owned(),
                reason: "is not a directory".into(),
            });
        }
        let mut walk = Walk {
            entries: Vec::new(),
            limit: self.config.max_list_entries,
            truncated: false,
        };
        walk.visit(&resolved.absolute, &resolved.relative, depth)?;
        let entries: Vec<Value> = walk
            .entries
            .iter()
            .map(|(rel, _, ft, len)| {
                let kind = if ft.is_symlink() {
                    "symlink"
                } else if ft.is_dir() {
                    "dir"
                } else if ft.is_file() {
                    "file"
                } else {
                    "other"
                };
                if ft.is_file() {
                    json!({"path": rel, "type": kind, "size": len})
                } else {
                    json!({"path": rel, "type": kind})
                }
            })
            .collect();
        Ok(json!({
            "path": if resolved.relative.is_empty() { "." } else { resolved.relative.as_str() },
            "entries": entries,
            "truncated": walk.truncated,
        }))
    }

    /// `search {pattern, path?, max_results?}`.
    pub fn search(&self, args: &Value) -> Result<Value, ToolError> {
        let args = Args::parse(args, &["pattern", "path", "max_results"])?;
        let pattern = args.req_str("pattern")?;
        let path = args.opt_str("path")?.unwrap_or(".");
        let max_results = args
            .opt_uint(
                "max_results",
                1,
                usize_to_u64(self.config.max_search_results),
            )?
            .map_or(self.config.default_search_results, u64_to_usize);
        if pattern.is_empty() {
            return Err(ToolError::arg("pattern", "must not be empty"));
        }
        if pattern.contains('\n') || pattern.contains('\r') {
            return Err(ToolError::arg(
                "pattern",
                "must be a single line (matching is line by line)",
            ));
        }
        if pattern.len() > self.config.max_pattern_bytes {
            return Err(ToolError::TooLarge {
                field: "pattern".into(),
                size: pattern.len(),
                limit: self.config.max_pattern_bytes,
            });
        }
        let resolved = self.workspace.resolve_existing(path)?;
        let mut truncated = false;
        let files: Vec<(String, PathBuf)> = if resolved.absolute.is_dir() {
            let mut walk = Walk {
                entries: Vec::new(),
                // Directories count towards the walk's limit too; the file
                // cap below is the one that matters.
                limit: self.config.max_search_files.saturating_mul(2),
                truncated: false,
            };
            walk.visit(&resolved.absolute, &resolved.relative, usize::MAX)?;
            truncated |= walk.truncated;
            walk.entries
                .into_iter()
                .filter(|(_, _, ft, _)| ft.is_file())
                .map(|(rel, abs, _, _)| (rel, abs))
                .collect()
        } else {
            vec![(resolved.relative.clone(), resolved.absolute.clone())]
        };
        let mut matches = Vec::new();
        let mut searched = 0usize;
        'files: for (rel, abs) in &files {
            if searched >= self.config.max_search_files {
                truncated = true;
                break;
            }
            let Ok(meta) = abs.symlink_metadata() else {
                continue;
            };
            if !meta.is_file() || meta.len() > self.config.max_search_file_bytes {
                continue;
            }
            let Ok(bytes) = std::fs::read(abs) else {
                continue;
            };
            if looks_binary(&bytes) {
                continue;
            }
            searched += 1;
            let text = String::from_utf8_lossy(&bytes);
            for (i, line) in text.lines().enumerate() {
                if line.contains(pattern) {
                    if matches.len() >= max_results {
                        truncated = true;
                        break 'files;
                    }
                    let shown: String = line.chars().take(MAX_MATCH_LINE_CHARS).collect();
                    matches.push(json!({"path": rel, "line": i + 1, "text": shown}));
                }
            }
        }
        Ok(json!({
            "pattern": pattern,
            "matches": matches,
            "files_searched": searched,
            "truncated": truncated,
        }))
    }

    /// A git command for the work directory: no prompt, no system or global
    /// config (HOME is the work directory, whose files the model writes),
    /// no pager, and no repository discovery above the root.
    fn git_command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(self.workspace.root())
            .env_clear()
            .env("PATH", &self.config.command_path)
            .env("HOME", self.workspace.root())
            .env("LANG", lang())
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_PAGER", "cat");
        if let Some(parent) = self.workspace.root().parent() {
            cmd.env("GIT_CEILING_DIRECTORIES", parent);
        }
        cmd
    }

    /// `apply_diff {diff}`: `git apply --check`, then `git apply`. Never
    /// `--unsafe-paths`: git then refuses paths outside the tree, into
    /// `.git` and beyond a symlink.
    pub async fn apply_diff(&self, args: &Value) -> Result<Value, ToolError> {
        let args = Args::parse(args, &["diff"])?;
        let diff = args.req_str("diff")?;
        if diff.len() > self.config.max_diff_bytes {
            return Err(ToolError::TooLarge {
                field: "diff".into(),
                size: diff.len(),
                limit: self.config.max_diff_bytes,
            });
        }
        if diff.trim().is_empty() {
            return Err(ToolError::arg("diff", "must not be empty"));
        }
        let git = resolve_program("git", &self.config.command_path)
            .ok_or_else(|| ToolError::failed("apply_diff", "git is not on the configured PATH"))?;
        let cap = self.config.max_output_bytes;
        let timeout = self.config.apply_timeout;

        let mut check = self.git_command(&git);
        check.args(["apply", "--check", "-"]);
        let out = process::run(&mut check, Some(diff.as_bytes().to_vec()), timeout, cap)
            .await
            .map_err(|e| ToolError::failed("spawn git apply", e))?;
        if !out.success() {
            return Err(rejected(&out));
        }
        let mut apply = self.git_command(&git);
        apply.args(["apply", "--stat", "--apply", "-"]);
        let out = process::run(&mut apply, Some(diff.as_bytes().to_vec()), timeout, cap)
            .await
            .map_err(|e| ToolError::failed("spawn git apply", e))?;
        if !out.success() {
            // git apply is atomic by default: a failing apply leaves the
            // tree as it was.
            return Err(rejected(&out));
        }
        Ok(json!({
            "applied": true,
            "stat": String::from_utf8_lossy(&out.stdout).trim_end(),
        }))
    }

    /// `run_command {argv, timeout_secs?}`.
    pub async fn run_command(&self, args: &Value) -> Result<Value, ToolError> {
        let args = Args::parse(args, &["argv", "timeout_secs"])?;
        let argv = args.req_str_array("argv")?;
        let max_secs = self.config.max_command_timeout.as_secs().max(1);
        let timeout = args
            .opt_uint("timeout_secs", 1, max_secs)?
            .map_or(self.config.default_command_timeout, Duration::from_secs);
        let Some((&program, rest)) = argv.split_first() else {
            return Err(ToolError::arg("argv", "must name a program (argv[0])"));
        };
        if argv.len() > MAX_ARGV_ENTRIES {
            return Err(ToolError::TooLarge {
                field: "argv".into(),
                size: argv.len(),
                limit: MAX_ARGV_ENTRIES,
            });
        }
        let total: usize = argv.iter().map(|a| a.len()).sum();
        if total > MAX_ARGV_BYTES {
            return Err(ToolError::TooLarge {
                field: "argv".into(),
                size: total,
                limit: MAX_ARGV_BYTES,
            });
        }
        if let Some(i) = argv.iter().position(|a| a.contains('\0')) {
            return Err(ToolError::arg(format!("argv[{i}]"), "contains a NUL byte"));
        }
        if !self.config.allowlist.iter().any(|a| a == program) {
            return Err(ToolError::CommandRefused {
                reason: format!(
                    "argv[0] {program:?} is not on the allowlist ({}); programs are named \
                     exactly, without a path, and run without a shell",
                    self.config.allowlist.join(", ")
                ),
            });
        }
        let is_git = program == "git";
        if is_git {
            check_git_args(rest)?;
        }
        let resolved = resolve_program(program, &self.config.command_path).ok_or_else(|| {
            ToolError::failed(
                format!("run {program:?}"),
                "not found on the configured PATH",
            )
        })?;
        let mut cmd = if is_git {
            self.git_command(&resolved)
        } else {
            let mut cmd = Command::new(&resolved);
            cmd.current_dir(self.workspace.root())
                .env_clear()
                .env("PATH", &self.config.command_path)
                .env("HOME", self.workspace.root())
                .env("LANG", lang());
            cmd
        };
        cmd.args(rest);
        let out = process::run(&mut cmd, None, timeout, self.config.max_output_bytes)
            .await
            .map_err(|e| ToolError::failed(format!("spawn {program:?}"), e))?;
        let exit_code = out.status.and_then(|s| s.code());
        let signal = out.status.and_then(|s| s.signal());
        tracing::debug!(
            program,
            ?exit_code,
            ?signal,
            timed_out = out.timed_out,
            "run_command finished"
        );
        Ok(json!({
            "argv": argv,
            "exit_code": exit_code,
            "signal": signal,
            "timed_out": out.timed_out,
            "duration_ms": u64::try_from(out.elapsed.as_millis()).unwrap_or(u64::MAX),
            "stdout": String::from_utf8_lossy(&out.stdout),
            "stdout_truncated": out.stdout_truncated,
            "stderr": String::from_utf8_lossy(&out.stderr),
            "stderr_truncated": out.stderr_truncated,
        }))
    }
}

/// The locale children run with: this process's `LANG`, else `C.UTF-8`.
fn lang() -> String {
    std::env::var("LANG")
        .ok()
        .filter(|l| !l.is_empty() && !l.contains('\0'))
        .unwrap_or_else(|| "C.UTF-8".to_owned())
}

/// A `git apply` refusal as a [`ToolError`], flagging refusals about a
/// forbidden path.
fn rejected(out: &process::Captured) -> ToolError {
    if out.timed_out {
        return ToolError::failed("git apply", "timed out and was killed; nothing applied");
    }
    let git_error = trim_error_text(&out.stderr);
    let forbidden_path = [
        "outside repository",
        "invalid path",
        "beyond a symbolic link",
    ]
    .iter()
    .any(|needle| git_error.contains(needle));
    ToolError::PatchRejected {
        git_error,
        forbidden_path,
    }
}

/// `git` may run only a read-only subcommand, named first, without an
/// option that writes a file, reads outside the tree or runs a program.
fn check_git_args(rest: &[&str]) -> Result<(), ToolError> {
    let Some(sub) = rest.first() else {
        return Err(ToolError::CommandRefused {
            reason: format!(
                "git needs a subcommand, one of: {}",
                GIT_READ_ONLY_SUBCOMMANDS.join(", ")
            ),
        });
    };
    if !GIT_READ_ONLY_SUBCOMMANDS.contains(sub) {
        return Err(ToolError::CommandRefused {
            reason: format!(
                "git {sub:?} is not allowed; git may run only the read-only subcommands {} \
                 (named first, with no option before them)",
                GIT_READ_ONLY_SUBCOMMANDS.join(", ")
            ),
        });
    }
    for (i, arg) in rest.iter().enumerate().skip(1) {
        if arg == &"--" {
            break;
        }
        if let Some(opt) = refused_git_option(arg) {
            return Err(ToolError::CommandRefused {
                reason: format!("argv[{}]: git option {opt} is not allowed", i + 1),
            });
        }
    }
    Ok(())
}

/// The refused option `arg` spells, if any. git accepts unambiguous
/// abbreviations of long options (`--out=f` for `--output=f`) and bundled
/// short options (`-pOfile`), so both are matched, not just exact names.
fn refused_git_option(arg: &str) -> Option<&'static str> {
    if let Some(long) = arg.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or_default();
        // An exact option name is never an abbreviation: `--text` is its
        // own (harmless) option, not `--textconv`.
        if name.is_empty() || name == "text" {
            return None;
        }
        return GIT_REFUSED_OPTIONS
            .iter()
            .filter_map(|o| o.strip_prefix("--").map(|bare| (*o, bare)))
            .find(|(_, bare)| bare.starts_with(name))
            .map(|(o, _)| o);
    }
    if let Some(short) = arg.strip_prefix('-') {
        return GIT_REFUSED_OPTIONS
            .iter()
            .filter_map(|o| o.strip_prefix('-').filter(|s| !s.starts_with('-')))
            .find(|s| short.contains(*s))
            .map(|_| "-O");
    }
    None
}

/// Find `name` in the absolute directories of `path_var` as an executable
/// regular file. Relative entries (`.`, empty) are ignored: they would make
/// a file in the work directory resolve as an allowlisted program.
fn resolve_program(name: &str, path_var: &str) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
