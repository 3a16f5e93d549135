//! The scripted provider's default script per event kind, configurable
//! rules, failure mode, latency and call counting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use genesis_llm::{
    ChatClient, ChatMessage, ChatRequest, ChatResponse, LlmError, Script, ScriptError,
    ScriptedProvider, StopReason,
};
use serde_json::json;

fn request(first_user: &str) -> ChatRequest {
    ChatRequest {
        model: "scripted-1".into(),
        system: "You are the SOA.".into(),
        messages: vec![ChatMessage::user(first_user)].into(),
        tools: Vec::new().into(),
        max_output_tokens: 512,
        temperature: None,
    }
}

/// Append the response as the assistant turn and answer each tool call with
/// `result`, as the planning loop does.
fn continue_with(mut req: ChatRequest, resp: &ChatResponse, result: &str) -> ChatRequest {
    let mut messages = req.messages.to_vec();
    messages.push(ChatMessage::assistant(
        resp.text.clone(),
        resp.tool_calls.clone(),
    ));
    for call in &resp.tool_calls {
        messages.push(ChatMessage::tool(call.id.clone(), result));
    }
    req.messages = messages.into();
    req
}

fn names(resp: &ChatResponse) -> Vec<&str> {
    resp.tool_calls.iter().map(|c| c.name.as_str()).collect()
}

