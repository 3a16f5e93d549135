//! The scripted provider: a deterministic, offline [`ChatClient`] that picks
//! tool calls by rules keyed on the triggering event and the turn number, so
//! the demo, the tests and the benchmarks run the whole system without a
//! network.
//!
//! Conventions it reads from the request (the planning loop writes them):
//! - the event kind: a line `EVENT: <AgentEventKind>` in the first user message;
//! - the operator's text: a line `OPERATOR_MESSAGE: <text>` (or
//!   `RESOLUTION: <text>` for an answered escalation), else the first `> `
//!   quoted line, else the first `"double-quoted"` span;
//! - the turn: one more than the number of assistant messages so far;
//! - a governance block: a tool message whose JSON carries `blockedReason`.
//!
//! This module must never do I/O or read a clock for decisions: the same
//! request always yields the same response.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::LlmError;
use crate::types::{
    ChatClient, ChatMessage, ChatRequest, ChatResponse, StopReason, ToolCall, Usage,
};

/// The model name every scripted response reports.
pub const SCRIPTED_MODEL: &str = "scripted-1";
/// The control-plane terminator the scripted episodes end with.
pub const PHASE_COMPLETE: &str = "phase_complete";

/// One tool call a rule emits. String values in `arguments` may contain the
/// placeholders `{{operator_text}}`, `{{event}}` and `{{turn}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedToolCall {
    /// Tool name.
    pub name: String,
    /// Argument object (templated).
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    json!({})
}

/// A rule: when the event kind and substring match, turn *n* of the episode
/// emits `turns[n-1]`; past the last listed turn the episode ends with
/// `phase_complete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptRule {
    /// The `AgentEventKind` this rule answers; `None` matches any event.
    #[serde(default)]
    pub event: Option<String>,
    /// Case-insensitive substring of the operator text (or, when the event
    /// carries none, of the first user message); `None` always matches.
    #[serde(default)]
    pub contains: Option<String>,
    /// Case-insensitive substring of the first user message (the objective)
    /// whatever the operator text, e.g. its `MODE:` line; `None` always
    /// matches. Lets one script tell agent types apart.
    #[serde(default)]
    pub objective_contains: Option<String>,
    /// Tool calls per turn, turn 1 first.
    pub turns: Vec<Vec<ScriptedToolCall>>,
    /// Optional reasoning text attached to every turn of this rule.
    #[serde(default)]
    pub text: Option<String>,
}

/// An ordered rule list; the first matching rule wins. Loaded from JSON:
/// `{"rules": [{"event": "OperatorMessage", "contains": "deploy",
/// "turns": [[{"name": "soa_send_message", "arguments": {"body": "…"}}]]}]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// Rules in priority order.
    pub rules: Vec<ScriptRule>,
}

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The text is not a script document.
    #[error("script is not valid JSON: {0}")]
    Parse(#[from] serde_json::Error),
    /// A rule is unusable.
    #[error("script rule {index}: {detail}")]
    InvalidRule {
        /// Zero-based rule index.
        index: usize,
        /// What is wrong with it.
        detail: String,
    },
}

