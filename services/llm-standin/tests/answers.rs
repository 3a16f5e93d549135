//! What valid requests get back: reply bodies shaped as the API references
//! show, injected faults with their real statuses and headers, the default
//! answer, the request record, and the binary.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{KEY, anthropic, anthropic_body, openai, openai_body, post_raw, standin};
use genesis_llm_standin::{Answer, Endpoint, Reply, Script, StandIn, ToolCallSpec, WireUsage};
use serde_json::{Value, json};

fn tools_anthropic(names: &[&str]) -> Value {
    let mut body = anthropic_body();
    body["tools"] = names
        .iter()
        .map(|n| json!({"name": n, "input_schema": {"type": "object"}}))
        .collect();
    body
}

fn tools_openai(names: &[&str]) -> Value {
    let mut body = openai_body();
    body["tools"] = names
        .iter()
        .map(|n| json!({"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}))
        .collect();
    body
}

#[tokio::test]
async fn an_anthropic_reply_has_the_message_shape() {
    let s = standin().await;
    s.push_anthropic(
        Reply::new()
            .with_text("Let me look.")
            .with_tool_call(ToolCallSpec::new("lookup", json!({"q": "a\nb"})))
            .with_tool_call(ToolCallSpec::new("lookup", json!({"q": "c"})).id("toolu_fixed"))
            .model("claude-sonnet-4-5-20250929")
            .usage(WireUsage::anthropic(100, 20, 30, 400)),
    );
    let (status, m) = anthropic(&s, &tools_anthropic(&["lookup"])).await;
    assert_eq!(status, 200, "{m}");
    assert!(
        m["id"].as_str().is_some_and(|id| id.starts_with("msg_01")),
        "{m}"
    );
    assert_eq!(m["type"], "message");
    assert_eq!(m["role"], "assistant");
    assert_eq!(m["model"], "claude-sonnet-4-5-20250929");
    assert_eq!(
        m["content"][0],
        json!({"type": "text", "text": "Let me look."})
    );
    assert_eq!(m["content"][1]["type"], "tool_use");
    assert!(
        m["content"][1]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("toolu_01"))
    );
    assert_eq!(m["content"][1]["name"], "lookup");
    assert_eq!(m["content"][1]["input"], json!({"q": "a\nb"}));
    assert_eq!(m["content"][2]["id"], "toolu_fixed");
    assert_eq!(m["stop_reason"], "tool_use");
    assert_eq!(m["stop_sequence"], Value::Null);
    assert_eq!(m["usage"]["input_tokens"], 100);
    assert_eq!(m["usage"]["output_tokens"], 20);
    assert_eq!(m["usage"]["cache_creation_input_tokens"], 30);
    assert_eq!(m["usage"]["cache_read_input_tokens"], 400);
}

#[tokio::test]
async fn anthropic_stop_reasons_go_out_verbatim_and_refusal_is_the_default_for_a_refusal() {
    let s = standin().await;
    for stop in ["max_tokens", "pause_turn", "end_turn", "stop_sequence"] {
        s.push_anthropic(Reply::text("partial").stop(stop));
        let (_, m) = anthropic(&s, &anthropic_body()).await;
        assert_eq!(m["stop_reason"], stop);
    }
    s.push_anthropic(Reply::new().refusal("no"));
    let (_, m) = anthropic(&s, &anthropic_body()).await;
    assert_eq!(m["stop_reason"], "refusal");
    assert_eq!(m["content"], json!([]));
}

#[tokio::test]
async fn an_openai_text_reply_has_the_chat_completion_shape() {
    let s = standin().await;
    s.push_openai(
        Reply::text("Hello there.")
            .model("gpt-4o-2024-08-06")
            .usage(WireUsage::openai(812, 37, 512, 0)),
    );
    let (status, c) = openai(&s, &openai_body()).await;
    assert_eq!(status, 200, "{c}");
    assert!(
        c["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("chatcmpl-")),
        "{c}"
    );
    assert_eq!(c["object"], "chat.completion");
    assert!(c["created"].as_u64().is_some_and(|t| t > 1_700_000_000));
    assert_eq!(c["model"], "gpt-4o-2024-08-06");
    assert!(
        c["system_fingerprint"]
            .as_str()
            .is_some_and(|f| f.starts_with("fp_"))
    );
    let choice = &c["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "Hello there.");
    assert_eq!(choice["message"]["refusal"], Value::Null);
    assert!(choice["message"].get("tool_calls").is_none(), "{c}");
    let u = &c["usage"];
    assert_eq!(u["prompt_tokens"], 812);
    assert_eq!(u["completion_tokens"], 37);
    assert_eq!(u["total_tokens"], 849);
    assert_eq!(u["prompt_tokens_details"]["cached_tokens"], 512);
    assert_eq!(u["completion_tokens_details"]["reasoning_tokens"], 0);
}

#[tokio::test]
async fn openai_tool_calls_carry_string_arguments_and_null_content() {
    let s = standin().await;
    s.push_openai(
        Reply::new()
            .with_tool_call(ToolCallSpec::new("lookup", json!({"q": "line1\nline2"})))
            .with_tool_call(
                ToolCallSpec::new("lookup", json!({})).raw_arguments("{\n  \"q\": \"x\"\n}"),
            )
            .usage(WireUsage::openai(50, 40, 0, 32)),
    );
    let (_, c) = openai(&s, &tools_openai(&["lookup"])).await;
    let message = &c["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert_eq!(c["choices"][0]["finish_reason"], "tool_calls");
    let calls = message["tool_calls"].as_array().expect("tool_calls");
    assert_eq!(calls.len(), 2);
    assert!(
        calls[0]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("call_"))
    );
    assert_eq!(calls[0]["type"], "function");
    let args = calls[0]["function"]["arguments"]
        .as_str()
        .expect("string arguments");
    assert_eq!(
        serde_json::from_str::<Value>(args).expect("json"),
        json!({"q": "line1\nline2"})
    );
    assert_eq!(calls[1]["function"]["arguments"], "{\n  \"q\": \"x\"\n}");
    assert_eq!(
        c["usage"]["completion_tokens_details"]["reasoning_tokens"],
        32
    );
}

#[tokio::test]
async fn an_openai_refusal_sets_message_refusal_and_null_content() {
    let s = standin().await;
    s.push_openai(Reply::new().refusal("I can't help with that."));
    s.push_openai(Reply::text("cut").stop("content_filter"));
    s.push_openai(Reply::text("cut").stop("length"));
    let (_, c) = openai(&s, &openai_body()).await;
    assert_eq!(
        c["choices"][0]["message"]["refusal"],
        "I can't help with that."
    );
    assert_eq!(c["choices"][0]["message"]["content"], Value::Null);
    assert_eq!(c["choices"][0]["finish_reason"], "stop");
    let (_, c) = openai(&s, &openai_body()).await;
    assert_eq!(c["choices"][0]["finish_reason"], "content_filter");
    let (_, c) = openai(&s, &openai_body()).await;
    assert_eq!(c["choices"][0]["finish_reason"], "length");
}

#[tokio::test]
async fn anthropic_faults_have_the_real_statuses_and_shapes() {
    let s = StandIn::builder()
        .key(KEY)
        .anthropic(Answer::rate_limited(7))
        .anthropic(Answer::ServerError)
        .anthropic(Answer::Unavailable)
        .anthropic(Answer::Overloaded)
        .start()
        .await
        .expect("start");
    let headers = common::ANTHROPIC_HEADERS;
    let (status, h, body) =
        post_raw(&s, "/v1/messages", &headers, &anthropic_body().to_string()).await;
    assert_eq!(status, 429);
    assert_eq!(
        h.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("7")
    );
    assert_eq!(body["error"]["type"], "rate_limit_error");
    for (want_status, want_type) in [
        (500, "api_error"),
        (503, "api_error"),
        (529, "overloaded_error"),
    ] {
        let (status, _, body) =
            post_raw(&s, "/v1/messages", &headers, &anthropic_body().to_string()).await;
        assert_eq!(status, want_status);
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], want_type);
    }
    // The queue is empty again: the default answer.
    assert_eq!(anthropic(&s, &anthropic_body()).await.0, 200);
}

#[tokio::test]
async fn openai_rate_limits_carry_retry_after_and_reset_headers() {
    let s = standin().await;
    s.push_openai(Answer::rate_limited_with_resets(Some(2), "1s", "6m0s"));
    s.push_openai(Answer::ServerError);
    s.push_openai(Answer::Overloaded);
    let bearer = format!("Bearer {KEY}");
    let headers = [
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
    ];
    let (status, h, body) = post_raw(
        &s,
        "/v1/chat/completions",
        &headers,
        &openai_body().to_string(),
    )
    .await;
    assert_eq!(status, 429);
    let header = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
    assert_eq!(header("retry-after").as_deref(), Some("2"));
    assert_eq!(header("x-ratelimit-reset-requests").as_deref(), Some("1s"));
    assert_eq!(header("x-ratelimit-reset-tokens").as_deref(), Some("6m0s"));
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    let (status, _, body) = post_raw(
        &s,
        "/v1/chat/completions",
        &headers,
        &openai_body().to_string(),
    )
    .await;
    assert_eq!(status, 500);
    assert_eq!(body["error"]["type"], "server_error");
    let (status, _, body) = post_raw(
        &s,
        "/v1/chat/completions",
        &headers,
        &openai_body().to_string(),
    )
    .await;
    assert_eq!(status, 503);
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("overloaded"))
    );
}

