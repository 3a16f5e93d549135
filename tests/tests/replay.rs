//! Replaying a recorded turn against another preset, through the whole
//! fleet (control, supervisor, pod, NATS) with the strict Anthropic
//! stand-in as the provider: the SOA's opener greets, puts a decision and
//! proposes a mission; its turn is then replayed against a cheaper model.
//! The replay runs no tool with an effect (the tables the opener wrote are
//! unchanged), answers every call "not executed (replay)", records its
//! calls under the call tag Replay against the replay (drawn from the
//! tenant's credit, on no snapshot of the instance), and is shown beside
//! the original. Another tenant cannot read it or replay the turn; bad
//! requests change nothing; a replay whose provider fails is failed with
//! the reason and costs nothing.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_e2e::{Fleet, FleetOptions, binaries_missing, bounded, wait_for};
use genesis_llm_standin::{Answer, Endpoint, Reply, StandIn};
use genesis_proto::v1 as pb;
use genesis_store::inspect::{self, fleet as checks};
use uuid::Uuid;

const T: Duration = Duration::from_secs(60);
const GREETING: &str = "Hello, I am your orchestration agent.";

fn skipped() -> bool {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return true;
    }
    false
}

/// What the opener wrote, counted before and after the replays.
async fn effects(fleet: &Fleet) -> anyhow::Result<[i64; 5]> {
    Ok([
        checks::count_messages_to_operator_starting(&fleet.db, "").await?,
        inspect::count_rows(&fleet.db, "attention_requests").await?,
        inspect::count_rows(&fleet.db, "missions").await?,
        inspect::count_rows(&fleet.db, "agent_state_ledger").await?,
        inspect::count_rows(&fleet.db, "agent_event_queue").await?,
    ])
}

