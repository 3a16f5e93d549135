//! ClaimTick: the CAS lease on an instance, its next due event, and the
//! bundle the tick runs with. The steps, in order: the claim (with the
//! bundle read joined to it for an instance claimed before), the answers
//! that take no tick, the bundle read ([`read`]), the mode the catalogue
//! resolves, the budget and the wire bundle ([`answer`]), and the memo of
//! what was read for the tick's later RPCs. Must never answer a bundle
//! whose read failed or whose mode did not resolve (fail closed): the
//! lease just taken is released, so the event stays for a later claim.

mod answer;
pub(super) use answer::budget_to_proto;
mod read;

use chrono::{DateTime, Utc};
use genesis_core::AgentType;
use genesis_core::budget::week_start_for;
use genesis_core::sites::policy_site_for;
use genesis_proto::convert::timestamp_from_chrono;
use genesis_proto::v1 as pb;
use genesis_store::{ClaimOutcome, EventRow, PriorCounters, StoreError};
use tonic::Status;
use uuid::Uuid;

use super::AgentPodService;
use super::mode::resolve;
use super::model::ClaimTick;
use crate::bundle::{HeldForRead, effective_options, read_chat_tail};
use crate::cache::tick_memo::TickMemo;
use crate::error::store_status;
use answer::Taken;
use read::claim_kind;

use pb::claim_tick_response::Result as R;

impl AgentPodService {
    pub(super) async fn claim(&self, req: ClaimTick) -> Result<pb::ClaimTickResponse, Status> {
        let ClaimTick {
            instance_id,
            tenant_id,
            event_hint: _,
        } = req;
        let session = Uuid::new_v4();
        let started = Utc::now();
        let week_start = week_start_for(started);
        let tail = i64::from(self.settings.options.ledger_tail.max(1));
        // An instance claimed before: ask for its bundle with the claim.
        let asked = self.caches.kinds.lookup(tenant_id, instance_id);
        let joined = asked
            .as_deref()
            .map(|k| {
                let b = k.bundle_for(instance_id, tail, week_start);
                let held = HeldForRead::lookup(&self.caches, &b);
                let ask = held.ask(&b);
                (b, held, ask)
            })
            .filter(|(_, _, ask)| ask.joins_claim());
        let outcome = self
            .store
            .claim_tick_reading(
                tenant_id,
                instance_id,
                session,
                self.settings.lease_ttl,
                self.settings.max_attempts,
                joined.as_ref().map(|(_, _, ask)| ask),
            )
            .await;
        let (outcome, joined_raw) = match outcome {
            Ok((claim, raw)) => (Ok(claim), raw),
            Err(e) => (Err(e), None),
        };
        let claim = match outcome {
            Ok(ClaimOutcome::Claimed(c)) => c,
            Ok(ClaimOutcome::LeaseHeld) => {
                return Ok(self.lease_held(tenant_id, instance_id).await);
            }
            Ok(ClaimOutcome::NothingDue { heartbeat, .. }) => {
                return Ok(self.nothing_due(&heartbeat, started));
            }
            Err(e) => return self.not_claimed(e),
        };

        let instance = &claim.instance;
        let now = Utc::now();
        let site = policy_site_for(instance.agent_type);
        // A redactor also reads its bound call-site's chain: the overlay it
        // reviews (spec §3.9).
        let redaction_site = instance
            .call_site_id
            .as_deref()
            .filter(|_| instance.agent_type == AgentType::PromptRedactor);
        let found = claim_kind(tenant_id, instance.agent_type, site, redaction_site);
        let read = self
            .read_claimed(
                (tenant_id, instance_id, session),
                asked.as_deref(),
                (joined, joined_raw),
                found,
                tail,
                week_start,
            )
            .await?;
        let opts = effective_options(&self.settings.options, &read.catalogue.configs);
        let mode = match resolve(
            instance.agent_type,
            instance.active_mode.as_deref(),
            &read.catalogue.modes,
        ) {
            Ok(m) => m,
            Err(e) => {
                self.metrics.claim("mode_resolution_failed");
                tracing::error!(%tenant_id, %instance_id, error = %e, "claim refused: mode resolution failed closed");
                self.release_lease(tenant_id, instance_id, session).await;
                return Err(e.into());
            }
        };
        let event = &claim.event;
        let taken = Taken {
            session,
            instance,
            event,
            now,
            week_start,
            site,
            redaction_site,
        };
        let terms = self.tick_terms(&taken, &read, &opts, mode);
        let ops = self.ops.current();
        // Only an event that answers the operator reads the chat (its own
        // round trip; see `read_chat_tail` for why not in the claim).
        let chat_tail = match read_chat_tail(&self.store, tenant_id, instance_id, event).await {
            Ok(tail) => tail,
            Err(e) => {
                self.metrics.claim("error");
                self.release_lease(tenant_id, instance_id, session).await;
                return Err(store_status(&e));
            }
        };
        // An event claimed before (a session that died or lost its lease,
        // or a deferred tick) may have an episode to resume.
        let journal = if event.attempts > 1 || instance.consecutive_provider_failures > 0 {
            match self.store.journal().episode(tenant_id, event.id).await {
                Ok(steps) => steps,
                Err(e) => {
                    self.metrics.claim("error");
                    self.release_lease(tenant_id, instance_id, session).await;
                    return Err(store_status(&e));
                }
            }
        } else {
            Vec::new()
        };
        let catalogue_epoch = read.catalogue_epoch;
        let mut bundle = self.tick_bundle(&taken, read, terms, &opts, &ops, chat_tail);
        if !journal.is_empty() {
            self.metrics.claim("resumed");
        }
        bundle.journal = journal
            .into_iter()
            .map(|step| pb::JournalStep {
                seq: step.seq,
                kind: step.kind.as_str().to_owned(),
                entry_json: step.entry.to_string(),
            })
            .collect();
        self.memos.remember(
            session,
            TickMemo {
                tenant_id,
                instance_id,
                event_id: event.id,
                event_kind: event.event_kind,
                agent_type: instance.agent_type,
                active_mode: instance.active_mode.clone(),
                prior: PriorCounters::from(instance),
                catalogue_epoch,
                opts,
            },
        );
        self.metrics.claim("bundle");
        Ok(pb::ClaimTickResponse {
            result: Some(R::Bundle(bundle)),
        })
    }

