//! The OpenAI Chat Completions stand-in: `POST /v1/chat/completions`.
//!
//! [`check`] refuses what the real API refuses, with its status and error
//! shape (`{"error":{"message":…,"type":…,"param":…,"code":…}}`);
//! [`render`] shapes an [`Answer`] as the API reference shows a
//! `chat.completion` object or an error.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderMap;
use serde_json::{Value, json};

use crate::answer::{Answer, Reply, WireUsage};
use crate::anthropic::is_tool_name;
use crate::ids;
use crate::server::{Checked, Config, Outcome, estimate_tokens, is_json_content_type};

/// Top-level request parameters of Chat Completions.
const FIELDS: [&str; 33] = [
    "model",
    "messages",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
];

const NOT_JSON: &str = "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)";

type Checking<T> = Result<T, Outcome>;

/// An error answer in OpenAI's shape.
pub(crate) fn error(
    status: u16,
    kind: &str,
    message: impl Into<String>,
    param: Option<&str>,
    code: Option<&str>,
) -> Outcome {
    Outcome::Respond {
        status,
        headers: vec![("x-request-id", ids::openai_request())],
        body: json!({
            "error": {
                "message": message.into(),
                "type": kind,
                "param": param,
                "code": code,
            }
        }),
        delay: Duration::ZERO,
    }
}

fn invalid(message: impl Into<String>, param: Option<&str>, code: Option<&str>) -> Outcome {
    error(400, "invalid_request_error", message, param, code)
}

/// A JSON type name as OpenAI's messages spell it.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a decimal",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `sk-…` keys shown the way the API shows them: all but the last four
/// characters hidden.
fn mask(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() <= 8 {
        return "*".repeat(chars.len());
    }
    let tail: String = chars[chars.len() - 4..].iter().collect();
    let head: String = chars[..3].iter().collect();
    format!("{head}{}{tail}", "*".repeat(chars.len() - 7))
}

/// The o-series and GPT-5 reasoning models (not `gpt-5-chat…`), which take
/// `max_completion_tokens` and only the default temperature.
pub(crate) fn is_reasoning_model(model: &str) -> bool {
    ["o1", "o3", "o4", "gpt-5"]
        .iter()
        .any(|p| model.starts_with(p))
        && !model.starts_with("gpt-5-chat")
}

/// Authenticate, then validate the headers and body.
pub(crate) fn check(config: &Config, headers: &HeaderMap, body: &[u8]) -> Checking<Checked> {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| !k.is_empty());
    match bearer {
        None => {
            return Err(error(
                401,
                "invalid_request_error",
                "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from https://platform.openai.com/account/api-keys.",
                None,
                None,
            ));
        }
        Some(k) if !config.keys.iter().any(|known| known == k) => {
            return Err(error(
                401,
                "invalid_request_error",
                format!(
                    "Incorrect API key provided: {}. You can find your API key at https://platform.openai.com/account/api-keys.",
                    mask(k)
                ),
                None,
                Some("invalid_api_key"),
            ));
        }
        Some(_) => {}
    }
    if !is_json_content_type(headers) {
        return Err(invalid(NOT_JSON, None, None));
    }
    let body: Value = serde_json::from_slice(body).map_err(|_| invalid(NOT_JSON, None, None))?;
    let Some(obj) = body.as_object() else {
        return Err(invalid(NOT_JSON, None, None));
    };
    for key in obj.keys() {
        if !FIELDS.contains(&key.as_str()) {
            return Err(invalid(
                format!("Unrecognized request argument supplied: {key}"),
                None,
                None,
            ));
        }
    }
    let model = match obj.get("model") {
        None | Some(Value::Null) => {
            return Err(invalid("you must provide a model parameter", None, None));
        }
        Some(Value::String(m)) if m.is_empty() => {
            return Err(invalid("you must provide a model parameter", None, None));
        }
        Some(Value::String(m)) => m.clone(),
        Some(other) => {
            return Err(invalid(
                format!(
                    "Invalid type for 'model': expected a string, but got {} instead.",
                    type_name(other)
                ),
                Some("model"),
                Some("invalid_type"),
            ));
        }
    };
    if let Some(known) = &config.known_models
        && !known.contains(&model)
    {
        return Err(error(
            404,
            "invalid_request_error",
            format!("The model `{model}` does not exist or you do not have access to it."),
            None,
            Some("model_not_found"),
        ));
    }
    if obj.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(invalid(
            "stream: this stand-in serves non-streaming requests only",
            Some("stream"),
            None,
        ));
    }
    check_limits(obj, &model)?;
    let tool_names = match obj.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(tools) => check_tools(tools)?,
    };
    match obj.get("messages") {
        None => {
            return Err(invalid(
                "Missing required parameter: 'messages'.",
                Some("messages"),
                Some("missing_required_parameter"),
            ));
        }
        Some(Value::Array(messages)) => check_messages(messages)?,
        Some(other) => {
            return Err(invalid(
                format!(
                    "Invalid type for 'messages': expected an array of objects, but got {} instead.",
                    type_name(other)
                ),
                Some("messages"),
                Some("invalid_type"),
            ));
        }
    }
    Ok(Checked {
        model,
        tool_names,
        prompt_tokens: estimate_tokens(&body),
    })
}

