//! The coder's agentic loop over one coding task: read the task from
//! control, check its repository out into a fresh work directory, resolve
//! the task's model chain with the platform's provider keys, then turn by
//! turn hold the turn's worst case against the weekly credit, call the
//! model through genesis-llm's fallback chain, record every attempt with
//! control (which prices it), run the model's tool calls through the
//! governed [`Tools`] and feed the results back — until the model calls
//! `task_complete` (the patch and summary are attached and the task
//! completed) or `task_fail`, or a limit, the credit, the chain or the
//! checkout ends it (the task is failed with the reason).
//!
//! Owns the loop, its limits ([`Limits`]), the coder's fixed system prompt,
//! the two terminators, the settlement of the task and the exit code of a
//! run ([`EXIT_COMPLETED`], [`EXIT_TASK_FAILED`], [`EXIT_BAD_CONFIG`],
//! [`EXIT_UNREACHABLE`]), and the read-only [`dry_run`].
//!
//! This module must never parse the model's text for state (the tool call
//! is the commit), never call a paid model without a granted reservation
//! (a chain of the free scripted provider holds none, as an agent's),
//! never leave an attempt unrecorded when control is reachable, never
//! retry a settlement control refused as already settled, never put a
//! secret (a key, the coder token, a password in a repository URL) into a
//! log line, a progress message or the prompt, and — in a dry run — never
//! write anything anywhere.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use genesis_llm::{
    ChainCouple, ChatMessage, ChatRequest, CredentialSource, FallbackInvoker, Preset,
    ResolvedChain, ToolCall, ToolSpec,
};
use genesis_proto::v1 as pb;
use serde_json::{Value, json};
use thiserror::Error;
use tracing::Instrument;
use uuid::Uuid;

use crate::checkout::{Checkout, checkout};
use crate::config::CoderConfig;
use crate::control::{
    ARTIFACT_PATCH, ARTIFACT_SUMMARY, ControlClient, ControlError, STATUS_COMPLETED, STATUS_FAILED,
};
use crate::error::ToolError;
use crate::tools::{TOOL_NAMES, Tools};

/// Exit code: the task was completed.
pub const EXIT_COMPLETED: u8 = 0;
/// Exit code: the task failed (the model gave up, a limit, the credit, the
/// model chain or the checkout ended it), or it was settled by someone else.
pub const EXIT_TASK_FAILED: u8 = 1;
/// Exit code: the coder's configuration is unusable (a missing or malformed
/// setting, a token or task control refuses).
pub const EXIT_BAD_CONFIG: u8 = 2;
/// Exit code: control could not be reached.
pub const EXIT_UNREACHABLE: u8 = 3;

/// The terminator a model calls when the task is done.
pub const TASK_COMPLETE: &str = "task_complete";
/// The terminator a model calls when the task cannot be done.
pub const TASK_FAIL: &str = "task_fail";

/// What the offline scripted provider answers a coder (the demo's and the
/// kind suite's chains name it; an operator chose it, it is never a
/// fallback): one turn ending the task as done, having written nothing. It
/// proves the contract (claim, chain, credit, attempts, settlement) without
/// a real model, which alone can write code.
pub fn offline_script() -> genesis_llm::Script {
    genesis_llm::Script {
        rules: vec![genesis_llm::ScriptRule {
            event: None,
            contains: None,
            objective_contains: None,
            turns: vec![vec![genesis_llm::ScriptedToolCall {
                name: TASK_COMPLETE.into(),
                arguments: serde_json::json!({
                    "summary": "Offline scripted run: no change was made (the scripted provider writes no code)."
                }),
            }]],
            text: None,
        }],
    }
}

/// Default of [`Limits::max_turns`].
pub const DEFAULT_MAX_TURNS: u32 = 40;
/// Default of [`Limits::max_output_tokens`].
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4_096;
/// Default of [`Limits::timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3_600);
/// The largest [`Limits::timeout`] accepted: a week is far beyond any
/// coding task, and a bound keeps the deadline arithmetic from overflowing.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3_600);

/// The longest progress message sent: a status line, not a log.
const MAX_PROGRESS_CHARS: usize = 500;
/// The longest tool name quoted in a progress message (the name is the
/// model's, and may be anything).
const MAX_TOOL_NAME_CHARS: usize = 64;

