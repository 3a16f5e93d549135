//! The live turn stream's fan-out: the `genesis_turns` and
//! `genesis_messages` notices of control's one LISTEN connection
//! ([`crate::notices`]) feed a broadcast channel that every `WatchTurns`
//! subscriber filters by tenant. A slow subscriber
//! lags (and skips), it never blocks the listener or other subscribers.
//! Must never load rows here: subscribers load what they need under their
//! own tenant scope, so RLS applies to every stream.

use serde::Deserialize;
use tokio::sync::broadcast;
use uuid::Uuid;

/// The channel `CompleteTick` notifies when a turn commits.
pub const TURNS_CHANNEL: &str = "genesis_turns";
/// The channel a new `agent_messages` row notifies.
pub const MESSAGES_CHANNEL: &str = "genesis_messages";

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubKind {
    /// A ledger turn committed.
    Turn { ledger_id: Uuid },
    /// A chat message was appended.
    Message { message_id: Uuid },
}

/// One notification, routed by tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubEvent {
    pub tenant_id: Uuid,
    pub instance_id: Uuid,
    pub kind: HubKind,
}

#[derive(Deserialize)]
struct TurnNote {
    tenant_id: Uuid,
    instance_id: Uuid,
    ledger_id: Uuid,
}

#[derive(Deserialize)]
struct MessageNote {
    tenant_id: Uuid,
    instance_id: Uuid,
    message_id: Uuid,
}

/// Parse one notification; `None` for a payload of another shape.
pub fn parse_notification(channel: &str, payload: &str) -> Option<HubEvent> {
    match channel {
        TURNS_CHANNEL => serde_json::from_str::<TurnNote>(payload)
            .ok()
            .map(|n| HubEvent {
                tenant_id: n.tenant_id,
                instance_id: n.instance_id,
                kind: HubKind::Turn {
                    ledger_id: n.ledger_id,
                },
            }),
        MESSAGES_CHANNEL => serde_json::from_str::<MessageNote>(payload)
            .ok()
            .map(|n| HubEvent {
                tenant_id: n.tenant_id,
                instance_id: n.instance_id,
                kind: HubKind::Message {
                    message_id: n.message_id,
                },
            }),
        _ => None,
    }
}

/// The broadcast side; clone freely.
#[derive(Clone)]
pub struct TurnHub {
    tx: broadcast::Sender<HubEvent>,
}

impl TurnHub {
    /// A hub whose subscribers may fall `capacity` events behind before
    /// they lag.
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        TurnHub { tx }
    }

    /// A new subscriber, seeing events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.tx.subscribe()
    }

    /// Deliver an event to every current subscriber (none is fine).
    pub fn publish(&self, event: HubEvent) {
        let _ = self.tx.send(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_parse_by_channel() {
        let (t, i, l) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let turn = format!(
            r#"{{"tenant_id":"{t}","instance_id":"{i}","ledger_id":"{l}","decision_kind":"Planned"}}"#
        );
        assert_eq!(
            parse_notification(TURNS_CHANNEL, &turn),
            Some(HubEvent {
                tenant_id: t,
                instance_id: i,
                kind: HubKind::Turn { ledger_id: l }
            })
        );
        assert_eq!(parse_notification(MESSAGES_CHANNEL, &turn), None);
        assert_eq!(parse_notification("other", &turn), None);
    }

    #[tokio::test]
    async fn a_slow_subscriber_lags_without_blocking_the_hub() {
        let hub = TurnHub::new(2);
        let mut slow = hub.subscribe();
        for _ in 0..5 {
            hub.publish(HubEvent {
                tenant_id: Uuid::nil(),
                instance_id: Uuid::nil(),
                kind: HubKind::Turn {
                    ledger_id: Uuid::nil(),
                },
            });
        }
        assert!(matches!(
            slow.recv().await,
            Err(broadcast::error::RecvError::Lagged(3))
        ));
        assert!(slow.recv().await.is_ok());
    }
}
