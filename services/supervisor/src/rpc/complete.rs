//! CompleteTick: the single passivation write of a tick. The request comes
//! checked ([`CompleteTick`](super::model::CompleteTick)), the carried
//! call attempts are priced, the turn's context is taken from the claim's
//! memo or read ([`context`]), the decision is mapped by genesis-core's
//! rules, and the store writes the turn with its attempts, the consumed
//! event and the next heartbeat in one transaction; a tick whose every
//! provider failed is deferred instead.
//! Must never trust a decision kind or a cost from the pod, and never
//! write on a lost lease: the store's session guard runs before anything
//! is written, and a lost lease writes none of the carried attempts.

mod context;

use genesis_core::mapper::{AgentDecisionMapper, Completion, TickOutcome};
use genesis_core::{AgentDispatcherOptions, AgentEventKind};
use genesis_proto::convert::timestamp_from_chrono;
use genesis_proto::v1 as pb;
use genesis_store::llm::{CallSnapshotRow, PricedAttempt};
use genesis_store::tick::{ExpectedPrior, TickCompletion as StoreCompletion, TickDecision};
use serde_json::json;
use tonic::Status;
use uuid::Uuid;

use super::model::{CompleteTick, ReportedTurn, SessionIds};
use super::{AgentPodService, status_of};
use context::TurnContext;

impl AgentPodService {
    pub(super) async fn complete(
        &self,
        req: CompleteTick,
    ) -> Result<pb::CompleteTickResponse, Status> {
        let CompleteTick {
            ids:
                SessionIds {
                    session,
                    instance_id,
                    tenant_id,
                },
            event_id,
            snapshot_id,
            pending,
            turn: reported,
        } = req;
        let metrics = &self.metrics;
        let memo = self
            .memos
            .recall(session, tenant_id, instance_id, Some(event_id));
        // The episode's last attempts, priced here and written by the
        // completion with its turn, after its session guard: a lost lease
        // writes none of them.
        let mut call_attempts = Vec::with_capacity(pending.len());
        for (attempt, step) in pending {
            let mut priced = self
                .price_attempt(tenant_id, attempt, memo.as_deref())
                .await?;
            priced.journal = step.map(|entry| self.turn_journal(event_id, entry));
            call_attempts.push(priced);
        }
        let turn = match memo {
            // What the claim read: no read. A snapshot named without
            // attempts is read below.
            Some(m) if snapshot_id.is_none() => {
                metrics.tick_context("complete_held");
                TurnContext::remembered(&m)
            }
            _ => {
                metrics.tick_context("complete_read");
                self.turn_context(tenant_id, event_id, instance_id, snapshot_id)
                    .await?
            }
        };
        let TurnContext {
            known_kind,
            prior,
            snapshot,
            opts,
            mode: turn_mode,
            agent_type,
        } = turn;
        if let Completion::ProviderFailed { reason } = &reported.completion {
            return self
                .defer(
                    (tenant_id, instance_id, session),
                    event_id,
                    call_attempts,
                    reason,
                    &opts,
                )
                .await;
        }
        let event_kind = known_kind.unwrap_or(AgentEventKind::AgentTick);
        // The counters as the claim or this read saw them: the store writes
        // the turn in one statement while they still hold under the lock.
        let expect =
            known_kind
                .zip(prior)
                .zip(agent_type)
                .map(|((event_kind, counters), agent_type)| ExpectedPrior {
                    counters,
                    event_kind,
                    agent_type,
                });
        let attempt_costs: Vec<f64> = call_attempts.iter().map(|p| p.attempt.cost_usd).collect();
        let store_completion = turn_record(
            reported,
            event_id,
            event_kind,
            turn_mode,
            snapshot,
            call_attempts,
        );
        let done = self
            .store
            .complete_tick_expecting(
                tenant_id,
                instance_id,
                session,
                store_completion,
                &opts,
                expect.as_ref(),
            )
            .await;
        // Written or refused, the memo has served: a retry reads again.
        self.memos.forget(session);
        let done = done.map_err(|e| status_of(e, metrics))?;
        for cost in attempt_costs {
            metrics.cost(cost);
        }
        metrics.complete(done.halted, done.prior_read);
        Ok(pb::CompleteTickResponse {
            decision_kind: done.decision_kind.as_str().to_owned(),
            phase: done.phase.as_str().to_owned(),
            next_tick_at: done.next_tick_at.map(timestamp_from_chrono),
            halted: done.halted,
            ledger_id: done.ledger_id.to_string(),
            turn_number: done.turn_number,
            attention_request_id: done.attention_request_id.map(|a| a.to_string()),
            deferred: false,
            consecutive_provider_failures: 0,
        })
    }

