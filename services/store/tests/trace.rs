//! An episode trace read on a real PostgreSQL: a completed ledger turn with
//! its journal (three LLM turns, the second with a fallback, and a tool
//! call, appended through the journal's own API) and its snapshot's priced
//! attempts, read in one tenant transaction; another tenant's read is
//! `NotFound` like a missing turn's; a turn whose journal was pruned is
//! still read, with no steps.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::time::Duration;

use chrono::Utc;
use common::*;
use genesis_core::journal::JournalKind;
use genesis_core::{AgentDecisionKind, AgentEventKind, Phase};
use genesis_store::journal::NewStep;
use genesis_store::llm::{CreditDraw, NewCallAttempt};
use genesis_store::{LedgerAction, Store, StoreError, TickClaim, TickCompletion};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

const CAP: u32 = 64 * 1024;
const INVOCATION: &str = "inv-trace-1";

/// One attempt as a journal turn holds it.
#[derive(Clone)]
struct Attempt {
    provider: &'static str,
    model: &'static str,
    outcome: &'static str,
    error: Option<&'static str>,
}

impl Attempt {
    fn served(&self) -> &'static str {
        if self.error.is_some() { "" } else { self.model }
    }

    fn tokens(&self) -> (u64, u64) {
        if self.error.is_some() {
            (0, 0)
        } else {
            (100, 20)
        }
    }

    fn json(&self) -> serde_json::Value {
        let (input, output) = self.tokens();
        let mut a = json!({
            "provider": self.provider,
            "credential_name": format!("{}-key", self.provider),
            "requested_model": self.model,
            "served_model": self.served(),
            "outcome": self.outcome,
            "latency_ms": 40,
            "usage": {"input_tokens": input, "output_tokens": output},
        });
        if let Some(e) = self.error {
            a["error"] = json!(e);
        }
        a
    }
}

/// An LLM turn step (genesis-core's `LlmTurnStep` as stored).
fn turn(n: u32, attempts: &[Attempt], messages: Vec<serde_json::Value>) -> serde_json::Value {
    let served = attempts.last().map(Attempt::served).unwrap_or_default();
    let mut request = json!({
        "model": "claude-opus-4-8",
        "messages": messages,
        "tools": ["soa_send_message"],
        "max_output_tokens": 1024,
    });
    if n == 1 {
        request["system"] = json!("You are the SOA.");
    }
    let mut response = json!({
        "tool_calls": if n == 1 {
            json!([{"id": "call-1", "name": "soa_send_message", "arguments": {"message": "hello"}}])
        } else {
            json!([])
        },
        "served_model": served,
        "stop_reason": if n == 1 { "tool_use" } else { "end_turn" },
        "usage": {"input_tokens": 100, "output_tokens": 20},
    });
    if n == 3 {
        response["text"] = json!("Done.");
    }
    json!({
        "turn": n,
        "invocation_id": INVOCATION,
        "request": request,
        "response": response,
        "attempts": attempts.iter().map(Attempt::json).collect::<Vec<_>>(),
    })
}

/// The attempts of the episode, as the journal turns hold them: one, then
/// a failed one and its fallback, then one.
fn episode_attempts() -> Vec<Vec<Attempt>> {
    let ok = Attempt {
        provider: "anthropic",
        model: "claude-opus-4-8",
        outcome: "success",
        error: None,
    };
    vec![
        vec![ok.clone()],
        vec![
            Attempt {
                outcome: "server_error",
                error: Some("HTTP 529 overloaded"),
                ..ok.clone()
            },
            Attempt {
                provider: "openai",
                model: "gpt-5",
                ..ok.clone()
            },
        ],
        vec![ok],
    ]
}

