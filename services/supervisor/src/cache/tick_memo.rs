//! What the supervisor remembers of a tick it claimed, until the tick
//! completes: the claimed event, the instance's type, mode and counters,
//! and the options its catalogue's configuration yields. With it,
//! CompleteTick and the call attempts it carries need no context read
//! (`genesis_complete_context`, `genesis_record_context`) when this same
//! supervisor took the claim. Also holds model prices for one catalogue
//! epoch (a price write raises it), so an attempt of a tick claimed at it is
//! priced without a read.
//!
//! Owns the byte budget of ticks in flight and the rules saying when a
//! memo or a held price applies. Must never be trusted for what a write
//! decides: the session guard refuses a lost lease, and the turn write
//! compares the counters and event kind under the row lock. A memo only
//! spares reading again what the claim already read.
//! A tick runs under the configuration, mode and prices it was claimed
//! with; a change committed meanwhile is in force from the next claim.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use genesis_core::{AgentDispatcherOptions, AgentEventKind, AgentType};
use genesis_store::PriorCounters;
use genesis_store::llm::ChosenPrice;
use uuid::Uuid;

use super::budget::BudgetLru;

/// One claimed tick, as its claim read it.
#[derive(Debug, Clone, PartialEq)]
pub struct TickMemo {
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub event_id: Uuid,
    pub event_kind: AgentEventKind,
    pub agent_type: AgentType,
    pub active_mode: Option<String>,
    pub prior: PriorCounters,
    /// The catalogue epoch the claim's bundle was read at: current then.
    pub catalogue_epoch: i64,
    /// The options the claim computed from its catalogue's configuration,
    /// computed once per tick.
    pub opts: AgentDispatcherOptions,
}

impl TickMemo {
    /// Whether a call naming this tenant, instance (and, for a completion,
    /// event) is the tick this memo was taken for. Any other call reads as
    /// before, and the store refuses it as before.
    pub fn applies(&self, tenant_id: Uuid, instance_id: Uuid, event_id: Option<Uuid>) -> bool {
        self.tenant_id == tenant_id
            && self.instance_id == instance_id
            && event_id.is_none_or(|e| e == self.event_id)
    }

    /// The byte estimate for the budget: the struct and its strings.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.active_mode.as_ref().map_or(0, String::len)
            + self.prior.plan_input_hash.as_ref().map_or(0, String::len)
    }
}

/// The price of an attempt is looked up by the model it is priced as (the
/// served one, else the requested one), then by the requested one, exactly
/// as `genesis_record_context` is asked; nested so a lookup borrows both.
type Prices = HashMap<String, HashMap<String, Option<ChosenPrice>>>;

/// The most price pairs held at once; beyond it the book starts over (a
/// fleet uses a handful of models).
const PRICE_BOOK_LIMIT: usize = 1024;

/// Prices read at one catalogue epoch.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PriceBook {
    epoch: i64,
    prices: Prices,
    /// Pairs held.
    len: usize,
}

impl PriceBook {
    /// The price held for a tick claimed at `claim_epoch`: only when the
    /// book was read at that epoch (so no price write has committed between
    /// the read and the claim). `Some(None)` is a held "no price".
    pub fn lookup(
        &self,
        claim_epoch: i64,
        priced_model: &str,
        requested_model: &str,
    ) -> Option<Option<ChosenPrice>> {
        if claim_epoch != self.epoch || claim_epoch <= 0 {
            return None;
        }
        self.prices.get(priced_model)?.get(requested_model).cloned()
    }

    /// Learn a price `genesis_record_context` read at `epoch`: a newer epoch
    /// starts the book over, an older one is not kept.
    pub fn learn(
        &mut self,
        epoch: i64,
        priced_model: &str,
        requested_model: &str,
        price: Option<ChosenPrice>,
    ) {
        if epoch <= 0 || epoch < self.epoch {
            return;
        }
        if epoch > self.epoch || self.len >= PRICE_BOOK_LIMIT {
            self.prices.clear();
            self.len = 0;
            self.epoch = epoch;
        }
        let held = self
            .prices
            .entry(priced_model.to_owned())
            .or_default()
            .insert(requested_model.to_owned(), price);
        if held.is_none() {
            self.len += 1;
        }
    }
}

