//! The sub-agent invoker (spec §3.5): one bounded, multi-turn episode. Seeds
//! the conversation, checks every budget axis before each turn, calls the
//! model through genesis-llm's fallback chain, records every call attempt with
//! the supervisor (which prices it), dispatches each tool call through
//! `InvokeTool`, feeds results back, and ends only on a control terminator
//! (`phase_complete` / `phase_blocked`, handled here), on
//! `agent_workset_complete`, on the nudge limit, on provider exhaustion or on
//! an exhausted budget axis. In its replay mode ([`ReplaySpec`]) the same
//! loop runs a recorded turn again against another preset: no tool call
//! reaches InvokeTool (genesis_core::replay answers each), and every
//! attempt is recorded against the replay instead of the tick.
//!
//! This module must never parse response text for state (the tool call is the
//! commit), never compute or send a dollar amount, and never send a control
//! terminator to the supervisor.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use genesis_llm::{
    ChainCouple, ChatMessage, ChatRequest, FallbackInvoker, ResolvedChain, ToolSpec, resolve_preset,
};
use genesis_proto::v1 as pb;
use serde_json::{Value, json};
use uuid::Uuid;

use genesis_core::budget::Limit;
use genesis_core::journal::{
    ContextBudget, ContextCouple, EpisodeContext, JournalToolCall, LlmTurnStep, ToolCallStep,
    TurnAttempt, TurnRequest, TurnResponse, TurnUsage,
};
use genesis_core::replay::ReplayAction;

use crate::error::PodError;
use crate::model::{PresetChain, PresetCouple, TickBudget};
use crate::resume::{Resume, recorded_response};
use crate::supervisor::{Supervisor, TickIds};

/// The control terminator for a finished episode (handled by the pod).
pub const PHASE_COMPLETE: &str = "phase_complete";
/// The control terminator for a blocked episode (handled by the pod).
pub const PHASE_BLOCKED: &str = "phase_blocked";
/// The real tool that ends the foundational phase; sent to the supervisor and
/// ends the episode.
pub const WORKSET_COMPLETE: &str = "agent_workset_complete";
/// Zero-tool-call turns answered with a nudge before the episode is blocked.
pub const MAX_NUDGES: u32 = 2;
/// The synthetic message appended after a turn with no tool calls.
pub const NUDGE: &str = "You made no tool call. Act only through tool calls: take the next governed action, or end this episode now by calling phase_complete (done) or phase_blocked (cannot proceed, with a reason).";
/// Per-turn output cap when the envelope sets none.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4_096;

/// Where provider credentials come from: genesis-llm's, shared with every
/// other caller of a resolved chain.
pub use genesis_llm::CredentialSource;

/// The tool schemas of the two control terminators, always advertised.
/// Built once per process; each tick's copy shares the schemas.
pub fn terminator_specs() -> Vec<ToolSpec> {
    static TERMINATORS: std::sync::LazyLock<Vec<ToolSpec>> = std::sync::LazyLock::new(|| {
        vec![
            ToolSpec {
                name: PHASE_COMPLETE.into(),
                description: "End this episode: the work of this tick is done.".into(),
                parameters: Arc::new(json!({
                    "type": "object",
                    "properties": {
                        "summary": {"type": "string", "description": "What this tick did, in one or two sentences."},
                        "waitCondition": {"type": "string", "description": "What the agent now waits for."}
                    },
                    "required": ["summary"]
                })),
            },
            ToolSpec {
                name: PHASE_BLOCKED.into(),
                description:
                    "End this episode as blocked: it cannot proceed without an outside change."
                        .into(),
                parameters: Arc::new(json!({
                    "type": "object",
                    "properties": {
                        "reason": {"type": "string", "description": "Why the episode cannot proceed."},
                        "waitCondition": {"type": "string", "description": "What would unblock it."}
                    },
                    "required": ["reason"]
                })),
            },
        ]
    });
    TERMINATORS.clone()
}

