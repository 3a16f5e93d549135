//! RecordCallAttempt and ReserveCredit: the money side of a tick's LLM
//! calls. RecordCallAttempt writes one attempt under its invocation's
//! snapshot, priced here and drawn from the tenant's weekly credit window;
//! ReserveCredit holds the worst case of the next turn against that window
//! before the turn is sent. Both requests come checked
//! ([`super::model`]). An attempt a genuine session reports after losing
//! its lease is still written (the provider billed it), without its
//! journal step. Must never take a cost from the pod (every cost is
//! computed in [`pricing`]), and never write an attempt it has not checked.

mod pricing;

use chrono::Utc;
use genesis_core::budget::week_start_for;
use genesis_proto::v1 as pb;
use genesis_store::StoreError;
use genesis_store::llm::{NewCallAttempt, PricedAttempt, TurnJournal};
use tonic::Status;
use uuid::Uuid;

use super::model::{RecordCallAttempt, ReportedStep, ReserveCredit};
use super::{AgentPodService, status_of};
use crate::bundle::effective_options;
use crate::cache::tick_memo::TickMemo;
use genesis_store::llm::worst_case_usd;

/// A reservation as the pod is answered with it: what was held (nothing
/// when refused) and the window it was checked against.
pub(super) fn reserve_answer(
    r: &genesis_store::credit::Reservation,
    amount: f64,
) -> pb::ReserveCreditResponse {
    pb::ReserveCreditResponse {
        granted: r.granted,
        reserved_usd: if r.granted { amount } else { 0.0 },
        spent_usd: r.spent_usd,
        held_usd: r.held_usd,
        limit_usd: r.limit_usd,
    }
}

impl AgentPodService {
    /// ReserveCredit: the worst case of the next LLM turn held against the
    /// tenant's weekly window before the turn is sent.
    pub(super) async fn reserve(
        &self,
        req: ReserveCredit,
    ) -> Result<pb::ReserveCreditResponse, Status> {
        let (tenant_id, instance_id, session) = req.ids.triple();
        let (prompt, output) = (req.prompt_tokens, req.max_output_tokens);
        let memo = self.memos.recall(session, tenant_id, instance_id, None);
        let opts = match memo.as_deref() {
            Some(m) => m.opts.clone(),
            None => {
                let ctx = self
                    .store
                    .llm()
                    .record_context(tenant_id, instance_id, "", req.first_model())
                    .await
                    .map_err(|e| status_of(e, &self.metrics))?;
                effective_options(&self.settings.options, &ctx.configs)
            }
        };
        if !opts.credit_enforcement_enabled {
            return Ok(pb::ReserveCreditResponse {
                granted: true,
                limit_usd: opts.weekly_credit_usd,
                ..Default::default()
            });
        }
        let amount = self.worst_case(&req.models, prompt, output).await?;
        let r = self
            .store
            .credit()
            .reserve(
                (tenant_id, instance_id, session),
                week_start_for(Utc::now()),
                opts.weekly_credit_usd,
                amount,
            )
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        if !r.granted {
            tracing::info!(
                %tenant_id,
                %instance_id,
                worst_case_usd = amount,
                spent_usd = r.spent_usd,
                held_usd = r.held_usd,
                limit_usd = r.limit_usd,
                "a turn's worst case would cross the weekly credit ceiling; not granted"
            );
        }
        Ok(reserve_answer(&r, amount))
    }

    /// The worst case of a turn of `models` with `prompt` tokens in and at
    /// most `output` out, at the dearest of the chain's prices (a model
    /// no row prices at the configured fallback price, never zero).
    pub(super) async fn worst_case(
        &self,
        models: &[String],
        prompt: u64,
        output: u64,
    ) -> Result<f64, Status> {
        let rows = self
            .store
            .llm()
            .list_pricing()
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        Ok(worst_case_usd(
            models,
            &rows,
            self.settings.unpriced_price,
            prompt,
            output,
        ))
    }

    /// RecordCallAttempt: one reported attempt checked, priced and written
    /// under its invocation's snapshot.
    pub(super) async fn record_attempt(
        &self,
        req: RecordCallAttempt,
    ) -> Result<pb::RecordCallAttemptResponse, Status> {
        let RecordCallAttempt {
            ids,
            attempt,
            journal,
        } = req;
        let (tenant_id, instance_id, session) = ids.triple();
        let memo = self.memos.recall(session, tenant_id, instance_id, None);
        let journal = journal.map(|(event_id, entry)| self.turn_journal(event_id, entry));
        let recorded = self
            .write_attempt(tenant_id, attempt, journal, memo.as_deref())
            .await?;
        Ok(pb::RecordCallAttemptResponse {
            snapshot_id: recorded.snapshot.id.to_string(),
            cost_usd: recorded.cost_usd,
            snapshot_cost_usd: recorded.snapshot.cost_usd,
        })
    }

    /// An LLM turn's checked step as the store journals it, under this
    /// supervisor's cap.
    pub(super) fn turn_journal(&self, event_id: Uuid, step: ReportedStep) -> TurnJournal {
        TurnJournal {
            event_id,
            entry: step.entry,
            max_episode_bytes: self.settings.journal_max_episode_bytes,
            system: step.system,
        }
    }

    /// Record one checked attempt under its invocation's snapshot, priced
    /// here and drawn from the credit window (RecordCallAttempt), with its
    /// turn's journal step when it ends one. `memo`: what this tick's
    /// claim read, which spares the context read when the price is held
    /// too.
    async fn write_attempt(
        &self,
        tenant_id: Uuid,
        attempt: NewCallAttempt,
        journal: Option<TurnJournal>,
        memo: Option<&TickMemo>,
    ) -> Result<genesis_store::llm::RecordedAttempt, Status> {
        let mut priced = self.price_attempt(tenant_id, attempt, memo).await?;
        priced.journal = journal;
        let recorded = match self.store.llm().record_priced(tenant_id, &priced).await {
            Err(StoreError::LeaseLost) if memo.is_some() => {
                self.record_after_lease_lost(tenant_id, &priced).await;
                return Err(status_of(StoreError::LeaseLost, &self.metrics));
            }
            r => r.map_err(|e| status_of(e, &self.metrics))?,
        };
        self.metrics.cost(priced.attempt.cost_usd);
        Ok(recorded)
    }

    /// An attempt reported by a session that lost its lease while the
    /// call was out: the provider billed it, so the books keep it (without
    /// its journal step) and the pod is still answered LEASE_LOST, which
    /// ends its tick. Only for a session this supervisor issued for the
    /// tenant's instance (its memo proves it): a session id nobody issued
    /// writes nothing, as before.
    async fn record_after_lease_lost(&self, tenant_id: Uuid, priced: &PricedAttempt) {
        let attempt = &priced.attempt;
        match self
            .store
            .llm()
            .record_after_lease_lost(tenant_id, attempt, priced.credit)
            .await
        {
            Ok(_) => {
                self.metrics.cost(attempt.cost_usd);
                tracing::warn!(
                    %tenant_id,
                    instance_id = %attempt.instance_id,
                    session_id = %attempt.session,
                    cost_usd = attempt.cost_usd,
                    "an attempt paid after its session lost the lease was recorded without its journal step"
                );
            }
            Err(e) => tracing::error!(
                %tenant_id,
                instance_id = %attempt.instance_id,
                session_id = %attempt.session,
                cost_usd = attempt.cost_usd,
                error = %e,
                "an attempt paid after its session lost the lease could not be recorded"
            ),
        }
    }
}
