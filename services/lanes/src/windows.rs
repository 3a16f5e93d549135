//! The Windows lane (spec §2.3, `WindowsMcpTools`): a client of the Windows
//! pool's HTTP API that leases a Windows worker for a coder on first use and
//! drives it through the build shape (`windows_run_spec`,
//! `windows_task_status`) and the desktop shape (launch, windows, focus,
//! close, snapshot, click, type, key, wait_for, computer, screenshot).
//!
//! It owns the protocol of the per-(tenant, holder) hold, the clamps, the
//! input validation, and the projection of pool errors onto the lane's error
//! codes. It must never lease before the tenant's windows-pool feature and
//! the call's input are checked, never pass a guest's free text back on a
//! call that carried typed input, never see a secret's value (the pool types
//! it on the machine), and never keep a machine nobody holds.
//!
//! # Holds shared by every process
//!
//! The hold lives in a [`HoldTable`] (control's replicas share the
//! database's), never in this process: any replica serves any verb on it,
//! and a restart loses nothing. This keeps no cache of it; each verb reads
//! the table once. On first use a call claims the key (a `leasing` row with
//! a fresh revision); of concurrent claimers on any replica exactly one
//! wins and leases, the others poll the table until its hold is filled. A
//! claim lapses [`CLAIM_MARGIN`] after its lease call would have timed out,
//! and the next claim takes it over; a claimer whose claim was taken over
//! (or whose fill the table refused) hands its lease back to the pool at
//! once. Release, task settlement and a lapsed lease remove the row; a
//! sessionEvicted answer removes the revision it used and no newer one. A
//! failure of the table itself answers POOL_UNAVAILABLE (retryable; the
//! detail is logged, not shown to the coder).

//! # The pool's REST contract
//!
//! Every request carries `authorization: Bearer <credential>`; bodies are JSON
//! with camelCase fields.
//!
//! | verb | method and path | body / answer |
//! |---|---|---|
//! | lease | `POST /leases` | `{tenantId, holder}` → `{leaseId, sessionId, host, expiresAt}` |
//! | release | `DELETE /leases/{leaseId}` | → `{released: true}`; 404 = already gone |
//! | windows_run_spec | `POST /sessions/{sid}/run_spec` | `{script, shell?}` → `{taskHandle, state}` |
//! | windows_task_status | `GET /sessions/{sid}/tasks/{handle}` | → `{taskHandle, state, exitCode?, output?}` |
//! | windows_launch | `POST /sessions/{sid}/launch` | `{program, args, cwd?, waitForWindowMs, budgetMs}` → `{pid, hwnd\|null, title\|null}` |
//! | windows_windows | `GET /sessions/{sid}/windows` | → `{windows: [{hwnd, title, pid, bounds}]}` |
//! | windows_focus | `POST /sessions/{sid}/windows/{hwnd}/focus` | → `{}` |
//! | windows_close | `POST /sessions/{sid}/windows/{hwnd}/close` | → `{}` |
//! | windows_snapshot | `POST /sessions/{sid}/snapshot` | `{hwnd?}` → `{snapshot}` |
//! | windows_click | `POST /sessions/{sid}/click` | `{target, button, double}` → `{method}` |
//! | windows_type | `POST /sessions/{sid}/type` | `{target?, text\|secretRef}` → `{method}` |
//! | windows_key | `POST /sessions/{sid}/key` | `{keys, hwnd?}` → `{}` |
//! | windows_wait_for | `POST /sessions/{sid}/wait_for` | `{target?, windowTitle?, state, timeoutMs}` → `{state, elapsedMs}` |
//! | windows_computer | `POST /sessions/{sid}/computer` | `{action, ...}` → `{}` |
//! | windows_screenshot | `GET /sessions/{sid}/screenshot?hwnd=` | → `{pngBase64, width, height}` |
//!
//! Errors answer a non-2xx status with `{error, message?, reason?, state?,
//! secretRef?, host?, elapsedMs?, holders?, taskHandle?}`. A desktop code in
//! `error` (DESKTOP_UNAVAILABLE, ELEMENT_NOT_FOUND, WINDOW_NOT_FOUND,
//! WAIT_TIMEOUT, UI_TIMEOUT, SECRET_NOT_FOUND, SECRET_TARGET_NOT_MASKED,
//! WINDOW_NOT_FOREGROUND, INPUT_BLOCKED) is taken as it is whatever the
//! status; otherwise the status decides: 401 UNAUTHENTICATED, 403 FORBIDDEN,
//! 404 NOT_FOUND (the pool reserves 404 without a desktop code for "unknown
//! session": sessionEvicted), 409 CONFLICT, 429 RATE_LIMITED, 5xx POOL_ERROR
//! (at capacity the body's `holders` names who holds the slots), any other
//! BAD_REQUEST. No HTTP answer at all is POOL_UNAVAILABLE.
//!
//! Timeouts are ordered guest < pool < core: the guest waits at most
//! `waitForWindowMs` (≤ 55 s) for a window, the pool's launch budget is that
//! plus 10 s, and this client's HTTP timeout for the call is the budget plus a
//! further margin, so a program that shows no window comes back as the
//! guest's `hwnd: null`, never as UI_TIMEOUT.

// WindowsError carries every field the spec puts in an error's data; errors are
// the cold path of a network call, so their size is not worth boxing away.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

/// Ceiling of `windows_wait_for.timeoutMs` (10 minutes).
pub const MAX_WAIT_FOR_TIMEOUT_MS: u64 = 10 * 60 * 1000;
/// Ceiling of `windows_launch.waitForWindowMs` (55 s, the guest's own ceiling).
pub const MAX_LAUNCH_WAIT_MS: u64 = 55_000;
/// The pool's launch budget exceeds the guest's wait by this much.
pub const LAUNCH_BUDGET_EXTRA_MS: u64 = 10_000;
/// Default `waitForWindowMs` when the caller gives none.
pub const DEFAULT_LAUNCH_WAIT_MS: u64 = 10_000;
/// Default `timeoutMs` of `windows_wait_for` when the caller gives none.
pub const DEFAULT_WAIT_FOR_TIMEOUT_MS: u64 = 30_000;
/// Core's HTTP timeout exceeds the pool's budget for a call by this much.
pub const CORE_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);

/// The codes a Windows verb's error carries (spec §2.3), stable on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WindowsErrorCode {
    /// The windows-pool feature is off for this tenant.
    FeatureDisabled,
    /// The call's input is invalid; no machine was leased.
    ValidationError,
    /// The host has no interactive desktop (reason `session_0` or `capture_probe_failed`).
    DesktopUnavailable,
    /// The targeted element is gone: re-snapshot.
    ElementNotFound,
    /// That hwnd is gone: list again.
    WindowNotFound,
    /// The awaited state was not reached; carries the elapsed time.
    WaitTimeout,
    /// The guest did not answer within the pool's per-call budget.
    UiTimeout,
    /// The named secret is not provisioned on the pool.
    SecretNotFound,
    /// A secretRef was aimed at a control that is not password-masked.
    SecretTargetNotMasked,
    /// The target is not in the foreground: focus it and retry.
    WindowNotForeground,
    /// A higher-integrity window or a locked desktop refuses input.
    InputBlocked,
    /// No HTTP answer from the pool.
    PoolUnavailable,
    /// The pool answered 5xx.
    PoolError,
    /// The pool refused core's credential.
    Unauthenticated,
    /// The pool refused core's credential's rights.
    Forbidden,
    /// The pool no longer knows the session (sessionEvicted).
    NotFound,
    /// A 409 outside the desktop vocabulary.
    Conflict,
    /// 429: retry later.
    RateLimited,
    /// Any other refusal.
    BadRequest,
}

