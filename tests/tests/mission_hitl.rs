//! Mission HITL (spec §2.4) end to end on the three real services: a
//! mission instance asks the operator with `mission_ask_user`, the question
//! lands on the decision queue as a `mission_question`, the operator's
//! answer through DecisionService RespondDecision enqueues exactly one
//! `OperatorAnsweredEscalation` back to the mission, and the mission's next
//! tick resumes from it as refinement guidance, exactly once. Refused
//! answers (a malformed or unknown decision id, another tenant's token)
//! enqueue nothing.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use genesis_core::{AgentType, InstanceStatus};
use genesis_e2e::{Admin, Findings, Fleet, FleetOptions, binaries_missing, bounded, metadata};
use genesis_proto::v1 as pb;
use genesis_store::inspect::fleet as checks;
use genesis_store::{NewInstance, Store, StoreOptions};
use tonic::Code;
use uuid::Uuid;

const T: Duration = Duration::from_secs(30);
const QUESTION: &str = "ask whether the EU or the US rollout ships first";

/// The resume events enqueued to `instance` (every OperatorAnsweredEscalation).
async fn resumes(fleet: &Fleet, instance: Uuid) -> anyhow::Result<Vec<(Uuid, serde_json::Value)>> {
    Ok(checks::escalation_answers(&fleet.db, instance).await?)
}

