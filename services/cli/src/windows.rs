//! `genesisctl windows <verb>`: one command per WindowsLaneService RPC, each
//! acting in the Windows session of one coder. The pool's own failures come
//! back in-band (the response's `error`); they are reported like RPC errors
//! (`error: <CODE>: <message> (...)`, exit 1), and with `--output json` the
//! whole response, pool detail included, is printed first.
//!
//! This module must never lease or release a machine on its own: every call
//! is exactly the verb the operator typed.

use genesis_proto::v1;

use crate::cli::{Output, SessionArgs, TargetArgs, WindowsCmd};
use crate::commands::Ctx;
use crate::error::CliError;
use crate::json::Wire;
use crate::table::{Column, col};
use crate::validate::{choice, json_text, non_empty};

const WINDOW_COLS: &[Column] = &[
    col("HWND", "hwnd"),
    col("PID", "pid"),
    col("PROCESS", "process_name"),
    col("TITLE", "title"),
    col("X", "bounds.x"),
    col("Y", "bounds.y"),
    col("WIDTH", "bounds.width"),
    col("HEIGHT", "bounds.height"),
];

/// The raw input actions `windows computer` accepts.
pub const COMPUTER_ACTIONS: &[&str] = &[
    "move",
    "click",
    "double_click",
    "right_click",
    "drag",
    "scroll",
    "type",
    "key",
];

fn session(
    ctx: &Ctx<'_>,
    args: &SessionArgs,
    verb: &str,
) -> Result<Option<v1::WindowsSession>, CliError> {
    Ok(Some(v1::WindowsSession {
        tenant_id: ctx.tenant(&format!("windows {verb}"))?,
        // A coder's id is its Job's name (`coder-…`), not a UUID.
        coder_id: non_empty("--coder", &args.coder)?,
    }))
}

/// The element target of Click / Type / WaitFor. At least one way to find
/// the element is required unless `allow_none` (WaitFor may wait on a
/// window title instead).
pub fn target(args: &TargetArgs, allow_none: bool) -> Result<Option<v1::ElementTarget>, CliError> {
    let given = args.element_ref.is_some()
        || args.automation_id.is_some()
        || args.name.is_some()
        || args.control_type.is_some()
        || args.x.is_some();
    if !given {
        if allow_none {
            return Ok(None);
        }
        return Err(CliError::usage(
            "target: give --ref, --automation-id/--name/--control-type, or --x and --y",
        ));
    }
    if let Some(r) = &args.element_ref {
        let valid = r
            .strip_prefix('e')
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if !valid {
            return Err(CliError::usage(format!(
                "--ref: {r:?} is not a snapshot ref (expected eN, e.g. e12)"
            )));
        }
    }
    Ok(Some(v1::ElementTarget {
        r#ref: args.element_ref.clone(),
        automation_id: args.automation_id.clone(),
        name: args.name.clone(),
        control_type: args.control_type.clone(),
        x: args.x,
        y: args.y,
        hwnd: args.hwnd,
    }))
}

/// A secret reference must be a bare name (letters, digits, `_`, `-`, `.`),
/// the same rule the pool applies before leasing.
pub fn secret_ref(value: &str) -> Result<String, CliError> {
    let valid = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(value.to_owned())
    } else {
        Err(CliError::usage(
            "--secret-ref: must be a bare secret name (letters, digits, _, - and .)",
        ))
    }
}

/// The in-band pool error as a [`CliError::Lane`], its reason, HTTP status
/// and retryability folded into the message.
pub fn lane_error(err: &v1::WindowsLaneError) -> CliError {
    let mut notes = Vec::new();
    if !err.reason.is_empty() {
        notes.push(format!("reason: {}", err.reason));
    }
    if err.http_status != 0 {
        notes.push(format!("http {}", err.http_status));
    }
    if let Some(ms) = err.elapsed_ms {
        notes.push(format!("elapsed {ms} ms"));
    }
    if err.session_evicted {
        notes.push("session evicted".into());
    }
    notes.push(
        if err.retryable {
            "retryable"
        } else {
            "not retryable"
        }
        .into(),
    );
    CliError::Lane {
        code: err.code.clone(),
        message: format!("{} ({})", err.message, notes.join("; ")),
    }
}