impl WindowsErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FeatureDisabled => "FEATURE_DISABLED",
            Self::ValidationError => "VALIDATION_ERROR",
            Self::DesktopUnavailable => "DESKTOP_UNAVAILABLE",
            Self::ElementNotFound => "ELEMENT_NOT_FOUND",
            Self::WindowNotFound => "WINDOW_NOT_FOUND",
            Self::WaitTimeout => "WAIT_TIMEOUT",
            Self::UiTimeout => "UI_TIMEOUT",
            Self::SecretNotFound => "SECRET_NOT_FOUND",
            Self::SecretTargetNotMasked => "SECRET_TARGET_NOT_MASKED",
            Self::WindowNotForeground => "WINDOW_NOT_FOREGROUND",
            Self::InputBlocked => "INPUT_BLOCKED",
            Self::PoolUnavailable => "POOL_UNAVAILABLE",
            Self::PoolError => "POOL_ERROR",
            Self::Unauthenticated => "UNAUTHENTICATED",
            Self::Forbidden => "FORBIDDEN",
            Self::NotFound => "NOT_FOUND",
            Self::Conflict => "CONFLICT",
            Self::RateLimited => "RATE_LIMITED",
            Self::BadRequest => "BAD_REQUEST",
        }
    }

    /// The desktop vocabulary the pool reports in its body's `error` field.
    fn from_desktop(code: &str) -> Option<Self> {
        Some(match code {
            "DESKTOP_UNAVAILABLE" => Self::DesktopUnavailable,
            "ELEMENT_NOT_FOUND" => Self::ElementNotFound,
            "WINDOW_NOT_FOUND" => Self::WindowNotFound,
            "WAIT_TIMEOUT" => Self::WaitTimeout,
            "UI_TIMEOUT" => Self::UiTimeout,
            "SECRET_NOT_FOUND" => Self::SecretNotFound,
            "SECRET_TARGET_NOT_MASKED" => Self::SecretTargetNotMasked,
            "WINDOW_NOT_FOREGROUND" => Self::WindowNotForeground,
            "INPUT_BLOCKED" => Self::InputBlocked,
            _ => return None,
        })
    }

    /// Whether retrying the same call can help without anyone acting first.
    /// DESKTOP_UNAVAILABLE is not: `session_0` never changes and
    /// `capture_probe_failed` needs an operator to restore the session.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            Self::WaitTimeout
                | Self::UiTimeout
                | Self::WindowNotForeground
                | Self::PoolUnavailable
                | Self::PoolError
                | Self::NotFound
                | Self::RateLimited
        )
    }
}

impl std::fmt::Display for WindowsErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error of a Windows verb: its code plus the data the spec requires
/// (`httpStatus`, `retryable`, `poolDetail`) and the code-specific fields.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct WindowsError {
    /// The lane's code.
    pub code: WindowsErrorCode,
    /// A message for the coder (never the guest's free text on typed input).
    pub message: String,
    /// The pool's HTTP status; `None` when the pool did not answer or never was asked.
    pub http_status: Option<u16>,
    /// Whether retrying can help.
    pub retryable: bool,
    /// The pool's body (projected on calls that carried typed input).
    pub pool_detail: Value,
    /// The pool's reason (e.g. `session_0`, `capture_probe_failed`).
    pub reason: Option<String>,
    /// Set with NOT_FOUND: the pool dropped the session; the next call leases afresh.
    pub session_evicted: bool,
    /// With WAIT_TIMEOUT: how long the guest waited.
    pub elapsed_ms: Option<u64>,
    /// With POOL_ERROR at capacity: the current holder(s).
    pub holders: Vec<String>,
    /// With CONFLICT: the running task's handle.
    pub task_handle: Option<String>,
    /// With SECRET_NOT_FOUND / SECRET_TARGET_NOT_MASKED: the secret's name.
    pub secret_ref: Option<String>,
}

impl WindowsError {
    fn local(code: WindowsErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            http_status: None,
            retryable: code.retryable(),
            pool_detail: Value::Null,
            reason: None,
            session_evicted: false,
            elapsed_ms: None,
            holders: Vec::new(),
            task_handle: None,
            secret_ref: None,
        }
    }

    fn validation(message: impl Into<String>) -> Self {
        Self::local(WindowsErrorCode::ValidationError, message)
    }

    /// The error's data object as tools return it:
    /// `{error, message, httpStatus, retryable, poolDetail, ...}`.
    pub fn data(&self) -> Value {
        let mut v = json!({
            "error": self.code.as_str(),
            "message": self.message,
            "httpStatus": self.http_status,
            "retryable": self.retryable,
            "poolDetail": self.pool_detail,
        });
        if let Some(r) = &self.reason {
            v["reason"] = json!(r);
        }
        if self.session_evicted {
            v["sessionEvicted"] = json!(true);
        }
        if let Some(e) = self.elapsed_ms {
            v["elapsedMs"] = json!(e);
        }
        if !self.holders.is_empty() {
            v["holders"] = json!(self.holders);
        }
        if let Some(t) = &self.task_handle {
            v["taskHandle"] = json!(t);
        }
        if let Some(s) = &self.secret_ref {
            v["secretRef"] = json!(s);
        }
        v
    }
}

/// The fields of a pool error body that may reach the coder on a call that
/// carried typed input.
const TYPED_INPUT_PROJECTION: [&str; 5] = ["error", "reason", "state", "secretRef", "host"];