/// Record the priced attempts, journal the three turns and the tool call,
/// and complete the turn linked to the snapshot; the snapshot's id.
async fn seed_episode(store: &Store, t: Uuid, c: &TickClaim) -> anyhow::Result<Uuid> {
    let draw = CreditDraw {
        week_start: genesis_store::credit::week_start(Utc::now()),
        limit_usd: 60.0,
    };
    let costs = [0.01, 0.0, 0.02, 0.03];
    let mut snapshot = None;
    for (a, cost) in episode_attempts().iter().flatten().zip(costs) {
        let recorded = store
            .llm()
            .record_call_attempt(
                t,
                &NewCallAttempt {
                    instance_id: c.instance.id,
                    session: c.session,
                    invocation_id: INVOCATION.into(),
                    site_id: "Agent:Planning".into(),
                    requested_model: a.model.into(),
                    served_model: a.served().into(),
                    provider: a.provider.into(),
                    credential_name: format!("{}-key", a.provider),
                    outcome: a.outcome.into(),
                    input_tokens: i64::try_from(a.tokens().0)?,
                    output_tokens: i64::try_from(a.tokens().1)?,
                    cache_read_tokens: 0,
                    cache_write_tokens: 0,
                    latency_ms: 40,
                    error_message: a.error.unwrap_or_default().into(),
                    cost_usd: cost,
                    priced_as: None,
                    pricing_source: None,
                    prompt_overlay_sha256: None,
                },
                draw,
            )
            .await?;
        snapshot = Some(recorded.snapshot.id);
    }
    let snapshot = snapshot.ok_or_else(|| anyhow::anyhow!("no attempt recorded"))?;
    let attempts = episode_attempts();
    let steps: Vec<(JournalKind, serde_json::Value)> = vec![
        (
            JournalKind::LlmTurn,
            turn(
                1,
                &attempts[0],
                vec![json!({"role": "user", "content": "Say hello to the operator."})],
            ),
        ),
        (
            JournalKind::ToolCall,
            json!({
                "call_id": format!("{INVOCATION}:1:call-1"),
                "tool_name": "soa_send_message",
                "arguments": {"message": "hello"},
                "result": {"ok": true},
                "side_effecting": true,
                "blocked": false,
            }),
        ),
        (
            JournalKind::LlmTurn,
            turn(
                2,
                &attempts[1],
                vec![json!({"role": "tool", "tool_call_id": "call-1", "content": "{\"ok\":true}"})],
            ),
        ),
        (
            JournalKind::LlmTurn,
            turn(
                3,
                &attempts[2],
                vec![json!({"role": "user", "content": "Anything else?"})],
            ),
        ),
    ];
    for (kind, entry) in &steps {
        store
            .journal()
            .append(
                t,
                NewStep {
                    event_id: c.event.id,
                    instance_id: c.instance.id,
                    session: c.session,
                    kind: *kind,
                    entry,
                },
                CAP,
            )
            .await?;
    }
    let mut completion = TickCompletion::new(
        c.event.id,
        derived(AgentDecisionKind::ActedWithTool, Phase::Idle, true),
    );
    completion.actions = vec![LedgerAction {
        tool_name: "soa_send_message".into(),
        arguments: json!({"message": "hello"}),
        result: Some(json!({"ok": true})),
        side_effecting: true,
        blocked: false,
    }];
    completion.reasoning_summary = Some("greeted the operator".into());
    completion.decision_payload = json!({
        "actions": [{"tool": "soa_send_message"}],
        "reasoningSummary": "greeted the operator",
        "activeMode": "default",
        "completion": "completed",
        "consumption": {"tokens": 360, "toolCalls": 1, "turns": 3, "wallMs": 1500},
    });
    completion.llm_call_snapshot_id = Some(snapshot);
    completion.served_model = Some("claude-opus-4-8".into());
    completion.cost_usd = Some(0.06);
    completion.input_tokens = Some(300);
    completion.output_tokens = Some(60);
    store
        .complete_tick(t, c.instance.id, c.session, completion, &Default::default())
        .await?;
    Ok(snapshot)
}

