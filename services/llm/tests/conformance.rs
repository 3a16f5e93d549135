//! Wire-format conformance: the real [`AnthropicProvider`] and
//! [`OpenAiProvider`] against the strict stand-ins of their APIs
//! (`genesis-llm-standin`), which refuse what the real APIs refuse. A
//! conversation that gets through proves the providers' requests are valid
//! wire format; the scripted answers, shaped as the API references show,
//! prove the responses are parsed (text, tool calls, served model, stop
//! reasons, refusals, usage normalised as [`Usage`] documents) and faults
//! mapped onto [`LlmError`].

use std::sync::Arc;
use std::time::Duration;

use genesis_llm::{
    AnthropicProvider, ChatClient, ChatMessage, ChatRequest, ChatResponse, HttpTimeouts, LlmError,
    OpenAiProvider, Secret, StopReason, ToolCall, ToolSpec, Usage,
};
use genesis_llm_standin::{Answer, Endpoint, Reply, StandIn, ToolCallSpec, WireUsage};
use serde_json::{Value, json};

const KEY: &str = "sk-conformance-key-0001";

fn timeouts() -> HttpTimeouts {
    HttpTimeouts {
        request: Duration::from_secs(5),
        connect: Duration::from_secs(2),
    }
}

async fn standin() -> StandIn {
    StandIn::start(KEY).await.expect("start stand-in")
}

fn anthropic(s: &StandIn) -> AnthropicProvider {
    AnthropicProvider::new(s.base_url(), Secret::new(KEY), timeouts()).expect("provider")
}

fn openai(s: &StandIn) -> OpenAiProvider {
    OpenAiProvider::new(s.base_url(), Secret::new(KEY), timeouts()).expect("provider")
}

fn tool(name: &str, required: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} tool."),
        parameters: Arc::new(json!({
            "type": "object",
            "properties": {required: {"type": "string"}},
            "required": [required]
        })),
    }
}

fn request(model: &str, messages: &[ChatMessage]) -> ChatRequest {
    ChatRequest {
        model: model.into(),
        system: "You are the SOA. Act only through tool calls.".into(),
        messages: messages.to_vec().into(),
        tools: vec![
            tool("lookup", "q"),
            tool("soa_send_message", "message"),
            tool("phase_complete", "summary"),
        ]
        .into(),
        max_output_tokens: 1024,
        temperature: None,
    }
}

fn opening() -> Vec<ChatMessage> {
    vec![ChatMessage::user(
        "EVENT: AgentInitialized\nSurvey the fleet and greet the operator.",
    )]
}

/// Every `cache_control` marker anywhere in a request body.
fn cache_markers(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            usize::from(map.contains_key("cache_control"))
                + map.values().map(cache_markers).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(cache_markers).sum(),
        _ => 0,
    }
}

/// Queue three turns on `endpoint` — text plus one call, two parallel calls
/// with newlines in their arguments, then `phase_complete` — and play them
/// the way the planning loop does: each response is replayed as an assistant
/// message followed by one tool result per call.
async fn three_turns(
    client: &dyn ChatClient,
    s: &StandIn,
    endpoint: Endpoint,
    model: &str,
) -> Vec<ChatResponse> {
    s.push(
        endpoint,
        Reply::new()
            .with_text("Looking around first.")
            .with_tool_call(ToolCallSpec::new("lookup", json!({"q": "fleet status"}))),
    );
    s.push(
        endpoint,
        Reply::new()
            .with_tool_call(ToolCallSpec::new(
                "lookup",
                json!({"q": "line one\nline two"}),
            ))
            .with_tool_call(ToolCallSpec::new(
                "soa_send_message",
                json!({"message": "Hello,\noperator."}),
            )),
    );
    s.push(
        endpoint,
        Reply::tool_call(
            "phase_complete",
            json!({"summary": "Greeted the operator."}),
        ),
    );
    let mut messages = opening();
    let mut responses = Vec::new();
    for turn in 1..=3 {
        let response = client
            .chat(request(model, &messages))
            .await
            .unwrap_or_else(|e| panic!("turn {turn}: {e}; last request: {:?}", s.last_request()));
        messages.push(ChatMessage::assistant(
            response.text.clone(),
            response.tool_calls.clone(),
        ));
        if response
            .tool_calls
            .iter()
            .any(|c| c.name == "phase_complete")
        {
            responses.push(response);
            break;
        }
        for call in &response.tool_calls {
            messages.push(ChatMessage::tool(
                call.id.clone(),
                format!("{{\"ok\":true,\"turn\":{turn}}}"),
            ));
        }
        responses.push(response);
    }
    responses
}