fn project(body: &Value) -> Value {
    let mut out = serde_json::Map::new();
    if let Value::Object(map) = body {
        for k in TYPED_INPUT_PROJECTION {
            if let Some(v) = map.get(k) {
                out.insert(k.to_string(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// Maps a non-2xx pool answer onto the lane's error (see the module's contract).
pub fn map_pool_error(status: u16, body: Value, typed_input: bool) -> WindowsError {
    let str_field = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
    let desktop = str_field("error")
        .as_deref()
        .and_then(WindowsErrorCode::from_desktop);
    let code = desktop.unwrap_or(match status {
        401 => WindowsErrorCode::Unauthenticated,
        403 => WindowsErrorCode::Forbidden,
        404 => WindowsErrorCode::NotFound,
        409 => WindowsErrorCode::Conflict,
        429 => WindowsErrorCode::RateLimited,
        500..=599 => WindowsErrorCode::PoolError,
        _ => WindowsErrorCode::BadRequest,
    });
    let reason = str_field("reason");
    let holders: Vec<String> = body
        .get("holders")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|h| h.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let task_handle = str_field("taskHandle");
    let secret_ref = str_field("secretRef");
    let elapsed_ms = body.get("elapsedMs").and_then(Value::as_u64);
    let mut message = match code {
        WindowsErrorCode::DesktopUnavailable => format!(
            "the host has no interactive desktop ({})",
            reason.as_deref().unwrap_or("unknown reason")
        ),
        WindowsErrorCode::ElementNotFound => "element not found; take a new snapshot".to_string(),
        WindowsErrorCode::WindowNotFound => {
            "window not found; list again with windows_windows".to_string()
        }
        WindowsErrorCode::WaitTimeout => format!(
            "the awaited state was not reached after {} ms",
            elapsed_ms.unwrap_or(0)
        ),
        WindowsErrorCode::UiTimeout => "the guest did not answer within the pool's budget; a modal dialog may block the desktop (windows_screenshot shows it)".to_string(),
        WindowsErrorCode::SecretNotFound => format!(
            "secret {:?} is not provisioned on the Windows pool",
            secret_ref.as_deref().unwrap_or("")
        ),
        WindowsErrorCode::SecretTargetNotMasked => {
            "a secretRef may only be typed into a password-masked control; nothing was typed".to_string()
        }
        WindowsErrorCode::WindowNotForeground => {
            "the target is not in the foreground; windows_focus it and retry".to_string()
        }
        WindowsErrorCode::InputBlocked => {
            "a higher-integrity window or a locked desktop refuses input".to_string()
        }
        WindowsErrorCode::PoolError if !holders.is_empty() => {
            format!("the pool is at capacity; held by {}", holders.join(", "))
        }
        WindowsErrorCode::PoolError => format!("the pool failed ({status})"),
        WindowsErrorCode::Unauthenticated | WindowsErrorCode::Forbidden => {
            "the pool refused core's credential; an operator fixes the resource-pool-auth secret"
                .to_string()
        }
        WindowsErrorCode::NotFound => {
            "the pool no longer knows the session; the next call leases a fresh machine".to_string()
        }
        WindowsErrorCode::Conflict => match &task_handle {
            Some(t) => format!("conflict: task {t} is already running"),
            None => "conflict".to_string(),
        },
        WindowsErrorCode::RateLimited => "rate limited by the pool; retry later".to_string(),
        _ => format!("the pool refused the call ({status})"),
    };
    if !typed_input && let Some(m) = str_field("message") {
        message = format!("{message}: {m}");
    }
    WindowsError {
        code,
        message,
        http_status: Some(status),
        retryable: code.retryable(),
        pool_detail: if typed_input { project(&body) } else { body },
        reason,
        session_evicted: code == WindowsErrorCode::NotFound,
        elapsed_ms,
        holders,
        task_handle,
        secret_ref,
    }
}

/// Answers whether a tenant's windows-pool feature is on. Implementations
/// should fail closed (a lookup failure answers `false`).
#[async_trait]
pub trait WindowsFeature: Send + Sync {
    /// Whether the tenant may use the Windows lane.
    async fn windows_pool_enabled(&self, tenant: Uuid) -> bool;
}

/// A fixed flag for every tenant (tests, single-tenant deployments).
#[async_trait]
impl WindowsFeature for bool {
    async fn windows_pool_enabled(&self, _tenant: Uuid) -> bool {
        *self
    }
}

/// Whose session it is: the tenant and the coder/task holding it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LaneKey {
    /// The tenant.
    pub tenant: Uuid,
    /// The coder or task id holding the session.
    pub holder: String,
}

impl LaneKey {
    /// A key for `holder` (a coder or task id) of `tenant`.
    pub fn new(tenant: Uuid, holder: impl Into<String>) -> Self {
        Self {
            tenant,
            holder: holder.into(),
        }
    }
}

/// A held lease as the pool granted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// The pool's lease id (released with `DELETE /leases/{id}`).
    pub lease_id: String,
    /// The session the desktop and build verbs address.
    pub session_id: String,
    /// The leased host's name.
    pub host: String,
    /// When the pool expires the lease unless released earlier.
    pub expires_at: Option<DateTime<Utc>>,
}

/// How the pool is reached.
#[derive(Clone)]
pub struct WindowsPoolConfig {
    /// Base URL, e.g. `http://windows-pool:8080`.
    pub base_url: String,
    /// Core's credential for the pool (the resource-pool-auth secret).
    pub credential: String,
    /// Core's HTTP timeout for calls without a longer budget of their own.
    pub http_timeout: Duration,
}

impl std::fmt::Debug for WindowsPoolConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowsPoolConfig")
            .field("base_url", &self.base_url)
            .field("credential", &"<redacted>")
            .field("http_timeout", &self.http_timeout)
            .finish()
    }
}

/// The answer of `windows_release`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseResult {
    /// Whether a held machine was handed back by this call.
    pub released: bool,
    /// `released`, `not_held` (nothing was held; nothing changed), `expired`
    /// (the lease had run out already) or `evicted` (the pool no longer knew it).
    pub outcome: String,
}

/// A point in primary-screen pixels (the coordinates screenshots use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    /// X in pixels.
    pub x: i32,
    /// Y in pixels.
    pub y: i32,
}

/// How a click or type picks its element: by snapshot ref, else by
/// automationId / name / controlType, else by a screen point.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// A `ref=e<N>` from the latest snapshot.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub element_ref: Option<String>,
    /// UI Automation AutomationId.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automation_id: Option<String>,
    /// UI Automation Name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// UI Automation ControlType.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_type: Option<String>,
    /// A screen point.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub point: Option<Point>,
    /// Restricts the search to one top-level window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hwnd: Option<i64>,
}

impl Target {
    fn is_empty(&self) -> bool {
        self.element_ref.is_none()
            && self.automation_id.is_none()
            && self.name.is_none()
            && self.control_type.is_none()
            && self.point.is_none()
    }

    fn validate(&self) -> Result<(), WindowsError> {
        if let Some(r) = &self.element_ref {
            let digits = r.strip_prefix('e').unwrap_or("");
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(WindowsError::validation(format!(
                    "ref {r:?} is not of the form e<N>"
                )));
            }
        }
        for (field, v) in [
            ("automationId", &self.automation_id),
            ("name", &self.name),
            ("controlType", &self.control_type),
        ] {
            if v.as_ref().is_some_and(|s| s.is_empty() || s.len() > 512) {
                return Err(WindowsError::validation(format!(
                    "{field} must be 1..=512 bytes"
                )));
            }
        }
        Ok(())
    }
}

/// `windows_run_spec`: a build script to run on the leased machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSpec {
    /// The script.
    pub script: String,
    /// The shell (`powershell`, `cmd`); the pool's default when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
}

/// A submitted build task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskHandle {
    /// The handle `windows_task_status` polls.
    pub task_handle: String,
    /// The task's state at submission.
    #[serde(default)]
    pub state: Option<String>,
}

/// A build task's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// The handle.
    pub task_handle: String,
    /// `running`, `succeeded`, `failed`, `cancelled`.
    pub state: String,
    /// Exit code once finished.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Output so far.
    #[serde(default)]
    pub output: Option<String>,
}

/// `windows_launch`: a program to start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchRequest {
    /// Program path or name.
    pub program: String,
    /// Arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// How long the guest waits for a window; clamped to 55 s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_for_window_ms: Option<u64>,
}

