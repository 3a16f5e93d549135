//! The stored enumerations of the agents subsystem (spec §2.1, §3.1;
//! docs/internals.md "Stored enumerations"). Owns their text forms: every
//! crate prints them with `as_str()` / `Display`, parses them with `FromStr`
//! and (de)serialises them as the same strings. Must never change a published
//! text form: rows in the database keep it forever.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::CoreError;

/// Declares a closed, text-stored enumeration with `ALL`, `as_str`,
/// `Display`, `FromStr` and string serde, so every enum has the same shape.
macro_rules! stored_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every member, in declaration order.
            pub const ALL: &'static [Self] = &[ $( Self::$variant ),+ ];

            /// Every member's text form, in declaration order.
            pub const TEXTS: &'static [&'static str] = &[ $( $text ),+ ];

            /// The stored text form (docs/internals.md).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => $text ),+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::error::CoreError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $( $text => Ok(Self::$variant), )+
                    _ => Err($crate::error::CoreError::UnknownEnum {
                        kind: stringify!($name),
                        value: s.to_owned(),
                        expected: Self::TEXTS,
                    }),
                }
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <String as ::serde::Deserialize>::deserialize(deserializer)?;
                text.parse().map_err(::serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use stored_enum;

stored_enum! {
    /// The persisted discriminator of an `agent_instances` row (spec §2.1a):
    /// selects policy, planning site, mode catalogue and tool superset.
    AgentType {
        /// The Strategic Orchestration Agent, one per tenant.
        Soa => "Soa",
        /// The standing Compliance agent.
        Compliance => "Compliance",
        /// The Prompt Engineer (call-site-bound redactor), bursty.
        PromptRedactor => "PromptRedactor",
        /// A development mission running as an agent type.
        MissionDevelopment => "MissionDevelopment",
        /// A research mission running as an agent type.
        MissionResearch => "MissionResearch",
        /// An operations mission running as an agent type.
        MissionOperations => "MissionOperations",
    }
}

impl AgentType {
    /// True for the Mission* members, whose lifecycle is driven by the
    /// mission pump rather than `agent_event_queue`.
    pub const fn is_mission(self) -> bool {
        matches!(
            self,
            Self::MissionDevelopment | Self::MissionResearch | Self::MissionOperations
        )
    }

    /// True for the always-on agents (SOA, Compliance) that settle to the
    /// flat heartbeat; the Prompt Engineer and missions are bursty/bound.
    pub const fn is_standing(self) -> bool {
        matches!(self, Self::Soa | Self::Compliance)
    }
}

stored_enum! {
    /// The kind of an `agent_event_queue` row (spec §3.1).
    AgentEventKind {
        /// First event for a fresh instance: plan-then-greet opener.
        AgentInitialized => "AgentInitialized",
        /// The self-scheduled heartbeat.
        AgentTick => "AgentTick",
        /// An operator chat message to read next tick.
        OperatorMessage => "OperatorMessage",
        /// An operator answered a decision the agent raised.
        OperatorAnsweredEscalation => "OperatorAnsweredEscalation",
        /// A steered mission changed status.
        MissionStateChanged => "MissionStateChanged",
        /// A decision resolved.
        DecisionResolved => "DecisionResolved",
        /// A dependency unblocked.
        DependencyCompleted => "DependencyCompleted",
        /// A generic signal whose payload carries an [`AgentSignalKind`].
        ExternalSignalReceived => "ExternalSignalReceived",
    }
}

stored_enum! {
    /// The signal carried in an `ExternalSignalReceived` payload (spec §3.1).
    AgentSignalKind {
        /// A new (model, provider) couple appeared.
        NewCouple => "NewCouple",
        /// Guidance for the call-site was updated.
        GuidanceUpdated => "GuidanceUpdated",
        /// A quality regression was detected.
        RegressionDetected => "RegressionDetected",
        /// A human explicitly asked for a rework.
        HumanRequest => "HumanRequest",
    }
}

stored_enum! {
    /// Lifecycle status of an agent instance (DESIGN §3, lower case).
    InstanceStatus {
        /// Ticking.
        Active => "active",
        /// Stopped by an operator (or created paused); not ticked.
        Paused => "paused",
        /// Halted (e.g. by the STUCK guard); not ticked.
        Closed => "closed",
    }
}

stored_enum! {
    /// Who wrote a mode change (spec §2.5): the agent itself never can.
    ModeChangeSource {
        /// The operator's UI / admin API mode control.
        Ui => "ui",
        /// Approval of a `soa_propose_mode_change` attention request.
        Approval => "approval",
        /// An operator's edit of a catalogue mode (no instance switched).
        Catalogue => "catalogue",
    }
}

stored_enum! {
    /// Direction of an `agent_messages` transcript row.
    MessageDirection {
        /// Operator wrote to the agent.
        OperatorToAgent => "operator_to_agent",
        /// Agent wrote to the operator (`soa_send_message`).
        AgentToOperator => "agent_to_operator",
    }
}

stored_enum! {
    /// What an attention request (decision-queue row) asks the operator.
    AttentionKind {
        /// A decision raised with `soa_propose_decision`.
        Decision => "decision",
        /// A proposed mode switch (`soa_propose_mode_change`).
        ModeChange => "mode_change",
        /// The STUCK guard halted an instance.
        StuckHalt => "stuck_halt",
        /// An event exceeded its delivery attempts.
        DeadLetter => "dead_letter",
        /// A mission asked the operator (`mission_ask_user`).
        MissionQuestion => "mission_question",
        /// A Prompt Engineer redaction needs review.
        Redaction => "redaction",
        /// Every LLM provider of an instance's chain kept failing.
        ProviderFailure => "provider_failure",
    }
}

stored_enum! {
    /// Whether an attention request still awaits the operator.
    AttentionStatus {
        /// Awaiting an answer.
        Open => "open",
        /// Answered.
        Resolved => "resolved",
    }
}

stored_enum! {
    /// Status of a `missions` row.
    MissionStatus {
        /// Created by `soa_propose_task`, not yet started.
        Proposed => "proposed",
        /// Running.
        Active => "active",
        /// Waiting on something.
        Blocked => "blocked",
        /// Finished successfully.
        Completed => "completed",
        /// Abandoned.
        Cancelled => "cancelled",
    }
}

impl MissionStatus {
    /// Whether no further change is allowed (completed, cancelled).
    pub const fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Cancelled)
    }

    /// The lifecycle: proposed → active | cancelled; active → blocked |
    /// completed | cancelled; blocked → active | cancelled; the terminal
    /// statuses never change. Staying in the same status is not a
    /// transition: the store answers it without writing or enqueueing.
    pub const fn can_become(self, to: Self) -> bool {
        matches!(
            (self, to),
            (Self::Proposed, Self::Active | Self::Cancelled)
                | (
                    Self::Active,
                    Self::Blocked | Self::Completed | Self::Cancelled
                )
                | (Self::Blocked, Self::Active | Self::Cancelled)
        )
    }
}

