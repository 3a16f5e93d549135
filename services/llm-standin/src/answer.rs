//! What the stand-in answers a valid request with: a scripted [`Reply`]
//! (text, tool calls, served model, stop reason, usage) or an injected
//! fault. Answers are queued per endpoint; the same [`Answer`] renders as an
//! Anthropic or an OpenAI body depending on the endpoint that pops it.
//!
//! Everything here is plain data that also loads from a JSON script file
//! (see [`Script`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One scripted answer to the next valid request of an endpoint.
///
/// Faults render with each provider's real error shape and status:
/// Anthropic `{"type":"error","error":{"type":…,"message":…},"request_id":…}`,
/// OpenAI `{"error":{"message":…,"type":…,"param":…,"code":…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// A successful (HTTP 200) completion.
    Reply(Reply),
    /// HTTP 429 (`rate_limit_error` / `rate_limit_exceeded`).
    RateLimited {
        /// `Retry-After` in seconds, when set.
        #[serde(default)]
        retry_after_secs: Option<u64>,
        /// OpenAI only: `x-ratelimit-reset-requests` (e.g. `1s`).
        #[serde(default)]
        reset_requests: Option<String>,
        /// OpenAI only: `x-ratelimit-reset-tokens` (e.g. `6m0s`).
        #[serde(default)]
        reset_tokens: Option<String>,
    },
    /// HTTP 500 (`api_error` / `server_error`).
    ServerError,
    /// HTTP 503.
    Unavailable,
    /// Anthropic: HTTP 529 `overloaded_error`. OpenAI has no 529: it answers
    /// HTTP 503 "The engine is currently overloaded".
    Overloaded,
    /// The connection is closed after the request was read, without any
    /// HTTP answer.
    DropConnection,
}

impl Answer {
    /// A 429 with `Retry-After: secs`.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Answer::RateLimited {
            retry_after_secs: Some(retry_after_secs),
            reset_requests: None,
            reset_tokens: None,
        }
    }

    /// An OpenAI-style 429 carrying `x-ratelimit-reset-requests` and
    /// `x-ratelimit-reset-tokens` (e.g. `"1s"`, `"6m0s"`) and, when set,
    /// `Retry-After`.
    pub fn rate_limited_with_resets(
        retry_after_secs: Option<u64>,
        reset_requests: impl Into<String>,
        reset_tokens: impl Into<String>,
    ) -> Self {
        Answer::RateLimited {
            retry_after_secs,
            reset_requests: Some(reset_requests.into()),
            reset_tokens: Some(reset_tokens.into()),
        }
    }
}

impl From<Reply> for Answer {
    fn from(reply: Reply) -> Self {
        Answer::Reply(reply)
    }
}

/// A successful completion, provider-neutral until rendered.
///
/// Defaults: the served model echoes the requested one; the stop reason is
/// `tool_use` / `tool_calls` when there are tool calls, else `end_turn` /
/// `stop`; usage is estimated from the request and answer sizes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The answer text (Anthropic: one `text` block before the tool calls;
    /// OpenAI: `message.content`).
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls, in order.
    #[serde(default)]
    pub tool_calls: Vec<ToolCallSpec>,
    /// The model the body says it served, e.g. a dated snapshot
    /// (`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`).
    #[serde(default)]
    pub model: Option<String>,
    /// The stop reason, verbatim on the wire: Anthropic `stop_reason`
    /// (`end_turn`, `tool_use`, `max_tokens`, `stop_sequence`, `refusal`,
    /// `pause_turn`), OpenAI `finish_reason` (`stop`, `tool_calls`, `length`,
    /// `content_filter`).
    #[serde(default)]
    pub stop: Option<String>,
    /// OpenAI: `message.refusal` (the content is then `null` unless
    /// [`Reply::text`] is set). Anthropic has no refusal text field: this
    /// sets `stop_reason: "refusal"` unless [`Reply::stop`] says otherwise,
    /// and the text (if any) goes out as the content.
    #[serde(default)]
    pub refusal: Option<String>,
    /// Token counts, in each provider's own terms (see [`WireUsage`]).
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// Wait this long before answering (timeout tests).
    #[serde(default)]
    pub delay_ms: u64,
}