/// The coder's fixed system prompt; the chain's prompt overlay follows it.
pub const CODER_PROMPT: &str = "You are a software engineer working on one coding task in a git \
checkout of the task's repository. Act only through tool calls; paths are relative to the \
repository root, and .git is off limits.\n\
- read_file(path, offset_line?, max_lines?): read a text file.\n\
- list_files(path?, max_depth?): list a directory recursively.\n\
- search(pattern, path?, max_results?): find a literal text in the files.\n\
- apply_diff(diff): change files with a unified diff (git format, a/ and b/ prefixes); if any \
hunk does not apply, nothing changes.\n\
- run_command(argv, timeout_secs?): run an allowlisted build or test program, without a shell.\n\
A refused call answers with an error code and a message saying what to fix; fix the call and \
go on. Make the smallest change that does the task, and check it (build, tests) when you can.\n\
Finish with task_complete(summary) — what you changed and why, for a reviewer — or, if the task \
cannot be done, with task_fail(reason).";

/// Sent as the user's turn when the model answered without a tool call.
pub const NUDGE: &str = "You made no tool call. Act only through tool calls: take the next \
step, or end the task now with task_complete(summary) or task_fail(reason).";

/// The loop's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Model turns before the task fails.
    pub max_turns: u32,
    /// Output cap of each turn.
    pub max_output_tokens: u32,
    /// Wall time of the whole run, checkout included.
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_turns: DEFAULT_MAX_TURNS,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl Limits {
    /// Refuse a limit of zero (it would fail every task before any work)
    /// and a wall time beyond [`MAX_TIMEOUT`].
    pub fn check(&self) -> Result<(), RunError> {
        if self.max_turns == 0 {
            return Err(RunError::Config("--max-turns must be at least 1".into()));
        }
        if self.max_output_tokens == 0 {
            return Err(RunError::Config(
                "--max-output-tokens must be at least 1".into(),
            ));
        }
        if self.timeout.is_zero() {
            return Err(RunError::Config("--timeout-secs must be at least 1".into()));
        }
        if self.timeout > MAX_TIMEOUT {
            return Err(RunError::Config(format!(
                "--timeout-secs must be at most {}",
                MAX_TIMEOUT.as_secs()
            )));
        }
        Ok(())
    }
}

/// Everything a run needs besides control and the model.
#[derive(Debug, Clone, Default)]
pub struct RunConfig {
    /// The loop's limits.
    pub limits: Limits,
    /// Where the run's work directory is made (a fresh temporary directory
    /// inside it, removed at the end); `None`: the system's temp directory.
    pub workdir: Option<PathBuf>,
    /// The tools' limits.
    pub tools: CoderConfig,
}

/// The model side: the fallback chain and where credentials come from.
#[derive(Clone)]
pub struct Llm {
    /// Calls the resolved preset's chain.
    pub invoker: FallbackInvoker,
    /// Provider keys by name, for the task's tenant.
    pub credentials: Arc<dyn CredentialSource>,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llm").finish_non_exhaustive()
    }
}

/// How a run ended, once the task was read.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The model called `task_complete`; the task is completed.
    Completed {
        /// The model's summary.
        summary: String,
        /// Model turns made.
        turns: u32,
        /// Bytes of the patch attached (0: no change, none attached).
        patch_bytes: usize,
        /// Paths the patch changes.
        files_changed: Vec<String>,
    },
    /// The task was failed with `reason` (or failing it was attempted).
    Failed {
        /// Why.
        reason: String,
    },
    /// Control said the task was already settled (an operator completed or
    /// failed it, or it lost its coder): the run stopped, nothing retried.
    SettledElsewhere {
        /// Control's answer.
        detail: String,
    },
}

impl Outcome {
    /// The process exit code of this outcome.
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Completed { .. } => EXIT_COMPLETED,
            Outcome::Failed { .. } | Outcome::SettledElsewhere { .. } => EXIT_TASK_FAILED,
        }
    }
}

/// Why a run could not be carried out at all.
#[derive(Debug, Clone, Error)]
pub enum RunError {
    /// A setting is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Control refused or could not be reached.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The task was already completed or failed before the run started.
    #[error("the task is already {status}; nothing to do")]
    AlreadySettled {
        /// Its status.
        status: String,
    },
}

impl RunError {
    /// The process exit code of this error: control unreachable is
    /// [`EXIT_UNREACHABLE`]; a setting, token or task id control refuses is
    /// [`EXIT_BAD_CONFIG`]; anything else fails the run
    /// ([`EXIT_TASK_FAILED`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Config(_) => EXIT_BAD_CONFIG,
            RunError::AlreadySettled { .. } => EXIT_TASK_FAILED,
            RunError::Control(e) if e.is_unreachable() => EXIT_UNREACHABLE,
            RunError::Control(ControlError::Config(_)) => EXIT_BAD_CONFIG,
            RunError::Control(e) => match e.code() {
                Some(
                    tonic::Code::Unauthenticated
                    | tonic::Code::PermissionDenied
                    | tonic::Code::InvalidArgument
                    | tonic::Code::NotFound,
                ) => EXIT_BAD_CONFIG,
                _ => EXIT_TASK_FAILED,
            },
        }
    }
}

