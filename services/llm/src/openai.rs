//! The OpenAI-compatible chat completions provider:
//! `POST {base}/v1/chat/completions` with a Bearer key, tools as functions
//! whose arguments travel as JSON strings.
//!
//! Base URL: `OPENAI_BASE_URL` is read as the OpenAI SDKs read it, with the
//! version path (`https://api.openai.com/v1`), and also without it; either
//! way the request goes to `…/v1/chat/completions` exactly once.
//!
//! Prompt caching is automatic on OpenAI for prompts of 1024 tokens or more:
//! the longest previously seen prefix of tools + messages is served from the
//! cache, so a request must put what does not change first. This provider
//! sends the system prompt as the first message, then the conversation in
//! order — the first user message carries the episode's objective and stays
//! byte-identical from turn to turn (a caller with a changing part sends it
//! as a later message) — while the tool list travels in its own field, which
//! the API places ahead of the messages; tools are serialised in the order
//! given, every key in a fixed order, so the same tool set is the same
//! prefix. Nothing is marked per request; cached tokens come back in
//! `usage.prompt_tokens_details.cached_tokens`.
//!
//! Output cap: OpenAI's reasoning models (`o1*`, `o3*`, `o4*`, `gpt-5*`)
//! only take `max_completion_tokens` and refuse a `temperature`; every other
//! model gets the configured [`MaxTokensField`] (`max_tokens` by default, for
//! the widest compatibility with OpenAI-compatible servers).
//!
//! This module must never decide on retries or fallback, and never pass a
//! tool call on with unparsed arguments: argument text that is not a JSON
//! object is a [`LlmError::MalformedResponse`].

use serde_json::{Value, json};

use crate::error::LlmError;
use crate::http::{HttpTimeouts, build_client, normalize_base_url, post_json, trim_base_url};
use crate::secret::Secret;
use crate::types::{
    ChatClient, ChatMessage, ChatRequest, ChatResponse, StopReason, ToolCall, Usage,
};

/// The public OpenAI API base URL.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com";

/// Which request field carries the output cap: OpenAI's current models want
/// `max_completion_tokens`; many OpenAI-compatible servers only know
/// `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_tokens` (widest compatibility).
    #[default]
    MaxTokens,
    /// `max_completion_tokens` (required by OpenAI reasoning models).
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The field name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }

    /// The field `model` takes: `max_completion_tokens` for an OpenAI
    /// reasoning model ([`is_reasoning_model`]), else `configured`.
    pub fn for_model(model: &str, configured: MaxTokensField) -> MaxTokensField {
        if is_reasoning_model(model) {
            MaxTokensField::MaxCompletionTokens
        } else {
            configured
        }
    }
}

/// Whether `model` is an OpenAI reasoning model (`o1*`, `o3*`, `o4*`,
/// `gpt-5*`, case-insensitive, after any `vendor/` routing prefix such as
/// `openai/o3`): those refuse `max_tokens` and a `temperature`.
pub fn is_reasoning_model(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .trim()
        .to_ascii_lowercase();
    ["o1", "o3", "o4", "gpt-5"]
        .iter()
        .any(|family| name.starts_with(family))
}

/// One OpenAI-compatible endpoint + credential.
#[derive(Clone)]
pub struct OpenAiProvider {
    base_url: String,
    api_key: Secret,
    client: reqwest::Client,
    max_tokens_field: MaxTokensField,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .field("max_tokens_field", &self.max_tokens_field)
            .finish()
    }
}

impl OpenAiProvider {
    /// A provider for `base_url` — with the SDKs' `/v1`
    /// (`https://api.openai.com/v1`) or without it; a trailing `/` is
    /// tolerated — authenticating with `api_key`. A URL that is not
    /// `http(s)://host…` is refused.
    pub fn new(
        base_url: impl Into<String>,
        api_key: Secret,
        timeouts: HttpTimeouts,
    ) -> Result<Self, LlmError> {
        let base_url = normalize_base_url(&base_url.into())?;
        Ok(Self::with_client(
            base_url,
            api_key,
            build_client(timeouts)?,
        ))
    }

    /// Same endpoint and key, sharing an existing client's connection pool.
    /// The URL is trimmed as in [`OpenAiProvider::new`] but not checked: the
    /// caller has checked it (see [`crate::http::normalize_base_url`]).
    pub fn with_client(
        base_url: impl Into<String>,
        api_key: Secret,
        client: reqwest::Client,
    ) -> Self {
        OpenAiProvider {
            base_url: trim_base_url(&base_url.into()),
            api_key,
            client,
            max_tokens_field: MaxTokensField::default(),
        }
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> String {
        format!("{}/v1/chat/completions", self.base_url)
    }

    /// Choose the output-cap field name for models that are not reasoning
    /// models (those always get `max_completion_tokens`).
    pub fn with_max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = field;
        self
    }
}

