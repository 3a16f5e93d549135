//! The episode journal's retention loop: every
//! `GENESIS_JOURNAL_PRUNE_EVERY_SECS` it prunes, across tenants and in
//! batches, the journal steps written more than
//! `GENESIS_JOURNAL_RETENTION_DAYS` ago (genesis-store's
//! `Journal::prune`). Every replica runs it; a step is deleted once
//! whichever runs first. Must never touch a ledger turn, nor hold one long
//! transaction: each batch is its own statement.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::state::AppState;

/// Steps deleted per statement.
const BATCH: i64 = 1000;
/// Batches per pass, so one pass is bounded even behind a long backlog (the
/// next pass continues).
const MAX_BATCHES: usize = 100;

/// Run until `shutdown`: one pass at start, then one per `every`.
pub async fn run(state: AppState, every: Duration, shutdown: CancellationToken) {
    let retention = state.config.journal_retention();
    loop {
        let mut pruned = 0u64;
        for _ in 0..MAX_BATCHES {
            if shutdown.is_cancelled() {
                return;
            }
            match state.store.journal().prune(retention, BATCH).await {
                Ok(n) => {
                    pruned += n;
                    if n < BATCH as u64 {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "journal retention: a prune failed; retrying next pass");
                    break;
                }
            }
        }
        if pruned > 0 {
            tracing::info!(
                pruned,
                retention_days = retention.as_secs() / 86_400,
                "journal retention: pruned old episode steps"
            );
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}
