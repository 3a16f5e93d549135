//! The claimed instance's bundle read: the one joined to the claim when it
//! was asked for the kind the instance still yields, else a read of its
//! own; and the kind held for the instance's next claim. Must never serve
//! a joined read made for another type or site chain, and never keep a
//! lease whose read failed.

use chrono::{DateTime, Utc};
use genesis_core::AgentType;
use genesis_store::BundleAsk;
use serde_json::Value;
use tonic::Status;
use uuid::Uuid;

use crate::bundle::{BundleFor, BundleRead, ClaimKind, HeldForRead, read_bundle, settle_bundle};
use crate::error::store_status;
use crate::rpc::AgentPodService;

/// The bundle read asked with the claim, and the raw answer when the
/// database made it (only for a claimed instance of the asked type).
type Joined<'a> = (
    Option<(BundleFor<'a>, HeldForRead, BundleAsk<'a>)>,
    Option<Value>,
);

impl AgentPodService {
    /// The claimed instance's bundle: the read joined to the claim when it
    /// was made for the kind the instance still yields, else read now; the
    /// kind is held for the next claim. A failed read releases the lease.
    pub(super) async fn read_claimed(
        &self,
        (tenant_id, instance_id, session): (Uuid, Uuid, Uuid),
        asked: Option<&ClaimKind>,
        (joined, joined_raw): Joined<'_>,
        found: ClaimKind,
        tail: i64,
        week_start: DateTime<Utc>,
    ) -> Result<BundleRead, Status> {
        // The joined read was made for the asked type and site chain: it
        // serves only an instance that still yields the same.
        let read = match (joined, joined_raw) {
            (Some((b, held, _)), Some(raw)) if asked == Some(&found) => {
                self.metrics.claim_read("joined");
                settle_bundle(&self.caches, &b, held, raw, None)
            }
            (joined, _) => {
                self.metrics.claim_read(if joined.is_some() {
                    "redone"
                } else {
                    "separate"
                });
                let b = found.bundle_for(instance_id, tail, week_start);
                read_bundle(&self.store, &self.caches, &b).await
            }
        };
        if asked != Some(&found) {
            self.caches.kinds.remember(instance_id, found);
        }
        match read {
            Ok(r) => {
                self.metrics.ledger_cache(r.ledger_cache);
                self.metrics.catalogue_cache(r.catalogue_cache);
                Ok(r)
            }
            Err(e) => {
                self.metrics.claim("error");
                self.release_lease(tenant_id, instance_id, session).await;
                Err(store_status(&e))
            }
        }
    }
}

/// What the claimed instance's bundle is read for: its tenant, type and
/// the chain of its policy site, followed, for a redactor, by the sites of
/// the call-site it reviews that the chain does not already name.
pub(super) fn claim_kind(
    tenant_id: Uuid,
    agent_type: AgentType,
    site: &str,
    redaction_site: Option<&str>,
) -> ClaimKind {
    let mut sites: Vec<String> = genesis_core::sites::site_chain(site)
        .into_iter()
        .map(str::to_owned)
        .collect();
    if let Some(target) = redaction_site {
        for s in genesis_core::sites::site_chain(target) {
            if !sites.iter().any(|have| have == s) {
                sites.push(s.to_owned());
            }
        }
    }
    ClaimKind {
        tenant_id,
        agent_type,
        sites,
    }
}