/// What `windows_launch` answers: `hwnd: None` when no window showed in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchResult {
    /// Process id.
    pub pid: u32,
    /// The main window, if one showed.
    pub hwnd: Option<i64>,
    /// Its title.
    pub title: Option<String>,
}

/// Window bounds in primary-screen pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    /// Left.
    pub x: i32,
    /// Top.
    pub y: i32,
    /// Width.
    pub width: i32,
    /// Height.
    pub height: i32,
}

/// A visible top-level window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowInfo {
    /// Window handle.
    pub hwnd: i64,
    /// Title.
    pub title: String,
    /// Owning process.
    #[serde(default)]
    pub pid: Option<u32>,
    /// Bounds.
    pub bounds: Bounds,
}

/// How an action was carried out: the element's own pattern, or real input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionResult {
    /// e.g. `invoke_pattern`, `value_pattern`, `mouse`, `keystrokes`.
    pub method: String,
}

/// The state `windows_wait_for` awaits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitState {
    /// The element or window exists.
    Exists,
    /// The element is enabled.
    Enabled,
    /// The element or window is gone.
    Gone,
}

/// `windows_wait_for`: an element or a window title reaching a state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitForRequest {
    /// The element to watch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// Or a window title to watch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_title: Option<String>,
    /// The awaited state.
    pub state: WaitState,
    /// How long to wait; clamped to 10 minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// What `windows_wait_for` answers when the state was reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitForResult {
    /// The reached state.
    pub state: String,
    /// How long it took.
    pub elapsed_ms: u64,
}

/// Mouse button.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MouseButton {
    /// Left (default).
    #[default]
    Left,
    /// Right.
    Right,
    /// Middle.
    Middle,
}

/// Raw input for `windows_computer`, in primary-screen pixels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ComputerAction {
    /// Move the pointer.
    MouseMove {
        /// Target X.
        x: i32,
        /// Target Y.
        y: i32,
    },
    /// Click at a point.
    Click {
        /// X.
        x: i32,
        /// Y.
        y: i32,
        /// Button.
        #[serde(default)]
        button: MouseButton,
    },
    /// Double-click at a point.
    DoubleClick {
        /// X.
        x: i32,
        /// Y.
        y: i32,
    },
    /// Drag from one point to another.
    Drag {
        /// Start.
        from: Point,
        /// End.
        to: Point,
    },
    /// Scroll at a point.
    Scroll {
        /// X.
        x: i32,
        /// Y.
        y: i32,
        /// Wheel delta (positive up).
        delta: i32,
    },
    /// Type literal text as keystrokes.
    Type {
        /// The text.
        text: String,
    },
    /// Press a chord.
    Key {
        /// e.g. `Ctrl+S`.
        keys: String,
    },
}

/// A screenshot: PNG bytes (base64) whose pixels are the coordinates
/// `windows_computer` takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Screenshot {
    /// PNG, base64.
    pub png_base64: String,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// `windows_type`: exactly one of `text` / `secret_ref`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeRequest {
    /// Where to type; the focused element when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// Literal text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The bare name of a secret provisioned on the pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
}

/// A secretRef is a bare name: 1..=128 bytes of `[A-Za-z0-9_.-]`, starting
/// with a letter or digit (no path, scheme, namespace or template syntax).
pub fn is_bare_secret_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !s.contains("..")
}

fn validate_keys(keys: &str) -> Result<(), WindowsError> {
    if keys.trim().is_empty() || keys.len() > 128 || keys.chars().any(char::is_control) {
        return Err(WindowsError::validation(
            "keys must be 1..=128 bytes, e.g. Ctrl+S",
        ));
    }
    Ok(())
}

/// A hold as the shared table keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedHold {
    /// The fence: new with every claim, never repeated for the key.
    pub revision: i64,
    /// The pool's lease; `None` while the claimer is still leasing.
    pub lease: Option<Lease>,
    /// Lapsed by the table's clock: a claim past its TTL (its claimer died
    /// mid-lease) or a lease past its expiry. The next claim takes it over.
    pub lapsed: bool,
}

/// What [`HoldTable::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldClaim {
    /// The caller claimed the key: it leases, then fills the claim.
    Claimed {
        /// The claim's revision.
        revision: i64,
    },
    /// A live claim or hold of someone else (or of an earlier call).
    Existing(SharedHold),
}

/// The hold table could not be read or written; the detail is for the logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the Windows hold table failed: {0}")]
pub struct HoldTableError(pub String);

/// Where the hold of each (tenant, holder) lives, shared by every process
/// that serves the lane's verbs for the same pool (control's replicas use
/// the database's). Every change names the revision it saw, so a caller
/// acting on a stale read changes nothing of a newer hold.
#[async_trait]
pub trait HoldTable: Send + Sync {
    /// The key's row as it stands, lapsed or not.
    async fn get(&self, key: &LaneKey) -> Result<Option<SharedHold>, HoldTableError>;
    /// Claim the key for leasing, or take over a lapsed row. Of concurrent
    /// claimers exactly one gets [`HoldClaim::Claimed`]; the claim lapses
    /// after `claim_ttl`.
    async fn claim(&self, key: &LaneKey, claim_ttl: Duration) -> Result<HoldClaim, HoldTableError>;
    /// Fill the claim `revision` with `lease`; `false` when the claim is no
    /// longer that revision's (the lease is then nobody's).
    async fn fill(
        &self,
        key: &LaneKey,
        revision: i64,
        lease: &Lease,
    ) -> Result<bool, HoldTableError>;
    /// Remove the row of `revision`; `false` when it is gone or newer.
    async fn remove(&self, key: &LaneKey, revision: i64) -> Result<bool, HoldTableError>;
    /// Put back the hold of `revision` after a failed release; `false` when
    /// the key holds something else by now.
    async fn restore(
        &self,
        key: &LaneKey,
        revision: i64,
        lease: &Lease,
    ) -> Result<bool, HoldTableError>;
}

/// A [`HoldTable`] in this process's memory, with the shared table's
/// semantics (claims, takeover, revisions). Correct only where one process
/// serves every verb of the pool's holders; replicas need a shared table.
#[derive(Debug, Default)]
pub struct LocalHolds {
    rows: Mutex<HashMap<LaneKey, LocalRow>>,
    revisions: AtomicI64,
}

#[derive(Debug, Clone)]
struct LocalRow {
    revision: i64,
    lease: Option<Lease>,
    claim_expires_at: DateTime<Utc>,
}

impl LocalRow {
    fn shared(&self) -> SharedHold {
        let lapsed = match &self.lease {
            None => self.claim_expires_at <= Utc::now(),
            Some(l) => is_expired(l),
        };
        SharedHold {
            revision: self.revision,
            lease: self.lease.clone(),
            lapsed,
        }
    }
}

