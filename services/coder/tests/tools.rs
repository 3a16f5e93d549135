//! The governed tools against a real checkout: success paths, caps, and
//! every refusal leaving the tree unchanged.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

use common::Fixture;
use genesis_coder::{CoderConfig, CoderError, ToolError, Tools};
use genesis_core::Coded;
use serde_json::{Value, json};

/// A refusal's code and message, asserting the call failed.
async fn refused(tools: &Tools, name: &str, args: Value) -> ToolError {
    match tools.call(name, &args).await {
        Err(e) => e,
        Ok(v) => panic!("{name} {args} succeeded: {v}"),
    }
}

fn field_of(err: &ToolError) -> &str {
    match err {
        ToolError::InvalidArguments { field, .. } => field,
        other => panic!("not an argument error: {other:?}"),
    }
}

fn test_config(allow: &[&str]) -> CoderConfig {
    CoderConfig {
        allowlist: allow.iter().map(|s| (*s).to_owned()).collect(),
        ..CoderConfig::default()
    }
}

// ---------------------------------------------------------------- read_file

#[tokio::test]
async fn read_file_returns_lines_from_an_offset() {
    let fx = Fixture::new().await;
    let v = fx
        .tools
        .call(
            "read_file",
            &json!({"path": "src/lib.rs", "offset_line": 2, "max_lines": 2}),
        )
        .await
        .unwrap();
    assert_eq!(v["content"], "line 2\nline 3 needle\n");
    assert_eq!(v["first_line"], 2);
    assert_eq!(v["last_line"], 3);
    assert_eq!(v["truncated"], true);
    let v = fx
        .tools
        .call("read_file", &json!({"path": "./src/../src/lib.rs"}))
        .await
        .unwrap();
    assert_eq!(v["path"], "src/lib.rs");
    assert_eq!(v["truncated"], false);
    assert_eq!(v["last_line"], 5);
}

#[tokio::test]
async fn read_file_caps_bytes_with_a_marker() {
    let fx = Fixture::with_config(CoderConfig {
        max_read_bytes: 10,
        ..CoderConfig::default()
    })
    .await;
    let v = fx
        .tools
        .call("read_file", &json!({"path": "src/lib.rs"}))
        .await
        .unwrap();
    assert_eq!(v["content"], "line 1\n");
    assert_eq!(v["truncated"], true);
    std::fs::write(fx.root().join("long.txt"), "x".repeat(100)).unwrap();
    let v = fx
        .tools
        .call("read_file", &json!({"path": "long.txt"}))
        .await
        .unwrap();
    assert_eq!(v["content"], "x".repeat(10));
    assert_eq!(v["truncated"], true);
}

#[tokio::test]
async fn read_file_refuses_binary_missing_and_directories() {
    let fx = Fixture::new().await;
    let e = refused(&fx.tools, "read_file", json!({"path": "data.bin"})).await;
    assert!(matches!(e, ToolError::NotApplicable { .. }), "{e:?}");
    assert_eq!(e.code().as_str(), "NOT_APPLICABLE");
    let e = refused(&fx.tools, "read_file", json!({"path": "nope.txt"})).await;
    assert!(matches!(e, ToolError::NotFound { .. }), "{e:?}");
    let e = refused(&fx.tools, "read_file", json!({"path": "src"})).await;
    assert!(matches!(e, ToolError::NotApplicable { .. }), "{e:?}");
}