#[tokio::test]
async fn agent_initialized_greets_then_completes() {
    let p = ScriptedProvider::new();
    let req = request("EVENT: AgentInitialized\nSurvey the tenant.");
    let turn1 = p.chat(req.clone()).await.expect("turn 1");
    assert_eq!(names(&turn1), ["soa_send_message"]);
    let message = turn1.tool_calls[0].arguments["body"]
        .as_str()
        .expect("body");
    assert!(message.starts_with("Hello"), "{message}");
    assert_eq!(turn1.served_model, "scripted-1");
    assert_eq!(turn1.stop_reason, StopReason::ToolUse);
    assert_eq!(turn1.tool_calls[0].id, "call_1_1");

    let turn2 = p
        .chat(continue_with(req, &turn1, r#"{"ok":true}"#))
        .await
        .expect("turn 2");
    assert_eq!(names(&turn2), ["phase_complete"]);
    assert_eq!(p.calls(), 2);
}

#[tokio::test]
async fn operator_message_gets_a_reply_quoting_the_text() {
    let p = ScriptedProvider::new();
    let req =
        request("EVENT: OperatorMessage\nOPERATOR_MESSAGE: How is the billing migration going?");
    let turn1 = p.chat(req.clone()).await.expect("turn 1");
    assert_eq!(names(&turn1), ["soa_send_message"]);
    let message = turn1.tool_calls[0].arguments["body"]
        .as_str()
        .expect("body");
    assert!(
        message.contains("How is the billing migration going?"),
        "{message}"
    );
    let turn2 = p
        .chat(continue_with(req, &turn1, "{}"))
        .await
        .expect("turn 2");
    assert_eq!(names(&turn2), ["phase_complete"]);
}

#[tokio::test]
async fn operator_text_falls_back_to_a_quoted_span() {
    let p = ScriptedProvider::new();
    let resp = p
        .chat(request(
            "EVENT: OperatorMessage\nThe operator wrote \"ship it friday\" just now.",
        ))
        .await
        .expect("turn 1");
    let message = resp.tool_calls[0].arguments["body"].as_str().expect("body");
    assert!(message.contains("ship it friday"), "{message}");
}

#[tokio::test]
async fn operator_asking_to_escalate_gets_a_decision_proposal() {
    let p = ScriptedProvider::new();
    for text in [
        "Please ESCALATE the vendor choice",
        "you decide which region",
    ] {
        let req = request(&format!("EVENT: OperatorMessage\nOPERATOR_MESSAGE: {text}"));
        let turn1 = p.chat(req.clone()).await.expect("turn 1");
        assert_eq!(names(&turn1), ["soa_propose_decision"], "for {text}");
        let args = &turn1.tool_calls[0].arguments;
        assert!(args["title"].as_str().expect("title").contains(text));
        assert_eq!(args["options"].as_array().expect("options").len(), 3);
        let turn2 = p
            .chat(continue_with(req, &turn1, "{}"))
            .await
            .expect("turn 2");
        assert_eq!(names(&turn2), ["phase_complete"]);
    }
}

#[tokio::test]
async fn escalate_in_the_instructions_alone_does_not_escalate() {
    // The planning prompt may say "decide" or "escalate"; only the operator's
    // own words select the decision rule.
    let p = ScriptedProvider::new();
    let resp = p
        .chat(request(
            "EVENT: OperatorMessage\nDecide what to do; escalate only if needed.\nOPERATOR_MESSAGE: hello there",
        ))
        .await
        .expect("turn 1");
    assert_eq!(names(&resp), ["soa_send_message"]);
}

#[tokio::test]
async fn answered_escalation_is_acknowledged() {
    let p = ScriptedProvider::new();
    let req = request("EVENT: OperatorAnsweredEscalation\nRESOLUTION: Approve; use eu-west-1");
    let turn1 = p.chat(req.clone()).await.expect("turn 1");
    assert_eq!(names(&turn1), ["soa_send_message"]);
    let message = turn1.tool_calls[0].arguments["body"]
        .as_str()
        .expect("body");
    assert!(message.contains("Approve; use eu-west-1"), "{message}");
    let turn2 = p
        .chat(continue_with(req, &turn1, "{}"))
        .await
        .expect("turn 2");
    assert_eq!(names(&turn2), ["phase_complete"]);
}

#[tokio::test]
async fn agent_tick_only_completes() {
    let p = ScriptedProvider::new();
    for event in ["AgentTick", "MissionStateChanged", "DependencyCompleted"] {
        let resp = p
            .chat(request(&format!("EVENT: {event}\nBaseline.")))
            .await
            .expect("tick");
        assert_eq!(names(&resp), ["phase_complete"], "for {event}");
    }
}

#[tokio::test]
async fn blocked_tool_result_makes_it_reconsider() {
    let p = ScriptedProvider::new();
    let req = request("EVENT: OperatorMessage\nOPERATOR_MESSAGE: tell everyone the password");
    let turn1 = p.chat(req.clone()).await.expect("turn 1");
    let blocked = r#"{"blockedReason":"constitution violation","violations":["no secrets"]}"#;
    let turn2 = p
        .chat(continue_with(req, &turn1, blocked))
        .await
        .expect("turn 2");
    assert_eq!(names(&turn2), ["phase_complete"]);
    let note = turn2.tool_calls[0].arguments["note"]
        .as_str()
        .expect("note");
    assert!(note.contains("constitution violation"), "{note}");
}

#[tokio::test]
async fn configured_script_matches_event_and_substring_per_turn() {
    let script = Script::from_json(
        &json!({
            "rules": [
                {"event": "OperatorMessage", "contains": "deploy",
                 "turns": [
                    [{"name": "soa_query_telemetry", "arguments": {"window": "24h"}},
                     {"name": "agent_query_memory", "arguments": {"q": "{{operator_text}}"}}],
                    [{"name": "soa_propose_task", "arguments": {"title": "Deploy (turn {{turn}})"}}]
                 ]},
                {"event": "OperatorMessage",
                 "turns": [[{"name": "soa_send_message", "arguments": {"body": "generic"}}]]}
            ]
        })
        .to_string(),
    )
    .expect("script");
    let p = ScriptedProvider::with_script(script);
    let req = request("EVENT: OperatorMessage\nOPERATOR_MESSAGE: please Deploy v2");
    let t1 = p.chat(req.clone()).await.expect("t1");
    assert_eq!(names(&t1), ["soa_query_telemetry", "agent_query_memory"]);
    assert_eq!(t1.tool_calls[1].arguments["q"], "please Deploy v2");
    assert_eq!(t1.tool_calls[1].id, "call_1_2");
    let req = continue_with(req, &t1, "{}");
    let t2 = p.chat(req.clone()).await.expect("t2");
    assert_eq!(names(&t2), ["soa_propose_task"]);
    assert_eq!(t2.tool_calls[0].arguments["title"], "Deploy (turn 2)");
    let t3 = p.chat(continue_with(req, &t2, "{}")).await.expect("t3");
    assert_eq!(
        names(&t3),
        ["phase_complete"],
        "past the script the episode ends"
    );

    let other = p
        .chat(request("EVENT: OperatorMessage\nOPERATOR_MESSAGE: hi"))
        .await
        .expect("generic");
    assert_eq!(other.tool_calls[0].arguments["body"], "generic");
    let unmatched = p
        .chat(request("EVENT: AgentTick"))
        .await
        .expect("unmatched");
    assert_eq!(names(&unmatched), ["phase_complete"]);
}

/// `contains` searches the operator's text when there is one and the whole
/// first message otherwise; `objective_contains` always searches the whole
/// first message. Both ignore case on either side.
#[tokio::test]
async fn substring_rules_ignore_case_and_search_the_right_text() {
    let script = Script::from_json(
        &json!({
            "rules": [
                {"objective_contains": "mode: MISSION", "contains": "Ship",
                 "turns": [[{"name": "soa_send_message", "arguments": {"body": "mission ship"}}]]},
                {"contains": "URGENT",
                 "turns": [[{"name": "soa_send_message", "arguments": {"body": "urgent"}}]]}
            ]
        })
        .to_string(),
    )
    .expect("script");
    let p = ScriptedProvider::with_script(script);
    // Which rule answered: its message's body, or the tool's name when the
    // call has no body (the catch-all phase_complete).
    let first_tool = |r: ChatResponse| {
        r.tool_calls.first().map(|c| {
            c.arguments
                .get("body")
                .cloned()
                .unwrap_or(c.name.clone().into())
        })
    };
    let answer = |first_user: &'static str| {
        let call = p.chat(request(first_user));
        async move { first_tool(call.await.expect(first_user)) }
    };

    let both = "MODE: Mission\nEVENT: OperatorMessage\nOPERATOR_MESSAGE: please SHIP it";
    assert_eq!(answer(both).await, Some(json!("mission ship")));

    // The objective matches but "ship" is outside the operator's text, which
    // is the only text `contains` searches when there is one.
    let outside = "MODE: Mission ship\nEVENT: OperatorMessage\nOPERATOR_MESSAGE: urgent";
    assert_eq!(answer(outside).await, Some(json!("urgent")));

    // No operator text: `contains` falls back to the whole first message.
    let fallback = "EVENT: ExternalSignalReceived\nsignal: Urgent rollout";
    assert_eq!(answer(fallback).await, Some(json!("urgent")));

    let none = "MODE: Redact\nEVENT: ExternalSignalReceived";
    assert_eq!(answer(none).await, Some(json!("phase_complete")));
}

#[test]
fn bad_scripts_are_rejected() {
    assert!(matches!(
        Script::from_json("{\"rules\": 3}"),
        Err(ScriptError::Parse(_))
    ));
    let err = Script::from_json(r#"{"rules":[{"turns":[[{"name":"x","arguments":[1]}]]}]}"#)
        .expect_err("array arguments");
    assert!(
        matches!(err, ScriptError::InvalidRule { index: 0, .. }),
        "{err}"
    );
    let err = Script::from_json(r#"{"rules":[{},{"turns":[[{"name":" "}]]}]}"#);
    assert!(err.is_err());
}

#[tokio::test]
async fn usage_is_about_a_quarter_of_the_characters() {
    let p = ScriptedProvider::new();
    let text = format!("EVENT: AgentTick\n{}", "x".repeat(400));
    let req = request(&text);
    let chars = req.system.len() + text.len();
    let resp = p.chat(req).await.expect("tick");
    assert_eq!(resp.usage.input_tokens, (chars as u64).div_ceil(4));
    assert!(resp.usage.output_tokens > 0);
}

#[tokio::test]
async fn same_request_same_response() {
    let p = ScriptedProvider::new();
    let req = request("EVENT: OperatorMessage\nOPERATOR_MESSAGE: status?");
    assert_eq!(
        p.chat(req.clone()).await.expect("a"),
        p.chat(req).await.expect("b")
    );
}

#[tokio::test]
async fn fail_always_fails_with_a_failover_error_and_counts() {
    let p = ScriptedProvider::new().fail_always(true);
    let err = p
        .chat(request("EVENT: AgentTick"))
        .await
        .expect_err("fails");
    assert_eq!(err, LlmError::Server { status: 503 });
    assert!(err.is_failover());
    assert_eq!(p.calls(), 1);
}

#[tokio::test]
async fn invalid_request_is_refused() {
    let p = ScriptedProvider::new();
    let mut req = request("EVENT: AgentTick");
    req.max_output_tokens = 0;
    let err = p.chat(req).await.expect_err("invalid");
    assert_eq!(
        err,
        LlmError::InvalidRequest {
            detail: "max_output_tokens must be > 0".into()
        }
    );
}

#[tokio::test]
async fn latency_knob_delays_each_call() {
    let p = ScriptedProvider::new().with_latency(Duration::from_millis(120));
    let start = Instant::now();
    p.chat(request("EVENT: AgentTick")).await.expect("tick");
    assert!(start.elapsed() >= Duration::from_millis(120));
    let fast = ScriptedProvider::new();
    let start = Instant::now();
    fast.chat(request("EVENT: AgentTick")).await.expect("tick");
    assert!(
        start.elapsed() < Duration::from_millis(100),
        "zero think time by default"
    );
}

#[tokio::test]
async fn concurrent_calls_are_all_counted() {
    let p = Arc::new(ScriptedProvider::new());
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            p.chat(request("EVENT: AgentTick")).await.expect("tick")
        }));
    }
    for t in tasks {
        t.await.expect("join");
    }
    assert_eq!(p.calls(), 16);
}

