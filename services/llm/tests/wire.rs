//! What the providers put on the wire, as a loopback server receives it:
//! Anthropic's prompt-cache breakpoints, OpenAI's invariant-first order and
//! output-cap field per model, and where each base URL spelling sends the
//! request.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    Canned, TestServer, anthropic_tool_response, openai_tool_response, request_with_history,
};
use genesis_llm::anthropic::MAX_CACHE_BREAKPOINTS;
use genesis_llm::{
    AnthropicProvider, ChatClient, ChatMessage, ChatRequest, CredentialRef, FallbackInvoker,
    HttpProviderFactory, HttpTimeouts, LlmError, LlmMetrics, MaxTokensField, ModelCouple,
    OpenAiProvider, Preset, ProviderKind, Secret, ToolSpec,
};
use serde_json::{Value, json};

fn timeouts() -> HttpTimeouts {
    HttpTimeouts {
        request: Duration::from_secs(5),
        connect: Duration::from_secs(2),
    }
}

/// How many `cache_control` markers `value` carries, at any depth.
fn breakpoints(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            usize::from(map.contains_key("cache_control"))
                + map.values().map(breakpoints).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(breakpoints).sum(),
        _ => 0,
    }
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} tool."),
        parameters: json!({"type": "object", "properties": {}}).into(),
    }
}

async fn anthropic_body(request: ChatRequest) -> Value {
    let server = TestServer::start().await;
    server.answer("key-a", Canned::json(200, anthropic_tool_response("m")));
    AnthropicProvider::new(&server.base_url, Secret::new("key-a"), timeouts())
        .expect("provider")
        .chat(request)
        .await
        .expect("chat");
    let seen = server.recorded();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/messages");
    seen[0].body.clone()
}

async fn openai_body(request: ChatRequest, field: MaxTokensField) -> Value {
    let server = TestServer::start().await;
    server.answer("sk-1", Canned::json(200, openai_tool_response("m")));
    OpenAiProvider::new(&server.base_url, Secret::new("sk-1"), timeouts())
        .expect("provider")
        .with_max_tokens_field(field)
        .chat(request)
        .await
        .expect("chat");
    let seen = server.recorded();
    assert_eq!(seen.len(), 1);
    seen[0].body.clone()
}

#[tokio::test]
async fn anthropic_marks_tools_system_head_and_tail_for_the_prompt_cache() {
    let body = anthropic_body(request_with_history()).await;
    let ephemeral = json!({"type": "ephemeral"});
    let expected = json!({
        "model": "test-model",
        "max_tokens": 1024,
        "temperature": 0.2_f32,
        "system": [{
            "type": "text",
            "text": "You are the SOA.",
            "cache_control": ephemeral,
        }],
        "tools": [{
            "name": "soa_send_message",
            "description": "Send the operator a message.",
            "input_schema": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"]
            },
            "cache_control": ephemeral,
        }],
        "messages": [
            {"role": "user", "content": [{
                "type": "text",
                "text": "EVENT: AgentInitialized\nSurvey and greet.",
                "cache_control": ephemeral,
            }]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Looking around."},
                {"type": "tool_use", "id": "t1", "name": "soa_query_telemetry",
                 "input": {"window": "1h"}},
                {"type": "tool_use", "id": "t2", "name": "agent_query_memory", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "{\"ok\":true}"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "{\"items\":[]}",
                 "cache_control": ephemeral},
            ]},
        ],
    });
    assert_eq!(body, expected);
    assert_eq!(breakpoints(&body), MAX_CACHE_BREAKPOINTS);
}

#[tokio::test]
async fn anthropic_marks_only_the_last_of_several_tools() {
    let mut request = request_with_history();
    request.tools = vec![tool("a"), tool("b"), tool("c")].into();
    let body = anthropic_body(request).await;
    let tools = body["tools"].as_array().expect("tools");
    let marked: Vec<bool> = tools
        .iter()
        .map(|t| t.get("cache_control").is_some())
        .collect();
    assert_eq!(marked, [false, false, true]);
    assert!(breakpoints(&body) <= MAX_CACHE_BREAKPOINTS);
}

#[tokio::test]
async fn anthropic_without_tools_sends_no_tool_breakpoint() {
    let request = ChatRequest {
        model: "m".into(),
        system: String::new(),
        messages: vec![ChatMessage::user("Objective: greet the operator.")].into(),
        tools: Vec::new().into(),
        max_output_tokens: 64,
        temperature: None,
    };
    let body = anthropic_body(request).await;
    assert_eq!(
        body,
        json!({
            "model": "m",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": [{
                "type": "text",
                "text": "Objective: greet the operator.",
                "cache_control": {"type": "ephemeral"},
            }]}],
        }),
        "no tools, no system: the head is the only breakpoint"
    );
    assert_eq!(breakpoints(&body), 1);
}

