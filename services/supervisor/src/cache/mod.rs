//! What the supervisor holds in memory between RPCs so the tick path reads
//! less: held ledger tails, held catalogues, each instance's claim kind,
//! the memos of ticks in flight and the prices held with them. Owns their
//! byte budgets and the rules deciding when a held value may answer. Must
//! never be the source of truth for a write, never serve one tenant's
//! entry to another (every lookup names the tenant; only the platform's
//! model prices are shared), and never block: one short mutex per call,
//! never held across an await. A missing, evicted or turned-off entry
//! (budget 0) costs a read, never a wrong answer.
//!
//! Each cache, what it holds, what invalidates it and what it may serve
//! stale:
//!
//! - **Ledger tails** ([`ledger::LedgerTailCache`], `GENESIS_LEDGER_CACHE_MB`,
//!   least recently claimed out first). Holds each claimed instance's newest
//!   ledger turns as sent to the pod, with its tenant, tail length and the
//!   newest turn's number and id. Nothing expires it by time: every claim
//!   names that newest turn to `genesis_read_bundle`, which checks in the
//!   same statement and snapshot that the turn is still there and then
//!   sends only the turns after it. The ledger is append-only apart from
//!   an instance reset, so a turn still there vouches for every turn before
//!   it; after a reset the check fails, the whole tail comes back and
//!   replaces what was held (`stale`). An answer that cannot be joined to
//!   what was held fails the claim and forgets the entry. Serves nothing
//!   stale: the tail a pod gets is the database's as of its claim.
//! - **Catalogues** ([`catalogue::CatalogueCache`],
//!   `GENESIS_CATALOGUE_CACHE_MB`, keyed by tenant, agent type and site
//!   chain). Holds the bundle's catalogue part: the type's mode rows, the
//!   site bindings with their presets, the presets the modes name and the
//!   configuration, with the catalogue epoch it was read at. The epoch is
//!   the database's: a statement trigger (`genesis_bump_catalogue_epoch`,
//!   before any row is touched) raises it in every transaction that writes
//!   `agent_modes`, `llm_presets`, `llm_site_bindings`, `system_configs` or
//!   `llm_pricing`. Every claim names the epoch it holds and
//!   `genesis_read_bundle` compares it with the current one server-side,
//!   leaving the catalogue out only when they are equal; a sent catalogue
//!   always replaces the held one. Serves nothing stale across claims: a
//!   held catalogue answers only while no catalogue write has committed
//!   since it was read. (A catalogue may be read at a later snapshot than
//!   the epoch sent with it, so a held one can be newer than its epoch,
//!   never older; the next claim is then sent it again.)
//! - **Claim kinds** ([`ClaimKinds`], a sixteenth of the ledger budget).
//!   Holds each claimed instance's tenant, agent type and site chain as its
//!   last claim found them, so its next claim asks for the bundle in the
//!   claim's own round trip (`genesis_claim_and_read`). Never trusted: the
//!   database reads the bundle only when it claimed an instance of the asked
//!   type, and the claim compares the whole kind with what the claimed
//!   instance yields, reading the bundle again (`redone`) and holding the
//!   new kind when they differ. A stale kind costs one read, never a wrong
//!   bundle.
//! - **Tick memos** ([`tick_memo::TickMemos`], a quarter of the catalogue
//!   budget, by session). Holds what a claim read for the tick it claimed:
//!   the event and its kind, the instance's type, mode and counters, the
//!   catalogue epoch and the options its configuration yields. A session is
//!   fresh per claim, so a memo answers only that tick's RecordCallAttempt,
//!   ReserveCredit and CompleteTick, and only for the same tenant and
//!   instance (and, for a completion, event). It is forgotten once the
//!   completion's write or deferral has been tried, whatever the database
//!   answered, so a retry reads again; a tick that never
//!   completes (its lease expired) leaves its memo until the budget evicts
//!   it, where no later call can name it. Stale by design for the tick's
//!   life: a tick runs under the mode, configuration and credit settings of
//!   its claim, and a change committed meanwhile is in force from the next
//!   claim. Never trusted for what a write decides: the session guard
//!   refuses a lost lease, and `genesis_apply_complete` compares the
//!   counters and event kind under the row lock, writing nothing and taking
//!   the locked path when they moved.
//! - **Held prices** ([`tick_memo::PriceBook`], inside the tick memos, at
//!   most 1,024 model pairs). Holds the price `genesis_record_context` chose
//!   for a (priced, requested) model pair, with the catalogue epoch it was
//!   read at; a write to `llm_pricing` raises that epoch like any catalogue
//!   write. A held price prices only an attempt of a tick claimed at that
//!   same epoch; a newer epoch starts the book over, and none is held while
//!   the memos are off. The comparison is made here, against epochs the
//!   database raised. Stale like the memo: a held price is the one in force
//!   at its tick's claim.
//!
//! Kept elsewhere in this process, with their own rules: admitted bearer
//! tokens (`genesis_store::TokenCache`, at most `GENESIS_TOKEN_CACHE_MS`,
//! emptied by NOTIFY on any `api_tokens` change and holding nothing while
//! its LISTEN is down), each tenant's compiled constitution
//! (`tools::constitution_gate`, reloaded after `DEFAULT_RULES_TTL`, so a
//! rule edit applies within that TTL) and the ops digest (`ops`, sampled in
//! the background every `GENESIS_OPS_SAMPLE_SECS`).

pub mod budget;
pub mod catalogue;
pub mod ledger;
pub mod tick_memo;

use std::sync::Arc;

use uuid::Uuid;

use crate::bundle::ClaimKind;
use budget::BudgetLru;
use catalogue::CatalogueCache;
use ledger::LedgerTailCache;

/// The held ledger tails and catalogues a claim's read consults.
#[derive(Debug)]
pub struct ClaimCaches {
    pub ledger: LedgerTailCache,
    pub catalogue: CatalogueCache,
    pub kinds: ClaimKinds,
}

/// The [`ClaimKind`] of each instance claimed before, so its next claim
/// asks for the bundle in the same round trip (`genesis_claim_and_read`).
/// Never trusted: the claim compares it with what the claimed instance yields
/// and reads the bundle again when they differ. A budget of 0 holds
/// nothing (every claim is two round trips).
#[derive(Debug)]
pub struct ClaimKinds {
    held: BudgetLru<Uuid, Arc<ClaimKind>>,
}

impl ClaimKinds {
    pub fn new(budget_bytes: usize) -> Self {
        Self {
            held: BudgetLru::new(budget_bytes),
        }
    }

    /// The kind held for `instance`, if it was found under `tenant`.
    pub fn lookup(&self, tenant: Uuid, instance: Uuid) -> Option<Arc<ClaimKind>> {
        self.held.get(&instance).filter(|k| k.tenant_id == tenant)
    }

    /// Hold `kind` for `instance` (replacing a different one).
    pub fn remember(&self, instance: Uuid, kind: ClaimKind) {
        let bytes = std::mem::size_of::<ClaimKind>()
            + kind.sites.iter().map(|s| s.len() + 24).sum::<usize>();
        self.held.put(instance, Arc::new(kind), bytes);
    }
}
