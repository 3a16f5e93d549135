//! The operator dashboard (spec §2.6): `/agents`, `/agents/{id}`,
//! `/agents/{id}/turns/{turn}/trace`, `/decisions`, `/tasks`, `/tasks/{id}`,
//! `/tasks/{id}/artifacts/{artifact}` and `/spend` as server-rendered pages on control's own
//! dashboard port, with every asset embedded in the binary.
//!
//! Sign-in exchanges an operator token for a random session secret kept in an
//! HttpOnly, SameSite=Strict cookie (only its SHA-256 is stored, see
//! `genesis_store::sessions`); every form carries the session's CSRF token.
//! Failed sign-ins count against the peer address's failed-authentication
//! bucket (`GENESIS_AUTH_FAILURES_PER_MINUTE`, shared with the gRPC API):
//! once it is empty the form is answered 429 before the token is looked up.
//! A session shows exactly one tenant. Every read and write goes through the
//! same admin service implementations the gRPC API serves, called in-process
//! with the session's [`Caller`], so validation, tenant checks, the mode
//! chokepoint (source `ui`) and Reset's mid-tick refusal are the API's own.
//! The live turn stream is the `WatchTurns` stream re-framed as server-sent
//! events; it re-checks the session like `WatchTurns` its token
//! ([`crate::streams`]) and ends with an `end` event once the session is
//! signed out or expired or its token revoked.
//!
//! Must never render a value without escaping it, accept a state-changing
//! request without the session's CSRF token, or read another tenant's rows.

mod pages;
mod render;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{ConnectInfo, Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use futures::StreamExt as _;
use genesis_proto::auth::{constant_time_eq, generate_token, token_sha256};
use genesis_proto::v1;
use genesis_proto::v1::agent_service_server::AgentService as _;
use genesis_proto::v1::decision_service_server::DecisionService as _;
use genesis_store::{DashboardSession, StoreError};
use serde::Deserialize;
use tonic::{Code, Status};
use uuid::Uuid;

use crate::auth::{Caller, authenticate_token};
use crate::limits::Class;
use crate::services::agents::Agents;
use crate::services::decisions::Decisions;
use crate::state::AppState;

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "genesis_session";
/// Longest form field the dashboard reads (the API applies its own, tighter
/// limits per field; this bounds what is buffered at all).
const MAX_FORM_BYTES: usize = 64 * 1024;

const APP_CSS: &str = include_str!("assets/app.css");
const APP_JS: &str = include_str!("assets/app.js");
const ICON_SVG: &str = include_str!("assets/icon.svg");

/// The dashboard's router (served on `GENESIS_DASHBOARD_ADDR`).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/agents") }))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/agents", get(agents_page))
        .route("/agents/{id}", get(agent_page))
        .route("/agents/{id}/events", get(agent_events))
        .route("/agents/{id}/message", post(send_message))
        .route("/agents/{id}/mode", post(set_mode))
        .route("/agents/{id}/lifecycle", post(lifecycle))
        .route("/agents/{id}/turns/{turn}/trace", get(trace_page))
        .route("/agents/{id}/turns/{turn}/replay", post(replay_turn))
        .route("/replays/{id}", get(replay_page))
        .route("/decisions", get(decisions_page))
        .route("/decisions/{id}/respond", post(respond))
        .route("/tasks", get(tasks_page))
        .route("/tasks/{id}", get(task_page))
        .route("/tasks/{id}/artifacts/{artifact}", get(artifact_page))
        .route("/spend", get(spend_page))
        .route(
            "/assets/app.css",
            get(|| async { asset("text/css", APP_CSS) }),
        )
        .route(
            "/assets/icon.svg",
            get(|| async { asset("image/svg+xml", ICON_SVG) }),
        )
        .route(
            "/favicon.ico",
            get(|| async { Redirect::permanent("/assets/icon.svg") }),
        )
        .route(
            "/assets/app.js",
            get(|| async { asset("text/javascript", APP_JS) }),
        )
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
        .with_state(state)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// Security headers on every page: no framing, no inline script, no
/// third-party origin.
fn page(status: StatusCode, html: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "same-origin"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        html,
    )
        .into_response()
}