/// The bundle's resolved chain as genesis-llm's [`genesis_llm::resolve_preset`]
/// takes it (the prompt overlay stays with the system prompt).
fn resolved_chain(chain: &PresetChain) -> ResolvedChain {
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

/// The chain and budget an episode is claimed with, as its first step
/// records them.
fn context_of(chain: &PresetChain, budget: &TickBudget) -> EpisodeContext {
    EpisodeContext {
        resolved_site_id: chain.resolved_site_id.clone(),
        preset_id: chain.preset_id.clone(),
        preset_name: chain.preset_name.clone(),
        couples: chain
            .couples
            .iter()
            .map(|c| ContextCouple {
                model: c.model.clone(),
                provider: c.provider.clone(),
                backend: c.backend.clone(),
                credential_names: c.credential_names.clone(),
            })
            .collect(),
        budget: ContextBudget {
            max_tokens: budget.max_tokens.limited(),
            max_output_tokens_per_turn: budget.max_output_tokens_per_turn.limited(),
            max_tool_calls: budget.max_tool_calls.limited(),
            max_wall_ms: budget.max_wall_ms.limited(),
            max_dollars: budget.max_dollars.limited(),
            max_turns: budget.max_turns.limited(),
        },
    }
}

/// The recorded chain, for a resumed episode; the claim's prompt overlay
/// is kept (it only ever reaches the system prompt, which the episode
/// keeps from its first step anyway).
fn chain_of(context: &EpisodeContext, prompt_overlay: String) -> PresetChain {
    PresetChain {
        resolved_site_id: context.resolved_site_id.clone(),
        preset_id: context.preset_id.clone(),
        preset_name: context.preset_name.clone(),
        couples: context
            .couples
            .iter()
            .map(|c| PresetCouple {
                model: c.model.clone(),
                provider: c.provider.clone(),
                backend: c.backend.clone(),
                credential_names: c.credential_names.clone(),
            })
            .collect(),
        prompt_overlay,
    }
}

/// The recorded budget, for a resumed episode.
pub(crate) fn budget_of(b: &ContextBudget) -> TickBudget {
    let limit = |v: Option<u64>| v.map_or(Limit::Unlimited, Limit::Limited);
    TickBudget {
        max_tokens: limit(b.max_tokens),
        max_output_tokens_per_turn: limit(b.max_output_tokens_per_turn),
        max_tool_calls: limit(b.max_tool_calls),
        max_wall_ms: limit(b.max_wall_ms),
        max_dollars: b.max_dollars.map_or(Limit::Unlimited, Limit::Limited),
        max_turns: limit(b.max_turns),
    }
}

/// What the episode has used so far, checked against the envelope.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Used {
    /// Input + output tokens.
    pub tokens: i64,
    /// Tool calls dispatched (terminators excluded).
    pub tool_calls: i32,
    /// LLM turns made.
    pub turns: i32,
    /// Wall milliseconds since the episode started.
    pub wall_ms: i64,
    /// Dollars, as the supervisor computed them.
    pub cost_usd: f64,
}

/// The first exhausted axis of `budget` given `used`, by its wire name
/// (`tokens`, `turns`, `tool_calls`, `wall_ms`, `cost_usd`). An absent axis
/// is unlimited; a present axis of 0 is already exhausted. The rule itself is
/// genesis-core's [`genesis_core::budget::check`]; this only puts the tick's
/// envelope (wall time in milliseconds) into the core one.
pub fn exhausted_axis(budget: &TickBudget, used: &Used) -> Option<&'static str> {
    use genesis_core::budget::{BudgetAxis, BudgetEnvelope, Consumption, Limit, check};
    // Wall time is compared in milliseconds on both sides, so a sub-second cap
    // is not rounded away.
    let envelope = BudgetEnvelope {
        max_tokens: budget.max_tokens,
        max_output_tokens_per_turn: Limit::Unlimited,
        max_tool_calls: budget.max_tool_calls,
        max_wall_seconds: budget.max_wall_ms,
        max_dollars: budget.max_dollars,
        max_turns: budget.max_turns,
    };
    let consumption = Consumption {
        tokens: u64::try_from(used.tokens).unwrap_or(0),
        tool_calls: u64::try_from(used.tool_calls).unwrap_or(0),
        wall_seconds: u64::try_from(used.wall_ms).unwrap_or(0),
        dollars: used.cost_usd,
        turns: u64::try_from(used.turns).unwrap_or(0),
    };
    match check(&envelope, &consumption) {
        Ok(()) => None,
        Err(BudgetAxis::Tokens) => Some("tokens"),
        Err(BudgetAxis::Turns) => Some("turns"),
        Err(BudgetAxis::ToolCalls) => Some("tool_calls"),
        Err(BudgetAxis::WallSeconds) => Some("wall_ms"),
        Err(BudgetAxis::Dollars) => Some("cost_usd"),
        Err(BudgetAxis::OutputTokensPerTurn) => Some("output_tokens_per_turn"),
    }
}

