//! The coder contract's environment (spec §2.3): the variable names a coder
//! Job is given and the reference coder reads. Owns the names only, so the
//! spawner that writes them (genesis-lanes) and the coder that reads them
//! (genesis-coder) cannot drift apart. Must never hold a value.

/// The coding task the coder executes.
pub const ENV_TASK_ID: &str = "GENESIS_TASK_ID";
/// The task's tenant.
pub const ENV_TENANT_ID: &str = "GENESIS_TENANT_ID";
/// The coder's own id (its Job name).
pub const ENV_CODER_ID: &str = "GENESIS_CODER_ID";
/// Control's gRPC endpoint, as the coder's pod reaches it.
pub const ENV_CONTROL_URL: &str = "GENESIS_CONTROL_URL";
/// The coder's task-bound token (scope `coder`).
pub const ENV_CODER_TOKEN: &str = "GENESIS_CODER_TOKEN";
/// The task's resolved model (informational: the chain comes from control).
pub const ENV_MODEL: &str = "GENESIS_CODER_MODEL";
/// The task's resolved provider (informational).
pub const ENV_PROVIDER: &str = "GENESIS_CODER_PROVIDER";
/// The task's resolved backend (informational).
pub const ENV_BACKEND: &str = "GENESIS_CODER_BACKEND";
/// The Anthropic base URL, under the official SDKs' name.
pub const ENV_ANTHROPIC_BASE_URL: &str = "ANTHROPIC_BASE_URL";
/// The OpenAI-compatible base URL, under the official SDKs' name.
pub const ENV_OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";
