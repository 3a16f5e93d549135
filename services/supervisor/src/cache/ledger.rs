//! The supervisor's memory of each instance's last ledger tail, so a claim
//! reads from the database only the turns written since the newest held.
//! Owns the byte budget (`GENESIS_LEDGER_CACHE_MB`, least recently used
//! out first) and the rule joining a held tail to the turns read after it.
//! Must never be the source of truth: every claim still asks the database,
//! naming the newest turn held by number and id, and the database decides
//! whether that turn is still there (an instance reset deletes the ledger);
//! when it is not, the whole tail comes back and replaces what was held.

use std::sync::Arc;

use genesis_proto::v1 as pb;
use prost::Message as _;
use uuid::Uuid;

use super::budget::BudgetLru;

/// The tail held for one instance: the turns oldest first, the newest
/// one's (number, id) as the database is asked about it.
#[derive(Debug, Clone)]
pub struct HeldTail {
    pub turns: Vec<Arc<pb::LedgerTurn>>,
    pub newest: (i64, Uuid),
}

/// What is held for one instance: its tenant and tail length, which a
/// lookup must match, and the tail.
#[derive(Debug, Clone)]
struct Entry {
    tenant: Uuid,
    tail: i64,
    held: HeldTail,
}

/// What one lookup/store pair found, for the `genesis_supervisor_ledger_cache`
/// counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheOutcome {
    /// A held tail was confirmed; only later turns were read.
    Hit,
    /// Nothing was held (first claim, evicted, or caching off).
    #[default]
    Miss,
    /// A held tail was refused by the database (the ledger was reset).
    Stale,
}

impl CacheOutcome {
    /// The counter label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Miss => "miss",
            Self::Stale => "stale",
        }
    }
}

/// Why a bundle's ledger could not be joined to what was held. Each is a
/// database answer that breaks `genesis_read_bundle`'s contract; the claim
/// fails rather than hand a pod a wrong history.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("bundle ledger_after {after} names no turn this claim held")]
    UnknownAfter { after: i64 },
    #[error("bundle ledger turn {turn} does not follow turn {previous}")]
    OutOfOrder { previous: i64, turn: i64 },
    #[error("bundle ledger turn id {0:?} is not a UUID")]
    BadId(String),
}

/// Per-instance ledger tails under one byte budget. `budget_bytes == 0`
/// turns it off: nothing is held and every claim reads the whole tail.
#[derive(Debug)]
pub struct LedgerTailCache {
    held: BudgetLru<Uuid, Entry>,
}

/// Roughly what one held turn costs in memory: its encoded size plus the
/// struct and allocation overhead of its strings.
fn turn_bytes(t: &pb::LedgerTurn) -> usize {
    t.encoded_len() + std::mem::size_of::<pb::LedgerTurn>() + 64 * (1 + t.actions.len())
}

impl LedgerTailCache {
    pub fn new(budget_bytes: usize) -> Self {
        Self {
            held: BudgetLru::new(budget_bytes),
        }
    }

    /// The tail held for `instance` of `tenant` at this tail length, marked
    /// most recently used. A different tenant or tail length is a miss.
    pub fn lookup(&self, tenant: Uuid, instance: Uuid, tail: i64) -> Option<HeldTail> {
        let entry = self.held.get(&instance)?;
        (entry.tenant == tenant && entry.tail == tail).then_some(entry.held)
    }

    /// Hold `held` (as [`merge`] joined it) as the tail of `instance`,
    /// evicting the least recently used tails beyond the budget. An empty
    /// ledger (`None`) or a tail larger than the whole budget is dropped
    /// instead.
    pub fn store(&self, tenant: Uuid, instance: Uuid, tail: i64, held: Option<HeldTail>) {
        if !self.held.enabled() {
            return;
        }
        let Some(held) = held else {
            self.held.remove(&instance);
            return;
        };
        let bytes: usize = held.turns.iter().map(|t| turn_bytes(t)).sum();
        self.held.put(instance, Entry { tenant, tail, held }, bytes);
    }

