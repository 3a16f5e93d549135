//! Agent pods that think: the three real services with the scripted provider,
//! driven through control's admin API, observed in the fleet's database.

use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use genesis_e2e::{Findings, Fleet, FleetOptions, binaries_missing, bounded, metadata, wait_for};
use genesis_proto::v1 as pb;
use genesis_store::inspect::{self, fleet as checks};
use uuid::Uuid;

const T: Duration = Duration::from_secs(30);

fn skipped() -> bool {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return true;
    }
    false
}

/// Successful LLM calls recorded for `instance` (every attempt of every
/// snapshot): the count a short-circuited tick must not move.
async fn llm_calls(fleet: &Fleet, instance: &str) -> anyhow::Result<i64> {
    let id: Uuid = instance.parse()?;
    Ok(checks::successful_llm_calls(&fleet.db, id).await?)
}

/// The stored results of every `tool` action of `instance`.
async fn action_results(fleet: &Fleet, instance: &str, tool: &str) -> anyhow::Result<Vec<String>> {
    let id: Uuid = instance.parse()?;
    Ok(checks::tool_action_results(&fleet.db, id, tool).await?)
}

async fn agent_messages(fleet: &Fleet, instance: &str) -> anyhow::Result<Vec<String>> {
    let id: Uuid = instance.parse()?;
    Ok(checks::messages_to_operator(&fleet.db, id).await?)
}

