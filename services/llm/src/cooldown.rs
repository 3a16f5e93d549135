//! Per-process credential cool-downs: when a provider answers 429 with a
//! `Retry-After`, the credential that got it is skipped by later calls until
//! that instant passes, so a busy pod does not spend a request (and the
//! provider's patience) on a key the provider has just asked us to rest.
//!
//! This module must never hold or print a credential value: a credential is
//! keyed by its name and a one-way fingerprint of its secret (so two tenants
//! naming different keys alike never share a cool-down), and nothing here is
//! logged.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::preset::{CredentialRef, ModelCouple, ProviderKind};

/// The longest a single `Retry-After` keeps a credential out of rotation.
/// Providers answer seconds to minutes; a hint of hours is more likely a
/// misread date than a real window, and after this the credential simply
/// gets one more try (which re-arms the cool-down if the provider insists).
pub const MAX_COOLDOWN: Duration = Duration::from_secs(3600);

/// Which credential, on which provider and backend, a cool-down applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CooldownKey {
    provider: ProviderKind,
    backend: String,
    credential_name: String,
    /// A SipHash of the secret: tells two secrets stored under one name
    /// apart without keeping the value.
    secret_fingerprint: u64,
}

impl CooldownKey {
    /// The key of `credential` (`None` for providers that need none) used
    /// with `couple`.
    pub(crate) fn new(couple: &ModelCouple, credential: Option<&CredentialRef>) -> Self {
        let (credential_name, secret_fingerprint) = match credential {
            Some(c) => {
                let mut h = DefaultHasher::new();
                c.secret.expose().hash(&mut h);
                (c.name.clone(), h.finish())
            }
            None => (String::new(), 0),
        };
        CooldownKey {
            provider: couple.provider,
            backend: couple.backend.clone(),
            credential_name,
            secret_fingerprint,
        }
    }
}

/// The cool-down table. One process-wide instance ([`Cooldowns::global`])
/// backs every [`crate::FallbackInvoker`] built with `new`; tests give an
/// invoker its own instance so they do not see each other's 429s.
#[derive(Debug, Default)]
pub struct Cooldowns {
    until: Mutex<HashMap<CooldownKey, Instant>>,
}

static GLOBAL: OnceLock<Arc<Cooldowns>> = OnceLock::new();

impl Cooldowns {
    /// The process-wide table.
    pub fn global() -> Arc<Cooldowns> {
        GLOBAL
            .get_or_init(|| Arc::new(Cooldowns::default()))
            .clone()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<CooldownKey, Instant>> {
        // The table holds plain instants: a panic elsewhere while it was held
        // cannot have left it half-written, so a poisoned lock is still usable.
        self.until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The instant `key` may be used again, when that is after `now`.
    /// Expired entries are dropped on the way so the table stays small.
    pub(crate) fn cooling_until(&self, key: &CooldownKey, now: Instant) -> Option<Instant> {
        let mut table = self.table();
        match table.get(key) {
            Some(until) if *until > now => Some(*until),
            Some(_) => {
                table.remove(key);
                None
            }
            None => None,
        }
    }

    /// Rest `key` for `retry_after` (capped at [`MAX_COOLDOWN`]) from `now`
    /// and return the instant it may be used again. A later instant already
    /// recorded is kept; a zero wait records nothing.
    pub(crate) fn cool_down(
        &self,
        key: CooldownKey,
        retry_after: Duration,
        now: Instant,
    ) -> Instant {
        let until = now + retry_after.min(MAX_COOLDOWN);
        if until <= now {
            return now;
        }
        let mut table = self.table();
        let entry = table.entry(key).or_insert(until);
        if *entry < until {
            *entry = until;
        }
        *entry
    }

    /// How many credentials are cooling down at `now`.
    pub fn cooling(&self, now: Instant) -> usize {
        self.table().values().filter(|until| **until > now).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(secret: &str) -> CooldownKey {
        let couple = ModelCouple::new("m", ProviderKind::Anthropic, "api");
        CooldownKey::new(&couple, Some(&CredentialRef::new("api-key", secret)))
    }

    #[test]
    fn a_cooled_key_is_cooling_until_its_instant_and_then_forgotten() {
        let c = Cooldowns::default();
        let now = Instant::now();
        let until = c.cool_down(key("k1"), Duration::from_secs(5), now);
        assert_eq!(until, now + Duration::from_secs(5));
        assert_eq!(c.cooling_until(&key("k1"), now), Some(until));
        assert_eq!(c.cooling(now), 1);
        assert_eq!(c.cooling_until(&key("k1"), until), None);
        assert_eq!(c.cooling(now), 0, "the expired entry is dropped");
    }

    #[test]
    fn same_name_with_another_secret_is_another_credential() {
        let c = Cooldowns::default();
        let now = Instant::now();
        c.cool_down(key("k1"), Duration::from_secs(5), now);
        assert_eq!(c.cooling_until(&key("k2"), now), None);
    }

    #[test]
    fn the_later_instant_wins_and_the_wait_is_capped() {
        let c = Cooldowns::default();
        let now = Instant::now();
        c.cool_down(key("k1"), Duration::from_secs(50), now);
        let kept = c.cool_down(key("k1"), Duration::from_secs(5), now);
        assert_eq!(kept, now + Duration::from_secs(50));
        let capped = c.cool_down(key("k1"), Duration::from_secs(86_400), now);
        assert_eq!(capped, now + MAX_COOLDOWN);
    }

    #[test]
    fn a_zero_wait_records_nothing() {
        let c = Cooldowns::default();
        let now = Instant::now();
        assert_eq!(c.cool_down(key("k1"), Duration::ZERO, now), now);
        assert_eq!(c.cooling(now), 0);
    }
}
