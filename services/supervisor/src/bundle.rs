//! The tick bundle's reads (DESIGN §4 claim step 4): everything a pod needs
//! beyond the claim itself — DB-first config, ledger tail with actions, the
//! open-items roster, the mode catalogue rows, the site bindings of the
//! policy site's chain, the presets the type's modes name and the week's
//! credit spend — read in ONE autocommit call of `genesis_read_bundle`
//! (one round trip, only the ledger turns not already held by
//! [`LedgerTailCache`](crate::cache::ledger::LedgerTailCache), and the
//! catalogue only when the one held by
//! [`CatalogueCache`](crate::cache::catalogue::CatalogueCache) is no longer
//! current; for an instance claimed before, in the claim's own round trip
//! (`genesis_claim_and_read`), with the type and site chain
//! [`ClaimKinds`](crate::cache::ClaimKinds) held from its last claim; see
//! [`crate::cache`] for what each may hold), plus, for a Compliance instance, the
//! cold-sweep corpus discovery (spec §3.4 step 8) in one tenant transaction
//! with it; for an event that answers the operator, the chat tail
//! ([`read_chat_tail`], its own round trip); and the conversions of store rows to
//! wire messages. Must never write to the database. (PostgreSQL's own statistics are sampled
//! in the background by `ops`, never read per claim.)

use std::sync::Arc;

pub use genesis_proto::rows::{instance as instance_to_proto, ledger_turn as ledger_turn_to_proto};

use crate::cache::ClaimCaches;
use crate::cache::catalogue::{CATALOGUE_KEYS, Catalogue, settle};
use crate::cache::ledger::{CacheOutcome, HeldTail, merge};
use chrono::{DateTime, Utc};
use genesis_core::{AgentDispatcherOptions, AgentEventKind, AgentType};
use genesis_proto::v1 as pb;
use genesis_store::config::TenantConfigs;
use genesis_store::knowledge::ComplianceCorpus;
use genesis_store::llm::PresetRow;
use genesis_store::messages::ChatTail;
use genesis_store::{BundleAsk, LedgerActionRow, LedgerTurn, Store, StoreError};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

/// A ledger turn with its action rows.
#[derive(Debug, Clone, Deserialize)]
pub struct TurnWithActions {
    #[serde(flatten)]
    pub turn: LedgerTurn,
    pub actions: Vec<LedgerActionRow>,
}

/// A mission on the roster.
#[derive(Debug, Clone, Deserialize)]
pub struct RosterMission {
    pub id: Uuid,
    pub title: String,
    pub status: String,
    pub created_at: DateTime<Utc>,
}

/// An open escalation on the roster.
#[derive(Debug, Clone, Deserialize)]
pub struct RosterEscalation {
    pub id: Uuid,
    pub kind: String,
    pub title: String,
    pub created_at: DateTime<Utc>,
}

/// A site binding with its preset.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Binding {
    pub site_id: String,
    pub preset: PresetRow,
}

/// Everything [`read_bundle`] returns.
#[derive(Debug, Clone, Deserialize)]
pub struct BundleRead {
    /// The turns the database sent: the whole tail when `ledger_after` is
    /// 0, else only those after the held turn it names. Emptied once
    /// joined into `ledger_tail`.
    pub ledger: Vec<TurnWithActions>,
    #[serde(default)]
    pub ledger_after: i64,
    /// The tail the pod gets: what was held joined to `ledger` (not part of
    /// the statement's JSON).
    #[serde(skip)]
    pub ledger_tail: Vec<pb::LedgerTurn>,
    /// How the held tail served this read.
    #[serde(skip)]
    pub ledger_cache: CacheOutcome,
    pub missions: Vec<RosterMission>,
    pub escalations: Vec<RosterEscalation>,
    pub credit_spent: Option<f64>,
    /// The catalogue epoch the database read at: every write to a catalogue
    /// table raises it in its own transaction, so an equal epoch means the
    /// held catalogue is current.
    #[serde(default)]
    pub catalogue_epoch: i64,
    /// The modes, bindings, presets and configuration in force: as sent,
    /// or held from an earlier claim at the same epoch.
    #[serde(skip)]
    pub catalogue: Arc<Catalogue>,
    /// How the held catalogue served this read.
    #[serde(skip)]
    pub catalogue_cache: CacheOutcome,
    /// Compliance instances only: the discovered corpus (not part of the
    /// one-statement read).
    #[serde(skip)]
    pub corpus: Option<ComplianceCorpus>,
}

/// What an instance's bundle is read for: its tenant, agent type and site
/// chain, as its last claim found them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimKind {
    pub tenant_id: Uuid,
    pub agent_type: AgentType,
    pub sites: Vec<String>,
}

impl ClaimKind {
    /// The bundle of `instance` of this kind, with the newest `tail` turns
    /// and the credit window of `week_start`.
    pub fn bundle_for(
        &self,
        instance_id: Uuid,
        tail: i64,
        week_start: DateTime<Utc>,
    ) -> BundleFor<'_> {
        BundleFor {
            tenant_id: self.tenant_id,
            instance_id,
            tail,
            agent_type: self.agent_type,
            sites: &self.sites,
            week_start,
        }
    }
}