    /// CompleteTick for a tick whose every provider failed: no turn, the
    /// event deferred with its attempts recorded (see [`genesis_store::Store::defer_tick`]).
    async fn defer(
        &self,
        ids: (Uuid, Uuid, Uuid),
        event_id: Uuid,
        call_attempts: Vec<PricedAttempt>,
        reason: &str,
        opts: &AgentDispatcherOptions,
    ) -> Result<pb::CompleteTickResponse, Status> {
        let (tenant_id, instance_id, session) = ids;
        let deferred = self
            .store
            .defer_tick(ids, event_id, &call_attempts, reason, opts)
            .await;
        self.memos.forget(session);
        let deferred = deferred.map_err(|e| status_of(e, &self.metrics))?;
        for a in &call_attempts {
            self.metrics.cost(a.attempt.cost_usd);
        }
        self.metrics.provider_failure_deferral();
        tracing::warn!(
            %tenant_id,
            %instance_id,
            %event_id,
            consecutive_provider_failures = deferred.consecutive_provider_failures,
            visible_at = %deferred.visible_at,
            reason,
            "every llm provider failed; the tick's event is deferred"
        );
        Ok(pb::CompleteTickResponse {
            decision_kind: String::new(),
            phase: String::new(),
            next_tick_at: Some(timestamp_from_chrono(deferred.visible_at)),
            halted: false,
            ledger_id: String::new(),
            turn_number: 0,
            attention_request_id: deferred.attention_request_id.map(|a| a.to_string()),
            deferred: true,
            consecutive_provider_failures: deferred.consecutive_provider_failures,
        })
    }
}

/// The turn the store writes, from the pod's report and the turn's
/// context: the decision kind and phase by the shared mapper, the payload
/// the ledger records with them, the snapshot the turn links and the
/// attempts it carries.
fn turn_record(
    reported: ReportedTurn,
    event_id: Uuid,
    event_kind: AgentEventKind,
    turn_mode: Option<String>,
    snapshot: Option<CallSnapshotRow>,
    call_attempts: Vec<PricedAttempt>,
) -> StoreCompletion {
    let ReportedTurn {
        completion,
        raised_escalation,
        side_effecting_actions,
        budget_axis,
        reason,
        plan_input_hash,
        actions,
        reasoning_summary,
        wait_condition,
        consumption,
    } = reported;
    let was_idle = matches!(
        completion,
        Completion::ShortCircuited | Completion::CreditExhausted
    );
    let completion_name = completion_label(&completion);
    let mapped = AgentDecisionMapper::map(&TickOutcome {
        event_kind,
        raised_escalation,
        side_effecting_actions,
        completion,
    });
    let decision_payload = json!({
        "actions": actions,
        "waitCondition": wait_condition,
        "reasoningSummary": reasoning_summary,
        "activeMode": turn_mode,
        // How the episode ended and what it spent, so a budget cut or a
        // failure is visible on the turn (spec §3.5: the axis is recorded).
        "completion": completion_name,
        "budgetAxis": budget_axis.as_deref().filter(|a| !a.is_empty()),
        "endReason": (!reason.is_empty()).then_some(reason.as_str()),
        "consumption": consumption.map(|c| json!({
            "tokens": c.tokens, "toolCalls": c.tool_calls, "turns": c.turns, "wallMs": c.wall_ms,
        })),
    });
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    StoreCompletion {
        event_id,
        decision: TickDecision::Derived {
            kind: mapped.kind.clone(),
            phase: mapped.phase,
            planned: !was_idle,
        },
        plan_input_hash,
        actions,
        reasoning_summary: non_empty(&reasoning_summary),
        wait_condition: non_empty(&wait_condition),
        decision_payload,
        llm_call_snapshot_id: snapshot.as_ref().map(|s| s.id),
        served_model: snapshot.as_ref().and_then(|s| s.served_model.clone()),
        cost_usd: snapshot.as_ref().map(|s| s.cost_usd),
        input_tokens: snapshot.as_ref().map(|s| s.input_tokens),
        output_tokens: snapshot.as_ref().map(|s| s.output_tokens),
        call_attempts,
    }
}

/// The completion as the turn records it.
fn completion_label(c: &Completion) -> &'static str {
    match c {
        Completion::Complete => "complete",
        Completion::Blocked => "blocked",
        Completion::ShortCircuited => "short_circuited",
        Completion::CreditExhausted => "credit_exhausted",
        Completion::BudgetExhausted { .. } => "budget_exhausted",
        Completion::Failed { .. } => "failed",
        Completion::ProviderFailed { .. } => "provider_failed",
    }
}
