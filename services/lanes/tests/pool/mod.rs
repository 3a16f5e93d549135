//! A strict stand-in of the Windows pool's HTTP API, shared by the lane's
//! tests and the workspace's two-replica test: a real HTTP server on
//! 127.0.0.1:0 that implements the contract documented in
//! `genesis_lanes::windows` and refuses what the pool refuses, with its error
//! shapes (401/403 on a bad credential, 404 for an unknown lease or session,
//! 409 with a taskHandle, 429, 5xx naming holders, a secret aimed at an
//! unmasked control, a session_0 host, a launch with no window, a lease past
//! its expiry that the pool has forgotten with its session, ...). It
//! counts every lease and release so a test can prove how many machines
//! were taken. Must never accept a call the real pool would refuse.

#![allow(dead_code, clippy::unwrap_used, clippy::result_large_err)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde_json::{Value, json};
use uuid::Uuid;

/// The credential the stand-in accepts.
pub const GOOD: &str = "pool-secret";

/// A leased machine's session.
#[derive(Default)]
pub struct Session {
    pub host: String,
    pub running_task: Option<String>,
    pub windows: Vec<(i64, String)>,
    /// When the lease ends: the session is unknown from then on.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Session {
    fn expired(&self) -> bool {
        self.expires_at.is_some_and(|t| t <= chrono::Utc::now())
    }
}

/// Forget an expired lease and its session, as the pool does at expiry.
fn expire(p: &mut Pool) {
    let expired: Vec<String> = p
        .sessions
        .iter()
        .filter(|(_, s)| s.expired())
        .map(|(sid, _)| sid.clone())
        .collect();
    for sid in &expired {
        p.sessions.remove(sid);
    }
    p.leases.retain(|_, sid| !expired.contains(sid));
}

#[derive(Default)]
/// The pool's state and counters.
pub struct Pool {
    pub sessions: HashMap<String, Session>,
    /// lease id → session id
    pub leases: HashMap<String, String>,
    pub lease_requests: usize,
    pub release_requests: usize,
    /// Next lease's host: `win-1`, `session0-host`, `probe-failed-host`.
    pub next_host: String,
    pub at_capacity: bool,
    pub rate_limited: bool,
    /// Bodies received per verb.
    pub bodies: Vec<(String, Value)>,
    pub closed_on_release: usize,
    pub fail_release: bool,
    /// How long a lease takes to answer (lets concurrent first uses overlap).
    pub lease_delay: Duration,
    /// How long a lease lasts; 30 minutes when unset.
    pub lease_ttl: Option<Duration>,
}

/// The pool as the handlers and the test share it.
pub type Shared = Arc<Mutex<Pool>>;

fn err(status: u16, body: Value) -> Response {
    (StatusCode::from_u16(status).unwrap(), Json(body)).into_response()
}

fn auth(headers: &HeaderMap) -> Result<(), Response> {
    match headers.get("authorization").and_then(|v| v.to_str().ok()) {
        Some(v) if v == format!("Bearer {GOOD}") => Ok(()),
        Some("Bearer readonly") => Err(err(403, json!({"error": "FORBIDDEN_CREDENTIAL"}))),
        _ => Err(err(401, json!({"error": "UNAUTHENTICATED"}))),
    }
}

async fn lease(State(p): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    if let Err(r) = auth(&headers) {
        return r;
    }
    let delay = p.lock().unwrap().lease_delay;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut p = p.lock().unwrap();
    p.lease_requests += 1;
    if p.at_capacity {
        return err(
            503,
            json!({"error": "POOL_AT_CAPACITY", "holders": ["tenant-a/coder-7", "tenant-b/coder-2"]}),
        );
    }
    let ttl = p.lease_ttl.unwrap_or(Duration::from_secs(30 * 60));
    let expires_at = chrono::Utc::now() + chrono::Duration::from_std(ttl).unwrap();
    let sid = format!("s-{}", Uuid::new_v4().simple());
    let lid = format!("l-{}", Uuid::new_v4().simple());
    let host = if p.next_host.is_empty() {
        "win-1".to_string()
    } else {
        p.next_host.clone()
    };
    p.sessions.insert(
        sid.clone(),
        Session {
            host: host.clone(),
            expires_at: Some(expires_at),
            ..Default::default()
        },
    );
    p.leases.insert(lid.clone(), sid.clone());
    p.bodies.push(("lease".to_string(), body));
    (
        StatusCode::CREATED,
        Json(json!({"leaseId": lid, "sessionId": sid, "host": host,
            "expiresAt": expires_at.to_rfc3339()})),
    )
        .into_response()
}

async fn release(State(p): State<Shared>, headers: HeaderMap, Path(lid): Path<String>) -> Response {
    if let Err(r) = auth(&headers) {
        return r;
    }
    let mut p = p.lock().unwrap();
    p.release_requests += 1;
    if p.fail_release {
        return err(500, json!({"error": "INTERNAL"}));
    }
    expire(&mut p);
    match p.leases.remove(&lid) {
        Some(sid) => {
            if let Some(s) = p.sessions.remove(&sid) {
                p.closed_on_release += s.windows.len();
            }
            Json(json!({"released": true})).into_response()
        }
        None => err(404, json!({"error": "LEASE_NOT_FOUND"})),
    }
}

