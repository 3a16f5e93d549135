//! The coordination registry (spec §2.1(b), §2.2): a tenant-partitioned
//! directory of external/worker agents (coders, reviewers, monitors, the SOA's
//! self-registration) used for capability-based task routing.
//!
//! Entries live in a NATS JetStream key-value bucket (default
//! `genesis_registry`) under the key `<tenant_id>.<agent_id>`, so every control
//! replica sees one directory and it survives a control restart. The NATS
//! server in use (2.9.x) has no per-message TTL, so expiry is two-layered: the
//! bucket's `max_age` equals the heartbeat TTL (an entry disappears that long
//! after its last write) and every read also drops entries whose stored
//! `last_heartbeat` is older than the TTL, which keeps expiry exact even when a
//! routing write (which refreshes the bucket age) happened after the last
//! heartbeat.
//!
//! Isolation: every key is prefixed with the tenant id, listing asks the
//! server only for that prefix, and a lookup by id also checks the stored
//! tenant. This module must never return, touch or delete another tenant's
//! entry, and it must never hold the directory in process memory as truth.

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream;
use async_nats::jetstream::consumer::DeliverPolicy;
use async_nats::jetstream::consumer::push::OrderedConfig;
use async_nats::jetstream::kv;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::LanesError;

/// Default bucket name of the registry.
pub const DEFAULT_BUCKET: &str = "genesis_registry";
/// Default heartbeat expiry (spec: heartbeat-expired after 5 minutes).
pub const DEFAULT_TTL: Duration = Duration::from_secs(5 * 60);
/// Longest accepted agent name, in characters.
pub const MAX_NAME_LEN: usize = 128;
/// Longest accepted capability, in bytes.
pub const MAX_CAPABILITY_LEN: usize = 64;
/// Most capabilities one agent may advertise.
pub const MAX_CAPABILITIES: usize = 64;
/// Longest accepted endpoint, in bytes.
pub const MAX_ENDPOINT_LEN: usize = 512;
/// Most metadata pairs one entry may carry.
pub const MAX_METADATA_ENTRIES: usize = 32;
/// Longest metadata key, in bytes.
pub const MAX_METADATA_KEY_LEN: usize = 64;
/// Longest metadata value, in bytes.
pub const MAX_METADATA_VALUE_LEN: usize = 1024;

/// How many times a compare-and-set write is retried under contention.
const CAS_ATTEMPTS: usize = 8;

/// The free-form registry role an agent advertises (spec §2.1(b)), plus
/// `Orchestration` which the standing SOA uses for its self-registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AgentRole {
    /// Writes code.
    Developer,
    /// Reviews changes.
    Reviewer,
    /// Coordinates other agents.
    Coordinator,
    /// Watches systems.
    Monitor,
    /// Anything else.
    Generic,
    /// The standing SOA's self-registration (role/type orchestration).
    Orchestration,
}

impl AgentRole {
    /// The role as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Developer => "Developer",
            Self::Reviewer => "Reviewer",
            Self::Coordinator => "Coordinator",
            Self::Monitor => "Monitor",
            Self::Generic => "Generic",
            Self::Orchestration => "Orchestration",
        }
    }
}

impl std::fmt::Display for AgentRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AgentRole {
    type Err = LanesError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Developer" => Ok(Self::Developer),
            "Reviewer" => Ok(Self::Reviewer),
            "Coordinator" => Ok(Self::Coordinator),
            "Monitor" => Ok(Self::Monitor),
            "Generic" => Ok(Self::Generic),
            "Orchestration" => Ok(Self::Orchestration),
            other => Err(LanesError::validation(
                "role",
                format!("unknown role {other:?}"),
            )),
        }
    }
}

/// What an agent supplies when it registers (the `agent_register` tool).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRegistration {
    /// Display name, 1..=128 characters, no control characters.
    pub name: String,
    /// The advertised role.
    pub role: AgentRole,
    /// Capabilities tasks are routed by; each 1..=64 bytes of `[A-Za-z0-9_.:-]`.
    pub capabilities: Vec<String>,
    /// Where the agent can be reached (URL or address), at most 512 bytes.
    pub endpoint: String,
    /// Free-form string metadata.
    pub metadata: BTreeMap<String, String>,
}

