//! The replay RPCs (genesis_core::replay): ClaimReplay hands a pod the
//! replayed turn's journal, the chosen preset's chain and the schemas of
//! the tools the turn advertised; ReserveReplayCredit and
//! RecordReplayAttempt hold and draw the tenant's credit window as a
//! tick's turns do, with every attempt priced here and recorded under the
//! call tag Replay against the replay; CompleteReplay keeps the checked
//! outcome. Must never touch the instance's lease, run a tool, or take a
//! cost from the pod.

use chrono::Utc;
use genesis_core::budget::week_start_for;
use genesis_core::journal::{JournalKind, LlmTurnStep};
use genesis_core::modes::CONTROL_TERMINATORS;
use genesis_core::replay::{CLAIM_TTL, ReplayStatus};
use genesis_core::sites::policy_site_for;
use genesis_proto::convert::timestamp_from_chrono;
use genesis_proto::v1 as pb;
use genesis_store::llm::CreditDraw;
use genesis_store::replays::ReplayClaim;
use tonic::Status;

use super::claim::budget_to_proto;
use super::model::{ClaimReplay, CompleteReplay, RecordReplayAttempt, ReserveReplayCredit};
use super::record::reserve_answer;
use super::{AgentPodService, status_of};
use crate::bundle::effective_options;
use crate::presets::replay_chain;

use pb::claim_replay_response::Result as R;

impl AgentPodService {
    /// ClaimReplay: the replay claimed under a new session, with what the
    /// pod needs to run it.
    pub(super) async fn claim_replay(
        &self,
        req: ClaimReplay,
    ) -> Result<pb::ClaimReplayResponse, Status> {
        let ClaimReplay {
            tenant_id,
            replay_id,
        } = req;
        let store = |e| status_of(e, &self.metrics);
        let row = match self
            .store
            .replays()
            .claim(tenant_id, replay_id, CLAIM_TTL)
            .await
            .map_err(store)?
        {
            ReplayClaim::Claimed(row) => row,
            ReplayClaim::Held(until) => {
                return Ok(pb::ClaimReplayResponse {
                    result: Some(R::Held(pb::ReplayHeld {
                        claimed_until: Some(timestamp_from_chrono(until)),
                    })),
                });
            }
            ReplayClaim::Settled(status) => return Ok(settled(status)),
        };
        let session = row.session.unwrap_or_default();
        let ids = (tenant_id, replay_id, session);
        let presets = self
            .store
            .llm()
            .list_presets(tenant_id)
            .await
            .map_err(store)?;
        let Some(preset) = presets.iter().find(|p| p.id == row.preset_id) else {
            // Deleted since it was asked for: nothing to run, ever.
            let status = self
                .store
                .replays()
                .complete(ids, Err("the preset was deleted before the replay ran"))
                .await
                .map_err(store)?;
            return Ok(settled(status));
        };
        let journal = self
            .store
            .journal()
            .episode(tenant_id, row.event_id)
            .await
            .map_err(store)?;
        let ctx = self
            .store
            .llm()
            .record_context(tenant_id, row.instance_id, "", "")
            .await
            .map_err(store)?;
        let opts = effective_options(&self.settings.options, &ctx.configs);
        // The tools the turn's first request advertised, as the registry
        // defines them now; the terminators are the pod's own.
        let advertised: Vec<String> = journal
            .iter()
            .filter(|s| s.kind == JournalKind::LlmTurn)
            .find_map(|s| serde_json::from_value::<LlmTurnStep>(s.entry.clone()).ok())
            .map(|t| t.request.tools)
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !CONTROL_TERMINATORS.contains(&t.as_str()))
            .collect();
        self.metrics.claim("replay");
        Ok(pb::ClaimReplayResponse {
            result: Some(R::Bundle(pb::ReplayBundle {
                replay_id: replay_id.to_string(),
                session_id: session.to_string(),
                claimed_until: row.claimed_until.map(timestamp_from_chrono),
                instance_id: row.instance_id.to_string(),
                event_id: row.event_id.to_string(),
                turn_number: row.turn_number,
                preset_chain: Some(replay_chain(policy_site_for(ctx.agent_type), preset)),
                journal: journal
                    .into_iter()
                    .map(|step| pb::JournalStep {
                        seq: step.seq,
                        kind: step.kind.as_str().to_owned(),
                        entry_json: step.entry.to_string(),
                    })
                    .collect(),
                tools: self.registry.schemas_for(&advertised),
                budget: Some(budget_to_proto(&opts.tick_budget)),
                credit_enforced: opts.credit_enforcement_enabled,
            })),
        })
    }

    /// ReserveReplayCredit: the worst case of the replay's next turn held
    /// against the tenant's weekly window.
    pub(super) async fn reserve_replay(
        &self,
        req: ReserveReplayCredit,
    ) -> Result<pb::ReserveCreditResponse, Status> {
        let store = |e| status_of(e, &self.metrics);
        let tenant_id = req.ids.tenant_id;
        let configs = self
            .store
            .llm()
            .coder_record_context(tenant_id, "", "")
            .await
            .map_err(store)?
            .configs;
        let opts = effective_options(&self.settings.options, &configs);
        if !opts.credit_enforcement_enabled {
            // Nothing to hold, but a stale or unknown session still learns
            // so now rather than at its completion.
            self.store
                .replays()
                .check_session(req.ids.triple())
                .await
                .map_err(store)?;
            return Ok(pb::ReserveCreditResponse {
                granted: true,
                limit_usd: opts.weekly_credit_usd,
                ..Default::default()
            });
        }
        let amount = self
            .worst_case(&req.models, req.prompt_tokens, req.max_output_tokens)
            .await?;
        let draw = CreditDraw {
            week_start: week_start_for(Utc::now()),
            limit_usd: opts.weekly_credit_usd,
        };
        let r = self
            .store
            .replays()
            .reserve_credit(req.ids.triple(), draw, amount)
            .await
            .map_err(store)?;
        Ok(reserve_answer(&r, amount))
    }

    /// RecordReplayAttempt: one attempt priced here and recorded under the
    /// call tag Replay.
    pub(super) async fn record_replay_attempt(
        &self,
        req: RecordReplayAttempt,
    ) -> Result<pb::RecordReplayAttemptResponse, Status> {
        let RecordReplayAttempt { ids, attempt } = req;
        let priced = self.price_attempt(ids.tenant_id, attempt, None).await?;
        let recorded = self
            .store
            .replays()
            .record_attempt(ids.triple(), &priced.attempt, priced.credit)
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        self.metrics.cost(priced.attempt.cost_usd);
        Ok(pb::RecordReplayAttemptResponse {
            snapshot_id: recorded.snapshot.id.to_string(),
            cost_usd: recorded.cost_usd,
            snapshot_cost_usd: recorded.snapshot.cost_usd,
            current: recorded.current,
        })
    }

    /// CompleteReplay: the checked outcome (or the error) kept once.
    pub(super) async fn complete_replay(
        &self,
        req: CompleteReplay,
    ) -> Result<pb::CompleteReplayResponse, Status> {
        let status = self
            .store
            .replays()
            .complete(
                req.ids.triple(),
                req.result.as_ref().map_err(String::as_str),
            )
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        Ok(pb::CompleteReplayResponse {
            status: status.as_str().to_owned(),
        })
    }
}

fn settled(status: ReplayStatus) -> pb::ClaimReplayResponse {
    pb::ClaimReplayResponse {
        result: Some(R::Settled(pb::ReplaySettled {
            status: status.as_str().to_owned(),
        })),
    }
}