/// Every session verb: auth, rate limit, eviction, desktop availability, then the verb.
async fn session_verb(
    State(p): State<Shared>,
    headers: HeaderMap,
    Path((sid, rest)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    body: Option<Json<Value>>,
) -> Response {
    if let Err(r) = auth(&headers) {
        return r;
    }
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let mut p = p.lock().unwrap();
    if p.rate_limited {
        return err(429, json!({"error": "RATE_LIMITED"}));
    }
    p.bodies.push((rest.clone(), body.clone()));
    expire(&mut p);
    let Some(s) = p.sessions.get_mut(&sid) else {
        return err(404, json!({"error": "SESSION_NOT_FOUND"}));
    };
    let host = s.host.clone();
    let desktop = !rest.starts_with("run_spec") && !rest.starts_with("tasks/");
    if desktop && host == "session0-host" {
        return err(
            503,
            json!({"error": "DESKTOP_UNAVAILABLE", "reason": "session_0", "host": host}),
        );
    }
    if desktop && host == "probe-failed-host" {
        return err(
            503,
            json!({"error": "DESKTOP_UNAVAILABLE", "reason": "capture_probe_failed", "host": host}),
        );
    }
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        ["run_spec"] => {
            if let Some(t) = &s.running_task {
                return err(409, json!({"error": "TASK_RUNNING", "taskHandle": t}));
            }
            let t = "task-1".to_string();
            s.running_task = Some(t.clone());
            Json(json!({"taskHandle": t, "state": "running"})).into_response()
        }
        ["tasks", h] => {
            if s.running_task.as_deref() == Some(*h) {
                Json(json!({"taskHandle": h, "state": "running", "output": "Building..."}))
                    .into_response()
            } else {
                err(
                    400,
                    json!({"error": "UNKNOWN_TASK", "message": "no such task"}),
                )
            }
        }
        ["launch"] => {
            if body["program"] == "nowindow.exe" {
                Json(json!({"pid": 4242, "hwnd": null, "title": null})).into_response()
            } else {
                let hwnd = 1000 + s.windows.len() as i64;
                s.windows.push((hwnd, "Untitled - Notepad".to_string()));
                Json(json!({"pid": 77, "hwnd": hwnd, "title": "Untitled - Notepad"}))
                    .into_response()
            }
        }
        ["windows"] => {
            let ws: Vec<Value> = s
                .windows
                .iter()
                .map(|(h, t)| {
                    json!({"hwnd": h, "title": t, "pid": 77,
                    "bounds": {"x": 0, "y": 0, "width": 800, "height": 600}})
                })
                .collect();
            Json(json!({"windows": ws})).into_response()
        }
        ["windows", h, verb] => {
            let hwnd: i64 = h.parse().unwrap_or(-1);
            let Some(pos) = s.windows.iter().position(|(w, _)| *w == hwnd) else {
                return err(404, json!({"error": "WINDOW_NOT_FOUND", "hwnd": hwnd}));
            };
            if *verb == "close" {
                s.windows.remove(pos);
            }
            Json(json!({})).into_response()
        }
        ["snapshot"] => {
            if body["hwnd"] == 666 {
                return err(504, json!({"error": "UI_TIMEOUT", "host": host}));
            }
            Json(json!({"snapshot": "window \"Untitled - Notepad\" ref=e1\n  edit \"Text Editor\" ref=e2\n  edit \"Password\" ref=e3 masked"}))
                .into_response()
        }
        ["click"] => {
            let t = &body["target"];
            if t["ref"] == "e99" {
                return err(404, json!({"error": "ELEMENT_NOT_FOUND"}));
            }
            if t["name"] == "Covered" {
                return err(409, json!({"error": "WINDOW_NOT_FOREGROUND"}));
            }
            if t["name"] == "Elevated" {
                return err(403, json!({"error": "INPUT_BLOCKED"}));
            }
            let method = if t.get("point").is_some() {
                "mouse"
            } else {
                "invoke_pattern"
            };
            Json(json!({"method": method})).into_response()
        }
        ["type"] => {
            let secret = body["secretRef"].as_str();
            let target = body["target"]["name"].as_str().unwrap_or("");
            match secret {
                Some("missing-secret") => err(
                    404,
                    json!({"error": "SECRET_NOT_FOUND", "secretRef": "missing-secret", "host": host}),
                ),
                Some(name) if target != "Password" => err(
                    409,
                    json!({"error": "SECRET_TARGET_NOT_MASKED", "reason": "target_not_password",
                        "state": "refused", "secretRef": name, "host": host,
                        "message": "guest: control 'Username' currently reads alice@example.com",
                        "guestLog": "uia dump ..."}),
                ),
                Some(_) => Json(json!({"method": "value_pattern"})).into_response(),
                None => Json(json!({"method": "keystrokes"})).into_response(),
            }
        }
        ["key"] => {
            if body["keys"] == "Hyper+Q" {
                return err(
                    400,
                    json!({"error": "UNKNOWN_KEY", "message": "unknown key name Hyper"}),
                );
            }
            Json(json!({})).into_response()
        }
        ["wait_for"] => {
            let timeout = body["timeoutMs"].as_u64().unwrap_or(0);
            if body["windowTitle"] == "Never Appears" {
                return err(408, json!({"error": "WAIT_TIMEOUT", "elapsedMs": timeout}));
            }
            Json(json!({"state": body["state"], "elapsedMs": 12})).into_response()
        }
        ["computer"] => Json(json!({})).into_response(),
        ["screenshot"] => Json(
            json!({"pngBase64": "iVBORw0KGgo=", "width": 1920, "height": 1080,
            "hwnd": q.get("hwnd")}),
        )
        .into_response(),
        _ => err(400, json!({"error": "UNKNOWN_VERB"})),
    }
}

/// Serve a fresh pool on 127.0.0.1:0; answers it and its base URL.
pub async fn start() -> (Shared, String) {
    let shared: Shared = Arc::default();
    let app = Router::new()
        .route("/leases", post(lease))
        .route("/leases/{id}", delete(release))
        .route(
            "/sessions/{sid}/{*rest}",
            get(session_verb).post(session_verb),
        )
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (shared, format!("http://{addr}"))
}
