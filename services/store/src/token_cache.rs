//! A process-local memory of admitted bearer tokens, so a service's hot
//! path does not look its caller's token up in PostgreSQL on every RPC (an
//! agent-pod tick makes three). Owns only positive answers: a token row the
//! database returned, kept for at most the configured TTL and forgotten the
//! moment any `api_tokens` row changes (a trigger notifies
//! `genesis_api_tokens` on every UPDATE, DELETE and TRUNCATE). Must never
//! keep an answer while it is not listening: without a live LISTEN
//! connection every lookup goes to the database, so a revocation is never
//! missed, only served slower. Must never keep a raw token (keys are the
//! SHA-256 hashes the table stores).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::postgres::PgListener;

use crate::error::StoreError;
use crate::store::Store;
use crate::tokens::ApiToken;

/// The channel the `api_tokens` change trigger notifies.
pub const TOKENS_CHANNEL: &str = "genesis_api_tokens";

/// Most tokens kept at once; past it the memory is emptied and refilled
/// (a fleet has a handful of agent-pod tokens, so this only bounds abuse).
pub const MAX_ENTRIES: usize = 1024;

/// How long [`TokenCache::listen`] waits before reconnecting a lost LISTEN.
const RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// See the module header. Shared by the gate's clones (`Arc`).
#[derive(Debug)]
pub struct TokenCache {
    ttl: Duration,
    /// Whether a LISTEN connection is up: answers are kept only while it is.
    live: AtomicBool,
    /// Bumped on every forget, so a lookup that raced a change does not
    /// store the row it read before the change.
    generation: AtomicU64,
    entries: Mutex<HashMap<String, (ApiToken, Instant)>>,
}

impl TokenCache {
    /// A cache keeping each admitted row for `ttl` (zero: keeps nothing,
    /// every lookup reads the database). It keeps nothing either until
    /// [`TokenCache::listen`] has its LISTEN in place.
    pub fn new(ttl: Duration) -> Self {
        TokenCache {
            ttl,
            live: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The row stored for `token_sha256`, from memory when a kept answer is
    /// younger than the TTL, else from the database (and kept when the
    /// database found one and nothing changed meanwhile). Callers still
    /// check the row's scope and [`ApiToken::is_usable`]: an expiry passes
    /// while a row is kept.
    pub async fn find_by_hash(
        &self,
        store: &Store,
        token_sha256: &str,
    ) -> Result<Option<ApiToken>, StoreError> {
        if let Some(row) = self.kept(token_sha256) {
            return Ok(Some(row));
        }
        let generation = self.generation.load(Ordering::Acquire);
        let found = store.tokens().find_by_hash(token_sha256).await?;
        if let Some(row) = &found {
            self.keep(token_sha256, row, generation);
        }
        Ok(found)
    }

    fn kept(&self, token_sha256: &str) -> Option<ApiToken> {
        if !self.live.load(Ordering::Acquire) {
            return None;
        }
        let entries = self.entries.lock().ok()?;
        entries
            .get(token_sha256)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(row, _)| row.clone())
    }

    fn keep(&self, token_sha256: &str, row: &ApiToken, generation: u64) {
        if self.ttl.is_zero() || !self.live.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        // Checked under the lock `forget` takes: a change noticed after the
        // read began leaves the generation moved, and the row is dropped.
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(token_sha256.to_owned(), (row.clone(), Instant::now()));
    }

    /// Drop every kept answer.
    pub fn forget(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            self.generation.fetch_add(1, Ordering::AcqRel);
            entries.clear();
        }
    }

    /// Answers kept now (for tests and metrics).
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the LISTEN connection is up (answers are being kept).
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    fn set_live(&self, live: bool) {
        if !live {
            self.live.store(false, Ordering::Release);
            self.forget();
        } else {
            self.forget();
            self.live.store(true, Ordering::Release);
        }
    }

    /// Hold a LISTEN on [`TOKENS_CHANNEL`] until `shutdown` resolves,
    /// forgetting everything on each notice. While the connection is down
    /// (at start, after a loss, until the reconnect's LISTEN is in place)
    /// nothing is kept, so no notice can be missed. With a zero TTL it
    /// returns at once: there is nothing to invalidate.
    pub async fn listen(&self, store: &Store, shutdown: impl Future<Output = ()>) {
        if self.ttl.is_zero() {
            return;
        }
        tokio::pin!(shutdown);
        loop {
            let listener = tokio::select! {
                () = &mut shutdown => break,
                l = connect(store) => l,
            };
            let mut listener = match listener {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "token cache: LISTEN failed; every token is looked up");
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(RECONNECT_DELAY) => continue,
                    }
                }
            };
            self.set_live(true);
            loop {
                let next = tokio::select! {
                    () = &mut shutdown => {
                        self.set_live(false);
                        return;
                    }
                    n = listener.try_recv() => n,
                };
                match next {
                    Ok(Some(_)) => self.forget(),
                    // `Ok(None)`: the connection was lost (notices sent
                    // meanwhile are gone); an error: it cannot be used.
                    Ok(None) | Err(_) => {
                        self.set_live(false);
                        tracing::warn!("token cache: LISTEN connection lost; reconnecting");
                        break;
                    }
                }
            }
        }
        self.set_live(false);
    }
}

async fn connect(store: &Store) -> Result<PgListener, StoreError> {
    let mut l = PgListener::connect_with(store.system_pool()).await?;
    l.listen(TOKENS_CHANNEL).await?;
    Ok(l)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use chrono::Utc;
    use genesis_core::TokenScope;

    fn row(label: &str) -> ApiToken {
        ApiToken {
            id: uuid::Uuid::new_v4(),
            tenant_id: None,
            scope: TokenScope::AgentPod,
            pod_tenants: genesis_core::PodTenants::all(),
            token_sha256: "ab".repeat(32),
            label: label.into(),
            expires_at: None,
            revoked_at: None,
            created_at: Utc::now(),
        }
    }

    fn live(ttl: Duration) -> TokenCache {
        let c = TokenCache::new(ttl);
        c.set_live(true);
        c
    }

    #[test]
    fn a_row_read_before_a_change_was_noticed_is_not_kept() {
        let c = live(Duration::from_secs(60));
        let generation = c.generation.load(Ordering::Acquire);
        // The database read happens here; a notice arrives before it is kept.
        c.forget();
        c.keep("h", &row("stale"), generation);
        assert!(c.is_empty() && c.kept("h").is_none());
        // A read that began after the notice is kept.
        let generation = c.generation.load(Ordering::Acquire);
        c.keep("h", &row("fresh"), generation);
        assert_eq!(c.kept("h").unwrap().label, "fresh");
    }

    #[test]
    fn nothing_is_served_or_kept_while_not_listening() {
        let c = live(Duration::from_secs(60));
        c.keep("h", &row("a"), c.generation.load(Ordering::Acquire));
        assert!(c.kept("h").is_some());
        c.set_live(false);
        assert!(c.is_empty(), "a lost LISTEN forgets everything");
        c.keep("h", &row("a"), c.generation.load(Ordering::Acquire));
        assert!(c.is_empty() && c.kept("h").is_none());
    }

    #[test]
    fn the_memory_is_bounded() {
        let c = live(Duration::from_secs(60));
        for i in 0..MAX_ENTRIES {
            c.keep(
                &format!("h{i}"),
                &row("a"),
                c.generation.load(Ordering::Acquire),
            );
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        c.keep("one-more", &row("a"), c.generation.load(Ordering::Acquire));
        assert_eq!(c.len(), 1, "emptied and refilled past the bound");
        assert!(c.kept("one-more").is_some());
    }
}
