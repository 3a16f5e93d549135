//! genesis-core: the pure domain of the agents subsystem — stored enums,
//! dispatcher options, the shared decision mapper, cadence, plan-input hash,
//! budgets and credit, the mode catalogue and tool superset, the LLM call-site
//! registry, shared input limits and the error vocabulary. Every other crate
//! builds on these types. Nothing here may do I/O, spawn, block or be async:
//! each rule is a deterministic function of its arguments.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod budget;
pub mod enums;
pub mod error;
pub mod options;

pub use budget::{BudgetEnvelope, Limit};
pub use enums::{
    AgentDecisionKind, AgentEventKind, AgentSignalKind, AgentType, AttentionKind, AttentionStatus,
    InstanceStatus, MessageDirection, MissionStatus, ModeChangeSource, Phase, TokenScope,
};
pub use error::CoreError;
pub use options::AgentDispatcherOptions;
