//! `genesis.v1.WindowsLaneService` (spec §2.3): one RPC per Windows-lane
//! verb over `genesis_lanes::windows::WindowsLane`, the session held per
//! (tenant, coder). The tenant's `windows-pool` flag is the lane's
//! `WindowsFeature`. Pool-side failures and the lane's own refusals are
//! answered in-band as the response's `WindowsLaneError`
//! (code/httpStatus/retryable/poolDetail), never as gRPC errors; gRPC codes
//! stay for the caller's own faults (auth, malformed ids). No pool URL
//! configured → POOL_UNAVAILABLE. A coder token drives the lane only as the
//! coder of its own unsettled task. It also owns [`StoreHolds`], the lane's
//! hold table over the store, which every control replica shares. Must never
//! lease before the flag is checked, and never see a secret's value (the pool
//! types it).

#![allow(clippy::result_large_err)]

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use genesis_core::ErrorCode;
use genesis_lanes::windows::{
    ComputerAction, HoldClaim, HoldTable, HoldTableError, LaneKey, LaunchRequest, Lease,
    MouseButton, Point, RunSpec, SharedHold, Target, TypeRequest, WaitForRequest, WaitState,
    WindowsError, WindowsErrorCode, WindowsFeature, WindowsLane,
};
use genesis_proto::convert::invalid_argument;
use genesis_proto::status::coded;
use genesis_proto::v1::{self, windows_lane_service_server::WindowsLaneService};
use genesis_store::Store;
use genesis_store::windows_holds::{self, HoldLease, WindowsHoldRow};
use tonic::{Request, Response, Status};

use super::lanes::StoreWindowsFeature;
use super::{observe, record_ids};
use crate::auth::{caller, coder_grant};
use crate::state::AppState;
use crate::status::store_status;

/// Longest coder id accepted as a session holder.
const MAX_HOLDER_LEN: usize = 256;

/// The Windows lane's holds in the store's `windows_holds` table, so every
/// control replica serves every verb on one hold and a restart loses none.
#[derive(Clone)]
pub struct StoreHolds {
    store: Store,
}

impl StoreHolds {
    /// Holds kept through `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

fn table(e: genesis_store::StoreError) -> HoldTableError {
    HoldTableError(e.to_string())
}

fn hold_lease(lease: &Lease) -> HoldLease<'_> {
    HoldLease {
        lease_id: &lease.lease_id,
        session_id: &lease.session_id,
        host: &lease.host,
        expires_at: lease.expires_at,
    }
}

fn shared(row: WindowsHoldRow) -> SharedHold {
    let lease = match (row.is_held(), row.lease_id, row.session_id) {
        (true, Some(lease_id), Some(session_id)) => Some(Lease {
            lease_id,
            session_id,
            host: row.host.unwrap_or_default(),
            expires_at: row.lease_expires_at,
        }),
        _ => None,
    };
    SharedHold {
        revision: row.revision,
        lease,
        lapsed: row.lapsed,
    }
}

#[async_trait]
impl HoldTable for StoreHolds {
    async fn get(&self, key: &LaneKey) -> Result<Option<SharedHold>, HoldTableError> {
        let row = self
            .store
            .windows_holds()
            .get(key.tenant, &key.holder)
            .await
            .map_err(table)?;
        Ok(row.map(shared))
    }

    async fn claim(
        &self,
        key: &LaneKey,
        claim_ttl: std::time::Duration,
    ) -> Result<HoldClaim, HoldTableError> {
        match self
            .store
            .windows_holds()
            .claim(key.tenant, &key.holder, claim_ttl)
            .await
            .map_err(table)?
        {
            windows_holds::HoldClaim::Claimed { revision } => Ok(HoldClaim::Claimed { revision }),
            windows_holds::HoldClaim::Existing(row) => Ok(HoldClaim::Existing(shared(row))),
        }
    }

    async fn fill(
        &self,
        key: &LaneKey,
        revision: i64,
        lease: &Lease,
    ) -> Result<bool, HoldTableError> {
        let row = self
            .store
            .windows_holds()
            .fill(key.tenant, &key.holder, revision, &hold_lease(lease))
            .await
            .map_err(table)?;
        Ok(row.is_some())
    }