#[tokio::test]
async fn anthropic_marks_the_stable_head_not_the_changing_rest_of_the_first_turn() {
    let request = ChatRequest {
        model: "m".into(),
        system: "sys".into(),
        messages: vec![
            ChatMessage::user("Objective: keep the fleet healthy."),
            ChatMessage::user("Tick 42 at 12:00: two alerts."),
        ]
        .into(),
        tools: vec![tool("a")].into(),
        max_output_tokens: 64,
        temperature: None,
    };
    let body = anthropic_body(request).await;
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1, "one user turn");
    let blocks = messages[0]["content"].as_array().expect("blocks");
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0]["cache_control"], json!({"type": "ephemeral"}));
    assert!(blocks[1].get("cache_control").is_none(), "{body}");
    assert_eq!(breakpoints(&body), 3, "tools, system, head");
}

#[tokio::test]
async fn anthropic_never_marks_an_empty_text_block() {
    let request = ChatRequest {
        model: "m".into(),
        system: String::new(),
        messages: vec![ChatMessage::user("")].into(),
        tools: Vec::new().into(),
        max_output_tokens: 64,
        temperature: None,
    };
    let body = anthropic_body(request).await;
    assert_eq!(breakpoints(&body), 0, "{body}");
}

#[tokio::test]
async fn openai_puts_the_invariant_parts_first_and_marks_nothing() {
    let body = openai_body(request_with_history(), MaxTokensField::MaxTokens).await;
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "You are the SOA."})
    );
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "EVENT: AgentInitialized\nSurvey and greet."})
    );
    assert_eq!(body["tools"][0]["function"]["name"], "soa_send_message");
    assert_eq!(breakpoints(&body), 0, "OpenAI caches without markers");
}

#[tokio::test]
async fn openai_reasoning_models_get_max_completion_tokens_and_no_temperature() {
    for model in [
        "o1",
        "o3-mini",
        "o4-mini-2025-04-16",
        "gpt-5.1",
        "openai/o3",
    ] {
        let mut request = request_with_history();
        request.model = model.into();
        let body = openai_body(request, MaxTokensField::MaxTokens).await;
        assert_eq!(body["max_completion_tokens"], 1024, "{model}: {body}");
        assert!(body.get("max_tokens").is_none(), "{model}: {body}");
        assert!(body.get("temperature").is_none(), "{model}: {body}");
    }
    for model in ["gpt-4.1", "gpt-4o-mini", "llama-3.3-70b", "omni-moderation"] {
        let mut request = request_with_history();
        request.model = model.into();
        let body = openai_body(request, MaxTokensField::MaxTokens).await;
        assert_eq!(body["max_tokens"], 1024, "{model}: {body}");
        assert!(
            body.get("max_completion_tokens").is_none(),
            "{model}: {body}"
        );
        assert_eq!(body["temperature"], json!(0.2_f32), "{model}: {body}");
    }
    // The configured default applies to the other models.
    let mut request = request_with_history();
    request.model = "gpt-4.1".into();
    let body = openai_body(request, MaxTokensField::MaxCompletionTokens).await;
    assert_eq!(body["max_completion_tokens"], 1024);
    assert!(body.get("max_tokens").is_none());
}

