//! The Anthropic Messages API stand-in: `POST /v1/messages`.
//!
//! [`check`] refuses what the real API refuses, with its status and error
//! shape (`{"type":"error","error":{"type":…,"message":…},"request_id":…}`);
//! [`render`] shapes an [`Answer`] as the API reference shows a Message or
//! an error.

use std::collections::HashSet;
use std::time::Duration;

use http::HeaderMap;
use serde_json::{Map, Value, json};

use crate::answer::{Answer, Reply, WireUsage};
use crate::ids;
use crate::server::{Checked, Config, Outcome, estimate_tokens, is_json_content_type};

/// The `anthropic-version` values the API knows.
const VERSIONS: [&str; 2] = ["2023-06-01", "2023-01-01"];

/// At most this many blocks may carry `cache_control` in one request.
const MAX_CACHE_CONTROL_BLOCKS: usize = 4;

/// Top-level request fields of the Messages API.
const FIELDS: [&str; 18] = [
    "model",
    "messages",
    "max_tokens",
    "system",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "thinking",
    "service_tier",
    "container",
    "mcp_servers",
    "context_management",
    "inference_geo",
];

type Checking<T> = Result<T, Outcome>;

/// An error answer in Anthropic's shape.
pub(crate) fn error(status: u16, kind: &str, message: impl Into<String>) -> Outcome {
    let request_id = ids::anthropic_request();
    Outcome::Respond {
        status,
        headers: vec![("request-id", request_id.clone())],
        body: json!({
            "type": "error",
            "error": {"type": kind, "message": message.into()},
            "request_id": request_id,
        }),
        delay: Duration::ZERO,
    }
}

fn invalid(message: impl Into<String>) -> Outcome {
    error(400, "invalid_request_error", message)
}

/// Authenticate, then validate the headers and body; `Ok` carries what the
/// answer needs to know about the request.
pub(crate) fn check(config: &Config, headers: &HeaderMap, body: &[u8]) -> Checking<Checked> {
    let key = headers.get("x-api-key").map(|v| v.to_str().unwrap_or(""));
    match key {
        None => {
            return Err(error(
                401,
                "authentication_error",
                "x-api-key header is required",
            ));
        }
        Some(k) if !config.keys.iter().any(|known| known == k) => {
            return Err(error(401, "authentication_error", "invalid x-api-key"));
        }
        Some(_) => {}
    }
    match headers
        .get("anthropic-version")
        .map(|v| v.to_str().unwrap_or(""))
    {
        None => return Err(invalid("anthropic-version: header is required")),
        Some(v) if !VERSIONS.contains(&v) => {
            return Err(invalid(format!(
                "anthropic-version: unknown version '{v}' (known: {})",
                VERSIONS.join(", ")
            )));
        }
        Some(_) => {}
    }
    if !is_json_content_type(headers) {
        return Err(invalid(
            "content-type: the request body must be sent as application/json",
        ));
    }
    let body: Value = serde_json::from_slice(body).map_err(|e| {
        invalid(format!(
            "There was an issue with the request body: not valid JSON ({e})"
        ))
    })?;
    let Some(obj) = body.as_object() else {
        return Err(invalid("body: Input should be a valid dictionary"));
    };
    for key in obj.keys() {
        if !FIELDS.contains(&key.as_str()) {
            return Err(invalid(format!("{key}: Extra inputs are not permitted")));
        }
    }
    let model = match obj.get("model") {
        None => return Err(invalid("model: Field required")),
        Some(Value::String(m)) if m.is_empty() => {
            return Err(invalid("model: String should have at least 1 character"));
        }
        Some(Value::String(m)) => m.clone(),
        Some(_) => return Err(invalid("model: Input should be a valid string")),
    };
    if let Some(known) = &config.known_models
        && !known.contains(&model)
    {
        return Err(error(404, "not_found_error", format!("model: {model}")));
    }
    match obj.get("max_tokens") {
        None => return Err(invalid("max_tokens: Field required")),
        Some(v) => match v.as_u64() {
            None if v.as_i64().is_some() => {
                return Err(invalid(
                    "max_tokens: Input should be greater than or equal to 1",
                ));
            }
            None => return Err(invalid("max_tokens: Input should be a valid integer")),
            Some(0) => {
                return Err(invalid(
                    "max_tokens: Input should be greater than or equal to 1",
                ));
            }
            Some(_) => {}
        },
    }
    if obj.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(invalid(
            "stream: this stand-in serves non-streaming requests only",
        ));
    }
    if let Some(t) = obj.get("temperature") {
        let Some(t) = t.as_f64() else {
            return Err(invalid("temperature: Input should be a valid number"));
        };
        if t < 0.0 {
            return Err(invalid(
                "temperature: Input should be greater than or equal to 0",
            ));
        }
        if t > 1.0 {
            return Err(invalid(
                "temperature: Input should be less than or equal to 1",
            ));
        }
    }
    let mut cache_blocks = 0usize;
    if let Some(system) = obj.get("system") {
        check_system(system, &mut cache_blocks)?;
    }
    let tool_names = match obj.get("tools") {
        None => Vec::new(),
        Some(tools) => check_tools(tools, &mut cache_blocks)?,
    };
    if let Some(choice) = obj.get("tool_choice") {
        check_tool_choice(choice, &tool_names)?;
    }
    match obj.get("messages") {
        None => return Err(invalid("messages: Field required")),
        Some(Value::Array(messages)) => check_messages(messages, &mut cache_blocks)?,
        Some(_) => return Err(invalid("messages: Input should be a valid list")),
    }
    if cache_blocks > MAX_CACHE_CONTROL_BLOCKS {
        return Err(invalid(format!(
            "A maximum of {MAX_CACHE_CONTROL_BLOCKS} blocks with cache_control may be provided. Found {cache_blocks}."
        )));
    }
    Ok(Checked {
        model,
        tool_names,
        prompt_tokens: estimate_tokens(&body),
    })
}

