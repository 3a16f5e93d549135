//! The Windows lane against the pool stand-in (`pool/`): a real HTTP server
//! on 127.0.0.1:0 that implements the pool contract documented in
//! `genesis_lanes::windows` and behaves as spec §2.3 says (409 with a
//! taskHandle, 429, 5xx naming holders, evicted sessions, a secret aimed at an
//! unmasked control, a session_0 host, a launch with no window, ...), with
//! the holds in this process ([`LocalHolds`]); the holds shared by control's
//! replicas are tested on the real database in the workspace's tests.

#![allow(clippy::unwrap_used, clippy::result_large_err)]

mod pool;

use std::sync::Arc;
use std::time::Duration;

use genesis_lanes::windows::{
    ComputerAction, HoldTable, LaneKey, LaunchRequest, LocalHolds, MouseButton, Point, RunSpec,
    Target, TypeRequest, WaitForRequest, WaitState, WindowsError, WindowsErrorCode, WindowsLane,
    WindowsPoolConfig,
};
use pool::{GOOD, start};
use serde_json::json;
use uuid::Uuid;

fn lane(base: &str, credential: &str, enabled: bool) -> WindowsLane {
    lane_on(base, credential, enabled, Arc::new(LocalHolds::default()))
}

fn lane_on(base: &str, credential: &str, enabled: bool, holds: Arc<dyn HoldTable>) -> WindowsLane {
    WindowsLane::new(
        WindowsPoolConfig {
            base_url: base.to_string(),
            credential: credential.to_string(),
            http_timeout: Duration::from_secs(5),
        },
        Arc::new(enabled),
        holds,
    )
    .unwrap()
}

fn key() -> LaneKey {
    LaneKey::new(Uuid::new_v4(), format!("coder-{}", Uuid::new_v4().simple()))
}

fn by_ref(r: &str) -> Target {
    Target {
        element_ref: Some(r.to_string()),
        ..Default::default()
    }
}

fn by_name(n: &str) -> Target {
    Target {
        name: Some(n.to_string()),
        ..Default::default()
    }
}

fn assert_code(e: &WindowsError, code: WindowsErrorCode, status: Option<u16>, retryable: bool) {
    assert_eq!(e.code, code, "{e:?}");
    assert_eq!(e.http_status, status, "{e:?}");
    assert_eq!(e.retryable, retryable, "{e:?}");
    let data = e.data();
    assert_eq!(data["error"], code.as_str());
    assert_eq!(data["retryable"], retryable);
    assert_eq!(data["httpStatus"], json!(status));
    assert!(data.get("poolDetail").is_some());
}