    async fn remove(&self, key: &LaneKey, revision: i64) -> Result<bool, HoldTableError> {
        self.store
            .windows_holds()
            .remove(key.tenant, &key.holder, revision)
            .await
            .map_err(table)
    }

    async fn restore(
        &self,
        key: &LaneKey,
        revision: i64,
        lease: &Lease,
    ) -> Result<bool, HoldTableError> {
        self.store
            .windows_holds()
            .restore(key.tenant, &key.holder, revision, &hold_lease(lease))
            .await
            .map_err(table)
    }
}

/// The service.
#[derive(Clone)]
pub struct WindowsLanes {
    state: AppState,
}

impl WindowsLanes {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }

    /// Authorize the session's tenant and find the lane; a lane-level refusal
    /// comes back as the in-band error.
    async fn prep<T>(
        &self,
        request: &Request<T>,
        session: Option<&v1::WindowsSession>,
    ) -> Result<Result<(Arc<WindowsLane>, LaneKey), v1::WindowsLaneError>, Status> {
        let caller = caller(request)?;
        let session = session.ok_or_else(|| invalid_argument("session", "required"))?;
        let t = caller.tenant("session.tenant_id", &session.tenant_id)?;
        if session.coder_id.trim().is_empty() || session.coder_id.len() > MAX_HOLDER_LEN {
            return Err(invalid_argument(
                "session.coder_id",
                format!("must be 1..={MAX_HOLDER_LEN} bytes"),
            ));
        }
        record_ids(t, None);
        if let Some(grant) = coder_grant(request) {
            // A coder drives the lane as the coder running its own task,
            // and only while that task is unsettled.
            let own = self
                .state
                .store
                .coding_tasks()
                .get(t, grant.task_id)
                .await
                .map_err(store_status)?;
            if own.is_settled() || own.coder_id.as_deref() != Some(session.coder_id.as_str()) {
                return Err(coded(
                    ErrorCode::PermissionDenied,
                    "a coder token may drive the Windows lane as its own task's coder only",
                ));
            }
        }
        let key = LaneKey::new(t, session.coder_id.clone());
        match &self.state.lanes.windows {
            Some(lane) => Ok(Ok((lane.clone(), key))),
            None => {
                let on = StoreWindowsFeature::new(self.state.store.clone())
                    .windows_pool_enabled(t)
                    .await;
                Ok(Err(if on {
                    local(
                        WindowsErrorCode::PoolUnavailable,
                        "no Windows pool is configured (GENESIS_WINDOWS_POOL_URL)",
                    )
                } else {
                    local(
                        WindowsErrorCode::FeatureDisabled,
                        "the windows-pool feature is off for this tenant; an operator turns it on",
                    )
                }))
            }
        }
    }
}

/// A refusal decided here, before any pool call.
fn local(code: WindowsErrorCode, message: &str) -> v1::WindowsLaneError {
    v1::WindowsLaneError {
        code: code.as_str().to_owned(),
        message: message.to_owned(),
        retryable: code.retryable(),
        ..Default::default()
    }
}

fn validation(message: impl Into<String>) -> v1::WindowsLaneError {
    let m: String = message.into();
    local(WindowsErrorCode::ValidationError, &m)
}

/// The wire shape of a lane error.
pub fn lane_error(e: &WindowsError) -> v1::WindowsLaneError {
    v1::WindowsLaneError {
        code: e.code.as_str().to_owned(),
        message: e.message.clone(),
        reason: e.reason.clone().unwrap_or_default(),
        http_status: e.http_status.map_or(0, i32::from),
        retryable: e.retryable,
        pool_detail_json: if e.pool_detail.is_null() {
            String::new()
        } else {
            e.pool_detail.to_string()
        },
        session_evicted: e.session_evicted,
        elapsed_ms: e.elapsed_ms.map(|v| i64::try_from(v).unwrap_or(i64::MAX)),
    }
}

/// `ElementTarget` → the lane's target (ref, selector, point, window).
pub fn target(t: &v1::ElementTarget) -> Target {
    Target {
        element_ref: t.r#ref.clone(),
        automation_id: t.automation_id.clone(),
        name: t.name.clone(),
        control_type: t.control_type.clone(),
        point: match (t.x, t.y) {
            (Some(x), Some(y)) => Some(Point { x, y }),
            _ => None,
        },
        hwnd: t.hwnd,
    }
}

