//! A real HTTP server on 127.0.0.1:0 for the provider tests: it answers
//! canned responses chosen by the credential the request carries and records
//! every request it received.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// One canned answer.
#[derive(Clone, Debug)]
pub struct Canned {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Canned {
    pub fn json(status: u16, body: serde_json::Value) -> Self {
        Canned {
            status,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }

    pub fn raw(status: u16, body: &str) -> Self {
        Canned {
            status,
            headers: vec![("content-type", "application/json".into())],
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }

    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// What the server saw.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: serde_json::Value,
}

impl Recorded {
    /// The credential the request carried (x-api-key or Bearer).
    pub fn credential(&self) -> String {
        credential_of(&self.headers)
    }
}

fn credential_of(header_map: &HashMap<String, String>) -> String {
    header_map
        .get("x-api-key")
        .cloned()
        .or_else(|| {
            header_map
                .get("authorization")
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_string)
        })
        .unwrap_or_default()
}

#[derive(Default)]
struct Inner {
    by_credential: HashMap<String, Canned>,
    queued: HashMap<String, VecDeque<Canned>>,
    recorded: Vec<Recorded>,
}

#[derive(Clone)]
pub struct TestServer {
    pub base_url: String,
    inner: Arc<Mutex<Inner>>,
}

impl TestServer {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(inner.clone());
        tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        TestServer {
            base_url: format!("http://{addr}"),
            inner,
        }
    }

    /// Answer requests carrying `credential` (x-api-key or Bearer) with `canned`.
    pub fn answer(&self, credential: &str, canned: Canned) {
        self.inner
            .lock()
            .expect("lock")
            .by_credential
            .insert(credential.to_string(), canned);
    }

    /// Answer the next requests carrying `credential` with `first`, in
    /// order, before falling back to what [`TestServer::answer`] set.
    pub fn answer_first(&self, credential: &str, first: Vec<Canned>) {
        self.inner
            .lock()
            .expect("lock")
            .queued
            .insert(credential.to_string(), first.into());
    }

    /// How many requests carried `credential`.
    pub fn requests_with(&self, credential: &str) -> usize {
        self.recorded()
            .iter()
            .filter(|r| r.credential() == credential)
            .count()
    }

    pub fn recorded(&self) -> Vec<Recorded> {
        self.inner.lock().expect("lock").recorded.clone()
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header_map: HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let credential = credential_of(&header_map);
    let canned = {
        let mut inner = inner.lock().expect("lock");
        inner.recorded.push(Recorded {
            path: uri.path().to_string(),
            headers: header_map,
            body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
        });
        match inner
            .queued
            .get_mut(&credential)
            .and_then(VecDeque::pop_front)
        {
            Some(next) => Some(next),
            None => inner.by_credential.get(&credential).cloned(),
        }
    };
    let Some(canned) = canned else {
        return (StatusCode::UNAUTHORIZED, "unknown credential").into_response();
    };
    if !canned.delay.is_zero() {
        tokio::time::sleep(canned.delay).await;
    }
    let mut out = HeaderMap::new();
    for (name, value) in &canned.headers {
        out.insert(
            HeaderName::from_static(name),
            HeaderValue::from_str(value).expect("header"),
        );
    }
    (
        StatusCode::from_u16(canned.status).expect("status"),
        out,
        canned.body,
    )
        .into_response()
}

pub fn anthropic_tool_response(model: &str) -> serde_json::Value {
    serde_json::json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [
            {"type": "text", "text": "Greeting the operator."},
            {"type": "tool_use", "id": "toolu_1", "name": "soa_send_message",
             "input": {"message": "hello"}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 120, "output_tokens": 33, "cache_read_input_tokens": 7}
    })
}

pub fn openai_tool_response(model: &str) -> serde_json::Value {
    serde_json::json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "phase_complete", "arguments": "{\"summary\":\"done\"}"}
                }]
            },
            "finish_reason": "tool_calls"
        }],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59,
                  "prompt_tokens_details": {"cached_tokens": 4}}
    })
}

pub fn request_with_history() -> genesis_llm::ChatRequest {
    use genesis_llm::{ChatMessage, ChatRequest, ToolCall, ToolSpec};
    ChatRequest {
        model: "test-model".into(),
        system: "You are the SOA.".into(),
        messages: vec![
            ChatMessage::user("EVENT: AgentInitialized\nSurvey and greet."),
            ChatMessage::assistant(
                Some("Looking around.".into()),
                vec![
                    ToolCall {
                        id: "t1".into(),
                        name: "soa_query_telemetry".into(),
                        arguments: serde_json::json!({"window": "1h"}),
                    },
                    ToolCall {
                        id: "t2".into(),
                        name: "agent_query_memory".into(),
                        arguments: serde_json::json!({}),
                    },
                ],
            ),
            ChatMessage::tool("t1", "{\"ok\":true}"),
            ChatMessage::tool("t2", "{\"items\":[]}"),
        ]
        .into(),
        tools: vec![ToolSpec {
            name: "soa_send_message".into(),
            description: "Send the operator a message.".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"]
            })
            .into(),
        }]
        .into(),
        max_output_tokens: 1024,
        temperature: Some(0.2),
    }
}