/// `cache_control` is `{"type": "ephemeral"}` with an optional `ttl` of
/// `5m` or `1h`, nothing else.
fn check_cache_control(holder: &Map<String, Value>, path: &str, count: &mut usize) -> Checking<()> {
    let Some(cc) = holder.get("cache_control") else {
        return Ok(());
    };
    if cc.is_null() {
        return Ok(());
    }
    let Some(cc) = cc.as_object() else {
        return Err(invalid(format!(
            "{path}.cache_control: Input should be a valid dictionary"
        )));
    };
    if cc.get("type").and_then(Value::as_str) != Some("ephemeral") {
        return Err(invalid(format!(
            "{path}.cache_control.type: Input should be 'ephemeral'"
        )));
    }
    if let Some(ttl) = cc.get("ttl")
        && !matches!(ttl.as_str(), Some("5m" | "1h"))
    {
        return Err(invalid(format!(
            "{path}.cache_control.ttl: Input should be '5m' or '1h'"
        )));
    }
    if let Some(extra) = cc.keys().find(|k| *k != "type" && *k != "ttl") {
        return Err(invalid(format!(
            "{path}.cache_control.{extra}: Extra inputs are not permitted"
        )));
    }
    *count += 1;
    Ok(())
}

fn check_system(system: &Value, cache_blocks: &mut usize) -> Checking<()> {
    match system {
        Value::String(_) => Ok(()),
        Value::Array(blocks) => {
            for (i, block) in blocks.iter().enumerate() {
                let Some(b) = block.as_object() else {
                    return Err(invalid(format!(
                        "system.{i}: Input should be a valid dictionary"
                    )));
                };
                if b.get("type").and_then(Value::as_str) != Some("text") {
                    return Err(invalid(format!("system.{i}.type: Input should be 'text'")));
                }
                match b.get("text") {
                    Some(Value::String(t)) if t.is_empty() => {
                        return Err(invalid(format!(
                            "system.{i}.text: text content blocks must be non-empty"
                        )));
                    }
                    Some(Value::String(_)) => {}
                    _ => {
                        return Err(invalid(format!(
                            "system.{i}.text: Input should be a valid string"
                        )));
                    }
                }
                check_cache_control(b, &format!("system.{i}"), cache_blocks)?;
            }
            Ok(())
        }
        _ => Err(invalid(
            "system: Input should be a valid string or a list of text blocks",
        )),
    }
}

/// A tool name the API accepts: `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) fn is_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

