//! RecordCallAttempt and ReserveCredit: the money side of a tick's LLM
//! calls. RecordCallAttempt writes one attempt under its invocation's
//! snapshot, priced here and drawn from the tenant's weekly credit window;
//! ReserveCredit holds the worst case of the next turn against that window
//! before the turn is sent. Owns the checks of a reported attempt (shared
//! with CompleteTick, whose last attempts travel with the completion) and
//! of a reservation. Must never take a cost from the pod (every cost is
//! computed in [`pricing`]), and never write an attempt it has not checked.

mod pricing;

use chrono::Utc;
use genesis_core::budget::week_start_for;
use genesis_proto::convert::{parse_uuid, require};
use genesis_proto::v1 as pb;
use genesis_store::StoreError;
use genesis_store::llm::NewCallAttempt;
use tonic::Status;
use uuid::Uuid;

use super::{AgentPodService, status_of};
use crate::bundle::effective_options;
use crate::cache::tick_memo::TickMemo;
use crate::error::store_status;
use pricing::worst_case_usd;

/// One reported call attempt, checked as RecordCallAttempt checks it, ready
/// to be priced and written (`site_id` and `cost_usd` are filled then). A
/// batch of them (CompleteTick's `call_attempts`) is checked whole before
/// any is written. `prefix` names where the attempt sits in the request:
/// `""` for RecordCallAttempt, `call_attempts[i].` for CompleteTick.
pub(super) fn reported_attempt(
    prefix: &str,
    ids: (Uuid, Uuid),
    invocation_id: &str,
    attempt: Option<&pb::CallAttempt>,
    prompt_overlay_sha256: &str,
) -> Result<NewCallAttempt, Status> {
    use genesis_proto::convert::invalid_argument as inv;
    let (instance_id, session) = ids;
    let a = require(&format!("{prefix}attempt"), attempt)?;
    // Every field is checked once, by the store's rule below; an empty
    // overlay hash means none.
    let prompt_overlay_sha256 =
        (!prompt_overlay_sha256.is_empty()).then(|| prompt_overlay_sha256.to_owned());
    let attempt = NewCallAttempt {
        instance_id,
        session,
        invocation_id: invocation_id.to_owned(),
        site_id: String::new(),
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
        prompt_overlay_sha256,
    };
    match attempt.check_reported() {
        Ok(()) => Ok(attempt),
        Err(StoreError::InvalidArgument { field, reason }) => {
            Err(inv(&format!("{prefix}{field}"), reason))
        }
        Err(e) => Err(store_status(&e)),
    }
}

impl AgentPodService {
    /// ReserveCredit: the worst case of the next LLM turn held against the
    /// tenant's weekly window before the turn is sent.
    pub(super) async fn reserve(
        &self,
        req: pb::ReserveCreditRequest,
    ) -> Result<pb::ReserveCreditResponse, Status> {
        use genesis_proto::convert::invalid_argument as inv;
        let session = parse_uuid("session_id", &req.session_id)?;
        let instance_id = parse_uuid("instance_id", &req.instance_id)?;
        let tenant_id = parse_uuid("tenant_id", &req.tenant_id)?;
        if req.models.is_empty() || req.models.len() > 64 {
            return Err(inv("models", "must name 1 to 64 models of the chain"));
        }
        if let Some(i) = req
            .models
            .iter()
            .position(|m| m.trim().is_empty() || m.len() > 200)
        {
            return Err(inv(&format!("models[{i}]"), "must be 1 to 200 bytes"));
        }
        let count =
            |field: &str, v: i64| u64::try_from(v).map_err(|_| inv(field, "must be non-negative"));
        let prompt = count("prompt_tokens", req.prompt_tokens)?;
        let output = count("max_output_tokens", req.max_output_tokens)?;
        let memo = self.memos.recall(session, tenant_id, instance_id, None);
        let opts = match memo.as_deref() {
            Some(m) => m.opts.clone(),
            None => {
                let ctx = self
                    .store
                    .llm()
                    .record_context(tenant_id, instance_id, "", &req.models[0])
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
        let rows = self
            .store
            .llm()
            .list_pricing()
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        let amount = worst_case_usd(
            &req.models,
            &rows,
            self.settings.unpriced_price,
            prompt,
            output,
        );
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
        Ok(pb::ReserveCreditResponse {
            granted: r.granted,
            reserved_usd: if r.granted { amount } else { 0.0 },
            spent_usd: r.spent_usd,
            held_usd: r.held_usd,
            limit_usd: r.limit_usd,
        })
    }

    /// RecordCallAttempt: one reported attempt checked, priced and written
    /// under its invocation's snapshot.
    pub(super) async fn record_attempt(
        &self,
        req: pb::RecordCallAttemptRequest,
    ) -> Result<pb::RecordCallAttemptResponse, Status> {
        let session = parse_uuid("session_id", &req.session_id)?;
        let instance_id = parse_uuid("instance_id", &req.instance_id)?;
        let tenant_id = parse_uuid("tenant_id", &req.tenant_id)?;
        let attempt = reported_attempt(
            "",
            (instance_id, session),
            &req.invocation_id,
            req.attempt.as_ref(),
            &req.prompt_overlay_sha256,
        )?;
        let memo = self.memos.recall(session, tenant_id, instance_id, None);
        let recorded = self
            .write_attempt(tenant_id, attempt, memo.as_deref())
            .await?;
        Ok(pb::RecordCallAttemptResponse {
            snapshot_id: recorded.snapshot.id.to_string(),
            cost_usd: recorded.cost_usd,
            snapshot_cost_usd: recorded.snapshot.cost_usd,
        })
    }

    /// Record one checked attempt under its invocation's snapshot, priced
    /// here and drawn from the credit window (RecordCallAttempt). `memo`:
    /// what this tick's claim read, which spares the context read when the
    /// price is held too.
    async fn write_attempt(
        &self,
        tenant_id: Uuid,
        attempt: NewCallAttempt,
        memo: Option<&TickMemo>,
    ) -> Result<genesis_store::llm::RecordedAttempt, Status> {
        let priced = self.price_attempt(tenant_id, attempt, memo).await?;
        let recorded = self
            .store
            .llm()
            .record_call_attempt(tenant_id, &priced.attempt, priced.credit)
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        self.metrics.cost(priced.attempt.cost_usd);
        Ok(recorded)
    }
}
