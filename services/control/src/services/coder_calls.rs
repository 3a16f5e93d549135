//! A coder's LLM calls (spec §2.3, §3.4): the model chain of its coding
//! task (TaskPresetChain), the credit hold of its next turn
//! (ReserveCoderCredit) and the record of each attempt
//! (RecordCoderAttempt). An attempt is priced here by the store's one
//! pricing rule ([`genesis_store::llm::apply_price`]: the scripted provider
//! free, an unpriced model at the platform's fallback price, never zero)
//! and drawn from the tenant's weekly credit window, the same window and
//! the same hold rule as an agent's turn, so coders and agents together
//! stay under the ceiling. Attempts are recorded against the task under
//! the call tag `Coder` and the site [`CODER_DEFAULT`]; they never count as
//! an agent's turn.
//!
//! Must never take a cost from the coder, hand out a credential's value
//! (the chain names credentials; the coder's Job mounts the keys), or act
//! on a task other than the one a coder token is bound to (the service
//! checks [`crate::auth::require_own_task`] before calling in here).

use chrono::Utc;
use genesis_core::budget::week_start_for;
use genesis_core::sites::CODER_DEFAULT;
use genesis_llm::preset::Overlays;
use genesis_proto::convert::invalid_argument;
use genesis_proto::v1;
use genesis_store::coding_tasks::CodingTaskRow;
use genesis_store::llm::{
    CreditDraw, NewCallAttempt, PresetCouple, apply_price, check_chain_models, choose_pricing,
    worst_case_usd,
};
use tonic::Status;
use uuid::Uuid;

use crate::state::AppState;
use crate::status::store_status;

fn to_pb(c: PresetCouple) -> v1::PresetCouple {
    v1::PresetCouple {
        model: c.model,
        provider: c.provider,
        backend: c.backend,
        credential_names: c.credentials,
    }
}

/// The task's model chain (see [`chain_of`]), read for the TaskPresetChain
/// RPC. For a coder (`for_coder`) a settled task has no calls left to make;
/// an operator may read a settled task's chain.
pub async fn preset_chain(
    state: &AppState,
    t: Uuid,
    task_id: Uuid,
    for_coder: bool,
) -> Result<v1::ResolvedPresetChain, Status> {
    let row = state
        .store
        .coding_tasks()
        .get(t, task_id)
        .await
        .map_err(store_status)?;
    if for_coder && row.is_settled() {
        return Err(Status::failed_precondition(format!(
            "the coding task is settled ({}): its coder has no calls left to make",
            row.status
        )));
    }
    chain_of(state, t, row).await
}

/// The model chain of a task row the caller has read: its preset (primary,
/// then the fallbacks, with the preset's overlays) while the preset exists,
/// else the couple the task recorded when it was created (a deleted
/// preset's primary, or the explicit couple).
pub async fn chain_of(
    state: &AppState,
    t: Uuid,
    row: CodingTaskRow,
) -> Result<v1::ResolvedPresetChain, Status> {
    let store = &state.store;
    let preset = match row.preset_id {
        Some(id) => store
            .llm()
            .list_presets(t)
            .await
            .map_err(store_status)?
            .into_iter()
            .find(|p| p.id == id),
        None => None,
    };
    let mut chain = v1::ResolvedPresetChain {
        requested_site_id: CODER_DEFAULT.to_owned(),
        resolved_site_id: CODER_DEFAULT.to_owned(),
        ..Default::default()
    };
    match preset {
        Some(p) => {
            // A malformed overlays object is treated as none, as a tick's
            // claim treats it: a bad overlay never stops the work.
            let o = serde_json::from_value::<Overlays>(p.overlays.clone()).unwrap_or_else(|e| {
                tracing::warn!(preset = %p.id, error = %e, "ignoring malformed preset overlays");
                Overlays::default()
            });
            chain.preset_id = p.id.to_string();
            chain.preset_name = p.name.clone();
            chain.couples = p.couples().into_iter().map(to_pb).collect();
            chain.prompt_overlay = o.prompt_overlay.unwrap_or_default();
            chain.routing_chain_id = o.routing_chain_id.unwrap_or_default();
            chain.tool_policy_id = o.tool_policy_id.unwrap_or_default();
            chain.sampling_profile_id = o.sampling_profile_id.unwrap_or_default();
            chain.limits_profile_id = o.limits_profile_id.unwrap_or_default();
        }
        None => {
            chain.couples = vec![v1::PresetCouple {
                model: row.model,
                provider: row.provider,
                backend: row.backend,
                credential_names: row.credential_names,
            }];
        }
    }
    Ok(chain)
}

/// A non-negative token count, or the field's refusal.
fn count(field: &str, v: i64) -> Result<u64, Status> {
    u64::try_from(v).map_err(|_| invalid_argument(field, "must be non-negative"))
}

/// The tenant's platform options as the store's configuration layers set
/// them: the weekly ceiling and whether it is enforced.
async fn options(
    state: &AppState,
    t: Uuid,
    served: &str,
    requested: &str,
) -> Result<
    (
        genesis_core::AgentDispatcherOptions,
        genesis_store::llm::RecordContext,
    ),
    Status,
