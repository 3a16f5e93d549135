//! `soa_query_telemetry` (read-only): the system's own turn, cost, error and
//! latency statistics for the caller's tenant over a recent window, from
//! the ledger, `llm_call_snapshots`, `llm_call_attempts` and
//! `tool_invocations`. Must never write, and never read another tenant
//! (the connection is RLS-scoped).

use serde_json::{Value, json};

use super::args::limit;
use super::{Tool, ToolContext, ToolError};

/// The self-telemetry read.
pub struct SoaQueryTelemetry;

#[async_trait::async_trait]
impl Tool for SoaQueryTelemetry {
    fn name(&self) -> &'static str {
        "soa_query_telemetry"
    }

    fn description(&self) -> &'static str {
        "Read this tenant's agent telemetry for the last windowHours (default 24): turns by \
         decision kind, LLM calls, tokens and cost, provider errors, call latency, blocked tool calls."
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "windowHours": {"type": "integer", "minimum": 1, "maximum": 720}
            }
        })
    }

    async fn run(&self, ctx: &mut ToolContext<'_>, args: &Value) -> Result<Value, ToolError> {
        let hours = limit(args, "windowHours", 24, 1, 720)?;
        let stats: Value = sqlx::query_scalar(
            "WITH w AS (SELECT now() - make_interval(hours => $1::int) AS since)
             SELECT jsonb_build_object(
               'windowHours', $1::int,
               'turns', (SELECT count(*) FROM agent_state_ledger l, w WHERE l.created_at >= w.since),
               'turnsByDecisionKind', (SELECT coalesce(jsonb_object_agg(decision_kind, n), '{}'::jsonb) FROM
                   (SELECT decision_kind, count(*) AS n FROM agent_state_ledger l, w
                     WHERE l.created_at >= w.since GROUP BY decision_kind) k),
               'llmCalls', (SELECT count(*) FROM llm_call_snapshots s, w WHERE s.created_at >= w.since),
               'inputTokens', (SELECT coalesce(sum(input_tokens), 0) FROM llm_call_snapshots s, w WHERE s.created_at >= w.since),
               'outputTokens', (SELECT coalesce(sum(output_tokens), 0) FROM llm_call_snapshots s, w WHERE s.created_at >= w.since),
               'costUsd', (SELECT coalesce(sum(cost_usd), 0)::float8 FROM llm_call_snapshots s, w WHERE s.created_at >= w.since),
               'attempts', (SELECT count(*) FROM llm_call_attempts a, w WHERE a.created_at >= w.since),
               'attemptErrors', (SELECT count(*) FROM llm_call_attempts a, w WHERE a.created_at >= w.since AND a.outcome <> 'success'),
               'errorsByOutcome', (SELECT coalesce(jsonb_object_agg(outcome, n), '{}'::jsonb) FROM
                   (SELECT outcome, count(*) AS n FROM llm_call_attempts a, w
                     WHERE a.created_at >= w.since AND a.outcome <> 'success' GROUP BY outcome) e),
               'latencyMsAvg', (SELECT avg(latency_ms)::float8 FROM llm_call_attempts a, w WHERE a.created_at >= w.since),
               'latencyMsP95', (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms)::float8
                                  FROM llm_call_attempts a, w WHERE a.created_at >= w.since),
               'toolCalls', (SELECT count(*) FROM tool_invocations t, w WHERE t.created_at >= w.since),
               'blockedToolCalls', (SELECT count(*) FROM tool_invocations t, w WHERE t.created_at >= w.since AND t.blocked))",
        )
        .bind(i32::try_from(hours).unwrap_or(24))
        .fetch_one(&mut *ctx.conn)
        .await?;
        Ok(stats)
    }
}