/// Whether a task status is final.
fn is_settled(status: &str) -> bool {
    status == STATUS_COMPLETED || status == STATUS_FAILED
}

/// The chain control resolved, as genesis-llm's resolver takes it.
pub fn resolved_chain(chain: &pb::ResolvedPresetChain) -> ResolvedChain {
    ResolvedChain {
        resolved_site_id: chain.resolved_site_id.clone(),
        preset_id: chain.preset_id.clone(),
        preset_name: chain.preset_name.clone(),
        couples: chain
            .couples
            .iter()
            .map(|c| ChainCouple {
                model: c.model.clone(),
                provider: c.provider.clone(),
                backend: c.backend.clone(),
                credential_names: c.credential_names.clone(),
            })
            .collect(),
    }
}

/// The tools the model is offered: the five governed tools (their schemas
/// as [`Tools::schemas`] gives them) and the two terminators.
pub fn tool_specs(tools: &Tools) -> Vec<ToolSpec> {
    let mut specs: Vec<ToolSpec> = tools
        .schemas()
        .into_iter()
        .filter_map(|schema| {
            Some(ToolSpec {
                name: schema.get("name")?.as_str()?.to_owned(),
                description: schema
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                parameters: Arc::new(schema.get("input_schema")?.clone()),
            })
        })
        .collect();
    specs.extend(terminator_specs());
    specs
}

/// `task_complete{summary}` and `task_fail{reason}`.
pub fn terminator_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: TASK_COMPLETE.into(),
            description: "End the task as done. The work directory's changes become the task's \
                patch."
                .into(),
            parameters: Arc::new(json!({
                "type": "object",
                "properties": {
                    "summary": {"type": "string", "description": "What was changed and why, for a reviewer (Markdown)."}
                },
                "required": ["summary"],
                "additionalProperties": false
            })),
        },
        ToolSpec {
            name: TASK_FAIL.into(),
            description: "End the task as failed: it cannot be done.".into(),
            parameters: Arc::new(json!({
                "type": "object",
                "properties": {
                    "reason": {"type": "string", "description": "Why the task cannot be done."}
                },
                "required": ["reason"],
                "additionalProperties": false
            })),
        },
    ]
}

/// Every tool name the model may call, for an unknown name's refusal.
fn known_tools() -> String {
    TOOL_NAMES
        .iter()
        .copied()
        .chain([TASK_COMPLETE, TASK_FAIL])
        .collect::<Vec<_>>()
        .join(", ")
}

/// A terminator's one required, non-blank string argument.
fn terminator_arg(args: &Value, field: &str) -> Result<String, ToolError> {
    let object = match args {
        Value::Object(map) => map,
        _ => return Err(ToolError::arg("(arguments)", "must be a JSON object")),
    };
    if let Some(unknown) = object.keys().find(|k| k.as_str() != field) {
        return Err(ToolError::arg(
            unknown.as_str(),
            format!("unknown field; the accepted field is: {field}"),
        ));
    }
    match object.get(field) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(ToolError::arg(field, "must not be blank")),
        Some(_) => Err(ToolError::arg(field, "must be a string")),
        None => Err(ToolError::arg(field, "is required")),
    }
}

/// A refused tool call as the model reads it: the catalogue code and the
/// message ([`ToolError::to_json`]).
fn tool_error_json(e: &ToolError) -> String {
    e.to_json().to_string()
}

/// The paths a `git diff` changes (the `b/` side; a deletion's `a/` side).
pub fn files_changed(patch: &str) -> Vec<String> {
    let mut files = Vec::new();
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("diff --git a/")
            && let Some((_, b)) = rest.rsplit_once(" b/")
        {
            files.push(b.to_owned());
        }
    }
    files
}

/// A model-chosen tool name, bounded for a progress message.
fn shown_tool_name(name: &str) -> String {
    if name.chars().count() <= MAX_TOOL_NAME_CHARS {
        return name.to_owned();
    }
    let mut out: String = name.chars().take(MAX_TOOL_NAME_CHARS).collect();
    out.push('…');
    out
}