/// `max_tokens`, `max_completion_tokens` and `temperature`.
fn check_limits(obj: &serde_json::Map<String, Value>, model: &str) -> Checking<()> {
    for field in ["max_tokens", "max_completion_tokens"] {
        match obj.get(field) {
            None | Some(Value::Null) => {}
            Some(v) => match v.as_i64() {
                Some(n) if n < 1 => {
                    return Err(invalid(
                        format!(
                            "Invalid '{field}': integer below minimum value. Expected a value >= 1, but got {n} instead."
                        ),
                        Some(field),
                        Some("integer_below_min_value"),
                    ));
                }
                Some(_) => {}
                None if v.as_u64().is_some() => {}
                None => {
                    return Err(invalid(
                        format!(
                            "Invalid type for '{field}': expected an integer, but got {} instead.",
                            type_name(v)
                        ),
                        Some(field),
                        Some("invalid_type"),
                    ));
                }
            },
        }
    }
    let has = |f: &str| obj.get(f).is_some_and(|v| !v.is_null());
    if has("max_tokens") && has("max_completion_tokens") {
        return Err(invalid(
            "max_tokens and max_completion_tokens cannot both be set. Use 'max_completion_tokens' only.",
            Some("max_tokens"),
            None,
        ));
    }
    let reasoning = is_reasoning_model(model);
    if reasoning && has("max_tokens") {
        return Err(invalid(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            Some("max_tokens"),
            Some("unsupported_parameter"),
        ));
    }
    if let Some(t) = obj.get("temperature").filter(|v| !v.is_null()) {
        let Some(t) = t.as_f64() else {
            return Err(invalid(
                format!(
                    "Invalid type for 'temperature': expected a decimal, but got {} instead.",
                    type_name(t)
                ),
                Some("temperature"),
                Some("invalid_type"),
            ));
        };
        if t > 2.0 {
            return Err(invalid(
                format!(
                    "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got {t} instead."
                ),
                Some("temperature"),
                Some("decimal_above_max_value"),
            ));
        }
        if t < 0.0 {
            return Err(invalid(
                format!(
                    "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got {t} instead."
                ),
                Some("temperature"),
                Some("decimal_below_min_value"),
            ));
        }
        if reasoning && (t - 1.0).abs() > f64::EPSILON {
            return Err(invalid(
                format!(
                    "Unsupported value: 'temperature' does not support {t} with this model. Only the default (1) value is supported."
                ),
                Some("temperature"),
                Some("unsupported_value"),
            ));
        }
    }
    Ok(())
}