fn check_tools(tools: &Value, cache_blocks: &mut usize) -> Checking<Vec<String>> {
    let Some(tools) = tools.as_array() else {
        return Err(invalid("tools: Input should be a valid list"));
    };
    let mut names = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let Some(t) = tool.as_object() else {
            return Err(invalid(format!(
                "tools.{i}: Input should be a valid dictionary"
            )));
        };
        let custom = match t.get("type") {
            None | Some(Value::Null) => true,
            Some(Value::String(kind)) => kind == "custom",
            Some(_) => {
                return Err(invalid(format!(
                    "tools.{i}.type: Input should be a valid string"
                )));
            }
        };
        let name = t.get("name").and_then(Value::as_str);
        if custom {
            let Some(name) = name else {
                return Err(invalid(format!("tools.{i}.custom.name: Field required")));
            };
            if !is_tool_name(name) {
                return Err(invalid(format!(
                    "tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
                )));
            }
            match t.get("input_schema") {
                None => {
                    return Err(invalid(format!(
                        "tools.{i}.custom.input_schema: Field required"
                    )));
                }
                Some(Value::Object(schema)) => {
                    if schema.get("type").and_then(Value::as_str) != Some("object") {
                        return Err(invalid(format!(
                            "tools.{i}.custom.input_schema.type: Input should be 'object'"
                        )));
                    }
                }
                Some(_) => {
                    return Err(invalid(format!(
                        "tools.{i}.custom.input_schema: Input should be a valid dictionary"
                    )));
                }
            }
            if let Some(d) = t.get("description")
                && !d.is_string()
            {
                return Err(invalid(format!(
                    "tools.{i}.custom.description: Input should be a valid string"
                )));
            }
            check_cache_control(t, &format!("tools.{i}.custom"), cache_blocks)?;
            names.push(name.to_string());
        } else {
            // A server tool (web search, bash, …): only its name matters here.
            let Some(name) = name else {
                return Err(invalid(format!("tools.{i}.name: Field required")));
            };
            check_cache_control(t, &format!("tools.{i}"), cache_blocks)?;
            names.push(name.to_string());
        }
    }
    let mut seen = HashSet::new();
    if names.iter().any(|n| !seen.insert(n.as_str())) {
        return Err(invalid("tools: Tool names must be unique."));
    }
    Ok(names)
}

fn check_tool_choice(choice: &Value, tool_names: &[String]) -> Checking<()> {
    let kind = choice.get("type").and_then(Value::as_str);
    match kind {
        Some("auto" | "any" | "none") => Ok(()),
        Some("tool") => match choice.get("name").and_then(Value::as_str) {
            Some(name) if tool_names.iter().any(|n| n == name) => Ok(()),
            Some(name) => Err(invalid(format!(
                "tool_choice.tool.name: tool '{name}' is not one of the provided tools"
            ))),
            None => Err(invalid("tool_choice.tool.name: Field required")),
        },
        _ => Err(invalid(
            "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'",
        )),
    }
}

/// What one message contributes to the tool pairing rules.
struct Turn<'a> {
    role: &'a str,
    /// `tool_use` ids, in order (assistant turns).
    tool_uses: Vec<&'a str>,
    /// `tool_result` ids with their block index (user turns).
    tool_results: Vec<(usize, &'a str)>,
    /// How many `tool_result` blocks open the content.
    leading_results: usize,
}

