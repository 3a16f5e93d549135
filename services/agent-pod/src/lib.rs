//! genesis-agent-pod: the stateless worker that pulls tick messages from
//! JetStream, claims each tick from genesis-supervisor over gRPC, runs the
//! twelve-step planning loop (spec §3.4) and the sub-agent invoker (§3.5),
//! completes the tick over gRPC and then acks the message.
//!
//! The bin only parses configuration and calls [`run`]. This crate must never
//! hold database credentials or reach the database: everything it knows
//! arrives in the tick bundle, everything it changes goes through the
//! supervisor (an agent-pod token, the supervisor URL, NATS and LLM
//! credentials are all it holds).

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod config;
pub mod error;
pub mod fairness;
pub mod fault;
pub mod http;
pub mod invoker;
pub mod metrics;
pub mod model;
pub mod planning;
pub mod pull;
pub mod replay;
pub mod resume;
pub mod supervisor;
pub mod worker;

/// The service's name: its command name, its telemetry `service.name` and
/// its metrics' service label.
pub const SERVICE_NAME: &str = "genesis-agent-pod";

pub use config::PodConfig;
pub use error::PodError;
pub use invoker::{CredentialSource, EpisodeEnd, EpisodeReport, EpisodeSpec, Invoker};
pub use metrics::{PodMetrics, PodMetricsSnapshot};
pub use model::{BundleError, ClaimedTick};
pub use planning::{PodContext, TickResult, run_tick};
pub use supervisor::{Supervisor, TickIds};
pub use worker::{
    Disposition, PodDeps, TickMessage, WorkerSettings, process_message, run, run_with,
};