impl Script {
    /// Parse and validate a JSON script.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let script: Script = serde_json::from_str(text)?;
        script.validate()?;
        Ok(script)
    }

    /// Check every rule emits named tools with object arguments.
    pub fn validate(&self) -> Result<(), ScriptError> {
        for (index, rule) in self.rules.iter().enumerate() {
            for call in rule.turns.iter().flatten() {
                if call.name.trim().is_empty() {
                    return Err(ScriptError::InvalidRule {
                        index,
                        detail: "a tool call has an empty name".into(),
                    });
                }
                if !call.arguments.is_object() {
                    return Err(ScriptError::InvalidRule {
                        index,
                        detail: format!("{} arguments must be a JSON object", call.name),
                    });
                }
            }
        }
        Ok(())
    }

    /// The built-in behaviour (spec §3.4 step 5): greet on
    /// `AgentInitialized`, reply to `OperatorMessage` (or propose a decision
    /// when the operator says "escalate" / "decide"), acknowledge
    /// `OperatorAnsweredEscalation`, and only `phase_complete` otherwise. A
    /// mission (objective line `MODE: Mission`) told to "ask" something
    /// asks the operator with `mission_ask_user` (spec §2.4 Mission HITL)
    /// and resumes from the answer's `REFINEMENT GUIDANCE:` line without
    /// messaging. The Prompt Engineer (objective line `MODE: Redact`)
    /// answers a signal with `redactor_propose_overlay` and otherwise only
    /// completes: it never greets or chats.
    pub fn default_script() -> Self {
        let call = |name: &str, arguments: Value| ScriptedToolCall {
            name: name.to_string(),
            arguments,
        };
        let complete = |summary: &str| vec![call(PHASE_COMPLETE, json!({"summary": summary}))];
        let propose = |word: &str| ScriptRule {
            event: Some("OperatorMessage".into()),
            contains: Some(word.into()),
            objective_contains: None,
            turns: vec![
                vec![call(
                    "soa_propose_decision",
                    json!({
                        "title": "Operator decision requested: {{operator_text}}",
                        "body": "The operator asked for a decision: \"{{operator_text}}\".",
                        "options": ["Approve", "Reject", "Defer"],
                    }),
                )],
                complete("Raised a decision for the operator."),
            ],
            text: Some("The operator asked for a human decision; escalating.".into()),
        };
        let mission = "MODE: Mission";
        let redact = "MODE: Redact";
        Script {
            rules: vec![
                ScriptRule {
                    event: Some("ExternalSignalReceived".into()),
                    contains: None,
                    objective_contains: Some(redact.into()),
                    turns: vec![
                        vec![call(
                            "redactor_propose_overlay",
                            json!({"rationale": "Masked every secret and personal datum the detectors found in the call-site's overlay."}),
                        )],
                        complete("Routed the redaction to the operator for review."),
                    ],
                    text: Some("Review the call-site's overlay and propose the redaction.".into()),
                },
                ScriptRule {
                    event: None,
                    contains: None,
                    objective_contains: Some(redact.into()),
                    turns: vec![complete("Nothing for the Prompt Engineer to act on.")],
                    text: None,
                },
                ScriptRule {
                    event: Some("OperatorMessage".into()),
                    contains: Some("ask".into()),
                    objective_contains: Some(mission.into()),
                    turns: vec![
                        vec![call(
                            "mission_ask_user",
                            json!({
                                "question": "{{operator_text}}",
                                "context": "Raised by the mission while planning.",
                                "options": ["Yes", "No"],
                            }),
                        )],
                        complete(
                            "Asked the operator; continuing with what does not depend on the answer.",
                        ),
                    ],
                    text: Some("A fork needs the operator; asking.".into()),
                },
                ScriptRule {
                    event: Some("OperatorAnsweredEscalation".into()),
                    contains: None,
                    // Only a mission's objective restates the answer as
                    // refinement guidance (the pod's planning loop).
                    objective_contains: Some("REFINEMENT GUIDANCE:".into()),
                    turns: vec![complete(
                        "Refined the mission plan with the operator's answer ({{operator_text}}).",
                    )],
                    text: Some("Resume the mission from the refinement guidance.".into()),
                },
                ScriptRule {
                    event: Some("AgentInitialized".into()),
                    contains: None,
                    objective_contains: Some(mission.into()),
                    turns: vec![complete("Mission surveyed; idling until an event.")],
                    text: None,
                },
                ScriptRule {
                    event: Some("AgentInitialized".into()),
                    contains: None,
                    objective_contains: None,
                    turns: vec![
                        vec![call(
                            "soa_send_message",
                            json!({
                                "body": "Hello, I am your Strategic Orchestration Agent. I have surveyed the current workload and open items and I am standing by; message me any time.",
                            }),
                        )],
                        complete("Greeted the operator; idling until the next event."),
                    ],
                    text: Some("First tick: survey and greet.".into()),
                },
                propose("escalate"),
                propose("decide"),
                ScriptRule {
                    event: Some("OperatorMessage".into()),
                    contains: None,
                    objective_contains: None,
                    turns: vec![
                        vec![call(
                            "soa_send_message",
                            json!({"body": "You wrote: \"{{operator_text}}\". Understood; I will take that into account."}),
                        )],
                        complete("Replied to the operator."),
                    ],
                    text: Some("Read the operator message and reply.".into()),
                },
                ScriptRule {
                    event: Some("OperatorAnsweredEscalation".into()),
                    contains: None,
                    objective_contains: None,
                    turns: vec![
                        vec![call(
                            "soa_send_message",
                            json!({"body": "Thank you for resolving the decision ({{operator_text}}). I am resuming with your answer."}),
                        )],
                        complete("Resumed with the operator's resolution."),
                    ],
                    text: Some("Resume incorporating the operator's answer.".into()),
                },
                ScriptRule {
                    event: None,
                    contains: None,
                    objective_contains: None,
                    turns: vec![complete("Nothing to act on this tick.")],
                    text: None,
                },
            ],
        }
    }
}