fn check_messages(messages: &[Value], cache_blocks: &mut usize) -> Checking<()> {
    if messages.is_empty() {
        return Err(invalid("messages: at least one message is required"));
    }
    let mut turns: Vec<Turn<'_>> = Vec::with_capacity(messages.len());
    let mut seen_tool_use_ids: HashSet<&str> = HashSet::new();
    let last = messages.len() - 1;
    for (i, message) in messages.iter().enumerate() {
        let Some(m) = message.as_object() else {
            return Err(invalid(format!(
                "messages.{i}: Input should be a valid dictionary"
            )));
        };
        let role = match m.get("role").and_then(Value::as_str) {
            Some(r @ ("user" | "assistant")) => r,
            Some(_) => {
                return Err(invalid(format!(
                    "messages.{i}.role: Input should be 'user' or 'assistant'"
                )));
            }
            None => return Err(invalid(format!("messages.{i}.role: Field required"))),
        };
        let mut turn = Turn {
            role,
            tool_uses: Vec::new(),
            tool_results: Vec::new(),
            leading_results: 0,
        };
        match m.get("content") {
            None => return Err(invalid(format!("messages.{i}.content: Field required"))),
            Some(Value::String(s)) => {
                // An empty final assistant turn is a prefill; anything else
                // empty is refused.
                if s.is_empty() && !(i == last && role == "assistant") {
                    return Err(invalid(format!(
                        "messages.{i}.content: text content blocks must be non-empty"
                    )));
                }
            }
            Some(Value::Array(blocks)) => {
                if blocks.is_empty() && !(i == last && role == "assistant") {
                    return Err(invalid(format!(
                        "messages.{i}.content: List should have at least 1 item"
                    )));
                }
                let mut leading = true;
                for (j, block) in blocks.iter().enumerate() {
                    let path = format!("messages.{i}.content.{j}");
                    let Some(b) = block.as_object() else {
                        return Err(invalid(format!(
                            "{path}: Input should be a valid dictionary"
                        )));
                    };
                    let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
                    if kind != "tool_result" {
                        leading = false;
                    }
                    match (kind, role) {
                        ("text", _) => match b.get("text") {
                            Some(Value::String(t)) if t.is_empty() => {
                                return Err(invalid(format!(
                                    "{path}.text: text content blocks must be non-empty"
                                )));
                            }
                            Some(Value::String(_)) => {}
                            _ => {
                                return Err(invalid(format!(
                                    "{path}.text: Input should be a valid string"
                                )));
                            }
                        },
                        ("image" | "document", "user") => {
                            if !b.get("source").is_some_and(Value::is_object) {
                                return Err(invalid(format!("{path}.source: Field required")));
                            }
                        }
                        ("tool_use", "assistant") => {
                            let id = match b.get("id") {
                                Some(Value::String(id)) => id.as_str(),
                                Some(_) => {
                                    return Err(invalid(format!(
                                        "{path}.tool_use.id: Input should be a valid string"
                                    )));
                                }
                                None => {
                                    return Err(invalid(format!(
                                        "{path}.tool_use.id: Field required"
                                    )));
                                }
                            };
                            if id.is_empty()
                                || !id
                                    .bytes()
                                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
                            {
                                return Err(invalid(format!(
                                    "{path}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                                )));
                            }
                            if b.get("name")
                                .and_then(Value::as_str)
                                .is_none_or(str::is_empty)
                            {
                                return Err(invalid(format!(
                                    "{path}.tool_use.name: Field required"
                                )));
                            }
                            if !b.get("input").is_some_and(Value::is_object) {
                                return Err(invalid(format!(
                                    "{path}.tool_use.input: Input should be a valid dictionary"
                                )));
                            }
                            if !seen_tool_use_ids.insert(id) {
                                return Err(invalid(format!(
                                    "{path}: `tool_use` ids must be unique: {id}"
                                )));
                            }
                            turn.tool_uses.push(id);
                        }
                        ("tool_result", "user") => {
                            let Some(id) = b.get("tool_use_id").and_then(Value::as_str) else {
                                return Err(invalid(format!(
                                    "{path}.tool_result.tool_use_id: Field required"
                                )));
                            };
                            match b.get("content") {
                                None | Some(Value::String(_)) | Some(Value::Array(_)) => {}
                                Some(_) => {
                                    return Err(invalid(format!(
                                        "{path}.tool_result.content: Input should be a valid string or a list of content blocks"
                                    )));
                                }
                            }
                            if let Some(e) = b.get("is_error")
                                && !e.is_boolean()
                            {
                                return Err(invalid(format!(
                                    "{path}.tool_result.is_error: Input should be a valid boolean"
                                )));
                            }
                            turn.tool_results.push((j, id));
                            if leading {
                                turn.leading_results += 1;
                            }
                        }
                        ("thinking" | "redacted_thinking", "assistant") => {}
                        ("tool_use" | "thinking" | "redacted_thinking", "user") => {
                            return Err(invalid(format!(
                                "{path}: `{kind}` blocks are only allowed in assistant messages"
                            )));
                        }
                        ("tool_result" | "image" | "document", "assistant") => {
                            return Err(invalid(format!(
                                "{path}: `{kind}` blocks are only allowed in user messages"
                            )));
                        }
                        _ => {
                            return Err(invalid(format!(
                                "{path}: Input tag '{kind}' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'"
                            )));
                        }
                    }
                    check_cache_control(b, &path, cache_blocks)?;
                }
            }
            Some(_) => {
                return Err(invalid(format!(
                    "messages.{i}.content: Input should be a valid string or a list of content blocks"
                )));
            }
        }
        turns.push(turn);
    }
    if turns.first().is_some_and(|t| t.role != "user") {
        return Err(invalid(
            "messages: first message must use the \"user\" role",
        ));
    }
    for pair in turns.windows(2) {
        if pair[0].role == pair[1].role {
            return Err(invalid(format!(
                "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"{}\" roles in a row",
                pair[1].role
            )));
        }
    }
    for (i, turn) in turns.iter().enumerate() {
        // Every tool_use is answered at the start of the next user message.
        if !turn.tool_uses.is_empty() {
            let next = turns.get(i + 1);
            let answered: Vec<&str> = next
                .map(|n| n.tool_results.iter().map(|(_, id)| *id).collect())
                .unwrap_or_default();
            let missing: Vec<&str> = turn
                .tool_uses
                .iter()
                .copied()
                .filter(|id| !answered.contains(id))
                .collect();
            if !missing.is_empty() {
                return Err(invalid(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    missing.join(", ")
                )));
            }
            if let Some(next) = next
                && next.leading_results < turn.tool_uses.len()
            {
                return Err(invalid(format!(
                    "messages.{}: Did not find {} `tool_result` block(s) at the beginning of this message. Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks.",
                    i + 1,
                    turn.tool_uses.len()
                )));
            }
        }
        // Every tool_result answers a tool_use of the previous message.
        if !turn.tool_results.is_empty() {
            let previous: &[&str] = match i.checked_sub(1).and_then(|p| turns.get(p)) {
                Some(p) => &p.tool_uses,
                None => &[],
            };
            if let Some((j, id)) = turn
                .tool_results
                .iter()
                .find(|(_, id)| !previous.contains(id))
            {
                return Err(invalid(format!(
                    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )));
            }
        }
    }
    Ok(())
}

/// Shape an answer as the API does.
pub(crate) fn render(request: &Checked, answer: Answer) -> Outcome {
    match answer {
        Answer::Reply(reply) => render_reply(request, reply),
        Answer::RateLimited {
            retry_after_secs, ..
        } => {
            let mut out = error(
                429,
                "rate_limit_error",
                "This request would exceed the rate limit for your organization of 50 requests per minute. Please reduce the prompt length or the maximum tokens requested, or try again later.",
            );
            if let Outcome::Respond { headers, .. } = &mut out {
                headers.push(("anthropic-ratelimit-requests-limit", "50".into()));
                headers.push(("anthropic-ratelimit-requests-remaining", "0".into()));
                if let Some(secs) = retry_after_secs {
                    headers.push(("retry-after", secs.to_string()));
                }
            }
            out
        }
        Answer::ServerError => error(500, "api_error", "Internal server error"),
        Answer::Unavailable => error(503, "api_error", "Service unavailable"),
        Answer::Overloaded => error(529, "overloaded_error", "Overloaded"),
        Answer::DropConnection => Outcome::Drop,
    }
}

fn render_reply(request: &Checked, reply: Reply) -> Outcome {
    let mut content = Vec::new();
    if let Some(text) = reply.text.as_deref() {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in &reply.tool_calls {
        let input = match &call.raw_arguments {
            Some(raw) => serde_json::from_str::<Value>(raw)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| call.arguments.clone()),
            None => call.arguments.clone(),
        };
        content.push(json!({
            "type": "tool_use",
            "id": call.id.clone().unwrap_or_else(ids::anthropic_tool_use),
            "name": call.name,
            "input": input,
        }));
    }
    let stop_reason = reply.stop.clone().unwrap_or_else(|| {
        if reply.refusal.is_some() {
            "refusal".into()
        } else if reply.tool_calls.is_empty() {
            "end_turn".into()
        } else {
            "tool_use".into()
        }
    });
    let usage = reply.usage.unwrap_or_else(|| WireUsage {
        input_tokens: request.prompt_tokens,
        output_tokens: estimate_tokens(&Value::Array(content.clone())),
        ..WireUsage::default()
    });
    let request_id = ids::anthropic_request();
    Outcome::Respond {
        status: 200,
        headers: vec![("request-id", request_id)],
        body: json!({
            "id": ids::anthropic_message(),
            "type": "message",
            "role": "assistant",
            "model": reply.model.clone().unwrap_or_else(|| request.model.clone()),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": Value::Null,
            "usage": {
                "input_tokens": usage.input_tokens,
                "cache_creation_input_tokens": usage.cache_creation_tokens,
                "cache_read_input_tokens": usage.cache_read_tokens,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": usage.cache_creation_tokens,
                    "ephemeral_1h_input_tokens": 0,
                },
                "output_tokens": usage.output_tokens,
                "service_tier": "standard",
            },
        }),
        delay: Duration::from_millis(reply.delay_ms),
    }
}
