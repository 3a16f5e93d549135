//! The Anthropic Messages API provider: `POST {base}/v1/messages` with
//! `x-api-key` and `anthropic-version`, tools as `tool_use` / `tool_result`
//! content blocks.
//!
//! Prompt caching: every request marks the prefix that repeats from call to
//! call with `cache_control: {"type": "ephemeral"}` breakpoints, in the
//! order the API renders the prompt (tools, system, messages) and never more
//! than [`MAX_CACHE_BREAKPOINTS`]: the last tool (the whole tool list), the
//! system prompt (sent as one text block so it can carry the marker), the
//! first user message (the episode's objective — the stable head), and the
//! last block of the conversation once it has turns after the head's, so
//! the next turn of the same episode reads the whole history back from the
//! cache. A prefix shorter than the model's minimum is simply not cached.
//!
//! This module must never decide on retries or fallback; it reports one
//! attempt's outcome as an [`LlmError`] and the chain decides.

use serde_json::{Value, json};

use crate::error::LlmError;
use crate::http::{HttpTimeouts, build_client, normalize_base_url, post_json, trim_base_url};
use crate::secret::Secret;
use crate::types::{
    ChatClient, ChatMessage, ChatRequest, ChatResponse, StopReason, ToolCall, Usage,
};

/// The public Anthropic API base URL.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header value this provider speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// One Anthropic endpoint + credential. Cheap to clone; holds a pooled
/// reqwest client.
#[derive(Clone)]
pub struct AnthropicProvider {
    base_url: String,
    api_key: Secret,
    client: reqwest::Client,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .finish()
    }
}

impl AnthropicProvider {
    /// A provider for `base_url` as the official SDKs read
    /// `ANTHROPIC_BASE_URL` (`https://api.anthropic.com`, without
    /// `/v1/messages`; a trailing `/` or `/v1` is tolerated) authenticating
    /// with `api_key`. A URL that is not `http(s)://host…` is refused.
    pub fn new(
        base_url: impl Into<String>,
        api_key: Secret,
        timeouts: HttpTimeouts,
    ) -> Result<Self, LlmError> {
        Ok(AnthropicProvider {
            base_url: normalize_base_url(&base_url.into())?,
            api_key,
            client: build_client(timeouts)?,
        })
    }

    /// Same endpoint and key, sharing an existing client's connection pool.
    /// The URL is trimmed as in [`AnthropicProvider::new`] but not checked:
    /// the caller has checked it (see [`crate::http::normalize_base_url`]).
    pub fn with_client(
        base_url: impl Into<String>,
        api_key: Secret,
        client: reqwest::Client,
    ) -> Self {
        AnthropicProvider {
            base_url: trim_base_url(&base_url.into()),
            api_key,
            client,
        }
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> String {
        format!("{}/v1/messages", self.base_url)
    }
}

/// The most `cache_control` breakpoints the Messages API accepts in one
/// request.
pub const MAX_CACHE_BREAKPOINTS: usize = 4;

/// The marker of a cache breakpoint (the default five-minute cache).
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Whether a content block may carry `cache_control`: every block this
/// provider sends can, except an empty text block (the API refuses those).
fn markable(block: &Value) -> bool {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => block
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty()),
        Some(_) => true,
        None => false,
    }
}

/// Append `blocks` to the conversation, merging them into the last message
/// when it has the same role; returns where the first of them landed
/// (message index, block index), or `None` when there were none.
/// A tool-call id as the Messages API takes it (`^[a-zA-Z0-9_-]+$`). An
/// episode that fell back from an OpenAI-compatible server replays ids such
/// as `functions.lookup:0`; each other character becomes `_` and, when any
/// did, a hash of the original id is appended so two ids never collide.
/// The same id maps the same way in a `tool_use` and its `tool_result`.
fn wire_tool_id(id: &str) -> std::borrow::Cow<'_, str> {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !id.is_empty() && id.chars().all(ok) {
        return std::borrow::Cow::Borrowed(id);
    }
    // FNV-1a: stable across processes and releases, unlike the std hasher.
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let cleaned: String = id.chars().map(|c| if ok(c) { c } else { '_' }).collect();
    std::borrow::Cow::Owned(format!("{cleaned}_{hash:016x}"))
}

