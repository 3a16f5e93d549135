//! What a completion's turn is written with besides the pod's report: the
//! claimed event's kind, the counters, the configuration and the mode,
//! taken from the tick's memo when this supervisor claimed it, else read
//! again in one round trip. Owns the choice between the two and the mode a
//! turn records. Must never decide a write: the store's session guard and
//! its check of the counters under the row lock do.

use genesis_core::{AgentDispatcherOptions, AgentEventKind, AgentType};
use genesis_store::PriorCounters;
use tonic::Status;
use uuid::Uuid;

use crate::bundle::effective_options;
use crate::cache::tick_memo::TickMemo;
use crate::rpc::{AgentPodService, status_of};

/// What a completion's turn is written with besides the pod's report.
pub(super) struct TurnContext {
    /// The claimed event's kind; `None` when the event is not this
    /// instance's (the store then refuses the write).
    pub known_kind: Option<AgentEventKind>,
    /// The counters the rules start from; `None` for an unknown instance.
    pub prior: Option<PriorCounters>,
    /// The back-linked call snapshot.
    pub snapshot: Option<genesis_store::llm::CallSnapshotRow>,
    pub opts: AgentDispatcherOptions,
    /// The mode the turn ran in, as recorded.
    pub mode: Option<String>,
    /// The instance's type, which a STUCK halt's notice names; `None` for
    /// an unknown instance.
    pub agent_type: Option<AgentType>,
}

impl TurnContext {
    /// The context as the tick's claim read it: the mode the pod was
    /// served, the configuration of the claim's catalogue, the counters and
    /// event kind the turn write compares under the lock. It names no
    /// snapshot: a named one is read (`turn_context`), and pending attempts
    /// are written, and linked, by the completion itself.
    pub(super) fn remembered(m: &TickMemo) -> Self {
        Self {
            known_kind: Some(m.event_kind),
            prior: Some(m.prior.clone()),
            snapshot: None,
            opts: m.opts.clone(),
            mode: recorded_mode(m.active_mode.as_deref(), Some(m.agent_type.as_str())),
            agent_type: Some(m.agent_type),
        }
    }
}

impl AgentPodService {
    /// The turn's context read again (`genesis_complete_context`, one
    /// round trip): for a tick this supervisor holds no memo of (claimed
    /// through another replica, evicted, or before a restart), or one whose
    /// snapshot was named rather than carried.
    pub(super) async fn turn_context(
        &self,
        tenant_id: Uuid,
        event_id: Uuid,
        instance_id: Uuid,
        snapshot_id: Option<Uuid>,
    ) -> Result<TurnContext, Status> {
        let pre = self
            .store
            .complete_context(tenant_id, event_id, instance_id, snapshot_id)
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        let snapshot = match (snapshot_id, pre.snapshot) {
            (Some(_), Some(row)) => Some(row),
            (Some(_), None) => return Err(Status::not_found("llm call snapshot not found")),
            _ => None,
        };
        Ok(TurnContext {
            // An unknown event still goes to the store, whose session guard
            // and event check answer LEASE_LOST or INVALID_ARGUMENT with
            // nothing written.
            known_kind: pre
                .event_kind
                .as_deref()
                .and_then(|k| k.parse::<AgentEventKind>().ok()),
            prior: pre.prior,
            snapshot,
            opts: effective_options(&self.settings.options, &pre.configs),
            mode: recorded_mode(pre.active_mode.as_deref(), pre.agent_type.as_deref()),
            agent_type: pre.agent_type.as_deref().and_then(|t| t.parse().ok()),
        })
    }
}

/// The mode a turn ran in, as the ledger records it: the instance's
/// `active_mode`, or its type's default mode while none was ever set (the
/// mode the claim resolved).
fn recorded_mode(active_mode: Option<&str>, agent_type: Option<&str>) -> Option<String> {
    match active_mode {
        Some(mode) if !mode.is_empty() => Some(mode.to_owned()),
        _ => agent_type?
            .parse::<AgentType>()
            .ok()
            .and_then(genesis_core::default_mode)
            .map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_recorded_mode_falls_back_to_the_types_default() {
        assert_eq!(
            super::recorded_mode(Some("Incident"), Some("Soa")).as_deref(),
            Some("Incident")
        );
        assert_eq!(
            super::recorded_mode(None, Some("Soa")).as_deref(),
            Some("Strategic")
        );
        assert_eq!(
            super::recorded_mode(Some(""), Some("Compliance")).as_deref(),
            Some("Cadence")
        );
        assert_eq!(super::recorded_mode(None, Some("Bogus")), None);
        assert_eq!(super::recorded_mode(None, None), None);
    }
}
