//! The Anthropic and OpenAI providers against a real loopback HTTP server
//! speaking each wire format.

mod common;

use std::time::Duration;

use common::{
    Canned, TestServer, anthropic_tool_response, openai_tool_response, request_with_history,
};
use genesis_llm::{
    AnthropicProvider, ChatClient, HttpTimeouts, LlmError, OpenAiProvider, Secret, StopReason,
    Usage,
};
use serde_json::json;

fn timeouts() -> HttpTimeouts {
    HttpTimeouts {
        request: Duration::from_secs(5),
        connect: Duration::from_secs(2),
    }
}

fn anthropic(server: &TestServer, key: &str) -> AnthropicProvider {
    AnthropicProvider::new(&server.base_url, Secret::new(key), timeouts()).expect("provider")
}

fn openai(server: &TestServer, key: &str) -> OpenAiProvider {
    OpenAiProvider::new(
        format!("{}/", server.base_url),
        Secret::new(key),
        timeouts(),
    )
    .expect("provider")
}

#[tokio::test]
async fn anthropic_parses_tool_calls_usage_and_served_model() {
    let server = TestServer::start().await;
    server.answer(
        "key-a",
        Canned::json(200, anthropic_tool_response("claude-opus-4-8-20260101")),
    );
    let response = anthropic(&server, "key-a")
        .chat(request_with_history())
        .await
        .expect("chat");
    assert_eq!(response.served_model, "claude-opus-4-8-20260101");
    assert_eq!(response.text.as_deref(), Some("Greeting the operator."));
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].id, "toolu_1");
    assert_eq!(response.tool_calls[0].name, "soa_send_message");
    assert_eq!(
        response.tool_calls[0].arguments,
        json!({"message": "hello"})
    );
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 120,
            output_tokens: 33,
            cache_read_tokens: 7,
            cache_write_tokens: 0,
        }
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn anthropic_sends_messages_api_wire_format() {
    let server = TestServer::start().await;
    server.answer("key-a", Canned::json(200, anthropic_tool_response("m")));
    anthropic(&server, "key-a")
        .chat(request_with_history())
        .await
        .expect("chat");
    let seen = server.recorded();
    assert_eq!(seen.len(), 1);
    let req = &seen[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(
        req.headers.get("x-api-key").map(String::as_str),
        Some("key-a")
    );
    assert_eq!(
        req.headers.get("anthropic-version").map(String::as_str),
        Some("2023-06-01")
    );
    let body = &req.body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 1024);
    // The system prompt goes as a cacheable text block.
    assert_eq!(body["system"][0]["text"], "You are the SOA.");
    assert_eq!(body["tools"][0]["input_schema"]["required"][0], "message");
    let messages = body["messages"].as_array().expect("messages");
    // user, assistant (text + 2 tool_use), user (2 tool_result merged)
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"][1]["type"], "tool_use");
    assert_eq!(messages[1]["content"][1]["input"], json!({"window": "1h"}));
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "t1");
    assert_eq!(messages[2]["content"][1]["tool_use_id"], "t2");
}

#[tokio::test]
async fn anthropic_rate_limit_carries_retry_after() {
    let server = TestServer::start().await;
    server.answer(
        "key-a",
        Canned::raw(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error"}}"#,
        )
        .header("retry-after", "3"),
    );
    let err = anthropic(&server, "key-a")
        .chat(request_with_history())
        .await
        .expect_err("429");
    assert_eq!(
        err,
        LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(3))
        }
    );
    assert!(err.is_failover());
}

#[tokio::test]
async fn anthropic_malformed_json_is_malformed_response() {
    let server = TestServer::start().await;
    server.answer(
        "key-a",
        Canned::raw(200, "{\"model\": \"m\", \"content\": [ oops"),
    );
    let err = anthropic(&server, "key-a")
        .chat(request_with_history())
        .await
        .expect_err("malformed");
    assert!(matches!(err, LlmError::MalformedResponse { .. }), "{err:?}");
    assert!(!err.is_failover());
}

#[tokio::test]
async fn anthropic_response_without_usage_is_malformed() {
    let server = TestServer::start().await;
    let mut body = anthropic_tool_response("m");
    body.as_object_mut().expect("object").remove("usage");
    server.answer("key-a", Canned::json(200, body));
    let err = anthropic(&server, "key-a")
        .chat(request_with_history())
        .await
        .expect_err("malformed");
    assert_eq!(
        err,
        LlmError::MalformedResponse {
            detail: "anthropic response has no usage".into()
        }
    );
}