fn respond(tenant: &str, decision: &str, resolution: &str) -> pb::RespondDecisionRequest {
    pb::RespondDecisionRequest {
        tenant_id: tenant.to_owned(),
        decision_id: decision.to_owned(),
        resolution: resolution.to_owned(),
        notes: "then the US a week later".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mission_question_round_trips_through_the_operator_exactly_once() -> anyhow::Result<()> {
    if let Some(why) = binaries_missing() {
        println!("skipped: {why}");
        return Ok(());
    }
    bounded(Duration::from_secs(150), async {
        let fleet = Fleet::start(FleetOptions::new("mission-hitl", 1)).await?;
        let admin = fleet.admin().await?;
        let tenant = fleet.create_tenant_with("acme", false).await?;
        // The mission instance, created directly through the store (the
        // mission pump's side is outside this subsystem).
        let store = Store::connect(&fleet.db_url, StoreOptions::default()).await?;
        let mut new = NewInstance::foundational(AgentType::MissionResearch, InstanceStatus::Active);
        new.seed_initialized = false;
        let mission = store.instances().create(tenant.parse()?, new).await?.id;
        let mission_s = mission.to_string();
        let mut f = Findings::default();

        // The mission is told to ask: it calls mission_ask_user and escalates.
        fleet.send(&tenant, &mission_s, QUESTION).await?;
        let asked = fleet
            .wait_turn(&mission_s, 0, T, "the asking turn", |t| t.event_kind == "OperatorMessage")
            .await?;
        f.check(asked.decision_kind == "Escalated", format!("asking turn is {}", asked.decision_kind));
        let open = admin
            .decisions()
            .list_decisions(pb::ListDecisionsRequest { tenant_id: tenant.clone(), status: Some("open".into()) })
            .await?
            .into_inner()
            .decisions;
        let question = open
            .iter()
            .find(|d| d.kind == "mission_question")
            .cloned()
            .with_context(|| format!("no open mission_question on the queue: {open:?}"))?;
        let md = metadata(&question);
        f.check(md["source"] == "mission", format!("metadata lacks source=mission: {md}"));
        f.check(md["missionInstanceId"] == mission_s.as_str(), format!("metadata lacks missionInstanceId: {md}"));
        f.check(md["question"] == QUESTION, format!("metadata lacks the question: {md}"));
        f.check(question.instance_id.as_deref() == Some(mission_s.as_str()), "the question names no instance");
        ensure!(resumes(&fleet, mission).await?.is_empty(), "a resume exists before any answer");

        // Refused answers change nothing and enqueue nothing.
        let bad = admin.decisions().respond_decision(respond(&tenant, "not-a-uuid", "EU first")).await;
        f.check(
            matches!(&bad, Err(s) if s.code() == Code::InvalidArgument && s.message().contains("decision_id")),
            format!("a malformed decision id: {bad:?}"),
        );
        let unknown = admin
            .decisions()
            .respond_decision(respond(&tenant, &Uuid::new_v4().to_string(), "EU first"))
            .await;
        f.check(
            matches!(&unknown, Err(s) if s.code() == Code::NotFound),
            format!("an unknown decision id: {unknown:?}"),
        );
        let other = fleet.create_tenant_with("other", false).await?;
        let other_token = admin
            .tokens()
            .create_token(pb::CreateTokenRequest {
                scope: "operator".into(),
                tenant_id: Some(other.clone()),
                label: "other-operator".into(),
                ttl_seconds: Some(3600),
                pod_tenant_ids: vec![],
            })
            .await?
            .into_inner()
            .token;
        let outsider = Admin::connect(&fleet.control_endpoint(), &other_token).await?;
        let foreign = outsider.decisions().respond_decision(respond(&tenant, &question.id, "EU first")).await;
        f.check(
            matches!(&foreign, Err(s) if s.code() == Code::PermissionDenied),
            format!("another tenant's token on this tenant: {foreign:?}"),
        );
        let smuggled = outsider.decisions().respond_decision(respond(&other, &question.id, "EU first")).await;
        f.check(
            matches!(&smuggled, Err(s) if s.code() == Code::NotFound),
            format!("another tenant's token on its own tenant: {smuggled:?}"),
        );
        f.check(resumes(&fleet, mission).await?.is_empty(), "a refused answer enqueued a resume");
        let still = admin
            .decisions()
            .get_decision(pb::GetDecisionRequest { tenant_id: tenant.clone(), decision_id: question.id.clone() })
            .await?
            .into_inner();
        f.check(still.status == "open", format!("a refused answer changed the question to {}", still.status));

        // The operator answers: exactly one answer event to that mission.
        let before = fleet.last_turn(&mission_s).await?;
        let answered = admin
            .decisions()
            .respond_decision(respond(&tenant, &question.id, "EU first"))
            .await?
            .into_inner();
        f.check(!answered.already_resolved, "the first answer was reported already_resolved");
        let resume_id = answered.resume_event_id.clone().context("the answer enqueued no resume")?;
        let events = resumes(&fleet, mission).await?;
        f.check(events.len() == 1, format!("{} resume events after the answer", events.len()));
        if let Some((request, payload)) = events.first() {
            f.check(request.to_string() == question.id, "the resume names another request");
            f.check(payload["resolution"] == "EU first", format!("resume payload {payload}"));
            f.check(payload["resolutionNotes"] == "then the US a week later", format!("resume payload {payload}"));
        }

        // The mission's next tick resumes from it as refinement guidance.
        let resumed = fleet
            .wait_turn(&mission_s, before, T, "the resumed turn", |t| t.event_kind == "OperatorAnsweredEscalation")
            .await?;
        f.check(resumed.decision_kind == "EscalationResumed", format!("resumed turn is {}", resumed.decision_kind));
        f.check(resumed.event_id.map(|e| e.to_string()) == Some(resume_id.clone()), "the resumed turn consumed another event");
        let (summary, payload) =
            checks::ledger_summary_and_event_payload(&fleet.db, resumed.id).await?;
        let summary = summary.unwrap_or_default();
        f.check(
            summary.contains("Refined the mission plan") && summary.contains("EU first"),
            format!("the resumed turn did not plan from the refinement guidance: {summary:?}"),
        );
        f.check(payload["resolution"] == "EU first", format!("resumed turn payload {payload}"));

        // A second answer is idempotent: same resume, no new event, no new turn.
        let again = admin
            .decisions()
            .respond_decision(respond(&tenant, &question.id, "US first"))
            .await?
            .into_inner();
        f.check(again.already_resolved, "the second answer was not reported already_resolved");
        f.check(again.resume_event_id.as_deref() == Some(resume_id.as_str()), "the second answer returned another resume");
        f.check(
            again.decision.as_ref().is_some_and(|d| d.resolution == "EU first"),
            "the second answer overwrote the stored one",
        );
        fleet.wait_quiescent(T).await?;
        f.check(resumes(&fleet, mission).await?.len() == 1, "a second answer enqueued another resume");
        let resumed_turns = fleet
            .turns(&mission_s)
            .await?
            .iter()
            .filter(|t| t.event_kind == "OperatorAnsweredEscalation")
            .count();
        f.check(resumed_turns == 1, format!("the mission resumed {resumed_turns} times"));
        store.close().await;
        f.finish()
    })
    .await
}
