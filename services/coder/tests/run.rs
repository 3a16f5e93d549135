//! The coder's loop against a strict stand-in of control and a scripted
//! model: the completed path (patch, summary, one recorded attempt per
//! attempt, a reservation before every turn), and every way a task fails.
#![allow(clippy::unwrap_used)]

mod common;
mod standin;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use genesis_coder::run::{EXIT_BAD_CONFIG, EXIT_TASK_FAILED};
use genesis_coder::{ControlClient, ControlError, Limits, Llm, Outcome, RunConfig, RunError};
use genesis_llm::{
    ChatClient, ChatMessage, ChatRequest, ChatResponse, CredentialRef, FallbackInvoker, LlmError,
    ModelCouple, ProviderFactory, Script, ScriptRule, ScriptedProvider, ScriptedToolCall,
};
use serde_json::{Value, json};
use standin::{Behaviour, Call, TASK, TENANT, TOKEN};

/// The scripted provider, every request it was sent kept.
struct Recording {
    scripted: ScriptedProvider,
    requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait::async_trait]
impl ChatClient for Recording {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        self.scripted.chat(request).await
    }
}

/// Serves every couple with the one recording client.
struct Factory(Arc<Recording>);

impl ProviderFactory for Factory {
    fn client(
        &self,
        _couple: &ModelCouple,
        _credential: Option<&CredentialRef>,
    ) -> Result<Arc<dyn ChatClient>, LlmError> {
        Ok(self.0.clone())
    }
}

/// A script whose turn n emits `turns[n-1]`.
fn script(turns: Vec<Vec<(&str, Value)>>) -> Script {
    Script {
        rules: vec![ScriptRule {
            event: None,
            contains: None,
            objective_contains: None,
            turns: turns
                .into_iter()
                .map(|calls| {
                    calls
                        .into_iter()
                        .map(|(name, arguments)| ScriptedToolCall {
                            name: name.into(),
                            arguments,
                        })
                        .collect()
                })
                .collect(),
            text: None,
        }],
    }
}

fn llm(provider: ScriptedProvider) -> (Llm, Arc<Recording>) {
    let recording = Arc::new(Recording {
        scripted: provider,
        requests: Mutex::new(Vec::new()),
    });
    let llm = Llm {
        invoker: FallbackInvoker::new(Arc::new(Factory(recording.clone()))),
        credentials: Arc::new(HashMap::from([(
            standin::CODER_KEY.to_owned(),
            "sk-coder-test".to_owned(),
        )])),
    };
    (llm, recording)
}

fn config(workdir: &std::path::Path, max_turns: u32) -> RunConfig {
    RunConfig {
        limits: Limits {
            max_turns,
            ..Limits::default()
        },
        workdir: Some(workdir.to_path_buf()),
        ..RunConfig::default()
    }
}

async fn client(url: &str) -> ControlClient {
    ControlClient::connect(url, TOKEN, &genesis_net::ClientTls::default(), TENANT, TASK)
        .await
        .unwrap()
}

const README_DIFF: &str = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n # demo\n-hello world\n+hello coder\n";

