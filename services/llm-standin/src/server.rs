//! The loopback HTTP server: routing, authentication bookkeeping, the answer
//! queues and the request record.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::answer::{Answer, Reply, Script};
use crate::{anthropic, openai};

/// The largest request body the real APIs take (32 MB); larger is HTTP 413.
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Request headers that carry credentials and are never recorded.
const SECRET_HEADERS: [&str; 4] = [
    "x-api-key",
    "authorization",
    "proxy-authorization",
    "cookie",
];

/// Which API a request was addressed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1/chat/completions`.
    OpenAi,
}

/// One request the stand-in received, refused or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The API it was addressed to; `None` for an unknown route.
    pub endpoint: Option<Endpoint>,
    /// The HTTP method.
    pub method: String,
    /// The request path.
    pub path: String,
    /// The request headers (lower-case names) minus the credential-bearing
    /// ones (`x-api-key`, `authorization`, `proxy-authorization`, `cookie`).
    pub headers: BTreeMap<String, String>,
    /// The index (in configuration order) of the key that authenticated the
    /// request; `None` when it carried no key the stand-in knows.
    pub key_index: Option<usize>,
    /// The request body; `Null` when it was not JSON.
    pub body: Value,
    /// The HTTP status answered; `None` when the connection was dropped.
    pub status: Option<u16>,
    /// The response body; `Null` when the connection was dropped.
    pub response: Value,
}

impl Recorded {
    /// The error message of a refused request (either provider's shape).
    pub fn error_message(&self) -> Option<&str> {
        self.response
            .get("error")
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
    }
}

/// What the stand-in knows about a valid request when it answers it.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    /// The requested model.
    pub model: String,
    /// The names of the tools offered.
    pub tool_names: Vec<String>,
    /// A rough prompt size for default usage counts.
    pub prompt_tokens: u64,
}

/// The fixed configuration of one stand-in.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The API keys it accepts, on both endpoints.
    pub keys: Vec<String>,
    /// When set, the only models it serves (others are HTTP 404).
    pub known_models: Option<Vec<String>>,
    /// Write one line per request to stderr.
    pub log: bool,
}

/// How a request is answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// An HTTP answer.
    Respond {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: Value,
        delay: Duration,
    },
    /// Close the connection without an answer.
    Drop,
}

/// A rough token count of a JSON value (four bytes a token, at least one).
pub(crate) fn estimate_tokens(value: &Value) -> u64 {
    u64::try_from(value.to_string().len() / 4)
        .unwrap_or(u64::MAX)
        .max(1)
}

/// True when `content-type` is `application/json` (parameters allowed).
pub(crate) fn is_json_content_type(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

#[derive(Default)]
struct State {
    anthropic: VecDeque<Answer>,
    openai: VecDeque<Answer>,
    recorded: Vec<Recorded>,
}

struct Shared {
    config: Config,
    state: Mutex<State>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panicking test thread cannot leave the queues half-updated: every
        // critical section is a single push or pop.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Configures and starts a [`StandIn`].
#[derive(Debug, Clone)]
pub struct StandInBuilder {
    listen: SocketAddr,
    keys: Vec<String>,
    known_models: Option<Vec<String>>,
    script: Script,
    log: bool,
}

impl StandInBuilder {
    /// Listen on `addr` (default `127.0.0.1:0`, a free loopback port).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Accept `key` on both endpoints (`x-api-key` / `Authorization: Bearer`).
    /// Several keys may be accepted; [`Recorded::key_index`] tells which one
    /// a request used.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.keys.push(key.into());
        self
    }

    /// Serve only these models; any other is refused with HTTP 404 as the
    /// real APIs do (`not_found_error` / `model_not_found`). By default any
    /// non-empty model name is served.
    pub fn known_models<I, S>(mut self, models: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.known_models = Some(models.into_iter().map(Into::into).collect());
        self
    }

    /// Queue every answer of `script`.
    pub fn script(mut self, script: Script) -> Self {
        self.script.anthropic.extend(script.anthropic);
        self.script.openai.extend(script.openai);
        self
    }

    /// Queue an answer for `POST /v1/messages`.
    pub fn anthropic(mut self, answer: impl Into<Answer>) -> Self {
        self.script.anthropic.push(answer.into());
        self
    }

    /// Queue an answer for `POST /v1/chat/completions`.
    pub fn openai(mut self, answer: impl Into<Answer>) -> Self {
        self.script.openai.push(answer.into());
        self
    }

    /// Write one line per request (method, path, status) to stderr.
    pub fn log_requests(mut self, log: bool) -> Self {
        self.log = log;
        self
    }

    /// Bind and start serving. Fails when no key is configured or the
    /// address cannot be bound.
    pub async fn start(self) -> std::io::Result<StandIn> {
        if self.keys.is_empty() || self.keys.iter().any(|k| k.trim().is_empty()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the stand-in needs at least one non-empty API key",
            ));
        }
        let listener = TcpListener::bind(self.listen).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config: Config {
                keys: self.keys,
                known_models: self.known_models,
                log: self.log,
            },
            state: Mutex::new(State {
                anthropic: self.script.anthropic.into(),
                openai: self.script.openai.into(),
                recorded: Vec::new(),
            }),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(StandIn {
            addr,
            shared,
            accept,
        })
    }
}