/// What the scripted provider read out of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptContext {
    /// The event kind from the `EVENT:` line, if any.
    pub event: Option<String>,
    /// The operator's (or resolution) text, if any.
    pub operator_text: Option<String>,
    /// 1-based turn within the episode.
    pub turn: usize,
    /// The `blockedReason` of the latest tool results, if one was blocked.
    pub blocked_reason: Option<String>,
    /// The first user message and the operator's text, lowercased once: a
    /// script's rules are tried in turn against the same prompt, and
    /// lowercasing the whole prompt per rule was the scripted provider's
    /// largest cost under load.
    first_user_lower: String,
    operator_lower: Option<String>,
}

impl ScriptContext {
    /// Read the conventions documented at the top of this module.
    pub fn from_request(request: &ChatRequest) -> Self {
        let first_user = request
            .messages
            .iter()
            .find_map(|m| match m {
                ChatMessage::User { content } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let line_value = |prefix: &str| {
            first_user
                .lines()
                .find_map(|l| l.trim().strip_prefix(prefix).map(|v| v.trim().to_string()))
                .filter(|v| !v.is_empty())
        };
        let event = line_value("EVENT:");
        let operator_text = line_value("OPERATOR_MESSAGE:")
            .or_else(|| line_value("RESOLUTION:"))
            .or_else(|| line_value("> "))
            .or_else(|| {
                let start = first_user.find('"')?;
                let rest = &first_user[start + 1..];
                let end = rest.find('"')?;
                Some(rest[..end].to_string()).filter(|s| !s.is_empty())
            });
        let turn = 1 + request
            .messages
            .iter()
            .filter(|m| matches!(m, ChatMessage::Assistant { .. }))
            .count();
        let blocked_reason = request
            .messages
            .iter()
            .rev()
            .take_while(|m| matches!(m, ChatMessage::Tool { .. }))
            .find_map(|m| match m {
                ChatMessage::Tool { content, .. } => serde_json::from_str::<Value>(content)
                    .ok()
                    .and_then(|v| v.get("blockedReason").cloned())
                    .map(|r| match r {
                        Value::String(s) => s,
                        other => other.to_string(),
                    }),
                _ => None,
            });
        let first_user_lower = first_user.to_lowercase();
        let operator_lower = operator_text.as_deref().map(str::to_lowercase);
        ScriptContext {
            event,
            operator_text,
            turn,
            blocked_reason,
            first_user_lower,
            operator_lower,
        }
    }

    fn matches(&self, rule: &ScriptRule) -> bool {
        if let Some(event) = &rule.event
            && self.event.as_deref() != Some(event.as_str())
        {
            return false;
        }
        if let Some(needle) = &rule.objective_contains
            && !self.first_user_lower.contains(&needle.to_lowercase())
        {
            return false;
        }
        match &rule.contains {
            None => true,
            Some(needle) => {
                let hay = self
                    .operator_lower
                    .as_deref()
                    .unwrap_or(&self.first_user_lower);
                hay.contains(&needle.to_lowercase())
            }
        }
    }

    fn render(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(
                s.replace(
                    "{{operator_text}}",
                    self.operator_text.as_deref().unwrap_or("(no text)"),
                )
                .replace("{{event}}", self.event.as_deref().unwrap_or("(none)"))
                .replace("{{turn}}", &self.turn.to_string()),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.render(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.render(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// A deterministic offline provider. Thread-safe; counts its calls so tests
/// can assert that a short-circuited tick made none.
#[derive(Debug)]
pub struct ScriptedProvider {
    script: Script,
    failure: Option<LlmError>,
    latency: Duration,
    calls: AtomicU64,
}

impl Default for ScriptedProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedProvider {
    /// The provider with [`Script::default_script`], no failures, zero think
    /// time.
    pub fn new() -> Self {
        Self::with_script(Script::default_script())
    }

    /// A provider following `script`.
    pub fn with_script(script: Script) -> Self {
        ScriptedProvider {
            script,
            failure: None,
            latency: Duration::ZERO,
            calls: AtomicU64::new(0),
        }
    }

    /// When set, every call fails with `Server { status: 503 }` (a failover
    /// error), for exercising the fallback chain and blocked ticks.
    pub fn fail_always(mut self, fail: bool) -> Self {
        self.failure = fail.then_some(LlmError::Server { status: 503 });
        self
    }

    /// When set, every call fails with `error` (e.g. a rate limit carrying a
    /// Retry-After), so a caller's handling of that answer can be exercised
    /// offline.
    pub fn fail_with(mut self, error: LlmError) -> Self {
        self.failure = Some(error);
        self
    }

    /// Fixed think time added to every call (benchmarks use it to model a
    /// real provider's latency).
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// How many calls this provider has answered (failed ones included).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Decide the response for a request without counting or sleeping.
    pub fn respond(&self, request: &ChatRequest) -> ChatResponse {
        let ctx = ScriptContext::from_request(request);
        let (text, calls) = if let Some(reason) = &ctx.blocked_reason {
            (
                Some(format!(
                    "A tool call was blocked ({reason}); reconsidering."
                )),
                vec![ScriptedToolCall {
                    name: PHASE_COMPLETE.into(),
                    arguments: json!({
                        "summary": "Reconsidered after a blocked action.",
                        "note": format!("blocked: {reason}"),
                    }),
                }],
            )
        } else {
            match self.script.rules.iter().find(|r| ctx.matches(r)) {
                Some(rule) => {
                    let calls = rule.turns.get(ctx.turn - 1).cloned().unwrap_or_else(|| {
                        vec![ScriptedToolCall {
                            name: PHASE_COMPLETE.into(),
                            arguments: json!({"summary": "Episode complete."}),
                        }]
                    });
                    (rule.text.clone(), calls)
                }
                None => (
                    None,
                    vec![ScriptedToolCall {
                        name: PHASE_COMPLETE.into(),
                        arguments: json!({"summary": "No script rule matched."}),
                    }],
                ),
            }
        };
        let tool_calls: Vec<ToolCall> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: format!("call_{}_{}", ctx.turn, i + 1),
                name: c.name.clone(),
                arguments: ctx.render(&c.arguments),
            })
            .collect();
        let usage = Usage {
            input_tokens: estimate_tokens(request_chars(request)),
            output_tokens: estimate_tokens(
                text.as_deref().unwrap_or("").len()
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + json_len(&c.arguments))
                        .sum::<usize>(),
            ),
            cache_read_tokens: 0,
            cache_write_tokens: 0,
        };
        ChatResponse {
            text,
            stop_reason: if tool_calls.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            },
            tool_calls,
            usage,
            served_model: SCRIPTED_MODEL.into(),
        }
    }
}

fn request_chars(request: &ChatRequest) -> usize {
    let messages: usize = request
        .messages
        .iter()
        .map(|m| match m {
            ChatMessage::System { content } | ChatMessage::User { content } => content.len(),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                content.as_deref().map_or(0, str::len)
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + json_len(&c.arguments))
                        .sum::<usize>()
            }
            ChatMessage::Tool { content, .. } => content.len(),
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + json_len(&t.parameters))
        .sum();
    request.system.len() + messages + tools
}

/// The length of `value`'s compact JSON text, counted as it is written
/// rather than built: the estimate runs on every scripted call, over every
/// advertised schema.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// ≈ chars / 4, at least 1 for any non-empty text.
fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

#[async_trait::async_trait]
impl ChatClient for ScriptedProvider {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        request.validate()?;
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        if let Some(error) = &self.failure {
            return Err(error.clone());
        }
        Ok(self.respond(&request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_the_length_of_the_compact_text() {
        for value in [
            json!({}),
            json!({"type": "object", "properties": {"summary": {"type": "string"}}}),
            json!([
                "quote \" and backslash \\",
                "ünïcode ✓",
                "\n\t",
                1.5,
                null,
                true
            ]),
        ] {
            assert_eq!(json_len(&value), value.to_string().len(), "{value}");
        }
    }
}