fn finish<M: Wire>(
    ctx: &mut Ctx<'_>,
    response: &M,
    error: Option<&v1::WindowsLaneError>,
) -> Result<(), CliError> {
    match error {
        Some(err) => {
            if ctx.out.format() == Output::Json {
                ctx.out.object(response)?;
            }
            Err(lane_error(err))
        }
        None => ctx.out.object(response),
    }
}

macro_rules! lane {
    ($ctx:expr, $method:ident ( $req:expr )) => {{
        let request = $req;
        let mut client = $ctx.conn().await?.windows();
        client.$method(request).await?.into_inner()
    }};
}

/// Runs one Windows lane verb.
pub async fn run(ctx: &mut Ctx<'_>, cmd: &WindowsCmd) -> Result<(), CliError> {
    match cmd {
        WindowsCmd::RunSpec {
            session: s,
            script,
            shell,
            spec,
        } => {
            let text = std::fs::read_to_string(script).map_err(|source| CliError::Io {
                path: script.display().to_string(),
                source,
            })?;
            let req = v1::RunSpecRequest {
                session: session(ctx, s, "run-spec")?,
                script: non_empty(&format!("{}: script", script.display()), &text)?,
                shell: choice("--shell", shell, &["powershell", "cmd"])?,
                spec_json: json_text("--spec", spec.as_deref())?,
            };
            let r = lane!(ctx, run_spec(req));
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::TaskStatus { session: s, handle } => {
            let req = v1::TaskStatusRequest {
                session: session(ctx, s, "task-status")?,
                task_handle: non_empty("HANDLE", handle)?,
            };
            let r = lane!(ctx, task_status(req));
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::Launch {
            session: s,
            program,
            args,
            working_directory,
            wait_for_window_ms,
        } => {
            if wait_for_window_ms.is_some_and(|ms| ms < 0) {
                return Err(CliError::usage(
                    "--wait-for-window-ms: must not be negative",
                ));
            }
            let req = v1::LaunchRequest {
                session: session(ctx, s, "launch")?,
                program: non_empty("PROGRAM", program)?,
                args: args.clone(),
                working_directory: working_directory.clone(),
                wait_for_window_ms: *wait_for_window_ms,
            };
            let r = lane!(ctx, launch(req));
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::Windows { session: s } => {
            let req = v1::WindowsRequest {
                session: session(ctx, s, "windows")?,
            };
            let r = lane!(ctx, windows(req));
            match &r.error {
                Some(_) => finish(ctx, &r, r.error.as_ref()),
                None => ctx.out.list(&r, "windows", WINDOW_COLS),
            }
        }
        WindowsCmd::Focus { session: s, hwnd } => {
            let req = v1::FocusRequest {
                session: session(ctx, s, "focus")?,
                hwnd: *hwnd,
            };
            let r = lane!(ctx, focus(req));
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::Close { session: s, hwnd } => {
            let req = v1::CloseRequest {
                session: session(ctx, s, "close")?,
                hwnd: *hwnd,
            };
            let r = lane!(ctx, close(req));
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::Snapshot { session: s, hwnd } => {
            let req = v1::SnapshotRequest {
                session: session(ctx, s, "snapshot")?,
                hwnd: *hwnd,
            };
            let r = lane!(ctx, snapshot(req));
            if r.error.is_none() && ctx.out.format() == Output::Table {
                // The tree is already indented text meant for reading.
                return ctx.out.text(&r.tree);
            }
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::Click {
            session: s,
            target: t,
            button,
            double,
        } => {
            let req = v1::ClickRequest {
                session: session(ctx, s, "click")?,
                target: target(t, false)?,
                button: choice("--button", button, &["left", "right", "middle"])?,
                double_click: *double,
            };
            let r = lane!(ctx, click(req));
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::Type {
            session: s,
            target: t,
            text,
            secret_ref: secret,
        } => {
            if text.is_none() && secret.is_none() {
                return Err(CliError::usage(
                    "give exactly one of --text or --secret-ref",
                ));
            }
            let req = v1::TypeRequest {
                session: session(ctx, s, "type")?,
                target: target(t, false)?,
                text: text.clone(),
                secret_ref: secret.as_deref().map(secret_ref).transpose()?,
            };
            let r = lane!(ctx, r#type(req));
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::Key {
            session: s,
            keys,
            hwnd,
        } => {
            let req = v1::KeyRequest {
                session: session(ctx, s, "key")?,
                keys: non_empty("KEYS", keys)?,
                hwnd: *hwnd,
            };
            let r = lane!(ctx, key(req));
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::WaitFor {
            session: s,
            target: t,
            window_title,
            condition,
            timeout_ms,
        } => {
            let element = target(t, true)?;
            if element.is_none() == window_title.is_none() {
                return Err(CliError::usage(
                    "wait-for: give an element target or --window-title (exactly one)",
                ));
            }
            let req = v1::WaitForRequest {
                session: session(ctx, s, "wait-for")?,
                target: element,
                window_title: window_title.clone(),
                condition: choice("--condition", condition, &["exists", "enabled", "gone"])?,
                timeout_ms: *timeout_ms,
            };
            let r = lane!(ctx, wait_for(req));
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::Computer {
            session: s,
            action,
            x,
            y,
            args,
        } => {
            let req = v1::ComputerRequest {
                session: session(ctx, s, "computer")?,
                action: choice("ACTION", action, COMPUTER_ACTIONS)?,
                x: *x,
                y: *y,
                args_json: json_text("--args", args.as_deref())?,
            };
            let r = lane!(ctx, computer(req));
            finish(ctx, &r, r.error.as_ref())
        }
        WindowsCmd::Screenshot {
            session: s,
            hwnd,
            out,
        } => {
            let req = v1::ScreenshotRequest {
                session: session(ctx, s, "screenshot")?,
                hwnd: *hwnd,
            };
            let mut r = lane!(ctx, screenshot(req));
            if let Some(err) = &r.error {
                return Err(lane_error(err));
            }
            std::fs::write(out, &r.png).map_err(|source| CliError::Io {
                path: out.display().to_string(),
                source,
            })?;
            let bytes = r.png.len();
            r.png.clear();
            let mut value = crate::json::to_json(&r)?;
            if let Some(map) = value.as_object_mut() {
                map.remove("png");
                map.insert("saved_to".into(), out.display().to_string().into());
                map.insert("png_bytes".into(), bytes.into());
            }
            ctx.out.value(&value)
        }
        WindowsCmd::Release { session: s } => {
            let req = v1::ReleaseRequest {
                session: session(ctx, s, "release")?,
            };
            let r = lane!(ctx, release(req));
            finish(ctx, &r, r.error.as_ref())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_need_a_way_to_find_the_element() {
        let none = TargetArgs::default();
        assert!(target(&none, false).is_err());
        assert_eq!(target(&none, true).expect("allowed"), None);
        let by_ref = TargetArgs {
            element_ref: Some("e12".into()),
            ..TargetArgs::default()
        };
        let t = target(&by_ref, false).expect("ok").expect("set");
        assert_eq!(t.r#ref.as_deref(), Some("e12"));
        let bad_ref = TargetArgs {
            element_ref: Some("12".into()),
            ..TargetArgs::default()
        };
        let err = target(&bad_ref, false).expect_err("refused");
        assert!(err.to_string().contains("expected eN"), "{err}");
    }

    #[test]
    fn secret_refs_must_be_bare_names() {
        assert_eq!(secret_ref("db.password-1").expect("ok"), "db.password-1");
        assert!(secret_ref("a/b").is_err());
        assert!(secret_ref("").is_err());
        assert!(secret_ref("pass word").is_err());
    }

    #[test]
    fn lane_errors_carry_code_reason_and_retryability() {
        let err = lane_error(&v1::WindowsLaneError {
            code: "DESKTOP_UNAVAILABLE".into(),
            message: "no interactive desktop".into(),
            reason: "session_0".into(),
            http_status: 409,
            retryable: false,
            ..Default::default()
        });
        assert_eq!(
            err.to_string(),
            "DESKTOP_UNAVAILABLE: no interactive desktop (reason: session_0; http 409; not retryable)"
        );
        assert_eq!(err.exit_code(), crate::error::EXIT_FAILURE);
    }
}