#[tokio::test]
async fn path_escapes_are_refused_and_nothing_is_read() {
    let fx = Fixture::new().await;
    symlink(fx.outside().join("secret.txt"), fx.root().join("link")).unwrap();
    symlink(fx.outside(), fx.root().join("dirlink")).unwrap();
    let secret_abs = fx.outside().join("secret.txt");
    let cases = [
        "../outside/secret.txt".to_owned(),
        "src/../../outside/secret.txt".to_owned(),
        secret_abs.to_string_lossy().into_owned(),
        "/etc/passwd".to_owned(),
        "link".to_owned(),
        "dirlink/secret.txt".to_owned(),
        ".git/config".to_owned(),
        "src/../.git/config".to_owned(),
        ".GIT/config".to_owned(),
        "README.md\0".to_owned(),
    ];
    for path in &cases {
        let e = refused(&fx.tools, "read_file", json!({ "path": path })).await;
        assert!(
            matches!(e, ToolError::PathRefused { .. }),
            "{path:?}: {e:?}"
        );
        assert_eq!(e.code().as_str(), "NOT_PERMITTED", "{path:?}");
        assert!(!e.to_string().contains("top secret"));
        for tool in ["list_files", "search"] {
            let mut args = json!({ "path": path });
            if tool == "search" {
                args["pattern"] = json!("secret");
            }
            let e = refused(&fx.tools, tool, args).await;
            assert!(
                matches!(
                    e,
                    ToolError::PathRefused { .. } | ToolError::NotApplicable { .. }
                ),
                "{tool} {path:?}: {e:?}"
            );
        }
    }
}

#[tokio::test]
async fn the_workspace_resolves_new_files_only_inside() {
    let fx = Fixture::new().await;
    symlink(fx.outside(), fx.root().join("dirlink")).unwrap();
    let ws = fx.tools.workspace();
    let ok = ws.resolve_for_write("src/new/deeper/file.rs").unwrap();
    assert_eq!(ok.relative, "src/new/deeper/file.rs");
    assert!(ok.absolute.starts_with(ws.root()));
    for bad in ["dirlink/new.txt", "../new.txt", ".git/hooks/pre-commit", ""] {
        assert!(ws.resolve_for_write(bad).is_err(), "{bad:?}");
    }
}

// --------------------------------------------------------------- list_files

#[tokio::test]
async fn list_files_is_sorted_skips_git_and_does_not_follow_symlinks() {
    let fx = Fixture::new().await;
    symlink(fx.outside(), fx.root().join("dirlink")).unwrap();
    let v = fx.tools.call("list_files", &json!({})).await.unwrap();
    let paths: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["README.md", "data.bin", "dirlink", "src", "src/lib.rs"]
    );
    assert_eq!(v["entries"][2]["type"], "symlink");
    assert_eq!(v["entries"][3]["type"], "dir");
    assert_eq!(v["entries"][0]["size"], 19);
    assert_eq!(v["truncated"], false);
    let v = fx
        .tools
        .call("list_files", &json!({"path": "src", "max_depth": 1}))
        .await
        .unwrap();
    assert_eq!(
        v["entries"],
        json!([{"path": "src/lib.rs", "type": "file", "size": 49}])
    );
}

#[tokio::test]
async fn list_files_caps_entries_with_a_marker() {
    let fx = Fixture::with_config(CoderConfig {
        max_list_entries: 3,
        ..CoderConfig::default()
    })
    .await;
    let v = fx.tools.call("list_files", &json!({})).await.unwrap();
    assert_eq!(v["entries"].as_array().unwrap().len(), 3);
    assert_eq!(v["truncated"], true);
}

// ------------------------------------------------------------------- search

#[tokio::test]
async fn search_finds_literal_text_with_line_numbers() {
    let fx = Fixture::new().await;
    symlink(fx.outside(), fx.root().join("dirlink")).unwrap();
    std::fs::write(fx.root().join("regex.txt"), "a.*b\nneedle (literal)\n").unwrap();
    let v = fx
        .tools
        .call("search", &json!({"pattern": "needle"}))
        .await
        .unwrap();
    // data.bin (binary), .git and the symlink out are skipped.
    assert_eq!(
        v["matches"],
        json!([
            {"path": "regex.txt", "line": 2, "text": "needle (literal)"},
            {"path": "src/lib.rs", "line": 3, "text": "line 3 needle"},
            {"path": "src/lib.rs", "line": 5, "text": "line 5 needle"},
        ])
    );
    assert_eq!(v["truncated"], false);
    let v = fx
        .tools
        .call("search", &json!({"pattern": "a.*b"}))
        .await
        .unwrap();
    assert_eq!(v["matches"].as_array().unwrap().len(), 1);
    let v = fx
        .tools
        .call("search", &json!({"pattern": "top secret"}))
        .await
        .unwrap();
    assert_eq!(v["matches"], json!([]));
}