/// Take the catalogue out of the bundle's JSON: `None` when the database
/// left it out, else the catalogue and its size estimate for the budget.
fn take_catalogue(raw: &mut Value) -> Result<Option<(Catalogue, usize)>, StoreError> {
    let Some(obj) = raw.as_object_mut() else {
        return Err(StoreError::Database("bundle is not a JSON object".into()));
    };
    if !obj.contains_key("modes") {
        return Ok(None);
    }
    let parts: serde_json::Map<String, Value> = CATALOGUE_KEYS
        .iter()
        .filter_map(|k| obj.remove(*k).map(|v| ((*k).to_owned(), v)))
        .collect();
    let parts = Value::Object(parts);
    let bytes = parts.to_string().len() * 2;
    let catalogue: Catalogue = serde_json::from_value(parts).map_err(StoreError::from)?;
    Ok(Some((catalogue, bytes)))
}

/// Which bundle a claim reads: the instance, the tail length, its agent
/// type and site chain, and the credit window's week.
#[derive(Debug, Clone, Copy)]
pub struct BundleFor<'a> {
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub tail: i64,
    pub agent_type: AgentType,
    pub sites: &'a [String],
    pub week_start: DateTime<Utc>,
}

/// What `caches` hold for one bundle read, looked up before it is asked.
#[derive(Debug)]
pub struct HeldForRead {
    ledger: Option<HeldTail>,
    catalogue: Option<crate::cache::catalogue::Held>,
}

impl HeldForRead {
    /// Look up what is held for `b`.
    pub fn lookup(caches: &ClaimCaches, b: &BundleFor<'_>) -> Self {
        Self {
            ledger: caches.ledger.lookup(b.tenant_id, b.instance_id, b.tail),
            catalogue: caches.catalogue.lookup(b.tenant_id, b.agent_type, b.sites),
        }
    }

    /// The read to ask for: only the ledger turns after the held tail, and
    /// no catalogue while the one held is current.
    pub fn ask<'a>(&self, b: &BundleFor<'a>) -> BundleAsk<'a> {
        BundleAsk {
            tail: b.tail,
            agent_type: b.agent_type,
            sites: b.sites,
            week_start: b.week_start,
            known: self.ledger.as_ref().map(|h| h.newest),
            catalogue_epoch: self.catalogue.as_ref().map_or(0, |(epoch, _)| *epoch),
        }
    }
}

/// Read the bundle's inputs in one statement, asking only for the ledger
/// turns after the tail `caches` hold for this instance and for no
/// catalogue while the one held is current, and hold what was read for the
/// next claim.
pub async fn read_bundle(
    store: &Store,
    caches: &ClaimCaches,
    b: &BundleFor<'_>,
) -> Result<BundleRead, StoreError> {
    let held = HeldForRead::lookup(caches, b);
    let (raw, corpus) = store
        .read_tick_bundle(b.tenant_id, b.instance_id, &held.ask(b))
        .await?;
    settle_bundle(caches, b, held, raw, corpus)
}

/// Join a bundle read asked with `held`'s [`HeldForRead::ask`] to what was
/// held, and hold what was read for the next claim. An answer that cannot
/// be joined to what was held forgets it, so the next claim reads it whole.
pub fn settle_bundle(
    caches: &ClaimCaches,
    b: &BundleFor<'_>,
    held: HeldForRead,
    mut raw: Value,
    corpus: Option<ComplianceCorpus>,
) -> Result<BundleRead, StoreError> {
    let (tenant_id, instance_id, tail) = (b.tenant_id, b.instance_id, b.tail);
    let sent_catalogue = take_catalogue(&mut raw)?;
    let mut read: BundleRead = serde_json::from_value(raw).map_err(StoreError::from)?;
    read.corpus = corpus;
    let (sent_catalogue, catalogue_bytes) = sent_catalogue.unzip();
    let (catalogue, outcome) = settle(held.catalogue, read.catalogue_epoch, sent_catalogue)
        .inspect_err(|_| caches.catalogue.forget(tenant_id, b.agent_type, b.sites))
        .map_err(|e| StoreError::Database(e.to_string()))?;
    if let Some(bytes) = catalogue_bytes {
        caches.catalogue.store(
            tenant_id,
            b.agent_type,
            b.sites,
            (read.catalogue_epoch, catalogue.clone()),
            bytes,
        );
    }
    read.catalogue = catalogue;
    read.catalogue_cache = outcome;
    let sent = std::mem::take(&mut read.ledger)
        .iter()
        .map(turn_to_proto)
        .collect();
    let (joined, outcome) = match merge(held.ledger.as_ref(), read.ledger_after, sent, tail) {
        Ok(j) => j,
        Err(e) => {
            caches.ledger.forget(instance_id);
            return Err(StoreError::Database(e.to_string()));
        }
    };
    read.ledger_tail = joined
        .iter()
        .flat_map(|h| &h.turns)
        .map(|t| (**t).clone())
        .collect();
    read.ledger_cache = outcome;
    caches.ledger.store(tenant_id, instance_id, tail, joined);
    Ok(read)
}