fn names(response: &ChatResponse) -> Vec<&str> {
    response
        .tool_calls
        .iter()
        .map(|c| c.name.as_str())
        .collect()
}

// ---------------------------------------------------------------- Anthropic

#[tokio::test]
async fn anthropic_three_turn_tool_conversation_passes_the_strict_rules() {
    let s = standin().await;
    let responses = three_turns(&anthropic(&s), &s, Endpoint::Anthropic, "claude-sonnet-4-5").await;
    assert_eq!(responses.len(), 3);
    assert_eq!(responses[0].text.as_deref(), Some("Looking around first."));
    assert_eq!(names(&responses[0]), ["lookup"]);
    assert_eq!(names(&responses[1]), ["lookup", "soa_send_message"]);
    assert_eq!(
        responses[1].tool_calls[0].arguments,
        json!({"q": "line one\nline two"})
    );
    assert_eq!(names(&responses[2]), ["phase_complete"]);
    let seen = s.requests();
    assert_eq!(seen.len(), 3, "one request per turn, none refused");
    assert!(seen.iter().all(|r| r.status == Some(200)), "{seen:?}");
    // Turn 3 answered both parallel calls of turn 2, tool results first.
    let last = &seen[2].body["messages"];
    let last_user = &last[last.as_array().map_or(0, Vec::len) - 1];
    assert_eq!(last_user["role"], "user");
    for (i, call) in responses[1].tool_calls.iter().enumerate() {
        assert_eq!(last_user["content"][i]["type"], "tool_result");
        assert_eq!(last_user["content"][i]["tool_use_id"], call.id.as_str());
    }
    assert!(seen.iter().all(|r| cache_markers(&r.body) <= 4));
}

#[tokio::test]
async fn anthropic_tool_results_followed_by_an_operator_note_stay_first() {
    let s = standin().await;
    let call = ToolCall {
        id: "toolu_01A".into(),
        name: "lookup".into(),
        arguments: json!({"q": "x"}),
    };
    let mut messages = opening();
    messages.push(ChatMessage::assistant(Some("Checking.".into()), vec![call]));
    messages.push(ChatMessage::tool("toolu_01A", "{\"ok\":true}"));
    messages.push(ChatMessage::user("OPERATOR_MESSAGE: also check the queue"));
    let response = anthropic(&s)
        .chat(request("claude-sonnet-4-5", &messages))
        .await
        .expect("accepted");
    assert_eq!(response.stop_reason, StopReason::ToolUse, "default answer");
    let body = s.last_request().expect("recorded").body;
    assert_eq!(body["messages"][2]["content"][0]["type"], "tool_result");
    assert_eq!(body["messages"][2]["content"][1]["type"], "text");
}

#[tokio::test]
async fn anthropic_a_turn_without_tool_calls_then_a_nudge_is_valid() {
    let s = standin().await;
    for text in [None, Some("I think we are done.".to_string())] {
        let mut messages = opening();
        messages.push(ChatMessage::assistant(text.clone(), vec![]));
        messages.push(ChatMessage::user("You made no tool call."));
        let result = anthropic(&s)
            .chat(request("claude-sonnet-4-5", &messages))
            .await;
        assert!(
            result.is_ok(),
            "text {text:?}: {result:?} / {:?}",
            s.last_request()
        );
    }
}

#[tokio::test]
async fn anthropic_a_long_conversation_stays_within_four_cache_breakpoints() {
    let s = standin().await;
    let mut messages = opening();
    for turn in 0..6 {
        let id = format!("toolu_turn{turn}");
        messages.push(ChatMessage::assistant(
            Some(format!("Turn {turn}.")),
            vec![ToolCall {
                id: id.clone(),
                name: "lookup".into(),
                arguments: json!({"q": turn.to_string()}),
            }],
        ));
        messages.push(ChatMessage::tool(id, "{\"ok\":true}"));
    }
    anthropic(&s)
        .chat(request("claude-sonnet-4-5", &messages))
        .await
        .expect("accepted");
    let recorded = s.last_request().expect("recorded");
    assert_eq!(recorded.status, Some(200));
    assert!(cache_markers(&recorded.body) <= 4, "{}", recorded.body);
}