impl LocalHolds {
    fn rows(&self) -> std::sync::MutexGuard<'_, HashMap<LaneKey, LocalRow>> {
        self.rows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl HoldTable for LocalHolds {
    async fn get(&self, key: &LaneKey) -> Result<Option<SharedHold>, HoldTableError> {
        Ok(self.rows().get(key).map(LocalRow::shared))
    }

    async fn claim(&self, key: &LaneKey, claim_ttl: Duration) -> Result<HoldClaim, HoldTableError> {
        let ttl = chrono::Duration::from_std(claim_ttl)
            .map_err(|e| HoldTableError(format!("claim TTL out of range: {e}")))?;
        let mut rows = self.rows();
        if let Some(row) = rows.get(key).map(LocalRow::shared)
            && !row.lapsed
        {
            return Ok(HoldClaim::Existing(row));
        }
        let revision = self.revisions.fetch_add(1, Ordering::Relaxed) + 1;
        rows.insert(
            key.clone(),
            LocalRow {
                revision,
                lease: None,
                claim_expires_at: Utc::now() + ttl,
            },
        );
        Ok(HoldClaim::Claimed { revision })
    }

    async fn fill(
        &self,
        key: &LaneKey,
        revision: i64,
        lease: &Lease,
    ) -> Result<bool, HoldTableError> {
        let mut rows = self.rows();
        match rows.get_mut(key) {
            Some(row) if row.revision == revision && row.lease.is_none() => {
                row.lease = Some(lease.clone());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn remove(&self, key: &LaneKey, revision: i64) -> Result<bool, HoldTableError> {
        let mut rows = self.rows();
        if rows.get(key).is_some_and(|r| r.revision == revision) {
            rows.remove(key);
            return Ok(true);
        }
        Ok(false)
    }

    async fn restore(
        &self,
        key: &LaneKey,
        revision: i64,
        lease: &Lease,
    ) -> Result<bool, HoldTableError> {
        let mut rows = self.rows();
        if rows.contains_key(key) {
            return Ok(false);
        }
        rows.insert(
            key.clone(),
            LocalRow {
                revision,
                lease: Some(lease.clone()),
                claim_expires_at: Utc::now(),
            },
        );
        Ok(true)
    }
}

/// A claim lapses this long after the claimer's lease call would have
/// timed out, so a claimer that died mid-lease holds its waiters up for at
/// most the lease timeout plus this.
pub const CLAIM_MARGIN: Duration = Duration::from_secs(5);
/// First pause of a call waiting for another process's claim to be filled;
/// it doubles up to [`WAIT_POLL_MAX`].
const WAIT_POLL_START: Duration = Duration::from_millis(25);
const WAIT_POLL_MAX: Duration = Duration::from_millis(400);

/// The bounded wait of a call for another process's claim: pauses from
/// [`WAIT_POLL_START`] doubling up to [`WAIT_POLL_MAX`], until a deadline.
struct ClaimWait {
    deadline: tokio::time::Instant,
    interval: Duration,
}

impl ClaimWait {
    fn new(bound: Duration) -> Self {
        ClaimWait {
            deadline: tokio::time::Instant::now() + bound,
            interval: WAIT_POLL_START,
        }
    }

    /// Pause before the next look; past the deadline, `PoolUnavailable`
    /// with `retry` instead.
    async fn pause(&mut self, retry: &'static str) -> Result<(), WindowsError> {
        if tokio::time::Instant::now() >= self.deadline {
            return Err(WindowsError::local(
                WindowsErrorCode::PoolUnavailable,
                retry,
            ));
        }
        tokio::time::sleep(self.interval).await;
        self.interval = (self.interval * 2).min(WAIT_POLL_MAX);
        Ok(())
    }
}

/// The Windows lane: one held pool session per (tenant, holder), leased on
/// first use and kept across calls until `windows_release`, the task settles
/// ([`WindowsLane::task_settled`]), the lease expires, or the pool evicts it.
/// The hold lives in a [`HoldTable`]; this keeps no copy of it, so every
/// verb reads the table once and nothing here can serve a stale hold.
pub struct WindowsLane {
    http: reqwest::Client,
    config: WindowsPoolConfig,
    feature: Arc<dyn WindowsFeature>,
    holds: Arc<dyn HoldTable>,
}

impl std::fmt::Debug for WindowsLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowsLane")
            .field("config", &self.config)
            .finish()
    }
}

/// How a request's failure should be reported.
#[derive(Clone, Copy)]
struct CallOpts {
    typed_input: bool,
    timeout: Duration,
}

/// The coder's view of a hold-table failure (its detail goes to the logs:
/// it may name database internals).
fn table_error(key: &LaneKey, e: &HoldTableError) -> WindowsError {
    tracing::warn!(tenant = %key.tenant, holder = %key.holder, error = %e, "windows lane: hold table failed");
    WindowsError::local(
        WindowsErrorCode::PoolUnavailable,
        "the shared Windows hold could not be read or written; retry",
    )
}

impl WindowsLane {
    /// A lane over the pool at `config.base_url`, gated by `feature`, its
    /// holds kept in `holds`.
    pub fn new(
        config: WindowsPoolConfig,
        feature: Arc<dyn WindowsFeature>,
        holds: Arc<dyn HoldTable>,
    ) -> Result<Self, WindowsError> {
        crate::install_crypto_provider();
        let http = reqwest::Client::builder().build().map_err(|e| {
            WindowsError::local(
                WindowsErrorCode::PoolUnavailable,
                format!("cannot build HTTP client: {e}"),
            )
        })?;
        Ok(Self {
            http,
            config,
            feature,
            holds,
        })
    }

    /// How long a claim stays another caller's before it may be taken over.
    fn claim_ttl(&self) -> Duration {
        self.config.http_timeout + CLAIM_MARGIN
    }

    /// How long a call waits for another caller's claim before giving up:
    /// past the claim's TTL it takes the claim over, so this covers that
    /// wait plus its own lease.
    fn wait_bound(&self) -> Duration {
        self.claim_ttl() * 2 + self.config.http_timeout
    }

    /// The lease currently held for `key`, if any (expired leases, claims
    /// still being leased and an unreadable table all answer `None`).
    pub async fn held(&self, key: &LaneKey) -> Option<Lease> {
        match self.holds.get(key).await {
            Ok(Some(h)) if !h.lapsed => h.lease,
            Ok(_) => None,
            Err(e) => {
                table_error(key, &e);
                None
            }
        }
    }

    async fn gate(&self, key: &LaneKey) -> Result<(), WindowsError> {
        if self.feature.windows_pool_enabled(key.tenant).await {
            Ok(())
        } else {
            Err(WindowsError::local(
                WindowsErrorCode::FeatureDisabled,
                "the windows-pool feature is off for this tenant; an operator turns it on",
            ))
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.config.base_url.trim_end_matches('/'), path)
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        opts: CallOpts,
    ) -> Result<Value, WindowsError> {
        let mut req = self
            .http
            .request(method, self.url(path))
            .bearer_auth(&self.config.credential)
            .timeout(opts.timeout);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            WindowsError::local(
                WindowsErrorCode::PoolUnavailable,
                // Never the URL: it may carry a password, and this text
                // reaches the coder.
                format!("the Windows pool did not answer: {}", e.without_url()),
            )
        })?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| {
            WindowsError::local(
                WindowsErrorCode::PoolUnavailable,
                format!("the Windows pool's answer was cut off: {}", e.without_url()),
            )
        })?;
        let parsed: Value = if bytes.is_empty() {
            json!({})
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        if (200..300).contains(&status) {
            Ok(parsed)
        } else {
            Err(map_pool_error(status, parsed, opts.typed_input))
        }
    }