impl Reply {
    /// An empty reply (no text, no tool calls): build it up with the `with_*`
    /// methods.
    pub fn new() -> Self {
        Reply::default()
    }

    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Reply {
            text: Some(text.into()),
            ..Reply::default()
        }
    }

    /// One tool call and nothing else.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Reply::default().with_tool_call(ToolCallSpec::new(name, arguments))
    }

    /// Set the text.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Append a tool call.
    pub fn with_tool_call(mut self, call: ToolCallSpec) -> Self {
        self.tool_calls.push(call);
        self
    }

    /// Set the served model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Set the wire stop reason verbatim.
    pub fn stop(mut self, stop: impl Into<String>) -> Self {
        self.stop = Some(stop.into());
        self
    }

    /// Set the refusal text (see [`Reply::refusal`]).
    pub fn refusal(mut self, refusal: impl Into<String>) -> Self {
        self.refusal = Some(refusal.into());
        self
    }

    /// Set the usage counts.
    pub fn usage(mut self, usage: WireUsage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Answer only after `delay`.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self
    }
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallSpec {
    /// The call id; generated (`toolu_…` / `call_…`) when `None`.
    #[serde(default)]
    pub id: Option<String>,
    /// The tool name.
    pub name: String,
    /// The arguments object.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// OpenAI only: the `function.arguments` string verbatim (e.g.
    /// pretty-printed JSON with newlines) instead of `arguments` serialised
    /// compactly. Anthropic sends `arguments` as the `input` object.
    #[serde(default)]
    pub raw_arguments: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

impl ToolCallSpec {
    /// A call of `name` with `arguments` and a generated id.
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        ToolCallSpec {
            id: None,
            name: name.into(),
            arguments,
            raw_arguments: None,
        }
    }

    /// Use this call id instead of a generated one.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Send this exact `function.arguments` string on the OpenAI endpoint.
    pub fn raw_arguments(mut self, raw: impl Into<String>) -> Self {
        self.raw_arguments = Some(raw.into());
        self
    }
}

/// Token counts as each wire format states them; the stand-in does no
/// arithmetic between them except OpenAI's `total_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireUsage {
    /// Anthropic `usage.input_tokens` (the uncached part of the prompt);
    /// OpenAI `usage.prompt_tokens` (the whole prompt, cached tokens
    /// included).
    pub input_tokens: u64,
    /// Anthropic `usage.output_tokens`; OpenAI `usage.completion_tokens`
    /// (reasoning tokens included).
    pub output_tokens: u64,
    /// Anthropic `usage.cache_read_input_tokens`; OpenAI
    /// `usage.prompt_tokens_details.cached_tokens`.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Anthropic `usage.cache_creation_input_tokens` (OpenAI has none).
    #[serde(default)]
    pub cache_creation_tokens: u64,
    /// OpenAI `usage.completion_tokens_details.reasoning_tokens` (Anthropic
    /// has none).
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl WireUsage {
    /// Anthropic's counts: `input_tokens`, `output_tokens`,
    /// `cache_creation_input_tokens`, `cache_read_input_tokens`.
    pub fn anthropic(input: u64, output: u64, cache_creation: u64, cache_read: u64) -> Self {
        WireUsage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cache_read,
            cache_creation_tokens: cache_creation,
            reasoning_tokens: 0,
        }
    }

    /// OpenAI's counts: `prompt_tokens`, `completion_tokens`,
    /// `prompt_tokens_details.cached_tokens`,
    /// `completion_tokens_details.reasoning_tokens`.
    pub fn openai(prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Self {
        WireUsage {
            input_tokens: prompt,
            output_tokens: completion,
            cache_read_tokens: cached,
            cache_creation_tokens: 0,
            reasoning_tokens: reasoning,
        }
    }
}

/// A script file for the binary: the answer queues of both endpoints.
///
/// ```json
/// {"anthropic": [{"kind": "reply", "text": "hello"},
///                {"kind": "rate_limited", "retry_after_secs": 2}],
///  "openai": [{"kind": "reply", "tool_calls": [{"name": "phase_complete",
///              "arguments": {"summary": "done"}}]}]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Answers for `POST /v1/messages`, in order.
    #[serde(default)]
    pub anthropic: Vec<Answer>,
    /// Answers for `POST /v1/chat/completions`, in order.
    #[serde(default)]
    pub openai: Vec<Answer>,
}

impl Script {
    /// Parse a script from JSON text.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}