#[tokio::test]
async fn anthropic_answers_are_parsed_with_ids_arguments_and_the_dated_model() {
    let s = standin().await;
    s.push_anthropic(
        Reply::new()
            .with_text("Two lookups.")
            .with_tool_call(
                ToolCallSpec::new("lookup", json!({"q": "a\n\tb \"quoted\""})).id("toolu_01XYZ"),
            )
            .with_tool_call(ToolCallSpec::new(
                "lookup",
                json!({"q": "c", "extra": [1, 2]}),
            ))
            .model("claude-sonnet-4-5-20250929"),
    );
    let r = anthropic(&s)
        .chat(request("claude-sonnet-4-5", &opening()))
        .await
        .expect("chat");
    assert_eq!(r.served_model, "claude-sonnet-4-5-20250929");
    assert_eq!(r.text.as_deref(), Some("Two lookups."));
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[0].id, "toolu_01XYZ");
    assert_eq!(r.tool_calls[0].arguments, json!({"q": "a\n\tb \"quoted\""}));
    assert!(
        r.tool_calls[1].id.starts_with("toolu_01"),
        "{}",
        r.tool_calls[1].id
    );
    assert_eq!(
        r.tool_calls[1].arguments,
        json!({"q": "c", "extra": [1, 2]})
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn anthropic_usage_keeps_cache_reads_and_writes_apart() {
    let s = standin().await;
    s.push_anthropic(Reply::text("ok").usage(WireUsage::anthropic(300, 37, 120, 512)));
    let r = anthropic(&s)
        .chat(request("claude-sonnet-4-5", &opening()))
        .await
        .expect("chat");
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 300,
            output_tokens: 37,
            cache_read_tokens: 512,
            cache_write_tokens: 120,
        }
    );
    assert_eq!(r.usage.prompt_tokens(), 932);
}

#[tokio::test]
async fn anthropic_stop_reasons_are_mapped() {
    let s = standin().await;
    for (wire, want) in [
        ("end_turn", StopReason::EndTurn),
        ("max_tokens", StopReason::MaxTokens),
        ("stop_sequence", StopReason::StopSequence),
        ("refusal", StopReason::Refusal),
        ("pause_turn", StopReason::PauseTurn),
        ("model_context_window_exceeded", StopReason::MaxTokens),
        (
            "some_future_reason",
            StopReason::Other("some_future_reason".into()),
        ),
    ] {
        s.push_anthropic(Reply::text("partial answer").stop(wire));
        let r = anthropic(&s)
            .chat(request("claude-sonnet-4-5", &opening()))
            .await
            .expect("chat");
        assert_eq!(r.stop_reason, want, "{wire}");
        assert_eq!(r.text.as_deref(), Some("partial answer"), "{wire}");
    }
}

#[tokio::test]
async fn anthropic_a_refusal_without_content_is_a_refusal_with_no_text() {
    let s = standin().await;
    s.push_anthropic(Reply::new().refusal("declined"));
    let r = anthropic(&s)
        .chat(request("claude-sonnet-4-5", &opening()))
        .await
        .expect("chat");
    assert_eq!(r.stop_reason, StopReason::Refusal);
    assert_eq!(r.text, None);
    assert!(r.tool_calls.is_empty());
}

#[tokio::test]
async fn anthropic_faults_map_onto_the_error_vocabulary() {
    let s = standin().await;
    s.push_anthropic(Answer::rate_limited(7));
    s.push_anthropic(Answer::ServerError);
    s.push_anthropic(Answer::Unavailable);
    s.push_anthropic(Answer::Overloaded);
    s.push_anthropic(Answer::DropConnection);
    let p = anthropic(&s);
    let mut errors = Vec::new();
    for _ in 0..5 {
        errors.push(
            p.chat(request("claude-sonnet-4-5", &opening()))
                .await
                .expect_err("fault"),
        );
    }
    assert_eq!(
        errors[0],
        LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(7))
        }
    );
    assert_eq!(errors[1], LlmError::Server { status: 500 });
    assert_eq!(errors[2], LlmError::Server { status: 503 });
    assert_eq!(errors[3], LlmError::Server { status: 529 });
    assert!(
        matches!(errors[4], LlmError::Transport { .. }),
        "{:?}",
        errors[4]
    );
    assert!(errors.iter().all(LlmError::is_failover));
    assert_eq!(
        s.request_count(),
        5,
        "one request per call, no retry inside"
    );
}