/// The memos of ticks in flight, by session, under one byte budget; a budget
/// of 0 turns memos and held prices off (every completion and attempt reads
/// its context). An evicted or missing memo costs one read, never a wrong
/// answer.
#[derive(Debug)]
pub struct TickMemos {
    held: BudgetLru<Uuid, Arc<TickMemo>>,
    prices: Mutex<PriceBook>,
}

impl TickMemos {
    pub fn new(budget_bytes: usize) -> Self {
        Self {
            held: BudgetLru::new(budget_bytes),
            prices: Mutex::new(PriceBook::default()),
        }
    }

    /// Remember the tick `session` claimed.
    pub fn remember(&self, session: Uuid, memo: TickMemo) {
        let bytes = memo.bytes();
        self.held.put(session, Arc::new(memo), bytes);
    }

    /// The memo of `session`, when it is the tick the call names.
    pub fn recall(
        &self,
        session: Uuid,
        tenant_id: Uuid,
        instance_id: Uuid,
        event_id: Option<Uuid>,
    ) -> Option<Arc<TickMemo>> {
        self.held
            .get(&session)
            .filter(|m| m.applies(tenant_id, instance_id, event_id))
    }

    /// The tick of `session` completed: nothing more to spare.
    pub fn forget(&self, session: Uuid) {
        self.held.remove(&session);
    }

    /// The held price for an attempt of a tick claimed at `claim_epoch`.
    pub fn price(
        &self,
        claim_epoch: i64,
        priced_model: &str,
        requested_model: &str,
    ) -> Option<Option<ChosenPrice>> {
        if !self.held.enabled() {
            return None;
        }
        self.prices
            .lock()
            .ok()?
            .lookup(claim_epoch, priced_model, requested_model)
    }