#[tokio::test]
async fn the_output_cap_field_is_chosen_per_couple() {
    let server = TestServer::start().await;
    // The first couple's request is refused, the second couple's answered.
    server.answer_first("sk-1", vec![Canned::raw(401, "{}")]);
    server.answer("sk-1", Canned::json(200, openai_tool_response("o3")));
    let factory = HttpProviderFactory::new(timeouts())
        .expect("factory")
        .with_openai_base_url(format!("{}/v1", server.base_url));
    let invoker = FallbackInvoker::new(Arc::new(factory))
        .with_metrics(Arc::new(LlmMetrics::default()))
        .with_cooldowns(Arc::default());
    let preset = Preset {
        id: "p".into(),
        name: "P".into(),
        model: "gpt-4.1".into(),
        provider: ProviderKind::OpenAi,
        backend: "api".into(),
        credentials: vec![CredentialRef::new("key", "sk-1")],
        fallback: vec![ModelCouple::new("o3", ProviderKind::OpenAi, "api")],
        overlays: Default::default(),
    };

    let out = invoker
        .invoke(&preset, request_with_history())
        .await
        .expect("o3 answers");
    assert_eq!(out.couple.model, "o3");

    let seen = server.recorded();
    let by_model = |model: &str| {
        seen.iter()
            .find(|r| r.body["model"] == model)
            .unwrap_or_else(|| panic!("no request for {model}"))
            .body
            .clone()
    };
    let old = by_model("gpt-4.1");
    assert_eq!(old["max_tokens"], 1024);
    assert!(old.get("max_completion_tokens").is_none());
    let new = by_model("o3");
    assert_eq!(new["max_completion_tokens"], 1024);
    assert!(new.get("max_tokens").is_none());
    assert!(
        seen.iter().all(|r| r.path == "/v1/chat/completions"),
        "OPENAI_BASE_URL with /v1 is not doubled: {:?}",
        seen.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn every_base_url_spelling_reaches_the_endpoint_exactly_once() {
    let server = TestServer::start().await;
    server.answer("sk-1", Canned::json(200, openai_tool_response("m")));
    server.answer("key-a", Canned::json(200, anthropic_tool_response("m")));
    let base = &server.base_url;
    for url in [
        base.clone(),
        format!("{base}/"),
        format!("{base}/v1"),
        format!("{base}/v1/"),
    ] {
        OpenAiProvider::new(&url, Secret::new("sk-1"), timeouts())
            .expect("provider")
            .chat(request_with_history())
            .await
            .expect("chat");
        AnthropicProvider::new(&url, Secret::new("key-a"), timeouts())
            .expect("provider")
            .chat(request_with_history())
            .await
            .expect("chat");
    }
    let paths: Vec<String> = server.recorded().into_iter().map(|r| r.path).collect();
    assert_eq!(paths.len(), 8);
    for pair in paths.chunks(2) {
        assert_eq!(pair, ["/v1/chat/completions", "/v1/messages"]);
    }
}

#[tokio::test]
async fn a_backend_base_url_routes_its_couples() {
    let public = TestServer::start().await;
    let gateway = TestServer::start().await;
    gateway.answer("key-a", Canned::json(200, anthropic_tool_response("m")));
    let factory = HttpProviderFactory::new(timeouts())
        .expect("factory")
        .with_anthropic_base_url(&public.base_url)
        .with_backend_base_url("gateway", format!("{}/v1", gateway.base_url));
    factory.validate().expect("valid URLs");
    let invoker = FallbackInvoker::new(Arc::new(factory))
        .with_metrics(Arc::new(LlmMetrics::default()))
        .with_cooldowns(Arc::default());
    let preset = Preset {
        id: "p".into(),
        name: "P".into(),
        model: "claude-opus-4-8".into(),
        provider: ProviderKind::Anthropic,
        backend: "gateway".into(),
        credentials: vec![CredentialRef::new("k", "key-a")],
        fallback: Vec::new(),
        overlays: Default::default(),
    };

    invoker
        .invoke(&preset, request_with_history())
        .await
        .expect("the gateway answers");

    assert!(public.recorded().is_empty());
    let seen = gateway.recorded();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/messages");
}

#[tokio::test]
async fn a_base_url_that_is_not_http_is_refused_and_never_used() {
    for bad in [
        "ftp://llm.example",
        "file:///etc/passwd",
        "llm.example:443",
        "",
    ] {
        let err = AnthropicProvider::new(bad, Secret::new("k"), timeouts()).expect_err("refused");
        assert!(
            matches!(err, LlmError::InvalidRequest { .. }),
            "{bad}: {err}"
        );
        OpenAiProvider::new(bad, Secret::new("k"), timeouts()).expect_err("refused");
    }

    let server = TestServer::start().await;
    server.answer("sk-1", Canned::json(200, openai_tool_response("m")));
    let factory = HttpProviderFactory::new(timeouts())
        .expect("factory")
        .with_openai_base_url("ftp://user:hunter2@llm.example/v1");
    let err = factory.validate().expect_err("refused").to_string();
    assert!(
        err.contains("OPENAI_BASE_URL") && err.contains("http:// or https://"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    let invoker = FallbackInvoker::new(Arc::new(factory))
        .with_metrics(Arc::new(LlmMetrics::default()))
        .with_cooldowns(Arc::default());
    let preset = Preset {
        id: "p".into(),
        name: "P".into(),
        model: "gpt-4.1".into(),
        provider: ProviderKind::OpenAi,
        backend: "api".into(),
        credentials: vec![CredentialRef::new("k", "sk-1")],
        fallback: Vec::new(),
        overlays: Default::default(),
    };
    let err = invoker
        .invoke(&preset, request_with_history())
        .await
        .expect_err("nothing is sent");
    assert!(
        matches!(&err.error, LlmError::InvalidRequest { detail } if detail.contains("OPENAI_BASE_URL")),
        "{:?}",
        err.error
    );
    assert!(server.recorded().is_empty());

    let bad_backend = HttpProviderFactory::new(timeouts())
        .expect("factory")
        .with_backend_base_url("gw", "gopher://gw.example");
    let err = bad_backend.validate().expect_err("refused").to_string();
    assert!(err.contains("backend \"gw\""), "{err}");
}