> {
    let ctx = state
        .store
        .llm()
        .coder_record_context(t, served, requested)
        .await
        .map_err(store_status)?;
    let (opts, skipped) = genesis_core::AgentDispatcherOptions::default()
        .for_tenant(&ctx.configs.platform, &ctx.configs.effective);
    for e in skipped {
        tracing::warn!(tenant = %t, error = %e, "ignoring malformed system_configs value");
    }
    Ok((opts, ctx))
}

/// ReserveCoderCredit: the worst case of the coder's next turn (the
/// dearest couple of its chain at the prompt bound and the output cap)
/// held against the tenant's weekly window.
pub async fn reserve(
    state: &AppState,
    t: Uuid,
    task_id: Uuid,
    req: &v1::ReserveCoderCreditRequest,
) -> Result<v1::ReserveCreditResponse, Status> {
    check_chain_models(&req.models).map_err(store_status)?;
    let prompt = count("prompt_tokens", req.prompt_tokens)?;
    let output = count("max_output_tokens", req.max_output_tokens)?;
    let first = req.models.first().map(String::as_str).unwrap_or_default();
    let (opts, _) = options(state, t, "", first).await?;
    let store = &state.store;
    if !opts.credit_enforcement_enabled {
        // Nothing is held, but the task must still be one a coder runs.
        let row = store
            .coding_tasks()
            .get(t, task_id)
            .await
            .map_err(store_status)?;
        if row.is_settled() {
            return Err(Status::failed_precondition("the coding task is settled"));
        }
        return Ok(v1::ReserveCreditResponse {
            granted: true,
            limit_usd: opts.weekly_credit_usd,
            ..Default::default()
        });
    }
    let rows = store.llm().list_pricing().await.map_err(store_status)?;
    let amount = worst_case_usd(
        &req.models,
        &rows,
        state.config.unpriced_price(),
        prompt,
        output,
    );
    let r = store
        .credit()
        .reserve_coder(
            (t, task_id),
            week_start_for(Utc::now()),
            opts.weekly_credit_usd,
            amount,
        )
        .await
        .map_err(store_status)?;
    if !r.granted {
        tracing::info!(
            tenant = %t,
            task = %task_id,
            worst_case_usd = amount,
            spent_usd = r.spent_usd,
            held_usd = r.held_usd,
            limit_usd = r.limit_usd,
            "a coder turn's worst case would cross the weekly credit ceiling; not granted"
        );
    }
    Ok(v1::ReserveCreditResponse {
        granted: r.granted,
        reserved_usd: if r.granted { amount } else { 0.0 },
        spent_usd: r.spent_usd,
        held_usd: r.held_usd,
        limit_usd: r.limit_usd,
    })
}

/// RecordCoderAttempt: one reported attempt checked by the store's rule,
/// priced here and written against the task.
pub async fn record(
    state: &AppState,
    t: Uuid,
    task_id: Uuid,
    req: &v1::RecordCoderAttemptRequest,
) -> Result<v1::RecordCallAttemptResponse, Status> {
    let Some(a) = req.attempt.as_ref() else {
        return Err(invalid_argument("attempt", "required"));
    };
    let mut attempt = NewCallAttempt {
        instance_id: Uuid::nil(),
        session: Uuid::nil(),
        invocation_id: req.invocation_id.clone(),
        site_id: CODER_DEFAULT.to_owned(),
        requested_model: a.requested_model.clone(),
        served_model: a.served_model.clone(),
        provider: a.provider.clone(),
        credential_name: a.credential_name.clone(),
        outcome: a.outcome.clone(),
        input_tokens: a.input_tokens,
        output_tokens: a.output_tokens,
        cache_read_tokens: a.cache_read_tokens,
        cache_write_tokens: a.cache_write_tokens,
        latency_ms: a.latency_ms,
        error_message: a.error_message.clone(),
        cost_usd: 0.0,
        priced_as: None,
        pricing_source: None,
        prompt_overlay_sha256: None,
    };
    attempt.check_reported().map_err(store_status)?;
    // Providers report dated ids for the model they served; an unpriced
    // served id is priced as the requested model rather than at zero.
    let priced_model = if attempt.served_model.is_empty() {
        attempt.requested_model.clone()
    } else {
        attempt.served_model.clone()
    };
    let (opts, ctx) = options(state, t, &priced_model, &attempt.requested_model).await?;
    let chosen = choose_pricing(&attempt.served_model, &attempt.requested_model, &ctx.prices);
    let source = apply_price(&mut attempt, chosen.as_ref(), state.config.unpriced_price());
    if source == genesis_core::pricing::PricingSource::Fallback {
        tracing::warn!(
            tenant = %t,
            task = %task_id,
            model = %priced_model,
            cost_usd = attempt.cost_usd,
            "no price for model; coder attempt charged at the unpriced fallback price"
        );
    }
    let recorded = state
        .store
        .llm()
        .record_coder_attempt(
            t,
            task_id,
            &attempt,
            CreditDraw {
                week_start: week_start_for(Utc::now()),
                limit_usd: opts.weekly_credit_usd,
            },
        )
        .await
        .map_err(store_status)?;
    Ok(v1::RecordCallAttemptResponse {
        snapshot_id: recorded.snapshot.id.to_string(),
        cost_usd: recorded.cost_usd,
        snapshot_cost_usd: recorded.snapshot.cost_usd,
    })
}