fn ms(field: &str, v: Option<i64>) -> Result<Option<u64>, v1::WindowsLaneError> {
    match v {
        None => Ok(None),
        Some(n) => u64::try_from(n)
            .map(Some)
            .map_err(|_| validation(format!("{field} must be non-negative"))),
    }
}

fn button(s: &str) -> Result<MouseButton, v1::WindowsLaneError> {
    match s {
        "" | "left" => Ok(MouseButton::Left),
        "right" => Ok(MouseButton::Right),
        "middle" => Ok(MouseButton::Middle),
        other => Err(validation(format!(
            "button {other:?} is not left, right or middle"
        ))),
    }
}

/// `ComputerRequest` → the lane's action; extras come from `args_json`.
pub fn computer_action(req: &v1::ComputerRequest) -> Result<ComputerAction, v1::WindowsLaneError> {
    let args: serde_json::Value = if req.args_json.trim().is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(&req.args_json)
            .map_err(|e| validation(format!("args_json is not JSON: {e}")))?
    };
    let point = || match (req.x, req.y) {
        (Some(x), Some(y)) => Ok((x, y)),
        _ => Err(validation(format!("{} needs x and y", req.action))),
    };
    let int = |k: &str| {
        args.get(k)
            .and_then(serde_json::Value::as_i64)
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| validation(format!("{} needs args_json.{k} (an integer)", req.action)))
    };
    let string = |k: &str| {
        args.get(k)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| validation(format!("{} needs args_json.{k} (a string)", req.action)))
    };
    Ok(match req.action.as_str() {
        "move" => {
            let (x, y) = point()?;
            ComputerAction::MouseMove { x, y }
        }
        "click" => {
            let (x, y) = point()?;
            let b = args
                .get("button")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            ComputerAction::Click {
                x,
                y,
                button: button(b)?,
            }
        }
        "right_click" => {
            let (x, y) = point()?;
            ComputerAction::Click {
                x,
                y,
                button: MouseButton::Right,
            }
        }
        "double_click" => {
            let (x, y) = point()?;
            ComputerAction::DoubleClick { x, y }
        }
        "drag" => {
            let (x, y) = point()?;
            ComputerAction::Drag {
                from: Point { x, y },
                to: Point {
                    x: int("toX")?,
                    y: int("toY")?,
                },
            }
        }
        "scroll" => {
            let (x, y) = point()?;
            ComputerAction::Scroll {
                x,
                y,
                delta: int("delta")?,
            }
        }
        "type" => ComputerAction::Type {
            text: string("text")?,
        },
        "key" => ComputerAction::Key {
            keys: string("keys")?,
        },
        other => {
            return Err(validation(format!(
                "action {other:?} is not one of move, click, double_click, right_click, drag, scroll, type, key"
            )));
        }
    })
}

/// Take the lane or answer the response with the in-band error.
macro_rules! lane_or_answer {
    ($prep:expr, $resp:ty) => {
        match $prep {
            Ok(v) => v,
            Err(e) => {
                let mut r = <$resp>::default();
                r.error = Some(e);
                return Ok(r);
            }
        }
    };
}

/// Answer a local validation refusal in-band.
macro_rules! valid_or_answer {
    ($v:expr, $resp:ty) => {
        match $v {
            Ok(v) => v,
            Err(e) => {
                let mut r = <$resp>::default();
                r.error = Some(e);
                return Ok(r);
            }
        }
    };
}

/// Map the verb's result, its error in-band.
macro_rules! answer {
    ($res:expr, $resp:ty, |$ok:ident| $body:expr) => {
        match $res {
            Ok($ok) => Ok($body),
            Err(e) => {
                let mut r = <$resp>::default();
                r.error = Some(lane_error(&e));
                Ok(r)
            }
        }
    };
}

const FINISHED_STATES: &[&str] = &["succeeded", "failed", "cancelled"];

