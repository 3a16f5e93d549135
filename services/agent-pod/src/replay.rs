//! Running a replay (genesis_core::replay): a turn's episode asked again of
//! another preset's chain, as a dry run. The pod claims the replay from the
//! supervisor (the turn's journal, the chosen chain, the advertised tools),
//! runs the invoker in its replay mode from the conversation the original
//! episode opened with — every tool with an effect answered "not executed
//! (replay)", every read-only one from the journal — and reports the
//! alternative decision. Its attempts are recorded against the replay as
//! they happen, so what it cost is on the books even if the pod dies.
//!
//! This module must never call InvokeTool, CompleteTick or anything else
//! of the instance's own tick: a replay changes nothing of the agent.

use std::sync::Arc;
use std::time::Duration;

use genesis_core::replay::{CLAIM_TTL, ReplayOutcome};
use genesis_proto::v1 as pb;
use uuid::Uuid;

use crate::invoker::{
    EpisodeEnd, EpisodeReport, EpisodeSpec, ReplaySpec, budget_of, terminator_specs,
};
use crate::model::{PresetChain, TickBudget, ToolSchema};
use crate::planning::PodContext;
use crate::resume::Resume;
use crate::supervisor::TickIds;
use crate::worker::{Disposition, WorkerSettings};

use pb::claim_replay_response::Result as R;

/// Claim, run and complete one replay; the answer says how to settle its
/// message. A replay another claim holds is handed back until that claim
/// lapses; a settled one is acknowledged.
pub async fn process_replay(
    ctx: &PodContext,
    settings: &WorkerSettings,
    tenant_id: Uuid,
    replay_id: Uuid,
) -> Disposition {
    let claim = ctx
        .supervisor
        .claim_replay(pb::ClaimReplayRequest {
            replay_id: replay_id.to_string(),
            tenant_id: tenant_id.to_string(),
        })
        .await;
    let bundle = match claim {
        Ok(pb::ClaimReplayResponse {
            result: Some(R::Bundle(b)),
        }) => b,
        Ok(pb::ClaimReplayResponse {
            result: Some(R::Settled(s)),
        }) => {
            tracing::info!(status = %s.status, "replay already settled; ack");
            return Disposition::Ack;
        }
        Ok(pb::ClaimReplayResponse {
            result: Some(R::Held(held)),
        }) => {
            // Handed back until that claim lapses: a live pod finishes it
            // by then, a dead one's is taken over then.
            let delay = held_delay(held.claimed_until.as_ref(), settings.lease_held_delay);
            tracing::info!(
                ?delay,
                "replay claimed by another pod; NAK until its claim lapses"
            );
            return Disposition::Nak(delay);
        }
        Ok(pb::ClaimReplayResponse { result: None }) => {
            tracing::error!("replay claim answer carries no result; NAK");
            return Disposition::Nak(settings.retry_delay);
        }
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "replay claim failed transiently; NAK");
            return Disposition::Nak(settings.retry_delay);
        }
        Err(e) => {
            tracing::error!(error = %e, "replay claim refused; terminating the message");
            return Disposition::Term;
        }
    };
    let ids = TickIds {
        session_id: bundle.session_id.clone(),
        instance_id: bundle.instance_id.clone(),
        tenant_id: tenant_id.to_string(),
    };
    let result = match spec_of(ctx, bundle) {
        Ok(spec) => {
            let report = ctx.invoker.run_episode(&ctx.supervisor, &ids, spec).await;
            match report {
                Ok(report) => outcome_of(report),
                Err(e) if e.is_lease_lost() => {
                    tracing::warn!(error = %e, "replay taken over or settled meanwhile; ack");
                    return Disposition::Ack;
                }
                Err(e) if e.is_transient() => {
                    // Its claim lapses; a later delivery runs it again.
                    tracing::warn!(error = %e, "replay interrupted by a transient failure; NAK");
                    return Disposition::Nak(settings.retry_delay);
                }
                Err(e) => Err(format!("the replay could not run: {e}")),
            }
        }
        Err(e) => Err(e),
    };
    let (outcome_json, error) = match &result {
        Ok(o) => (serde_json::to_string(o).unwrap_or_default(), String::new()),
        Err(e) => (String::new(), e.clone()),
    };
    match ctx
        .supervisor
        .complete_replay(pb::CompleteReplayRequest {
            replay_id: replay_id.to_string(),
            tenant_id: ids.tenant_id.clone(),
            session_id: ids.session_id.clone(),
            outcome_json,
            error,
        })
        .await
    {
        Ok(done) => {
            tracing::info!(status = %done.status, "replay completed");
            Disposition::Ack
        }
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "replay completion failed transiently; NAK");
            Disposition::Nak(settings.retry_delay)
        }
        Err(e) => {
            tracing::warn!(error = %e, "replay completion refused; ack");
            Disposition::Ack
        }
    }
}

/// How long to hand a held replay's message back for: until the holding
/// claim lapses (a second past it), never less than `floor` nor more than
/// a claim's whole TTL.
fn held_delay(until: Option<&prost_types::Timestamp>, floor: Duration) -> Duration {
    let left = until
        .and_then(|t| chrono::DateTime::from_timestamp(t.seconds, 0))
        .and_then(|at| (at - chrono::Utc::now()).to_std().ok())
        .unwrap_or_default();
    (left + Duration::from_secs(1)).clamp(floor, CLAIM_TTL + Duration::from_secs(1))
}