/// The signed-in operator of one request.
pub(crate) struct Session {
    row: DashboardSession,
    /// SHA-256 of the cookie's secret: what the live stream re-checks.
    secret_sha256: String,
}

impl Session {
    /// The caller the admin services see: bound to the session's tenant even
    /// when the token is platform-wide.
    fn caller(&self) -> Caller {
        Caller {
            token_id: self.row.token_id,
            tenant_id: Some(self.row.tenant_id),
            label: format!("{} (dashboard)", self.row.label).trim().to_owned(),
        }
    }

    fn tenant(&self) -> String {
        self.row.tenant_id.to_string()
    }

    fn csrf_ok(&self, presented: &str) -> bool {
        constant_time_eq(presented.as_bytes(), self.row.csrf_token.as_bytes())
    }
}

fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The session of this request, or the response that sends the browser to
/// sign in.
async fn session(state: &AppState, headers: &HeaderMap) -> Result<Session, Response> {
    let to_login = || Redirect::to("/login").into_response();
    let Some(secret) = cookie_value(headers, SESSION_COOKIE) else {
        return Err(to_login());
    };
    if !genesis_proto::auth::is_well_formed_token(secret) {
        return Err(to_login());
    }
    let secret_sha256 = token_sha256(secret);
    match state.store.sessions().authenticate(&secret_sha256).await {
        Ok(row) => {
            let s = Session { row, secret_sha256 };
            // The dashboard draws from the same per-tenant admin bucket as
            // the gRPC API; its enqueueing forms also from the enqueue one.
            state.limits.check(&s.caller(), Class::Admin).map_err(|e| {
                page(
                    StatusCode::TOO_MANY_REQUESTS,
                    render::bare("Slow down", e.message()),
                )
            })?;
            Ok(s)
        }
        Err(StoreError::NotFound { .. }) => Err(to_login()),
        Err(e) => {
            tracing::error!(error = %e, "dashboard session lookup failed");
            Err(page(
                StatusCode::SERVICE_UNAVAILABLE,
                render::bare(
                    "Unavailable",
                    "The database is unreachable; try again shortly.",
                ),
            ))
        }
    }
}

/// A page's signed-in session, extracted before the handler runs: without
/// a valid session cookie the request is answered by the sign-in redirect
/// (or the rate or availability refusal) [`session`] gives.
impl axum::extract::FromRequestParts<AppState> for Session {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        session(state, &parts.headers).await
    }
}

/// The tonic request the in-process service call sees.
fn rpc<T>(session: &Session, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.extensions_mut().insert(session.caller());
    r
}