/// The operator-chat tail a claimed `event` is planned with, `None` for an
/// event that does not answer the operator
/// ([`genesis_core::prompt::carries_chat_tail`]). For an `OperatorMessage`
/// the tail ends at the message it carries (`messageId`), so the reply
/// never runs ahead of its question; an answered escalation gets the
/// newest messages.
///
/// Why a read of its own, after the claim, and only for those events: the
/// claim and its bundle read are the hot path (about a thousand ticks a
/// second, nearly all heartbeats and signals that never look at the
/// chat), so joining `agent_messages` into them would cost every tick for
/// the few that answer an operator, whose rate is an operator's typing
/// rate. The read is one autocommit round trip (`genesis_read_chat_tail`
/// sets the tenant itself) over the
/// `(instance_id, created_at)` index, and bounds each body in SQL so a long
/// message never crosses the wire whole. Carrying the tail in the event
/// payload at enqueue time was rejected: it would be stale (the agent's
/// reply to an earlier message, written by a tick that ran after the
/// enqueue, would be missing), it would store ten messages again in every
/// such event and in its ledger turn, whose payload every later claim's
/// ledger tail carries, and the answered escalation's enqueue in the
/// decision transaction would have to read the chat as well.
pub async fn read_chat_tail(
    store: &Store,
    tenant_id: Uuid,
    instance_id: Uuid,
    event: &genesis_store::EventRow,
) -> Result<Option<pb::ChatTail>, StoreError> {
    use genesis_core::prompt::{CHAT_MESSAGE_MAX_CHARS, CHAT_TAIL_MESSAGES, carries_chat_tail};
    if !carries_chat_tail(event.event_kind) {
        return Ok(None);
    }
    let upto = (event.event_kind == AgentEventKind::OperatorMessage)
        .then(|| event.payload.get("messageId").and_then(Value::as_str))
        .flatten()
        .and_then(|id| Uuid::parse_str(id).ok());
    let tail = store
        .messages()
        .chat_tail(
            tenant_id,
            instance_id,
            upto,
            CHAT_TAIL_MESSAGES,
            CHAT_MESSAGE_MAX_CHARS,
        )
        .await?;
    Ok(Some(chat_tail_to_proto(&tail)))
}

/// The wire form of a chat tail.
pub fn chat_tail_to_proto(t: &ChatTail) -> pb::ChatTail {
    pb::ChatTail {
        messages: t
            .messages
            .iter()
            .map(|m| pb::ChatTailMessage {
                direction: m.direction.as_str().to_owned(),
                body: m.body.clone(),
                body_chars: m.body_chars,
                created_at: Some(genesis_proto::convert::timestamp_from_chrono(m.created_at)),
            })
            .collect(),
        earlier_omitted: t.earlier_omitted,
    }
}

/// The wire form of the discovered compliance corpus.
pub fn corpus_to_proto(c: &ComplianceCorpus) -> pb::ComplianceCorpus {
    pb::ComplianceCorpus {
        projects: c
            .projects
            .iter()
            .map(|p| pb::CorpusProject {
                project_id: p.project_id.to_string(),
                documents: p.documents,
                source_files: p.source_files,
                dossiers: p.dossiers,
            })
            .collect(),
        tenant_wide_entries: c.tenant_wide_entries,
        truncated: c.truncated,
    }
}

/// Options with the DB-first layer applied: every `system_configs` key
/// genesis-core knows overrides `base` (the code/env values), each
/// platform-bounded one kept within the platform's value for the tenant
/// (genesis-core `ceilings`: a tenant row never raises one, however stale);
/// a malformed value is logged and skipped (the layer below stands) rather
/// than failing the tick.
pub fn effective_options(
    base: &AgentDispatcherOptions,
    configs: &TenantConfigs,
) -> AgentDispatcherOptions {
    let (opts, skipped) = base.for_tenant(&configs.platform, &configs.effective);
    for e in skipped {
        tracing::warn!(error = %e, "ignoring malformed system_configs value");
    }
    opts
}

/// The platform's options for the tenant: `base` with the platform's layer
/// (its rows for the tenant, else the global rows) applied, the bound a
/// mode's budget override is held within (genesis-core
/// `BudgetOverride::within_platform`). Malformed values are skipped, as in
/// [`effective_options`], which reports them.
pub fn platform_options(
    base: &AgentDispatcherOptions,
    configs: &TenantConfigs,
) -> AgentDispatcherOptions {
    base.with_valid_system_configs(&configs.platform).0
}

/// The wire form of a ledger turn held with its actions.
pub fn turn_to_proto(t: &TurnWithActions) -> pb::LedgerTurn {
    ledger_turn_to_proto(&t.turn, &t.actions)
}
