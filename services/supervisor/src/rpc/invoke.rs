//! InvokeTool: one governed tool call of a claimed tick. Owns the call's
//! steps in order: (a) the session still holds the lease, share-locked
//! until commit; (c) a repeated `call_id` returns the stored result and
//! runs nothing; (b) the tool is in the mode the instance's catalogue
//! resolves; (d) the arguments match the tool's schema; (e) the governance
//! gate; (f) the handler, in the same tenant transaction as the record of
//! the call. Must never run a tool outside the resolved toolset, never let
//! two calls with the same key both take effect (a concurrent loser rolls
//! back and answers the winner's result), and never turn a governance
//! violation or a tool's own error into an RPC error: both are answered in
//! band.

use genesis_core::ErrorCode;
use genesis_core::journal::{JournalKind, ToolCallStep, redact_step};
use genesis_proto::v1 as pb;
use genesis_store::StoreError;
use genesis_store::journal::NewStep;
use genesis_store::tool_invocations::{NewToolInvocation, find_in, insert_in, lease_held_in};
use serde_json::Value;
use tonic::Status;

use super::mode::resolve;
use super::model::InvokeTool;
use super::{AgentPodService, status_of};
use crate::metrics::Metrics;
use crate::tools::ToolContext;

/// A tool call's result, run now or replayed from its record.
fn tool_answer(
    result: Value,
    blocked: bool,
    side_effecting: bool,
    replayed: bool,
) -> pb::InvokeToolResponse {
    pb::InvokeToolResponse {
        result_json: result.to_string(),
        blocked,
        error: None,
        side_effecting,
        replayed,
    }
}

/// A call refused in band: the RPC succeeds and the pod's model reads why.
/// An in-band refusal of the call, counted under its catalogue code: the
/// model reads the code and the message and corrects its next call.
fn refused(
    metrics: &Metrics,
    tool_label: &str,
    code: ErrorCode,
    message: impl Into<String>,
) -> pb::InvokeToolResponse {
    metrics.tool_call(tool_label, code.as_str());
    pb::InvokeToolResponse {
        result_json: "{}".into(),
        blocked: false,
        error: Some(pb::ToolError {
            code: code.as_str().to_owned(),
            message: message.into(),
        }),
        side_effecting: false,
        replayed: false,
    }
}