/// A running stand-in of both provider APIs on a loopback port. Dropping it
/// stops accepting connections.
pub struct StandIn {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for StandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandIn").field("addr", &self.addr).finish()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl StandIn {
    /// A builder with no key, no answers and the loopback default address.
    pub fn builder() -> StandInBuilder {
        StandInBuilder {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            keys: Vec::new(),
            known_models: None,
            script: Script::default(),
            log: false,
        }
    }

    /// Start on a free loopback port accepting `key`, with empty queues.
    pub async fn start(key: impl Into<String>) -> std::io::Result<StandIn> {
        StandIn::builder().key(key).start().await
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`: the base URL both providers take (they append
    /// `/v1/messages` or `/v1/chat/completions`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queue an answer for the next valid request to `endpoint`.
    pub fn push(&self, endpoint: Endpoint, answer: impl Into<Answer>) {
        let mut state = self.shared.state();
        match endpoint {
            Endpoint::Anthropic => state.anthropic.push_back(answer.into()),
            Endpoint::OpenAi => state.openai.push_back(answer.into()),
        }
    }

    /// Queue an answer for `POST /v1/messages`.
    pub fn push_anthropic(&self, answer: impl Into<Answer>) {
        self.push(Endpoint::Anthropic, answer);
    }

    /// Queue an answer for `POST /v1/chat/completions`.
    pub fn push_openai(&self, answer: impl Into<Answer>) {
        self.push(Endpoint::OpenAi, answer);
    }

    /// How many queued answers `endpoint` has not served yet.
    pub fn pending(&self, endpoint: Endpoint) -> usize {
        let state = self.shared.state();
        match endpoint {
            Endpoint::Anthropic => state.anthropic.len(),
            Endpoint::OpenAi => state.openai.len(),
        }
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state().recorded.clone()
    }

    /// How many requests were received (refused ones included).
    pub fn request_count(&self) -> usize {
        self.shared.state().recorded.len()
    }

    /// The requests addressed to `endpoint`.
    pub fn requests_to(&self, endpoint: Endpoint) -> Vec<Recorded> {
        self.shared
            .state()
            .recorded
            .iter()
            .filter(|r| r.endpoint == Some(endpoint))
            .cloned()
            .collect()
    }

    /// The most recent request, if any.
    pub fn last_request(&self) -> Option<Recorded> {
        self.shared.state().recorded.last().cloned()
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: wait, then go on.
                if shared.config.log {
                    eprintln!("genesis-llm-standin: accept failed: {e}");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(shared.clone(), request));
            // A dropped connection ends here with the service's error.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The service error that makes hyper close the connection unanswered.
#[derive(Debug)]
struct DroppedOnPurpose;

impl std::fmt::Display for DroppedOnPurpose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by a scripted fault")
    }
}

impl std::error::Error for DroppedOnPurpose {}

async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, DroppedOnPurpose> {
    let (parts, body) = request.into_parts();
    let method = parts.method.as_str().to_string();
    let path = parts.uri.path().to_string();
    let endpoint = match (parts.method == http::Method::POST, path.as_str()) {
        (true, "/v1/messages") => Some(Endpoint::Anthropic),
        (true, "/v1/chat/completions") => Some(Endpoint::OpenAi),
        _ => None,
    };
    let anthropic_shape = endpoint == Some(Endpoint::Anthropic)
        || (endpoint.is_none() && path.starts_with("/v1/messages"));
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(_) => Err(()),
    };
    let key_index = presented_key(&parts.headers)
        .and_then(|k| shared.config.keys.iter().position(|known| known == k));
    let outcome = match (&body, endpoint) {
        (Err(()), _) if anthropic_shape => anthropic::error(
            413,
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes.",
        ),
        (Err(()), _) => openai::error(
            413,
            "invalid_request_error",
            "Request too large.",
            None,
            None,
        ),
        (Ok(_), None) if anthropic_shape => anthropic::error(404, "not_found_error", "Not Found"),
        (Ok(_), None) => openai::error(
            404,
            "invalid_request_error",
            format!("Invalid URL ({method} {path})"),
            None,
            None,
        ),
        (Ok(bytes), Some(Endpoint::Anthropic)) => {
            match anthropic::check(&shared.config, &parts.headers, bytes) {
                Err(refused) => refused,
                Ok(checked) => {
                    let answer = shared.state().anthropic.pop_front();
                    anthropic::render(&checked, answer.unwrap_or_else(|| default_answer(&checked)))
                }
            }
        }
        (Ok(bytes), Some(Endpoint::OpenAi)) => {
            match openai::check(&shared.config, &parts.headers, bytes) {
                Err(refused) => refused,
                Ok(checked) => {
                    let answer = shared.state().openai.pop_front();
                    openai::render(&checked, answer.unwrap_or_else(|| default_answer(&checked)))
                }
            }
        }
    };
    let headers: BTreeMap<String, String> = parts
        .headers
        .iter()
        .filter(|(name, _)| !SECRET_HEADERS.contains(&name.as_str()))
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                value.to_str().unwrap_or("<non-ascii>").to_string(),
            )
        })
        .collect();
    let request_body = body
        .as_ref()
        .ok()
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or(Value::Null);
    let (status, response_body) = match &outcome {
        Outcome::Respond { status, body, .. } => (Some(*status), body.clone()),
        Outcome::Drop => (None, Value::Null),
    };
    if shared.config.log {
        match status {
            Some(s) => eprintln!("genesis-llm-standin: {method} {path} -> {s}"),
            None => eprintln!("genesis-llm-standin: {method} {path} -> connection dropped"),
        }
    }
    shared.state().recorded.push(Recorded {
        endpoint,
        method,
        path,
        headers,
        key_index,
        body: request_body,
        status,
        response: response_body,
    });
    match outcome {
        Outcome::Drop => Err(DroppedOnPurpose),
        Outcome::Respond {
            status,
            headers,
            body,
            delay,
        } => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok(response(status, &headers, &body))
        }
    }
}

/// The key a request presented: `x-api-key`, else a Bearer token.
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
        })
}

fn response(
    status: u16,
    headers: &[(&'static str, String)],
    body: &Value,
) -> Response<Full<Bytes>> {
    let mut out = Response::new(Full::new(Bytes::from(body.to_string())));
    *out.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let map = out.headers_mut();
    map.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(value) {
            map.insert(*name, value);
        }
    }
    out
}

/// The answer when a queue is empty: end the episode with `phase_complete`
/// when it is offered, else a short text.
fn default_answer(checked: &Checked) -> Answer {
    if checked.tool_names.iter().any(|n| n == "phase_complete") {
        Reply::tool_call(
            "phase_complete",
            json!({"summary": "Nothing needed action (stand-in default answer)."}),
        )
        .into()
    } else {
        Reply::text("Stand-in default answer.").into()
    }
}