/// A tenant created with standing agents off, configured, then switched on
/// (so the opener already sees the configuration).
async fn tenant_with_config(
    fleet: &Fleet,
    name: &str,
    config: &[(&str, &str)],
) -> anyhow::Result<(String, String)> {
    let admin = fleet.admin().await?;
    let t = admin
        .tenants()
        .create_tenant(pb::CreateTenantRequest {
            name: name.into(),
            standing_agents_enabled: false,
        })
        .await?
        .into_inner();
    for (k, v) in config {
        fleet.set_tenant_config(&t.id, k, v).await?;
    }
    admin
        .tenants()
        .set_standing_agents(pb::SetStandingAgentsRequest {
            tenant_id: t.id.clone(),
            enabled: true,
        })
        .await?;
    let soa = fleet.wait_soa(&t.id, T).await?;
    Ok((t.id, soa))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soa_greets_replies_escalates_and_resumes() -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(Duration::from_secs(120), async {
        let fleet = Fleet::start(FleetOptions::new("fleet-conversation", 1)).await?;
        let tenant = fleet.create_tenant("acme").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;

        let mut f = Findings::default();

        // AgentInitialized -> greeting, Initialized turn with its snapshot.
        let init = fleet.wait_decision(&soa, 0, "Initialized", T).await?;
        ensure!(
            init.event_kind == "AgentInitialized",
            "opener consumed {}",
            init.event_kind
        );
        let greeting = agent_messages(&fleet, &soa).await?;
        if !f.check(
            !greeting.is_empty(),
            "AgentInitialized: no greeting in agent_messages",
        ) {
            eprintln!(
                "  soa_send_message results: {:?}",
                action_results(&fleet, &soa, "soa_send_message").await?
            );
        }
        let snap = init
            .llm_call_snapshot_id
            .context("Initialized turn has no llm_call_snapshot linked")?;
        let (served, cost) = checks::call_snapshot_model_and_cost(&fleet.db, snap).await?;
        f.check(
            served.as_deref() == Some("scripted-1"),
            format!("snapshot served model {served:?}"),
        );
        // The offline scripted provider spends nothing, and says so.
        f.check(
            cost == 0.0,
            format!("snapshot cost {cost}: the scripted provider is free"),
        );
        f.check(
            init.cost_usd == Some(0.0),
            format!("turn cost {:?}", init.cost_usd),
        );
        let sources = checks::attempt_pricing_sources(&fleet.db, snap).await?;
        f.check(
            !sources.is_empty() && sources.iter().all(|s| s.as_deref() == Some("free")),
            format!("the attempts' pricing sources {sources:?}"),
        );
        let hours = checks::hours_to_next_tick(&fleet.db, soa.parse()?).await?;
        f.check(
            (23.5..=24.5).contains(&hours),
            format!("next heartbeat {hours:.2} h out, expected 24 h"),
        );

        // Operator message -> reply and MessageAcknowledged.
        let before = fleet.last_turn(&soa).await?;
        fleet
            .send(&tenant, &soa, "How is the workload today?")
            .await?;
        let ack = fleet
            .wait_turn(&soa, before, T, "the message turn", |t| {
                t.event_kind == "OperatorMessage"
            })
            .await?;
        f.check(
            ack.decision_kind == "MessageAcknowledged",
            format!("operator message turn is {}", ack.decision_kind),
        );
        let replies = agent_messages(&fleet, &soa).await?;
        f.check(
            replies
                .iter()
                .any(|m| m.contains("How is the workload today?")),
            format!(
                "OperatorMessage: no reply quoting the operator in agent_messages: {replies:?}"
            ),
        );

        // Escalation -> Escalated and an SOA-origin attention request.
        let before = fleet.last_turn(&soa).await?;
        fleet.send(&tenant, &soa, "please escalate this").await?;
        let esc = fleet
            .wait_turn(&soa, before, T, "the escalation turn", |t| {
                t.event_kind == "OperatorMessage"
            })
            .await?;
        if !f.check(
            esc.decision_kind == "Escalated",
            format!("\"please escalate this\" turn is {}", esc.decision_kind),
        ) {
            eprintln!(
                "  soa_propose_decision results: {:?}",
                action_results(&fleet, &soa, "soa_propose_decision").await?
            );
        }
        let admin = fleet.admin().await?;
        let open = admin
            .decisions()
            .list_decisions(pb::ListDecisionsRequest {
                tenant_id: tenant.clone(),
                status: Some("open".into()),
            })
            .await?
            .into_inner()
            .decisions;
        let decision = open.iter().find(|d| d.kind == "decision").cloned();
        if !f.check(
            decision.is_some(),
            "escalation: no open attention request of kind decision",
        ) {
            eprintln!(
                "  skipped: RespondDecision -> EscalationResumed needs the attention request above"
            );
            return f.finish();
        }
        let Some(decision) = decision else {
            return f.finish();
        };
        let md = metadata(&decision);
        f.check(
            md["source"] == "soa",
            format!("attention request metadata lacks source=soa: {md}"),
        );
        f.check(
            md["soaInstanceId"] == soa.as_str(),
            format!("attention request metadata lacks soaInstanceId: {md}"),
        );

        // RespondDecision -> EscalationResumed.
        let before = fleet.last_turn(&soa).await?;
        let resp = admin
            .decisions()
            .respond_decision(pb::RespondDecisionRequest {
                tenant_id: tenant.clone(),
                decision_id: decision.id.clone(),
                resolution: "approved".into(),
                notes: "go ahead".into(),
            })
            .await?
            .into_inner();
        f.check(
            resp.resume_event_id.is_some(),
            "RespondDecision enqueued no OperatorAnsweredEscalation",
        );
        let resumed = fleet
            .wait_turn(&soa, before, T, "the resume turn", |t| {
                t.event_kind == "OperatorAnsweredEscalation"
            })
            .await?;
        f.check(
            resumed.decision_kind == "EscalationResumed",
            format!("resume turn is {}", resumed.decision_kind),
        );

        // Failure path: responding again changes nothing and enqueues nothing.
        let again = admin
            .decisions()
            .respond_decision(pb::RespondDecisionRequest {
                tenant_id: tenant.clone(),
                decision_id: decision.id.clone(),
                resolution: "rejected".into(),
                notes: String::new(),
            })
            .await?
            .into_inner();
        f.check(
            again.already_resolved,
            "second respond not reported already_resolved",
        );
        let resumes =
            inspect::count_events_of_kind(&fleet.db, "OperatorAnsweredEscalation").await?;
        f.check(
            resumes == 1,
            format!("{resumes} resume events after two responds"),
        );
        f.finish()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_heartbeats_make_no_llm_call_until_the_forced_replan() -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(Duration::from_secs(120), async {
        let fleet = Fleet::start(FleetOptions::new("fleet-b1", 1)).await?;
        let (_tenant, soa) = tenant_with_config(
            &fleet,
            "b1",
            &[
                ("AgentDispatcher:StandingAgentHeartbeatInterval", "1s"),
                ("AgentDispatcher:ForcedReplanEveryNIdleTicks", "3"),
            ],
        )
        .await?;
        fleet.wait_decision(&soa, 0, "Initialized", T).await?;
        // With a 1 s cadence, a dozen heartbeats come within ~20 s; if the
        // supervisor ignored the tenant's cadence the next one is 24 h out.
        let turns = wait_for("10 heartbeat turns at the tenant's 1 s cadence", Duration::from_secs(45), || async {
            let t = fleet.turns(&soa).await?;
            let beats = t.iter().filter(|t| t.event_kind == "AgentTick").count();
            Ok((beats >= 10).then_some(t))
        })
        .await
        .context("the supervisor does not honour AgentDispatcher:StandingAgentHeartbeatInterval for the tenant")?;
        let beats: Vec<_> = turns.iter().filter(|t| t.event_kind == "AgentTick").collect();
        // A heartbeat whose plan inputs equal the previous turn's must not
        // call the model, except the forced re-plan after N = 3 idle ticks
        // (the re-plan tick itself may count as the Nth: 2 or 3 idle ticks
        // precede it). A heartbeat whose inputs changed (the ops digest
        // bucket moved) re-plans for real.
        let mut idle_run = 0;
        let mut short_circuits = 0;
        let mut replans = 0;
        let mut gaps = std::collections::BTreeSet::new();
        let mut prev_hash = turns.iter().find(|t| t.event_kind != "AgentTick").and_then(|t| t.plan_input_hash.clone());
        for t in &beats {
            let tokens = t.input_tokens.unwrap_or(0) + t.output_tokens.unwrap_or(0);
            let unchanged = t.plan_input_hash.is_some() && t.plan_input_hash == prev_hash;
            if t.llm_call_snapshot_id.is_none() {
                ensure!(unchanged, "turn {} short-circuited although its inputs changed", t.turn_number);
                ensure!(tokens == 0, "short-circuited turn {} reports {tokens} tokens", t.turn_number);
                ensure!(t.decision_kind == "Heartbeat", "short-circuited turn {} is {}", t.turn_number, t.decision_kind);
                idle_run += 1;
                short_circuits += 1;
                ensure!(idle_run <= 3, "more than 3 idle ticks in a row without the forced re-plan (turn {})", t.turn_number);
            } else {
                ensure!(tokens > 0, "LLM turn {} reports no tokens", t.turn_number);
                if unchanged {
                    ensure!(
                        (2..=3).contains(&idle_run),
                        "unchanged inputs re-planned after {idle_run} idle ticks, expected the forced re-plan after 3 (turn {})",
                        t.turn_number
                    );
                    replans += 1;
                    gaps.insert(idle_run);
                }
                idle_run = 0;
            }
            prev_hash = t.plan_input_hash.clone();
        }
        ensure!(gaps.len() <= 1, "forced re-plan period not constant: {gaps:?}");
        ensure!(short_circuits >= 3, "only {short_circuits} short-circuited heartbeats");
        ensure!(replans >= 1, "no forced re-plan among {} heartbeats", beats.len());
        // Snapshots exist exactly for the turns that called the model.
        let linked = turns.iter().filter(|t| t.llm_call_snapshot_id.is_some()).count() as i64;
        let snaps = fleet.snapshots(&soa).await?;
        ensure!(snaps >= linked, "{snaps} snapshots for {linked} LLM turns");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_weekly_credit_makes_no_llm_call_and_idles() -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(Duration::from_secs(90), async {
        let fleet = Fleet::start(FleetOptions::new("fleet-credit", 1)).await?;
        let tenant = fleet.create_tenant("credit").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;
        fleet.wait_decision(&soa, 0, "Initialized", T).await?;
        // The scripted provider is free, so the window is spent directly.
        fleet
            .set_tenant_config(&tenant, "AgentDispatcher:WeeklyCreditUsd", "0.50")
            .await?;
        checks::force_credit_week_spent(&fleet.db, tenant.parse()?, 0.50).await?;
        let calls = llm_calls(&fleet, &soa).await?;
        let messages = agent_messages(&fleet, &soa).await?.len();
        let before = fleet.last_turn(&soa).await?;
        // Invariant 11 says "in every phase, foundational included": a new
        // SOA is still building its starting workset, whose phase lifts every
        // per-tick axis, so this is the case where the ceiling must still hold.
        let foundational = inspect::building_starting_workset(&fleet.db, soa.parse()?).await?;
        ensure!(
            foundational,
            "the SOA left its foundational phase before the test could use it"
        );
        fleet.send(&tenant, &soa, "anything new?").await?;
        let turn = fleet
            .wait_turn(&soa, before, T, "the turn of the message", |t| {
                t.event_kind == "OperatorMessage"
            })
            .await?;
        ensure!(
            turn.llm_call_snapshot_id.is_none(),
            "credit exhausted yet turn {} links a snapshot",
            turn.turn_number
        );
        ensure!(
            turn.input_tokens.unwrap_or(0) + turn.output_tokens.unwrap_or(0) == 0,
            "tokens spent: {turn:?}"
        );
        ensure!(
            turn.phase.starts_with("idle"),
            "phase {} is not idle",
            turn.phase
        );
        ensure!(
            llm_calls(&fleet, &soa).await? == calls,
            "an LLM call was made with the credit exhausted"
        );
        ensure!(
            agent_messages(&fleet, &soa).await?.len() == messages,
            "the agent replied without thinking"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tick_max_turns_applies_to_the_very_next_tick() -> anyhow::Result<()> {
    if skipped() {
        return Ok(());
    }
    bounded(Duration::from_secs(90), async {
        let fleet = Fleet::start(FleetOptions::new("fleet-max-turns", 1)).await?;
        let tenant = fleet.create_tenant("turns").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;
        fleet.wait_decision(&soa, 0, "Initialized", T).await?;
        // The foundational phase lifts every per-tick axis (spec 3.6); let
        // its deadline pass so the normal envelope applies, as it does on a
        // day-old agent.
        checks::force_workset_deadline_passed(&fleet.db, soa.parse()?).await?;
        // Baseline: a reply takes two model turns (send, then phase_complete).
        let c0 = llm_calls(&fleet, &soa).await?;
        let before = fleet.last_turn(&soa).await?;
        fleet.send(&tenant, &soa, "first").await?;
        fleet
            .wait_turn(&soa, before, T, "the first reply", |t| {
                t.event_kind == "OperatorMessage"
            })
            .await?;
        let c1 = llm_calls(&fleet, &soa).await?;
        ensure!(
            c1 - c0 == 2,
            "baseline reply made {} model calls, expected 2",
            c1 - c0
        );
        fleet
            .set_tenant_config(&tenant, "AgentDispatcher:TickMaxTurns", "1")
            .await?;
        let before = fleet.last_turn(&soa).await?;
        fleet.send(&tenant, &soa, "second").await?;
        fleet
            .wait_turn(&soa, before, T, "the capped reply", |t| {
                t.event_kind == "OperatorMessage"
            })
            .await?;
        let c2 = llm_calls(&fleet, &soa).await?;
        ensure!(
            c2 - c1 == 1,
            "with TickMaxTurns=1 the next tick made {} model calls",
            c2 - c1
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_tick_is_reclaimed_after_lease_expiry_and_completed_once() -> anyhow::Result<()>
{
    if skipped() {
        return Ok(());
    }
    bounded(Duration::from_secs(120), async {
        let mut opts = FleetOptions::new("fleet-reclaim", 1);
        opts.lease_ttl_secs = 3;
        let mut fleet = Fleet::start(opts).await?;
        let tenant = fleet.create_tenant("reclaim").await?;
        let soa = fleet.wait_soa(&tenant, T).await?;
        fleet.wait_decision(&soa, 0, "Initialized", T).await?;

        // The pod dies (SIGKILL); the event it would take is claimed over the
        // real AgentPod API by a session that then vanishes, exactly as a pod
        // killed between ClaimTick and CompleteTick leaves it.
        fleet.kill_pod(0);
        let event = fleet.send(&tenant, &soa, "are you there?").await?;
        let channel =
            tonic::transport::Channel::from_shared(format!("http://{}", fleet.supervisor_grpc))?
                .connect()
                .await?;
        let bearer = genesis_e2e::Bearer::new(&fleet.pod_token)?;
        let mut pod = pb::agent_pod_client::AgentPodClient::with_interceptor(channel, bearer);
        let claim = pod
            .claim_tick(pb::ClaimTickRequest {
                instance_id: soa.clone(),
                tenant_id: tenant.clone(),
                event_id: Some(event.to_string()),
            })
            .await?
            .into_inner();
        match claim.result {
            Some(pb::claim_tick_response::Result::Bundle(_)) => {}
            other => bail!("the dying session could not claim: {other:?}"),
        }
        let claimed_at = std::time::Instant::now();
        // A second claim while the lease is live is refused.
        let held = pod
            .claim_tick(pb::ClaimTickRequest {
                instance_id: soa.clone(),
                tenant_id: tenant.clone(),
                event_id: None,
            })
            .await?
            .into_inner();
        ensure!(
            matches!(
                held.result,
                Some(pb::claim_tick_response::Result::LeaseHeld(_))
            ),
            "a live lease was not reported held: {held:?}"
        );

        // A fresh pod: its delivery finds the lease held, NAKs, and claims
        // once the lease expired.
        fleet.start_pod(0).await?;
        let turn = fleet
            .wait_turn(&soa, 0, T, "the reclaimed event's turn", |t| {
                t.event_id == Some(event)
            })
            .await?;
        ensure!(
            claimed_at.elapsed() >= Duration::from_secs(3),
            "reclaimed after {:?}, before the 3 s lease expired",
            claimed_at.elapsed()
        );
        ensure!(
            turn.decision_kind == "MessageAcknowledged",
            "reclaimed turn is {}",
            turn.decision_kind
        );
        tokio::time::sleep(Duration::from_secs(4)).await;
        let checks::EventSettlement {
            turns,
            attempts,
            consumed,
        } = checks::event_settlement(&fleet.db, event).await?;
        ensure!(
            consumed && turns == 1,
            "event consumed={consumed} with {turns} turns"
        );
        ensure!(
            attempts >= 2,
            "attempts {attempts}: the reclaim was not a second claim"
        );
        fleet.check_invariants().await?;
        Ok(())
    })
    .await
}