    /// Forget `instance` (its read failed: hold nothing uncertain).
    pub fn forget(&self, instance: Uuid) {
        self.held.remove(&instance);
    }

    /// Instances held and their bytes.
    #[cfg(test)]
    fn usage(&self) -> (usize, usize) {
        self.held.usage()
    }
}

/// Join what the claim held to the turns the database sent after
/// `ledger_after`, keeping the newest `tail` turns, oldest first (`None`:
/// the ledger is empty). `ledger_after == 0` means `read` is the whole
/// tail; otherwise it must be the newest turn held. `read` must be
/// ascending and, after a held tail, start past it.
pub fn merge(
    held: Option<&HeldTail>,
    ledger_after: i64,
    read: Vec<pb::LedgerTurn>,
    tail: i64,
) -> Result<(Option<HeldTail>, CacheOutcome), MergeError> {
    let (mut turns, mut newest, outcome) = match (held, ledger_after) {
        (None, 0) => (Vec::new(), None, CacheOutcome::Miss),
        (Some(_), 0) => (Vec::new(), None, CacheOutcome::Stale),
        (Some(h), after) if after == h.newest.0 => {
            (h.turns.clone(), Some(h.newest), CacheOutcome::Hit)
        }
        (_, after) => return Err(MergeError::UnknownAfter { after }),
    };
    for t in read {
        let previous = newest.map_or(0, |(n, _)| n);
        if t.turn_number <= previous {
            return Err(MergeError::OutOfOrder {
                previous,
                turn: t.turn_number,
            });
        }
        let id = Uuid::parse_str(&t.id).map_err(|_| MergeError::BadId(t.id.clone()))?;
        newest = Some((t.turn_number, id));
        turns.push(Arc::new(t));
    }
    let keep = usize::try_from(tail.max(1)).unwrap_or(usize::MAX);
    if turns.len() > keep {
        turns.drain(..turns.len() - keep);
    }
    Ok((newest.map(|newest| HeldTail { turns, newest }), outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(n: i64) -> pb::LedgerTurn {
        pb::LedgerTurn {
            id: Uuid::from_u128(n as u128).to_string(),
            turn_number: n,
            reasoning_summary: "x".repeat(100),
            ..Default::default()
        }
    }

    fn held(ns: std::ops::RangeInclusive<i64>) -> HeldTail {
        let turns: Vec<_> = ns.map(|n| Arc::new(turn(n))).collect();
        let last = turns.last().unwrap().turn_number;
        HeldTail {
            turns,
            newest: (last, Uuid::from_u128(last as u128)),
        }
    }

    fn numbers(joined: &Option<HeldTail>) -> Vec<i64> {
        joined
            .iter()
            .flat_map(|h| &h.turns)
            .map(|t| t.turn_number)
            .collect()
    }

    #[test]
    fn a_hit_appends_the_new_turns_and_keeps_the_newest_tail() {
        let h = held(1..=3);
        let (turns, outcome) = merge(Some(&h), 3, vec![turn(4), turn(5)], 4).unwrap();
        assert_eq!(outcome, CacheOutcome::Hit);
        assert_eq!(numbers(&turns), vec![2, 3, 4, 5]);
        // Nothing new: the held tail as it was.
        let (turns, outcome) = merge(Some(&h), 3, vec![], 12).unwrap();
        assert_eq!(outcome, CacheOutcome::Hit);
        assert_eq!(numbers(&turns), vec![1, 2, 3]);
    }

    #[test]
    fn a_whole_tail_replaces_what_was_held() {
        let h = held(5..=9);
        let (turns, outcome) = merge(Some(&h), 0, vec![turn(1)], 12).unwrap();
        assert_eq!(outcome, CacheOutcome::Stale);
        assert_eq!(numbers(&turns), vec![1]);
        let (turns, outcome) = merge(None, 0, vec![turn(1), turn(2)], 12).unwrap();
        assert_eq!(outcome, CacheOutcome::Miss);
        assert_eq!(numbers(&turns), vec![1, 2]);
    }

    #[test]
    fn an_answer_that_breaks_the_contract_is_refused() {
        let h = held(1..=3);
        assert_eq!(
            merge(Some(&h), 2, vec![turn(3)], 12).unwrap_err(),
            MergeError::UnknownAfter { after: 2 }
        );
        assert_eq!(
            merge(None, 3, vec![turn(4)], 12).unwrap_err(),
            MergeError::UnknownAfter { after: 3 }
        );
        assert_eq!(
            merge(Some(&h), 3, vec![turn(3)], 12).unwrap_err(),
            MergeError::OutOfOrder {
                previous: 3,
                turn: 3
            }
        );
        assert_eq!(
            merge(None, 0, vec![turn(2), turn(1)], 12).unwrap_err(),
            MergeError::OutOfOrder {
                previous: 2,
                turn: 1
            }
        );
        let mut bad = turn(4);
        bad.id = "not-a-uuid".into();
        assert_eq!(
            merge(Some(&h), 3, vec![bad], 12).unwrap_err(),
            MergeError::BadId("not-a-uuid".into())
        );
    }

    #[test]
    fn lookup_is_scoped_to_tenant_and_tail_length() {
        let c = LedgerTailCache::new(1 << 20);
        let (tenant, other, instance) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        c.store(tenant, instance, 12, Some(held(1..=2)));
        let h = c.lookup(tenant, instance, 12).unwrap();
        assert_eq!(h.newest, (2, Uuid::from_u128(2)));
        assert!(c.lookup(other, instance, 12).is_none());
        assert!(c.lookup(tenant, instance, 3).is_none());
        assert!(c.lookup(tenant, Uuid::new_v4(), 12).is_none());
        c.forget(instance);
        assert!(c.lookup(tenant, instance, 12).is_none());
        assert_eq!(c.usage(), (0, 0));
    }

    #[test]
    fn the_budget_evicts_the_least_recently_used_tail() {
        let one = held(1..=3);
        let size: usize = one.turns.iter().map(|t| turn_bytes(t)).sum();
        let c = LedgerTailCache::new(size * 2 + size / 2);
        let tenant = Uuid::new_v4();
        let (a, b, d) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        c.store(tenant, a, 12, Some(one.clone()));
        c.store(tenant, b, 12, Some(one.clone()));
        // `a` is used again, so `b` is the least recently used.
        assert!(c.lookup(tenant, a, 12).is_some());
        c.store(tenant, d, 12, Some(one.clone()));
        assert!(c.lookup(tenant, a, 12).is_some());
        assert!(c.lookup(tenant, b, 12).is_none());
        assert!(c.lookup(tenant, d, 12).is_some());
        assert_eq!(c.usage(), (2, size * 2));
        // Replacing a tail counts its bytes once.
        c.store(tenant, a, 12, Some(one.clone()));
        assert_eq!(c.usage(), (2, size * 2));
    }

    #[test]
    fn nothing_is_held_when_off_empty_or_over_budget() {
        let tenant = Uuid::new_v4();
        let instance = Uuid::new_v4();
        let off = LedgerTailCache::new(0);
        off.store(tenant, instance, 12, Some(held(1..=2)));
        assert!(off.lookup(tenant, instance, 12).is_none());
        let small = LedgerTailCache::new(10);
        small.store(tenant, instance, 12, Some(held(1..=2)));
        assert_eq!(small.usage(), (0, 0));
        let c = LedgerTailCache::new(1 << 20);
        c.store(tenant, instance, 12, Some(held(1..=2)));
        c.store(tenant, instance, 12, None);
        assert_eq!(c.usage(), (0, 0), "an empty ledger forgets the held tail");
    }
}
