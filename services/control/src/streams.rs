//! What keeps a long-lived stream (`WatchTurns`, and the dashboard's live
//! server-sent events, which are `WatchTurns` re-framed) honest after it was
//! admitted: its credential is checked again at least every
//! `GENESIS_STREAM_RECHECK_SECS` and at its expiry, and the stream ends
//! UNAUTHENTICATED once the token is revoked or expired or the dashboard
//! session is signed out; and open streams are capped per token and per
//! tenant (`GENESIS_STREAMS_PER_TOKEN`, `GENESIS_STREAMS_PER_TENANT`),
//! answered RESOURCE_EXHAUSTED beyond, each slot freed when its stream ends.
//!
//! A re-check the database cannot answer keeps the stream (an outage must not
//! drop every operator's view) and is tried again after the interval. Must
//! never hold the slot lock across an await.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use genesis_core::TokenScope;
use genesis_store::{Store, StoreError};
use tokio::time::Instant;
use tonic::Status;
use uuid::Uuid;

use crate::config::ControlConfig;

/// The credential a stream was opened with, as it is checked again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamCredential {
    /// A bearer operator token, by its id.
    Token(Uuid),
    /// A dashboard session, by the SHA-256 of its secret.
    Session(String),
}

/// The request extension the dashboard puts on its in-process `WatchTurns`
/// call so the stream re-checks the session (sign-out ends it), not only the
/// token. Only in-process callers can set it: extensions never come off the
/// wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStream {
    /// SHA-256 (hex) of the session secret.
    pub session_sha256: String,
}

/// What a re-check found.
#[derive(Debug, Clone)]
pub enum Recheck {
    /// Still usable; check again by `expires_at` at the latest.
    Usable { expires_at: Option<DateTime<Utc>> },
    /// No longer usable: end the stream with this status.
    Ended(Status),
    /// The database did not answer; keep the stream and try again.
    Unknown(String),
}

/// Check `credential` again against the store.
pub async fn recheck(store: &Store, credential: &StreamCredential) -> Recheck {
    match credential {
        StreamCredential::Token(id) => match store.tokens().get(*id).await {
            Ok(t) if t.scope == TokenScope::Operator && t.is_usable(Utc::now()) => {
                Recheck::Usable {
                    expires_at: t.expires_at,
                }
            }
            Ok(_) | Err(StoreError::NotFound { .. }) => Recheck::Ended(Status::unauthenticated(
                "the token was revoked or has expired; the stream is closed",
            )),
            Err(e) => Recheck::Unknown(e.to_string()),
        },
        StreamCredential::Session(hash) => match store.sessions().authenticate(hash).await {
            Ok(s) => Recheck::Usable {
                expires_at: Some(s.expires_at),
            },
            Err(StoreError::NotFound { .. } | StoreError::InvalidArgument { .. }) => {
                Recheck::Ended(Status::unauthenticated(
                    "the session was signed out or has expired, or its token was revoked; the stream is closed",
                ))
            }
            Err(e) => Recheck::Unknown(e.to_string()),
        },
    }
}

/// When to check next: after `every`, or at `expires_at` if that is sooner
/// (a stream never outlives its credential's expiry by more than the time
/// the check takes).
pub fn next_check(now: Instant, every: Duration, expires_at: Option<DateTime<Utc>>) -> Instant {
    let by_interval = now + every;
    match expires_at {
        Some(e) => {
            let left = (e - Utc::now()).to_std().unwrap_or(Duration::ZERO);
            by_interval.min(now + left)
        }
        None => by_interval,
    }
}

#[derive(Debug, Default)]
struct Counts {
    tokens: HashMap<Uuid, usize>,
    tenants: HashMap<Uuid, usize>,
}

/// Open streams per token and per tenant, with their caps (0: no cap).
#[derive(Debug)]
pub struct StreamSlots {
    per_token: usize,
    per_tenant: usize,
    counts: Mutex<Counts>,
}

/// One open stream's slot; dropping it (the stream ended) frees it.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<StreamSlots>,
    token: Uuid,
    tenant: Uuid,
}

impl StreamSlots {
    /// From `GENESIS_STREAMS_PER_TOKEN` and `GENESIS_STREAMS_PER_TENANT`.
    pub fn from_config(c: &ControlConfig) -> Self {
        Self::new(
            usize::try_from(c.streams_per_token).unwrap_or(usize::MAX),
            usize::try_from(c.streams_per_tenant).unwrap_or(usize::MAX),
        )
    }