/// A progress message, bounded.
fn bounded(message: String) -> String {
    if message.chars().count() <= MAX_PROGRESS_CHARS {
        return message;
    }
    let mut out: String = message.chars().take(MAX_PROGRESS_CHARS).collect();
    out.push('…');
    out
}

/// How the loop ended, before the task is settled.
enum Finished {
    /// `task_complete` with its summary.
    Complete { summary: String },
    /// The task fails with this reason.
    Fail(String),
}

/// What the loop leaves behind for the settlement.
#[derive(Default)]
struct State {
    checkout: Option<Checkout>,
    turns: u32,
}

/// Run the task `control` is bound to (module docs). `Ok` once the task was
/// read: the outcome says how it ended and was settled. `Err` when the
/// task could not be read (or is already settled), or when control became
/// unreachable mid-run (failing the task was attempted first).
pub async fn run(
    control: &ControlClient,
    llm: &Llm,
    config: &RunConfig,
) -> Result<Outcome, RunError> {
    let span =
        tracing::info_span!("coder", tenant = %control.tenant_id(), task = %control.task_id());
    run_task(control, llm, config).instrument(span).await
}

async fn run_task(
    control: &ControlClient,
    llm: &Llm,
    config: &RunConfig,
) -> Result<Outcome, RunError> {
    config.limits.check()?;
    let started = Instant::now();
    let deadline = started + config.limits.timeout;
    let task = control.get_task().await?;
    if is_settled(&task.status) {
        return Err(RunError::AlreadySettled {
            status: task.status,
        });
    }
    tracing::info!(title = %task.title, "starting the task");
    let base = config.workdir.clone().unwrap_or_else(std::env::temp_dir);
    let workdir = match tempfile::Builder::new()
        .prefix("genesis-coder-")
        .tempdir_in(&base)
    {
        Ok(dir) => dir,
        Err(e) => {
            let reason = format!("cannot create a work directory in {}: {e}", base.display());
            return settle_failed(control, reason, 0).await;
        }
    };
    let mut state = State::default();
    let work = work(
        control,
        llm,
        config,
        &task,
        workdir.path(),
        deadline,
        &mut state,
    );
    let finished =
        match tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), work).await {
            Ok(Ok(finished)) => finished,
            Ok(Err(e)) => return abort(control, e, state.turns).await,
            Err(_) => Finished::Fail(format!(
                "timed out after {} s (--timeout-secs)",
                config.limits.timeout.as_secs()
            )),
        };
    match finished {
        Finished::Fail(reason) => settle_failed(control, reason, state.turns).await,
        Finished::Complete { summary } => match &state.checkout {
            Some(checkout) => settle_completed(control, checkout, summary, state.turns).await,
            None => {
                settle_failed(control, "completed without a checkout".into(), state.turns).await
            }
        },
    }
}

/// A control error ended the loop: a settled task stops quietly; anything
/// else fails the task (best effort) and, when control is gone, the run.
async fn abort(control: &ControlClient, e: ControlError, turns: u32) -> Result<Outcome, RunError> {
    if e.is_settled() {
        tracing::warn!(error = %e, "control says the task is settled; stopping");
        return Ok(Outcome::SettledElsewhere {
            detail: e.to_string(),
        });
    }
    tracing::error!(error = %e, "a control call failed; failing the task");
    let outcome = settle_failed(control, format!("control call failed: {e}"), turns).await?;
    if e.is_unreachable() {
        return Err(RunError::Control(e));
    }
    Ok(outcome)
}

/// CompleteTask(failed, reason), best effort: a settled task is logged, any
/// other refusal too; the outcome is the failure either way.
async fn settle_failed(
    control: &ControlClient,
    reason: String,
    turns: u32,
) -> Result<Outcome, RunError> {
    // A reason may quote git's or a provider's error text, which can echo a
    // repository URL with its password: masked before it leaves.
    let reason = genesis_telemetry::config_file::redact_urls_in(&reason).into_owned();
    tracing::warn!(%reason, turns, "failing the task");
    let result_json = json!({"turns": turns, "reason": reason}).to_string();
    match control
        .complete_task(STATUS_FAILED, &reason, result_json)
        .await
    {
        Ok(_) => {}
        Err(e) if e.is_settled() => {
            tracing::warn!(error = %e, "the task was already settled; not retried");
            return Ok(Outcome::SettledElsewhere {
                detail: e.to_string(),
            });
        }
        Err(e) => tracing::error!(error = %e, "failing the task was refused"),
    }
    Ok(Outcome::Failed { reason })
}