#[tokio::test]
async fn a_completed_task_attaches_its_patch_and_summary_and_records_every_attempt() {
    let source = common::source_repo();
    let base = common::git(source.path(), &["rev-parse", "HEAD"]);
    let control = standin::serve(Behaviour::paid(standin::task(
        source.path().to_str().unwrap(),
    )))
    .await;
    let (llm, recording) = llm(ScriptedProvider::with_script(script(vec![
        vec![("apply_diff", json!({"diff": README_DIFF}))],
        vec![(
            "task_complete",
            json!({"summary": "README.md now greets the coder."}),
        )],
    ])));
    let workdir = tempfile::tempdir().unwrap();
    let outcome = genesis_coder::run(
        &client(&control.url).await,
        &llm,
        &config(workdir.path(), 40),
    )
    .await
    .unwrap();

    match &outcome {
        Outcome::Completed {
            summary,
            turns,
            files_changed,
            ..
        } => {
            assert_eq!(summary, "README.md now greets the coder.");
            assert_eq!(*turns, 2);
            assert_eq!(files_changed, &["README.md"]);
        }
        other => panic!("{other:?}"),
    }
    // The patch artifact is the work directory's change, applicable as is.
    let artifacts = control.artifacts();
    assert_eq!(artifacts.len(), 2, "{artifacts:?}");
    let (kind, name, patch) = &artifacts[0];
    assert_eq!((kind.as_str(), name.as_str()), ("patch", "changes.patch"));
    assert!(
        patch.contains("diff --git a/README.md b/README.md"),
        "{patch}"
    );
    assert!(patch.contains("-hello world\n+hello coder\n"), "{patch}");
    let (kind, name, summary) = &artifacts[1];
    assert_eq!((kind.as_str(), name.as_str()), ("summary", "summary.md"));
    assert_eq!(summary, "README.md now greets the coder.");
    // Completed, with the base commit, the turns and the changed files.
    let completes = control.completes();
    assert_eq!(completes.len(), 1);
    let (status, result_summary, result_json) = &completes[0];
    assert_eq!(status, "completed");
    assert_eq!(result_summary, "README.md now greets the coder.");
    let result: Value = serde_json::from_str(result_json).unwrap();
    assert_eq!(result["base_commit"], base.trim());
    assert_eq!(result["turns"], 2);
    assert_eq!(result["patch_bytes"], patch.len());
    assert_eq!(result["files_changed"], json!(["README.md"]));
    // One RecordCoderAttempt per attempt, one invocation id per turn, and a
    // reservation of the chain's models before each turn's attempts.
    let records = control.records();
    assert_eq!(records.len(), 2);
    let prefix = format!("coder-{TASK}-");
    assert!(records[0].0.starts_with(&prefix), "{records:?}");
    assert!(records[0].0.ends_with("-1"), "{records:?}");
    assert_eq!(
        records[1].0,
        format!("{}2", records[0].0.trim_end_matches('1')),
        "the same run, the next turn"
    );
    for (_, attempt) in &records {
        assert_eq!(attempt.outcome, "success");
        assert_eq!(attempt.provider, "anthropic");
        assert_eq!(attempt.requested_model, "claude-opus-4-8");
        assert_eq!(attempt.credential_name, standin::CODER_KEY);
        assert!(attempt.input_tokens > 0);
    }
    let metering: Vec<&str> = control
        .calls()
        .iter()
        .filter_map(|c| match c {
            Call::Reserve { .. } => Some("reserve"),
            Call::Record { .. } => Some("record"),
            _ => None,
        })
        .collect();
    assert_eq!(metering, ["reserve", "record", "reserve", "record"]);
    let reserves: Vec<(Vec<String>, i64, i64)> = control
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Reserve {
                models,
                prompt_tokens,
                max_output_tokens,
            } => Some((models, prompt_tokens, max_output_tokens)),
            _ => None,
        })
        .collect();
    assert_eq!(reserves[0].0, ["claude-opus-4-8"]);
    assert_eq!(reserves[0].2, 4096);
    // The bound covers the request, which grows by the first turn.
    assert!(reserves[1].1 > reserves[0].1, "{reserves:?}");
    let requests = recording.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    let first = genesis_llm::prompt_token_bound(&requests[0]);
    assert_eq!(reserves[0].1, i64::try_from(first).unwrap());
    // The prompt: the coder's, then the chain's overlay; the task as the
    // user's turn; the five tools and the two terminators.
    assert!(requests[0].system.contains("task_complete(summary)"));
    assert!(requests[0].system.ends_with("OVERLAY: prefer small diffs."));
    match &requests[0].messages[0] {
        ChatMessage::User { content } => {
            assert!(content.contains("Greet the coder"), "{content}");
            assert!(content.contains("Change README.md"), "{content}");
        }
        other => panic!("{other:?}"),
    }
    let tools: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        tools,
        [
            "read_file",
            "list_files",
            "search",
            "apply_diff",
            "run_command",
            "task_complete",
            "task_fail"
        ]
    );
    // Progress: the checkout, then each turn that ran tools.
    let progress: Vec<(String, Option<i32>)> = control
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Progress { message, percent } => Some((message, percent)),
            _ => None,
        })
        .collect();
    assert!(progress[0].0.starts_with("checking out "), "{progress:?}");
    assert_eq!(progress[0].1, Some(0));
    assert_eq!(progress[1], ("turn 1: apply_diff".to_string(), Some(2)));
    // The source is untouched and the work directory is gone.
    assert_eq!(
        std::fs::read_to_string(source.path().join("README.md")).unwrap(),
        "# demo\nhello world\n"
    );
    assert_eq!(std::fs::read_dir(workdir.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn a_refused_reservation_fails_the_task_without_calling_the_model() {
    let source = common::source_repo();
    let mut behaviour = Behaviour::paid(standin::task(source.path().to_str().unwrap()));
    behaviour.grant = false;
    let control = standin::serve(behaviour).await;
    let (llm, recording) = llm(ScriptedProvider::with_script(script(vec![vec![(
        "task_complete",
        json!({"summary": "never"}),
    )]])));
    let workdir = tempfile::tempdir().unwrap();
    let outcome = genesis_coder::run(
        &client(&control.url).await,
        &llm,
        &config(workdir.path(), 40),
    )
    .await
    .unwrap();

    let Outcome::Failed { reason } = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(reason.starts_with("weekly credit ceiling: "), "{reason}");
    assert!(reason.contains("limit $25.00"), "{reason}");
    assert_eq!(outcome.exit_code(), EXIT_TASK_FAILED);
    let completes = control.completes();
    assert_eq!(completes.len(), 1);
    assert_eq!(completes[0].0, "failed");
    assert!(
        completes[0].1.contains("weekly credit ceiling"),
        "{completes:?}"
    );
    assert!(recording.requests.lock().unwrap().is_empty());
    assert_eq!(recording.scripted.calls(), 0);
    assert_eq!(control.reserves(), 1);
    assert!(control.records().is_empty());
    assert!(control.artifacts().is_empty());
}

#[tokio::test]
async fn an_unknown_tool_is_refused_back_to_the_model_and_the_loop_goes_on() {
    let source = common::source_repo();
    let control = standin::serve(Behaviour::new(standin::task(
        source.path().to_str().unwrap(),
    )))
    .await;
    let (llm, recording) = llm(ScriptedProvider::with_script(script(vec![
        vec![("make_coffee", json!({"strength": "double"}))],
        vec![("task_complete", json!({"summary": "Nothing to change."}))],
    ])));
    let workdir = tempfile::tempdir().unwrap();
    let outcome = genesis_coder::run(
        &client(&control.url).await,
        &llm,
        &config(workdir.path(), 40),
    )
    .await
    .unwrap();

    assert!(
        matches!(
            &outcome,
            Outcome::Completed {
                turns: 2,
                patch_bytes: 0,
                ..
            }
        ),
        "{outcome:?}"
    );
    // The second request carries the refusal as the call's tool result.
    let requests = recording.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    let Some(ChatMessage::Tool {
        tool_call_id,
        content,
    }) = requests[1].messages.last()
    else {
        panic!("{:?}", requests[1].messages);
    };
    assert_eq!(tool_call_id, "call_1_1");
    let refusal: Value = serde_json::from_str(content).unwrap();
    assert_eq!(refusal["error"]["code"], "TOOL_NOT_AUTHORIZED");
    let message = refusal["error"]["message"].as_str().unwrap();
    assert!(message.contains("make_coffee"), "{message}");
    assert!(message.contains("task_complete"), "{message}");
    // No change: no patch artifact, only the summary.
    let kinds: Vec<String> = control.artifacts().into_iter().map(|a| a.0).collect();
    assert_eq!(kinds, ["summary"]);
    assert_eq!(control.completes()[0].0, "completed");
}

#[tokio::test]
async fn exhausting_the_turns_fails_the_task() {
    let source = common::source_repo();
    let control = standin::serve(Behaviour::paid(standin::task(
        source.path().to_str().unwrap(),
    )))
    .await;
    // Every turn reads a file and never finishes.
    let read = || vec![("read_file", json!({"path": "README.md"}))];
    let (llm, recording) = llm(ScriptedProvider::with_script(script(vec![
        read(),
        read(),
        read(),
        read(),
    ])));
    let workdir = tempfile::tempdir().unwrap();
    let outcome = genesis_coder::run(
        &client(&control.url).await,
        &llm,
        &config(workdir.path(), 3),
    )
    .await
    .unwrap();

    let Outcome::Failed { reason } = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(reason.contains("within 3 turns"), "{reason}");
    assert_eq!(recording.scripted.calls(), 3);
    assert_eq!(control.reserves(), 3);
    assert_eq!(control.records().len(), 3);
    let completes = control.completes();
    assert_eq!(completes.len(), 1);
    assert_eq!(completes[0].0, "failed");
    assert_eq!(
        serde_json::from_str::<Value>(&completes[0].2).unwrap()["turns"],
        3
    );
    // The file's content was fed back as the tool result.
    let requests = recording.requests.lock().unwrap().clone();
    let Some(ChatMessage::Tool { content, .. }) = requests[1].messages.last() else {
        panic!("{:?}", requests[1].messages);
    };
    assert!(content.contains("hello world"), "{content}");
}

#[tokio::test]
async fn a_failing_model_fails_the_task_and_its_failed_attempt_is_recorded() {
    let source = common::source_repo();
    let control = standin::serve(Behaviour::new(standin::task(
        source.path().to_str().unwrap(),
    )))
    .await;
    let (llm, _recording) = llm(ScriptedProvider::new().fail_always(true));
    let workdir = tempfile::tempdir().unwrap();
    let outcome = genesis_coder::run(
        &client(&control.url).await,
        &llm,
        &config(workdir.path(), 40),
    )
    .await
    .unwrap();

    let Outcome::Failed { reason } = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(reason.starts_with("LLM call failed"), "{reason}");
    let records = control.records();
    assert!(!records.is_empty());
    for (invocation, attempt) in &records {
        // Every attempt of the one call under the one invocation id.
        assert_eq!(invocation, &records[0].0);
        assert!(invocation.starts_with(&format!("coder-{TASK}-")) && invocation.ends_with("-1"));
        assert_eq!(attempt.outcome, "server_error");
        assert!(!attempt.error_message.is_empty());
    }
    assert_eq!(control.completes()[0].0, "failed");
}

#[tokio::test]
async fn the_model_giving_up_fails_the_task_with_its_reason() {
    let source = common::source_repo();
    let control = standin::serve(Behaviour::new(standin::task(
        source.path().to_str().unwrap(),
    )))
    .await;
    let (llm, _) = llm(ScriptedProvider::with_script(script(vec![vec![(
        "task_fail",
        json!({"reason": "the repository has no tests to run"}),
    )]])));
    let workdir = tempfile::tempdir().unwrap();
    let outcome = genesis_coder::run(
        &client(&control.url).await,
        &llm,
        &config(workdir.path(), 40),
    )
    .await
    .unwrap();

    assert_eq!(
        outcome,
        Outcome::Failed {
            reason: "the model gave up: the repository has no tests to run".into()
        }
    );
    let completes = control.completes();
    assert_eq!(completes.len(), 1);
    assert_eq!(completes[0].0, "failed");
    assert!(control.artifacts().is_empty());
}

#[tokio::test]
async fn a_checkout_error_fails_the_task_before_any_model_call() {
    let control = standin::serve(Behaviour::new(standin::task("/definitely/not/here"))).await;
    let (llm, recording) = llm(ScriptedProvider::new());
    let workdir = tempfile::tempdir().unwrap();
    let outcome = genesis_coder::run(
        &client(&control.url).await,
        &llm,
        &config(workdir.path(), 40),
    )
    .await
    .unwrap();

    let Outcome::Failed { reason } = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(reason.starts_with("checkout failed: "), "{reason}");
    assert_eq!(recording.scripted.calls(), 0);
    assert!(!control.calls().iter().any(|c| matches!(c, Call::Chain)));
    assert_eq!(control.reserves(), 0);
    assert_eq!(control.completes()[0].0, "failed");
}

#[tokio::test]
async fn a_task_settled_by_an_operator_is_not_completed_twice() {
    let source = common::source_repo();
    let mut behaviour = Behaviour::new(standin::task(source.path().to_str().unwrap()));
    behaviour.operator_settles = true;
    let control = standin::serve(behaviour).await;
    let (llm, _) = llm(ScriptedProvider::with_script(script(vec![vec![(
        "task_complete",
        json!({"summary": "done"}),
    )]])));
    let workdir = tempfile::tempdir().unwrap();
    let outcome = genesis_coder::run(
        &client(&control.url).await,
        &llm,
        &config(workdir.path(), 40),
    )
    .await
    .unwrap();

    assert!(
        matches!(&outcome, Outcome::SettledElsewhere { detail } if detail.contains("FailedPrecondition")),
        "{outcome:?}"
    );
    assert_eq!(outcome.exit_code(), EXIT_TASK_FAILED);
    // Refused once, never retried, and not failed afterwards either.
    assert_eq!(control.completes().len(), 1);
}

#[tokio::test]
async fn a_wrong_token_or_task_is_a_configuration_error_and_writes_nothing() {
    let source = common::source_repo();
    let control = standin::serve(Behaviour::new(standin::task(
        source.path().to_str().unwrap(),
    )))
    .await;
    let (llm, recording) = llm(ScriptedProvider::new());
    let workdir = tempfile::tempdir().unwrap();
    let tls = genesis_net::ClientTls::default();

    let wrong_token = ControlClient::connect(&control.url, "gct_wrong", &tls, TENANT, TASK)
        .await
        .unwrap();
    let err = genesis_coder::run(&wrong_token, &llm, &config(workdir.path(), 40))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::Control(e) if e.code() == Some(tonic::Code::Unauthenticated)),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), EXIT_BAD_CONFIG);
    assert!(!err.to_string().contains("gct_wrong"), "{err}");

    let other_task = ControlClient::connect(
        &control.url,
        TOKEN,
        &tls,
        TENANT,
        "00000000-0000-0000-0000-0000000000bb",
    )
    .await
    .unwrap();
    let err = genesis_coder::run(&other_task, &llm, &config(workdir.path(), 40))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::Control(e) if e.code() == Some(tonic::Code::PermissionDenied)),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), EXIT_BAD_CONFIG);
    assert!(control.calls().is_empty(), "{:?}", control.calls());
    assert_eq!(recording.scripted.calls(), 0);
}