/// One stored directory entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryEntry {
    /// The server-assigned agent id.
    pub agent_id: Uuid,
    /// The owning tenant.
    pub tenant_id: Uuid,
    /// Display name.
    pub name: String,
    /// Advertised role.
    pub role: AgentRole,
    /// Capabilities (deduplicated, in registration order).
    pub capabilities: Vec<String>,
    /// Reach address.
    pub endpoint: String,
    /// Free-form metadata.
    pub metadata: BTreeMap<String, String>,
    /// When the agent registered.
    pub registered_at: DateTime<Utc>,
    /// The last heartbeat (registration counts as one); expiry is measured from here.
    pub last_heartbeat: DateTime<Utc>,
    /// When [`Registry::route`] last picked this agent; `None` if never.
    pub last_routed_at: Option<DateTime<Utc>>,
}

/// Registry configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryConfig {
    /// JetStream key-value bucket name.
    pub bucket: String,
    /// Heartbeat expiry; also the bucket's `max_age`.
    pub ttl: Duration,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            bucket: DEFAULT_BUCKET.to_string(),
            ttl: DEFAULT_TTL,
        }
    }
}

/// The coordination registry over one JetStream key-value bucket.
#[derive(Clone)]
pub struct Registry {
    client: async_nats::Client,
    store: kv::Store,
    ttl: Duration,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("bucket", &self.store.name)
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// A new entry registered and heartbeating now.
fn fresh_entry(tenant: Uuid, agent_id: Uuid, registration: AgentRegistration) -> RegistryEntry {
    let now = Utc::now();
    RegistryEntry {
        agent_id,
        tenant_id: tenant,
        name: registration.name,
        role: registration.role,
        capabilities: registration.capabilities,
        endpoint: registration.endpoint,
        metadata: registration.metadata,
        registered_at: now,
        last_heartbeat: now,
        last_routed_at: None,
    }
}

fn store_err(e: impl std::fmt::Display) -> LanesError {
    LanesError::Store(e.to_string())
}

fn key_of(tenant: Uuid, agent: Uuid) -> String {
    format!("{tenant}.{agent}")
}

impl Registry {
    /// Opens the bucket, creating it with `max_age = ttl` when absent. An
    /// existing bucket is used as it is, so replicas never fight over its config.
    pub async fn connect(
        client: async_nats::Client,
        config: RegistryConfig,
    ) -> Result<Self, LanesError> {
        let js = jetstream::new(client.clone());
        validate_bucket(&config.bucket)?;
        if config.ttl.is_zero() {
            return Err(LanesError::validation("ttl", "must be positive"));
        }
        let store = match js.get_key_value(&config.bucket).await {
            Ok(store) => store,
            Err(_) => {
                create_bucket_stream(&js, &config).await?;
                js.get_key_value(&config.bucket).await.map_err(store_err)?
            }
        };
        Ok(Self {
            client,
            store,
            ttl: config.ttl,
        })
    }

    /// The heartbeat expiry this registry applies on read.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn is_live(&self, entry: &RegistryEntry, now: DateTime<Utc>) -> bool {
        match chrono::Duration::from_std(self.ttl) {
            Ok(ttl) => now.signed_duration_since(entry.last_heartbeat) < ttl,
            Err(_) => true,
        }
    }

    /// Registers an agent under a fresh id (the `agent_register` tool).
    /// Validation failures write nothing.
    pub async fn agent_register(
        &self,
        tenant: Uuid,
        registration: AgentRegistration,
    ) -> Result<RegistryEntry, LanesError> {
        let registration = validate_registration(registration)?;
        let entry = fresh_entry(tenant, Uuid::now_v7(), registration);
        let key = key_of(tenant, entry.agent_id);
        self.store
            .create(&key, encode(&entry)?)
            .await
            .map_err(store_err)?;
        tracing::debug!(%tenant, agent_id = %entry.agent_id, "registry: agent registered");
        Ok(entry)
    }