/// The patch and summary attached, then CompleteTask(completed).
async fn settle_completed(
    control: &ControlClient,
    checkout: &Checkout,
    summary: String,
    turns: u32,
) -> Result<Outcome, RunError> {
    let patch = match checkout.patch().await {
        Ok(patch) => patch,
        Err(e) => {
            return settle_failed(control, format!("could not compute the patch: {e}"), turns)
                .await;
        }
    };
    let files = files_changed(&patch);
    let patch_bytes = patch.len();
    let attached = async {
        if !patch.is_empty() {
            control
                .attach_artifact(ARTIFACT_PATCH, "changes.patch", patch)
                .await?;
        }
        control
            .attach_artifact(ARTIFACT_SUMMARY, "summary.md", summary.clone())
            .await?;
        let result_json = json!({
            "base_commit": checkout.base_commit(),
            "turns": turns,
            "patch_bytes": patch_bytes,
            "files_changed": files,
        })
        .to_string();
        control
            .complete_task(STATUS_COMPLETED, &summary, result_json)
            .await
    }
    .await;
    match attached {
        Ok(_) => {
            tracing::info!(turns, patch_bytes, files = files.len(), "task completed");
            Ok(Outcome::Completed {
                summary,
                turns,
                patch_bytes,
                files_changed: files,
            })
        }
        Err(e) => abort(control, e, turns).await,
    }
}