fn check_tools(tools: &Value) -> Checking<Vec<String>> {
    let Some(tools) = tools.as_array() else {
        return Err(invalid(
            format!(
                "Invalid type for 'tools': expected an array of objects, but got {} instead.",
                type_name(tools)
            ),
            Some("tools"),
            Some("invalid_type"),
        ));
    };
    let mut names = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let kind = tool.get("type").and_then(Value::as_str);
        match kind {
            Some("function") => {}
            Some("custom") => {
                let Some(name) = tool
                    .get("custom")
                    .and_then(|c| c.get("name"))
                    .and_then(Value::as_str)
                else {
                    return Err(invalid(
                        format!("Missing required parameter: 'tools[{i}].custom.name'."),
                        Some(&format!("tools[{i}].custom.name")),
                        Some("missing_required_parameter"),
                    ));
                };
                names.push(name.to_string());
                continue;
            }
            Some(other) => {
                return Err(invalid(
                    format!(
                        "Invalid value: '{other}'. Supported values are: 'function' and 'custom'."
                    ),
                    Some(&format!("tools[{i}].type")),
                    Some("invalid_value"),
                ));
            }
            None => {
                return Err(invalid(
                    format!("Missing required parameter: 'tools[{i}].type'."),
                    Some(&format!("tools[{i}].type")),
                    Some("missing_required_parameter"),
                ));
            }
        }
        let Some(function) = tool.get("function").and_then(Value::as_object) else {
            return Err(invalid(
                format!("Missing required parameter: 'tools[{i}].function'."),
                Some(&format!("tools[{i}].function")),
                Some("missing_required_parameter"),
            ));
        };
        let param = format!("tools[{i}].function.name");
        let Some(name) = function.get("name").and_then(Value::as_str) else {
            return Err(invalid(
                format!("Missing required parameter: '{param}'."),
                Some(&param),
                Some("missing_required_parameter"),
            ));
        };
        if name.len() > 64 {
            return Err(invalid(
                format!(
                    "Invalid '{param}': string too long. Expected a string with maximum length 64, but got a string with length {} instead.",
                    name.len()
                ),
                Some(&param),
                Some("string_above_max_length"),
            ));
        }
        if !is_tool_name(name) {
            return Err(invalid(
                format!(
                    "Invalid '{param}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
                ),
                Some(&param),
                Some("invalid_value"),
            ));
        }
        let param = format!("tools[{i}].function.parameters");
        match function.get("parameters") {
            None => {}
            Some(Value::Object(schema)) => {
                let ty = schema.get("type").and_then(Value::as_str).unwrap_or("None");
                if ty != "object" {
                    return Err(invalid(
                        format!(
                            "Invalid schema for function '{name}': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{ty}\"'."
                        ),
                        Some(&param),
                        Some("invalid_function_parameters"),
                    ));
                }
            }
            Some(other) => {
                return Err(invalid(
                    format!(
                        "Invalid type for '{param}': expected an object, but got {} instead.",
                        type_name(other)
                    ),
                    Some(&param),
                    Some("invalid_type"),
                ));
            }
        }
        names.push(name.to_string());
    }
    Ok(names)
}

fn missing(param: &str) -> Outcome {
    invalid(
        format!("Missing required parameter: '{param}'."),
        Some(param),
        Some("missing_required_parameter"),
    )
}

/// Content of a system / developer / user / tool message: a string or a
/// non-empty array of parts.
fn check_content(m: &serde_json::Map<String, Value>, i: usize) -> Checking<()> {
    let param = format!("messages[{i}].content");
    match m.get("content") {
        None => Err(missing(&param)),
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(parts)) if parts.is_empty() => Err(invalid(
            format!(
                "Invalid '{param}': empty array. Expected an array with minimum length 1, but got an empty array instead."
            ),
            Some(&param),
            Some("empty_array"),
        )),
        Some(Value::Array(_)) => Ok(()),
        Some(other) => Err(invalid(
            format!(
                "Invalid type for '{param}': expected one of a string or array of objects, but got {} instead.",
                type_name(other)
            ),
            Some(&param),
            Some("invalid_type"),
        )),
    }
}