    /// Hold a price read at `epoch`.
    pub fn learn_price(
        &self,
        epoch: i64,
        priced_model: &str,
        requested_model: &str,
        price: Option<ChosenPrice>,
    ) {
        if !self.held.enabled() {
            return;
        }
        if let Ok(mut book) = self.prices.lock() {
            book.learn(epoch, priced_model, requested_model, price);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memo(tenant: Uuid, instance: Uuid, event: Uuid) -> TickMemo {
        TickMemo {
            tenant_id: tenant,
            instance_id: instance,
            event_id: event,
            event_kind: AgentEventKind::AgentTick,
            agent_type: AgentType::Soa,
            active_mode: Some("Cadence".into()),
            prior: PriorCounters {
                plan_input_hash: None,
                consecutive_idle_ticks: 2,
                idle_ticks_since_replan: 1,
                consecutive_blocked_turns: 0,
                consecutive_exhausted_turns: 0,
            },
            catalogue_epoch: 7,
            opts: AgentDispatcherOptions::default(),
        }
    }

    fn price(model: &str, input: f64) -> ChosenPrice {
        ChosenPrice {
            row: genesis_store::llm::PricingRow {
                model: model.into(),
                input_usd_per_mtok: input,
                output_usd_per_mtok: 15.0,
                cache_read_usd_per_mtok: 0.0,
                cache_write_usd_per_mtok: 0.0,
                updated_at: chrono::DateTime::UNIX_EPOCH,
            },
            source: genesis_core::pricing::PricingSource::Exact,
        }
    }

    #[test]
    fn a_memo_applies_only_to_its_own_tenant_instance_and_event() {
        let (t, i, e) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let m = memo(t, i, e);
        assert!(m.applies(t, i, Some(e)));
        assert!(m.applies(t, i, None), "an attempt names no event");
        assert!(!m.applies(Uuid::new_v4(), i, Some(e)), "another tenant");
        assert!(!m.applies(t, Uuid::new_v4(), Some(e)), "another instance");
        assert!(!m.applies(t, i, Some(Uuid::new_v4())), "another event");
    }

    #[test]
    fn recall_is_by_session_and_forget_drops_it() {
        let memos = TickMemos::new(1 << 20);
        let (t, i, e) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let s = Uuid::new_v4();
        memos.remember(s, memo(t, i, e));
        assert!(memos.recall(s, t, i, Some(e)).is_some());
        assert!(memos.recall(Uuid::new_v4(), t, i, Some(e)).is_none());
        assert!(memos.recall(s, Uuid::new_v4(), i, Some(e)).is_none());
        memos.forget(s);
        assert!(memos.recall(s, t, i, Some(e)).is_none());
    }

    #[test]
    fn a_zero_budget_holds_no_memo_and_no_price() {
        let memos = TickMemos::new(0);
        let (t, i, e) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let s = Uuid::new_v4();
        memos.remember(s, memo(t, i, e));
        assert!(memos.recall(s, t, i, Some(e)).is_none());
        memos.learn_price(3, "m", "m", Some(price("m", 3.0)));
        assert_eq!(memos.price(3, "m", "m"), None);
    }

    #[test]
    fn the_budget_evicts_the_oldest_tick() {
        let one = memo(Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4()).bytes();
        let memos = TickMemos::new(2 * one);
        let sessions: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
        let m = memo(Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        for s in &sessions {
            memos.remember(*s, m.clone());
        }
        let held = |s: Uuid| memos.recall(s, m.tenant_id, m.instance_id, None).is_some();
        assert!(!held(sessions[0]), "the oldest was evicted");
        assert!(held(sessions[1]) && held(sessions[2]));
    }

    #[test]
    fn a_price_is_used_only_for_a_claim_at_the_epoch_it_was_read() {
        let mut book = PriceBook::default();
        assert_eq!(book.lookup(0, "m", "m"), None, "nothing read yet");
        book.learn(5, "m", "m", Some(price("m", 3.0)));
        assert_eq!(book.lookup(5, "m", "m"), Some(Some(price("m", 3.0))));
        assert_eq!(book.lookup(4, "m", "m"), None, "claimed before the read");
        assert_eq!(book.lookup(6, "m", "m"), None, "claimed after a write");
        assert_eq!(book.lookup(5, "m", "other"), None, "another pair");
        // A held "no price" is still an answer.
        book.learn(5, "dated-1", "m", None);
        assert_eq!(book.lookup(5, "dated-1", "m"), Some(None));
    }

    #[test]
    fn a_newer_epoch_starts_the_book_over_and_an_older_is_not_kept() {
        let mut book = PriceBook::default();
        book.learn(5, "m", "m", Some(price("m", 3.0)));
        book.learn(6, "n", "n", Some(price("n", 1.0)));
        assert_eq!(book.lookup(6, "m", "m"), None, "read at 5: dropped");
        assert_eq!(book.lookup(6, "n", "n"), Some(Some(price("n", 1.0))));
        book.learn(5, "m", "m", Some(price("m", 3.0)));
        assert_eq!(book.lookup(5, "m", "m"), None, "older than the book");
        assert_eq!(book.lookup(6, "m", "m"), None);
        book.learn(0, "z", "z", None);
        assert_eq!(book.lookup(0, "z", "z"), None, "epoch 0 is no epoch");
    }

    #[test]
    fn a_full_book_starts_over() {
        let mut book = PriceBook::default();
        for n in 0..PRICE_BOOK_LIMIT {
            book.learn(2, &format!("m{n}"), "r", None);
        }
        assert_eq!(book.lookup(2, "m0", "r"), Some(None));
        book.learn(2, "one-more", "r", None);
        assert_eq!(book.lookup(2, "m0", "r"), None);
        assert_eq!(book.lookup(2, "one-more", "r"), Some(None));
    }
}
