//! The tick bundle's reads (DESIGN §4 claim step 4): everything a pod needs
//! beyond the claim itself — DB-first config, ledger tail with actions, the
//! open-items roster, the mode catalogue rows, the site bindings of the
//! policy site's chain, the presets the type's modes name and the week's
//! credit spend — read in ONE autocommit call of `genesis_read_bundle`
//! (migration 0081: one round trip, only the ledger turns not already held
//! by [`LedgerTailCache`]), plus, for a Compliance instance, the
//! cold-sweep corpus discovery (spec §3.4 step 8) in one tenant transaction
//! with it, and the conversions of store rows to
//! wire messages. Must never write to the database. (PostgreSQL's own statistics are sampled
//! in the background by `ops`, never read per claim.)

use std::collections::BTreeMap;

use crate::ledger_cache::{CacheOutcome, LedgerTailCache, merge};
use chrono::{DateTime, Utc};
use genesis_core::{AgentDispatcherOptions, AgentType};
use genesis_proto::v1 as pb;
use genesis_store::knowledge::ComplianceCorpus;
use genesis_store::llm::PresetRow;
use genesis_store::{InstanceRow, LedgerActionRow, LedgerTurn, ModeRow, Store, StoreError};
use serde::Deserialize;
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
#[derive(Debug, Clone, Deserialize)]
pub struct Binding {
    pub site_id: String,
    pub preset: PresetRow,
}

/// Everything [`read_bundle`] returns.
#[derive(Debug, Clone, Deserialize)]
pub struct BundleRead {
    pub configs: BTreeMap<String, String>,
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
    pub modes: Vec<ModeRow>,
    pub bindings: Vec<Binding>,
    /// The tenant's presets some mode of this type names (by id or name).
    #[serde(default)]
    pub mode_presets: Vec<PresetRow>,
    pub credit_spent: Option<f64>,
    /// Compliance instances only: the discovered corpus (not part of the
    /// one-statement read).
    #[serde(skip)]
    pub corpus: Option<ComplianceCorpus>,
}

/// Read the bundle's inputs in one statement, asking only for the ledger
/// turns after the tail `cache` holds for this instance, and hold the
/// joined tail for the next claim. An answer that cannot be joined to what
/// was held forgets it, so the next claim reads the whole tail.
#[allow(clippy::too_many_arguments)]
pub async fn read_bundle(
    store: &Store,
    cache: &LedgerTailCache,
    tenant_id: Uuid,
    instance_id: Uuid,
    tail: i64,
    agent_type: AgentType,
    sites: &[String],
    week_start: DateTime<Utc>,
) -> Result<BundleRead, StoreError> {
    let held = cache.lookup(tenant_id, instance_id, tail);
    let (raw, corpus) = store
        .read_tick_bundle(
            tenant_id,
            instance_id,
            tail,
            agent_type,
            sites,
            week_start,
            held.as_ref().map(|h| h.newest),
        )
        .await?;
    let mut read: BundleRead = serde_json::from_value(raw).map_err(StoreError::from)?;
    read.corpus = corpus;
    let sent = std::mem::take(&mut read.ledger)
        .iter()
        .map(turn_to_proto)
        .collect();
    let (joined, outcome) = match merge(held.as_ref(), read.ledger_after, sent, tail) {
        Ok(j) => j,
        Err(e) => {
            cache.forget(instance_id);
            return Err(StoreError::Database(e.to_string()));
        }
    };
    read.ledger_tail = joined
        .iter()
        .flat_map(|h| &h.turns)
        .map(|t| (**t).clone())
        .collect();
    read.ledger_cache = outcome;
    cache.store(tenant_id, instance_id, tail, joined);
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
