//! The provider-neutral conversation shapes: what goes into a chat call
//! (messages, tool schemas, limits) and what comes out (text, tool calls,
//! usage, served model).
//!
//! These types must never grow provider wire details; each provider module
//! translates to and from its own format.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::LlmError;

/// One message of the conversation, tagged by role.
///
/// Tool results travel as [`ChatMessage::Tool`] keyed by the id of the call
/// they answer, so a provider can pair them with the assistant's tool calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    /// Extra system text (appended to [`ChatRequest::system`] by providers
    /// that take a single system prompt).
    System {
        /// The text.
        content: String,
    },
    /// A user (or planning-loop) turn.
    User {
        /// The text.
        content: String,
    },
    /// A model turn: optional reasoning text plus the tool calls it made.
    Assistant {
        /// Reasoning trace; never parsed for state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        /// The tool calls of that turn, replayed verbatim.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The [`ToolCall::id`] this result answers.
        tool_call_id: String,
        /// The result, usually JSON text.
        content: String,
    },
}

impl ChatMessage {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage::User {
            content: content.into(),
        }
    }

    /// A tool result message.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }

    /// An assistant message replaying a response's text and tool calls.
    pub fn assistant(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        ChatMessage::Assistant {
            content,
            tool_calls,
        }
    }
}

/// A tool the model may call: its name, what it is for, and the JSON schema
/// of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool name, e.g. `soa_send_message`.
    pub name: String,
    /// What the tool does, shown to the model.
    pub description: String,
    /// JSON schema of the arguments object. Shared, not copied: the same
    /// schema goes into every turn's request of every tick.
    pub parameters: Arc<serde_json::Value>,
}

/// One tool call the model made. The tool call is the commit: the loop acts
/// on these, never on response text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned call id, echoed back in the tool result.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments, always a parsed JSON value.
    pub arguments: serde_json::Value,
}

/// Token usage a provider reported for one call, normalised so that the
/// four counts are disjoint and each is billed at exactly one price; cost
/// is computed from this server-side, never by the caller.
///
/// Providers count differently: OpenAI's `prompt_tokens` already includes
/// `prompt_tokens_details.cached_tokens`, while Anthropic's `input_tokens`
/// excludes both `cache_read_input_tokens` and
/// `cache_creation_input_tokens`. Each provider module converts its own
/// counts into this shape, so `input + cache_read + cache_write` is always
/// the whole prompt and no token is priced twice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens billed at the plain input price (neither read from nor
    /// written to the provider's cache).
    pub input_tokens: u64,
    /// Completion tokens billed, reasoning tokens included.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache (cache-read price).
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache (cache-write price;
    /// Anthropic's `cache_creation_input_tokens`, zero for OpenAI).
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Every prompt token of the call, whatever it was billed at.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_write_tokens)
    }
}

/// Why the model stopped producing output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A natural end of turn.
    EndTurn,
    /// The model stopped to have its tool calls run.
    ToolUse,
    /// The output-token limit was reached.
    MaxTokens,
    /// A stop sequence was produced.
    StopSequence,
    /// The model declined to answer (Anthropic `stop_reason: "refusal"`,
    /// OpenAI `message.refusal`); the refusal text, when the provider sent
    /// one, is the response text.
    Refusal,
    /// The provider paused a long-running turn (Anthropic `pause_turn`): the
    /// response may be sent back as is to let the model continue.
    PauseTurn,
    /// The provider's content filter cut the output (OpenAI
    /// `finish_reason: "content_filter"`).
    ContentFilter,
    /// Any other provider-specific reason, kept verbatim.
    Other(String),
}

/// One chat call: the whole conversation so far plus the tool surface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The requested model (the fallback chain overwrites it per couple).
    pub model: String,
    /// The system prompt; empty means none.
    #[serde(default)]
    pub system: String,
    /// The conversation, oldest first. Shared, so the fallback chain's
    /// per-couple request copies no message.
    pub messages: Arc<[ChatMessage]>,
    /// The tools the model may call; shared like the messages.
    #[serde(default)]
    pub tools: Arc<[ToolSpec]>,
    /// Per-turn output cap.
    pub max_output_tokens: u32,
    /// Sampling temperature; `None` leaves the provider default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}

impl ChatRequest {
    /// Refuse a request no provider could serve, before anything is sent:
    /// no messages, a zero output cap, a tool without a name, a tool result
    /// without a call id, or a temperature outside 0..=2.
    pub fn validate(&self) -> Result<(), LlmError> {
        self.validate_for(&self.model)
    }

    /// [`ChatRequest::validate`] as if `model` were the request's model: the
    /// fallback chain sends one request to each couple's own model, and
    /// checks it once without copying the conversation and tool schemas.
    pub fn validate_for(&self, model: &str) -> Result<(), LlmError> {
        if model.trim().is_empty() {
            return Err(LlmError::invalid("model is empty"));
        }
        if self.messages.is_empty() {
            return Err(LlmError::invalid("messages is empty"));
        }
        if self.max_output_tokens == 0 {
            return Err(LlmError::invalid("max_output_tokens must be > 0"));
        }
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(LlmError::invalid(format!(
                "temperature {t} is outside 0..=2"
            )));
        }
        for tool in self.tools.iter() {
            if tool.name.trim().is_empty() {
                return Err(LlmError::invalid("a tool has an empty name"));
            }
            if !tool.parameters.is_object() {
                return Err(LlmError::invalid(format!(
                    "tool {} parameters must be a JSON schema object",
                    tool.name
                )));
            }
        }
        for message in self.messages.iter() {
            if let ChatMessage::Tool { tool_call_id, .. } = message
                && tool_call_id.trim().is_empty()
            {
                return Err(LlmError::invalid(
                    "a tool message has an empty tool_call_id",
                ));
            }
        }
        Ok(())
    }
}

/// What one chat call produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// Reasoning text, if any; never parsed for state.
    pub text: Option<String>,
    /// Tool calls, in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// Provider-reported token usage.
    pub usage: Usage,
    /// The model the provider says it actually served (may differ from the
    /// requested one).
    pub served_model: String,
    /// Why the model stopped.
    pub stop_reason: StopReason,
}

/// Anything that can answer a chat call: the HTTP providers, the scripted
/// provider, and test doubles.
#[async_trait::async_trait]
pub trait ChatClient: Send + Sync {
    /// Run one call. Implementations validate the request first and return
    /// [`LlmError::InvalidRequest`] without sending anything when it is bad.
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError>;
}