stored_enum! {
    /// Status of a `tenants` row. Only an active tenant runs standing
    /// agents or is bootstrapped; the schema's CHECK holds the same list.
    TenantStatus {
        /// Serving.
        Active => "active",
        /// Kept, but nothing of it is started.
        Suspended => "suspended",
    }
}

stored_enum! {
    /// What an API token may reach.
    TokenScope {
        /// The admin surface (tenant-bound or platform-wide).
        Operator => "operator",
        /// The AgentPod service and nothing else.
        AgentPod => "agent-pod",
        /// One coder's credential: bound to one coding task of one tenant,
        /// short-lived, revoked when the task settles.
        Coder => "coder",
    }
}

/// The classification of a ledger turn (spec §3.1). Additive-only: an unknown
/// stored string loads as [`AgentDecisionKind::Other`] and writes back
/// unchanged, so historical rows keep classifying.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AgentDecisionKind {
    /// The opener turn of a fresh instance.
    Initialized,
    /// An idle heartbeat (short-circuit or credit idle).
    Heartbeat,
    /// Replied to an operator message.
    MessageAcknowledged,
    /// Resumed after an answered escalation.
    EscalationResumed,
    /// Legacy no-op.
    NoOp,
    /// Planned without a side-effecting action.
    Planned,
    /// Took at least one side-effecting action.
    ActedWithTool,
    /// Blocked / waiting for an external event.
    WaitingForEvent,
    /// Raised an escalation to a human.
    Escalated,
    /// A stored string this version does not know; kept verbatim.
    Other(String),
}

impl AgentDecisionKind {
    /// The nine kinds this version knows, in spec order.
    pub const KNOWN: &'static [Self] = &[
        Self::Initialized,
        Self::Heartbeat,
        Self::MessageAcknowledged,
        Self::EscalationResumed,
        Self::NoOp,
        Self::Planned,
        Self::ActedWithTool,
        Self::WaitingForEvent,
        Self::Escalated,
    ];

    /// The stored text form; an `Other` returns its original string.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Initialized => "Initialized",
            Self::Heartbeat => "Heartbeat",
            Self::MessageAcknowledged => "MessageAcknowledged",
            Self::EscalationResumed => "EscalationResumed",
            Self::NoOp => "NoOp",
            Self::Planned => "Planned",
            Self::ActedWithTool => "ActedWithTool",
            Self::WaitingForEvent => "WaitingForEvent",
            Self::Escalated => "Escalated",
            Self::Other(s) => s,
        }
    }

    /// False only for an [`AgentDecisionKind::Other`].
    pub fn is_known(&self) -> bool {
        !matches!(self, Self::Other(_))
    }
}