/// Translate the neutral request into a chat completions body: the system
/// prompt first, the conversation in order, the output cap under the field
/// the model takes (`field` unless it is a reasoning model), and no
/// `temperature` for a reasoning model.
pub(crate) fn to_wire(request: &ChatRequest, field: MaxTokensField) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in request.messages.iter() {
        messages.push(match message {
            ChatMessage::System { content } => json!({"role": "system", "content": content}),
            ChatMessage::User { content } => json!({"role": "user", "content": content}),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                // Chat Completions refuses an assistant message whose
                // content is null without tool calls (a turn that said
                // nothing, before a nudge): it goes as an empty string.
                let content = match content {
                    None if tool_calls.is_empty() => Some(String::new()),
                    other => other.clone(),
                };
                let mut m = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    m["tool_calls"] = Value::Array(
                        tool_calls
                            .iter()
                            .map(|c| {
                                json!({
                                    "id": c.id,
                                    "type": "function",
                                    "function": {
                                        "name": c.name,
                                        "arguments": c.arguments.to_string(),
                                    },
                                })
                            })
                            .collect(),
                    );
                }
                m
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
        });
    }
    let mut body = json!({"model": request.model, "messages": messages});
    let cap = MaxTokensField::for_model(&request.model, field);
    body[cap.as_str()] = json!(request.max_output_tokens);
    if !request.tools.is_empty() {
        body["tools"] = Value::Array(
            request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.parameters,
                        },
                    })
                })
                .collect(),
        );
    }
    if let Some(t) = request.temperature
        && !is_reasoning_model(&request.model)
    {
        body["temperature"] = json!(t);
    }
    body
}

/// Parse a raw chat completions response body, bytes as received: not JSON
/// or not the wire shape is [`LlmError::MalformedResponse`]. Public so the
/// hostile-input tests and fuzz targets drive the same parser the provider
/// uses.
pub fn parse_openai_response(body: &[u8]) -> Result<ChatResponse, LlmError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| LlmError::malformed(format!("body is not JSON: {e}")))?;
    from_wire(&value)
}

/// Parse a chat completions response body (the first choice).
pub(crate) fn from_wire(body: &Value) -> Result<ChatResponse, LlmError> {
    let served_model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| LlmError::malformed("openai response has no model"))?
        .to_string();
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| LlmError::malformed("openai response has no choices"))?;
    let message = choice
        .get("message")
        .ok_or_else(|| LlmError::malformed("choices[0] has no message"))?;
    let text = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(LlmError::malformed(
                "choices[0].message.content is not a string",
            ));
        }
    };
    // A refusal comes as `message.refusal` with a null content: its text is
    // the response text, and the stop reason says it was a refusal.
    let refusal = match message.get("refusal") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(LlmError::malformed(
                "choices[0].message.refusal is not a string",
            ));
        }
    };
    let refused = refusal.is_some();
    let text = text.or(refusal);
    let mut tool_calls = Vec::new();
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (i, call) in calls.iter().enumerate() {
                let id = call.get("id").and_then(Value::as_str);
                let function = call.get("function");
                let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
                let args = function
                    .and_then(|f| f.get("arguments"))
                    .and_then(Value::as_str);
                let (Some(id), Some(name), Some(args)) = (id, name, args) else {
                    return Err(LlmError::malformed(format!(
                        "tool_calls[{i}] needs id, function.name and function.arguments"
                    )));
                };
                let arguments: Value = if args.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(args).map_err(|e| {
                        LlmError::malformed(format!(
                            "tool_calls[{i}] ({name}) arguments are not JSON: {e}"
                        ))
                    })?
                };
                if !arguments.is_object() {
                    return Err(LlmError::malformed(format!(
                        "tool_calls[{i}] ({name}) arguments are not a JSON object"
                    )));
                }
                tool_calls.push(ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments,
                });
            }
        }
        Some(_) => {
            return Err(LlmError::malformed(
                "choices[0].message.tool_calls is not an array",
            ));
        }
    }
    let usage = body
        .get("usage")
        .ok_or_else(|| LlmError::malformed("openai response has no usage"))?;
    let count = |field: &str| -> Result<u64, LlmError> {
        usage
            .get(field)
            .and_then(Value::as_u64)
            .ok_or_else(|| LlmError::malformed(format!("usage.{field} is missing or not a count")))
    };
    // OpenAI's prompt_tokens already includes the cached ones
    // (prompt_tokens_details.cached_tokens), and completion_tokens already
    // includes the reasoning ones: only the uncached rest is billed at the
    // input price, so it is what `input_tokens` carries.
    let prompt_tokens = count("prompt_tokens")?;
    let cached = match usage
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
    {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_u64().ok_or_else(|| {
            LlmError::malformed("usage.prompt_tokens_details.cached_tokens is not a count")
        })?,
    };
    if cached > prompt_tokens {
        return Err(LlmError::malformed(format!(
            "usage.prompt_tokens_details.cached_tokens ({cached}) exceeds usage.prompt_tokens ({prompt_tokens})"
        )));
    }
    let usage = Usage {
        input_tokens: prompt_tokens - cached,
        output_tokens: count("completion_tokens")?,
        cache_read_tokens: cached,
        cache_write_tokens: 0,
    };
    let stop_reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("content_filter") => StopReason::ContentFilter,
        _ if refused => StopReason::Refusal,
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
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
impl ChatClient for OpenAiProvider {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        request.validate()?;
        let body = to_wire(&request, self.max_tokens_field);
        let builder = self
            .client
            .post(self.endpoint())
            .bearer_auth(self.api_key.expose());
        let answer = post_json(builder, &body).await?;
        from_wire(&answer)
    }
}