/// ReportProgress, advisory: a refusal is logged, except that a settled
/// task ends the run.
async fn progress(
    control: &ControlClient,
    message: String,
    percent: i32,
) -> Result<(), ControlError> {
    match control
        .report_progress(&bounded(message), Some(percent))
        .await
    {
        Err(e) if e.is_settled() => Err(e),
        Err(e) => {
            tracing::warn!(error = %e, "reporting progress failed");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// The loop proper, up to the terminator or a failure.
async fn work(
    control: &ControlClient,
    llm: &Llm,
    config: &RunConfig,
    task: &pb::CodingTask,
    workdir: &std::path::Path,
    deadline: Instant,
    state: &mut State,
) -> Result<Finished, ControlError> {
    let shown_repo = genesis_telemetry::config_file::redact_url(&task.repository);
    let branch = Some(task.branch.as_str()).filter(|b| !b.is_empty());
    let at = branch.map(|b| format!(" at {b}")).unwrap_or_default();
    let started = if task.repository.is_empty() {
        // No repository: the task writes its code from nothing.
        progress(control, "starting from an empty work directory".into(), 0).await?;
        crate::checkout::start_empty(&workdir.join("repo")).await
    } else {
        progress(control, format!("checking out {shown_repo}{at}"), 0).await?;
        checkout(&task.repository, branch, &workdir.join("repo")).await
    };
    let checked_out = match started {
        Ok(c) => c,
        Err(e) => return Ok(Finished::Fail(format!("checkout failed: {e}"))),
    };
    let tools = match Tools::new(checked_out.root(), config.tools.clone()) {
        Ok(t) => t,
        Err(e) => return Ok(Finished::Fail(format!("the tools cannot start: {e}"))),
    };
    state.checkout = Some(checked_out);

    let chain = control.task_preset_chain().await?;
    let tenant = Uuid::parse_str(control.tenant_id()).ok();
    let preset = match genesis_llm::resolve_preset(
        &resolved_chain(&chain),
        tenant,
        llm.credentials.as_ref(),
    ) {
        Ok(p) => p,
        Err(reason) => return Ok(Finished::Fail(format!("no usable model: {reason}"))),
    };
    let models: Vec<String> = preset.chain().iter().map(|c| c.model.clone()).collect();
    tracing::info!(preset = %preset.id, models = ?models, "model chain resolved");

    let system =
        genesis_core::prompt::compose_system_prompt(CODER_PROMPT, "", &chain.prompt_overlay);
    let objective = format!(
        "TASK: {}\nREPOSITORY: {shown_repo}{at}\n\nINSTRUCTIONS:\n{}",
        task.title, task.instructions
    );
    let specs: Arc<[ToolSpec]> = tool_specs(&tools).into();
    let max_turns = config.limits.max_turns;
    // One invocation id per turn, unique to this run too: a task handed to
    // a new coder starts again at turn 1, and its calls must not land in
    // the previous coder's snapshots.
    let run_nonce: String = Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .take(12)
        .collect();
    let invocation_prefix = format!("coder-{}-{run_nonce}", control.task_id());
    let paid = preset.paid_models();
    let mut messages = vec![ChatMessage::user(objective)];
    for turn in 1..=max_turns {
        state.turns = turn;
        let request = ChatRequest {
            model: preset.model.clone(),
            system: system.clone(),
            messages: messages.as_slice().into(),
            tools: Arc::clone(&specs),
            max_output_tokens: config.limits.max_output_tokens,
            temperature: None,
        };
        // A chain of free providers only (the scripted one) spends nothing
        // and holds nothing, as an agent's turn.
        if let Some(paid) = &paid {
            let hold = control
                .reserve_credit(
                    paid.clone(),
                    genesis_llm::prompt_token_bound(&request),
                    config.limits.max_output_tokens,
                )
                .await?;
            if !hold.granted {
                return Ok(Finished::Fail(format!(
                    "weekly credit ceiling: the next turn could cost more than the weekly credit left (spent ${:.4}, held ${:.4}, limit ${:.2})",
                    hold.spent_usd, hold.held_usd, hold.limit_usd
                )));
            }
        }
        let invocation_id = format!("{invocation_prefix}-{turn}");
        let response =
            match call_model(control, llm, &preset, request, deadline, &invocation_id).await? {
                Ok(response) => response,
                Err(reason) => return Ok(Finished::Fail(reason)),
            };
        messages.push(ChatMessage::assistant(
            response.text.clone(),
            response.tool_calls.clone(),
        ));
        if response.tool_calls.is_empty() {
            messages.push(ChatMessage::user(NUDGE));
            progress(
                control,
                format!("turn {turn}: no tool call"),
                percent(turn, max_turns),
            )
            .await?;
            continue;
        }
        let mut called: Vec<String> = Vec::new();
        for call in &response.tool_calls {
            called.push(shown_tool_name(&call.name));
            match run_call(&tools, call).await {
                CallResult::Finished(finished) => return Ok(finished),
                CallResult::Answer(content) => {
                    messages.push(ChatMessage::tool(call.id.clone(), content));
                }
            }
        }
        progress(
            control,
            format!("turn {turn}: {}", called.join(", ")),
            percent(turn, max_turns),
        )
        .await?;
    }
    Ok(Finished::Fail(format!(
        "the model did not finish within {max_turns} turns (--max-turns)"
    )))
}

/// Turn `turn` of `max_turns` as a percentage, below 100 until settled.
fn percent(turn: u32, max_turns: u32) -> i32 {
    let p = u64::from(turn) * 100 / u64::from(max_turns.max(1));
    i32::try_from(p.min(99)).unwrap_or(99)
}

/// One model call: every attempt recorded with control (success or not),
/// under the turn's `invocation_id`. The inner `Err` is the task's failure
/// reason (the chain is exhausted).
async fn call_model(
    control: &ControlClient,
    llm: &Llm,
    preset: &Preset,
    request: ChatRequest,
    deadline: Instant,
    invocation_id: &str,
) -> Result<Result<genesis_llm::ChatResponse, String>, ControlError> {
    let result = llm
        .invoker
        .invoke_until(preset, request, Some(deadline))
        .await;
    let attempts = match &result {
        Ok(inv) => inv.attempts.as_slice(),
        Err(e) => e.attempts.as_slice(),
    };
    for attempt in attempts {
        let answer = control.record_attempt(invocation_id, attempt).await?;
        tracing::debug!(
            invocation = %invocation_id,
            model = %attempt.requested_model,
            outcome = attempt.stored_outcome(),
            cost_usd = answer.cost_usd,
            "attempt recorded"
        );
    }
    Ok(match result {
        Ok(inv) => Ok(inv.response),
        Err(failure) => Err(format!("LLM call failed: {}", failure.error)),
    })
}

/// What one tool call came to.
enum CallResult {
    /// A terminator with valid arguments: the loop ends.
    Finished(Finished),
    /// The content of the tool result fed back.
    Answer(String),
}

/// Run one tool call: a terminator ends the loop, a governed tool runs
/// through [`Tools`], anything else is refused as unknown (naming every
/// tool, terminators included) and the refusal fed back.
async fn run_call(tools: &Tools, call: &ToolCall) -> CallResult {
    match call.name.as_str() {
        TASK_COMPLETE => match terminator_arg(&call.arguments, "summary") {
            Ok(summary) => CallResult::Finished(Finished::Complete { summary }),
            Err(e) => CallResult::Answer(tool_error_json(&e)),
        },
        TASK_FAIL => match terminator_arg(&call.arguments, "reason") {
            Ok(reason) => {
                CallResult::Finished(Finished::Fail(format!("the model gave up: {reason}")))
            }
            Err(e) => CallResult::Answer(tool_error_json(&e)),
        },
        name if TOOL_NAMES.contains(&name) => match tools.call(name, &call.arguments).await {
            Ok(value) => CallResult::Answer(value.to_string()),
            Err(e) => CallResult::Answer(tool_error_json(&e)),
        },
        name => CallResult::Answer(tool_error_json(&ToolError::UnknownTool {
            name: name.to_owned(),
            known: known_tools(),
        })),
    }
}

/// Whether a credential name of a couple resolves, for the dry run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialState {
    /// The tenant has a key by that name.
    Resolves,
    /// No key by that name is available to the tenant.
    Missing,
    /// The name can never be a provider key; it is never looked up.
    NeverAKey,
}

/// One couple of the chain as the dry run shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoupleView {
    /// `provider/model@backend`.
    pub couple: String,
    /// Each credential name and whether it resolves (names only).
    pub credentials: Vec<(String, CredentialState)>,
}

/// What a run would do, read from control without writing anything.
#[derive(Debug, Clone, PartialEq)]
pub struct DryRun {
    /// The task id.
    pub task_id: String,
    /// Its title.
    pub title: String,
    /// Its status.
    pub status: String,
    /// Its repository (passwords masked).
    pub repository: String,
    /// Its branch; empty: the default branch.
    pub branch: String,
    /// The preset that supplied the chain, or the site.
    pub preset: String,
    /// The couples, in order.
    pub couples: Vec<CoupleView>,
    /// The preset the run would call, or why none is usable.
    pub resolved: Result<String, String>,
    /// Whether the chain carries a prompt overlay.
    pub has_overlay: bool,
    /// The tools offered to the model.
    pub tools: Vec<String>,
    /// The limits.
    pub limits: Limits,
}

impl std::fmt::Display for DryRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "task:       {} ({})", self.task_id, self.status)?;
        writeln!(f, "title:      {}", self.title)?;
        let branch = if self.branch.is_empty() {
            "(default branch)"
        } else {
            self.branch.as_str()
        };
        if self.repository.is_empty() {
            writeln!(
                f,
                "repository: none (the task starts from an empty work directory)"
            )?;
        } else {
            writeln!(f, "repository: {} at {branch}", self.repository)?;
        }
        writeln!(f, "chain:      {}", self.preset)?;
        for (i, couple) in self.couples.iter().enumerate() {
            write!(f, "  {}. {}", i + 1, couple.couple)?;
            if couple.credentials.is_empty() {
                writeln!(f, " (no credential needed or named)")?;
                continue;
            }
            let creds: Vec<String> = couple
                .credentials
                .iter()
                .map(|(name, state)| {
                    let state = match state {
                        CredentialState::Resolves => "resolves",
                        CredentialState::Missing => "missing",
                        CredentialState::NeverAKey => "never a provider key",
                    };
                    format!("{name}: {state}")
                })
                .collect();
            writeln!(f, " [{}]", creds.join(", "))?;
        }
        match &self.resolved {
            Ok(preset) => writeln!(f, "would call: {preset}")?,
            Err(reason) => writeln!(f, "would fail: no usable model: {reason}")?,
        }
        writeln!(
            f,
            "overlay:    {}",
            if self.has_overlay { "yes" } else { "none" }
        )?;
        writeln!(f, "tools:      {}", self.tools.join(", "))?;
        writeln!(
            f,
            "limits:     max {} turns, {} output tokens per turn, {} s wall time",
            self.limits.max_turns,
            self.limits.max_output_tokens,
            self.limits.timeout.as_secs()
        )
    }
}