/// How an episode ended.
#[derive(Debug, Clone, PartialEq)]
pub enum EpisodeEnd {
    /// `phase_complete` (or `agent_workset_complete`).
    Complete,
    /// `phase_blocked` or the nudge limit: the planner's own verdict.
    Blocked,
    /// A budget axis ran out before a terminator (wire axis name).
    BudgetExhausted(&'static str),
    /// The next turn's worst case would cross the tenant's weekly credit
    /// ceiling: it was not sent.
    CreditExhausted,
    /// A model call failed after the episode had already acted: the tick
    /// completes (its actions are on the turn) without counting as blocked.
    Failed,
    /// Every provider of the chain failed before anything was done: the
    /// tick is deferred and its event retried later, never answered with a
    /// made-up reply and never counted toward the STUCK guard.
    ProviderFailed,
}

/// Everything one episode produced, for the ledger turn.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeReport {
    /// How it ended.
    pub end: EpisodeEnd,
    /// The blocked / failure reason, empty otherwise.
    pub reason: String,
    /// The terminator's summary (or a generated one).
    pub reasoning_summary: String,
    /// What the agent now waits for.
    pub wait_condition: String,
    /// Every dispatched tool call, in order.
    pub actions: Vec<pb::ActionRecord>,
    /// A successful escalation tool call was made.
    pub raised_escalation: bool,
    /// Non-blocked, successful side-effecting actions.
    pub side_effecting_actions: u32,
    /// The snapshot the last recorded attempt belongs to.
    pub snapshot_id: Option<String>,
    /// The last call's attempts when nothing but the completion followed
    /// them: CompleteTick records them (one round trip fewer per tick; the
    /// window in which a crash loses them is the same as before, from the
    /// provider's answer to the next RPC).
    pub pending_attempts: Vec<pb::PendingCallAttempt>,
    /// What was used.
    pub used: Used,
    /// LLM invocations made (one per turn).
    pub llm_calls: u32,
    /// Synthetic nudges appended.
    pub nudges: u32,
    /// A replay's calls, each with how it was answered (empty otherwise).
    pub replayed: Vec<ReplayAction>,
    /// Input and output tokens of the answered turns.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The models that served its turns, in order, each once.
    pub served_models: Vec<String>,
}

/// The inputs of one episode.
#[derive(Debug, Clone)]
pub struct EpisodeSpec {
    /// Groups the call attempts under one snapshot.
    pub invocation_id: String,
    /// Base prompt + mode fragment + preset prompt overlay (blank-line
    /// separated).
    pub system_prompt: String,
    /// SHA-256 of the overlay in `system_prompt`, recorded on the call
    /// snapshot; empty when no overlay was applied.
    pub prompt_overlay_sha256: String,
    /// The first user message (the objective).
    pub objective: String,
    /// The advertised tools: the mode's toolset plus the two terminators,
    /// shared by every turn's request.
    pub tools: Arc<[ToolSpec]>,
    /// The tools the supervisor may be asked to run (the mode's toolset).
    pub authorized: HashSet<String>,
    /// The per-tick envelope.
    pub budget: TickBudget,
    /// The preset chain from the bundle.
    pub preset_chain: PresetChain,
    /// Whether the tenant's weekly credit is enforced: then every turn of a
    /// real provider first reserves its worst case (`ReserveCredit`).
    pub credit_enforced: bool,
    /// The claimed event: every turn and tool call is journaled under it.
    pub event_id: String,
    /// What an earlier session of this event journaled: the episode resumes
    /// there instead of starting over.
    pub resume: Resume,
    /// Set for a replay (a dry run against another preset): no tool runs,
    /// every attempt is recorded under the replay, nothing is journaled.
    pub replay: Option<ReplaySpec>,
}

/// What makes an episode a replay (genesis_core::replay).
#[derive(Debug, Clone)]
pub struct ReplaySpec {
    /// The replay every attempt is recorded against.
    pub replay_id: String,
    /// The original episode's tool calls: a read-only call is answered with
    /// the same call's recorded result.
    pub journal_tools: Vec<ToolCallStep>,
}

/// The invoker: the fallback chain plus where credentials come from.
#[derive(Clone)]
pub struct Invoker {
    llm: FallbackInvoker,
    credentials: Arc<dyn CredentialSource>,
}

impl std::fmt::Debug for Invoker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invoker").finish_non_exhaustive()
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn str_arg(args: &Value, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::to_string)
        .filter(|s| !s.trim().is_empty())
}

impl Invoker {
    /// An invoker over `llm`, resolving credentials from `credentials`.
    pub fn new(llm: FallbackInvoker, credentials: Arc<dyn CredentialSource>) -> Self {
        Invoker { llm, credentials }
    }