#[tokio::test]
async fn the_stand_in_refuses_unknown_kinds_and_a_second_completion() {
    let control = standin::serve(Behaviour::new(standin::task("/nowhere"))).await;
    let client = client(&control.url).await;
    let err = client
        .attach_artifact("screenshot", "a.png", "x".into())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(tonic::Code::InvalidArgument));
    client
        .complete_task("failed", "first", "{}".into())
        .await
        .unwrap();
    let err = client
        .complete_task("completed", "second", "{}".into())
        .await
        .unwrap_err();
    assert!(err.is_settled(), "{err:?}");
    let err = client.report_progress("late", Some(50)).await.unwrap_err();
    assert!(matches!(err, ControlError::Rpc { .. }) && err.is_settled());
}

#[tokio::test]
async fn a_dry_run_reads_the_task_and_chain_and_writes_nothing() {
    let source = common::source_repo();
    let mut behaviour = Behaviour::new(standin::task(source.path().to_str().unwrap()));
    behaviour.chain.preset_id = "11111111-1111-1111-1111-111111111111".into();
    behaviour.chain.preset_name = "Coders".into();
    behaviour.chain.couples.insert(
        0,
        genesis_proto::v1::PresetCouple {
            model: "claude-opus-4-8".into(),
            provider: "anthropic".into(),
            backend: "api".into(),
            credential_names: vec![
                "ANTHROPIC_API_KEY".into(),
                "ANTHROPIC_SPARE_KEY".into(),
                "GENESIS_CODER_TOKEN".into(),
            ],
        },
    );
    let control = standin::serve(behaviour).await;
    let credentials: HashMap<String, String> =
        [("ANTHROPIC_API_KEY".to_string(), "sk-ant-secret".to_string())].into();
    let workdir = tempfile::tempdir().unwrap();
    let plan = genesis_coder::dry_run(
        &client(&control.url).await,
        &credentials,
        &config(workdir.path(), 12),
    )
    .await
    .unwrap();

    assert_eq!(control.calls(), [Call::GetTask, Call::Chain]);
    assert_eq!(std::fs::read_dir(workdir.path()).unwrap().count(), 0);
    let text = plan.to_string();
    assert!(text.contains("Greet the coder"), "{text}");
    assert!(text.contains("at main"), "{text}");
    assert!(text.contains("preset Coders"), "{text}");
    assert!(
        text.contains("anthropic/claude-opus-4-8@api [ANTHROPIC_API_KEY: resolves, ANTHROPIC_SPARE_KEY: missing, GENESIS_CODER_TOKEN: never a provider key]"),
        "{text}"
    );
    assert!(
        text.contains("scripted/scripted-1@api (no credential"),
        "{text}"
    );
    assert!(
        text.contains("would call: Coders (anthropic/claude-opus-4-8 → scripted/scripted-1)"),
        "{text}"
    );
    assert!(text.contains("apply_diff"), "{text}");
    assert!(text.contains("max 12 turns, 4096 output tokens"), "{text}");
    assert!(!text.contains("sk-ant-secret"), "{text}");
}