async fn wait_settled(fleet: &Fleet, tenant: &str, id: &str) -> anyhow::Result<pb::TurnReplay> {
    let admin = fleet.admin().await?;
    wait_for("the replay to finish", T, || {
        let mut agents = admin.agents();
        let req = pb::GetTurnReplayRequest {
            tenant_id: tenant.to_owned(),
            replay_id: id.to_owned(),
        };
        async move {
            let r = agents.get_turn_replay(req).await?.into_inner();
            Ok(matches!(r.status.as_str(), "done" | "failed").then_some(r))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_replayed_against_another_preset_runs_nothing_and_bills_the_replay_tag()
-> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(Duration::from_secs(240), async {
        let key = format!("sk-ant-standin-{}", Uuid::new_v4().simple());
        let standin = StandIn::builder()
            .key(key.clone())
            .listen(([127, 0, 0, 1], 0).into())
            .start()
            .await?;
        for (tool, args) in [
            ("soa_send_message", serde_json::json!({"body": GREETING})),
            (
                "soa_propose_decision",
                serde_json::json!({"title": "Which repository first?", "body": "Two are in scope.", "options": ["api", "web"]}),
            ),
            (
                "soa_propose_task",
                serde_json::json!({"kind": "MissionResearch", "title": "Map the services", "description": "List the services."}),
            ),
            ("phase_complete", serde_json::json!({"summary": "Greeted, asked, proposed."})),
        ] {
            standin.push(Endpoint::Anthropic, Answer::Reply(Reply::tool_call(tool, args)));
        }
        let mut opts = FleetOptions::new("replay", 1);
        opts.provider = "anthropic".into();
        opts.extra_env.extend([
            ("ANTHROPIC_BASE_URL".to_owned(), standin.base_url()),
            ("ANTHROPIC_API_KEY".to_owned(), key.clone()),
        ]);
        let mut fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("replayed").await?;
        let other = fleet.create_tenant("bystander").await?;
        let soa = fleet.wait_soa(&tenant, Duration::from_secs(30)).await?;
        wait_for("the opener's turn", T, || {
            let n = checks::count_turns_of_event_kind(&fleet.db, "AgentInitialized");
            async move { Ok((n.await? >= 1).then_some(())) }
        })
        .await?;
        fleet.wait_quiescent(T).await?;
        let admin = fleet.admin().await?;
        let cheap = admin
            .upsert_preset(
                &tenant,
                None,
                "cheap",
                pb::PresetCouple {
                    model: "claude-haiku-4-5".into(),
                    provider: "anthropic".into(),
                    backend: String::new(),
                    credential_names: vec!["ANTHROPIC_API_KEY".into()],
                },
                serde_json::json!({}),
            )
            .await?;
        let before = effects(&fleet).await?;
        let requests_before = standin.requests().len();
        let tenant_id: Uuid = tenant.parse()?;
        let spent_before = checks::credit_spent(&fleet.db, tenant_id).await?;

        // The replay model greets differently and stops: its greeting must
        // not be sent.
        standin.push(
            Endpoint::Anthropic,
            Answer::Reply(Reply::tool_call(
                "soa_send_message",
                serde_json::json!({"body": "Hi (a cheaper greeting)"}),
            )),
        );
        standin.push(
            Endpoint::Anthropic,
            Answer::Reply(Reply::tool_call(
                "phase_complete",
                serde_json::json!({"summary": "Would greet briefly."}),
            )),
        );
        let asked = admin
            .agents()
            .replay_turn(pb::ReplayTurnRequest {
                tenant_id: tenant.clone(),
                instance_id: soa.clone(),
                turn_number: 1,
                preset_id: cheap.id.clone(),
            })
            .await?
            .into_inner();
        ensure!(
            matches!(asked.status.as_str(), "pending" | "running" | "done"),
            "a new replay reads {}",
            asked.status
        );
        let r = wait_settled(&fleet, &tenant, &asked.id).await?;
        ensure!(r.status == "done", "replay {}: {}", r.status, r.error);
        let alt = r.alternative.clone().context("a done replay has its alternative")?;
        ensure!(alt.end == "Complete", "the replay ended {}", alt.end);
        ensure!(
            alt.actions.len() == 1
                && alt.actions[0].tool_name == "soa_send_message"
                && alt.actions[0].answered == "not_executed"
                && alt.actions[0].result_json.contains("not executed (replay)"),
            "the replay's actions: {:?}",
            alt.actions
        );
        ensure!(alt.turns == 2, "the replay took {} turns", alt.turns);
        let original = r.original.clone().context("the original turn is shown")?;
        ensure!(
            original.actions.iter().any(|a| a.tool_name == "soa_send_message"),
            "the original's actions: {:?}",
            original.actions
        );
        // What the provider saw: the original conversation, asked of the
        // replay's model.
        let replayed: Vec<_> = standin.requests()[requests_before..].to_vec();
        ensure!(replayed.len() == 2, "{} provider requests for the replay", replayed.len());
        for req in &replayed {
            ensure!(
                req.body["model"] == "claude-haiku-4-5",
                "the replay asked {}",
                req.body["model"]
            );
            ensure!(
                req.body.to_string().contains("EVENT: AgentInitialized"),
                "the replay did not ask with the turn's recorded inputs"
            );
        }
        // Nothing the opener wrote moved: no greeting, decision, mission,
        // ledger turn or event.
        fleet.wait_quiescent(T).await?;
        let after = effects(&fleet).await?;
        ensure!(before == after, "the replay changed the agent's tables: {before:?} -> {after:?}");
        // Its calls are on the books under the replay tag, never the
        // instance's, and drawn from the tenant's credit.
        let replay_id: Uuid = r.id.parse()?;
        let calls = checks::replay_calls(&fleet.db, replay_id).await?;
        ensure!(
            calls.call_tags == vec!["Replay".to_owned()],
            "the replay's snapshots: {:?}",
            calls.call_tags
        );
        ensure!(calls.attempts == 2, "{} attempts recorded", calls.attempts);
        ensure!(calls.naming_an_instance == 0, "a replay snapshot names the instance");
        ensure!(
            calls.cost_usd > 0.0 && (calls.cost_usd - r.cost_usd).abs() < 1e-12,
            "cost {} recorded, {} shown",
            calls.cost_usd,
            r.cost_usd
        );
        let spent_after = checks::credit_spent(&fleet.db, tenant_id).await?;
        ensure!(
            (spent_after - spent_before - calls.cost_usd).abs() < 1e-9,
            "the credit window moved by {} for a replay costing {}",
            spent_after - spent_before,
            calls.cost_usd
        );

        // Another tenant reads no replay of this one, and replays none of
        // its turns.
        let err = admin
            .agents()
            .get_turn_replay(pb::GetTurnReplayRequest {
                tenant_id: other.clone(),
                replay_id: r.id.clone(),
            })
            .await
            .expect_err("another tenant's replay");
        ensure!(err.code() == tonic::Code::NotFound, "{err:?}");
        let err = admin
            .agents()
            .replay_turn(pb::ReplayTurnRequest {
                tenant_id: other.clone(),
                instance_id: soa.clone(),
                turn_number: 1,
                preset_id: cheap.id.clone(),
            })
            .await
            .expect_err("another tenant's turn");
        ensure!(err.code() == tonic::Code::NotFound, "{err:?}");
        // Bad requests are refused by field and write nothing.
        for (req, code) in [
            (
                pb::ReplayTurnRequest {
                    tenant_id: tenant.clone(),
                    instance_id: soa.clone(),
                    turn_number: 99,
                    preset_id: cheap.id.clone(),
                },
                tonic::Code::NotFound,
            ),
            (
                pb::ReplayTurnRequest {
                    tenant_id: tenant.clone(),
                    instance_id: soa.clone(),
                    turn_number: 1,
                    preset_id: Uuid::new_v4().to_string(),
                },
                tonic::Code::NotFound,
            ),
            (
                pb::ReplayTurnRequest {
                    tenant_id: tenant.clone(),
                    instance_id: soa.clone(),
                    turn_number: 0,
                    preset_id: cheap.id.clone(),
                },
                tonic::Code::InvalidArgument,
            ),
        ] {
            let err = admin.agents().replay_turn(req).await.expect_err("refused");
            ensure!(err.code() == code, "{err:?}");
        }
        ensure!(
            inspect::count_rows(&fleet.db, "agent_replays").await? == 1,
            "a refused replay was kept"
        );

        // A replay whose provider fails on every attempt is failed with
        // the reason, and its failed attempts cost nothing.
        for _ in 0..8 {
            standin.push(Endpoint::Anthropic, Answer::ServerError);
        }
        let failing = admin
            .agents()
            .replay_turn(pb::ReplayTurnRequest {
                tenant_id: tenant.clone(),
                instance_id: soa.clone(),
                turn_number: 1,
                preset_id: cheap.id.clone(),
            })
            .await?
            .into_inner();
        let f = wait_settled(&fleet, &tenant, &failing.id).await?;
        ensure!(
            f.status == "failed" && !f.error.is_empty() && f.alternative.is_none(),
            "a replay whose provider failed: {} {:?}",
            f.status,
            f.error
        );
        let failed_calls = checks::replay_calls(&fleet.db, f.id.parse()?).await?;
        ensure!(failed_calls.cost_usd == 0.0, "failed attempts cost {}", failed_calls.cost_usd);
        ensure!(effects(&fleet).await? == before, "a failed replay changed the agent's tables");
        println!(
            "REPLAY: done cost_usd={:.6} attempts={} failed_attempts={} error={:?}",
            calls.cost_usd, calls.attempts, failed_calls.attempts, f.error
        );
        fleet.check_invariants().await?;
        fleet.shutdown();
        Ok(())
    })
    .await
}