    async fn lease(&self, key: &LaneKey) -> Result<Lease, WindowsError> {
        let body = json!({ "tenantId": key.tenant, "holder": key.holder });
        let v = self
            .send(
                reqwest::Method::POST,
                "/leases",
                Some(&body),
                CallOpts {
                    typed_input: false,
                    timeout: self.config.http_timeout,
                },
            )
            .await?;
        let lease: Lease = decode(v)?;
        if lease.lease_id.is_empty() || lease.session_id.is_empty() {
            let missing = if lease.lease_id.is_empty() {
                "leaseId"
            } else {
                // It names its lease: hand the machine back, nobody can use it.
                self.hand_back(&lease).await;
                "sessionId"
            };
            return Err(bad_answer(&format!("a lease without a {missing}")));
        }
        tracing::info!(tenant = %key.tenant, holder = %key.holder, host = %lease.host, "windows lane: leased");
        Ok(lease)
    }

    /// Returns a lease nobody holds to the pool (a loser's, or one the
    /// table refused), so no machine leaks; a failure is logged, and the
    /// pool's own expiry reclaims the machine then.
    async fn hand_back(&self, lease: &Lease) {
        let path = format!("/leases/{}", path_segment(&lease.lease_id));
        match self
            .send(reqwest::Method::DELETE, &path, None, self.plain())
            .await
        {
            Ok(_) => {
                tracing::info!(host = %lease.host, "windows lane: handed back an unheld lease")
            }
            Err(e) if e.code == WindowsErrorCode::NotFound => {}
            Err(e) => {
                tracing::warn!(host = %lease.host, error = %e, "windows lane: an unheld lease could not be handed back; the pool's expiry reclaims it");
            }
        }
    }

    /// The key's live session and its revision, leasing if nothing is
    /// held. Concurrent first uses anywhere lease once: one claims and
    /// leases, the others wait for its hold (or take the claim over once
    /// it lapsed).
    async fn session(&self, key: &LaneKey) -> Result<(i64, String), WindowsError> {
        let mut wait = ClaimWait::new(self.wait_bound());
        let mut seen = self
            .holds
            .get(key)
            .await
            .map_err(|e| table_error(key, &e))?;
        loop {
            if let Some(SharedHold {
                revision,
                lease: Some(lease),
                lapsed: false,
            }) = seen
            {
                return Ok((revision, lease.session_id));
            }
            let claim_ttl = self.claim_ttl();
            match self
                .holds
                .claim(key, claim_ttl)
                .await
                .map_err(|e| table_error(key, &e))?
            {
                HoldClaim::Claimed { revision } => {
                    if let Some(sid) = self.lease_into(key, revision).await? {
                        return Ok((revision, sid));
                    }
                    // Taken over while leasing: the table names the holder now.
                    seen = None;
                    continue;
                }
                HoldClaim::Existing(h) if h.lease.is_some() && !h.lapsed => {
                    seen = Some(h);
                    continue;
                }
                HoldClaim::Existing(_) => {}
            }
            wait.pause("another call is still leasing this holder's machine; retry")
                .await?;
            seen = self
                .holds
                .get(key)
                .await
                .map_err(|e| table_error(key, &e))?;
        }
    }

    /// Leases for the claim `revision` and fills it. `None` when the claim
    /// was taken over meanwhile (the lease went back to the pool).
    async fn lease_into(
        &self,
        key: &LaneKey,
        revision: i64,
    ) -> Result<Option<String>, WindowsError> {
        let lease = match self.lease(key).await {
            Ok(l) => l,
            Err(e) => {
                // Free the claim at once rather than have waiters sit out its TTL.
                if let Err(te) = self.holds.remove(key, revision).await {
                    table_error(key, &te);
                }
                return Err(e);
            }
        };
        match self.holds.fill(key, revision, &lease).await {
            Ok(true) => Ok(Some(lease.session_id)),
            Ok(false) => {
                tracing::info!(tenant = %key.tenant, holder = %key.holder, "windows lane: claim taken over while leasing");
                self.hand_back(&lease).await;
                Ok(None)
            }
            Err(e) => {
                self.hand_back(&lease).await;
                let err = table_error(key, &e);
                if let Err(te) = self.holds.remove(key, revision).await {
                    table_error(key, &te);
                }
                Err(err)
            }
        }
    }

    /// Runs one session-scoped call, leasing first if nothing is held. A
    /// NOT_FOUND (evicted) answer drops the hold it used (that revision
    /// only) so the next call leases anew.
    async fn call(
        &self,
        key: &LaneKey,
        method: reqwest::Method,
        suffix: &str,
        body: Option<Value>,
        opts: CallOpts,
    ) -> Result<Value, WindowsError> {
        let (revision, session_id) = self.session(key).await?;
        let path = format!("/sessions/{}{suffix}", path_segment(&session_id));
        let result = self.send(method, &path, body.as_ref(), opts).await;
        if let Err(e) = &result
            && e.session_evicted
        {
            tracing::warn!(tenant = %key.tenant, holder = %key.holder, "windows lane: session evicted by the pool");
            if let Err(te) = self.holds.remove(key, revision).await {
                table_error(key, &te);
            }
        }
        result
    }

    fn plain(&self) -> CallOpts {
        CallOpts {
            typed_input: false,
            timeout: self.config.http_timeout,
        }
    }

    /// `windows_run_spec`: submits a build script; answers its task handle.
    /// A task already running answers CONFLICT with its taskHandle.
    pub async fn windows_run_spec(
        &self,
        key: &LaneKey,
        spec: RunSpec,
    ) -> Result<TaskHandle, WindowsError> {
        self.gate(key).await?;
        if spec.script.trim().is_empty() {
            return Err(WindowsError::validation("script must not be empty"));
        }
        let v = self
            .call(
                key,
                reqwest::Method::POST,
                "/run_spec",
                Some(to_value(&spec)),
                self.plain(),
            )
            .await?;
        decode(v)
    }

    /// `windows_task_status`: polls a build task.
    pub async fn windows_task_status(
        &self,
        key: &LaneKey,
        task_handle: &str,
    ) -> Result<TaskStatus, WindowsError> {
        self.gate(key).await?;
        if task_handle.is_empty() || task_handle.len() > 256 {
            return Err(WindowsError::validation("taskHandle must be 1..=256 bytes"));
        }
        let suffix = format!("/tasks/{}", path_segment(task_handle));
        let v = self
            .call(key, reqwest::Method::GET, &suffix, None, self.plain())
            .await?;
        decode(v)
    }