impl fmt::Display for AgentDecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AgentDecisionKind {
    type Err = CoreError;

    /// Known names map to their variant; any other non-empty string becomes
    /// `Other` unchanged. Only the empty string is refused: it cannot have
    /// been written by any version.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(CoreError::UnknownEnum {
                kind: "AgentDecisionKind",
                value: String::new(),
                expected: &[],
            });
        }
        Ok(Self::KNOWN
            .iter()
            .find(|k| k.as_str() == s)
            .cloned()
            .unwrap_or_else(|| Self::Other(s.to_owned())))
    }
}

impl Serialize for AgentDecisionKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for AgentDecisionKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

stored_enum! {
    /// Where an instance stands after its last turn (`agent_instances.phase`,
    /// `agent_state_ledger.phase`). The completion write is the only writer;
    /// the schema's `agent_phase` domain holds the same list.
    Phase {
        /// Quiet, waiting for the next heartbeat or event.
        Idle => "idle",
        /// The planner returned blocked; counts toward the STUCK guard.
        IdleBlocked => "idle:blocked",
        /// The episode ended without a terminator for a reason that is not
        /// the planner's verdict (a per-tick budget ran out, the pod failed):
        /// waits for the next event, never counts toward the STUCK guard.
        IdleExhausted => "idle:exhausted",
        /// Took a side-effecting action this tick.
        Acted => "acted",
        /// Raised an escalation this tick.
        Escalated => "escalated",
        /// Halted by the STUCK guard.
        HaltedStuck => "halted:stuck",
    }
}

impl Phase {
    /// Every `idle*` phase: the instance waits for its next event.
    pub const fn is_idle(self) -> bool {
        matches!(self, Self::Idle | Self::IdleBlocked | Self::IdleExhausted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T>(all: &[T])
    where
        T: Copy + fmt::Display + FromStr<Err = CoreError> + PartialEq + fmt::Debug + Serialize,
        T: for<'de> Deserialize<'de>,
    {
        for v in all {
            let text = v.to_string();
            assert_eq!(text.parse::<T>().ok(), Some(*v), "FromStr of {text}");
            let json = serde_json::to_string(v).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), *v);
        }
    }

    #[test]
    fn every_closed_enum_round_trips_through_text_and_serde() {
        round_trips(AgentType::ALL);
        round_trips(AgentEventKind::ALL);
        round_trips(AgentSignalKind::ALL);
        round_trips(InstanceStatus::ALL);
        round_trips(ModeChangeSource::ALL);
        round_trips(MessageDirection::ALL);
        round_trips(AttentionKind::ALL);
        round_trips(AttentionStatus::ALL);
        round_trips(MissionStatus::ALL);
        round_trips(TenantStatus::ALL);
        round_trips(TokenScope::ALL);
        round_trips(Phase::ALL);
    }

    #[test]
    fn text_forms_match_the_internals_table() {
        let types: Vec<_> = AgentType::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(
            types,
            [
                "Soa",
                "Compliance",
                "PromptRedactor",
                "MissionDevelopment",
                "MissionResearch",
                "MissionOperations"
            ]
        );
        assert_eq!(AgentEventKind::ALL.len(), 8);
        assert_eq!(AgentSignalKind::ALL.len(), 4);
        assert_eq!(InstanceStatus::Active.as_str(), "active");
        assert_eq!(InstanceStatus::Closed.as_str(), "closed");
        assert_eq!(ModeChangeSource::Approval.as_str(), "approval");
        assert_eq!(
            MessageDirection::OperatorToAgent.as_str(),
            "operator_to_agent"
        );
        assert_eq!(AttentionKind::StuckHalt.as_str(), "stuck_halt");
        assert_eq!(AttentionKind::MissionQuestion.as_str(), "mission_question");
        assert_eq!(MissionStatus::Cancelled.as_str(), "cancelled");
        assert_eq!(TokenScope::AgentPod.as_str(), "agent-pod");
        assert_eq!(
            AgentEventKind::OperatorAnsweredEscalation.to_string(),
            "OperatorAnsweredEscalation"
        );
    }