async fn claimed(store: &Store, name: &str) -> anyhow::Result<(Uuid, TickClaim)> {
    let t = tenant(store, name).await?;
    let inst = soa(store, t).await?;
    store
        .events()
        .enqueue(
            t,
            inst.id,
            AgentEventKind::OperatorMessage,
            &json!({}),
            None,
        )
        .await?;
    Ok((t, claim(store, t, inst.id).await?))
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_turn_is_read_with_its_journal_and_priced_attempts_for_its_tenant_only(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let (a, c) = claimed(&store, "a").await?;
    let (b, theirs) = claimed(&store, "b").await?;
    let snapshot = seed_episode(&store, a, &c).await?;

    let trace = store.traces().turn(a, c.instance.id, 1).await?;
    assert_eq!(trace.turn.turn_number, 1);
    assert_eq!(trace.turn.event_id, Some(c.event.id));
    assert_eq!(trace.turn.decision_kind, AgentDecisionKind::ActedWithTool);
    assert_eq!(trace.turn.decision_payload["completion"], "completed");
    assert_eq!(trace.turn.decision_payload["consumption"]["turns"], 3);
    assert_eq!(trace.turn.llm_call_snapshot_id, Some(snapshot));
    assert_eq!(
        trace.turn.requested_model.as_deref(),
        Some("claude-opus-4-8")
    );
    assert_eq!(trace.actions.len(), 1);
    assert_eq!(trace.actions[0].tool_name, "soa_send_message");
    // The journal in order: turn 1, its tool call, turn 2, turn 3.
    assert_eq!(
        trace
            .journal
            .iter()
            .map(|e| (e.seq, e.kind))
            .collect::<Vec<_>>(),
        [
            (0, JournalKind::LlmTurn),
            (1, JournalKind::ToolCall),
            (2, JournalKind::LlmTurn),
            (3, JournalKind::LlmTurn),
        ]
    );
    let second = &trace.journal[2].entry;
    assert_eq!(second["turn"], 2);
    assert_eq!(second["attempts"].as_array().map(Vec::len), Some(2));
    assert_eq!(second["attempts"][0]["outcome"], "server_error");
    // The snapshot's attempts, in ordinal order, with their costs: the
    // journal's four attempts in journal order.
    assert_eq!(trace.snapshot_id, Some(snapshot));
    assert_eq!(
        trace
            .attempts
            .iter()
            .map(|a| (a.ordinal, a.provider.as_str(), a.outcome.as_str()))
            .collect::<Vec<_>>(),
        [
            (0, "anthropic", "success"),
            (1, "anthropic", "server_error"),
            (2, "openai", "success"),
            (3, "anthropic", "success"),
        ]
    );
    assert!((trace.attempts[2].cost_usd - 0.02).abs() < 1e-9);
    assert_eq!(trace.attempts[1].error_message, "HTTP 529 overloaded");

    // Another tenant: NotFound, as a turn that does not exist; a turn
    // number below one is refused.
    for (tenant, instance, n) in [
        (b, c.instance.id, 1),
        (a, theirs.instance.id, 1),
        (a, c.instance.id, 2),
        (a, Uuid::new_v4(), 1),
    ] {
        let err = store
            .traces()
            .turn(tenant, instance, n)
            .await
            .expect_err("not found");
        assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    }
    let err = store
        .traces()
        .turn(a, c.instance.id, 0)
        .await
        .expect_err("refused");
    assert!(matches!(err, StoreError::InvalidArgument { .. }), "{err:?}");
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_pruned_journal_leaves_the_turn_readable_with_no_steps(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let (a, c) = claimed(&store, "a").await?;
    let snapshot = seed_episode(&store, a, &c).await?;
    genesis_store::inspect::force_journal_age(
        &pool,
        c.event.id,
        Duration::from_secs(31 * 24 * 3600),
    )
    .await?;
    let pruned = store
        .journal()
        .prune(genesis_core::journal::DEFAULT_RETENTION, 100)
        .await?;
    assert_eq!(pruned, 4);
    let trace = store.traces().turn(a, c.instance.id, 1).await?;
    assert!(trace.journal.is_empty(), "the journal is gone");
    assert_eq!(trace.turn.turn_number, 1, "the ledger turn is kept");
    assert_eq!(trace.turn.decision_payload["completion"], "completed");
    // The priced attempts outlive the journal.
    assert_eq!(trace.snapshot_id, Some(snapshot));
    assert_eq!(trace.attempts.len(), 4);
    Ok(())
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_turn_without_its_snapshot_finds_the_attempts_by_the_journals_invocation(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let (a, c) = claimed(&store, "a").await?;
    // The same episode, but the turn does not link its snapshot.
    let entry = turn(
        1,
        &episode_attempts()[0],
        vec![json!({"role": "user", "content": "hi"})],
    );
    let recorded = store
        .llm()
        .record_call_attempt(
            a,
            &NewCallAttempt {
                instance_id: c.instance.id,
                session: c.session,
                invocation_id: INVOCATION.into(),
                site_id: "Agent:Planning".into(),
                requested_model: "claude-opus-4-8".into(),
                served_model: "claude-opus-4-8".into(),
                provider: "anthropic".into(),
                credential_name: "anthropic-key".into(),
                outcome: "success".into(),
                input_tokens: 100,
                output_tokens: 20,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                latency_ms: 40,
                error_message: String::new(),
                cost_usd: 0.01,
                priced_as: None,
                pricing_source: None,
                prompt_overlay_sha256: None,
            },
            CreditDraw {
                week_start: genesis_store::credit::week_start(Utc::now()),
                limit_usd: 60.0,
            },
        )
        .await?;
    store
        .journal()
        .append(
            a,
            NewStep {
                event_id: c.event.id,
                instance_id: c.instance.id,
                session: c.session,
                kind: JournalKind::LlmTurn,
                entry: &entry,
            },
            CAP,
        )
        .await?;
    complete_planned(&store, a, &c).await?;
    let trace = store.traces().turn(a, c.instance.id, 1).await?;
    assert_eq!(trace.turn.llm_call_snapshot_id, None);
    assert_eq!(trace.snapshot_id, Some(recorded.snapshot.id));
    assert_eq!(trace.attempts.len(), 1);
    assert_eq!(trace.journal.len(), 1);
    Ok(())
}