    /// Run one episode. `Err` only for supervisor failures (a lost lease, an
    /// unreachable supervisor): the tick is then not completed. Provider
    /// failures, blocks and budget exhaustion are reported in the `Ok` value.
    pub async fn run_episode(
        &self,
        supervisor: &Supervisor,
        ids: &TickIds,
        mut spec: EpisodeSpec,
    ) -> Result<EpisodeReport, PodError> {
        let started = Instant::now();
        let mut report = EpisodeReport {
            end: EpisodeEnd::Failed,
            reason: String::new(),
            reasoning_summary: String::new(),
            wait_condition: String::new(),
            actions: Vec::new(),
            raised_escalation: false,
            side_effecting_actions: 0,
            snapshot_id: None,
            pending_attempts: Vec::new(),
            used: Used::default(),
            llm_calls: 0,
            nudges: 0,
            replayed: Vec::new(),
            input_tokens: 0,
            output_tokens: 0,
            served_models: Vec::new(),
        };
        let tenant = Uuid::parse_str(&ids.tenant_id).ok();
        // A resumed episode runs under the chain and budget it was claimed
        // with, whatever the catalogue says now (its first step recorded
        // them when the chain was paid) — while that chain can still be
        // called: one whose credentials were taken away since would defer
        // the event for ever, so the claim's own chain serves instead.
        let recorded = spec.resume.context().and_then(|context| {
            let chain = chain_of(context, spec.preset_chain.prompt_overlay.clone());
            match resolve_preset(&resolved_chain(&chain), tenant, self.credentials.as_ref()) {
                Ok(preset) => Some((chain, budget_of(&context.budget), preset)),
                Err(reason) => {
                    tracing::warn!(
                        %reason,
                        "the chain this episode was claimed with can no longer be called; resuming under the claim's"
                    );
                    None
                }
            }
        });
        let resolved = match recorded {
            Some((chain, budget, preset)) => {
                spec.preset_chain = chain;
                spec.budget = budget;
                Ok(preset)
            }
            None => resolve_preset(
                &resolved_chain(&spec.preset_chain),
                tenant,
                self.credentials.as_ref(),
            ),
        };
        let preset = match resolved {
            Ok(p) => p,
            Err(reason) => {
                // No couple can be called (a credential is missing): an
                // outage of configuration, deferred like a provider's.
                report.end = EpisodeEnd::ProviderFailed;
                report.reasoning_summary = format!("No LLM couple is usable: {reason}.");
                report.reason = reason;
                return Ok(report);
            }
        };
        let max_output_tokens = spec
            .budget
            .max_output_tokens_per_turn
            .limited()
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v > 0)
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
        // A resumed episode continues the conversation its first session
        // began, under the same invocation (so its tool calls keep their
        // keys), whatever the catalogue says now.
        let mut resume = std::mem::take(&mut spec.resume);
        if let Some(id) = resume.invocation_id() {
            spec.invocation_id = id.to_owned();
        }
        if let Some(system) = resume.system() {
            spec.system_prompt = system.to_owned();
        }
        let mut messages = resume
            .opening()
            .map(<[ChatMessage]>::to_vec)
            .unwrap_or_else(|| vec![ChatMessage::user(spec.objective.clone())]);
        // A paid turn is journaled before the episode moves on, even when
        // only the completion follows it: a crash must never make it paid
        // twice. A free one (the scripted provider) may ride with the
        // completion: asking it again costs nothing.
        let paid = preset.paid_models();
        // What a resumed episode must keep: recorded with the first turn of
        // a paid chain (a free one asks again at no cost).
        let context = paid
            .as_ref()
            .map(|_| context_of(&spec.preset_chain, &spec.budget));
        let tool_names: Vec<String> = spec.tools.iter().map(|t| t.name.clone()).collect();
        // messages[journaled..] are not yet in any turn's step.
        let mut journaled = 0;
        loop {
            report.used.wall_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
            if let Some(axis) = exhausted_axis(&spec.budget, &report.used) {
                report.end = EpisodeEnd::BudgetExhausted(axis);
                report.reason = format!("per-tick budget axis {axis} exhausted");
                if report.reasoning_summary.is_empty() {
                    report.reasoning_summary =
                        format!("Stopped before finishing: the {axis} budget ran out.");
                }
                return Ok(report);
            }
            let turn = u32::try_from(report.used.turns.saturating_add(1)).unwrap_or(u32::MAX);
            let recorded = resume
                .take_turn(turn)
                .and_then(|step| recorded_response(&step).map(|r| (step, r)));
            let response = if let Some((step, response)) = recorded {
                // Answered before the crash, and paid for then: replayed.
                report.used.turns += 1;
                if let Some(cost) = step.snapshot_cost_usd {
                    report.used.cost_usd = cost;
                }
                if let Some(id) = step.snapshot_id {
                    report.snapshot_id = Some(id);
                }
                response
            } else {
                let request = ChatRequest {
                    model: preset.model.clone(),
                    system: spec.system_prompt.clone(),
                    messages: messages.as_slice().into(),
                    tools: Arc::clone(&spec.tools),
                    max_output_tokens,
                    temperature: None,
                };
                if spec.credit_enforced
                    && let Some(models) = paid.clone()
                {
                    let prompt_tokens = to_i64(genesis_llm::prompt_token_bound(&request));
                    let answer = match &spec.replay {
                        Some(r) => {
                            supervisor
                                .reserve_replay_credit(pb::ReserveReplayCreditRequest {
                                    replay_id: r.replay_id.clone(),
                                    tenant_id: ids.tenant_id.clone(),
                                    session_id: ids.session_id.clone(),
                                    models,
                                    prompt_tokens,
                                    max_output_tokens: i64::from(max_output_tokens),
                                })
                                .await?
                        }
                        None => {
                            supervisor
                                .reserve_credit(pb::ReserveCreditRequest {
                                    session_id: ids.session_id.clone(),
                                    instance_id: ids.instance_id.clone(),
                                    tenant_id: ids.tenant_id.clone(),
                                    models,
                                    prompt_tokens,
                                    max_output_tokens: i64::from(max_output_tokens),
                                })
                                .await?
                        }
                    };
                    if !answer.granted {
                        report.end = EpisodeEnd::CreditExhausted;
                        report.reason = format!(
                            "the next turn could cost up to the weekly credit left (spent ${:.4}, held ${:.4}, limit ${:.2})",
                            answer.spent_usd, answer.held_usd, answer.limit_usd
                        );
                        report.reasoning_summary =
                            "Stopped before the next model call: the weekly agent-planning credit would be exceeded.".into();
                        report.wait_condition = "the weekly credit window regenerates".into();
                        return Ok(report);
                    }
                }
                report.used.turns += 1;
                report.llm_calls += 1;
                // A rate-limited chain may wait out a Retry-After, but never
                // past the episode's wall budget.
                let deadline = spec
                    .budget
                    .max_wall_ms
                    .limited()
                    .map(|ms| started + std::time::Duration::from_millis(ms));
                let result = self.llm.invoke_until(&preset, request, deadline).await;
                let (attempts, ends_here) = match &result {
                    Ok(inv) => (inv.attempts.as_slice(), ends_the_episode(&inv.response)),
                    Err(e) => (e.attempts.as_slice(), true),
                };
                let step = turn_step(TurnDraft {
                    turn,
                    invocation_id: &spec.invocation_id,
                    model: &preset.model,
                    system: (turn == 1).then_some(spec.system_prompt.as_str()),
                    messages: &messages[journaled.min(messages.len())..],
                    tools: &tool_names,
                    max_output_tokens,
                    context: context.as_ref().filter(|_| turn == 1),
                    result: &result,
                });
                let mut attempts: Vec<pb::CallAttempt> =
                    attempts.iter().map(wire_attempt).collect();
                let last = attempts.len().saturating_sub(1);
                if let Some(r) = &spec.replay {
                    // A replay journals nothing and rides with no
                    // completion: every attempt is recorded against it now.
                    for attempt in attempts {
                        let answer = supervisor
                            .record_replay_attempt(pb::RecordReplayAttemptRequest {
                                replay_id: r.replay_id.clone(),
                                tenant_id: ids.tenant_id.clone(),
                                session_id: ids.session_id.clone(),
                                invocation_id: spec.invocation_id.clone(),
                                attempt: Some(attempt),
                                instance_id: ids.instance_id.clone(),
                            })
                            .await?;
                        report.used.cost_usd = answer.snapshot_cost_usd;
                        report.snapshot_id = Some(answer.snapshot_id);
                    }
                } else if ends_here && paid.is_none() {
                    // Nothing reads the cost before the completion records
                    // it, with the turn's step.
                    report.pending_attempts = attempts
                        .drain(..)
                        .enumerate()
                        .map(|(i, attempt)| pb::PendingCallAttempt {
                            invocation_id: spec.invocation_id.clone(),
                            attempt: Some(attempt),
                            prompt_overlay_sha256: spec.prompt_overlay_sha256.clone(),
                            journal_step_json: if i == last {
                                step.clone()
                            } else {
                                String::new()
                            },
                        })
                        .collect();
                } else {
                    for (i, attempt) in attempts.into_iter().enumerate() {
                        let (journal_step_json, event_id) = if i == last {
                            (step.clone(), spec.event_id.clone())
                        } else {
                            (String::new(), String::new())
                        };
                        let answer = supervisor
                            .record_call_attempt(pb::RecordCallAttemptRequest {
                                session_id: ids.session_id.clone(),
                                instance_id: ids.instance_id.clone(),
                                tenant_id: ids.tenant_id.clone(),
                                invocation_id: spec.invocation_id.clone(),
                                prompt_overlay_sha256: spec.prompt_overlay_sha256.clone(),
                                attempt: Some(attempt),
                                journal_step_json,
                                event_id,
                            })
                            .await?;
                        report.used.cost_usd = answer.snapshot_cost_usd;
                        report.snapshot_id = Some(answer.snapshot_id);
                    }
                }
                match result {
                    Ok(inv) => inv.response,
                    Err(failure) => {
                        // Deferring re-runs the episode later; that is safe
                        // only while it has changed nothing. Once a tool
                        // acted, the turn is written with its actions
                        // instead.
                        report.end = if report.actions.is_empty() {
                            EpisodeEnd::ProviderFailed
                        } else {
                            EpisodeEnd::Failed
                        };
                        report.reason = format!("LLM call failed: {}", failure.error);
                        report.reasoning_summary =
                            format!("Could not reach a model this tick: {}.", failure.error);
                        report.wait_condition = "a provider becomes available".into();
                        return Ok(report);
                    }
                }
            };
            // The answer below is in this turn's step.
            journaled = messages.len() + 1;
            report.input_tokens = report
                .input_tokens
                .saturating_add(response.usage.input_tokens);
            report.output_tokens = report
                .output_tokens
                .saturating_add(response.usage.output_tokens);
            if !response.served_model.is_empty()
                && !report.served_models.contains(&response.served_model)
            {
                report.served_models.push(response.served_model.clone());
            }
            report.used.tokens = report
                .used
                .tokens
                .saturating_add(to_i64(response.usage.input_tokens))
                .saturating_add(to_i64(response.usage.output_tokens));
            messages.push(ChatMessage::assistant(
                response.text.clone(),
                response.tool_calls.clone(),
            ));
            if response.tool_calls.is_empty() {
                if report.nudges >= MAX_NUDGES {
                    report.end = EpisodeEnd::Blocked;
                    report.reason = format!("no tool call after {MAX_NUDGES} nudges to terminate");
                    report.reasoning_summary =
                        "The model stopped making tool calls; episode ended as blocked.".into();
                    return Ok(report);
                }
                report.nudges += 1;
                messages.push(ChatMessage::user(NUDGE));
                continue;
            }
            let mut end_after_turn = false;
            for call in &response.tool_calls {
                match call.name.as_str() {
                    PHASE_COMPLETE => {
                        report.end = EpisodeEnd::Complete;
                        report.reasoning_summary = str_arg(&call.arguments, &["summary"])
                            .unwrap_or_else(|| "Episode complete.".into());
                        report.wait_condition =
                            str_arg(&call.arguments, &["waitCondition", "wait_condition"])
                                .unwrap_or_else(|| "the next event".into());
                        return Ok(report);
                    }
                    PHASE_BLOCKED => {
                        report.end = EpisodeEnd::Blocked;
                        report.reason = str_arg(&call.arguments, &["reason"])
                            .unwrap_or_else(|| "the planner reported it is blocked".into());
                        report.reasoning_summary = str_arg(&call.arguments, &["summary"])
                            .unwrap_or_else(|| format!("Blocked: {}", report.reason));
                        report.wait_condition =
                            str_arg(&call.arguments, &["waitCondition", "wait_condition"])
                                .unwrap_or_else(|| "an operator or external change".into());
                        return Ok(report);
                    }
                    _ => {}
                }
                if spec
                    .budget
                    .max_tool_calls
                    .is_exhausted_by(u64::try_from(report.used.tool_calls).unwrap_or(0))
                {
                    report.end = EpisodeEnd::BudgetExhausted("tool_calls");
                    report.reason = "per-tick budget axis tool_calls exhausted".into();
                    report.reasoning_summary =
                        "Stopped before finishing: the tool_calls budget ran out.".into();
                    return Ok(report);
                }
                report.used.tool_calls += 1;
                let call_id = format!("{}:{}:{}", spec.invocation_id, report.used.turns, call.id);
                let arguments_json = call.arguments.to_string();
                let (result_json, blocked, side_effecting, ok) = if let Some(r) = &spec.replay {
                    // A replay runs nothing: a read-only call is answered
                    // from the original episode's journal, anything else
                    // "not executed (replay)". Counted as no action.
                    let (result, answered) =
                        genesis_core::replay::answer(&call.name, &call.arguments, &r.journal_tools);
                    report.replayed.push(ReplayAction {
                        tool_name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        result: result.clone(),
                        answered,
                    });
                    (result.to_string(), false, false, false)
                } else if let Some(ran) = resume.tool(&call_id) {
                    // It ran before the crash (its effect and this record
                    // committed together), under the mode the episode
                    // began in: answered, not run again.
                    (
                        ran.result.to_string(),
                        ran.blocked,
                        ran.side_effecting,
                        !ran.blocked,
                    )
                } else if !spec.authorized.contains(&call.name) {
                    (
                        json!({"error": {"code": genesis_core::ErrorCode::ToolNotAuthorized.as_str(), "message": format!("{} is not in this mode's toolset", call.name)}}).to_string(),
                        false,
                        false,
                        false,
                    )
                } else {
                    let answer = supervisor
                        .invoke_tool(pb::InvokeToolRequest {
                            session_id: ids.session_id.clone(),
                            instance_id: ids.instance_id.clone(),
                            tenant_id: ids.tenant_id.clone(),
                            call_id,
                            tool_name: call.name.clone(),
                            arguments_json: arguments_json.clone(),
                            event_id: spec.event_id.clone(),
                        })
                        .await?;
                    match &answer.error {
                        Some(err) => (
                            json!({"error": {"code": err.code, "message": err.message}})
                                .to_string(),
                            answer.blocked,
                            answer.side_effecting,
                            false,
                        ),
                        None => (
                            answer.result_json.clone(),
                            answer.blocked,
                            answer.side_effecting,
                            !answer.blocked,
                        ),
                    }
                };
                if ok && side_effecting {
                    report.side_effecting_actions += 1;
                }
                if ok && genesis_core::modes::raises_escalation(&call.name) {
                    report.raised_escalation = true;
                }
                if ok && call.name == WORKSET_COMPLETE {
                    end_after_turn = true;
                }
                report.actions.push(pb::ActionRecord {
                    tool_name: call.name.clone(),
                    arguments_json,
                    result_json: result_json.clone(),
                    side_effecting: side_effecting && ok,
                    blocked,
                });
                messages.push(ChatMessage::tool(call.id.clone(), result_json));
            }
            if end_after_turn {
                report.end = EpisodeEnd::Complete;
                report.reasoning_summary =
                    "Completed the starting workset; the foundational phase ends.".into();
                report.wait_condition = "the next event".into();
                return Ok(report);
            }
        }
    }
}