fn http_status(s: &Status) -> StatusCode {
    match s.code() {
        Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::FailedPrecondition | Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// A page-level failure of an admin call, rendered inside the layout.
fn failure(session: &Session, status: Status) -> Response {
    page(
        http_status(&status),
        render::layout(
            "Error",
            &session.row.csrf_token,
            &session.tenant(),
            &render::error_box(status.message()),
        ),
    )
}

/// A page, or its failure inside the layout.
fn rendered(session: &Session, result: Result<String, Status>) -> Response {
    match result {
        Ok(html) => page(StatusCode::OK, html),
        Err(status) => failure(session, status),
    }
}

/// After a form: back to `to`, with the outcome as a note or an error the
/// page shows (Post/Redirect/Get, so a reload never re-submits).
fn back(to: &str, outcome: Result<String, Status>) -> Response {
    let (key, text) = match outcome {
        Ok(note) => ("note", note),
        Err(s) => ("error", s.message().to_owned()),
    };
    let mut target = String::from(to);
    target.push(if to.contains('?') { '&' } else { '?' });
    target.push_str(key);
    target.push('=');
    target.push_str(&render::query_escape(&text));
    Redirect::to(&target).into_response()
}

fn forbidden_csrf() -> Response {
    page(
        StatusCode::FORBIDDEN,
        render::bare(
            "Refused",
            "The form was not signed with this session's token (CSRF check). Reload the page and try again.",
        ),
    )
}

fn instance_id(raw: &str) -> Result<Uuid, Status> {
    crate::status::uuid("instance_id", raw)
}

/// `?note=` / `?error=` after a redirect.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Flash {
    note: Option<String>,
    error: Option<String>,
}

// ------------------------------------------------------------ sign-in

#[derive(Debug, Default, Deserialize)]
struct LoginQuery {
    error: Option<String>,
}

async fn login_page(Query(q): Query<LoginQuery>) -> Response {
    page(StatusCode::OK, render::login(q.error.as_deref()))
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
    #[serde(default)]
    tenant_id: String,
}

async fn login(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    Form(form): Form<LoginForm>,
) -> Response {
    let refuse = |msg: &str| page(StatusCode::UNAUTHORIZED, render::login(Some(msg)));
    // A peer out of failed sign-ins is answered before its token is looked up.
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr.ip());
    if let Err(wait) = state.auth_failures.check(peer) {
        let status = genesis_proto::peer_limit::FailedAuthLimit::refusal(wait);
        let mut resp = page(
            StatusCode::TOO_MANY_REQUESTS,
            render::login(Some(status.message())),
        );
        let secs = wait.as_secs().max(1).to_string();
        if let Ok(v) = HeaderValue::from_str(&secs) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return resp;
    }
    let caller = match authenticate_token(&state, form.token.trim()).await {
        Ok(c) => c,
        Err(s) if s.code() == Code::Unavailable => {
            return page(
                StatusCode::SERVICE_UNAVAILABLE,
                render::login(Some(s.message())),
            );
        }
        Err(s) => {
            if s.code() == Code::Unauthenticated
                && state.auth_failures.record_failure(peer)
                && let Some(ip) = peer
            {
                tracing::warn!(peer = %genesis_proto::peer_limit::peer_key(ip), "failed sign-ins: peer held back until its bucket refills");
            }
            return refuse(s.message());
        }
    };
    let tenant = match (caller.tenant_id, form.tenant_id.trim()) {
        (Some(own), "") => own,
        (Some(own), chosen) => match Uuid::parse_str(chosen) {
            Ok(t) if t == own => own,
            Ok(_) => return refuse("the token is bound to another tenant"),
            Err(_) => return refuse("tenant: not a UUID"),
        },
        (None, "") => {
            return refuse("a platform-wide token must name the tenant to show");
        }
        (None, chosen) => match Uuid::parse_str(chosen) {
            Ok(t) => t,
            Err(_) => return refuse("tenant: not a UUID"),
        },
    };
    let secret = generate_token();
    let csrf = generate_token();
    let ttl = Duration::from_secs(state.config.dashboard_session_hours.saturating_mul(3600));
    let expires = chrono::Utc::now()
        + chrono::Duration::from_std(ttl).unwrap_or_else(|_| chrono::Duration::hours(12));
    match state
        .store
        .sessions()
        .open(
            tenant,
            caller.token_id,
            &token_sha256(&secret),
            &csrf,
            expires,
        )
        .await
    {
        Ok(row) => {
            tracing::info!(tenant = %tenant, token = %caller.token_id, "dashboard sign-in");
            let max_age = (row.expires_at - chrono::Utc::now()).num_seconds().max(1);
            let cookie = format!(
                "{SESSION_COOKIE}={secret}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
                if state.config.dashboard_cookie_secure() {
                    "; Secure"
                } else {
                    ""
                }
            );
            let mut resp = Redirect::to("/agents").into_response();
            match HeaderValue::from_str(&cookie) {
                Ok(v) => {
                    resp.headers_mut().insert(header::SET_COOKIE, v);
                    resp
                }
                Err(_) => page(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    render::login(Some("could not set the session cookie")),
                ),
            }
        }
        Err(StoreError::NotFound { .. }) => refuse("no such tenant for this token"),
        Err(e) => {
            tracing::error!(error = %e, "dashboard sign-in failed");
            page(
                StatusCode::SERVICE_UNAVAILABLE,
                render::login(Some("the database is unreachable; try again shortly")),
            )
        }
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(r) = form_session(&state, &headers, &form.csrf, Class::Admin).await {
        return r;
    }
    if let Some(secret) = cookie_value(&headers, SESSION_COOKIE)
        && let Err(e) = state.store.sessions().revoke(&token_sha256(secret)).await
    {
        tracing::error!(error = %e, "dashboard sign-out failed");
    }
    let mut resp = Redirect::to("/login").into_response();
    // The clearing cookie carries the same attributes as the one it
    // replaces (a browser may ignore a non-Secure overwrite of a Secure one).
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(if state.config.dashboard_cookie_secure() {
            "genesis_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Secure"
        } else {
            "genesis_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
        }),
    );
    resp
}

