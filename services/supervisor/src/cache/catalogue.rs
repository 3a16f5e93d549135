//! The supervisor's memory of the bundle's catalogue (the type's mode rows,
//! the site bindings with their presets, the presets the modes name, and
//! the effective configuration), so a claim is sent it only when it
//! changed. Owns the byte budget (`GENESIS_CATALOGUE_CACHE_MB`) and
//! the rule deciding which catalogue a claim uses. Must never be the source
//! of truth: every claim names the epoch of the catalogue held, and the
//! database, which raises the epoch in every transaction that writes a
//! catalogue table, decides whether it is still current.

use std::sync::Arc;

use genesis_core::AgentType;
use genesis_store::ModeRow;
use genesis_store::config::TenantConfigs;
use genesis_store::llm::PresetRow;
use serde::Deserialize;
use uuid::Uuid;

use super::budget::BudgetLru;
use super::ledger::CacheOutcome;
use crate::bundle::Binding;

/// The catalogue part of a tick bundle, as read at one epoch.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Catalogue {
    /// `system_configs`: the tenant's rows over the global ones, and the
    /// platform's values for the tenant.
    pub configs: TenantConfigs,
    pub modes: Vec<ModeRow>,
    pub bindings: Vec<Binding>,
    /// The tenant's presets some mode of this type names (by id or name).
    #[serde(default)]
    pub mode_presets: Vec<PresetRow>,
}

/// The keys the bundle's JSON carries the catalogue under.
pub const CATALOGUE_KEYS: [&str; 4] = ["configs", "modes", "bindings", "mode_presets"];

/// What was held for one (tenant, type, site chain): the epoch it was read
/// at and the catalogue.
pub type Held = (i64, Arc<Catalogue>);

/// A catalogue is read for a tenant (configs, presets and bindings are the
/// tenant's), an agent type (its modes) and a site chain (its bindings).
type Key = (Uuid, AgentType, Vec<String>);

/// Why a bundle's catalogue could not be settled: a database answer that
/// breaks `genesis_read_bundle`'s contract; the claim fails rather than
/// hand a pod a catalogue of unknown age.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogueError {
    #[error("bundle left the catalogue out for epoch {epoch}, which this claim did not hold")]
    Omitted { epoch: i64 },
}

/// Catalogues under one byte budget; `budget_bytes == 0` turns it off
/// (every claim is sent the catalogue).
#[derive(Debug)]
pub struct CatalogueCache {
    held: BudgetLru<Key, Held>,
}

impl CatalogueCache {
    pub fn new(budget_bytes: usize) -> Self {
        Self {
            held: BudgetLru::new(budget_bytes),
        }
    }

    /// The catalogue held for this tenant, type and site chain.
    pub fn lookup(&self, tenant: Uuid, agent_type: AgentType, sites: &[String]) -> Option<Held> {
        if !self.held.enabled() {
            return None; // spares building the key
        }
        self.held.get(&(tenant, agent_type, sites.to_vec()))
    }

    /// Hold `held`, estimated at `bytes`.
    pub fn store(
        &self,
        tenant: Uuid,
        agent_type: AgentType,
        sites: &[String],
        held: Held,
        bytes: usize,
    ) {
        self.held
            .put((tenant, agent_type, sites.to_vec()), held, bytes);
    }

    /// Forget what is held for this tenant, type and site chain.
    pub fn forget(&self, tenant: Uuid, agent_type: AgentType, sites: &[String]) {
        self.held.remove(&(tenant, agent_type, sites.to_vec()));
    }
}

/// The catalogue a claim uses, given what it held, the epoch the database
/// read at and the catalogue it sent (`None`: left out because the claim
/// named that epoch). A sent catalogue always wins and is what to hold.
pub fn settle(
    held: Option<Held>,
    epoch: i64,
    sent: Option<Catalogue>,
) -> Result<(Arc<Catalogue>, CacheOutcome), CatalogueError> {
    match (held, sent) {
        (None, Some(c)) => Ok((Arc::new(c), CacheOutcome::Miss)),
        (Some(_), Some(c)) => Ok((Arc::new(c), CacheOutcome::Stale)),
        (Some((at, c)), None) if at == epoch => Ok((c, CacheOutcome::Hit)),
        (_, None) => Err(CatalogueError::Omitted { epoch }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalogue(key: &str) -> Catalogue {
        Catalogue {
            configs: std::collections::BTreeMap::from([(key.to_owned(), "1".to_owned())]).into(),
            ..Catalogue::default()
        }
    }

    #[test]
    fn a_held_catalogue_serves_only_its_own_epoch() {
        let held = (7, Arc::new(catalogue("a")));
        let (c, outcome) = settle(Some(held.clone()), 7, None).unwrap();
        assert_eq!((c.as_ref(), outcome), (&catalogue("a"), CacheOutcome::Hit));
        assert_eq!(
            settle(Some(held.clone()), 8, None),
            Err(CatalogueError::Omitted { epoch: 8 }),
            "a left-out catalogue at another epoch is refused, never filled from memory"
        );
        assert_eq!(
            settle(None, 7, None),
            Err(CatalogueError::Omitted { epoch: 7 })
        );
    }

    #[test]
    fn a_sent_catalogue_replaces_what_was_held() {
        let held = (7, Arc::new(catalogue("a")));
        let (c, outcome) = settle(Some(held), 8, Some(catalogue("b"))).unwrap();
        assert_eq!(
            (c.as_ref(), outcome),
            (&catalogue("b"), CacheOutcome::Stale)
        );
        let (c, outcome) = settle(None, 8, Some(catalogue("c"))).unwrap();
        assert_eq!((c.as_ref(), outcome), (&catalogue("c"), CacheOutcome::Miss));
    }

    #[test]
    fn lookups_are_scoped_to_tenant_type_and_site_chain() {
        let cache = CatalogueCache::new(1 << 20);
        let (t, sites) = (Uuid::new_v4(), vec!["Agent:Planning".to_owned()]);
        cache.store(
            t,
            AgentType::Soa,
            &sites,
            (3, Arc::new(catalogue("a"))),
            100,
        );
        assert_eq!(
            cache.lookup(t, AgentType::Soa, &sites).map(|h| h.0),
            Some(3)
        );
        assert!(
            cache
                .lookup(Uuid::new_v4(), AgentType::Soa, &sites)
                .is_none()
        );
        assert!(cache.lookup(t, AgentType::Compliance, &sites).is_none());
        assert!(cache.lookup(t, AgentType::Soa, &[]).is_none());
        cache.forget(t, AgentType::Soa, &sites);
        assert!(cache.lookup(t, AgentType::Soa, &sites).is_none());
        let off = CatalogueCache::new(0);
        off.store(
            t,
            AgentType::Soa,
            &sites,
            (3, Arc::new(catalogue("a"))),
            100,
        );
        assert!(off.lookup(t, AgentType::Soa, &sites).is_none());
    }
}
