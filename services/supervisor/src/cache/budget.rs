//! A least-recently-used map under a byte budget, shared by every cache in
//! this module (ledger tails, catalogues, claim kinds, tick memos). Owns only the
//! eviction order and the byte accounting; what an entry may be trusted for
//! is each cache's own rule. Must never block for long: one short mutex per
//! call, never held across an await.

use std::hash::Hash;
use std::sync::Mutex;

use hashlink::LinkedHashMap;

#[derive(Debug)]
struct Inner<K: Hash + Eq, V> {
    /// Least recently used first; each value with its byte estimate.
    map: LinkedHashMap<K, (V, usize)>,
    bytes: usize,
}

/// Entries of `V` by `K` whose byte estimates sum to at most the budget.
/// A budget of 0 holds nothing.
#[derive(Debug)]
pub struct BudgetLru<K: Hash + Eq, V> {
    budget_bytes: usize,
    inner: Mutex<Inner<K, V>>,
}

impl<K: Hash + Eq, V: Clone> BudgetLru<K, V> {
    pub fn new(budget_bytes: usize) -> Self {
        Self {
            budget_bytes,
            inner: Mutex::new(Inner {
                map: LinkedHashMap::new(),
                bytes: 0,
            }),
        }
    }

    /// Whether anything can be held at all.
    pub fn enabled(&self) -> bool {
        self.budget_bytes > 0
    }

    /// A copy of the value held for `key`, now most recently used.
    pub fn get(&self, key: &K) -> Option<V> {
        if !self.enabled() {
            return None;
        }
        let mut inner = self.inner.lock().ok()?;
        inner.map.to_back(key).map(|(v, _)| v.clone())
    }

    /// Hold `value` for `key` at `bytes`, replacing what was held, then
    /// evict the least recently used beyond the budget. A value larger than
    /// the whole budget is not held (and the old one is dropped).
    pub fn put(&self, key: K, value: V, bytes: usize) {
        if !self.enabled() {
            return;
        }
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if let Some((_, old)) = inner.map.remove(&key) {
            inner.bytes -= old;
        }
        if bytes > self.budget_bytes {
            return;
        }
        inner.bytes += bytes;
        inner.map.insert(key, (value, bytes));
        while inner.bytes > self.budget_bytes {
            match inner.map.pop_front() {
                Some((_, (_, evicted))) => inner.bytes -= evicted,
                None => break,
            }
        }
    }

    /// Drop what is held for `key`.
    pub fn remove(&self, key: &K) {
        if let Ok(mut inner) = self.inner.lock()
            && let Some((_, old)) = inner.map.remove(key)
        {
            inner.bytes -= old;
        }
    }

    /// Entries held and their bytes.
    #[cfg(test)]
    pub fn usage(&self) -> (usize, usize) {
        self.inner
            .lock()
            .map(|i| (i.map.len(), i.bytes))
            .unwrap_or((0, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used_beyond_the_budget() {
        let lru = BudgetLru::new(100);
        lru.put(1, "a", 40);
        lru.put(2, "b", 40);
        assert_eq!(lru.get(&1), Some("a")); // 1 is now the most recent
        lru.put(3, "c", 40);
        assert_eq!(lru.get(&2), None, "2 was least recently used");
        assert_eq!((lru.get(&1), lru.get(&3)), (Some("a"), Some("c")));
        assert_eq!(lru.usage(), (2, 80));
    }

    #[test]
    fn a_replaced_value_is_counted_once_and_an_oversized_one_not_at_all() {
        let lru = BudgetLru::new(100);
        lru.put(1, "a", 40);
        lru.put(1, "b", 50);
        assert_eq!(lru.usage(), (1, 50));
        lru.put(1, "huge", 101);
        assert_eq!(lru.get(&1), None, "the old value went too");
        assert_eq!(lru.usage(), (0, 0));
        lru.put(2, "x", 10);
        lru.remove(&2);
        assert_eq!(lru.usage(), (0, 0));
    }

    #[test]
    fn a_zero_budget_holds_nothing() {
        let lru = BudgetLru::new(0);
        assert!(!lru.enabled());
        lru.put(1, "a", 0);
        assert_eq!(lru.get(&1), None);
        assert_eq!(lru.usage(), (0, 0));
    }
}