// ------------------------------------------------------------ pages

async fn agents_page(
    State(state): State<AppState>,
    s: Session,
    Query(flash): Query<Flash>,
) -> Response {
    rendered(&s, pages::agents(&state, &s, &flash).await)
}

async fn agent_page(
    State(state): State<AppState>,
    s: Session,
    Path(id): Path<String>,
    Query(flash): Query<Flash>,
) -> Response {
    let result = match instance_id(&id) {
        Ok(i) => pages::agent(&state, &s, i, &flash).await,
        Err(e) => Err(e),
    };
    rendered(&s, result)
}

async fn trace_page(
    State(state): State<AppState>,
    s: Session,
    Path((id, turn)): Path<(String, String)>,
) -> Response {
    let turn_number = turn.parse::<i64>().ok().filter(|n| *n >= 1).ok_or_else(|| {
        genesis_proto::convert::invalid_argument("turn_number", "must be a turn number from 1")
    });
    let result = match instance_id(&id).and_then(|i| turn_number.map(|n| (i, n))) {
        Ok((i, n)) => pages::trace(&state, &s, i, n).await,
        Err(e) => Err(e),
    };
    rendered(&s, result)
}

#[derive(Deserialize)]
struct ReplayForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    preset: String,
}

/// The trace page's replay button: asks for the replay and shows it.
async fn replay_turn(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((id, turn)): Path<(String, String)>,
    Form(form): Form<ReplayForm>,
) -> Response {
    let s = match form_session(&state, &headers, &form.csrf, Class::Enqueue).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let trace = format!(
        "/agents/{}/turns/{}/trace",
        render::query_escape(&id),
        render::query_escape(&turn)
    );
    let Ok(turn_number) = turn.parse::<i64>() else {
        return back(
            &trace,
            Err(genesis_proto::convert::invalid_argument(
                "turn_number",
                "must be a turn number from 1",
            )),
        );
    };
    match Agents::new(state.clone())
        .replay_turn(rpc(
            &s,
            v1::ReplayTurnRequest {
                tenant_id: s.tenant(),
                instance_id: id.clone(),
                turn_number,
                preset_id: form.preset.clone(),
            },
        ))
        .await
    {
        Ok(r) => Redirect::to(&format!("/replays/{}", r.into_inner().id)).into_response(),
        Err(e) => back(&trace, Err(e)),
    }
}

async fn replay_page(
    State(state): State<AppState>,
    s: Session,
    Path(id): Path<String>,
) -> Response {
    let result = match crate::status::uuid("replay_id", &id) {
        Ok(i) => pages::replay(&state, &s, i).await,
        Err(e) => Err(e),
    };
    rendered(&s, result)
}

async fn decisions_page(
    State(state): State<AppState>,
    s: Session,
    Query(flash): Query<Flash>,
) -> Response {
    rendered(&s, pages::decisions(&state, &s, &flash).await)
}

async fn tasks_page(State(state): State<AppState>, s: Session) -> Response {
    rendered(&s, pages::tasks(&state, &s).await)
}

