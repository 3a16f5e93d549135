//! The control crate's error vocabulary for its background loops and its
//! process entry point. RPC failures do not use it: they are `tonic::Status`
//! values built once in [`crate::status`]. Must never carry a raw token or a
//! database password in a message.

use thiserror::Error;

/// Every failure `run`, the publisher and the bootstrap can report.
#[derive(Debug, Error)]
pub enum ControlError {
    /// A configuration value is unusable; names the setting.
    #[error("configuration: {0}")]
    Config(String),
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] genesis_store::StoreError),
    /// NATS or JetStream refused or was unreachable.
    #[error("nats: {0}")]
    Nats(String),
    /// A direct database connection (LISTEN, advisory locks) failed.
    #[error("database connection: {0}")]
    Database(String),
    /// A listener or socket failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// The gRPC server stopped with an error.
    #[error("grpc server: {0}")]
    Transport(String),
}

impl From<sqlx::Error> for ControlError {
    fn from(err: sqlx::Error) -> Self {
        ControlError::Database(err.to_string())
    }
}