/// A genesis-llm attempt as the supervisor records it.
fn wire_attempt(attempt: &genesis_llm::CallAttempt) -> pb::CallAttempt {
    pb::CallAttempt {
        requested_model: attempt.requested_model.clone(),
        served_model: attempt.served_model.clone().unwrap_or_default(),
        provider: attempt.provider.as_str().to_string(),
        credential_name: attempt.credential_name.clone(),
        outcome: attempt.stored_outcome().to_string(),
        input_tokens: to_i64(attempt.usage.input_tokens),
        output_tokens: to_i64(attempt.usage.output_tokens),
        cache_read_tokens: to_i64(attempt.usage.cache_read_tokens),
        cache_write_tokens: to_i64(attempt.usage.cache_write_tokens),
        latency_ms: to_i64(attempt.latency_ms),
        error_message: attempt.error.clone().unwrap_or_default(),
    }
}

/// What a turn's journal step is made of.
struct TurnDraft<'a> {
    turn: u32,
    invocation_id: &'a str,
    model: &'a str,
    /// On the episode's first turn only.
    system: Option<&'a str>,
    /// The messages added since the previous turn's answer.
    messages: &'a [ChatMessage],
    tools: &'a [String],
    max_output_tokens: u32,
    /// On a paid chain's first turn only.
    context: Option<&'a EpisodeContext>,
    result: &'a Result<genesis_llm::Invocation, genesis_llm::InvocationError>,
}