async fn task_page(State(state): State<AppState>, s: Session, Path(id): Path<String>) -> Response {
    let result = match crate::status::uuid("task_id", &id) {
        Ok(i) => pages::task(&state, &s, i).await,
        Err(e) => Err(e),
    };
    rendered(&s, result)
}

async fn artifact_page(
    State(state): State<AppState>,
    s: Session,
    Path((task, artifact)): Path<(String, String)>,
) -> Response {
    let ids = crate::status::uuid("task_id", &task)
        .and_then(|t| crate::status::uuid("artifact_id", &artifact).map(|a| (t, a)));
    let result = match ids {
        Ok((t, a)) => pages::artifact(&state, &s, t, a).await,
        Err(e) => Err(e),
    };
    rendered(&s, result)
}

async fn spend_page(State(state): State<AppState>, s: Session) -> Response {
    rendered(&s, pages::spend(&state, &s).await)
}

/// Live turns and messages of one agent as server-sent events: the
/// `WatchTurns` stream of the session's tenant, filtered to the instance.
async fn agent_events(
    State(state): State<AppState>,
    s: Session,
    Path(id): Path<String>,
) -> Response {
    let i = match instance_id(&id) {
        Ok(i) => i,
        Err(e) => return (StatusCode::BAD_REQUEST, e.message().to_owned()).into_response(),
    };
    let mut watch = rpc(
        &s,
        v1::WatchTurnsRequest {
            tenant_id: s.tenant(),
            instance_id: Some(i.to_string()),
        },
    );
    // The stream re-checks this session, so signing out ends it.
    watch
        .extensions_mut()
        .insert(crate::streams::SessionStream {
            session_sha256: s.secret_sha256.clone(),
        });
    let stream = match Agents::new(state.clone()).watch_turns(watch).await {
        Ok(r) => r.into_inner(),
        Err(e) => return (http_status(&e), e.message().to_owned()).into_response(),
    };
    // An error ends the stream with an `end` event carrying its reason (the
    // session was signed out or its token revoked); the page stops listening.
    let events = stream
        .scan(false, |ended, item| {
            let next = if *ended {
                None
            } else {
                match item {
                    Ok(ev) => Some(sse_event(ev)),
                    Err(status) => {
                        *ended = true;
                        Some(Some(Event::default().event("end").data(status.message())))
                    }
                }
            };
            std::future::ready(next)
        })
        .filter_map(|ev| std::future::ready(ev.map(Ok::<_, Infallible>)));
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// One `WatchTurns` event as a server-sent event (`turn` or `message`).
fn sse_event(ev: v1::WatchTurnsEvent) -> Option<Event> {
    let (name, data) = match ev.event? {
        v1::watch_turns_event::Event::Turn(t) => ("turn", render::turn_json(&t)),
        v1::watch_turns_event::Event::Message(m) => ("message", render::message_json(&m.message?)),
    };
    Some(Event::default().event(name).data(data))
}

// ------------------------------------------------------------ forms

/// The session of a state-changing form: signed in, carrying this session's
/// CSRF token, and within the tenant's rate for `class` (the admin bucket was
/// drawn by [`session`]; an enqueueing form also draws the enqueue bucket).
async fn form_session(
    state: &AppState,
    headers: &HeaderMap,
    csrf: &str,
    class: Class,
) -> Result<Session, Response> {
    let s = session(state, headers).await?;
    if !s.csrf_ok(csrf) {
        return Err(forbidden_csrf());
    }
    if class == Class::Enqueue
        && let Err(e) = state.limits.check(&s.caller(), Class::Enqueue)
    {
        return Err(reply(headers, "/agents", Err(e)));
    }
    Ok(s)
}

#[derive(Deserialize)]
struct MessageForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    body: String,
}