    /// Registers (or refreshes) an agent under an id the caller owns, such as
    /// a standing instance's own id: every control replica that calls this
    /// for the same agent converges on ONE entry instead of adding its own.
    /// A live entry keeps its `registered_at` and gets a fresh heartbeat; an
    /// expired or absent one is written anew. Validation failures write nothing.
    pub async fn register_fixed(
        &self,
        tenant: Uuid,
        agent_id: Uuid,
        registration: AgentRegistration,
    ) -> Result<RegistryEntry, LanesError> {
        let registration = validate_registration(registration)?;
        match self.heartbeat(tenant, agent_id).await {
            Ok(entry) => return Ok(entry),
            Err(LanesError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let entry = fresh_entry(tenant, agent_id, registration);
        // An unconditional put: a concurrent replica writing the same entry
        // writes the same content, and a stale (expired) value is replaced.
        self.store
            .put(key_of(tenant, agent_id), encode(&entry)?)
            .await
            .map_err(store_err)?;
        tracing::debug!(%tenant, %agent_id, "registry: fixed-id agent registered");
        Ok(entry)
    }

    /// Reads one live entry of this tenant with its revision.
    async fn read_live(
        &self,
        tenant: Uuid,
        agent: Uuid,
    ) -> Result<Option<(RegistryEntry, u64)>, LanesError> {
        let key = key_of(tenant, agent);
        let Some(raw) = self.store.entry(&key).await.map_err(store_err)? else {
            return Ok(None);
        };
        if raw.operation != kv::Operation::Put {
            return Ok(None);
        }
        let entry = decode(&key, &raw.value)?;
        if entry.tenant_id != tenant || entry.agent_id != agent || !self.is_live(&entry, Utc::now())
        {
            return Ok(None);
        }
        Ok(Some((entry, raw.revision)))
    }

    /// Reads one live entry of this tenant; another tenant's id answers `NotFound`.
    pub async fn get(&self, tenant: Uuid, agent: Uuid) -> Result<RegistryEntry, LanesError> {
        self.read_live(tenant, agent)
            .await?
            .map(|(e, _)| e)
            .ok_or_else(|| not_found(agent))
    }

    /// Refreshes an agent's heartbeat. An expired, unregistered or foreign
    /// entry answers `NotFound`: the agent must register again.
    pub async fn heartbeat(&self, tenant: Uuid, agent: Uuid) -> Result<RegistryEntry, LanesError> {
        self.modify(tenant, agent, |e, now| e.last_heartbeat = now)
            .await
    }

    async fn modify(
        &self,
        tenant: Uuid,
        agent: Uuid,
        change: impl Fn(&mut RegistryEntry, DateTime<Utc>),
    ) -> Result<RegistryEntry, LanesError> {
        let key = key_of(tenant, agent);
        for _ in 0..CAS_ATTEMPTS {
            let Some((mut entry, revision)) = self.read_live(tenant, agent).await? else {
                return Err(not_found(agent));
            };
            change(&mut entry, Utc::now());
            match self.store.update(&key, encode(&entry)?, revision).await {
                Ok(_) => return Ok(entry),
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => continue,
                Err(e) => return Err(store_err(e)),
            }
        }
        Err(LanesError::Contended(agent.to_string()))
    }

    /// Lists this tenant's live entries, ordered by agent id (registration order).
    /// Only keys under the tenant's prefix are requested from the server.
    pub async fn list(&self, tenant: Uuid) -> Result<Vec<RegistryEntry>, LanesError> {
        let filter = format!("{}{tenant}.>", self.store.prefix);
        let consumer = self
            .store
            .stream
            .create_consumer(OrderedConfig {
                deliver_subject: self.client.new_inbox(),
                description: Some("genesis registry tenant listing".to_string()),
                filter_subject: filter,
                replay_policy: jetstream::consumer::ReplayPolicy::Instant,
                deliver_policy: DeliverPolicy::LastPerSubject,
                ..Default::default()
            })
            .await
            .map_err(store_err)?;
        let mut out = Vec::new();
        if consumer.cached_info().num_pending == 0 {
            return Ok(out);
        }
        let mut messages = consumer.messages().await.map_err(store_err)?;
        let now = Utc::now();
        while let Some(message) = messages.next().await {
            let message = message.map_err(store_err)?;
            let pending = message.info().map_err(store_err)?.pending;
            let key = message
                .subject
                .as_str()
                .strip_prefix(self.store.prefix.as_str())
                .unwrap_or_default()
                .to_string();
            if !is_delete(message.headers.as_ref()) {
                let entry = decode(&key, &message.payload)?;
                if entry.tenant_id == tenant && self.is_live(&entry, now) {
                    out.push(entry);
                }
            }
            if pending == 0 {
                break;
            }
        }
        out.sort_by_key(|e| e.agent_id);
        Ok(out)
    }

    /// Removes an agent. Another tenant's id, or an id already gone, answers `NotFound`.
    pub async fn unregister(&self, tenant: Uuid, agent: Uuid) -> Result<(), LanesError> {
        let key = key_of(tenant, agent);
        let Some(raw) = self.store.entry(&key).await.map_err(store_err)? else {
            return Err(not_found(agent));
        };
        if raw.operation != kv::Operation::Put {
            return Err(not_found(agent));
        }
        let entry = decode(&key, &raw.value)?;
        if entry.tenant_id != tenant {
            return Err(not_found(agent));
        }
        self.store.purge(&key).await.map_err(store_err)?;
        tracing::debug!(%tenant, agent_id = %agent, "registry: agent unregistered");
        Ok(())
    }

    /// Routes a task needing `capability` to a live agent of this tenant that
    /// advertises it, or `None` when no live agent has it.
    ///
    /// Choice: the least-recently-routed candidate (never-routed first), ties
    /// broken by the freshest heartbeat and then the lowest agent id, so
    /// repeated routing spreads work round-robin over the capable agents. The
    /// pick is recorded with a compare-and-set on the entry, so concurrent
    /// routers on different replicas do not both claim "least recently routed".
    /// Expired entries are never chosen.
    pub async fn route(
        &self,
        tenant: Uuid,
        capability: &str,
    ) -> Result<Option<RegistryEntry>, LanesError> {
        validate_capability(capability)?;
        for _ in 0..CAS_ATTEMPTS {
            let mut candidates: Vec<RegistryEntry> = self
                .list(tenant)
                .await?
                .into_iter()
                .filter(|e| e.capabilities.iter().any(|c| c == capability))
                .collect();
            if candidates.is_empty() {
                return Ok(None);
            }
            candidates.sort_by(|a, b| {
                a.last_routed_at
                    .cmp(&b.last_routed_at)
                    .then(b.last_heartbeat.cmp(&a.last_heartbeat))
                    .then(a.agent_id.cmp(&b.agent_id))
            });
            let chosen = &candidates[0];
            let Some((mut entry, revision)) = self.read_live(tenant, chosen.agent_id).await? else {
                continue;
            };
            if entry.last_routed_at != chosen.last_routed_at {
                continue;
            }
            entry.last_routed_at = Some(Utc::now());
            match self
                .store
                .update(key_of(tenant, entry.agent_id), encode(&entry)?, revision)
                .await
            {
                Ok(_) => return Ok(Some(entry)),
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => continue,
                Err(e) => return Err(store_err(e)),
            }
        }
        Err(LanesError::Contended(capability.to_string()))
    }
}

/// Creates the bucket's backing stream with the same shape the client's own
/// `create_key_value` uses. That helper first queries the account info, whose
/// reply from a 2.9.x server the client cannot decode, so the stream is
/// created directly.
async fn create_bucket_stream(
    js: &jetstream::Context,
    config: &RegistryConfig,
) -> Result<(), LanesError> {
    let stream = jetstream::stream::Config {
        name: format!("KV_{}", config.bucket),
        description: Some("genesis coordination registry".to_string()),
        subjects: vec![format!("$KV.{}.>", config.bucket)],
        max_messages_per_subject: 1,
        max_age: config.ttl,
        allow_rollup: true,
        deny_delete: true,
        deny_purge: false,
        allow_direct: true,
        discard: jetstream::stream::DiscardPolicy::New,
        num_replicas: 1,
        ..Default::default()
    };
    match js.create_stream(stream).await {
        Ok(_) => Ok(()),
        // Another replica created it first: use theirs.
        Err(_) if js.get_key_value(&config.bucket).await.is_ok() => Ok(()),
        Err(e) => Err(store_err(e)),
    }
}

fn is_delete(headers: Option<&HeaderMap>) -> bool {
    headers
        .and_then(|h| h.get("KV-Operation"))
        .map(|v| matches!(v.as_str(), "DEL" | "PURGE"))
        .unwrap_or(false)
}

fn not_found(agent: Uuid) -> LanesError {
    LanesError::NotFound {
        kind: "agent",
        id: agent.to_string(),
    }
}

fn encode(entry: &RegistryEntry) -> Result<Bytes, LanesError> {
    serde_json::to_vec(entry)
        .map(Bytes::from)
        .map_err(|e| LanesError::Store(format!("encode entry: {e}")))
}

fn decode(key: &str, raw: &[u8]) -> Result<RegistryEntry, LanesError> {
    serde_json::from_slice(raw).map_err(|e| LanesError::Corrupt {
        key: key.to_string(),
        message: e.to_string(),
    })
}

fn validate_bucket(bucket: &str) -> Result<(), LanesError> {
    if bucket.is_empty()
        || bucket.len() > 64
        || !bucket
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(LanesError::validation(
            "bucket",
            "must be 1..=64 bytes of [A-Za-z0-9_-]",
        ));
    }
    Ok(())
}

/// Checks a capability: 1..=64 bytes of `[A-Za-z0-9_.:-]`, safe inside NATS
/// subjects and keys, no wildcard or whitespace.
pub fn validate_capability(capability: &str) -> Result<(), LanesError> {
    if capability.is_empty() || capability.len() > MAX_CAPABILITY_LEN {
        return Err(LanesError::validation(
            "capabilities",
            format!("capability must be 1..={MAX_CAPABILITY_LEN} bytes"),
        ));
    }
    if !capability
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
    {
        return Err(LanesError::validation(
            "capabilities",
            format!("capability {capability:?} may only contain [A-Za-z0-9_.:-]"),
        ));
    }
    Ok(())
}

/// Validates and normalises a registration (trims the name, deduplicates capabilities).
pub fn validate_registration(mut r: AgentRegistration) -> Result<AgentRegistration, LanesError> {
    r.name = r.name.trim().to_string();
    let name_chars = r.name.chars().count();
    if name_chars == 0 || name_chars > MAX_NAME_LEN {
        return Err(LanesError::validation(
            "name",
            format!("must be 1..={MAX_NAME_LEN} characters"),
        ));
    }
    if r.name.chars().any(char::is_control) {
        return Err(LanesError::validation(
            "name",
            "must not contain control characters",
        ));
    }
    if r.capabilities.len() > MAX_CAPABILITIES {
        return Err(LanesError::validation(
            "capabilities",
            format!("at most {MAX_CAPABILITIES} capabilities"),
        ));
    }
    let mut caps: Vec<String> = Vec::with_capacity(r.capabilities.len());
    for c in r.capabilities {
        validate_capability(&c)?;
        if !caps.contains(&c) {
            caps.push(c);
        }
    }
    r.capabilities = caps;
    if r.endpoint.len() > MAX_ENDPOINT_LEN
        || r.endpoint
            .chars()
            .any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(LanesError::validation(
            "endpoint",
            format!("must be at most {MAX_ENDPOINT_LEN} bytes without whitespace"),
        ));
    }
    if r.metadata.len() > MAX_METADATA_ENTRIES {
        return Err(LanesError::validation(
            "metadata",
            format!("at most {MAX_METADATA_ENTRIES} entries"),
        ));
    }
    for (k, v) in &r.metadata {
        if k.is_empty() || k.len() > MAX_METADATA_KEY_LEN || k.chars().any(char::is_control) {
            return Err(LanesError::validation(
                "metadata",
                format!(
                    "key {k:?} must be 1..={MAX_METADATA_KEY_LEN} bytes without control characters"
                ),
            ));
        }
        if v.len() > MAX_METADATA_VALUE_LEN {
            return Err(LanesError::validation(
                "metadata",
                format!("value of {k:?} exceeds {MAX_METADATA_VALUE_LEN} bytes"),
            ));
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(name: &str, caps: &[&str]) -> AgentRegistration {
        AgentRegistration {
            name: name.to_string(),
            role: AgentRole::Developer,
            capabilities: caps.iter().map(|s| s.to_string()).collect(),
            endpoint: "http://coder:8080".to_string(),
            metadata: BTreeMap::new(),
        }
    }

    #[test]
    fn registration_rejects_empty_and_overlong_names() {
        assert!(matches!(
            validate_registration(reg("  ", &[])),
            Err(LanesError::Validation { field: "name", .. })
        ));
        assert!(matches!(
            validate_registration(reg(&"x".repeat(129), &[])),
            Err(LanesError::Validation { field: "name", .. })
        ));
    }

    #[test]
    fn capabilities_must_be_key_safe() {
        for bad in ["", "a b", "a.>", "a*", "ü", &"c".repeat(65)] {
            assert!(
                matches!(
                    validate_registration(reg("ok", &[bad])),
                    Err(LanesError::Validation {
                        field: "capabilities",
                        ..
                    })
                ),
                "{bad:?} accepted"
            );
        }
        let ok = validate_registration(reg("ok", &["rust", "code-review", "lang:rust", "rust"]))
            .unwrap();
        assert_eq!(ok.capabilities, vec!["rust", "code-review", "lang:rust"]);
    }

    #[test]
    fn roles_round_trip_through_their_names() {
        for role in [
            AgentRole::Developer,
            AgentRole::Reviewer,
            AgentRole::Coordinator,
            AgentRole::Monitor,
            AgentRole::Generic,
            AgentRole::Orchestration,
        ] {
            assert_eq!(role.as_str().parse::<AgentRole>().unwrap(), role);
        }
        assert!("Boss".parse::<AgentRole>().is_err());
    }
}