#[tokio::test]
async fn anthropic_a_wrong_key_is_unauthorized() {
    let s = standin().await;
    let p = AnthropicProvider::new(s.base_url(), Secret::new("sk-other"), timeouts())
        .expect("provider");
    let e = p
        .chat(request("claude-sonnet-4-5", &opening()))
        .await
        .expect_err("refused");
    assert_eq!(e, LlmError::Unauthorized { status: 401 });
}

#[tokio::test]
async fn anthropic_an_unknown_model_is_an_invalid_request() {
    let s = StandIn::builder()
        .key(KEY)
        .known_models(["claude-sonnet-4-5"])
        .start()
        .await
        .expect("start");
    let e = anthropic(&s)
        .chat(request("claude-nope", &opening()))
        .await
        .expect_err("refused");
    assert!(
        matches!(&e, LlmError::InvalidRequest { detail } if detail.contains("404")),
        "{e:?}"
    );
    assert!(!e.is_failover());
}

#[tokio::test]
async fn anthropic_a_temperature_above_one_is_not_sent_as_is() {
    let s = standin().await;
    let mut req = request("claude-sonnet-4-5", &opening());
    req.temperature = Some(1.5);
    let result = anthropic(&s).chat(req).await;
    assert!(
        result.is_ok(),
        "{result:?} / {:?}",
        s.last_request().map(|r| r.response)
    );
}

#[tokio::test]
async fn anthropic_replays_tool_call_ids_minted_by_other_providers() {
    // An episode whose first turn an OpenAI-compatible server answered
    // (ids such as `functions.lookup:0`) falls back to Anthropic.
    let s = standin().await;
    let mut messages = opening();
    messages.push(ChatMessage::assistant(
        None,
        vec![ToolCall {
            id: "functions.lookup:0".into(),
            name: "lookup".into(),
            arguments: json!({"q": "x"}),
        }],
    ));
    messages.push(ChatMessage::tool("functions.lookup:0", "{\"ok\":true}"));
    let result = anthropic(&s)
        .chat(request("claude-sonnet-4-5", &messages))
        .await;
    assert!(
        result.is_ok(),
        "{result:?} / {:?}",
        s.last_request().map(|r| r.response)
    );
}

// ------------------------------------------------------------------ OpenAI

#[tokio::test]
async fn openai_three_turn_tool_conversation_passes_the_strict_rules() {
    let s = standin().await;
    let responses = three_turns(&openai(&s), &s, Endpoint::OpenAi, "gpt-4o").await;
    assert_eq!(responses.len(), 3);
    assert_eq!(responses[0].text.as_deref(), Some("Looking around first."));
    assert_eq!(names(&responses[0]), ["lookup"]);
    assert_eq!(names(&responses[1]), ["lookup", "soa_send_message"]);
    assert_eq!(
        responses[1].tool_calls[1].arguments,
        json!({"message": "Hello,\noperator."})
    );
    assert_eq!(names(&responses[2]), ["phase_complete"]);
    let seen = s.requests();
    assert_eq!(seen.len(), 3, "one request per turn, none refused");
    assert!(seen.iter().all(|r| r.status == Some(200)), "{seen:?}");
    // Turn 3 replayed turn 2's calls with string arguments and answered
    // each of them with a tool message right after.
    let wire = seen[2].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let at = wire
        .iter()
        .position(|m| m["tool_calls"].as_array().is_some_and(|c| c.len() == 2))
        .expect("the parallel turn");
    for (i, call) in responses[1].tool_calls.iter().enumerate() {
        let sent = &wire[at]["tool_calls"][i];
        assert_eq!(sent["id"], call.id.as_str());
        let args = sent["function"]["arguments"]
            .as_str()
            .expect("string arguments");
        assert_eq!(
            serde_json::from_str::<Value>(args).expect("json"),
            call.arguments
        );
        assert_eq!(wire[at + 1 + i]["role"], "tool");
        assert_eq!(wire[at + 1 + i]["tool_call_id"], call.id.as_str());
    }
}