#[tonic::async_trait]
impl WindowsLaneService for WindowsLanes {
    async fn run_spec(
        &self,
        request: Request<v1::RunSpecRequest>,
    ) -> Result<Response<v1::RunSpecResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.WindowsLaneService/RunSpec",
            async {
                let (lane, key) = lane_or_answer!(
                    self.prep(&request, request.get_ref().session.as_ref())
                        .await?,
                    v1::RunSpecResponse
                );
                let req = request.get_ref();
                if !req.spec_json.trim().is_empty() {
                    let ok = serde_json::from_str::<serde_json::Value>(&req.spec_json)
                        .is_ok_and(|v| v.is_object());
                    if !ok {
                        return Ok(v1::RunSpecResponse {
                            error: Some(validation("spec_json must be a JSON object")),
                            ..Default::default()
                        });
                    }
                }
                let spec = RunSpec {
                    script: req.script.clone(),
                    shell: (!req.shell.is_empty()).then(|| req.shell.clone()),
                };
                answer!(
                    lane.windows_run_spec(&key, spec).await,
                    v1::RunSpecResponse,
                    |h| v1::RunSpecResponse {
                        task_handle: h.task_handle,
                        state: h.state.unwrap_or_default(),
                        error: None,
                    }
                )
            },
        )
        .await
    }

    async fn task_status(
        &self,
        request: Request<v1::TaskStatusRequest>,
    ) -> Result<Response<v1::TaskStatusResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.WindowsLaneService/TaskStatus",
            async {
                let (lane, key) = lane_or_answer!(
                    self.prep(&request, request.get_ref().session.as_ref())
                        .await?,
                    v1::TaskStatusResponse
                );
                let handle = request.get_ref().task_handle.clone();
                answer!(
                    lane.windows_task_status(&key, &handle).await,
                    v1::TaskStatusResponse,
                    |s| v1::TaskStatusResponse {
                        finished: FINISHED_STATES.contains(&s.state.as_str()),
                        task_handle: s.task_handle,
                        state: s.state,
                        exit_code: s.exit_code,
                        output: s.output.unwrap_or_default(),
                        error: None,
                    }
                )
            },
        )
        .await
    }

    async fn launch(
        &self,
        request: Request<v1::LaunchRequest>,
    ) -> Result<Response<v1::LaunchResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.WindowsLaneService/Launch",
            async {
                let (lane, key) = lane_or_answer!(
                    self.prep(&request, request.get_ref().session.as_ref())
                        .await?,
                    v1::LaunchResponse
                );
                let req = request.get_ref();
                let wait = valid_or_answer!(
                    ms("wait_for_window_ms", req.wait_for_window_ms),
                    v1::LaunchResponse
                );
                let launch = LaunchRequest {
                    program: req.program.clone(),
                    args: req.args.clone(),
                    cwd: (!req.working_directory.is_empty()).then(|| req.working_directory.clone()),
                    wait_for_window_ms: wait,
                };
                answer!(
                    lane.windows_launch(&key, launch).await,
                    v1::LaunchResponse,
                    |r| v1::LaunchResponse {
                        pid: i64::from(r.pid),
                        hwnd: r.hwnd,
                        title: r.title.unwrap_or_default(),
                        error: None,
                    }
                )
            },
        )
        .await
    }

    async fn windows(
        &self,
        request: Request<v1::WindowsRequest>,
    ) -> Result<Response<v1::WindowsResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.WindowsLaneService/Windows",
            async {
                let (lane, key) = lane_or_answer!(
                    self.prep(&request, request.get_ref().session.as_ref())
                        .await?,
                    v1::WindowsResponse
                );
                answer!(
                    lane.windows_windows(&key).await,
                    v1::WindowsResponse,
                    |ws| v1::WindowsResponse {
                        windows: ws
                            .into_iter()
                            .map(|w| v1::WindowInfo {
                                hwnd: w.hwnd,
                                title: w.title,
                                pid: w.pid.map_or(0, i64::from),
                                process_name: String::new(),
                                bounds: Some(v1::Bounds {
                                    x: w.bounds.x,
                                    y: w.bounds.y,
                                    width: w.bounds.width,
                                    height: w.bounds.height,
                                }),
                            })
                            .collect(),
                        error: None,
                    }
                )
            },
        )
        .await
    }

    async fn focus(
        &self,
        request: Request<v1::FocusRequest>,
    ) -> Result<Response<v1::FocusResponse>, Status> {
        observe(&self.state, "/genesis.v1.WindowsLaneService/Focus", async {
            let (lane, key) = lane_or_answer!(
                self.prep(&request, request.get_ref().session.as_ref())
                    .await?,
                v1::FocusResponse
            );
            let hwnd = request.get_ref().hwnd;
            answer!(
                lane.windows_focus(&key, hwnd).await,
                v1::FocusResponse,
                |_x| v1::FocusResponse {
                    focused: true,
                    error: None,
                }
            )
        })
        .await
    }

    async fn close(
        &self,
        request: Request<v1::CloseRequest>,
    ) -> Result<Response<v1::CloseResponse>, Status> {
        observe(&self.state, "/genesis.v1.WindowsLaneService/Close", async {
            let (lane, key) = lane_or_answer!(
                self.prep(&request, request.get_ref().session.as_ref())
                    .await?,
                v1::CloseResponse
            );
            let hwnd = request.get_ref().hwnd;
            answer!(
                lane.windows_close(&key, hwnd).await,
                v1::CloseResponse,
                |_x| v1::CloseResponse {
                    closed: true,
                    error: None,
                }
            )
        })
        .await
    }

    async fn snapshot(
        &self,
        request: Request<v1::SnapshotRequest>,
    ) -> Result<Response<v1::SnapshotResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.WindowsLaneService/Snapshot",
            async {
                let (lane, key) = lane_or_answer!(
                    self.prep(&request, request.get_ref().session.as_ref())
                        .await?,
                    v1::SnapshotResponse
                );
                let hwnd = request.get_ref().hwnd;
                answer!(
                    lane.windows_snapshot(&key, hwnd).await,
                    v1::SnapshotResponse,
                    |tree| v1::SnapshotResponse { tree, error: None }
                )
            },
        )
        .await
    }

    async fn click(
        &self,
        request: Request<v1::ClickRequest>,
    ) -> Result<Response<v1::ClickResponse>, Status> {
        observe(&self.state, "/genesis.v1.WindowsLaneService/Click", async {
            let (lane, key) = lane_or_answer!(
                self.prep(&request, request.get_ref().session.as_ref())
                    .await?,
                v1::ClickResponse
            );
            let req = request.get_ref();
            let b = valid_or_answer!(button(&req.button), v1::ClickResponse);
            let tgt = req.target.as_ref().map(target).unwrap_or_default();
            answer!(
                lane.windows_click(&key, tgt, b, req.double_click).await,
                v1::ClickResponse,
                |r| v1::ClickResponse {
                    method: r.method,
                    error: None,
                }
            )
        })
        .await
    }

    async fn r#type(
        &self,
        request: Request<v1::TypeRequest>,
    ) -> Result<Response<v1::TypeResponse>, Status> {
        observe(&self.state, "/genesis.v1.WindowsLaneService/Type", async {
            let (lane, key) = lane_or_answer!(
                self.prep(&request, request.get_ref().session.as_ref())
                    .await?,
                v1::TypeResponse
            );
            let req = request.get_ref();
            let typed = TypeRequest {
                target: req.target.as_ref().map(target),
                text: req.text.clone(),
                secret_ref: req.secret_ref.clone(),
            };
            answer!(
                lane.windows_type(&key, typed).await,
                v1::TypeResponse,
                |r| v1::TypeResponse {
                    method: r.method,
                    error: None,
                }
            )
        })
        .await
    }

    async fn key(
        &self,
        request: Request<v1::KeyRequest>,
    ) -> Result<Response<v1::KeyResponse>, Status> {
        observe(&self.state, "/genesis.v1.WindowsLaneService/Key", async {
            let (lane, key) = lane_or_answer!(
                self.prep(&request, request.get_ref().session.as_ref())
                    .await?,
                v1::KeyResponse
            );
            let req = request.get_ref();
            answer!(
                lane.windows_key(&key, &req.keys, req.hwnd).await,
                v1::KeyResponse,
                |_x| v1::KeyResponse {
                    sent: true,
                    error: None,
                }
            )
        })
        .await
    }

    async fn wait_for(
        &self,
        request: Request<v1::WaitForRequest>,
    ) -> Result<Response<v1::WaitForResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.WindowsLaneService/WaitFor",
            async {
                let (lane, key) = lane_or_answer!(
                    self.prep(&request, request.get_ref().session.as_ref())
                        .await?,
                    v1::WaitForResponse
                );
                let req = request.get_ref();
                let state = valid_or_answer!(
                    match req.condition.as_str() {
                        "exists" => Ok(WaitState::Exists),
                        "enabled" => Ok(WaitState::Enabled),
                        "gone" => Ok(WaitState::Gone),
                        other => Err(validation(format!(
                            "condition {other:?} is not exists, enabled or gone"
                        ))),
                    },
                    v1::WaitForResponse
                );
                let timeout = valid_or_answer!(
                    ms(
                        "timeout_ms",
                        (req.timeout_ms != 0).then_some(req.timeout_ms)
                    ),
                    v1::WaitForResponse
                );
                let wait = WaitForRequest {
                    target: req.target.as_ref().map(target),
                    window_title: req.window_title.clone(),
                    state,
                    timeout_ms: timeout,
                };
                answer!(
                    lane.windows_wait_for(&key, wait).await,
                    v1::WaitForResponse,
                    |r| v1::WaitForResponse {
                        satisfied: true,
                        elapsed_ms: i64::try_from(r.elapsed_ms).unwrap_or(i64::MAX),
                        error: None,
                    }
                )
            },
        )
        .await
    }

    async fn computer(
        &self,
        request: Request<v1::ComputerRequest>,
    ) -> Result<Response<v1::ComputerResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.WindowsLaneService/Computer",
            async {
                let (lane, key) = lane_or_answer!(
                    self.prep(&request, request.get_ref().session.as_ref())
                        .await?,
                    v1::ComputerResponse
                );
                let action =
                    valid_or_answer!(computer_action(request.get_ref()), v1::ComputerResponse);
                answer!(
                    lane.windows_computer(&key, action).await,
                    v1::ComputerResponse,
                    |_x| v1::ComputerResponse {
                        result_json: "{}".to_owned(),
                        error: None,
                    }
                )
            },
        )
        .await
    }

    async fn screenshot(
        &self,
        request: Request<v1::ScreenshotRequest>,
    ) -> Result<Response<v1::ScreenshotResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.WindowsLaneService/Screenshot",
            async {
                let (lane, key) = lane_or_answer!(
                    self.prep(&request, request.get_ref().session.as_ref())
                        .await?,
                    v1::ScreenshotResponse
                );
                let hwnd = request.get_ref().hwnd;
                match lane.windows_screenshot(&key, hwnd).await {
                    Ok(s) => match base64::engine::general_purpose::STANDARD
                        .decode(s.png_base64.as_bytes())
                    {
                        Ok(png) => Ok(v1::ScreenshotResponse {
                            png,
                            width: i32::try_from(s.width).unwrap_or(i32::MAX),
                            height: i32::try_from(s.height).unwrap_or(i32::MAX),
                            error: None,
                        }),
                        Err(e) => Ok(v1::ScreenshotResponse {
                            error: Some(v1::WindowsLaneError {
                                code: WindowsErrorCode::PoolError.as_str().to_owned(),
                                message: format!("the pool's screenshot is not base64: {e}"),
                                http_status: 200,
                                retryable: true,
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                    },
                    Err(e) => Ok(v1::ScreenshotResponse {
                        error: Some(lane_error(&e)),
                        ..Default::default()
                    }),
                }
            },
        )
        .await
    }

    async fn release(
        &self,
        request: Request<v1::ReleaseRequest>,
    ) -> Result<Response<v1::ReleaseResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.WindowsLaneService/Release",
            async {
                let (lane, key) = lane_or_answer!(
                    self.prep(&request, request.get_ref().session.as_ref())
                        .await?,
                    v1::ReleaseResponse
                );
                answer!(lane.windows_release(&key).await, v1::ReleaseResponse, |r| {
                    v1::ReleaseResponse {
                        released: r.released,
                        outcome: r.outcome,
                        error: None,
                    }
                })
            },
        )
        .await
    }
}