fn usage_of(u: &genesis_llm::Usage) -> TurnUsage {
    TurnUsage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens,
        cache_write_tokens: u.cache_write_tokens,
    }
}

/// The turn's journal step as JSON (genesis-core's [`LlmTurnStep`]): the
/// request as sent, the answer or the failure, every attempt. The
/// supervisor clears it of credentials before it is stored.
fn turn_step(d: TurnDraft<'_>) -> String {
    let (response, error, attempts) = match d.result {
        Ok(inv) => (
            Some(TurnResponse {
                text: inv.response.text.clone(),
                tool_calls: inv
                    .response
                    .tool_calls
                    .iter()
                    .map(|c| JournalToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
                served_model: inv.response.served_model.clone(),
                stop_reason: serde_json::to_value(&inv.response.stop_reason).unwrap_or(Value::Null),
                usage: usage_of(&inv.response.usage),
            }),
            None,
            inv.attempts.as_slice(),
        ),
        Err(failure) => (
            None,
            Some(failure.error.to_string()),
            failure.attempts.as_slice(),
        ),
    };
    let step = LlmTurnStep {
        turn: d.turn,
        invocation_id: d.invocation_id.to_owned(),
        request: TurnRequest {
            model: d.model.to_owned(),
            system: d.system.map(str::to_owned),
            system_sha256: None,
            messages: d
                .messages
                .iter()
                .map(|m| serde_json::to_value(m).unwrap_or(Value::Null))
                .collect(),
            tools: d.tools.to_vec(),
            max_output_tokens: d.max_output_tokens,
            context: d.context.cloned(),
        },
        response,
        error,
        attempts: attempts
            .iter()
            .map(|a| TurnAttempt {
                provider: a.provider.as_str().to_owned(),
                credential_name: a.credential_name.clone(),
                requested_model: a.requested_model.clone(),
                served_model: a.served_model.clone().unwrap_or_default(),
                outcome: a.stored_outcome().to_owned(),
                latency_ms: a.latency_ms,
                usage: usage_of(&a.usage),
                error: a.error.clone(),
            })
            .collect(),
        snapshot_cost_usd: None,
        snapshot_id: None,
    };
    serde_json::to_string(&step).unwrap_or_default()
}

/// Whether the episode ends on this answer with no further call to the
/// supervisor: its first tool call is a terminator, which the loop below
/// acts on before any other call.
fn ends_the_episode(response: &genesis_llm::ChatResponse) -> bool {
    response
        .tool_calls
        .first()
        .is_some_and(|c| c.name == PHASE_COMPLETE || c.name == PHASE_BLOCKED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PresetCouple;

    #[test]
    fn absent_axes_are_unlimited_and_zero_caps_are_exhausted() {
        let unlimited = TickBudget::from(pb::BudgetEnvelope::default());
        let used = Used {
            tokens: 1_000_000,
            tool_calls: 99,
            turns: 99,
            wall_ms: 9_999_999,
            cost_usd: 99.0,
        };
        assert_eq!(exhausted_axis(&unlimited, &used), None);
        let zero_turns = TickBudget::from(pb::BudgetEnvelope {
            max_turns: Some(0),
            ..Default::default()
        });
        assert_eq!(exhausted_axis(&zero_turns, &Used::default()), Some("turns"));
        let dollars = TickBudget::from(pb::BudgetEnvelope {
            max_cost_usd: Some(0.5),
            ..Default::default()
        });
        assert_eq!(
            exhausted_axis(
                &dollars,
                &Used {
                    cost_usd: 0.5,
                    ..Default::default()
                }
            ),
            Some("cost_usd")
        );
        assert_eq!(
            exhausted_axis(
                &dollars,
                &Used {
                    cost_usd: 0.49,
                    ..Default::default()
                }
            ),
            None
        );
    }

    #[test]
    fn the_bundle_chain_reaches_the_shared_resolver_unchanged() {
        let chain = PresetChain {
            resolved_site_id: "Agent:Default".into(),
            preset_id: "p1".into(),
            preset_name: "P1".into(),
            couples: vec![PresetCouple {
                model: "claude-opus-4-8".into(),
                provider: "anthropic".into(),
                backend: String::new(),
                credential_names: vec!["ANTHROPIC_API_KEY".into(), "ANTHROPIC_KEY_2".into()],
            }],
            prompt_overlay: "overlay".into(),
        };
        let resolved = resolved_chain(&chain);
        assert_eq!(resolved.resolved_site_id, "Agent:Default");
        assert_eq!(resolved.preset_id, "p1");
        assert_eq!(resolved.preset_name, "P1");
        assert_eq!(
            resolved.couples,
            vec![ChainCouple {
                model: "claude-opus-4-8".into(),
                provider: "anthropic".into(),
                backend: String::new(),
                credential_names: vec!["ANTHROPIC_API_KEY".into(), "ANTHROPIC_KEY_2".into()],
            }]
        );
    }
}