#[tokio::test]
async fn every_verb_works_on_one_session_leased_on_first_use() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    assert!(lane.held(&k).await.is_none());

    let task = lane
        .windows_run_spec(
            &k,
            RunSpec {
                script: "msbuild app.sln".into(),
                shell: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(task.task_handle, "task-1");
    let status = lane
        .windows_task_status(&k, &task.task_handle)
        .await
        .unwrap();
    assert_eq!(status.state, "running");

    let launched = lane
        .windows_launch(
            &k,
            LaunchRequest {
                program: "notepad.exe".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let hwnd = launched.hwnd.unwrap();
    assert_eq!(launched.title.as_deref(), Some("Untitled - Notepad"));
    let windows = lane.windows_windows(&k).await.unwrap();
    assert_eq!(windows.len(), 1);
    assert_eq!(windows[0].hwnd, hwnd);
    assert_eq!(windows[0].bounds.width, 800);
    lane.windows_focus(&k, hwnd).await.unwrap();
    let snap = lane.windows_snapshot(&k, Some(hwnd)).await.unwrap();
    assert!(snap.contains("ref=e2"));
    let clicked = lane
        .windows_click(&k, by_ref("e2"), MouseButton::Left, false)
        .await
        .unwrap();
    assert_eq!(clicked.method, "invoke_pattern");
    let clicked = lane
        .windows_click(
            &k,
            Target {
                point: Some(Point { x: 10, y: 20 }),
                ..Default::default()
            },
            MouseButton::Right,
            true,
        )
        .await
        .unwrap();
    assert_eq!(clicked.method, "mouse");
    let typed = lane
        .windows_type(
            &k,
            TypeRequest {
                target: Some(by_ref("e2")),
                text: Some("hello".into()),
                secret_ref: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(typed.method, "keystrokes");
    let typed = lane
        .windows_type(
            &k,
            TypeRequest {
                target: Some(by_name("Password")),
                text: None,
                secret_ref: Some("db-password".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(typed.method, "value_pattern");
    lane.windows_key(&k, "Ctrl+S", Some(hwnd)).await.unwrap();
    let waited = lane
        .windows_wait_for(
            &k,
            WaitForRequest {
                target: None,
                window_title: Some("Save As".into()),
                state: WaitState::Exists,
                timeout_ms: Some(5_000),
            },
        )
        .await
        .unwrap();
    assert_eq!(waited.state, "exists");
    lane.windows_computer(
        &k,
        ComputerAction::Click {
            x: 5,
            y: 5,
            button: MouseButton::Left,
        },
    )
    .await
    .unwrap();
    lane.windows_computer(&k, ComputerAction::Type { text: "abc".into() })
        .await
        .unwrap();
    let shot = lane.windows_screenshot(&k, Some(hwnd)).await.unwrap();
    assert_eq!((shot.width, shot.height), (1920, 1080));
    lane.windows_close(&k, hwnd).await.unwrap();
    assert!(lane.windows_windows(&k).await.unwrap().is_empty());

    {
        let p = pool.lock().unwrap();
        assert_eq!(p.lease_requests, 1, "one lease held across every call");
        let (_, lease_body) = p.bodies.iter().find(|(v, _)| v == "lease").unwrap();
        assert_eq!(lease_body["tenantId"], k.tenant.to_string());
        assert_eq!(lease_body["holder"], k.holder);
        let (_, type_body) = p.bodies.iter().rev().find(|(v, _)| v == "type").unwrap();
        assert_eq!(type_body["secretRef"], "db-password");
        assert!(type_body.get("text").is_none());
    }

    let released = lane.windows_release(&k).await.unwrap();
    assert!(released.released);
    assert_eq!(released.outcome, "released");
    assert!(
        pool.lock().unwrap().sessions.is_empty(),
        "the pool ended the session"
    );
    assert!(lane.held(&k).await.is_none());
}

#[tokio::test]
async fn release_is_idempotent_and_the_next_call_leases_afresh() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    let r = lane.windows_release(&k).await.unwrap();
    assert!(!r.released);
    assert_eq!(r.outcome, "not_held");
    assert_eq!(pool.lock().unwrap().release_requests, 0, "nothing changed");
    assert_eq!(pool.lock().unwrap().lease_requests, 0);

    lane.windows_launch(
        &k,
        LaunchRequest {
            program: "notepad.exe".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let first = lane.held(&k).await.unwrap();
    assert!(lane.windows_release(&k).await.unwrap().released);
    assert_eq!(
        pool.lock().unwrap().closed_on_release,
        1,
        "launched programs closed"
    );
    let again = lane.windows_release(&k).await.unwrap();
    assert_eq!(
        (again.released, again.outcome.as_str()),
        (false, "not_held")
    );
    assert_eq!(pool.lock().unwrap().release_requests, 1);

    lane.windows_windows(&k).await.unwrap();
    let second = lane.held(&k).await.unwrap();
    assert_ne!(first.session_id, second.session_id);
    assert_eq!(pool.lock().unwrap().lease_requests, 2);
}

#[tokio::test]
async fn sessions_are_keyed_per_tenant_and_holder_and_settle_with_the_task() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let a = key();
    let b = LaneKey::new(a.tenant, "another-coder");
    let c = LaneKey::new(Uuid::new_v4(), a.holder.clone());
    for k in [&a, &b, &c] {
        lane.windows_windows(k).await.unwrap();
    }
    assert_eq!(pool.lock().unwrap().lease_requests, 3);
    let r = lane.task_settled(&a).await.unwrap();
    assert!(r.released);
    assert!(lane.held(&a).await.is_none());
    assert!(lane.held(&b).await.is_some());
    assert_eq!(pool.lock().unwrap().sessions.len(), 2);
}

#[tokio::test]
async fn feature_disabled_refuses_every_verb_before_any_lease() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, false);
    let k = key();
    let mut errors = vec![
        lane.windows_run_spec(
            &k,
            RunSpec {
                script: "x".into(),
                shell: None,
            },
        )
        .await
        .unwrap_err(),
        lane.windows_task_status(&k, "t").await.unwrap_err(),
        lane.windows_launch(
            &k,
            LaunchRequest {
                program: "a".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err(),
        lane.windows_windows(&k).await.unwrap_err(),
        lane.windows_focus(&k, 1).await.unwrap_err(),
        lane.windows_close(&k, 1).await.unwrap_err(),
        lane.windows_snapshot(&k, None).await.unwrap_err(),
        lane.windows_click(&k, by_ref("e1"), MouseButton::Left, false)
            .await
            .unwrap_err(),
        // Even an invalid call answers FEATURE_DISABLED first.
        lane.windows_type(&k, TypeRequest::default())
            .await
            .unwrap_err(),
        lane.windows_key(&k, "Ctrl+S", None).await.unwrap_err(),
        lane.windows_wait_for(
            &k,
            WaitForRequest {
                target: None,
                window_title: Some("x".into()),
                state: WaitState::Gone,
                timeout_ms: None,
            },
        )
        .await
        .unwrap_err(),
        lane.windows_computer(&k, ComputerAction::MouseMove { x: 1, y: 1 })
            .await
            .unwrap_err(),
        lane.windows_screenshot(&k, None).await.unwrap_err(),
    ];
    errors.push(lane.windows_release(&k).await.unwrap_err());
    assert_eq!(errors.len(), 14);
    for e in &errors {
        assert_code(e, WindowsErrorCode::FeatureDisabled, None, false);
    }
    assert_eq!(pool.lock().unwrap().lease_requests, 0);
}

#[tokio::test]
async fn windows_type_validation_errors_lease_nothing() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    for req in [
        TypeRequest::default(),
        TypeRequest {
            target: None,
            text: Some("a".into()),
            secret_ref: Some("b".into()),
        },
        TypeRequest {
            target: None,
            text: None,
            secret_ref: Some("vault/db-password".into()),
        },
        TypeRequest {
            target: None,
            text: None,
            secret_ref: Some("${DB}".into()),
        },
        TypeRequest {
            target: Some(by_ref("x1")),
            text: Some("a".into()),
            secret_ref: None,
        },
    ] {
        let e = lane.windows_type(&k, req).await.unwrap_err();
        assert_code(&e, WindowsErrorCode::ValidationError, None, false);
    }
    let e = lane
        .windows_click(&k, Target::default(), MouseButton::Left, false)
        .await
        .unwrap_err();
    assert_code(&e, WindowsErrorCode::ValidationError, None, false);
    assert_eq!(
        pool.lock().unwrap().lease_requests,
        0,
        "no machine was leased"
    );
    assert!(lane.held(&k).await.is_none());
}

#[tokio::test]
async fn launch_wait_is_clamped_and_no_window_is_hwnd_null() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    let r = lane
        .windows_launch(
            &k,
            LaunchRequest {
                program: "nowindow.exe".into(),
                wait_for_window_ms: Some(120_000),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r.pid, 4242);
    assert_eq!(r.hwnd, None);
    assert_eq!(r.title, None);
    let p = pool.lock().unwrap();
    let (_, body) = p.bodies.iter().rev().find(|(v, _)| v == "launch").unwrap();
    assert_eq!(body["waitForWindowMs"], 55_000);
    assert_eq!(body["budgetMs"], 65_000);
}

#[tokio::test]
async fn wait_for_timeout_is_clamped_and_a_timeout_carries_elapsed() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    let e = lane
        .windows_wait_for(
            &k,
            WaitForRequest {
                target: None,
                window_title: Some("Never Appears".into()),
                state: WaitState::Exists,
                timeout_ms: Some(3_600_000),
            },
        )
        .await
        .unwrap_err();
    assert_code(&e, WindowsErrorCode::WaitTimeout, Some(408), true);
    assert_eq!(e.elapsed_ms, Some(600_000));
    assert_eq!(e.data()["elapsedMs"], 600_000);
    let p = pool.lock().unwrap();
    let (_, body) = p
        .bodies
        .iter()
        .rev()
        .find(|(v, _)| v == "wait_for")
        .unwrap();
    assert_eq!(body["timeoutMs"], 600_000);
}

#[tokio::test]
async fn desktop_errors_carry_their_codes() {
    let (_pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    let hwnd = lane
        .windows_launch(
            &k,
            LaunchRequest {
                program: "notepad.exe".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .hwnd
        .unwrap();
    let e = lane
        .windows_click(&k, by_ref("e99"), MouseButton::Left, false)
        .await
        .unwrap_err();
    assert_code(&e, WindowsErrorCode::ElementNotFound, Some(404), false);
    assert!(!e.session_evicted, "a desktop 404 is not an eviction");
    let e = lane.windows_focus(&k, hwnd + 50).await.unwrap_err();
    assert_code(&e, WindowsErrorCode::WindowNotFound, Some(404), false);
    let e = lane
        .windows_click(&k, by_name("Covered"), MouseButton::Left, false)
        .await
        .unwrap_err();
    assert_code(&e, WindowsErrorCode::WindowNotForeground, Some(409), true);
    let e = lane
        .windows_click(&k, by_name("Elevated"), MouseButton::Left, false)
        .await
        .unwrap_err();
    assert_code(&e, WindowsErrorCode::InputBlocked, Some(403), false);
    let e = lane.windows_snapshot(&k, Some(666)).await.unwrap_err();
    assert_code(&e, WindowsErrorCode::UiTimeout, Some(504), true);
    let e = lane
        .windows_type(
            &k,
            TypeRequest {
                target: Some(by_name("Password")),
                text: None,
                secret_ref: Some("missing-secret".into()),
            },
        )
        .await
        .unwrap_err();
    assert_code(&e, WindowsErrorCode::SecretNotFound, Some(404), false);
    assert_eq!(e.secret_ref.as_deref(), Some("missing-secret"));
    assert!(e.message.contains("missing-secret"));
    let e = lane.windows_key(&k, "Hyper+Q", None).await.unwrap_err();
    assert_code(&e, WindowsErrorCode::BadRequest, Some(400), false);
    assert_eq!(e.pool_detail["error"], "UNKNOWN_KEY");
    // Still the one session: none of these dropped the hold.
    assert!(lane.held(&k).await.is_some());
}

#[tokio::test]
async fn a_secret_aimed_at_an_unmasked_control_is_refused_and_projected() {
    let (_pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    let e = lane
        .windows_type(
            &k,
            TypeRequest {
                target: Some(by_name("Username")),
                text: None,
                secret_ref: Some("db-password".into()),
            },
        )
        .await
        .unwrap_err();
    assert_code(
        &e,
        WindowsErrorCode::SecretTargetNotMasked,
        Some(409),
        false,
    );
    assert_eq!(
        e.pool_detail,
        json!({"error": "SECRET_TARGET_NOT_MASKED", "reason": "target_not_password",
            "state": "refused", "secretRef": "db-password", "host": "win-1"})
    );
    let rendered = e.data().to_string();
    assert!(
        !rendered.contains("alice"),
        "guest free text leaked: {rendered}"
    );
    assert!(!rendered.contains("guestLog"));
}

#[tokio::test]
async fn hosts_without_a_desktop_answer_desktop_unavailable_with_the_reason() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    for (host, reason) in [
        ("session0-host", "session_0"),
        ("probe-failed-host", "capture_probe_failed"),
    ] {
        pool.lock().unwrap().next_host = host.to_string();
        let k = key();
        let e = lane.windows_snapshot(&k, None).await.unwrap_err();
        assert_code(&e, WindowsErrorCode::DesktopUnavailable, Some(503), false);
        assert_eq!(e.reason.as_deref(), Some(reason));
        assert_eq!(e.data()["reason"], reason);
        // The build shape still works on a compile-only host.
        lane.windows_run_spec(
            &k,
            RunSpec {
                script: "cargo build".into(),
                shell: None,
            },
        )
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn a_second_run_spec_conflicts_with_the_running_task_handle() {
    let (_pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    let t = lane
        .windows_run_spec(
            &k,
            RunSpec {
                script: "build".into(),
                shell: None,
            },
        )
        .await
        .unwrap();
    let e = lane
        .windows_run_spec(
            &k,
            RunSpec {
                script: "build".into(),
                shell: None,
            },
        )
        .await
        .unwrap_err();
    assert_code(&e, WindowsErrorCode::Conflict, Some(409), false);
    assert_eq!(e.task_handle.as_deref(), Some(t.task_handle.as_str()));
    assert_eq!(e.pool_detail["taskHandle"], t.task_handle);
    let e = lane.windows_task_status(&k, "unknown").await.unwrap_err();
    assert_code(&e, WindowsErrorCode::BadRequest, Some(400), false);
    assert_eq!(
        e.pool_detail["message"], "no such task",
        "untyped calls keep the pool's body"
    );
}

#[tokio::test]
async fn an_evicted_session_is_not_found_and_the_next_call_leases_afresh() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    lane.windows_windows(&k).await.unwrap();
    let before = lane.held(&k).await.unwrap();
    pool.lock().unwrap().sessions.clear();
    let e = lane.windows_windows(&k).await.unwrap_err();
    assert_code(&e, WindowsErrorCode::NotFound, Some(404), true);
    assert!(e.session_evicted);
    assert_eq!(e.data()["sessionEvicted"], true);
    assert!(lane.held(&k).await.is_none());
    lane.windows_windows(&k).await.unwrap();
    assert_ne!(lane.held(&k).await.unwrap().session_id, before.session_id);
    assert_eq!(pool.lock().unwrap().lease_requests, 2);
}

#[tokio::test]
async fn a_pool_at_capacity_names_its_holders() {
    let (pool, base) = start().await;
    pool.lock().unwrap().at_capacity = true;
    let lane = lane(&base, GOOD, true);
    let k = key();
    let e = lane.windows_windows(&k).await.unwrap_err();
    assert_code(&e, WindowsErrorCode::PoolError, Some(503), true);
    assert_eq!(e.holders, vec!["tenant-a/coder-7", "tenant-b/coder-2"]);
    assert!(e.message.contains("tenant-a/coder-7"));
    assert!(lane.held(&k).await.is_none());
}

#[tokio::test]
async fn rate_limits_and_refused_credentials_are_typed() {
    let (pool, base) = start().await;
    let k = key();
    let good = lane(&base, GOOD, true);
    good.windows_windows(&k).await.unwrap();
    pool.lock().unwrap().rate_limited = true;
    let e = good.windows_windows(&k).await.unwrap_err();
    assert_code(&e, WindowsErrorCode::RateLimited, Some(429), true);
    assert!(good.held(&k).await.is_some(), "a 429 keeps the session");

    let e = lane(&base, "wrong", true)
        .windows_windows(&key())
        .await
        .unwrap_err();
    assert_code(&e, WindowsErrorCode::Unauthenticated, Some(401), false);
    let e = lane(&base, "readonly", true)
        .windows_windows(&key())
        .await
        .unwrap_err();
    assert_code(&e, WindowsErrorCode::Forbidden, Some(403), false);
}

#[tokio::test]
async fn an_unreachable_pool_is_pool_unavailable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let lane = lane(&format!("http://{addr}"), GOOD, true);
    let e = lane.windows_windows(&key()).await.unwrap_err();
    assert_code(&e, WindowsErrorCode::PoolUnavailable, None, true);
}

#[tokio::test]
async fn releasing_a_lease_the_pool_dropped_reports_evicted() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    lane.windows_windows(&k).await.unwrap();
    // The pool dropped the lease behind our back: release reports it, holds nothing.
    pool.lock().unwrap().leases.clear();
    let r = lane.windows_release(&k).await.unwrap();
    assert_eq!((r.released, r.outcome.as_str()), (false, "evicted"));
    assert!(lane.held(&k).await.is_none());
}

#[tokio::test]
async fn a_failed_release_keeps_the_hold_for_a_retry() {
    let (pool, base) = start().await;
    let lane = lane(&base, GOOD, true);
    let k = key();
    lane.windows_windows(&k).await.unwrap();
    pool.lock().unwrap().fail_release = true;
    let e = lane.windows_release(&k).await.unwrap_err();
    assert_code(&e, WindowsErrorCode::PoolError, Some(500), true);
    assert!(
        lane.held(&k).await.is_some(),
        "still held after a failed release"
    );
    pool.lock().unwrap().fail_release = false;
    assert!(lane.windows_release(&k).await.unwrap().released);
    assert!(pool.lock().unwrap().sessions.is_empty());
}

#[tokio::test]
async fn lanes_sharing_a_hold_table_lease_one_machine_for_concurrent_first_uses() {
    let (pool, base) = start().await;
    pool.lock().unwrap().lease_delay = Duration::from_millis(300);
    let holds: Arc<dyn HoldTable> = Arc::new(LocalHolds::default());
    let a = lane_on(&base, GOOD, true, holds.clone());
    let b = lane_on(&base, GOOD, true, holds.clone());
    let k = key();
    let (ra, rb) = tokio::join!(a.windows_windows(&k), b.windows_windows(&k));
    ra.unwrap();
    rb.unwrap();
    {
        let p = pool.lock().unwrap();
        assert_eq!(p.lease_requests, 1, "the waiter used the winner's lease");
        assert_eq!(p.leases.len(), 1);
    }
    assert_eq!(a.held(&k).await, b.held(&k).await);
    let r = b.windows_release(&k).await.unwrap();
    assert!(r.released);
    let again = a.windows_release(&k).await.unwrap();
    assert_eq!(
        (again.released, again.outcome.as_str()),
        (false, "not_held")
    );
    assert!(pool.lock().unwrap().leases.is_empty());
}

#[tokio::test]
async fn a_claim_taken_over_while_leasing_hands_its_lease_back() {
    let (pool, base) = start().await;
    pool.lock().unwrap().lease_delay = Duration::from_millis(300);
    let holds: Arc<dyn HoldTable> = Arc::new(LocalHolds::default());
    let lane = lane_on(&base, GOOD, true, holds.clone());
    let k = key();
    let call = tokio::spawn({
        let k = k.clone();
        async move { lane.windows_windows(&k).await.map(|_| lane) }
    });
    // The claim is in place while the pool is still answering the lease.
    let claim = loop {
        if let Some(h) = holds.get(&k).await.unwrap() {
            break h;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(claim.lease.is_none(), "still leasing");
    assert!(holds.remove(&k, claim.revision).await.unwrap());
    let lane = call.await.unwrap().unwrap();
    let held = {
        let p = pool.lock().unwrap();
        assert_eq!(
            p.lease_requests, 2,
            "the call leased again under a new claim"
        );
        assert_eq!(p.release_requests, 1, "the unheld lease went back");
        assert_eq!(p.leases.len(), 1, "no machine leaked");
        p.leases.keys().next().cloned().unwrap()
    };
    assert_eq!(lane.held(&k).await.unwrap().lease_id, held);
}

#[tokio::test]
async fn an_eviction_seen_late_never_drops_a_newer_hold() {
    let (pool, base) = start().await;
    let holds: Arc<dyn HoldTable> = Arc::new(LocalHolds::default());
    let lane = lane_on(&base, GOOD, true, holds.clone());
    let k = key();
    lane.windows_windows(&k).await.unwrap();
    let old = holds.get(&k).await.unwrap().unwrap();
    // Released and leased anew (another replica): the old revision is stale.
    lane.windows_release(&k).await.unwrap();
    lane.windows_windows(&k).await.unwrap();
    let new = holds.get(&k).await.unwrap().unwrap();
    assert_ne!(old.revision, new.revision);
    assert!(!holds.remove(&k, old.revision).await.unwrap());
    assert_eq!(holds.get(&k).await.unwrap(), Some(new));
    assert_eq!(pool.lock().unwrap().leases.len(), 1);
}

#[tokio::test]
async fn an_expired_lease_is_held_no_more_and_the_next_call_leases_afresh() {
    let (pool, base) = start().await;
    pool.lock().unwrap().lease_ttl = Some(Duration::from_millis(300));
    let lane = lane(&base, GOOD, true);
    let (k, other) = (key(), key());
    lane.windows_windows(&k).await.unwrap();
    lane.windows_windows(&other).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(lane.held(&k).await.is_none(), "past its expiry");
    // Released after expiry: nothing to hand back, and the hold is gone.
    let r = lane.windows_release(&k).await.unwrap();
    assert_eq!((r.released, r.outcome.as_str()), (false, "expired"));
    assert_eq!(pool.lock().unwrap().release_requests, 0);
    let again = lane.windows_release(&k).await.unwrap();
    assert_eq!(again.outcome, "not_held");
    // Used after expiry: a fresh lease, never the forgotten session.
    lane.windows_windows(&other).await.unwrap();
    assert_eq!(pool.lock().unwrap().lease_requests, 3);
}
