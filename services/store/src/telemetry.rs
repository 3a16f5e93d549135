//! The system's own telemetry as a tenant's agents read it
//! (`soa_query_telemetry`): turn, LLM-call, cost, error, latency and
//! tool-call aggregates over a recent window, from `agent_state_ledger`,
//! `llm_call_snapshots`, `llm_call_attempts` and `tool_invocations`. Must
//! never write, and never read another tenant's rows (it runs on the
//! caller's tenant transaction, where row-level security holds).

use crate::error::StoreError;

/// Longest window [`window_in`] reads, in hours (30 days).
pub const MAX_WINDOW_HOURS: i32 = 720;

/// The aggregates of the last `hours` hours, as one JSON object:
/// `{windowHours, turns, turnsByDecisionKind, llmCalls, inputTokens,
/// outputTokens, costUsd, attempts, attemptErrors, errorsByOutcome,
/// latencyMsAvg, latencyMsP95, toolCalls, blockedToolCalls}`. One
/// statement on the caller's tenant transaction; a window outside
/// 1..=[`MAX_WINDOW_HOURS`] → `InvalidArgument`, nothing read.
pub async fn window_in(
    conn: &mut sqlx::PgConnection,
    hours: i32,
) -> Result<serde_json::Value, StoreError> {
    if !(1..=MAX_WINDOW_HOURS).contains(&hours) {
        return Err(StoreError::invalid(
            "window_hours",
            format!("must be between 1 and {MAX_WINDOW_HOURS}, got {hours}"),
        ));
    }
    Ok(sqlx::query_scalar(
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
    .bind(hours)
    .fetch_one(conn)
    .await?)
}