/// The episode a replay runs: the original conversation and tools, the
/// chosen chain, the budget the original was claimed with (else the
/// tenant's standing envelope). `Err` names why it cannot run at all.
fn spec_of(ctx: &PodContext, bundle: pb::ReplayBundle) -> Result<EpisodeSpec, String> {
    let resume = Resume::from_steps(bundle.journal).map_err(|e| e.to_string())?;
    let invocation_id = Uuid::now_v7().to_string();
    let (resume, journal_tools, recorded_budget) = resume
        .for_replay(invocation_id.clone())
        .ok_or_else(|| "the turn's journal holds no LLM turn to start from".to_owned())?;
    let chain = PresetChain::from(bundle.preset_chain.ok_or("the claim named no chain")?);
    if chain.couples.is_empty() {
        return Err("the preset has no couple to call".into());
    }
    let budget = match recorded_budget {
        Some(b) => budget_of(&b),
        None => TickBudget::from(bundle.budget.unwrap_or_default()),
    };
    let mut tools: Vec<genesis_llm::ToolSpec> = bundle
        .tools
        .into_iter()
        .map(ToolSchema::from)
        .map(|t| genesis_llm::ToolSpec {
            parameters: ctx.tool_schemas.parameters(&t.name, &t.json_schema),
            name: t.name,
            description: t.description,
        })
        .collect();
    tools.extend(terminator_specs());
    Ok(EpisodeSpec {
        invocation_id,
        // Kept from the journal: the replay asks with the original prompt.
        system_prompt: String::new(),
        prompt_overlay_sha256: String::new(),
        objective: String::new(),
        tools: Arc::from(tools),
        authorized: Default::default(),
        budget,
        preset_chain: chain,
        credit_enforced: bundle.credit_enforced,
        event_id: bundle.event_id,
        resume,
        replay: Some(ReplaySpec {
            replay_id: bundle.replay_id,
            journal_tools,
        }),
    })
}

/// The alternative decision from what the replayed episode did; `Err` when
/// no model could be reached at all (nothing to show beside the original).
fn outcome_of(report: EpisodeReport) -> Result<ReplayOutcome, String> {
    let end = match report.end {
        EpisodeEnd::Complete => "Complete".to_owned(),
        EpisodeEnd::Blocked => "Blocked".to_owned(),
        EpisodeEnd::BudgetExhausted(axis) => format!("BudgetExhausted:{axis}"),
        EpisodeEnd::CreditExhausted => "CreditExhausted".to_owned(),
        EpisodeEnd::Failed => "Failed".to_owned(),
        EpisodeEnd::ProviderFailed if report.replayed.is_empty() => {
            return Err(report.reason);
        }
        EpisodeEnd::ProviderFailed => "Failed".to_owned(),
    };
    Ok(ReplayOutcome {
        end,
        reasoning_summary: report.reasoning_summary,
        wait_condition: report.wait_condition,
        reason: report.reason,
        actions: report.replayed,
        turns: u32::try_from(report.used.turns).unwrap_or(0),
        input_tokens: report.input_tokens,
        output_tokens: report.output_tokens,
        served_models: report.served_models,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_replay_is_handed_back_until_its_claim_lapses() {
        let floor = Duration::from_secs(2);
        assert_eq!(held_delay(None, floor), floor);
        let past = prost_types::Timestamp {
            seconds: chrono::Utc::now().timestamp() - 60,
            nanos: 0,
        };
        assert_eq!(held_delay(Some(&past), floor), floor);
        let soon = prost_types::Timestamp {
            seconds: chrono::Utc::now().timestamp() + 120,
            nanos: 0,
        };
        let d = held_delay(Some(&soon), floor);
        assert!(
            d > Duration::from_secs(110) && d <= Duration::from_secs(121),
            "{d:?}"
        );
        let far = prost_types::Timestamp {
            seconds: chrono::Utc::now().timestamp() + 100_000,
            nanos: 0,
        };
        assert_eq!(
            held_delay(Some(&far), floor),
            CLAIM_TTL + Duration::from_secs(1)
        );
    }

    fn report(end: EpisodeEnd, replayed: usize) -> EpisodeReport {
        EpisodeReport {
            end,
            reason: "LLM call failed: overloaded".into(),
            reasoning_summary: "s".into(),
            wait_condition: "w".into(),
            actions: vec![],
            raised_escalation: false,
            side_effecting_actions: 0,
            snapshot_id: None,
            pending_attempts: vec![],
            used: Default::default(),
            llm_calls: 1,
            nudges: 0,
            replayed: (0..replayed)
                .map(|_| genesis_core::replay::ReplayAction {
                    tool_name: "soa_send_message".into(),
                    arguments: serde_json::json!({}),
                    result: serde_json::json!({}),
                    answered: genesis_core::replay::Answered::NotExecuted,
                })
                .collect(),
            input_tokens: 0,
            output_tokens: 0,
            served_models: vec![],
        }
    }

    #[test]
    fn a_replay_no_model_answered_fails_and_every_other_end_is_an_outcome() {
        assert_eq!(
            outcome_of(report(EpisodeEnd::ProviderFailed, 0)),
            Err("LLM call failed: overloaded".into())
        );
        assert_eq!(
            outcome_of(report(EpisodeEnd::ProviderFailed, 1))
                .unwrap()
                .end,
            "Failed"
        );
        assert_eq!(
            outcome_of(report(EpisodeEnd::BudgetExhausted("turns"), 0))
                .unwrap()
                .end,
            "BudgetExhausted:turns"
        );
        for (end, text) in [
            (EpisodeEnd::Complete, "Complete"),
            (EpisodeEnd::Blocked, "Blocked"),
            (EpisodeEnd::CreditExhausted, "CreditExhausted"),
            (EpisodeEnd::Failed, "Failed"),
        ] {
            let o = outcome_of(report(end, 1)).unwrap();
            assert_eq!(o.end, text);
            assert!(o.check().is_ok(), "{text}");
        }
    }
}