impl AgentPodService {
    pub(super) async fn invoke(&self, req: InvokeTool) -> Result<pb::InvokeToolResponse, Status> {
        let (tenant_id, instance_id, session) = req.ids.triple();
        let tool_label = if self.registry.get(&req.tool_name).is_some() {
            req.tool_name.clone()
        } else {
            "unregistered".to_owned()
        };
        let metrics = &self.metrics;
        let mut tx = self
            .store
            .tenant_tx(tenant_id)
            .await
            .map_err(|e| status_of(e, metrics))?;
        // (a) the session still holds the lease; share-locked until commit.
        if !lease_held_in(tx.conn(), instance_id, session)
            .await
            .map_err(|e| status_of(e, metrics))?
        {
            return Err(status_of(StoreError::LeaseLost, metrics));
        }
        // (c) idempotency: a repeat returns the stored result, runs nothing.
        if let Some(prior) = find_in(tx.conn(), session, &req.call_id)
            .await
            .map_err(|e| status_of(e, metrics))?
        {
            metrics.tool_call(&tool_label, "replayed");
            return Ok(tool_answer(
                prior.result,
                prior.blocked,
                prior.side_effecting,
                true,
            ));
        }
        // (b) the tool is in the instance's resolved toolset (the
        // tenant's catalogue: its edit of a mode over the platform's).
        let catalogue = genesis_store::modes::instance_catalogue_in(tx.conn(), instance_id)
            .await
            .map_err(|e| status_of(e, metrics))?;
        let mode = resolve(
            catalogue.agent_type,
            catalogue.active_mode.as_deref(),
            &catalogue.modes,
        )
        .map_err(Status::from)?;
        if !mode.toolset.iter().any(|t| t == &req.tool_name) {
            return Ok(refused(
                metrics,
                &tool_label,
                ErrorCode::ToolNotAuthorized,
                format!(
                    "{} is not in the toolset of mode {}",
                    req.tool_name, mode.name
                ),
            ));
        }
        let Some(tool) = self.registry.get(&req.tool_name).cloned() else {
            return Ok(refused(
                metrics,
                &tool_label,
                ErrorCode::ToolNotImplemented,
                format!(
                    "{} is authorised in mode {} but not served by this supervisor",
                    req.tool_name, mode.name
                ),
            ));
        };
        // (d) arguments against the tool's schema: a precise in-band error.
        let args: Value = match serde_json::from_str(if req.arguments_json.trim().is_empty() {
            "{}"
        } else {
            &req.arguments_json
        }) {
            Ok(v) => v,
            Err(e) => {
                return Ok(refused(
                    metrics,
                    &tool_label,
                    ErrorCode::InvalidArguments,
                    format!("arguments_json is not JSON: {e}"),
                ));
            }
        };
        if let Err(e) = crate::tools::schema::validate(&tool.schema(), &args) {
            return Ok(refused(
                metrics,
                &tool_label,
                ErrorCode::InvalidArguments,
                e.to_string(),
            ));
        }
        // (e) governance: a violation is a blocked result, never an error.
        // Action limits count this instance's earlier calls of the tool.
        let calls = if crate::tools::constitution_gate::GOVERNED_TOOLS.contains(&tool.name()) {
            let (this_tick, today) = genesis_store::constitution::call_counts(
                tx.conn(),
                instance_id,
                session,
                tool.name(),
            )
            .await
            .map_err(|e| status_of(e, metrics))?;
            crate::tools::CallCounts { this_tick, today }
        } else {
            crate::tools::CallCounts::default()
        };
        let (result, blocked, side_effecting) = match self
            .governance
            .check(tenant_id, tool.name(), &args, calls)
            .await
        {
            Err(v) => (v.to_result(), true, false),
            Ok(()) => {
                // (f) the handler in the tenant transaction.
                let mut ctx = ToolContext {
                    conn: tx.conn(),
                    tenant_id,
                    instance_id,
                    session,
                };
                match tool.run(&mut ctx, &args).await {
                    Ok(result) => (result, false, tool.side_effecting()),
                    Err(e) => return Ok(refused(metrics, &tool_label, e.code, e.message)),
                }
            }
        };
        let record = NewToolInvocation {
            instance_id,
            session,
            call_id: req.call_id.clone(),
            tool_name: req.tool_name,
            arguments: args,
            result: result.clone(),
            blocked,
            side_effecting,
        };
        let inserted = insert_in(tx.conn(), tenant_id, &record).await;
        // The call's journal step commits with its effect, or neither does.
        let inserted = match (inserted, req.event_id) {
            (Ok(id), Some(event_id)) => self
                .journal_tool_call(&mut tx, tenant_id, event_id, record)
                .await
                .map(|()| id),
            (other, _) => other,
        };
        match inserted {
            Ok(_) => {
                tx.commit().await.map_err(|e| status_of(e, metrics))?;
                metrics.tool_call(&tool_label, if blocked { "blocked" } else { "ok" });
                Ok(tool_answer(result, blocked, side_effecting, false))
            }
            Err(StoreError::Conflict { .. }) => {
                // A concurrent call with the same key won: ours rolls back.
                drop(tx);
                let prior = self
                    .store
                    .tool_invocations()
                    .find(tenant_id, session, &req.call_id)
                    .await
                    .map_err(|e| status_of(e, metrics))?
                    .ok_or_else(|| Status::aborted("concurrent tool call vanished; retry"))?;
                metrics.tool_call(&tool_label, "replayed");
                Ok(tool_answer(
                    prior.result,
                    prior.blocked,
                    prior.side_effecting,
                    true,
                ))
            }
            Err(e) => Err(status_of(e, metrics)),
        }
    }

    /// Journal a tool call that ran (or that governance blocked) in the
    /// transaction of its effect: a resumed episode answers the same call
    /// from this step and runs nothing. Cleared of credentials first.
    async fn journal_tool_call(
        &self,
        tx: &mut genesis_store::TenantTx,
        tenant_id: uuid::Uuid,
        event_id: uuid::Uuid,
        record: NewToolInvocation,
    ) -> Result<(), StoreError> {
        let step = ToolCallStep {
            call_id: record.call_id,
            tool_name: record.tool_name,
            arguments: record.arguments,
            result: record.result,
            side_effecting: record.side_effecting,
            blocked: record.blocked,
        };
        let mut entry = serde_json::to_value(&step)
            .map_err(|e| StoreError::invalid("journal step", e.to_string()))?;
        redact_step(&mut entry);
        genesis_store::journal::write_in(
            tx.conn(),
            tenant_id,
            NewStep {
                event_id,
                instance_id: record.instance_id,
                session: record.session,
                kind: JournalKind::ToolCall,
                entry: &entry,
            },
            self.settings.journal_max_episode_bytes,
        )
        .await
        .map(|_| ())
    }
}
