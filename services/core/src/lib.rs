//! genesis-core: the pure domain of the agents subsystem — stored enums,
//! dispatcher options and the platform-only ceilings among them, the shared
//! decision mapper, cadence, plan-input hash,
//! budgets and credit, the mode catalogue and tool superset, the LLM call-site
//! registry and the provider keys a tenant may name, the tenants an agent pod
//! may serve and the pools ticks are routed to, shared input limits, the
//! bearer-token rules, the retry back-off and the error vocabulary.
//! Every other crate builds on these types. Nothing here may do I/O, spawn, block or be async:
//! each rule is a deterministic function of its arguments.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod budget;
pub mod cadence;
pub mod ceilings;
pub mod coder_contract;
pub mod constitution;
pub mod enums;
pub mod error;
pub mod error_code;
pub mod instance;
pub mod journal;
pub mod lease;
pub mod llm_keys;
pub mod mapper;
pub mod mode_edit;
pub mod modes;
pub mod options;
pub mod plan_hash;
pub mod pod_tenancy;
pub mod presets;
pub mod pricing;
pub mod prompt;
pub mod rate;
pub mod redact;
pub mod replay;
pub mod retry;
pub mod signals;
pub mod sites;
pub mod tick;
pub mod token;
pub mod validate;

pub use budget::{
    BudgetAxis, BudgetEnvelope, BudgetOverride, Consumption, CreditStatus, CreditWindow,
    FoundationalState, Limit, cap_to_credit, check, credit_status, policy_default,
    resolve_tick_budget,
};
pub use cadence::{compute_next_heartbeat_delay, compute_tick_delay, next_heartbeat_after};
pub use enums::{
    AgentDecisionKind, AgentEventKind, AgentSignalKind, AgentType, AttentionKind, AttentionStatus,
    InstanceStatus, MessageDirection, MissionStatus, ModeChangeSource, Phase, TenantStatus,
    TokenScope,
};
pub use error::CoreError;
pub use error_code::{Coded, ErrorCode, StatusClass};
pub use mapper::{AgentDecisionMapper, Completion, MappedDecision, TickOutcome};
pub use modes::{
    MISSION_MODE, ModeDefinition, ResolvedMode, SELF_APPLYING_TOOLS, TOOL_SUPERSET, ToolClass,
    default_mode, resolve_mode, tool_superset_for,
};
pub use options::{
    AgentDispatcherOptions, DEFAULT_POD_CONCURRENCY, MAX_LEASE_TTL_SECS, MAX_POD_CONCURRENCY,
    check_lease_ttl_secs,
};
pub use plan_hash::{OpsDigest, PlanInputHash};
pub use pod_tenancy::{PodPools, PodTenants};
pub use retry::Backoff;
pub use sites::{LlmCallSite, parent_site_id, policy_site_for, site_chain};
pub use tick::{AgentTickSupervisor, PriorCounters, TickDecision, TurnCounters, TurnPlan};