/// Read the task and its chain and say what a run would do: no checkout, no
/// model call, no write to control.
pub async fn dry_run(
    control: &ControlClient,
    credentials: &dyn CredentialSource,
    config: &RunConfig,
) -> Result<DryRun, RunError> {
    config.limits.check()?;
    config
        .tools
        .check()
        .map_err(|e| RunError::Config(e.to_string()))?;
    let task = control.get_task().await?;
    let chain = control.task_preset_chain().await?;
    let tenant = Uuid::parse_str(control.tenant_id()).ok();
    let couples = chain
        .couples
        .iter()
        .map(|c| {
            let needs = c
                .provider
                .parse::<genesis_llm::ProviderKind>()
                .map_or(true, |p| p.needs_credential());
            let credentials = if needs {
                c.credential_names
                    .iter()
                    .map(|name| {
                        let state = if genesis_core::llm_keys::check_key_name(name).is_err() {
                            CredentialState::NeverAKey
                        } else if tenant
                            .and_then(|t| credentials.credential(t, name))
                            .is_some()
                        {
                            CredentialState::Resolves
                        } else {
                            CredentialState::Missing
                        };
                        (name.clone(), state)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let backend = if c.backend.is_empty() {
                "api"
            } else {
                c.backend.as_str()
            };
            CoupleView {
                couple: format!("{}/{}@{backend}", c.provider, c.model),
                credentials,
            }
        })
        .collect();
    let resolved =
        genesis_llm::resolve_preset(&resolved_chain(&chain), tenant, credentials).map(|p| {
            let chain: Vec<String> = p
                .chain()
                .iter()
                .map(|c| format!("{}/{}", c.provider, c.model))
                .collect();
            format!("{} ({})", p.name, chain.join(" → "))
        });
    let preset = if chain.preset_id.is_empty() {
        format!("site {} (no preset)", chain.resolved_site_id)
    } else if chain.preset_name.is_empty() {
        format!("preset {}", chain.preset_id)
    } else {
        format!("preset {} ({})", chain.preset_name, chain.preset_id)
    };
    let tools = TOOL_NAMES
        .iter()
        .copied()
        .chain([TASK_COMPLETE, TASK_FAIL])
        .map(str::to_owned)
        .collect();
    Ok(DryRun {
        task_id: task.id,
        title: task.title,
        status: task.status,
        repository: genesis_telemetry::config_file::redact_url(&task.repository),
        branch: task.branch,
        preset,
        couples,
        resolved,
        has_overlay: !chain.prompt_overlay.trim().is_empty(),
        tools,
        limits: config.limits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_grows_with_turns_and_stays_below_100() {
        assert_eq!(percent(1, 40), 2);
        assert_eq!(percent(20, 40), 50);
        assert_eq!(percent(40, 40), 99);
        assert_eq!(percent(1, 1), 99);
    }

    #[test]
    fn files_changed_reads_the_b_side_of_each_diff() {
        let patch = "diff --git a/README.md b/README.md\nindex 1..2 100644\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/src/new.rs b/src/new.rs\nnew file mode 100644\n";
        assert_eq!(files_changed(patch), vec!["README.md", "src/new.rs"]);
        assert!(files_changed("").is_empty());
    }

    #[test]
    fn terminators_take_exactly_their_one_non_blank_field() {
        assert_eq!(
            terminator_arg(&json!({"summary": "done"}), "summary"),
            Ok("done".into())
        );
        for bad in [
            json!({}),
            json!({"summary": "  "}),
            json!({"summary": 3}),
            json!({"summary": "x", "extra": 1}),
            json!("summary"),
        ] {
            assert!(
                matches!(
                    terminator_arg(&bad, "summary"),
                    Err(ToolError::InvalidArguments { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn exit_codes_follow_the_documented_table() {
        let rpc = |code| {
            RunError::Control(ControlError::Rpc {
                rpc: "GetTask",
                code,
                message: String::new(),
            })
        };
        assert_eq!(
            rpc(tonic::Code::Unauthenticated).exit_code(),
            EXIT_BAD_CONFIG
        );
        assert_eq!(
            rpc(tonic::Code::PermissionDenied).exit_code(),
            EXIT_BAD_CONFIG
        );
        assert_eq!(rpc(tonic::Code::Unavailable).exit_code(), EXIT_UNREACHABLE);
        assert_eq!(rpc(tonic::Code::Internal).exit_code(), EXIT_TASK_FAILED);
        assert_eq!(RunError::Config("x".into()).exit_code(), EXIT_BAD_CONFIG);
        assert_eq!(
            Outcome::Failed { reason: "x".into() }.exit_code(),
            EXIT_TASK_FAILED
        );
        assert_eq!(
            Outcome::Completed {
                summary: String::new(),
                turns: 1,
                patch_bytes: 0,
                files_changed: vec![]
            }
            .exit_code(),
            EXIT_COMPLETED
        );
    }

    #[test]
    fn limits_of_zero_and_an_endless_wall_time_are_refused() {
        assert!(Limits::default().check().is_ok());
        for bad in [
            Limits {
                max_turns: 0,
                ..Limits::default()
            },
            Limits {
                max_output_tokens: 0,
                ..Limits::default()
            },
            Limits {
                timeout: Duration::ZERO,
                ..Limits::default()
            },
            Limits {
                timeout: MAX_TIMEOUT + Duration::from_secs(1),
                ..Limits::default()
            },
        ] {
            assert!(matches!(bad.check(), Err(RunError::Config(_))), "{bad:?}");
        }
    }
}