    /// `windows_launch`: starts a program. `waitForWindowMs` is clamped to
    /// 55 s (not refused); the pool's budget is the wait + 10 s and core's
    /// timeout exceeds that, so a program with no window answers `hwnd: None`.
    pub async fn windows_launch(
        &self,
        key: &LaneKey,
        request: LaunchRequest,
    ) -> Result<LaunchResult, WindowsError> {
        self.gate(key).await?;
        if request.program.trim().is_empty() || request.program.len() > 1024 {
            return Err(WindowsError::validation("program must be 1..=1024 bytes"));
        }
        let wait = clamp_launch_wait(request.wait_for_window_ms);
        let budget = wait + LAUNCH_BUDGET_EXTRA_MS;
        let mut body = to_value(&request);
        body["waitForWindowMs"] = json!(wait);
        body["budgetMs"] = json!(budget);
        let opts = CallOpts {
            typed_input: false,
            timeout: Duration::from_millis(budget) + CORE_TIMEOUT_MARGIN,
        };
        let v = self
            .call(key, reqwest::Method::POST, "/launch", Some(body), opts)
            .await?;
        decode(v)
    }

    /// `windows_windows`: the visible top-level windows.
    pub async fn windows_windows(&self, key: &LaneKey) -> Result<Vec<WindowInfo>, WindowsError> {
        self.gate(key).await?;
        let v = self
            .call(key, reqwest::Method::GET, "/windows", None, self.plain())
            .await?;
        #[derive(Deserialize)]
        struct Windows {
            windows: Vec<WindowInfo>,
        }
        let w: Windows = decode(v)?;
        Ok(w.windows)
    }

    /// `windows_focus`: brings a window to the front.
    pub async fn windows_focus(&self, key: &LaneKey, hwnd: i64) -> Result<(), WindowsError> {
        self.gate(key).await?;
        self.call(
            key,
            reqwest::Method::POST,
            &format!("/windows/{hwnd}/focus"),
            None,
            self.plain(),
        )
        .await
        .map(drop)
    }

    /// `windows_close`: closes a window.
    pub async fn windows_close(&self, key: &LaneKey, hwnd: i64) -> Result<(), WindowsError> {
        self.gate(key).await?;
        self.call(
            key,
            reqwest::Method::POST,
            &format!("/windows/{hwnd}/close"),
            None,
            self.plain(),
        )
        .await
        .map(drop)
    }

    /// `windows_snapshot`: the UI Automation tree as indented text, one node
    /// per line with a `ref=e<N>` valid until the next snapshot.
    pub async fn windows_snapshot(
        &self,
        key: &LaneKey,
        hwnd: Option<i64>,
    ) -> Result<String, WindowsError> {
        self.gate(key).await?;
        let v = self
            .call(
                key,
                reqwest::Method::POST,
                "/snapshot",
                Some(json!({ "hwnd": hwnd })),
                self.plain(),
            )
            .await?;
        v.get("snapshot")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| bad_answer("snapshot missing"))
    }

    /// `windows_click`: clicks a target; `method` says whether the element's
    /// own pattern or a real mouse click did it.
    pub async fn windows_click(
        &self,
        key: &LaneKey,
        target: Target,
        button: MouseButton,
        double: bool,
    ) -> Result<ActionResult, WindowsError> {
        self.gate(key).await?;
        if target.is_empty() {
            return Err(WindowsError::validation(
                "a click needs a ref, automationId, name, controlType or point",
            ));
        }
        target.validate()?;
        let body = json!({ "target": target, "button": button, "double": double });
        let v = self
            .call(
                key,
                reqwest::Method::POST,
                "/click",
                Some(body),
                self.plain(),
            )
            .await?;
        decode(v)
    }

    /// `windows_type`: types exactly one of `text` / `secretRef` (a bare
    /// name; the pool types the secret's value, which never reaches the
    /// coder). Both checks happen before any lease. Errors are projected to
    /// `{error, reason, state, secretRef, host}`.
    pub async fn windows_type(
        &self,
        key: &LaneKey,
        request: TypeRequest,
    ) -> Result<ActionResult, WindowsError> {
        self.gate(key).await?;
        match (&request.text, &request.secret_ref) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(WindowsError::validation(
                    "windows_type takes exactly one of text / secretRef",
                ));
            }
            (None, Some(s)) if !is_bare_secret_name(s) => {
                return Err(WindowsError::validation(
                    "secretRef must be a bare secret name ([A-Za-z0-9_.-], no path or scheme)",
                ));
            }
            _ => {}
        }
        if let Some(t) = &request.target {
            t.validate()?;
        }
        let opts = CallOpts {
            typed_input: true,
            timeout: self.config.http_timeout,
        };
        let v = self
            .call(
                key,
                reqwest::Method::POST,
                "/type",
                Some(to_value(&request)),
                opts,
            )
            .await?;
        decode(v)
    }

    /// `windows_key`: presses a chord such as `Ctrl+S` or `Alt+F4`; an
    /// unknown key name is the pool's BAD_REQUEST.
    pub async fn windows_key(
        &self,
        key: &LaneKey,
        keys: &str,
        hwnd: Option<i64>,
    ) -> Result<(), WindowsError> {
        self.gate(key).await?;
        validate_keys(keys)?;
        self.call(
            key,
            reqwest::Method::POST,
            "/key",
            Some(json!({ "keys": keys, "hwnd": hwnd })),
            self.plain(),
        )
        .await
        .map(drop)
    }

    /// `windows_wait_for`: waits for an element or window title to reach a
    /// state; `timeoutMs` is clamped to 10 minutes (not refused).
    pub async fn windows_wait_for(
        &self,
        key: &LaneKey,
        mut request: WaitForRequest,
    ) -> Result<WaitForResult, WindowsError> {
        self.gate(key).await?;
        match (&request.target, &request.window_title) {
            (None, None) | (Some(_), Some(_)) => {
                return Err(WindowsError::validation(
                    "windows_wait_for takes exactly one of target / windowTitle",
                ));
            }
            (Some(t), None) => t.validate()?,
            (None, Some(title)) if title.is_empty() || title.len() > 512 => {
                return Err(WindowsError::validation(
                    "windowTitle must be 1..=512 bytes",
                ));
            }
            _ => {}
        }
        let timeout = clamp_wait_for_timeout(request.timeout_ms);
        request.timeout_ms = Some(timeout);
        let opts = CallOpts {
            typed_input: false,
            timeout: Duration::from_millis(timeout + LAUNCH_BUDGET_EXTRA_MS) + CORE_TIMEOUT_MARGIN,
        };
        let v = self
            .call(
                key,
                reqwest::Method::POST,
                "/wait_for",
                Some(to_value(&request)),
                opts,
            )
            .await?;
        decode(v)
    }

    /// `windows_computer`: raw mouse / keyboard in primary-screen pixels. A
    /// `type` action carries typed input, so its errors are projected.
    pub async fn windows_computer(
        &self,
        key: &LaneKey,
        action: ComputerAction,
    ) -> Result<(), WindowsError> {
        self.gate(key).await?;
        let typed_input = match &action {
            ComputerAction::Type { text } if text.is_empty() => {
                return Err(WindowsError::validation("text must not be empty"));
            }
            ComputerAction::Type { .. } => true,
            ComputerAction::Key { keys } => {
                validate_keys(keys)?;
                false
            }
            _ => false,
        };
        let opts = CallOpts {
            typed_input,
            timeout: self.config.http_timeout,
        };
        self.call(
            key,
            reqwest::Method::POST,
            "/computer",
            Some(to_value(&action)),
            opts,
        )
        .await
        .map(drop)
    }

    /// `windows_screenshot`: the primary screen, or cropped to `hwnd` (a pure
    /// read: the window is not brought to the front).
    pub async fn windows_screenshot(
        &self,
        key: &LaneKey,
        hwnd: Option<i64>,
    ) -> Result<Screenshot, WindowsError> {
        self.gate(key).await?;
        let suffix = match hwnd {
            Some(h) => format!("/screenshot?hwnd={h}"),
            None => "/screenshot".to_string(),
        };
        let v = self
            .call(key, reqwest::Method::GET, &suffix, None, self.plain())
            .await?;
        decode(v)
    }

    /// `windows_release`: hands the machine back at once (the pool cancels a
    /// running build and closes launched programs). Idempotent: with nothing
    /// held it answers `released: false, outcome: not_held` and changes nothing.
    pub async fn windows_release(&self, key: &LaneKey) -> Result<ReleaseResult, WindowsError> {
        self.gate(key).await?;
        self.release_held(key).await
    }

    /// Releases `key`'s session because its task settled. Not a verb: it
    /// runs whatever the tenant's feature flag now says, so a settled task
    /// never keeps a machine.
    pub async fn task_settled(&self, key: &LaneKey) -> Result<ReleaseResult, WindowsError> {
        self.release_held(key).await
    }

    /// Releases the key's hold wherever it was taken. A claim still being
    /// leased is waited for (bounded), so a release racing a first use
    /// releases what that use leased. The hold leaves the table before the
    /// pool is asked, so of two concurrent releases one releases and the
    /// other answers `not_held`; a pool failure puts it back for a retry.
    async fn release_held(&self, key: &LaneKey) -> Result<ReleaseResult, WindowsError> {
        let outcome = |released: bool, outcome: &str| ReleaseResult {
            released,
            outcome: outcome.to_string(),
        };
        let mut wait = ClaimWait::new(self.wait_bound());
        loop {
            let Some(hold) = self
                .holds
                .get(key)
                .await
                .map_err(|e| table_error(key, &e))?
            else {
                return Ok(outcome(false, "not_held"));
            };
            let Some(lease) = hold.lease.clone() else {
                if hold.lapsed {
                    // Its claimer died mid-lease: nothing was ever held.
                    self.holds
                        .remove(key, hold.revision)
                        .await
                        .map_err(|e| table_error(key, &e))?;
                    return Ok(outcome(false, "not_held"));
                }
                wait.pause("this holder's machine is still being leased; retry the release")
                    .await?;
                continue;
            };
            if !self
                .holds
                .remove(key, hold.revision)
                .await
                .map_err(|e| table_error(key, &e))?
            {
                // Changed under us (released or replaced elsewhere): look again.
                continue;
            }
            if hold.lapsed {
                return Ok(outcome(false, "expired"));
            }
            let path = format!("/leases/{}", path_segment(&lease.lease_id));
            return match self
                .send(reqwest::Method::DELETE, &path, None, self.plain())
                .await
            {
                Ok(_) => {
                    tracing::info!(tenant = %key.tenant, holder = %key.holder, "windows lane: released");
                    Ok(outcome(true, "released"))
                }
                Err(e) if e.code == WindowsErrorCode::NotFound => Ok(outcome(false, "evicted")),
                Err(e) => {
                    // Still held as far as anyone knows: put it back so a retry can release it.
                    if let Err(te) = self.holds.restore(key, hold.revision, &lease).await {
                        table_error(key, &te);
                    }
                    Err(e)
                }
            };
        }
    }
}