#[tokio::test]
async fn search_caps_results_with_a_marker_and_checks_its_arguments() {
    let fx = Fixture::new().await;
    let v = fx
        .tools
        .call("search", &json!({"pattern": "line", "max_results": 2}))
        .await
        .unwrap();
    assert_eq!(v["matches"].as_array().unwrap().len(), 2);
    assert_eq!(v["truncated"], true);
    let e = refused(&fx.tools, "search", json!({"pattern": ""})).await;
    assert_eq!(field_of(&e), "pattern");
    let e = refused(&fx.tools, "search", json!({"pattern": "a\nb"})).await;
    assert_eq!(field_of(&e), "pattern");
    let e = refused(
        &fx.tools,
        "search",
        json!({"pattern": "x", "max_results": 0}),
    )
    .await;
    assert_eq!(field_of(&e), "max_results");
    let e = refused(
        &fx.tools,
        "search",
        json!({"pattern": "x", "max_results": 100_000}),
    )
    .await;
    assert_eq!(field_of(&e), "max_results");
}

// --------------------------------------------------------------- apply_diff

#[tokio::test]
async fn apply_diff_changes_the_file_and_the_patch_shows_it() {
    let fx = Fixture::new().await;
    let diff = "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n line 1\n-line 2\n+line two\n line 3 needle\n";
    let v = fx
        .tools
        .call("apply_diff", &json!({ "diff": diff }))
        .await
        .unwrap();
    assert_eq!(v["applied"], true);
    assert!(v["stat"].as_str().unwrap().contains("src/lib.rs"), "{v}");
    assert_eq!(
        std::fs::read_to_string(fx.root().join("src/lib.rs")).unwrap(),
        "line 1\nline two\nline 3 needle\nline 4\nline 5 needle\n"
    );
    let patch = fx.checkout.patch().await.unwrap();
    assert!(patch.contains("-line 2\n+line two\n"), "{patch}");
}

#[tokio::test]
async fn apply_diff_refuses_paths_outside_and_into_git_changing_nothing() {
    let fx = Fixture::new().await;
    symlink(fx.outside(), fx.root().join("dirlink")).unwrap();
    let before = fx.snapshot();
    let diffs = [
        // A new file outside the tree.
        "diff --git a/../outside/evil.txt b/../outside/evil.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../outside/evil.txt\n@@ -0,0 +1 @@\n+evil\n",
        // Modifying .git/config.
        "diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n@@ -1 +1,2 @@\n [core]\n+\tfsmonitor = touch pwned\n",
        // A new hook.
        "diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\nnew file mode 100755\n--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+touch pwned\n",
        // Through a symlink pointing out of the tree.
        "diff --git a/dirlink/evil.txt b/dirlink/evil.txt\nnew file mode 100644\n--- /dev/null\n+++ b/dirlink/evil.txt\n@@ -0,0 +1 @@\n+evil\n",
        // A good hunk followed by one outside: nothing at all may change.
        "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n # demo\n-hello world\n+hello evil\ndiff --git a/../outside/evil.txt b/../outside/evil.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../outside/evil.txt\n@@ -0,0 +1 @@\n+evil\n",
    ];
    for diff in diffs {
        let e = refused(&fx.tools, "apply_diff", json!({ "diff": diff })).await;
        assert!(
            matches!(
                e,
                ToolError::PatchRejected {
                    forbidden_path: true,
                    ..
                }
            ),
            "{diff}\n{e:?}"
        );
        assert_eq!(e.code().as_str(), "NOT_PERMITTED");
        assert_eq!(fx.snapshot(), before, "{diff}");
    }
    assert!(!fx.root().join("pwned").exists());
}

