//! Raw HTTP helpers for the stand-in's own tests: requests are written by
//! hand so each refusal rule is exercised exactly.

#![allow(dead_code)]

use genesis_llm_standin::StandIn;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

pub const KEY: &str = "sk-standin-test-key-0001";

pub async fn standin() -> StandIn {
    StandIn::start(KEY).await.expect("start stand-in")
}

/// POST `body` (raw text) to `path` with exactly `headers`.
pub async fn post_raw(
    standin: &StandIn,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, HeaderMap, Value) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(format!("{}{path}", standin.base_url()))
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    let value = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, headers, value)
}

pub const ANTHROPIC_HEADERS: [(&str, &str); 3] = [
    ("x-api-key", KEY),
    ("anthropic-version", "2023-06-01"),
    ("content-type", "application/json"),
];

/// POST a Messages API body with valid headers.
pub async fn anthropic(standin: &StandIn, body: &Value) -> (u16, Value) {
    let (status, _, value) = post_raw(
        standin,
        "/v1/messages",
        &ANTHROPIC_HEADERS,
        &body.to_string(),
    )
    .await;
    (status, value)
}

/// POST a Chat Completions body with a valid key.
pub async fn openai(standin: &StandIn, body: &Value) -> (u16, Value) {
    let bearer = format!("Bearer {KEY}");
    let (status, _, value) = post_raw(
        standin,
        "/v1/chat/completions",
        &[
            ("authorization", bearer.as_str()),
            ("content-type", "application/json"),
        ],
        &body.to_string(),
    )
    .await;
    (status, value)
}

/// A minimal valid Messages API body.
pub fn anthropic_body() -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Hello"}]
    })
}

/// A minimal valid Chat Completions body.
pub fn openai_body() -> Value {
    json!({
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Hello"}]
    })
}

/// Assert an Anthropic error: status, `{"type":"error","error":{type,message}}`
/// with a `request_id`, and the message containing `needle`.
#[track_caller]
pub fn assert_anthropic_error(got: &(u16, Value), status: u16, kind: &str, needle: &str) {
    let (got_status, body) = got;
    assert_eq!(*got_status, status, "status; body: {body}");
    assert_eq!(body["type"], "error", "body: {body}");
    assert_eq!(body["error"]["type"], kind, "body: {body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(needle),
        "message {message:?} lacks {needle:?}"
    );
    assert!(
        body["request_id"]
            .as_str()
            .is_some_and(|r| r.starts_with("req_")),
        "body: {body}"
    );
}

/// Assert an OpenAI error: status and
/// `{"error":{"message","type","param","code"}}` with the message containing
/// `needle`, the given `param` and `code`.
#[track_caller]
pub fn assert_openai_error(
    got: &(u16, Value),
    status: u16,
    needle: &str,
    param: Option<&str>,
    code: Option<&str>,
) {
    let (got_status, body) = got;
    assert_eq!(*got_status, status, "status; body: {body}");
    let error = &body["error"];
    assert!(error.is_object(), "body: {body}");
    assert_eq!(error["type"], "invalid_request_error", "body: {body}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(needle),
        "message {message:?} lacks {needle:?}"
    );
    assert_eq!(error["param"], json!(param), "param; body: {body}");
    assert_eq!(error["code"], json!(code), "code; body: {body}");
    let keys: Vec<&String> = error
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys.len(), 4, "exactly message/type/param/code: {body}");
}