fn push_blocks(
    messages: &mut Vec<(&'static str, Vec<Value>)>,
    role: &'static str,
    blocks: Vec<Value>,
) -> Option<(usize, usize)> {
    if blocks.is_empty() {
        return None;
    }
    match messages.last_mut() {
        Some((last, existing)) if *last == role => {
            let at = existing.len();
            existing.extend(blocks);
            Some((messages.len() - 1, at))
        }
        _ => {
            messages.push((role, blocks));
            Some((messages.len() - 1, 0))
        }
    }
}

/// Translate the neutral request into a Messages API body. Consecutive
/// messages of the same wire role are merged (tool results become `user`
/// turns) because the API wants alternating roles.
///
/// Cache breakpoints (module docs) go on the last tool, the system block,
/// the first [`ChatMessage::User`] text — a caller whose first user message
/// has a changing tail sends the stable head as its own first user message
/// and the rest as a second one: both land in the same user turn, and only
/// the head is marked — and the last block of the conversation once it has
/// turns after the head's.
pub(crate) fn to_wire(request: &ChatRequest) -> Value {
    let mut system = request.system.clone();
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    // Where the first user message's text landed: the stable head.
    let mut head: Option<(usize, usize)> = None;
    for message in request.messages.iter() {
        match message {
            ChatMessage::System { content } => {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(content);
            }
            ChatMessage::User { content } => {
                let at = push_blocks(
                    &mut messages,
                    "user",
                    vec![json!({"type": "text", "text": content})],
                );
                head = head.or(at);
            }
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": wire_tool_id(&call.id),
                        "name": call.name,
                        "input": call.arguments,
                    }));
                }
                push_blocks(&mut messages, "assistant", blocks);
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                push_blocks(
                    &mut messages,
                    "user",
                    vec![json!({
                        "type": "tool_result",
                        "tool_use_id": wire_tool_id(tool_call_id),
                        "content": content,
                    })],
                );
            }
        }
    }

    // The conversation's breakpoints: the stable head, then the tail when
    // it lies in a later turn than the head (a first call marks the head
    // only, so the changing rest of the first turn is not written to the
    // cache for an episode that may end there).
    let tail = messages
        .last()
        .and_then(|(_, blocks)| blocks.len().checked_sub(1))
        .map(|b| (messages.len() - 1, b));
    let mut marks: Vec<(usize, usize)> = Vec::with_capacity(2);
    for at in [head, tail].into_iter().flatten() {
        if marks.last().is_none_or(|last| last.0 < at.0) {
            marks.push(at);
        }
    }
    for (m, b) in marks {
        if let Some(block) = messages
            .get_mut(m)
            .and_then(|(_, blocks)| blocks.get_mut(b))
            && markable(block)
        {
            block["cache_control"] = ephemeral();
        }
    }

    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_output_tokens,
        "messages": messages
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect::<Vec<_>>(),
    });
    if !system.is_empty() {
        body["system"] = json!([{
            "type": "text",
            "text": system,
            "cache_control": ephemeral(),
        }]);
    }
    if !request.tools.is_empty() {
        let last = request.tools.len() - 1;
        body["tools"] = Value::Array(
            request
                .tools
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let mut tool = json!({
                        "name": t.name,
                        "description": t.description,
                        "input_schema": t.parameters,
                    });
                    if i == last {
                        tool["cache_control"] = ephemeral();
                    }
                    tool
                })
                .collect(),
        );
    }
    // The neutral request takes 0..=2 (the OpenAI scale); the Messages API
    // refuses anything above 1, so a higher value is sent as its maximum.
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t.min(1.0));
    }
    body
}

