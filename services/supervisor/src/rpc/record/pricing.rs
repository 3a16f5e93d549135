//! The price of a call attempt: from its token usage and the pricing
//! table, the row chosen by the served model, else the requested one, at
//! the price held for the tick's catalogue epoch when there is one (see
//! [`crate::cache`]), else read with the attempt's context. The rules
//! themselves (the scripted provider is free, a model no row prices is
//! charged the configured fallback price) are the store's
//! [`genesis_store::llm::apply_price`], which control prices a coder's
//! attempts with too. Must never price an attempt at zero because its
//! model is unknown: the credit window must still draw down.

use chrono::Utc;
use genesis_core::budget::week_start_for;
use genesis_core::sites::policy_site_for;
use genesis_store::llm::{CreditDraw, NewCallAttempt, PricedAttempt, apply_price};
use tonic::Status;
use uuid::Uuid;

use crate::bundle::effective_options;
use crate::cache::tick_memo::TickMemo;
use crate::rpc::{AgentPodService, status_of};

impl AgentPodService {
    /// Price one checked attempt from usage and the pricing table, set its
    /// policy site and the credit window it draws from (RecordCallAttempt,
    /// and each of CompleteTick's `call_attempts`, which the completion
    /// writes with its turn).
    pub(in crate::rpc) async fn price_attempt(
        &self,
        tenant_id: Uuid,
        mut attempt: NewCallAttempt,
        memo: Option<&TickMemo>,
    ) -> Result<PricedAttempt, Status> {
        let metrics = &self.metrics;
        // Providers report dated or suffixed ids for the model they served
        // (`gpt-4o-2024-08-06` for `gpt-4o`); an unpriced served id is priced
        // as the requested model rather than at zero, so the credit window
        // still draws down.
        let priced_model = if attempt.served_model.is_empty() {
            &attempt.requested_model
        } else {
            &attempt.served_model
        };
        let held = memo.and_then(|m| {
            self.memos
                .price(m.catalogue_epoch, priced_model, &attempt.requested_model)
                .map(|price| (m, price))
        });
        let (agent_type, opts, price) = match held {
            Some((m, price)) => {
                metrics.tick_context("attempt_held");
                (m.agent_type, m.opts.clone(), price)
            }
            None => {
                metrics.tick_context("attempt_read");
                // One read: the instance's type (for the site), the DB-first
                // config and the price of the served model, else of the
                // requested one, with the epoch it was read at.
                let ctx = self
                    .store
                    .llm()
                    .record_context(
                        tenant_id,
                        attempt.instance_id,
                        priced_model,
                        &attempt.requested_model,
                    )
                    .await
                    .map_err(|e| status_of(e, metrics))?;
                let chosen = genesis_store::llm::choose_pricing(
                    &attempt.served_model,
                    &attempt.requested_model,
                    &ctx.prices,
                );
                self.memos.learn_price(
                    ctx.catalogue_epoch,
                    priced_model,
                    &attempt.requested_model,
                    chosen.clone(),
                );
                let opts = effective_options(&self.settings.options, &ctx.configs);
                (ctx.agent_type, opts, chosen)
            }
        };
        let priced_model = priced_model.clone();
        let source = apply_price(&mut attempt, price.as_ref(), self.settings.unpriced_price);
        if source == genesis_core::pricing::PricingSource::Fallback {
            metrics.unpriced_model();
            tracing::warn!(
                model = %priced_model,
                cost_usd = attempt.cost_usd,
                "no price for model; attempt charged at the unpriced fallback price"
            );
        }
        attempt.site_id = policy_site_for(agent_type).to_owned();
        let credit = CreditDraw {
            week_start: week_start_for(Utc::now()),
            limit_usd: opts.weekly_credit_usd,
        };
        Ok(PricedAttempt {
            attempt,
            credit,
            journal: None,
        })
    }
}