#[tokio::test]
async fn the_wall_time_limit_fails_the_task() {
    let source = common::source_repo();
    let control = standin::serve(Behaviour::new(standin::task(
        source.path().to_str().unwrap(),
    )))
    .await;
    // The model takes longer than the whole run may.
    let (llm, _) = llm(ScriptedProvider::with_script(script(vec![vec![(
        "task_complete",
        json!({"summary": "too late"}),
    )]]))
    .with_latency(std::time::Duration::from_secs(30)));
    let workdir = tempfile::tempdir().unwrap();
    let mut config = config(workdir.path(), 40);
    config.limits.timeout = std::time::Duration::from_secs(1);
    let started = std::time::Instant::now();
    let outcome = genesis_coder::run(&client(&control.url).await, &llm, &config)
        .await
        .unwrap();

    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(
        outcome,
        Outcome::Failed {
            reason: "timed out after 1 s (--timeout-secs)".into()
        }
    );
    let completes = control.completes();
    assert_eq!(completes.len(), 1);
    assert_eq!(completes[0].0, "failed");
    assert!(control.artifacts().is_empty());
    assert_eq!(std::fs::read_dir(workdir.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn a_password_in_the_repository_url_never_reaches_control() {
    // Nothing listens there: the clone fails at once.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let repository = format!("https://coder:hunter2@127.0.0.1:{port}/repo.git");
    let control = standin::serve(Behaviour::new(standin::task(&repository))).await;
    let (llm, _) = llm(ScriptedProvider::new());
    let workdir = tempfile::tempdir().unwrap();
    let outcome = genesis_coder::run(
        &client(&control.url).await,
        &llm,
        &config(workdir.path(), 40),
    )
    .await
    .unwrap();

    assert!(
        matches!(&outcome, Outcome::Failed { reason } if reason.starts_with("checkout failed")),
        "{outcome:?}"
    );
    let calls = control.calls();
    assert!(
        calls.iter().any(|c| matches!(c, Call::Progress { message, .. } if message.contains("coder:***@127.0.0.1"))),
        "{calls:?}"
    );
    assert!(!format!("{calls:?}").contains("hunter2"), "{calls:?}");
    assert!(!format!("{outcome:?}").contains("hunter2"), "{outcome:?}");
}

#[tokio::test]
async fn a_second_run_of_the_same_task_records_under_new_invocation_ids() {
    let source = common::source_repo();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let control = standin::serve(Behaviour::new(standin::task(
            source.path().to_str().unwrap(),
        )))
        .await;
        let (llm, _) = llm(ScriptedProvider::with_script(script(vec![vec![(
            "task_complete",
            json!({"summary": "done"}),
        )]])));
        let workdir = tempfile::tempdir().unwrap();
        genesis_coder::run(
            &client(&control.url).await,
            &llm,
            &config(workdir.path(), 40),
        )
        .await
        .unwrap();
        let records = control.records();
        assert_eq!(records.len(), 1);
        ids.push(records[0].0.clone());
    }
    assert_ne!(ids[0], ids[1]);
}

/// A task without a repository starts from an empty work directory, and
/// the offline script ends it as done having written nothing: what the
/// demo and the kind suite run.
#[tokio::test]
async fn an_offline_run_without_a_repository_completes_with_no_patch() {
    let control = standin::serve(Behaviour::new(standin::task(""))).await;
    let (llm, recording) = llm(ScriptedProvider::with_script(
        genesis_coder::run::offline_script(),
    ));
    let workdir = tempfile::tempdir().unwrap();
    let outcome = genesis_coder::run(
        &client(&control.url).await,
        &llm,
        &config(workdir.path(), 40),
    )
    .await
    .unwrap();
    match &outcome {
        Outcome::Completed {
            turns,
            files_changed,
            summary,
            ..
        } => {
            assert_eq!(*turns, 1);
            assert!(files_changed.is_empty(), "{files_changed:?}");
            assert!(summary.contains("no change was made"), "{summary}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(recording.requests.lock().unwrap().len(), 1);
    // A chain of the free scripted provider holds no credit.
    assert_eq!(control.reserves(), 0);
    assert_eq!(control.records().len(), 1, "its attempt is still recorded");
    // Only the summary: an empty patch is not attached.
    let artifacts = control.artifacts();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    assert_eq!(artifacts[0].0, "summary");
    let completes = control.completes();
    assert_eq!(completes.len(), 1);
    assert_eq!(completes[0].0, "completed");
}
