//! In-process counters of the supervisor: claims, completes, lease losses,
//! tool calls by tool and outcome, governance blocks, computed cost and
//! unpriced models. They are listed once as [`Family`] values, which both
//! the Prometheus text on `/metrics` and, when OTLP is configured, the
//! OpenTelemetry export read. Owns only counting; must never block a request
//! path (atomics and a short mutex).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use genesis_telemetry::metrics::Family;
use genesis_telemetry::prometheus::{Exposition, Kind};

use genesis_store::PriorRead;

use crate::cache::ledger::CacheOutcome;

/// The supervisor's counters. Shared behind an `Arc`.
#[derive(Debug, Default)]
pub struct Metrics {
    claims: Mutex<BTreeMap<&'static str, u64>>,
    ledger_cache: Mutex<BTreeMap<&'static str, u64>>,
    catalogue_cache: Mutex<BTreeMap<&'static str, u64>>,
    complete_reads: Mutex<BTreeMap<&'static str, u64>>,
    tick_context: Mutex<BTreeMap<&'static str, u64>>,
    claim_reads: Mutex<BTreeMap<&'static str, u64>>,
    completes: AtomicU64,
    halts: AtomicU64,
    lease_lost: AtomicU64,
    tool_calls: Mutex<BTreeMap<(String, String), u64>>,
    constitution_blocks: AtomicU64,
    /// Micro-dollars, so an atomic integer can hold the sum exactly enough.
    cost_micro_usd: AtomicU64,
    call_attempts: AtomicU64,
    unpriced_models: AtomicU64,
    provider_failure_deferrals: AtomicU64,
    tool_calls_total: AtomicU64,
    tool_errors_total: AtomicU64,
    store_batches: std::sync::OnceLock<std::sync::Arc<genesis_store::batch::BatchCounters>>,
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K) {
    if let Ok(mut m) = map.lock() {
        *m.entry(key).or_insert(0) += 1;
    }
}

impl Metrics {
    /// A ClaimTick answered with `outcome` (bundle, lease_held, nothing_due,
    /// not_active, error), or `resumed`: a bundle (counted as one too) that
    /// carries an earlier session's journal to resume.
    pub fn claim(&self, outcome: &'static str) {
        bump(&self.claims, outcome);
    }

    /// A claim's bundle read served by the ledger-tail cache as `outcome`
    /// (hit, miss, stale).
    pub fn ledger_cache(&self, outcome: CacheOutcome) {
        bump(&self.ledger_cache, outcome.as_str());
    }

    /// A claim's bundle catalogue served by the catalogue cache as
    /// `outcome` (hit, miss, stale).
    pub fn catalogue_cache(&self, outcome: CacheOutcome) {
        bump(&self.catalogue_cache, outcome.as_str());
    }

    /// A CompleteTick written; `halted` when the STUCK guard fired, `read`
    /// where its counters came from (a rising `stale` means the one-statement
    /// write keeps falling back to the lock).
    pub fn complete(&self, halted: bool, read: PriorRead) {
        bump(&self.complete_reads, read.as_str());
        self.completes.fetch_add(1, Ordering::Relaxed);
        if halted {
            self.halts.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Where a completion's or an attempt's context came from: `*_held`
    /// from the claim's memo (no read), `*_read` from a context read (a
    /// rising `complete_read` means ticks complete on another replica than
    /// the one that claimed them, or memos are evicted).
    pub fn tick_context(&self, outcome: &'static str) {
        bump(&self.tick_context, outcome);
    }

    /// How a claim's bundle was read: `joined` in the claim's own round
    /// trip, `separate` after it (an instance not claimed before, or a
    /// Compliance instance), `redone` after a joined read made for another
    /// type or site chain than the claimed instance's.
    pub fn claim_read(&self, outcome: &'static str) {
        bump(&self.claim_reads, outcome);
    }

    /// A session-guarded call found its lease gone.
    pub fn lease_lost(&self) {
        self.lease_lost.fetch_add(1, Ordering::Relaxed);
    }

    /// One InvokeTool answered with `outcome` (ok, replayed, blocked, or an
    /// in-band error code). Error outcomes feed the ops digest's error rate.
    pub fn tool_call(&self, tool: &str, outcome: &str) {
        self.tool_calls_total.fetch_add(1, Ordering::Relaxed);
        if !matches!(outcome, "ok" | "replayed" | "blocked") {
            self.tool_errors_total.fetch_add(1, Ordering::Relaxed);
        }
        if outcome == "blocked" {
            self.constitution_blocks.fetch_add(1, Ordering::Relaxed);
        }
        bump(&self.tool_calls, (tool.to_owned(), outcome.to_owned()));
    }

    /// A priced call attempt. The cost comes from provider-reported usage,
    /// so an absurd report must not wrap the counter back towards zero (a
    /// counter that falls reads as a restart): it saturates instead.
    pub fn cost(&self, usd: f64) {
        self.call_attempts.fetch_add(1, Ordering::Relaxed);
        if usd.is_finite() && usd > 0.0 {
            // `as` saturates a float past u64::MAX; the add saturates too.
            let micro = (usd * 1_000_000.0).round() as u64;
            let _ = self
                .cost_micro_usd
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                    Some(c.saturating_add(micro))
                });
        }
    }

