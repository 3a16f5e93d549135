//! genesis-store: the PostgreSQL side of the agents subsystem. Owns the
//! embedded migrations ([`MIGRATOR`]), the two role-switching pools (tenant
//! path as `genesis_app`, platform loops as `genesis_system`, neither of
//! which bypasses row-level security), the rules for the services' database
//! login ([`roles`]), tenant-scoped transactions for row-level security, the
//! repositories, and the tick supervisor's transactions (claim, renew,
//! complete, reset). Used by control and the supervisor. Must never decide a
//! domain rule itself (mapping, cadence and counters come from genesis-core),
//! never expose `sqlx::Error`, and never offer the services an UPDATE or
//! DELETE path on the ledger (the one test fixture that rewrites a turn is
//! in [`inspect`], named as a fixture).

pub mod attention;
pub mod batch;
pub mod bench;
pub mod coding_tasks;
pub mod config;
pub mod constitution;
pub mod credit;
pub mod decisions;
pub mod dossiers;
pub mod error;
pub mod events;
pub mod inspect;
pub mod instances;
pub mod journal;
pub mod knowledge;
pub mod ledger;
pub mod llm;
pub mod locks;
pub mod messages;
pub mod migrations;
pub mod missions;
pub mod modes;
pub mod replays;
pub mod research;
pub mod roles;
mod rows;
pub mod sessions;
pub mod store;
pub mod telemetry;
pub mod tenants;
pub mod tick;
pub mod token_cache;
pub mod tokens;
pub mod tool_invocations;
pub mod trace;
pub mod windows_holds;

pub use attention::{AttentionRequest, NewAttentionRequest, ResolveOutcome};
pub use decisions::{DecisionAnswer, DecisionOutcome, OverlayReplacement};
pub use error::StoreError;
pub use events::{EnqueueOutcome, EventRow, OutboxBatch};
pub use instances::{InstanceRow, NewInstance};
pub use ledger::{LedgerActionRow, LedgerTurn};
pub use messages::MessageRow;
pub use missions::{MissionFilter, MissionRow, MissionStatus, NewMission};
pub use modes::{ModeChange, ModeEditEvent, ModeEditOutcome, ModeRow};
pub use sessions::DashboardSession;
pub use store::{
    DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT, DatabaseStats, Store, StoreOptions, TenantTx,
    connect_options,
};
pub use tenants::{Tenant, TenantCensus};
pub use tick::{
    BundleAsk, ClaimOutcome, CompleteContext, CompletedTurn, ExpectedPrior, LedgerAction,
    PriorCounters, PriorRead, ResetOutcome, TickClaim, TickCompletion, TickDecision,
};
pub use token_cache::TokenCache;
pub use tokens::ApiToken;

pub use migrations::MIGRATOR;