/// Parse a raw Messages API response body, bytes as received: not JSON or
/// not the wire shape is [`LlmError::MalformedResponse`]. Public so the
/// hostile-input tests and fuzz targets drive the same parser the provider
/// uses.
pub fn parse_anthropic_response(body: &[u8]) -> Result<ChatResponse, LlmError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| LlmError::malformed(format!("body is not JSON: {e}")))?;
    from_wire(&value)
}

/// Parse a Messages API response body.
pub(crate) fn from_wire(body: &Value) -> Result<ChatResponse, LlmError> {
    let served_model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| LlmError::malformed("anthropic response has no model"))?
        .to_string();
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::malformed("anthropic response has no content array"))?;
    let mut text: Option<String> = None;
    let mut tool_calls = Vec::new();
    for (i, block) in content.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let t = block.get("text").and_then(Value::as_str).ok_or_else(|| {
                    LlmError::malformed(format!("content[{i}] text block has no text"))
                })?;
                text.get_or_insert_with(String::new).push_str(t);
            }
            Some("tool_use") => {
                let id = block.get("id").and_then(Value::as_str);
                let name = block.get("name").and_then(Value::as_str);
                let input = block.get("input");
                match (id, name, input) {
                    (Some(id), Some(name), Some(input)) if input.is_object() => {
                        tool_calls.push(ToolCall {
                            id: id.to_string(),
                            name: name.to_string(),
                            arguments: input.clone(),
                        })
                    }
                    _ => {
                        return Err(LlmError::malformed(format!(
                            "content[{i}] tool_use block needs id, name and an object input"
                        )));
                    }
                }
            }
            // thinking / redacted_thinking and future block types are trace.
            Some(_) => {}
            None => {
                return Err(LlmError::malformed(format!("content[{i}] has no type")));
            }
        }
    }
    let usage = body
        .get("usage")
        .ok_or_else(|| LlmError::malformed("anthropic response has no usage"))?;
    let count = |field: &str, required: bool| -> Result<u64, LlmError> {
        match usage.get(field) {
            Some(v) => v
                .as_u64()
                .ok_or_else(|| LlmError::malformed(format!("usage.{field} is not a count"))),
            None if required => Err(LlmError::malformed(format!("usage.{field} is missing"))),
            None => Ok(0),
        }
    };
    let usage = Usage {
        input_tokens: count("input_tokens", true)?,
        output_tokens: count("output_tokens", true)?,
        // Anthropic's input_tokens already excludes the cached parts: the
        // prompt is input + cache reads + cache writes, each at its price.
        cache_read_tokens: match usage.get("cache_read_input_tokens") {
            Some(Value::Null) | None => 0,
            Some(_) => count("cache_read_input_tokens", false)?,
        },
        cache_write_tokens: match usage.get("cache_creation_input_tokens") {
            Some(Value::Null) | None => 0,
            Some(_) => count("cache_creation_input_tokens", false)?,
        },
    };
    let stop_reason = match body.get("stop_reason").and_then(Value::as_str) {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        // The context window, not max_tokens, cut the output: still a
        // truncated answer.
        Some("max_tokens" | "model_context_window_exceeded") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Refusal,
        Some("pause_turn") => StopReason::PauseTurn,
        Some(other) => StopReason::Other(other.to_string()),
        None if !tool_calls.is_empty() => StopReason::ToolUse,
        None => StopReason::EndTurn,
    };
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        served_model,
        stop_reason,
    })
}

#[async_trait::async_trait]
impl ChatClient for AnthropicProvider {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        request.validate()?;
        let body = to_wire(&request);
        let builder = self
            .client
            .post(self.endpoint())
            .header("x-api-key", self.api_key.expose())
            .header("anthropic-version", ANTHROPIC_VERSION);
        let answer = post_json(builder, &body).await?;
        from_wire(&answer)
    }
}
