//! The price of a call attempt: from its token usage and the pricing
//! table, the row chosen by the served model, else the requested one, at
//! the price held for the tick's catalogue epoch when there is one (see
//! [`crate::cache`]), else read with the attempt's context. Owns the rules
//! that the scripted provider is free and that a model no row prices is
//! charged the configured fallback price. Must never price an attempt at
//! zero because its model is unknown: the credit window must still draw
//! down.

use chrono::Utc;
use genesis_core::budget::week_start_for;
use genesis_core::sites::policy_site_for;
use genesis_store::llm::{CreditDraw, NewCallAttempt, PricedAttempt};
use tonic::Status;
use uuid::Uuid;

use crate::bundle::effective_options;
use crate::cache::tick_memo::TickMemo;
use crate::rpc::{AgentPodService, status_of};

/// An attempt's four disjoint token counts (checked non-negative before).
fn token_usage(a: &NewCallAttempt) -> genesis_core::pricing::TokenUsage {
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    genesis_core::pricing::TokenUsage {
        input_tokens: n(a.input_tokens),
        output_tokens: n(a.output_tokens),
        cache_read_tokens: n(a.cache_read_tokens),
        cache_write_tokens: n(a.cache_write_tokens),
    }
}

/// The most one turn of a chain of `models` can cost: the dearest of its
/// couples' worst cases (any couple may answer), a model without a row at
/// the fallback price; the scripted model is free.
pub(super) fn worst_case_usd(
    models: &[String],
    rows: &[genesis_store::llm::PricingRow],
    unpriced: genesis_core::pricing::ModelPrice,
    prompt_tokens: u64,
    max_output_tokens: u64,
) -> f64 {
    models
        .iter()
        .map(|m| {
            let price = genesis_store::llm::choose_pricing("", m, rows)
                .map(|c| c.row.price())
                .unwrap_or(unpriced);
            price.worst_case_usd(prompt_tokens, max_output_tokens)
        })
        .fold(0.0, f64::max)
}

/// Price `attempt` in place: its cost, the row it was billed at and how
/// that row was chosen. The scripted provider is free; a model no row
/// prices is charged `unpriced`, never nothing.
fn apply_price(
    attempt: &mut NewCallAttempt,
    chosen: Option<&genesis_store::llm::ChosenPrice>,
    unpriced: genesis_core::pricing::ModelPrice,
) -> genesis_core::pricing::PricingSource {
    use genesis_core::pricing::{ModelPrice, PricingSource};
    let (price, priced_as, source) = if attempt.provider == genesis_core::presets::SCRIPTED_PROVIDER
    {
        (ModelPrice::FREE, None, PricingSource::Free)
    } else {
        match chosen {
            Some(c) => (c.row.price(), Some(c.row.model.clone()), c.source),
            None => (unpriced, None, PricingSource::Fallback),
        }
    };
    attempt.cost_usd = price.cost_usd(&token_usage(attempt));
    attempt.priced_as = priced_as;
    attempt.pricing_source = Some(source);
    source
}

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
        Ok(PricedAttempt { attempt, credit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt_of(
        provider: &str,
        input: i64,
        output: i64,
        read: i64,
        write: i64,
    ) -> NewCallAttempt {
        NewCallAttempt {
            instance_id: Uuid::nil(),
            session: Uuid::nil(),
            invocation_id: "i".into(),
            site_id: String::new(),
            requested_model: "m".into(),
            served_model: "m-20250101".into(),
            provider: provider.into(),
            credential_name: "k".into(),
            outcome: "success".into(),
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            latency_ms: 1,
            error_message: String::new(),
            cost_usd: 0.0,
            priced_as: None,
            pricing_source: None,
            prompt_overlay_sha256: None,
        }
    }

    #[test]
    fn an_attempt_is_priced_by_its_row_free_when_scripted_and_never_zero_unpriced() {
        use genesis_core::pricing::{ModelPrice, PricingSource};
        let chosen = genesis_store::llm::ChosenPrice {
            row: genesis_store::llm::PricingRow {
                model: "m".into(),
                input_usd_per_mtok: 3.0,
                output_usd_per_mtok: 15.0,
                cache_read_usd_per_mtok: 0.3,
                cache_write_usd_per_mtok: 3.75,
                updated_at: Utc::now(),
            },
            source: PricingSource::Prefix,
        };
        let unpriced = ModelPrice::fallback(15.0, 75.0);
        let mut a = attempt_of("anthropic", 1_000_000, 100_000, 10_000, 1_000);
        assert_eq!(
            apply_price(&mut a, Some(&chosen), unpriced),
            PricingSource::Prefix
        );
        assert!(
            (a.cost_usd - (3.0 + 1.5 + 0.003 + 0.00375)).abs() < 1e-9,
            "{}",
            a.cost_usd
        );
        assert_eq!(a.priced_as.as_deref(), Some("m"));
        assert_eq!(a.pricing_source, Some(PricingSource::Prefix));

        let mut a = attempt_of("anthropic", 1_000_000, 0, 0, 0);
        assert_eq!(apply_price(&mut a, None, unpriced), PricingSource::Fallback);
        assert!((a.cost_usd - 15.0).abs() < 1e-9, "{}", a.cost_usd);
        assert_eq!(a.priced_as, None);

        // Even with a row for its model, the scripted provider spent nothing.
        let mut a = attempt_of("scripted", 1_000_000, 1_000_000, 0, 0);
        assert_eq!(
            apply_price(&mut a, Some(&chosen), unpriced),
            PricingSource::Free
        );
        assert_eq!(a.cost_usd, 0.0);
    }
}
