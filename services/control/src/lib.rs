//! genesis-control: the admin gRPC surface (one module per service under
//! [`services`]), the per-tenant bootstrap of standing agents, the outbox
//! publisher that turns due events into JetStream messages, the shared
//! `WatchTurns` fan-out, bearer-token authentication, and the HTTP health and
//! metrics endpoints. [`run`] starts all of it on listeners the caller binds
//! (the bin binds the configured addresses, tests bind port 0).
//!
//! Control owns every enqueue (the agent never enqueues), but it must never
//! hold storage logic of its own: every row it reads or writes goes through
//! genesis-store, and every domain rule comes from genesis-core.

pub mod auth;
pub mod bootstrap;
pub mod config;
pub mod convert;
pub mod dashboard;
pub mod error;
pub mod http;
pub mod journal_retention;
pub mod limits;
pub mod metrics;
pub mod mode_edit;
pub mod notices;
pub mod publisher;
pub mod replay;
pub mod server;
pub mod services;
pub mod state;
pub mod status;
pub mod streams;
pub mod tokens;
pub mod trace;
pub mod watch;

pub use auth::Caller;
pub use config::ControlConfig;
pub use error::ControlError;
pub use server::{SERVED_SERVICES, run};
pub use state::AppState;