/// The tool calls of an assistant message, with their arguments checked.
fn check_tool_calls(calls: &Value, i: usize) -> Checking<Vec<&str>> {
    let param = format!("messages[{i}].tool_calls");
    let Some(calls) = calls.as_array() else {
        return Err(invalid(
            format!(
                "Invalid type for '{param}': expected an array of objects, but got {} instead.",
                type_name(calls)
            ),
            Some(&param),
            Some("invalid_type"),
        ));
    };
    if calls.is_empty() {
        return Err(invalid(
            format!(
                "Invalid '{param}': empty array. Expected an array with minimum length 1, but got an empty array instead."
            ),
            Some(&param),
            Some("empty_array"),
        ));
    }
    let mut ids = Vec::with_capacity(calls.len());
    for (j, call) in calls.iter().enumerate() {
        let base = format!("messages[{i}].tool_calls[{j}]");
        let Some(id) = call.get("id").and_then(Value::as_str) else {
            return Err(missing(&format!("{base}.id")));
        };
        match call.get("type").and_then(Value::as_str) {
            Some("function") => {}
            Some(other) => {
                return Err(invalid(
                    format!(
                        "Invalid value: '{other}'. Supported values are: 'function' and 'custom'."
                    ),
                    Some(&format!("{base}.type")),
                    Some("invalid_value"),
                ));
            }
            None => return Err(missing(&format!("{base}.type"))),
        }
        let Some(function) = call.get("function") else {
            return Err(missing(&format!("{base}.function")));
        };
        if function.get("name").and_then(Value::as_str).is_none() {
            return Err(missing(&format!("{base}.function.name")));
        }
        let param = format!("{base}.function.arguments");
        match function.get("arguments") {
            None => return Err(missing(&param)),
            Some(Value::String(args)) => {
                if let Err(e) = serde_json::from_str::<Value>(args) {
                    return Err(invalid(
                        format!("Invalid '{param}': the arguments are not valid JSON ({e})."),
                        Some(&param),
                        Some("invalid_value"),
                    ));
                }
            }
            Some(other) => {
                return Err(invalid(
                    format!(
                        "Invalid type for '{param}': expected a string, but got {} instead.",
                        type_name(other)
                    ),
                    Some(&param),
                    Some("invalid_type"),
                ));
            }
        }
        ids.push(id);
    }
    Ok(ids)
}

fn check_messages(messages: &[Value]) -> Checking<()> {
    if messages.is_empty() {
        return Err(invalid(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            Some("messages"),
            Some("empty_array"),
        ));
    }
    // The assistant message whose tool calls still wait for answers.
    let mut pending: Option<(usize, Vec<&str>)> = None;
    let unanswered = |at: usize, ids: &[&str]| {
        invalid(
            format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                ids.join(", ")
            ),
            Some(&format!("messages.[{at}].role")),
            None,
        )
    };
    for (i, message) in messages.iter().enumerate() {
        let Some(m) = message.as_object() else {
            return Err(invalid(
                format!(
                    "Invalid type for 'messages[{i}]': expected an object, but got {} instead.",
                    type_name(message)
                ),
                Some(&format!("messages[{i}]")),
                Some("invalid_type"),
            ));
        };
        let role = match m.get("role").and_then(Value::as_str) {
            None => return Err(missing(&format!("messages[{i}].role"))),
            Some(r) => r,
        };
        if role != "tool"
            && let Some((at, ids)) = &pending
        {
            return Err(unanswered(*at, ids));
        }
        match role {
            "system" | "developer" | "user" => check_content(m, i)?,
            "assistant" => {
                let calls = match m.get("tool_calls") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(calls) => check_tool_calls(calls, i)?,
                };
                let has_refusal = m.get("refusal").is_some_and(Value::is_string);
                match m.get("content") {
                    None | Some(Value::Null) if calls.is_empty() && !has_refusal => {
                        return Err(invalid(
                            "Invalid value for 'content': expected a string, got null.",
                            Some(&format!("messages.[{i}].content")),
                            None,
                        ));
                    }
                    None | Some(Value::Null) | Some(Value::String(_)) | Some(Value::Array(_)) => {}
                    Some(other) => {
                        return Err(invalid(
                            format!(
                                "Invalid type for 'messages[{i}].content': expected one of a string or array of objects, but got {} instead.",
                                type_name(other)
                            ),
                            Some(&format!("messages[{i}].content")),
                            Some("invalid_type"),
                        ));
                    }
                }
                if !calls.is_empty() {
                    pending = Some((i, calls));
                }
            }
            "tool" => {
                let Some(id) = m.get("tool_call_id").and_then(Value::as_str) else {
                    return Err(missing(&format!("messages[{i}].tool_call_id")));
                };
                check_content(m, i)?;
                let answered = match &mut pending {
                    Some((_, ids)) => match ids.iter().position(|p| *p == id) {
                        Some(pos) => {
                            ids.remove(pos);
                            true
                        }
                        None => false,
                    },
                    None => false,
                };
                if !answered {
                    return Err(invalid(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                        Some(&format!("messages.[{i}].role")),
                        None,
                    ));
                }
                if pending.as_ref().is_some_and(|(_, ids)| ids.is_empty()) {
                    pending = None;
                }
            }
            "function" => check_content(m, i)?,
            other => {
                return Err(invalid(
                    format!(
                        "Invalid value: '{other}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
                    ),
                    Some(&format!("messages[{i}].role")),
                    Some("invalid_value"),
                ));
            }
        }
    }
    if let Some((at, ids)) = &pending {
        return Err(unanswered(*at, ids));
    }
    Ok(())
}