/// Clamps `windows_launch.waitForWindowMs` to the guest's 55 s ceiling.
pub fn clamp_launch_wait(requested: Option<u64>) -> u64 {
    requested
        .unwrap_or(DEFAULT_LAUNCH_WAIT_MS)
        .min(MAX_LAUNCH_WAIT_MS)
}

/// Clamps `windows_wait_for.timeoutMs` to 10 minutes.
pub fn clamp_wait_for_timeout(requested: Option<u64>) -> u64 {
    requested
        .unwrap_or(DEFAULT_WAIT_FOR_TIMEOUT_MS)
        .min(MAX_WAIT_FOR_TIMEOUT_MS)
}

fn is_expired(lease: &Lease) -> bool {
    lease.expires_at.is_some_and(|t| t <= Utc::now())
}

/// Percent-encodes everything but unreserved characters, so pool-issued ids
/// and handles can never reshape the path.
fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn bad_answer(what: &str) -> WindowsError {
    let mut e = WindowsError::local(
        WindowsErrorCode::PoolError,
        format!("the Windows pool answered an unexpected shape: {what}"),
    );
    e.http_status = Some(200);
    e
}

fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, WindowsError> {
    serde_json::from_value(v.clone()).map_err(|e| {
        let mut err = bad_answer(&e.to_string());
        err.pool_detail = v;
        err
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamps_cap_but_never_refuse() {
        assert_eq!(clamp_launch_wait(Some(120_000)), 55_000);
        assert_eq!(clamp_launch_wait(Some(3_000)), 3_000);
        assert_eq!(clamp_launch_wait(None), DEFAULT_LAUNCH_WAIT_MS);
        assert_eq!(clamp_wait_for_timeout(Some(3_600_000)), 600_000);
        assert_eq!(clamp_wait_for_timeout(Some(1)), 1);
    }

    #[test]
    fn bare_secret_names_only() {
        for ok in ["db-password", "LICENCE_KEY", "svc.token2"] {
            assert!(is_bare_secret_name(ok), "{ok}");
        }
        for bad in [
            "", "a/b", "vault:x", "${X}", "..", "-x", "a b", "ns/name", "a..b",
        ] {
            assert!(!is_bare_secret_name(bad), "{bad}");
        }
    }

    #[test]
    fn desktop_codes_win_over_status() {
        let e = map_pool_error(403, json!({"error": "INPUT_BLOCKED"}), false);
        assert_eq!(e.code, WindowsErrorCode::InputBlocked);
        let e = map_pool_error(403, json!({"error": "NOPE"}), false);
        assert_eq!(e.code, WindowsErrorCode::Forbidden);
        assert!(!e.retryable);
        let e = map_pool_error(418, Value::String("teapot".into()), false);
        assert_eq!(e.code, WindowsErrorCode::BadRequest);
        assert_eq!(e.pool_detail, json!("teapot"));
    }

    #[test]
    fn typed_input_errors_are_projected() {
        let body = json!({"error": "SECRET_TARGET_NOT_MASKED", "reason": "not_password",
            "state": "refused", "secretRef": "pw", "host": "win-1",
            "message": "guest said: field Username has value alice", "guestLog": "..."});
        let e = map_pool_error(409, body.clone(), true);
        assert_eq!(
            e.pool_detail,
            json!({"error": "SECRET_TARGET_NOT_MASKED", "reason": "not_password",
            "state": "refused", "secretRef": "pw", "host": "win-1"})
        );
        assert!(!e.message.contains("alice"));
        let e = map_pool_error(409, body.clone(), false);
        assert_eq!(e.pool_detail, body);
    }

    #[test]
    fn path_segments_are_escaped() {
        assert_eq!(path_segment("abc-1"), "abc-1");
        assert_eq!(path_segment("../x"), "..%2Fx");
    }
}