#[tokio::test]
async fn openai_answers_are_parsed_with_ids_arguments_and_the_dated_model() {
    let s = standin().await;
    s.push_openai(
        Reply::new()
            .with_text("Let me check two things.")
            .with_tool_call(
                ToolCallSpec::new("lookup", json!({}))
                    .id("call_pretty")
                    .raw_arguments("{\n  \"q\": \"multi\\nline\"\n}"),
            )
            .with_tool_call(ToolCallSpec::new(
                "soa_send_message",
                json!({"message": "a\nb"}),
            ))
            .model("gpt-4o-2024-08-06"),
    );
    let r = openai(&s)
        .chat(request("gpt-4o", &opening()))
        .await
        .expect("chat");
    assert_eq!(r.served_model, "gpt-4o-2024-08-06");
    assert_eq!(r.text.as_deref(), Some("Let me check two things."));
    assert_eq!(r.tool_calls[0].id, "call_pretty");
    assert_eq!(r.tool_calls[0].arguments, json!({"q": "multi\nline"}));
    assert!(r.tool_calls[1].id.starts_with("call_"));
    assert_eq!(r.tool_calls[1].arguments, json!({"message": "a\nb"}));
    assert_eq!(r.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn openai_tool_calls_with_null_content_have_no_text() {
    let s = standin().await;
    s.push_openai(Reply::tool_call(
        "phase_complete",
        json!({"summary": "done"}),
    ));
    let r = openai(&s)
        .chat(request("gpt-4o", &opening()))
        .await
        .expect("chat");
    assert_eq!(r.text, None);
    assert_eq!(names(&r), ["phase_complete"]);
}

#[tokio::test]
async fn openai_usage_counts_cached_tokens_once() {
    let s = standin().await;
    s.push_openai(Reply::text("ok").usage(WireUsage::openai(812, 37, 512, 20)));
    let r = openai(&s)
        .chat(request("gpt-4o", &opening()))
        .await
        .expect("chat");
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 300,
            output_tokens: 37,
            cache_read_tokens: 512,
            cache_write_tokens: 0,
        }
    );
    assert_eq!(r.usage.prompt_tokens(), 812);
}

#[tokio::test]
async fn openai_stop_reasons_are_mapped() {
    let s = standin().await;
    for (wire, want) in [
        ("stop", StopReason::EndTurn),
        ("length", StopReason::MaxTokens),
        ("content_filter", StopReason::ContentFilter),
        (
            "some_future_reason",
            StopReason::Other("some_future_reason".into()),
        ),
    ] {
        s.push_openai(Reply::text("partial answer").stop(wire));
        let r = openai(&s)
            .chat(request("gpt-4o", &opening()))
            .await
            .expect("chat");
        assert_eq!(r.stop_reason, want, "{wire}");
        assert_eq!(r.text.as_deref(), Some("partial answer"), "{wire}");
    }
}

#[tokio::test]
async fn openai_a_refusal_surfaces_as_text_with_a_refusal_stop() {
    let s = standin().await;
    s.push_openai(Reply::new().refusal("I can't help with that request."));
    let r = openai(&s)
        .chat(request("gpt-4o", &opening()))
        .await
        .expect("chat");
    assert_eq!(r.stop_reason, StopReason::Refusal);
    assert_eq!(r.text.as_deref(), Some("I can't help with that request."));
    assert!(r.tool_calls.is_empty());
}

#[tokio::test]
async fn openai_reasoning_models_get_max_completion_tokens_and_no_temperature() {
    let s = standin().await;
    for model in ["o3-mini", "gpt-5"] {
        let mut req = request(model, &opening());
        req.temperature = Some(0.2);
        let result = openai(&s).chat(req).await;
        let recorded = s.last_request().expect("recorded");
        assert!(
            result.is_ok(),
            "{model}: {result:?} / {}",
            recorded.response
        );
        assert_eq!(recorded.body["max_completion_tokens"], 1024);
        assert!(recorded.body.get("max_tokens").is_none());
    }
}