#[tokio::test]
async fn a_mission_told_to_ask_asks_the_operator_and_resumes_without_messaging() {
    let p = ScriptedProvider::new();
    let ask = request(
        "EVENT: OperatorMessage\nOPERATOR_MESSAGE: ask which region ships first\nMODE: Mission",
    );
    let turn1 = p.chat(ask.clone()).await.expect("turn 1");
    assert_eq!(names(&turn1), ["mission_ask_user"]);
    assert_eq!(
        turn1.tool_calls[0].arguments["question"],
        "ask which region ships first"
    );
    let turn2 = p
        .chat(continue_with(ask, &turn1, r#"{"status":"open"}"#))
        .await
        .expect("turn 2");
    assert_eq!(names(&turn2), ["phase_complete"]);

    let resumed = request(
        "EVENT: OperatorAnsweredEscalation\nRESOLUTION: EU first\nREFINEMENT GUIDANCE: EU first\nMODE: Mission",
    );
    let turn = p.chat(resumed).await.expect("resume");
    assert_eq!(names(&turn), ["phase_complete"]);
    assert!(
        turn.tool_calls[0].arguments["summary"]
            .as_str()
            .is_some_and(|s| s.contains("EU first"))
    );

    // The same message to the SOA is an ordinary reply, never a mission question.
    let soa = request(
        "EVENT: OperatorMessage\nOPERATOR_MESSAGE: ask which region ships first\nMODE: Strategic",
    );
    assert_eq!(
        names(&p.chat(soa).await.expect("soa")),
        ["soa_send_message"]
    );
}

#[tokio::test]
async fn the_prompt_engineer_proposes_on_a_signal_and_never_greets_or_chats() {
    let p = ScriptedProvider::new();
    let signal = request("EVENT: ExternalSignalReceived\nMODE: Redact");
    let turn1 = p.chat(signal.clone()).await.expect("turn 1");
    assert_eq!(names(&turn1), ["redactor_propose_overlay"]);
    assert!(
        turn1.tool_calls[0]
            .arguments
            .get("redactedOverlay")
            .is_none(),
        "the scripted redactor proposes the detector-masked overlay as it is"
    );
    let turn2 = p
        .chat(continue_with(signal, &turn1, r#"{"status":"open"}"#))
        .await
        .expect("turn 2");
    assert_eq!(names(&turn2), ["phase_complete"]);

    for event in [
        "AgentInitialized",
        "OperatorAnsweredEscalation\nRESOLUTION: approved",
        "AgentTick",
    ] {
        let turn = p
            .chat(request(&format!("EVENT: {event}\nMODE: Redact")))
            .await
            .expect("turn");
        assert_eq!(names(&turn), ["phase_complete"], "{event}");
    }
    // The same signal to the SOA is not a redaction.
    let soa = p
        .chat(request("EVENT: ExternalSignalReceived\nMODE: Strategic"))
        .await
        .expect("soa");
    assert_eq!(names(&soa), ["phase_complete"]);
}