    #[test]
    fn unknown_text_is_a_typed_error_naming_kind_and_value() {
        assert_eq!(
            "soa".parse::<AgentType>(),
            Err(CoreError::UnknownEnum {
                kind: "AgentType",
                value: "soa".into(),
                expected: AgentType::TEXTS,
            })
        );
        assert_eq!(
            "Active".parse::<InstanceStatus>(),
            Err(CoreError::UnknownEnum {
                kind: "InstanceStatus",
                value: "Active".into(),
                expected: &["active", "paused", "closed"],
            })
        );
        assert!(serde_json::from_str::<AgentEventKind>("\"Tick\"").is_err());
        assert!("".parse::<TokenScope>().is_err());
    }

    #[test]
    fn mission_and_standing_predicates_partition_the_types() {
        let missions: Vec<_> = AgentType::ALL.iter().filter(|t| t.is_mission()).collect();
        assert_eq!(missions.len(), 3);
        let standing: Vec<_> = AgentType::ALL
            .iter()
            .copied()
            .filter(|t| t.is_standing())
            .collect();
        assert_eq!(standing, [AgentType::Soa, AgentType::Compliance]);
        assert!(!AgentType::PromptRedactor.is_standing());
        assert!(!AgentType::PromptRedactor.is_mission());
        assert!(
            AgentType::ALL
                .iter()
                .all(|t| !(t.is_mission() && t.is_standing()))
        );
    }

    #[test]
    fn known_decision_kinds_round_trip() {
        assert_eq!(AgentDecisionKind::KNOWN.len(), 9);
        for k in AgentDecisionKind::KNOWN {
            assert!(k.is_known());
            assert_eq!(k.as_str().parse::<AgentDecisionKind>().as_ref(), Ok(k));
            let json = serde_json::to_string(k).unwrap();
            assert_eq!(
                serde_json::from_str::<AgentDecisionKind>(&json).unwrap(),
                *k
            );
        }
    }

    #[test]
    fn unknown_stored_decision_kind_loads_and_writes_back_unchanged() {
        let k: AgentDecisionKind = "FutureKindV9".parse().unwrap();
        assert_eq!(k, AgentDecisionKind::Other("FutureKindV9".into()));
        assert!(!k.is_known());
        assert_eq!(k.as_str(), "FutureKindV9");
        let json = serde_json::to_string(&k).unwrap();
        assert_eq!(json, "\"FutureKindV9\"");
        assert_eq!(serde_json::from_str::<AgentDecisionKind>(&json).unwrap(), k);
        // Case matters: a near-miss is kept verbatim, not coerced.
        assert_eq!(
            "planned".parse::<AgentDecisionKind>().unwrap(),
            AgentDecisionKind::Other("planned".into())
        );
    }

    #[test]
    fn empty_decision_kind_is_refused() {
        assert_eq!(
            "".parse::<AgentDecisionKind>(),
            Err(CoreError::UnknownEnum {
                kind: "AgentDecisionKind",
                value: String::new(),
                expected: &[]
            })
        );
    }

    #[test]
    fn phase_texts_are_the_documented_strings() {
        assert_eq!(
            Phase::TEXTS,
            [
                "idle",
                "idle:blocked",
                "idle:exhausted",
                "acted",
                "escalated",
                "halted:stuck"
            ]
        );
        let idle: Vec<_> = Phase::ALL.iter().copied().filter(|p| p.is_idle()).collect();
        assert_eq!(
            idle,
            [Phase::Idle, Phase::IdleBlocked, Phase::IdleExhausted]
        );
        assert!("idle:napping".parse::<Phase>().is_err());
        assert!("Idle".parse::<Phase>().is_err());
    }

    #[test]
    fn mission_terminal_statuses_never_change() {
        use MissionStatus::*;
        for to in MissionStatus::ALL {
            assert!(!Completed.can_become(*to));
            assert!(!Cancelled.can_become(*to));
        }
        assert!(Completed.is_terminal() && Cancelled.is_terminal());
        assert!(!Proposed.is_terminal() && !Active.is_terminal() && !Blocked.is_terminal());
    }

    #[test]
    fn mission_lifecycle_allows_only_forward_and_unblock_moves() {
        use MissionStatus::*;
        let allowed = [
            (Proposed, Active),
            (Proposed, Cancelled),
            (Active, Blocked),
            (Active, Completed),
            (Active, Cancelled),
            (Blocked, Active),
            (Blocked, Cancelled),
        ];
        for from in MissionStatus::ALL {
            for to in MissionStatus::ALL {
                assert_eq!(
                    from.can_become(*to),
                    allowed.contains(&(*from, *to)),
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn tenant_status_matches_the_schema_check() {
        let texts: Vec<_> = TenantStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(texts, ["active", "suspended"]);
        assert!("Active".parse::<TenantStatus>().is_err());
    }
}