#[tokio::test]
async fn openai_faults_map_onto_the_error_vocabulary() {
    let s = standin().await;
    s.push_openai(Answer::rate_limited(2));
    s.push_openai(Answer::ServerError);
    s.push_openai(Answer::Overloaded);
    s.push_openai(Answer::DropConnection);
    let p = openai(&s);
    let mut errors = Vec::new();
    for _ in 0..4 {
        errors.push(
            p.chat(request("gpt-4o", &opening()))
                .await
                .expect_err("fault"),
        );
    }
    assert_eq!(
        errors[0],
        LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(2))
        }
    );
    assert_eq!(errors[1], LlmError::Server { status: 500 });
    assert_eq!(errors[2], LlmError::Server { status: 503 });
    assert!(
        matches!(errors[3], LlmError::Transport { .. }),
        "{:?}",
        errors[3]
    );
    assert!(errors.iter().all(LlmError::is_failover));
    assert_eq!(
        s.request_count(),
        4,
        "one request per call, no retry inside"
    );
}

#[tokio::test]
async fn openai_a_rate_limit_with_only_reset_headers_is_rate_limited() {
    let s = standin().await;
    s.push_openai(Answer::rate_limited_with_resets(None, "1s", "6m0s"));
    let e = openai(&s)
        .chat(request("gpt-4o", &opening()))
        .await
        .expect_err("429");
    assert!(matches!(e, LlmError::RateLimited { .. }), "{e:?}");
}

#[tokio::test]
async fn openai_a_wrong_key_is_unauthorized() {
    let s = standin().await;
    let p =
        OpenAiProvider::new(s.base_url(), Secret::new("sk-other"), timeouts()).expect("provider");
    let e = p
        .chat(request("gpt-4o", &opening()))
        .await
        .expect_err("refused");
    assert_eq!(e, LlmError::Unauthorized { status: 401 });
}

#[tokio::test]
async fn openai_a_turn_without_text_or_tool_calls_then_a_nudge_is_valid() {
    let s = standin().await;
    let mut messages = opening();
    messages.push(ChatMessage::assistant(None, vec![]));
    messages.push(ChatMessage::user("You made no tool call."));
    let result = openai(&s).chat(request("gpt-4o", &messages)).await;
    assert!(
        result.is_ok(),
        "{result:?} / {:?}",
        s.last_request().map(|r| r.response)
    );
}

#[tokio::test]
async fn openai_a_turn_with_text_only_then_a_nudge_is_valid() {
    let s = standin().await;
    let mut messages = opening();
    messages.push(ChatMessage::assistant(
        Some("Nothing to do.".into()),
        vec![],
    ));
    messages.push(ChatMessage::user("You made no tool call."));
    let result = openai(&s).chat(request("gpt-4o", &messages)).await;
    assert!(
        result.is_ok(),
        "{result:?} / {:?}",
        s.last_request().map(|r| r.response)
    );
}

// ------------------------------------------------------------------- both

#[tokio::test]
async fn a_request_refused_locally_never_reaches_the_wire() {
    let s = standin().await;
    let empty = ChatRequest {
        messages: Vec::new().into(),
        ..request("gpt-4o", &opening())
    };
    let a = anthropic(&s)
        .chat(empty.clone())
        .await
        .expect_err("refused");
    let o = openai(&s).chat(empty).await.expect_err("refused");
    assert!(matches!(a, LlmError::InvalidRequest { .. }), "{a:?}");
    assert!(matches!(o, LlmError::InvalidRequest { .. }), "{o:?}");
    assert_eq!(s.request_count(), 0, "no request hit the stand-in");
}

#[tokio::test]
async fn no_secret_reaches_the_request_record() {
    let s = standin().await;
    anthropic(&s)
        .chat(request("claude-sonnet-4-5", &opening()))
        .await
        .expect("anthropic");
    openai(&s)
        .chat(request("gpt-4o", &opening()))
        .await
        .expect("openai");
    let seen = s.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|r| r.key_index == Some(0)));
    assert_eq!(
        seen[0].headers.get("anthropic-version").map(String::as_str),
        Some("2023-06-01")
    );
    assert!(!format!("{seen:?}").contains(KEY));
}