#[tokio::test]
async fn a_dropped_connection_gets_no_http_answer() {
    let s = standin().await;
    s.push_openai(Answer::DropConnection);
    let bearer = format!("Bearer {KEY}");
    let result = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", s.base_url()))
        .header("authorization", bearer)
        .header("content-type", "application/json")
        .body(openai_body().to_string())
        .send()
        .await;
    let error = result.expect_err("no answer");
    assert!(!error.is_status(), "{error}");
    let recorded = s.last_request().expect("recorded");
    assert_eq!(recorded.status, None);
    assert_eq!(s.request_count(), 1);
}

#[tokio::test]
async fn a_delayed_reply_arrives_after_the_delay() {
    let s = standin().await;
    s.push_anthropic(Reply::text("slow").delay(Duration::from_millis(300)));
    let started = std::time::Instant::now();
    let (status, _) = anthropic(&s, &anthropic_body()).await;
    assert_eq!(status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn the_default_answer_calls_phase_complete_when_offered_else_text() {
    let s = standin().await;
    let (_, m) = anthropic(
        &s,
        &tools_anthropic(&["soa_send_message", "phase_complete"]),
    )
    .await;
    assert_eq!(m["content"][0]["type"], "tool_use");
    assert_eq!(m["content"][0]["name"], "phase_complete");
    assert!(m["content"][0]["input"]["summary"].is_string());
    let (_, m) = anthropic(&s, &anthropic_body()).await;
    assert_eq!(m["content"][0]["type"], "text");
    assert_eq!(m["stop_reason"], "end_turn");
    let (_, c) = openai(&s, &tools_openai(&["phase_complete"])).await;
    assert_eq!(
        c["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "phase_complete"
    );
    let (_, c) = openai(&s, &openai_body()).await;
    assert!(c["choices"][0]["message"]["content"].is_string());
    // Default usage is an estimate, never zero.
    assert!(c["usage"]["prompt_tokens"].as_u64().is_some_and(|n| n > 0));
}

#[tokio::test]
async fn requests_are_recorded_without_credentials() {
    let s = StandIn::builder()
        .key("sk-first")
        .key("sk-second")
        .start()
        .await
        .expect("start");
    let (status, _, _) = post_raw(
        &s,
        "/v1/messages",
        &[
            ("x-api-key", "sk-second"),
            ("anthropic-version", "2023-06-01"),
            ("content-type", "application/json"),
        ],
        &anthropic_body().to_string(),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) = post_raw(
        &s,
        "/v1/chat/completions",
        &[
            ("authorization", "Bearer sk-unknown"),
            ("content-type", "application/json"),
        ],
        &openai_body().to_string(),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(s.request_count(), 2);
    let all = s.requests();
    assert_eq!(all[0].endpoint, Some(Endpoint::Anthropic));
    assert_eq!(all[0].key_index, Some(1));
    assert_eq!(all[0].status, Some(200));
    assert_eq!(all[0].body["model"], "claude-sonnet-4-5");
    assert_eq!(
        all[0].headers.get("anthropic-version").map(String::as_str),
        Some("2023-06-01")
    );
    assert!(!all[0].headers.contains_key("x-api-key"));
    assert_eq!(all[1].key_index, None);
    assert!(!all[1].headers.contains_key("authorization"));
    assert!(
        all[1]
            .error_message()
            .is_some_and(|m| m.starts_with("Incorrect API key"))
    );
    let text = format!("{:?}", s.requests());
    assert!(
        !text.contains("sk-second") && !text.contains("sk-unknown"),
        "{text}"
    );
    assert_eq!(s.requests_to(Endpoint::OpenAi).len(), 1);
}

#[tokio::test]
async fn a_stand_in_without_a_key_does_not_start() {
    let error = StandIn::builder().start().await.expect_err("no key");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn a_script_file_parses_every_answer_kind() {
    let script = Script::from_json(
        r#"{"anthropic": [
              {"kind": "reply", "text": "hi", "model": "claude-sonnet-4-5-20250929", "stop": "max_tokens",
               "usage": {"input_tokens": 5, "output_tokens": 6, "cache_creation_tokens": 7}},
              {"kind": "rate_limited", "retry_after_secs": 3},
              {"kind": "overloaded"}, {"kind": "server_error"}, {"kind": "unavailable"},
              {"kind": "drop_connection"}],
            "openai": [{"kind": "reply", "tool_calls": [{"name": "phase_complete", "arguments": {"summary": "s"}}]},
              {"kind": "rate_limited", "reset_requests": "1s", "reset_tokens": "6m0s"}]}"#,
    )
    .expect("script");
    assert_eq!(script.anthropic.len(), 6);
    assert_eq!(script.anthropic[1], Answer::rate_limited(3));
    match &script.anthropic[0] {
        Answer::Reply(r) => {
            assert_eq!(r.usage.map(|u| u.cache_creation_tokens), Some(7));
            assert_eq!(r.stop.as_deref(), Some("max_tokens"));
        }
        other => panic!("not a reply: {other:?}"),
    }
    assert_eq!(
        script.openai[1],
        Answer::rate_limited_with_resets(None, "1s", "6m0s")
    );
    assert!(
        Script::from_json(r#"{"antropic": []}"#).is_err(),
        "unknown keys are refused"
    );
}

#[tokio::test]
async fn the_binary_prints_its_address_and_serves_the_script() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"openai": [{"kind": "reply", "text": "from the script", "model": "gpt-4o-2024-08-06"}]}"#,
    )
    .expect("write script");
    let mut child = Command::new(env!("CARGO_BIN_EXE_genesis-llm-standin"))
        .args(["--listen", "127.0.0.1:0", "--key", KEY, "--script"])
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("first line");
    let addr = line.trim().to_string();
    let answer = reqwest::Client::new()
        .post(format!("http://{addr}/v1/chat/completions"))
        .bearer_auth(KEY)
        .json(&openai_body())
        .send()
        .await;
    let _ = child.kill();
    let _ = child.wait();
    let body: Value = answer.expect("answer").json().await.expect("json");
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    assert_eq!(body["choices"][0]["message"]["content"], "from the script");
    assert_eq!(body["model"], "gpt-4o-2024-08-06");
}

#[test]
fn the_binary_refuses_to_start_without_a_key() {
    let status = Command::new(env!("CARGO_BIN_EXE_genesis-llm-standin"))
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run");
    assert!(!status.success());
}