    /// Caps of `per_token` and `per_tenant` open streams (0: no cap).
    pub fn new(per_token: usize, per_tenant: usize) -> Self {
        StreamSlots {
            per_token,
            per_tenant,
            counts: Mutex::new(Counts::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        // A poisoned lock only means another request panicked mid-update.
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take a slot for a stream of `token` on `tenant`, or answer
    /// RESOURCE_EXHAUSTED naming the cap it would pass.
    pub fn acquire(self: &Arc<Self>, token: Uuid, tenant: Uuid) -> Result<Slot, Status> {
        let mut c = self.lock();
        let by_token = c.tokens.get(&token).copied().unwrap_or(0);
        if self.per_token > 0 && by_token >= self.per_token {
            return Err(Status::resource_exhausted(format!(
                "this token already has {by_token} open live streams (GENESIS_STREAMS_PER_TOKEN is {}); close one first",
                self.per_token
            )));
        }
        let by_tenant = c.tenants.get(&tenant).copied().unwrap_or(0);
        if self.per_tenant > 0 && by_tenant >= self.per_tenant {
            return Err(Status::resource_exhausted(format!(
                "this tenant already has {by_tenant} open live streams (GENESIS_STREAMS_PER_TENANT is {}); close one first",
                self.per_tenant
            )));
        }
        *c.tokens.entry(token).or_insert(0) += 1;
        *c.tenants.entry(tenant).or_insert(0) += 1;
        Ok(Slot {
            slots: self.clone(),
            token,
            tenant,
        })
    }

    /// Open streams of `token` (tests and diagnostics).
    pub fn open_for_token(&self, token: Uuid) -> usize {
        self.lock().tokens.get(&token).copied().unwrap_or(0)
    }

    /// Open streams on `tenant`.
    pub fn open_for_tenant(&self, tenant: Uuid) -> usize {
        self.lock().tenants.get(&tenant).copied().unwrap_or(0)
    }
}

fn release(map: &mut HashMap<Uuid, usize>, key: Uuid) {
    if let Some(n) = map.get_mut(&key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(&key);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.slots.lock();
        release(&mut c.tokens, self.token);
        release(&mut c.tenants, self.tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_refuse_past_the_limit_and_a_dropped_slot_frees_its_place() {
        let slots = Arc::new(StreamSlots::new(2, 3));
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let t = Uuid::new_v4();
        let a1 = slots.acquire(a, t).expect("first");
        let _a2 = slots.acquire(a, t).expect("second");
        let e = slots.acquire(a, t).expect_err("third of one token");
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(e.message().contains("GENESIS_STREAMS_PER_TOKEN"), "{e:?}");
        let _b1 = slots.acquire(b, t).expect("another token");
        let e = slots.acquire(c, t).expect_err("fourth of one tenant");
        assert!(e.message().contains("GENESIS_STREAMS_PER_TENANT"), "{e:?}");
        assert!(
            slots.acquire(c, Uuid::new_v4()).is_ok(),
            "another tenant is not held back"
        );
        drop(a1);
        assert_eq!(slots.open_for_token(a), 1);
        assert_eq!(slots.open_for_tenant(t), 2);
        let _a3 = slots.acquire(a, t).expect("a freed slot is taken again");
    }

    #[test]
    fn zero_is_no_cap_and_counts_leave_nothing_behind() {
        let slots = Arc::new(StreamSlots::new(0, 0));
        let (a, t) = (Uuid::new_v4(), Uuid::new_v4());
        let held: Vec<Slot> = (0..100)
            .map(|_| slots.acquire(a, t).expect("no cap"))
            .collect();
        assert_eq!(slots.open_for_token(a), 100);
        drop(held);
        assert_eq!(slots.open_for_token(a), 0);
        assert!(slots.lock().tokens.is_empty() && slots.lock().tenants.is_empty());
    }

    #[test]
    fn the_next_check_is_the_interval_or_the_expiry_if_sooner() {
        let now = Instant::now();
        let every = Duration::from_secs(30);
        assert_eq!(next_check(now, every, None), now + every);
        let far = Utc::now() + chrono::Duration::hours(1);
        assert_eq!(next_check(now, every, Some(far)), now + every);
        let soon = Utc::now() + chrono::Duration::seconds(5);
        let at = next_check(now, every, Some(soon));
        assert!(at <= now + Duration::from_secs(5) && at > now, "{at:?}");
        let past = Utc::now() - chrono::Duration::seconds(5);
        assert_eq!(next_check(now, every, Some(past)), now);
    }
}
