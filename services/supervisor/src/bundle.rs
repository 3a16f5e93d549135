//! The tick bundle's reads (DESIGN §4 claim step 4): everything a pod needs
//! beyond the claim itself — DB-first config, ledger tail with actions, the
//! open-items roster, the mode catalogue rows, the site bindings of the
//! policy site's chain, the presets the type's modes name and the week's
//! credit spend — read in ONE autocommit call of `genesis_read_bundle`
//! (migrations 0081 and 0083: one round trip, only the ledger turns not
//! already held by [`LedgerTailCache`], and the catalogue only when the one
//! held by [`CatalogueCache`] is no longer current), plus, for a Compliance instance, the
//! cold-sweep corpus discovery (spec §3.4 step 8) in one tenant transaction
//! with it, and the conversions of store rows to
//! wire messages. Must never write to the database. (PostgreSQL's own statistics are sampled
//! in the background by `ops`, never read per claim.)

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::catalogue_cache::{CATALOGUE_KEYS, Catalogue, CatalogueCache, settle};
use crate::ledger_cache::{CacheOutcome, LedgerTailCache, merge};
use chrono::{DateTime, Utc};
use genesis_core::{AgentDispatcherOptions, AgentType};
use genesis_proto::v1 as pb;
use genesis_store::knowledge::ComplianceCorpus;
use genesis_store::llm::PresetRow;
use genesis_store::{InstanceRow, LedgerActionRow, LedgerTurn, Store, StoreError};
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
    /// The catalogue epoch the database read at (migration 0083).
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

/// The held ledger tails and catalogues a claim's read consults.
#[derive(Debug)]
pub struct ClaimCaches {
    pub ledger: LedgerTailCache,
    pub catalogue: CatalogueCache,
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

/// Read the bundle's inputs in one statement, asking only for the ledger
/// turns after the tail `caches` hold for this instance and for no
/// catalogue while the one held is current, and hold what was read for the
/// next claim. An answer that cannot be joined to what was held forgets it,
/// so the next claim reads it whole.
#[allow(clippy::too_many_arguments)]
pub async fn read_bundle(
    store: &Store,
    caches: &ClaimCaches,
    tenant_id: Uuid,
    instance_id: Uuid,
    tail: i64,
    agent_type: AgentType,
    sites: &[String],
    week_start: DateTime<Utc>,
) -> Result<BundleRead, StoreError> {
    let held = caches.ledger.lookup(tenant_id, instance_id, tail);
    let held_catalogue = caches.catalogue.lookup(tenant_id, agent_type, sites);
    let (mut raw, corpus) = store
        .read_tick_bundle(
            tenant_id,
            instance_id,
            tail,
            agent_type,
            sites,
            week_start,
            held.as_ref().map(|h| h.newest),
            held_catalogue.as_ref().map_or(0, |(epoch, _)| *epoch),
        )
        .await?;
    let sent_catalogue = take_catalogue(&mut raw)?;
    let mut read: BundleRead = serde_json::from_value(raw).map_err(StoreError::from)?;
    read.corpus = corpus;
    let (sent_catalogue, catalogue_bytes) = sent_catalogue.unzip();
    let (catalogue, outcome) = settle(held_catalogue, read.catalogue_epoch, sent_catalogue)
        .inspect_err(|_| caches.catalogue.forget(tenant_id, agent_type, sites))
        .map_err(|e| StoreError::Database(e.to_string()))?;
    if let Some(bytes) = catalogue_bytes {
        caches.catalogue.store(
            tenant_id,
            agent_type,
            sites,
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
    let (joined, outcome) = match merge(held.as_ref(), read.ledger_after, sent, tail) {
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
/// genesis-core knows overrides `base`; a malformed value is logged and
/// skipped (the code/env value stands) rather than failing the tick.
pub fn effective_options(
    base: &AgentDispatcherOptions,
    configs: &BTreeMap<String, String>,
) -> AgentDispatcherOptions {
    let mut opts = base.clone();
    for (key, value) in configs {
        if let Err(e) = opts.apply_system_config(key, value) {
            tracing::warn!(%key, error = %e, "ignoring malformed system_configs value");
        }
    }
    opts
}

/// The wire form of an instance snapshot (the store's one conversion).
pub fn instance_to_proto(i: &InstanceRow) -> pb::AgentInstance {
    genesis_store::wire::instance(i)
}

/// The wire form of a ledger turn (the store's one conversion).
pub fn turn_to_proto(t: &TurnWithActions) -> pb::LedgerTurn {
    genesis_store::wire::ledger_turn(&t.turn, &t.actions)
}
