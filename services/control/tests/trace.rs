//! GetAgentTrace and `genesisctl agent trace` against the served API on the
//! real database: a three-turn episode with a fallback attempt (its
//! journal and priced attempts seeded through the store's own API) is read
//! back whole, each attempt with its cost; another tenant's trace is
//! NOT_FOUND exactly as a missing turn's; a pruned journal leaves the turn
//! with no steps, and says so.

mod common;

use std::time::Duration;

use common::*;
use genesis_core::TokenScope;
use genesis_proto::v1;
use genesis_proto::v1::agent_service_client::AgentServiceClient;
use serde_json::Value;
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

fn get(tenant: Uuid, instance: &str, turn_number: i64) -> v1::GetAgentTraceRequest {
    v1::GetAgentTraceRequest {
        tenant_id: tenant.to_string(),
        instance_id: instance.to_owned(),
        turn_number,
    }
}

/// `genesisctl` in-process (on a thread of its own: it runs its own
/// runtime, and control answers on this test's), as the operator of
/// `tenant`: exit code, stdout, stderr.
async fn ctl(
    grpc: std::net::SocketAddr,
    token: &str,
    tenant: Uuid,
    args: &[&str],
) -> anyhow::Result<(i32, String, String)> {
    let mut all: Vec<String> = vec![
        "genesisctl".into(),
        "--endpoint".into(),
        format!("http://{grpc}"),
        "--token".into(),
        token.into(),
        "--tenant".into(),
        tenant.to_string(),
    ];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    Ok(tokio::task::spawn_blocking(move || {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = genesisctl::run(all, &mut out, &mut err);
        (
            code,
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    })
    .await?)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_three_turn_episode_with_a_fallback_is_traced_and_another_tenants_is_not_found(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let b = store.tenants().create("b").await?.id;
    let ep = seed_episode(&store, a).await?;
    let theirs = seed_episode(&store, b).await?;
    let op_a = token(&store, TokenScope::Operator, Some(a)).await?;
    let op_b = token(&store, TokenScope::Operator, Some(b)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut agents = AgentServiceClient::new(h.channel().await?);
    let inst = ep.instance.id.to_string();

    let t = agents
        .get_agent_trace(req(get(a, &inst, ep.turn_number), &op_a))
        .await?
        .into_inner();
    let turn = t.turn.clone().unwrap_or_default();
    assert_eq!(turn.turn_number, ep.turn_number);
    assert_eq!(turn.decision_kind, "ActedWithTool");
    assert_eq!(turn.actions.len(), 1, "the decision's mapping");
    assert_eq!(t.completion, "completed");
    let used = t.consumption.unwrap_or_default();
    assert_eq!(
        (used.tokens, used.tool_calls, used.turns, used.wall_ms),
        (360, 1, 3, 1500)
    );
    assert_eq!(t.system_prompt, "You are the SOA of this tenant.");
    assert!(!t.journal_pruned);
    assert_eq!(t.snapshot_id, ep.snapshot_id.to_string());
    assert!(t.truncated.is_none());
    // The steps in order: three LLM turns, the tool call after the first.
    use v1::trace_step::Step;
    let llm: Vec<&v1::TraceLlmTurn> = t
        .steps
        .iter()
        .filter_map(|s| match &s.step {
            Some(Step::LlmTurn(l)) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(llm.iter().map(|l| l.turn).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(
        matches!(&t.steps[1].step, Some(Step::ToolCall(c)) if c.tool_name == "soa_send_message" && c.side_effecting && !c.blocked && c.result_json.contains("delivered")),
        "{:?}",
        t.steps[1]
    );
    // Turn 2's fallback: the failed attempt, then the one that served.
    let fallback = &llm[1].attempts;
    assert_eq!(fallback.len(), 2);
    assert_eq!(
        (fallback[0].provider.as_str(), fallback[0].outcome.as_str()),
        ("anthropic", "server_error")
    );
    assert_eq!(fallback[0].error, "HTTP 529 overloaded");
    assert_eq!(
        (
            fallback[1].provider.as_str(),
            fallback[1].served_model.as_str()
        ),
        ("openai", "gpt-5")
    );
    assert_eq!(llm[1].served_model, "gpt-5");
    // Each attempt's priced cost, paired with the snapshot's in order.
    let costs: Vec<Option<f64>> = llm
        .iter()
        .flat_map(|l| l.attempts.iter().map(|a| a.cost_usd))
        .collect();
    assert_eq!(costs, [Some(0.01), Some(0.0), Some(0.02), Some(0.03)]);
    // The conversation: each turn's messages, then its answer.
    let roles: Vec<(&str, u32)> = t
        .conversation
        .iter()
        .map(|m| (m.role.as_str(), m.turn))
        .collect();
    assert_eq!(
        roles,
        [
            ("user", 1),
            ("assistant", 1),
            ("tool", 2),
            ("assistant", 2),
            ("user", 3),
            ("assistant", 3)
        ]
    );
    assert_eq!(t.conversation[0].content, episode_objective());
    assert_eq!(t.conversation[1].tool_calls[0].name, "soa_send_message");
    assert_eq!(t.conversation[2].tool_call_id, "call-1");

    // Another tenant's instance: NOT_FOUND, with the very answer a missing
    // turn gets; naming another tenant is refused before any read.
    let other = agents
        .get_agent_trace(req(get(b, &inst, ep.turn_number), &op_b))
        .await
        .expect_err("another tenant's trace");
    assert_eq!(other.code(), Code::NotFound, "{other:?}");
    let missing = agents
        .get_agent_trace(req(get(a, &inst, ep.turn_number + 1), &op_a))
        .await
        .expect_err("no such turn");
    assert_eq!(missing.code(), Code::NotFound);
    assert_eq!(other.message(), missing.message());
    let e = agents
        .get_agent_trace(req(
            get(a, &theirs.instance.id.to_string(), theirs.turn_number),
            &op_a,
        ))
        .await
        .expect_err("b's instance from a");
    assert_eq!(e.code(), Code::NotFound);
    let e = agents
        .get_agent_trace(req(get(b, &inst, 1), &op_a))
        .await
        .expect_err("naming tenant b");
    assert_eq!(e.code(), Code::PermissionDenied);
    for bad in [get(a, &inst, 0), get(a, "not-a-uuid", 1)] {
        let e = agents
            .get_agent_trace(req(bad, &op_a))
            .await
            .expect_err("refused");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    }

    // genesisctl agent trace: the same episode for people...
    let n = ep.turn_number.to_string();
    let (code, out, err) = ctl(h.grpc, &op_a, a, &["agent", "trace", &inst, &n]).await?;
    assert_eq!(code, 0, "{err}");
    for part in [
        "completion   completed",
        "Budget used",
        "Decision mapping",
        "soa_send_message",
        "[0] LLM turn 1",
        "[1] Tool call soa_send_message",
        "[2] LLM turn 2",
        "[3] LLM turn 3",
        "PROVIDER",
        "server_error",
        "HTTP 529 overloaded",
        "openai",
        "$0.0200",
        "-o json shows all",
    ] {
        assert!(out.contains(part), "{part:?} missing in:\n{out}");
    }
    assert!(
        !out.contains("END-OF-OBJECTIVE"),
        "long texts are cut: {out}"
    );
    // ...and whole as JSON.
    let (code, out, err) = ctl(
        h.grpc,
        &op_a,
        a,
        &["-o", "json", "agent", "trace", &inst, &n],
    )
    .await?;
    assert_eq!(code, 0, "{err}");
    let json: Value = serde_json::from_str(&out)?;
    assert_eq!(json["steps"].as_array().map(Vec::len), Some(4));
    assert_eq!(
        json["steps"][2]["llm_turn"]["attempts"][0]["outcome"],
        "server_error"
    );
    assert_eq!(
        json["steps"][2]["llm_turn"]["attempts"][1]["cost_usd"],
        0.02
    );
    assert_eq!(
        json["steps"][0]["llm_turn"]["messages"][0]["content"],
        episode_objective()
    );
    assert_eq!(
        json["steps"][1]["tool_call"]["arguments_json"]["message"],
        "hello <b>operator</b>"
    );
    // Another tenant's operator: NOT_FOUND, exit 1.
    let (code, _, err) = ctl(h.grpc, &op_b, b, &["agent", "trace", &inst, &n]).await?;
    assert_eq!(code, 1);
    assert!(err.contains("NOT_FOUND"), "{err}");
    let (code, _, _) = ctl(h.grpc, &op_a, a, &["agent", "trace", &inst, "0"]).await?;
    assert_eq!(code, 2, "turn 0 is a usage error");
    h.stop().await
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_pruned_journal_leaves_the_turn_and_says_so(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let a = store.tenants().create("a").await?.id;
    let ep = seed_episode(&store, a).await?;
    let event = store
        .traces()
        .turn(a, ep.instance.id, 1)
        .await?
        .turn
        .event_id;
    let event = event.ok_or_else(|| anyhow::anyhow!("the turn consumed an event"))?;
    genesis_store::inspect::force_journal_age(&pool, event, Duration::from_secs(31 * 24 * 3600))
        .await?;
    store
        .journal()
        .prune(genesis_core::journal::DEFAULT_RETENTION, 100)
        .await?;
    let op = token(&store, TokenScope::Operator, Some(a)).await?;
    let mut cfg = config(&pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await?;
    let mut agents = AgentServiceClient::new(h.channel().await?);
    let inst = ep.instance.id.to_string();
    let t = agents
        .get_agent_trace(req(get(a, &inst, ep.turn_number), &op))
        .await?
        .into_inner();
    assert!(t.journal_pruned);
    assert!(t.steps.is_empty() && t.conversation.is_empty());
    assert_eq!(t.completion, "completed", "the ledger turn is kept");
    let (code, out, err) = ctl(h.grpc, &op, a, &["agent", "trace", &inst, "1"]).await?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("No journal for this turn"), "{out}");
    h.stop().await
}