    /// Another live session holds the lease: the pod is told until when.
    async fn lease_held(&self, tenant_id: Uuid, instance_id: Uuid) -> pb::ClaimTickResponse {
        self.metrics.claim("lease_held");
        let expires = self
            .store
            .instances()
            .get(tenant_id, instance_id)
            .await
            .ok()
            .and_then(|i| i.lease_expires_at);
        pb::ClaimTickResponse {
            result: Some(R::LeaseHeld(pb::LeaseHeld {
                lease_expires_at: expires.map(timestamp_from_chrono),
            })),
        }
    }

    /// Nothing due: the pending heartbeat, and whether this claim seeded it.
    fn nothing_due(&self, heartbeat: &EventRow, started: DateTime<Utc>) -> pb::ClaimTickResponse {
        self.metrics.claim("nothing_due");
        pb::ClaimTickResponse {
            result: Some(R::NothingDue(pb::NothingDue {
                heartbeat_seeded: heartbeat.created_at >= started - chrono::Duration::seconds(1),
                next_tick_at: Some(timestamp_from_chrono(heartbeat.visible_at)),
            })),
        }
    }

    /// A claim the store refused: an instance that is not active is an
    /// answer (its status), anything else an error.
    fn not_claimed(&self, e: StoreError) -> Result<pb::ClaimTickResponse, Status> {
        match e {
            StoreError::FailedPrecondition { reason }
                if reason.starts_with("agent instance is ") =>
            {
                self.metrics.claim("not_active");
                let status = reason.trim_start_matches("agent instance is ").to_owned();
                Ok(pb::ClaimTickResponse {
                    result: Some(R::NotActive(pb::NotActive { status })),
                })
            }
            e => {
                self.metrics.claim("error");
                Err(store_status(&e))
            }
        }
    }

    /// Release a lease taken by a claim that cannot run (fail-closed mode
    /// resolution): the event stays unconsumed for a later claim.
    async fn release_lease(&self, tenant_id: Uuid, instance_id: Uuid, session: Uuid) {
        let res = self
            .store
            .instances()
            .release_lease(tenant_id, instance_id, session)
            .await;
        if let Err(e) = res {
            tracing::warn!(error = %e, %instance_id, "could not release the lease; it will expire");
        }
    }
}