    /// An attempt whose model has no price (charged the fallback price).
    pub fn unpriced_model(&self) {
        self.unpriced_models.fetch_add(1, Ordering::Relaxed);
    }

    /// A tick deferred because every provider of its chain failed.
    pub fn provider_failure_deferral(&self) {
        self.provider_failure_deferrals
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Also list the store's batching counters (statements and calls of
    /// the claim, call-attempt and completion functions).
    pub fn observe_store_batches(
        &self,
        counters: std::sync::Arc<genesis_store::batch::BatchCounters>,
    ) {
        let _ = self.store_batches.set(counters);
    }

    /// `(tool calls, tool errors)` since start, for the ops digest.
    pub fn tool_totals(&self) -> (u64, u64) {
        (
            self.tool_calls_total.load(Ordering::Relaxed),
            self.tool_errors_total.load(Ordering::Relaxed),
        )
    }

    /// Every counter with its current value, named once for both exports:
    /// `/metrics` ([`Metrics::render`]) and, when OTLP is configured, the
    /// observable instruments `genesis_telemetry` registers from this list.
    pub fn families(&self) -> Vec<Family> {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let by_outcome = |map: &Mutex<BTreeMap<&'static str, u64>>| {
            map.lock()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (vec![("outcome", (*k).to_owned())], *v))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        };
        let tool_calls = self
            .tool_calls
            .lock()
            .map(|m| {
                m.iter()
                    .map(|((tool, outcome), v)| {
                        (
                            vec![("tool", tool.clone()), ("outcome", outcome.clone())],
                            *v,
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let mut families = vec![
            Family::labelled(
                "genesis.supervisor.claims",
                "ClaimTick answers by outcome.",
                Kind::Counter,
                by_outcome(&self.claims),
            ),
            Family::labelled(
                "genesis.supervisor.ledger_cache",
                "Bundle reads by how the held ledger tail served them (hit, miss, stale).",
                Kind::Counter,
                by_outcome(&self.ledger_cache),
            ),
            Family::labelled(
                "genesis.supervisor.catalogue_cache",
                "Bundle reads by how the held catalogue served them (hit, miss, stale).",
                Kind::Counter,
                by_outcome(&self.catalogue_cache),
            ),
            Family::labelled(
                "genesis.supervisor.complete_reads",
                "CompleteTick writes by where their counters were read (held: one statement; stale: the lock decided after a changed read; locked: no read offered).",
                Kind::Counter,
                by_outcome(&self.complete_reads),
            ),
            Family::labelled(
                "genesis.supervisor.tick_context",
                "Completions and call attempts by where their context came from (complete_held, attempt_held: the claim's memo; complete_read, attempt_read: a context read).",
                Kind::Counter,
                by_outcome(&self.tick_context),
            ),
            Family::labelled(
                "genesis.supervisor.claim_reads",
                "Claims by how their bundle was read (joined: in the claim's round trip; separate: after it; redone: a joined read for another type or site chain, read again).",
                Kind::Counter,
                by_outcome(&self.claim_reads),
            ),
        ];
        for (name, help, v) in [
            (
                "genesis.supervisor.completes",
                "CompleteTick passivation writes.",
                &self.completes,
            ),
            (
                "genesis.supervisor.stuck_halts",
                "Ticks the STUCK guard halted.",
                &self.halts,
            ),
            (
                "genesis.supervisor.lease_lost",
                "Session-guarded calls answered LEASE_LOST.",
                &self.lease_lost,
            ),
            (
                "genesis.supervisor.constitution_blocks",
                "Tool calls blocked by the governance gate.",
                &self.constitution_blocks,
            ),
            (
                "genesis.supervisor.call_attempts",
                "LLM call attempts recorded.",
                &self.call_attempts,
            ),
            (
                "genesis.supervisor.unpriced_model_attempts",
                "Attempts whose model had no price (charged the fallback price).",
                &self.unpriced_models,
            ),
            (
                "genesis.supervisor.provider_failure_deferrals",
                "Ticks deferred because every LLM provider of the chain failed.",
                &self.provider_failure_deferrals,
            ),
        ] {
            families.push(Family::single(name, help, Kind::Counter, load(v)));
        }
        families.push(Family::decimal(
            "genesis.supervisor.cost_usd",
            "Cost computed server-side from usage and pricing.",
            Kind::Counter,
            6,
            load(&self.cost_micro_usd) as f64 / 1_000_000.0,
        ));
        families.push(Family::labelled(
            "genesis.supervisor.tool_calls",
            "InvokeTool answers by tool and outcome.",
            Kind::Counter,
            tool_calls,
        ));
        if let Some(batches) = self.store_batches.get() {
            let counts = batches.snapshot();
            let by_call = |pick: fn(&(&'static str, u64, u64)) -> u64| {
                counts
                    .iter()
                    .map(|c| (vec![("call", c.0.to_owned())], pick(c)))
                    .collect::<Vec<_>>()
            };
            families.push(Family::labelled(
                "genesis.supervisor.store_batch_statements",
                "Statements that carried the batched hot calls, by call (claim, claim_and_read, record_call_attempt, complete); a statement of the shared queue counts once for each kind it carried.",
                Kind::Counter,
                by_call(|c| c.1),
            ));
            families.push(Family::labelled(
                "genesis.supervisor.store_batch_calls",
                "Calls those statements answered; calls per statement is the mean batch size.",
                Kind::Counter,
                by_call(|c| c.2),
            ));
        }
        families
    }

    /// Prometheus text exposition format.
    pub fn render(&self) -> String {
        Exposition::new().families(&self.families()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absurd_cost_saturates_the_counter_instead_of_wrapping_it() {
        let m = Metrics::default();
        m.cost(0.5);
        m.cost(f64::MAX);
        m.cost(1e13);
        assert_eq!(m.cost_micro_usd.load(Ordering::Relaxed), u64::MAX);
        m.cost(f64::NAN);
        m.cost(-3.0);
        assert_eq!(m.cost_micro_usd.load(Ordering::Relaxed), u64::MAX);
        assert_eq!(m.call_attempts.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn render_lists_every_counter_with_labels() {
        let m = Metrics::default();
        m.claim("bundle");
        m.ledger_cache(CacheOutcome::Hit);
        m.tool_call("soa_send_message", "ok");
        m.tool_call("soa_send_message", "INVALID_ARGUMENTS");
        m.tool_call("soa_propose_decision", "blocked");
        m.cost(0.25);
        let text = m.render();
        assert!(
            text.contains("genesis_supervisor_claims_total{outcome=\"bundle\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("genesis_supervisor_ledger_cache_total{outcome=\"hit\"} 1"),
            "{text}"
        );
        assert!(text.contains("tool=\"soa_send_message\",outcome=\"INVALID_ARGUMENTS\"} 1"));
        assert!(text.contains("genesis_supervisor_constitution_blocks_total 1"));
        assert!(text.contains("genesis_supervisor_cost_usd_total 0.250000"));
        assert_eq!(m.tool_totals(), (3, 1));
    }

    #[test]
    fn store_batches_are_listed_by_call_once_observed() {
        let m = Metrics::default();
        assert!(
            !m.render().contains("store_batch"),
            "nothing before a store is observed"
        );
        m.observe_store_batches(std::sync::Arc::default());
        let text = m.render();
        assert!(
            text.contains("# TYPE genesis_supervisor_store_batch_statements_total counter"),
            "{text}"
        );
        assert!(text.contains("# TYPE genesis_supervisor_store_batch_calls_total counter"));
    }

    /// The page `/metrics` serves, byte for byte: the families are only a
    /// second reader of it, never a change of its names or formats.
    #[test]
    fn render_keeps_the_exposition_unchanged() {
        let m = Metrics::default();
        m.claim("bundle");
        m.claim("nothing_due");
        m.complete(true, PriorRead::Held);
        m.tick_context("complete_held");
        m.cost(0.5);
        m.tool_call("soa_send_message", "ok");
        assert_eq!(
            m.render(),
            "# HELP genesis_supervisor_claims_total ClaimTick answers by outcome.\n\
             # TYPE genesis_supervisor_claims_total counter\n\
             genesis_supervisor_claims_total{outcome=\"bundle\"} 1\n\
             genesis_supervisor_claims_total{outcome=\"nothing_due\"} 1\n\
             # HELP genesis_supervisor_ledger_cache_total Bundle reads by how the held ledger tail served them (hit, miss, stale).\n\
             # TYPE genesis_supervisor_ledger_cache_total counter\n\
             # HELP genesis_supervisor_catalogue_cache_total Bundle reads by how the held catalogue served them (hit, miss, stale).\n\
             # TYPE genesis_supervisor_catalogue_cache_total counter\n\
             # HELP genesis_supervisor_complete_reads_total CompleteTick writes by where their counters were read (held: one statement; stale: the lock decided after a changed read; locked: no read offered).\n\
             # TYPE genesis_supervisor_complete_reads_total counter\n\
             genesis_supervisor_complete_reads_total{outcome=\"held\"} 1\n\
             # HELP genesis_supervisor_tick_context_total Completions and call attempts by where their context came from (complete_held, attempt_held: the claim's memo; complete_read, attempt_read: a context read).\n\
             # TYPE genesis_supervisor_tick_context_total counter\n\
             genesis_supervisor_tick_context_total{outcome=\"complete_held\"} 1\n\
             # HELP genesis_supervisor_claim_reads_total Claims by how their bundle was read (joined: in the claim's round trip; separate: after it; redone: a joined read for another type or site chain, read again).\n\
             # TYPE genesis_supervisor_claim_reads_total counter\n\
             # HELP genesis_supervisor_completes_total CompleteTick passivation writes.\n\
             # TYPE genesis_supervisor_completes_total counter\n\
             genesis_supervisor_completes_total 1\n\
             # HELP genesis_supervisor_stuck_halts_total Ticks the STUCK guard halted.\n\
             # TYPE genesis_supervisor_stuck_halts_total counter\n\
             genesis_supervisor_stuck_halts_total 1\n\
             # HELP genesis_supervisor_lease_lost_total Session-guarded calls answered LEASE_LOST.\n\
             # TYPE genesis_supervisor_lease_lost_total counter\n\
             genesis_supervisor_lease_lost_total 0\n\
             # HELP genesis_supervisor_constitution_blocks_total Tool calls blocked by the governance gate.\n\
             # TYPE genesis_supervisor_constitution_blocks_total counter\n\
             genesis_supervisor_constitution_blocks_total 0\n\
             # HELP genesis_supervisor_call_attempts_total LLM call attempts recorded.\n\
             # TYPE genesis_supervisor_call_attempts_total counter\n\
             genesis_supervisor_call_attempts_total 1\n\
             # HELP genesis_supervisor_unpriced_model_attempts_total Attempts whose model had no price (charged the fallback price).\n\
             # TYPE genesis_supervisor_unpriced_model_attempts_total counter\n\
             genesis_supervisor_unpriced_model_attempts_total 0\n\
             # HELP genesis_supervisor_provider_failure_deferrals_total Ticks deferred because every LLM provider of the chain failed.\n\
             # TYPE genesis_supervisor_provider_failure_deferrals_total counter\n\
             genesis_supervisor_provider_failure_deferrals_total 0\n\
             # HELP genesis_supervisor_cost_usd_total Cost computed server-side from usage and pricing.\n\
             # TYPE genesis_supervisor_cost_usd_total counter\n\
             genesis_supervisor_cost_usd_total 0.500000\n\
             # HELP genesis_supervisor_tool_calls_total InvokeTool answers by tool and outcome.\n\
             # TYPE genesis_supervisor_tool_calls_total counter\n\
             genesis_supervisor_tool_calls_total{tool=\"soa_send_message\",outcome=\"ok\"} 1\n"
        );
    }
}