async fn send_message(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<MessageForm>,
) -> Response {
    let s = match form_session(&state, &headers, &form.csrf, Class::Enqueue).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let outcome = Agents::new(state.clone())
        .send_message(rpc(
            &s,
            v1::SendMessageRequest {
                tenant_id: s.tenant(),
                instance_id: id.clone(),
                body: form.body,
            },
        ))
        .await
        .map(|_| "message sent".to_owned());
    reply(
        &headers,
        &format!("/agents/{}", render::query_escape(&id)),
        outcome,
    )
}

/// A form posted by the page's script (`X-Requested-With: fetch`) gets a
/// status and a plain-text line; a plain form post gets the redirect.
fn reply(headers: &HeaderMap, to: &str, outcome: Result<String, Status>) -> Response {
    let scripted = headers
        .get("x-requested-with")
        .is_some_and(|v| v.as_bytes() == b"fetch");
    if !scripted {
        return back(to, outcome);
    }
    match outcome {
        Ok(note) => (StatusCode::OK, note).into_response(),
        Err(s) => (http_status(&s), s.message().to_owned()).into_response(),
    }
}

#[derive(Deserialize)]
struct ModeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    mode: String,
}

async fn set_mode(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<ModeForm>,
) -> Response {
    let s = match form_session(&state, &headers, &form.csrf, Class::Admin).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let outcome = Agents::new(state.clone())
        .set_mode(rpc(
            &s,
            v1::SetModeRequest {
                tenant_id: s.tenant(),
                instance_id: id.clone(),
                mode: form.mode.clone(),
            },
        ))
        .await
        .map(|r| {
            let r = r.into_inner();
            format!("mode {} → {}", r.previous_mode, form.mode)
        });
    reply(
        &headers,
        &format!("/agents/{}", render::query_escape(&id)),
        outcome,
    )
}

#[derive(Deserialize)]
struct LifecycleForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
}

async fn lifecycle(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<LifecycleForm>,
) -> Response {
    let s = match form_session(&state, &headers, &form.csrf, Class::Enqueue).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let svc = Agents::new(state.clone());
    let (tenant_id, instance_id) = (s.tenant(), id.clone());
    let outcome = match form.action.as_str() {
        "start" => svc
            .start_agent(rpc(
                &s,
                v1::StartAgentRequest {
                    tenant_id,
                    instance_id,
                },
            ))
            .await
            .map(|_| "started".to_owned()),
        "stop" => svc
            .stop_agent(rpc(
                &s,
                v1::StopAgentRequest {
                    tenant_id,
                    instance_id,
                },
            ))
            .await
            .map(|_| "stopped".to_owned()),
        "reset" => svc
            .reset_agent(rpc(
                &s,
                v1::ResetAgentRequest {
                    tenant_id,
                    instance_id,
                },
            ))
            .await
            .map(|r| {
                let r = r.into_inner();
                format!(
                    "reset: {} turns cleared, {} stale events drained, opener enqueued",
                    r.cleared_turns, r.drained_events
                )
            }),
        other => Err(Status::invalid_argument(format!(
            "action: expected start, stop or reset, got {:?}",
            render::clip(other, 40)
        ))),
    };
    reply(
        &headers,
        &format!("/agents/{}", render::query_escape(&id)),
        outcome,
    )
}

#[derive(Deserialize)]
struct RespondForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    resolution: String,
    #[serde(default)]
    notes: String,
}

async fn respond(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<RespondForm>,
) -> Response {
    let s = match form_session(&state, &headers, &form.csrf, Class::Enqueue).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let outcome = Decisions::new(state.clone())
        .respond_decision(rpc(
            &s,
            v1::RespondDecisionRequest {
                tenant_id: s.tenant(),
                decision_id: id,
                resolution: form.resolution,
                notes: form.notes,
            },
        ))
        .await
        .map(|r| {
            let r = r.into_inner();
            if r.already_resolved {
                "already resolved; nothing changed".to_owned()
            } else if r.resume_event_id.is_some() {
                "answered; the agent resumes".to_owned()
            } else {
                "answered".to_owned()
            }
        });
    reply(&headers, "/decisions", outcome)
}