/// Shape an answer as the API does.
pub(crate) fn render(request: &Checked, answer: Answer) -> Outcome {
    match answer {
        Answer::Reply(reply) => render_reply(request, reply),
        Answer::RateLimited {
            retry_after_secs,
            reset_requests,
            reset_tokens,
        } => {
            let mut out = error(
                429,
                "requests",
                format!(
                    "Rate limit reached for {} in organization org-standin on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in {}. Visit https://platform.openai.com/account/rate-limits to learn more.",
                    request.model,
                    reset_requests.as_deref().unwrap_or("1s")
                ),
                None,
                Some("rate_limit_exceeded"),
            );
            if let Outcome::Respond { headers, .. } = &mut out {
                headers.push(("x-ratelimit-limit-requests", "500".into()));
                headers.push(("x-ratelimit-remaining-requests", "0".into()));
                if let Some(secs) = retry_after_secs {
                    headers.push(("retry-after", secs.to_string()));
                }
                if let Some(reset) = reset_requests {
                    headers.push(("x-ratelimit-reset-requests", reset));
                }
                if let Some(reset) = reset_tokens {
                    headers.push(("x-ratelimit-reset-tokens", reset));
                }
            }
            out
        }
        Answer::ServerError => error(
            500,
            "server_error",
            "The server had an error while processing your request. Sorry about that!",
            None,
            None,
        ),
        Answer::Unavailable => error(
            503,
            "server_error",
            "The server is overloaded or not ready yet.",
            None,
            None,
        ),
        Answer::Overloaded => error(
            503,
            "server_error",
            "The engine is currently overloaded, please try again later.",
            None,
            None,
        ),
        Answer::DropConnection => Outcome::Drop,
    }
}

fn render_reply(request: &Checked, reply: Reply) -> Outcome {
    let tool_calls: Vec<Value> = reply
        .tool_calls
        .iter()
        .map(|call| {
            json!({
                "id": call.id.clone().unwrap_or_else(ids::openai_tool_call),
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call
                        .raw_arguments
                        .clone()
                        .unwrap_or_else(|| call.arguments.to_string()),
                },
            })
        })
        .collect();
    let mut message = json!({
        "role": "assistant",
        "content": reply.text,
        "refusal": reply.refusal,
        "annotations": [],
    });
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls.clone());
    }
    let finish_reason = reply.stop.clone().unwrap_or_else(|| {
        if tool_calls.is_empty() {
            "stop".into()
        } else {
            "tool_calls".into()
        }
    });
    let usage = reply.usage.unwrap_or_else(|| WireUsage {
        input_tokens: request.prompt_tokens,
        output_tokens: estimate_tokens(&message),
        ..WireUsage::default()
    });
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Outcome::Respond {
        status: 200,
        headers: vec![
            ("x-request-id", ids::openai_request()),
            ("openai-processing-ms", "42".into()),
        ],
        body: json!({
            "id": ids::openai_completion(),
            "object": "chat.completion",
            "created": created,
            "model": reply.model.clone().unwrap_or_else(|| request.model.clone()),
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": Value::Null,
                "finish_reason": finish_reason,
            }],
            "usage": {
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "total_tokens": usage.input_tokens.saturating_add(usage.output_tokens),
                "prompt_tokens_details": {
                    "cached_tokens": usage.cache_read_tokens,
                    "audio_tokens": 0,
                },
                "completion_tokens_details": {
                    "reasoning_tokens": usage.reasoning_tokens,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
            "system_fingerprint": ids::openai_fingerprint(),
        }),
        delay: Duration::from_millis(reply.delay_ms),
    }
}