#[tokio::test]
async fn statuses_map_to_typed_errors() {
    let server = TestServer::start().await;
    server.answer("k401", Canned::raw(401, "{}"));
    server.answer("k403", Canned::raw(403, "{}"));
    server.answer("k529", Canned::raw(529, "{}"));
    server.answer("k400", Canned::raw(400, r#"{"error":"bad tool schema"}"#));
    let call = |key: &'static str| {
        let p = anthropic(&server, key);
        async move { p.chat(request_with_history()).await.expect_err("error") }
    };
    assert_eq!(call("k401").await, LlmError::Unauthorized { status: 401 });
    assert_eq!(call("k403").await, LlmError::Unauthorized { status: 403 });
    assert_eq!(call("k529").await, LlmError::Server { status: 529 });
    let bad = call("k400").await;
    assert!(
        matches!(&bad, LlmError::InvalidRequest { detail } if detail.contains("bad tool schema")),
        "{bad:?}"
    );
    assert!(!bad.is_failover());
}

#[tokio::test]
async fn slow_provider_times_out() {
    let server = TestServer::start().await;
    server.answer(
        "key-a",
        Canned::json(200, anthropic_tool_response("m")).delayed(Duration::from_secs(3)),
    );
    let provider = AnthropicProvider::new(
        &server.base_url,
        Secret::new("key-a"),
        HttpTimeouts {
            request: Duration::from_millis(200),
            connect: Duration::from_secs(1),
        },
    )
    .expect("provider");
    let err = provider
        .chat(request_with_history())
        .await
        .expect_err("timeout");
    assert_eq!(err, LlmError::Timeout);
    assert!(err.is_failover());
}

#[tokio::test]
async fn unreachable_provider_is_transport_failure() {
    // Bind then drop a listener so the port is (almost certainly) closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let provider = OpenAiProvider::new(
        format!("http://127.0.0.1:{port}"),
        Secret::new("k"),
        timeouts(),
    )
    .expect("provider");
    let err = provider
        .chat(request_with_history())
        .await
        .expect_err("transport");
    assert!(matches!(err, LlmError::Transport { .. }), "{err:?}");
    assert!(err.is_failover());
}

#[tokio::test]
async fn invalid_request_is_refused_before_sending() {
    let server = TestServer::start().await;
    server.answer("key-a", Canned::json(200, anthropic_tool_response("m")));
    let mut request = request_with_history();
    request.messages = Vec::new().into();
    let err = anthropic(&server, "key-a")
        .chat(request)
        .await
        .expect_err("invalid");
    assert_eq!(
        err,
        LlmError::InvalidRequest {
            detail: "messages is empty".into()
        }
    );
    assert!(server.recorded().is_empty(), "nothing may be sent");
}

#[tokio::test]
async fn openai_parses_function_tool_calls_and_usage() {
    let server = TestServer::start().await;
    server.answer(
        "sk-1",
        Canned::json(200, openai_tool_response("gpt-5.1-2026")),
    );
    let response = openai(&server, "sk-1")
        .chat(request_with_history())
        .await
        .expect("chat");
    assert_eq!(response.served_model, "gpt-5.1-2026");
    assert_eq!(response.text, None);
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].id, "call_abc");
    assert_eq!(response.tool_calls[0].name, "phase_complete");
    assert_eq!(response.tool_calls[0].arguments, json!({"summary": "done"}));
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 46,
            output_tokens: 9,
            cache_read_tokens: 4,
            cache_write_tokens: 0,
        }
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn openai_sends_chat_completions_wire_format() {
    let server = TestServer::start().await;
    server.answer("sk-1", Canned::json(200, openai_tool_response("m")));
    openai(&server, "sk-1")
        .chat(request_with_history())
        .await
        .expect("chat");
    let seen = server.recorded();
    let req = &seen[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(
        req.headers.get("authorization").map(String::as_str),
        Some("Bearer sk-1")
    );
    let body = &req.body;
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "soa_send_message");
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "You are the SOA."})
    );
    assert_eq!(messages[2]["role"], "assistant");
    let args = messages[2]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .expect("arguments travel as a JSON string");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(args).expect("json"),
        json!({"window": "1h"})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "t1", "content": "{\"ok\":true}"})
    );
}

#[tokio::test]
async fn openai_malformed_tool_arguments_are_malformed_response() {
    let server = TestServer::start().await;
    let mut body = openai_tool_response("m");
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] =
        json!("{\"summary\": \"unterminated");
    server.answer("sk-1", Canned::json(200, body));
    let err = openai(&server, "sk-1")
        .chat(request_with_history())
        .await
        .expect_err("malformed");
    match err {
        LlmError::MalformedResponse { detail } => {
            assert!(detail.contains("phase_complete"), "{detail}");
            assert!(detail.contains("not JSON"), "{detail}");
        }
        other => panic!("expected MalformedResponse, got {other:?}"),
    }
}

#[tokio::test]
async fn openai_retry_after_ms_is_honoured() {
    let server = TestServer::start().await;
    server.answer(
        "sk-1",
        Canned::raw(429, "{}")
            .header("retry-after-ms", "2500")
            .header("retry-after", "3"),
    );
    let err = openai(&server, "sk-1")
        .chat(request_with_history())
        .await
        .expect_err("429");
    assert_eq!(
        err,
        LlmError::RateLimited {
            retry_after: Some(Duration::from_millis(2500))
        }
    );
}

#[tokio::test]
async fn provider_debug_redacts_the_key() {
    let server = TestServer::start().await;
    let a = format!("{:?}", anthropic(&server, "sk-ant-very-secret"));
    let o = format!("{:?}", openai(&server, "sk-openai-very-secret"));
    assert!(!a.contains("very-secret") && a.contains("redacted"), "{a}");
    assert!(!o.contains("very-secret") && o.contains("redacted"), "{o}");
}