#[tokio::test]
async fn apply_diff_that_does_not_apply_changes_nothing() {
    let fx = Fixture::new().await;
    let before = fx.snapshot();
    // The first file's hunk applies, the second's context is wrong.
    let diff = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n # demo\n-hello world\n+hello there\ndiff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n line 1\n-line two\n+line 2b\n";
    let e = refused(&fx.tools, "apply_diff", json!({ "diff": diff })).await;
    match &e {
        ToolError::PatchRejected {
            git_error,
            forbidden_path,
        } => {
            assert!(!forbidden_path);
            assert!(git_error.contains("src/lib.rs"), "{git_error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.code().as_str(), "FAILED_PRECONDITION");
    assert_eq!(fx.snapshot(), before);
    let e = refused(
        &fx.tools,
        "apply_diff",
        json!({"diff": "not a diff at all\n"}),
    )
    .await;
    assert!(matches!(e, ToolError::PatchRejected { .. }), "{e:?}");
    assert_eq!(fx.snapshot(), before);
}

#[tokio::test]
async fn apply_diff_caps_its_size() {
    let fx = Fixture::with_config(CoderConfig {
        max_diff_bytes: 16,
        ..CoderConfig::default()
    })
    .await;
    let e = refused(&fx.tools, "apply_diff", json!({"diff": "x".repeat(17)})).await;
    assert!(
        matches!(
            e,
            ToolError::TooLarge {
                size: 17,
                limit: 16,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.code().as_str(), "PAYLOAD_TOO_LARGE");
    let e = refused(&fx.tools, "apply_diff", json!({"diff": "  \n"})).await;
    assert_eq!(field_of(&e), "diff");
}

// -------------------------------------------------------------- run_command

#[tokio::test]
async fn run_command_refuses_programs_off_the_allowlist_without_spawning() {
    let fx = Fixture::with_config(test_config(&["git", "sh"])).await;
    for argv in [
        json!(["touch", "marker"]),
        json!(["/usr/bin/touch", "marker"]),
        json!(["./touch", "marker"]),
        json!(["bash", "-c", "touch marker"]),
    ] {
        let e = refused(&fx.tools, "run_command", json!({ "argv": argv })).await;
        assert!(
            matches!(e, ToolError::CommandRefused { .. }),
            "{argv}: {e:?}"
        );
        assert_eq!(e.code().as_str(), "NOT_PERMITTED");
    }
    assert!(!fx.root().join("marker").exists());
}

#[tokio::test]
async fn run_command_allows_only_read_only_git() {
    let fx = Fixture::new().await;
    let before = fx.snapshot();
    for argv in [
        json!(["git", "push", "origin", "main"]),
        json!(["git", "commit", "-am", "x"]),
        json!(["git", "-c", "core.pager=touch marker", "log"]),
        json!(["git", "--git-dir=/tmp", "status"]),
        json!(["git"]),
        json!(["git", "diff", "--output=../outside/leak"]),
        json!(["git", "diff", "--out=marker"]),
        json!(["git", "diff", "--no-index", "/etc/passwd", "README.md"]),
        json!(["git", "log", "-pO/etc/passwd"]),
        json!(["git", "show", "--ext-diff"]),
    ] {
        let e = refused(&fx.tools, "run_command", json!({ "argv": argv })).await;
        assert!(
            matches!(e, ToolError::CommandRefused { .. }),
            "{argv}: {e:?}"
        );
    }
    assert_eq!(fx.snapshot(), before);
    let v = fx
        .tools
        .call(
            "run_command",
            &json!({"argv": ["git", "log", "--oneline", "--text", "--no-ext-diff"]}),
        )
        .await
        .unwrap();
    assert_eq!(v["exit_code"], 0, "{v}");
    assert!(v["stdout"].as_str().unwrap().contains("initial"), "{v}");
    let v = fx
        .tools
        .call(
            "run_command",
            &json!({"argv": ["git", "status", "--porcelain"]}),
        )
        .await
        .unwrap();
    assert_eq!(v["stdout"], "");
}

/// Whether `pid` is gone (or a zombie waiting for its reaper).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn run_command_kills_the_process_group_at_its_timeout() {
    let fx = Fixture::with_config(test_config(&["sh", "sleep"])).await;
    let started = Instant::now();
    let v = fx
        .tools
        .call(
            "run_command",
            &json!({
                "argv": ["sh", "-c", "echo $$ > leader.pid; sleep 30 & echo $! > child.pid; wait"],
                "timeout_secs": 1
            }),
        )
        .await
        .unwrap();
    assert_eq!(v["timed_out"], true, "{v}");
    assert_eq!(v["signal"], 9, "{v}");
    assert_eq!(v["exit_code"], Value::Null);
    assert!(started.elapsed() < Duration::from_secs(10));
    for file in ["leader.pid", "child.pid"] {
        let pid: u32 = std::fs::read_to_string(fx.root().join(file))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !process_gone(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(process_gone(pid), "{file} {pid} survived the timeout");
    }
    // A plain sleep past its timeout, too.
    let v = fx
        .tools
        .call(
            "run_command",
            &json!({"argv": ["sleep", "30"], "timeout_secs": 1}),
        )
        .await
        .unwrap();
    assert_eq!(v["timed_out"], true);
}

#[tokio::test]
async fn a_process_escaping_the_group_does_not_stall_the_call() {
    let fx = Fixture::with_config(test_config(&["sh", "setsid", "sleep"])).await;
    let started = Instant::now();
    let v = fx
        .tools
        .call(
            "run_command",
            &json!({"argv": ["sh", "-c", concat!(
                "echo before; ",
                // The escapee writes `ready` only once it has its own session.
                "setsid sh -c 'echo $$ > esc.pid; : > ready; exec sleep 30' & ",
                "while [ ! -e ready ]; do sleep 0.05; done"
            )]}),
        )
        .await
        .unwrap();
    let pid = std::fs::read_to_string(fx.root().join("esc.pid")).unwrap();
    // Clean up the escaped sleep (it left our process group on purpose).
    let _ = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status();
    assert!(started.elapsed() < Duration::from_secs(10), "{v}");
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["stdout"], "before\n");
    assert_eq!(v["stdout_truncated"], true, "the held pipe is reported");
}

#[tokio::test]
async fn run_command_caps_output_and_reports_exit_codes() {
    let mut config = test_config(&["seq", "sh", "env"]);
    config.max_output_bytes = 1000;
    let fx = Fixture::with_config(config).await;
    let v = fx
        .tools
        .call("run_command", &json!({"argv": ["seq", "1", "100000"]}))
        .await
        .unwrap();
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["stdout"].as_str().unwrap().len(), 1000);
    assert!(v["stdout"].as_str().unwrap().starts_with("1\n2\n3\n"));
    assert_eq!(v["stdout_truncated"], true);
    assert_eq!(v["stderr_truncated"], false);
    let v = fx
        .tools
        .call(
            "run_command",
            &json!({"argv": ["sh", "-c", "echo oops >&2; exit 3"]}),
        )
        .await
        .unwrap();
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["stderr"], "oops\n");
    // The environment is cleared but for PATH, HOME (the root) and LANG.
    let v = fx
        .tools
        .call("run_command", &json!({"argv": ["env"]}))
        .await
        .unwrap();
    let stdout = v["stdout"].as_str().unwrap();
    let mut names: Vec<&str> = stdout
        .lines()
        .map(|l| l.split('=').next().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["HOME", "LANG", "PATH"], "{stdout}");
    assert!(
        stdout.contains(&format!("HOME={}\n", fx.root().display())),
        "{stdout}"
    );
}

#[tokio::test]
async fn run_command_arguments_are_checked_naming_the_field() {
    let fx = Fixture::new().await;
    let cases = [
        (json!({}), "argv"),
        (json!({"argv": "git status"}), "argv"),
        (json!({"argv": []}), "argv"),
        (json!({"argv": ["git", 1]}), "argv[1]"),
        (
            json!({"argv": ["git", "status"], "timeout_secs": 0}),
            "timeout_secs",
        ),
        (
            json!({"argv": ["git", "status"], "timeout_secs": 901}),
            "timeout_secs",
        ),
        (
            json!({"argv": ["git", "status"], "timeout_secs": "5"}),
            "timeout_secs",
        ),
        (json!({"argv": ["git", "status"], "shell": true}), "shell"),
    ];
    for (args, field) in cases {
        let e = refused(&fx.tools, "run_command", args.clone()).await;
        assert_eq!(field_of(&e), field, "{args}");
        assert_eq!(e.code().as_str(), "INVALID_ARGUMENTS");
    }
}

// ----------------------------------------------------- arguments, registry

#[tokio::test]
async fn argument_errors_name_the_field() {
    let fx = Fixture::new().await;
    let cases = [
        ("read_file", json!({}), "path"),
        ("read_file", json!({"path": 3}), "path"),
        (
            "read_file",
            json!({"path": "a", "offset_line": 0}),
            "offset_line",
        ),
        (
            "read_file",
            json!({"path": "a", "max_lines": -1}),
            "max_lines",
        ),
        ("read_file", json!({"path": "a", "mode": "rw"}), "mode"),
        ("read_file", json!(["path"]), "(arguments)"),
        ("list_files", json!({"max_depth": 99}), "max_depth"),
        ("list_files", json!({"path": true}), "path"),
        ("search", json!({"path": "src"}), "pattern"),
        ("apply_diff", json!({}), "diff"),
        (
            "apply_diff",
            json!({"diff": "x", "unsafe_paths": true}),
            "unsafe_paths",
        ),
    ];
    for (tool, args, field) in cases {
        let e = refused(&fx.tools, tool, args.clone()).await;
        assert_eq!(field_of(&e), field, "{tool} {args}");
        assert!(e.to_string().contains(field), "{e}");
    }
}

#[tokio::test]
async fn the_registry_lists_schemas_and_refuses_unknown_tools() {
    let fx = Fixture::new().await;
    let schemas = fx.tools.schemas();
    let names: Vec<&str> = schemas
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "read_file",
            "list_files",
            "search",
            "apply_diff",
            "run_command"
        ]
    );
    for s in &schemas {
        assert_eq!(s["input_schema"]["type"], "object");
        assert_eq!(s["input_schema"]["additionalProperties"], false);
        assert!(s["description"].as_str().is_some());
    }
    let e = refused(&fx.tools, "write_file", json!({})).await;
    assert!(
        matches!(&e, ToolError::UnknownTool { name, .. } if name == "write_file"),
        "{e:?}"
    );
    assert!(e.to_string().contains("write_file"));
    assert_eq!(e.to_json()["error"]["code"], "TOOL_NOT_AUTHORIZED");
}

#[test]
fn the_config_refuses_nonsense() {
    assert!(CoderConfig::default().check().is_ok());
    let cases: [(CoderConfig, &str); 6] = [
        (
            CoderConfig {
                max_read_bytes: 0,
                ..CoderConfig::default()
            },
            "max_read_bytes",
        ),
        (
            CoderConfig {
                max_output_bytes: 0,
                ..CoderConfig::default()
            },
            "max_output_bytes",
        ),
        (test_config(&["cargo", ""]), "allowlist"),
        (test_config(&["/bin/sh"]), "allowlist"),
        (
            CoderConfig {
                max_command_timeout: Duration::ZERO,
                ..CoderConfig::default()
            },
            "max_command_timeout",
        ),
        (
            CoderConfig {
                default_command_timeout: Duration::from_secs(1000),
                ..CoderConfig::default()
            },
            "default_command_timeout",
        ),
    ];
    for (config, key) in cases {
        match config.check() {
            Err(CoderError::InvalidConfig { key: k, .. }) => assert_eq!(k, key),
            other => panic!("{key}: {other:?}"),
        }
    }
    let dir = tempfile::tempdir().unwrap();
    assert!(Tools::new(dir.path(), test_config(&["a/b"])).is_err());
}
