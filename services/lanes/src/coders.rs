//! On-demand coders (spec §2.3): containerised coding workers run as
//! Kubernetes `batch/v1` Jobs through kube, and the resolution of a coding
//! task's (model, provider, backend) couple.
//!
//! It owns the Job manifest ([`build_job_manifest`], pure), the spawner that
//! creates, lists and stops a tenant's coder Jobs and reads the log of a
//! Job's newest pod ([`CoderSpawner`]), and [`resolve_couple`] (pure: a
//! preset id overrides the explicit triple).
//!
//! Every Job carries the owner labels `app.kubernetes.io/managed-by=genesis`,
//! `genesis.dev/tenant=<tenant id>` and `genesis.dev/task=<task id>`; listing,
//! stopping and log reading are filtered by them (re-checked in code, never
//! trusted to the label selector alone), so a tenant can never see, stop or
//! read another tenant's coder.
//!
//! The coder contract: every Job's environment names its task
//! (`GENESIS_TASK_ID`), its own coder id (`GENESIS_CODER_ID`, the Job name)
//! and, when the caller gives a [`CoderContract`], control's gRPC endpoint
//! (`GENESIS_CONTROL_URL`) and the coder's credential (`GENESIS_CODER_TOKEN`):
//! a token that reaches only that one task's RPCs, expires, and is revoked
//! when the task settles. That token is the one credential a manifest may
//! carry. This module must never create anything but Jobs, never run a
//! coder as root, never print the coder token (`Debug` redacts it), never
//! put any other credential in a manifest (provider keys reach a coder as
//! references to entries of the platform's key Secret, mounted read-only
//! in [`CODER_KEY_DIR`], never as values), and never hold more of
//! a pod's log in memory than [`MAX_LOG_BYTES`] and one byte, whatever the
//! cluster sends.

use std::collections::BTreeMap;

use futures::AsyncReadExt as _;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, KeyToPath, Pod, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SeccompProfile, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::LanesError;

/// Label naming the manager of every coder Job.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "genesis";
/// Label naming the owning tenant.
pub const LABEL_TENANT: &str = "genesis.dev/tenant";
/// Label naming the coding task the coder executes.
pub const LABEL_TASK: &str = "genesis.dev/task";
/// Label naming the component.
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
/// The contract's variable names, one home in genesis-core (the coder
/// reads them from there).
pub use genesis_core::coder_contract::{
    ENV_ANTHROPIC_BASE_URL, ENV_BACKEND, ENV_CODER_ID, ENV_CODER_TOKEN, ENV_CONTROL_URL, ENV_MODEL,
    ENV_OPENAI_BASE_URL, ENV_PROVIDER, ENV_TASK_ID, ENV_TENANT_ID,
};
/// Env var naming the directory the provider keys are mounted in.
pub const ENV_LLM_KEY_DIR: &str = genesis_core::llm_keys::KEY_DIR_ENV;
/// Where a coder's provider keys are mounted, read-only.
pub const CODER_KEY_DIR: &str = "/etc/genesis/llm-keys";
/// The command a coder Job runs by default: the reference coder, found on
/// the coder image's `PATH`.
pub const DEFAULT_CODER_COMMAND: &str = "genesis-coder";
/// Finished coder Jobs are garbage-collected after this long (one hour).
pub const DEFAULT_TTL_SECONDS_AFTER_FINISHED: i32 = 3600;
/// A coder that fails is not retried by Kubernetes: the coding task decides.
pub const DEFAULT_BACKOFF_LIMIT: i32 = 0;
/// The unprivileged uid coders run as.
pub const CODER_UID: i64 = 65532;
/// The label the Job controller puts on every pod it creates for a Job
/// (value: the Job's name); the pods of a coder are found by it.
pub const LABEL_JOB_NAME: &str = "job-name";
/// Lines of a coder's log returned when the caller names no count.
pub const DEFAULT_LOG_TAIL_LINES: u32 = 500;
/// Most lines of a coder's log one read returns.
pub const MAX_LOG_TAIL_LINES: u32 = 10_000;
/// Most bytes of a coder's log one read returns (1 MiB): the text travels
/// in one gRPC answer and is held in memory whole.
pub const MAX_LOG_BYTES: u32 = 1024 * 1024;

/// The concrete (model, provider, backend) couple a coding task runs with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedCouple {
    /// Model id, e.g. `claude-opus-4-8`.
    pub model: String,
    /// Provider name, e.g. `anthropic`.
    pub provider: String,
    /// Backend name, e.g. `api`.
    pub backend: String,
}

/// A preset as far as coding tasks need it: the couple it yields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preset {
    /// The preset's id.
    pub id: Uuid,
    /// The couple the preset resolves to.
    pub couple: ResolvedCouple,
}

/// A coding task as submitted (`CodingTaskMcpTools`): either a preset or the
/// explicit triple chooses its model; a preset wins when both are given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CodingTaskRequest {
    /// The preset to resolve through; overrides the explicit triple.
    pub preset_id: Option<Uuid>,
    /// Explicit model (used only without a preset).
    pub model: Option<String>,
    /// Explicit provider (used only without a preset).
    pub provider: Option<String>,
    /// Explicit backend (used only without a preset).
    pub backend: Option<String>,
    /// What the coder is asked to do.
    pub instructions: String,
    /// The repository the coder works on, if any.
    pub repository: Option<String>,
}

/// Resolves a coding task's couple: a `preset_id` overrides the explicit
/// model/provider/backend triple (spec §2.3); without one, all three explicit
/// fields are required. Pure.
pub fn resolve_couple(
    request: &CodingTaskRequest,
    presets: &[Preset],
) -> Result<ResolvedCouple, LanesError> {
    if let Some(id) = request.preset_id {
        return presets
            .iter()
            .find(|p| p.id == id)
            .map(|p| p.couple.clone())
            .ok_or_else(|| LanesError::NotFound {
                kind: "preset",
                id: id.to_string(),
            });
    }
    let field = |v: &Option<String>, name: &'static str| -> Result<String, LanesError> {
        match v.as_deref().map(str::trim) {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(LanesError::validation(
                name,
                "required when no presetId is given",
            )),
        }
    };
    Ok(ResolvedCouple {
        model: field(&request.model, "model")?,
        provider: field(&request.provider, "provider")?,
        backend: field(&request.backend, "backend")?,
    })
}

/// CPU and memory for a coder container, as Kubernetes quantities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoderResources {
    /// CPU request, e.g. `500m`.
    pub cpu_request: String,
    /// Memory request, e.g. `1Gi`.
    pub memory_request: String,
    /// CPU limit, e.g. `2`.
    pub cpu_limit: String,
    /// Memory limit, e.g. `4Gi`.
    pub memory_limit: String,
}

impl Default for CoderResources {
    fn default() -> Self {
        Self {
            cpu_request: "500m".to_string(),
            memory_request: "1Gi".to_string(),
            cpu_limit: "2".to_string(),
            memory_limit: "4Gi".to_string(),
        }
    }
}

/// What to spawn: the image, its resources, the resolved couple and extra
/// env, and the coding task it executes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoderSpec {
    /// Container image reference.
    pub image: String,
    /// Container resources.
    pub resources: CoderResources,
    /// The resolved preset couple, passed as `GENESIS_CODER_{MODEL,PROVIDER,BACKEND}`.
    pub couple: ResolvedCouple,
    /// Extra non-secret env (names `[A-Za-z_][A-Za-z0-9_]*`, not `GENESIS_*`).
    pub env: BTreeMap<String, String>,
    /// The coding task id (label `genesis.dev/task`).
    pub task_id: Uuid,
    /// Where the coder reports and the credential it reports with; never
    /// serialized.
    #[serde(skip)]
    pub contract: Option<CoderContract>,
    /// The container's command (the image's entrypoint when empty):
    /// control's `GENESIS_CODER_COMMAND`, `genesis-coder` by default.
    #[serde(default)]
    pub command: Vec<String>,
    /// The provider keys mounted into the coder, when its chain names any
    /// it may hold.
    #[serde(default)]
    pub keys: Option<CoderKeys>,
}

/// Provider keys a coder's Job mounts: the named entries of the platform's
/// key Secret, as files of [`CODER_KEY_DIR`], which `GENESIS_LLM_KEY_DIR`
/// names. Only references travel in the manifest, never a value; the
/// caller names only keys the tenant may hand to its own code
/// (`genesis_core::llm_keys::KeySet::mountable_for`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoderKeys {
    /// The Secret holding the keys (the chart's provider-key Secret).
    pub secret: String,
    /// The key names (the Secret's entries) to mount, 1 to 16.
    pub names: Vec<String>,
}

/// How a coder reaches control: the endpoint and its task-bound token.
#[derive(Clone, PartialEq, Eq)]
pub struct CoderContract {
    /// Control's gRPC endpoint as the coder's pod reaches it.
    pub control_url: String,
    /// The raw coder token (scope `coder`, bound to the spec's task).
    pub token: String,
}

impl std::fmt::Debug for CoderContract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoderContract")
            .field("control_url", &self.control_url)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// Knobs of the Job shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobPolicy {
    /// `ttlSecondsAfterFinished`.
    pub ttl_seconds_after_finished: i32,
    /// `backoffLimit`.
    pub backoff_limit: i32,
}

impl Default for JobPolicy {
    fn default() -> Self {
        Self {
            ttl_seconds_after_finished: DEFAULT_TTL_SECONDS_AFTER_FINISHED,
            backoff_limit: DEFAULT_BACKOFF_LIMIT,
        }
    }
}

/// Where a coder Job stands, read from its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CoderPhase {
    /// Created, no pod active yet.
    Pending,
    /// A pod is running.
    Running,
    /// Completed successfully.
    Succeeded,
    /// Failed (backoff exhausted or deadline).
    Failed,
}

/// A spawned coder as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoderHandle {
    /// Job name (unique in the namespace).
    pub name: String,
    /// Namespace of the Job.
    pub namespace: String,
    /// Owning tenant.
    pub tenant_id: Uuid,
    /// The coding task, when the label parses.
    pub task_id: Option<Uuid>,
    /// Current phase.
    pub phase: CoderPhase,
}

/// How much of a coder's log to read: the last `tail_lines` lines, at most
/// `limit_bytes` bytes of them. Only [`LogOptions::new`] builds one, so a
/// value in hand is in range and the read never asks the cluster for more
/// than [`MAX_LOG_TAIL_LINES`] lines or [`MAX_LOG_BYTES`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOptions {
    tail_lines: u32,
    limit_bytes: u32,
}

impl Default for LogOptions {
    fn default() -> Self {
        Self {
            tail_lines: DEFAULT_LOG_TAIL_LINES,
            limit_bytes: MAX_LOG_BYTES,
        }
    }
}

impl LogOptions {
    /// Checked options: `tail_lines` 1..=[`MAX_LOG_TAIL_LINES`] (unset:
    /// [`DEFAULT_LOG_TAIL_LINES`]), `limit_bytes` 1..=[`MAX_LOG_BYTES`]
    /// (unset: [`MAX_LOG_BYTES`]). Out of range is a
    /// [`LanesError::Validation`] naming the field, never a silent clamp.
    pub fn new(tail_lines: Option<i64>, limit_bytes: Option<i64>) -> Result<Self, LanesError> {
        fn in_range(
            field: &'static str,
            value: Option<i64>,
            default: u32,
            max: u32,
        ) -> Result<u32, LanesError> {
            match value {
                None => Ok(default),
                Some(v) => u32::try_from(v)
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| {
                        LanesError::validation(field, format!("must be 1..={max}, got {v}"))
                    }),
            }
        }
        Ok(Self {
            tail_lines: in_range(
                "tail_lines",
                tail_lines,
                DEFAULT_LOG_TAIL_LINES,
                MAX_LOG_TAIL_LINES,
            )?,
            limit_bytes: in_range("limit_bytes", limit_bytes, MAX_LOG_BYTES, MAX_LOG_BYTES)?,
        })
    }

    /// The number of trailing lines asked for.
    pub fn tail_lines(&self) -> u32 {
        self.tail_lines
    }

    /// The byte ceiling of the returned text.
    pub fn limit_bytes(&self) -> u32 {
        self.limit_bytes
    }
}

/// What [`CoderSpawner::logs`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoderLogs {
    /// The Job the pod belongs to (the coder's id).
    pub job_name: String,
    /// The pod whose log this is (the Job's newest).
    pub pod_name: String,
    /// The log text; bytes that are not UTF-8 are replaced by U+FFFD.
    pub text: String,
    /// Whether the pod's log holds more than `text`: older lines beyond the
    /// tail, or (when the byte ceiling was reached) the rest of the tail.
    /// Exact, not a guess: see [`CoderSpawner::logs`].
    pub truncated: bool,
}

fn validate_quantity(field: &'static str, q: &str) -> Result<(), LanesError> {
    let digits_end = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(digits_end);
    let num_ok = !num.is_empty()
        && num.chars().filter(|c| *c == '.').count() <= 1
        && !num.starts_with('.')
        && !num.ends_with('.');
    let suffix_ok = matches!(
        suffix,
        "" | "m" | "k" | "M" | "G" | "T" | "Ki" | "Mi" | "Gi" | "Ti"
    );
    if num_ok && suffix_ok {
        Ok(())
    } else {
        Err(LanesError::validation(
            field,
            format!("{q:?} is not a Kubernetes quantity"),
        ))
    }
}

fn validate_spec(spec: &CoderSpec) -> Result<(), LanesError> {
    if spec.image.is_empty()
        || spec.image.len() > 512
        || spec
            .image
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(LanesError::validation(
            "image",
            "must be 1..=512 bytes without whitespace",
        ));
    }
    if spec.command.len() > 16
        || spec
            .command
            .iter()
            .any(|a| a.is_empty() || a.len() > 1024 || a.chars().any(char::is_control))
    {
        return Err(LanesError::validation(
            "command",
            "at most 16 arguments, each 1..=1024 bytes without control characters",
        ));
    }
    if let Some(keys) = &spec.keys {
        if !is_dns_subdomain(&keys.secret) {
            return Err(LanesError::validation(
                "keys.secret",
                "must be a Secret name (a DNS subdomain)",
            ));
        }
        if keys.names.is_empty() || keys.names.len() > 16 {
            return Err(LanesError::validation(
                "keys.names",
                "must name 1 to 16 keys",
            ));
        }
        if let Some(bad) = keys
            .names
            .iter()
            .find(|n| genesis_core::llm_keys::check_key_name(n).is_err())
        {
            return Err(LanesError::validation(
                "keys.names",
                format!("{bad:?} can never be a provider key"),
            ));
        }
    }
    validate_quantity("resources.cpu_request", &spec.resources.cpu_request)?;
    validate_quantity("resources.memory_request", &spec.resources.memory_request)?;
    validate_quantity("resources.cpu_limit", &spec.resources.cpu_limit)?;
    validate_quantity("resources.memory_limit", &spec.resources.memory_limit)?;
    for (name, v) in [
        ("model", &spec.couple.model),
        ("provider", &spec.couple.provider),
        ("backend", &spec.couple.backend),
    ] {
        if v.trim().is_empty() || v.len() > 256 {
            return Err(LanesError::validation(name, "must be 1..=256 bytes"));
        }
    }
    if let Some(c) = &spec.contract {
        let url = c.control_url.as_str();
        let host = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        if url.len() > 2048
            || host.is_none_or(str::is_empty)
            || url.chars().any(|ch| ch.is_whitespace() || ch.is_control())
        {
            return Err(LanesError::validation(
                "control_url",
                "must be an http:// or https:// URL of at most 2048 bytes without whitespace",
            ));
        }
        if c.token.is_empty()
            || c.token.len() > 512
            || !c.token.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(LanesError::validation(
                "token",
                "must be 1..=512 printable ASCII bytes",
            ));
        }
    }
    if spec.env.len() > 64 {
        return Err(LanesError::validation("env", "at most 64 variables"));
    }
    for (k, v) in &spec.env {
        let mut chars = k.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') || k.len() > 128 {
            return Err(LanesError::validation(
                "env",
                format!("{k:?} is not a valid variable name"),
            ));
        }
        if k.starts_with("GENESIS_") {
            return Err(LanesError::validation(
                "env",
                format!("{k:?} is reserved (GENESIS_* is set by the spawner)"),
            ));
        }
        if v.len() > 4096 {
            return Err(LanesError::validation(
                "env",
                format!("value of {k:?} exceeds 4096 bytes"),
            ));
        }
    }
    Ok(())
}

/// A Kubernetes object name of the DNS-subdomain kind: 1..=253 bytes of
/// lower-case alphanumerics, `-` and `.`, alphanumeric at both ends.
fn is_dns_subdomain(name: &str) -> bool {
    let ok_end = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && ok_end(name.chars().next())
        && ok_end(name.chars().last())
}

/// The Job name for a task: `coder-<first 8 hex of task>-<8 random hex>`,
/// a valid DNS label well under 63 characters.
pub fn job_name(task_id: Uuid) -> String {
    let task = task_id.simple().to_string();
    let nonce = Uuid::new_v4().simple().to_string();
    format!("coder-{}-{}", &task[..8], &nonce[..8])
}

/// Builds the `batch/v1` Job of a coder. Pure: validated input in, manifest
/// out, so the shape is unit-tested without a cluster.
pub fn build_job_manifest(
    tenant: Uuid,
    name: &str,
    spec: &CoderSpec,
    policy: JobPolicy,
) -> Result<Job, LanesError> {
    validate_spec(spec)?;
    let labels = BTreeMap::from([
        (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
        (LABEL_TENANT.to_string(), tenant.to_string()),
        (LABEL_TASK.to_string(), spec.task_id.to_string()),
        (LABEL_COMPONENT.to_string(), "coder".to_string()),
    ]);
    let mut env = vec![
        env_var(ENV_TENANT_ID, &tenant.to_string()),
        env_var(ENV_TASK_ID, &spec.task_id.to_string()),
        env_var(ENV_CODER_ID, name),
        env_var(ENV_MODEL, &spec.couple.model),
        env_var(ENV_PROVIDER, &spec.couple.provider),
        env_var(ENV_BACKEND, &spec.couple.backend),
    ];
    if let Some(c) = &spec.contract {
        env.push(env_var(ENV_CONTROL_URL, &c.control_url));
        env.push(env_var(ENV_CODER_TOKEN, &c.token));
    }
    env.extend(spec.env.iter().map(|(k, v)| env_var(k, v)));
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    if let Some(keys) = &spec.keys {
        env.push(env_var(ENV_LLM_KEY_DIR, CODER_KEY_DIR));
        volumes.push(Volume {
            name: "llm-keys".to_string(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(keys.secret.clone()),
                items: Some(
                    keys.names
                        .iter()
                        .map(|n| KeyToPath {
                            key: n.clone(),
                            path: n.clone(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                // Only the owner reads a key (the coder's uid).
                default_mode: Some(0o400),
                optional: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        });
        mounts.push(VolumeMount {
            name: "llm-keys".to_string(),
            mount_path: CODER_KEY_DIR.to_string(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    let resources = ResourceRequirements {
        requests: Some(BTreeMap::from([
            (
                "cpu".to_string(),
                Quantity(spec.resources.cpu_request.clone()),
            ),
            (
                "memory".to_string(),
                Quantity(spec.resources.memory_request.clone()),
            ),
        ])),
        limits: Some(BTreeMap::from([
            (
                "cpu".to_string(),
                Quantity(spec.resources.cpu_limit.clone()),
            ),
            (
                "memory".to_string(),
                Quantity(spec.resources.memory_limit.clone()),
            ),
        ])),
        ..Default::default()
    };
    let container = Container {
        name: "coder".to_string(),
        image: Some(spec.image.clone()),
        command: (!spec.command.is_empty()).then(|| spec.command.clone()),
        volume_mounts: (!mounts.is_empty()).then_some(mounts),
        env: Some(env),
        resources: Some(resources),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(CODER_UID),
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                add: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(policy.backoff_limit),
            ttl_seconds_after_finished: Some(policy.ttl_seconds_after_finished),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_string()),
                    automount_service_account_token: Some(false),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(CODER_UID),
                        run_as_group: Some(CODER_UID),
                        fs_group: Some(CODER_UID),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".to_string(),
                            localhost_profile: None,
                        }),
                        ..Default::default()
                    }),
                    containers: vec![container],
                    volumes: (!volumes.is_empty()).then_some(volumes),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    })
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

fn phase_of(job: &Job) -> CoderPhase {
    let Some(status) = job.status.as_ref() else {
        return CoderPhase::Pending;
    };
    let condition = |t: &str| {
        status
            .conditions
            .as_ref()
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == t && c.status == "True"))
    };
    if condition("Complete") || status.succeeded.unwrap_or(0) > 0 {
        CoderPhase::Succeeded
    } else if condition("Failed") {
        CoderPhase::Failed
    } else if status.active.unwrap_or(0) > 0 {
        CoderPhase::Running
    } else {
        CoderPhase::Pending
    }
}

fn tenant_label(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(LABEL_TENANT))
        .map(String::as_str)
}

/// The newest of `items` by creation time (then name, so the choice is
/// stable when two share a second).
fn newest<'a, K: kube::Resource + 'a>(items: impl Iterator<Item = &'a K>) -> Option<&'a K> {
    items.max_by(|a, b| {
        let (a, b) = (a.meta(), b.meta());
        (a.creation_timestamp.as_ref(), a.name.as_ref())
            .cmp(&(b.creation_timestamp.as_ref(), b.name.as_ref()))
    })
}

/// `bytes` without an incomplete UTF-8 sequence at its very end, which a
/// byte ceiling may cut through; anything else is left to the lossy decode.
fn without_partial_char(bytes: &[u8]) -> &[u8] {
    // The lead byte of the last sequence is at most 3 bytes back.
    for back in 1..=bytes.len().min(4) {
        let at = bytes.len() - back;
        let Some(&b) = bytes.get(at) else { break };
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: keep looking for the lead
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back {
            bytes.get(..at).unwrap_or(bytes)
        } else {
            bytes
        };
    }
    bytes
}

/// Lines in `bytes` as the kubelet counts them for `tailLines`: every
/// newline ends one, and a final fragment without one is one more.
fn count_lines(bytes: &[u8]) -> usize {
    let newlines = bytes.iter().filter(|b| **b == b'\n').count();
    newlines + usize::from(bytes.last().is_some_and(|b| *b != b'\n'))
}

/// The log window the cluster answered for `tailLines = wanted + 1`
/// (uncut by the byte ceiling), as at most `wanted` lines, and whether the
/// log has older lines than those: asking one line more than wanted is what
/// makes that answer exact rather than a guess from a full window. Pure.
fn settle_tail(mut window: Vec<u8>, wanted: usize) -> (Vec<u8>, bool) {
    let older = count_lines(&window) > wanted;
    if older && let Some(end) = window.iter().position(|b| *b == b'\n') {
        window.drain(..=end);
    }
    (window, older)
}

/// The text of log bytes; `cut` (the byte ceiling was reached) first drops
/// a character the ceiling split, so the text ends on whole characters.
fn log_text(bytes: &[u8], cut: bool) -> String {
    let bytes = if cut {
        without_partial_char(bytes)
    } else {
        bytes
    };
    String::from_utf8_lossy(bytes).into_owned()
}

fn kube_err(e: kube::Error) -> LanesError {
    match e {
        kube::Error::Api(status) => LanesError::Kubernetes {
            status: status.code,
            message: status.message.clone(),
        },
        other => LanesError::ClusterUnavailable(other.to_string()),
    }
}

/// Creates, lists and stops coder Jobs in one namespace, and reads their
/// pods' logs.
#[derive(Clone)]
pub struct CoderSpawner {
    jobs: Api<Job>,
    pods: Api<Pod>,
    namespace: String,
    policy: JobPolicy,
}

impl std::fmt::Debug for CoderSpawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoderSpawner")
            .field("namespace", &self.namespace)
            .field("policy", &self.policy)
            .finish()
    }
}

impl CoderSpawner {
    /// A spawner over an existing client, for Jobs in `namespace`.
    pub fn new(client: kube::Client, namespace: impl Into<String>) -> Self {
        let namespace = namespace.into();
        Self {
            jobs: Api::namespaced(client.clone(), &namespace),
            pods: Api::namespaced(client, &namespace),
            namespace,
            policy: JobPolicy::default(),
        }
    }

    /// Overrides the Job policy (TTL after finish, backoff limit).
    pub fn with_policy(mut self, policy: JobPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// A spawner from the ambient configuration: in-cluster service account,
    /// else `KUBECONFIG` / `~/.kube/config`. Without either it answers
    /// [`LanesError::ClusterUnavailable`] rather than a panic or a late failure.
    pub async fn from_env(namespace: impl Into<String>) -> Result<Self, LanesError> {
        crate::install_crypto_provider();
        let config = kube::Config::infer().await.map_err(|e| {
            LanesError::ClusterUnavailable(format!("no kubernetes configuration: {e}"))
        })?;
        Self::from_config(config, namespace)
    }

    /// A spawner from a kubeconfig file (its current context), for a
    /// deployment whose coders run in a cluster other than control's own.
    pub async fn from_kubeconfig(
        path: &std::path::Path,
        namespace: impl Into<String>,
    ) -> Result<Self, LanesError> {
        crate::install_crypto_provider();
        let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| {
            LanesError::ClusterUnavailable(format!("cannot read {}: {e}", path.display()))
        })?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| {
            LanesError::ClusterUnavailable(format!("cannot use {}: {e}", path.display()))
        })?;
        Self::from_config(config, namespace)
    }

    /// A spawner from an explicit kube configuration.
    pub fn from_config(
        config: kube::Config,
        namespace: impl Into<String>,
    ) -> Result<Self, LanesError> {
        let client = kube::Client::try_from(config)
            .map_err(|e| LanesError::ClusterUnavailable(format!("cannot build client: {e}")))?;
        Ok(Self::new(client, namespace))
    }

    /// The namespace Jobs are created in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn handle(&self, tenant: Uuid, job: &Job) -> CoderHandle {
        CoderHandle {
            name: job.metadata.name.clone().unwrap_or_default(),
            namespace: job
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| self.namespace.clone()),
            tenant_id: tenant,
            task_id: job
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_TASK))
                .and_then(|t| t.parse().ok()),
            phase: phase_of(job),
        }
    }

    /// Spawns a coder Job for `tenant`. Invalid specs create nothing.
    pub async fn spawn(&self, tenant: Uuid, spec: CoderSpec) -> Result<CoderHandle, LanesError> {
        let name = job_name(spec.task_id);
        let job = build_job_manifest(tenant, &name, &spec, self.policy)?;
        let created = self
            .jobs
            .create(&PostParams::default(), &job)
            .await
            .map_err(kube_err)?;
        tracing::info!(%tenant, job = %name, task = %spec.task_id, "coder spawned");
        Ok(self.handle(tenant, &created))
    }

    /// Lists this tenant's coder Jobs (by the owner labels), sorted by name.
    pub async fn list(&self, tenant: Uuid) -> Result<Vec<CoderHandle>, LanesError> {
        let selector = format!("{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_TENANT}={tenant}");
        let jobs = self
            .jobs
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(kube_err)?;
        let mut out: Vec<CoderHandle> = jobs
            .items
            .iter()
            // Re-check: never trust the selector alone for isolation.
            .filter(|j| tenant_label(&j.metadata) == Some(tenant.to_string().as_str()))
            .map(|j| self.handle(tenant, j))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Stops (deletes, pods included) one of this tenant's coders. A Job of
    /// another tenant, or not managed by genesis, answers `NotFound` and is
    /// left alone.
    pub async fn stop(&self, tenant: Uuid, name: &str) -> Result<(), LanesError> {
        let not_found = || LanesError::NotFound {
            kind: "coder",
            id: name.to_string(),
        };
        if name.is_empty()
            || name.len() > 63
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(LanesError::validation("name", "not a valid Job name"));
        }
        let job = match self.jobs.get(name).await {
            Ok(job) => job,
            Err(kube::Error::Api(s)) if s.code == 404 => return Err(not_found()),
            Err(e) => return Err(kube_err(e)),
        };
        let managed = job
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_MANAGED_BY))
            .is_some_and(|v| v == MANAGED_BY);
        if !managed || tenant_label(&job.metadata) != Some(tenant.to_string().as_str()) {
            return Err(not_found());
        }
        match self.jobs.delete(name, &DeleteParams::background()).await {
            Ok(_) => {
                tracing::info!(%tenant, job = %name, "coder stopped");
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Err(not_found()),
            Err(e) => Err(kube_err(e)),
        }
    }

    /// Reads the log of the coder running `task_id` for `tenant`: the
    /// newest pod of the task's newest Job, its last
    /// [`LogOptions::tail_lines`] lines, at most [`LogOptions::limit_bytes`]
    /// bytes of them.
    ///
    /// A task with no Job, or whose Job belongs to another tenant, answers
    /// the same [`LanesError::NotFound`]: the Jobs are selected by the task
    /// label and the tenant label is then checked here, on every Job and
    /// pod, so isolation never rests on the selector. A Job without a pod
    /// (still pending), or whose pod's container has not started, answers
    /// [`LanesError::NotStarted`].
    ///
    /// `truncated` is exact. The cluster is asked for one line and one byte
    /// more than wanted. Within the ceiling, an extra line back means older
    /// lines exist (it is dropped). Over the ceiling, something is left out
    /// either way (the wanted lines do not fit, or the window read was
    /// bigger than the wanted one because older lines exist); the wanted
    /// window is then read once more with the exact ceiling, since the
    /// cluster cuts from the start of the tail window and the first
    /// answer's window began one line early.
    pub async fn logs(
        &self,
        tenant: Uuid,
        task_id: Uuid,
        opts: LogOptions,
    ) -> Result<CoderLogs, LanesError> {
        let not_found = || LanesError::NotFound {
            kind: "coder of task",
            id: task_id.to_string(),
        };
        let own = tenant.to_string();
        let selector = format!("{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_TASK}={task_id}");
        let jobs = self
            .jobs
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(kube_err)?;
        let job = newest(
            jobs.items
                .iter()
                .filter(|j| tenant_label(&j.metadata) == Some(own.as_str())),
        )
        .and_then(|j| j.metadata.name.clone())
        .ok_or_else(not_found)?;
        let pods = self
            .pods
            .list(&ListParams::default().labels(&format!("{LABEL_JOB_NAME}={job}")))
            .await
            .map_err(kube_err)?;
        let newest_pod = newest(
            pods.items
                .iter()
                // The pod template carries the Job's owner labels.
                .filter(|p| tenant_label(&p.metadata) == Some(own.as_str())),
        );
        let Some((pod, pending)) = newest_pod.and_then(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            let pending = phase.is_none_or(|phase| phase == "Pending");
            p.metadata.name.clone().map(|name| (name, pending))
        }) else {
            return Err(LanesError::NotStarted(format!(
                "the coder's Job {job} has no pod yet"
            )));
        };
        let n = opts.tail_lines;
        let cap = opts.limit_bytes;
        let first = self
            .read_log(&pod, n.saturating_add(1), cap.saturating_add(1), pending)
            .await
            .map_err(|e| e.unwrap_or_else(not_found))?;
        let cap_len = usize::try_from(cap).unwrap_or(usize::MAX);
        let (text, truncated) = if first.len() > cap_len {
            let exact = self
                .read_log(&pod, n, cap, pending)
                .await
                .map_err(|e| e.unwrap_or_else(not_found))?;
            (log_text(&exact, exact.len() >= cap_len), true)
        } else {
            let wanted = usize::try_from(n).unwrap_or(usize::MAX);
            let (window, older) = settle_tail(first, wanted);
            (log_text(&window, false), older)
        };
        Ok(CoderLogs {
            job_name: job,
            pod_name: pod,
            text,
            truncated,
        })
    }

    /// One read of a pod's log, never more than `limit_bytes` into memory
    /// whatever the server sends. `Err(None)`: the pod is gone (the Job was
    /// deleted or collected meanwhile). The bytes are read raw rather than
    /// as a `String` because a byte ceiling may split a character and a
    /// coder may print anything.
    async fn read_log(
        &self,
        pod: &str,
        tail_lines: u32,
        limit_bytes: u32,
        pending: bool,
    ) -> Result<Vec<u8>, Option<LanesError>> {
        let params = LogParams {
            tail_lines: Some(i64::from(tail_lines)),
            limit_bytes: Some(i64::from(limit_bytes)),
            ..LogParams::default()
        };
        let stream = match self.pods.log_stream(pod, &params).await {
            Ok(s) => s,
            Err(kube::Error::Api(s)) if s.code == 404 => return Err(None),
            // The API server answers 400 for a container still waiting to start.
            Err(kube::Error::Api(s)) if s.code == 400 && pending => {
                return Err(Some(LanesError::NotStarted(format!(
                    "the coder's pod {pod} has not started yet"
                ))));
            }
            Err(e) => return Err(Some(kube_err(e))),
        };
        let mut bytes = Vec::new();
        stream
            .take(u64::from(limit_bytes))
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| {
                Some(LanesError::ClusterUnavailable(format!(
                    "reading the log of pod {pod}: {e}"
                )))
            })?;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn couple(m: &str) -> ResolvedCouple {
        ResolvedCouple {
            model: m.to_string(),
            provider: "anthropic".to_string(),
            backend: "api".to_string(),
        }
    }

    fn spec() -> CoderSpec {
        CoderSpec {
            image: "ghcr.io/genesis/coder:1.2".to_string(),
            resources: CoderResources::default(),
            couple: couple("claude-opus-4-8"),
            env: BTreeMap::from([("RUST_LOG".to_string(), "info".to_string())]),
            task_id: Uuid::new_v4(),
            contract: None,
            command: Vec::new(),
            keys: None,
        }
    }

    #[test]
    fn a_job_runs_its_command_and_mounts_only_the_named_keys_by_reference() {
        let mut s = spec();
        let bare = build_job_manifest(Uuid::new_v4(), "coder-x", &s, JobPolicy::default()).unwrap();
        let pod = bare.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.containers[0].command, None, "the image's entrypoint");
        assert_eq!(pod.volumes, None, "no key, no volume");
        s.command = vec![DEFAULT_CODER_COMMAND.to_string()];
        s.keys = Some(CoderKeys {
            secret: "genesis-llm".to_string(),
            names: vec!["ACME_ANTHROPIC".to_string()],
        });
        let job = build_job_manifest(Uuid::new_v4(), "coder-x", &s, JobPolicy::default()).unwrap();
        let pod = job.spec.unwrap().template.spec.unwrap();
        let c = &pod.containers[0];
        assert_eq!(
            c.command.as_deref(),
            Some(&["genesis-coder".to_string()][..])
        );
        let mount = &c.volume_mounts.clone().unwrap()[0];
        assert_eq!(mount.mount_path, CODER_KEY_DIR);
        assert_eq!(mount.read_only, Some(true));
        let env: BTreeMap<_, _> = c
            .env
            .clone()
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.value.unwrap_or_default()))
            .collect();
        assert_eq!(env[ENV_LLM_KEY_DIR], CODER_KEY_DIR);
        let v = serde_json::to_value(&pod.volumes.unwrap()[0]).unwrap();
        assert_eq!(v["secret"]["secretName"], "genesis-llm");
        assert_eq!(
            v["secret"]["items"],
            serde_json::json!([{"key": "ACME_ANTHROPIC", "path": "ACME_ANTHROPIC"}]),
            "only the named entry, never the whole Secret"
        );
        assert_eq!(v["secret"]["defaultMode"], 0o400);
        // No value of any key is in the manifest.
        assert!(!serde_json::to_string(&v).unwrap().contains("sk-"));
    }

    #[test]
    fn a_bad_command_or_key_mount_is_refused() {
        let t = Uuid::new_v4();
        let p = JobPolicy::default();
        for (field, edit) in [
            (
                "command",
                Box::new(|s: &mut CoderSpec| s.command = vec![String::new()])
                    as Box<dyn Fn(&mut CoderSpec)>,
            ),
            (
                "command",
                Box::new(|s: &mut CoderSpec| s.command = vec!["a\nb".to_string()]),
            ),
            (
                "keys.secret",
                Box::new(|s: &mut CoderSpec| {
                    s.keys = Some(CoderKeys {
                        secret: "Bad_Name".into(),
                        names: vec!["K".into()],
                    })
                }),
            ),
            (
                "keys.names",
                Box::new(|s: &mut CoderSpec| {
                    s.keys = Some(CoderKeys {
                        secret: "genesis-llm".into(),
                        names: vec![],
                    })
                }),
            ),
            (
                "keys.names",
                Box::new(|s: &mut CoderSpec| {
                    s.keys = Some(CoderKeys {
                        secret: "genesis-llm".into(),
                        names: vec!["GENESIS_AGENT_POD_TOKEN".into()],
                    })
                }),
            ),
        ] {
            let mut s = spec();
            edit(&mut s);
            match build_job_manifest(t, "n", &s, p) {
                Err(LanesError::Validation { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn job_manifest_carries_owner_labels_policy_and_non_root_context() {
        let tenant = Uuid::new_v4();
        let s = spec();
        let job = build_job_manifest(tenant, "coder-x", &s, JobPolicy::default()).unwrap();
        let labels = job.metadata.labels.clone().unwrap();
        assert_eq!(labels[LABEL_MANAGED_BY], "genesis");
        assert_eq!(labels[LABEL_TENANT], tenant.to_string());
        assert_eq!(labels[LABEL_TASK], s.task_id.to_string());
        let js = job.spec.unwrap();
        assert_eq!(js.ttl_seconds_after_finished, Some(3600));
        assert_eq!(js.backoff_limit, Some(0));
        assert_eq!(js.template.metadata.unwrap().labels.unwrap(), labels);
        let pod = js.template.spec.unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        let psc = pod.security_context.unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(psc.run_as_user, Some(CODER_UID));
        let c = &pod.containers[0];
        let csc = c.security_context.clone().unwrap();
        assert_eq!(csc.allow_privilege_escalation, Some(false));
        assert_eq!(csc.run_as_non_root, Some(true));
        let env: BTreeMap<_, _> = c
            .env
            .clone()
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.value.unwrap()))
            .collect();
        assert_eq!(env[ENV_MODEL], "claude-opus-4-8");
        assert_eq!(env[ENV_PROVIDER], "anthropic");
        assert_eq!(env[ENV_BACKEND], "api");
        assert_eq!(env[ENV_TASK_ID], s.task_id.to_string());
        assert_eq!(env["RUST_LOG"], "info");
        let limits = c.resources.clone().unwrap().limits.unwrap();
        assert_eq!(limits["memory"], Quantity("4Gi".to_string()));
        let v = serde_json::to_value(
            build_job_manifest(tenant, "coder-x", &s, JobPolicy::default()).unwrap(),
        )
        .unwrap();
        assert_eq!(v["apiVersion"], "batch/v1");
        assert_eq!(v["kind"], "Job");
    }

    #[test]
    fn job_manifest_rejects_bad_specs() {
        let t = Uuid::new_v4();
        let p = JobPolicy::default();
        let mut s = spec();
        s.image = "has space".to_string();
        assert!(matches!(
            build_job_manifest(t, "n", &s, p),
            Err(LanesError::Validation { field: "image", .. })
        ));
        let mut s = spec();
        s.resources.cpu_limit = "lots".to_string();
        assert!(matches!(
            build_job_manifest(t, "n", &s, p),
            Err(LanesError::Validation {
                field: "resources.cpu_limit",
                ..
            })
        ));
        let mut s = spec();
        s.env
            .insert("GENESIS_CODER_MODEL".to_string(), "x".to_string());
        assert!(matches!(
            build_job_manifest(t, "n", &s, p),
            Err(LanesError::Validation { field: "env", .. })
        ));
        let mut s = spec();
        s.env.insert("1BAD".to_string(), "x".to_string());
        assert!(build_job_manifest(t, "n", &s, p).is_err());
        let mut s = spec();
        s.couple.model = " ".to_string();
        assert!(matches!(
            build_job_manifest(t, "n", &s, p),
            Err(LanesError::Validation { field: "model", .. })
        ));
    }

    #[test]
    fn job_names_are_dns_labels() {
        let n = job_name(Uuid::new_v4());
        assert!(n.len() <= 63);
        assert!(n.starts_with("coder-"));
        assert!(
            n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
        assert_ne!(job_name(Uuid::nil()), job_name(Uuid::nil()));
    }

    #[test]
    fn quantities_are_checked() {
        for ok in ["1", "500m", "1.5", "4Gi", "128Mi", "2k"] {
            assert!(validate_quantity("q", ok).is_ok(), "{ok}");
        }
        for bad in ["", "m", "1.", ".5", "1..2", "4GB", "-1"] {
            assert!(validate_quantity("q", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn preset_id_overrides_the_explicit_triple() {
        let preset = Preset {
            id: Uuid::new_v4(),
            couple: couple("preset-model"),
        };
        let req = CodingTaskRequest {
            preset_id: Some(preset.id),
            model: Some("explicit".to_string()),
            provider: Some("openai".to_string()),
            backend: Some("api".to_string()),
            ..Default::default()
        };
        assert_eq!(
            resolve_couple(&req, std::slice::from_ref(&preset)).unwrap(),
            couple("preset-model")
        );
    }

    #[test]
    fn explicit_triple_is_used_without_a_preset() {
        let req = CodingTaskRequest {
            model: Some("gpt-x".to_string()),
            provider: Some("openai".to_string()),
            backend: Some("api".to_string()),
            ..Default::default()
        };
        assert_eq!(
            resolve_couple(&req, &[]).unwrap(),
            ResolvedCouple {
                model: "gpt-x".to_string(),
                provider: "openai".to_string(),
                backend: "api".to_string()
            }
        );
    }

    #[test]
    fn log_options_default_and_refuse_out_of_range_values() {
        let d = LogOptions::new(None, None).unwrap();
        assert_eq!(d, LogOptions::default());
        assert_eq!((d.tail_lines(), d.limit_bytes()), (500, 1024 * 1024));
        let o = LogOptions::new(Some(10_000), Some(1)).unwrap();
        assert_eq!((o.tail_lines(), o.limit_bytes()), (10_000, 1));
        for bad in [0, -1, 10_001, i64::MAX] {
            assert!(matches!(
                LogOptions::new(Some(bad), None),
                Err(LanesError::Validation {
                    field: "tail_lines",
                    ..
                })
            ));
        }
        for bad in [0, -5, 1024 * 1024 + 1] {
            assert!(matches!(
                LogOptions::new(None, Some(bad)),
                Err(LanesError::Validation {
                    field: "limit_bytes",
                    ..
                })
            ));
        }
    }

    #[test]
    fn the_extra_tail_line_tells_whether_older_lines_exist() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a\nb"), 2);
        assert_eq!(count_lines(b"a\nb\n"), 2);
        // n + 1 lines back: older lines exist, the extra one is dropped.
        let (w, older) = settle_tail(b"0\n1\n2\n".to_vec(), 2);
        assert_eq!((w.as_slice(), older), (&b"1\n2\n"[..], true));
        let (w, older) = settle_tail(b"0\n1\n2".to_vec(), 2);
        assert_eq!((w.as_slice(), older), (&b"1\n2"[..], true));
        // n or fewer: the whole log.
        let (w, older) = settle_tail(b"1\n2\n".to_vec(), 2);
        assert_eq!((w.as_slice(), older), (&b"1\n2\n"[..], false));
        let (w, older) = settle_tail(Vec::new(), 2);
        assert_eq!((w.len(), older), (0, false));
    }

    #[test]
    fn a_byte_cut_never_leaves_half_a_character() {
        let s = "ab\u{e9}\u{20ac}\u{1f600}".as_bytes(); // 1+1+2+3+4 bytes
        for cut in 0..=s.len() {
            let text = log_text(&s[..cut], true);
            assert!(!text.contains('\u{fffd}'), "cut at {cut}: {text:?}");
            assert!(s.starts_with(text.as_bytes()), "cut at {cut}");
            assert!(cut - text.len() < 4, "cut at {cut}");
        }
        // Bytes that are not UTF-8 in the middle are replaced, not dropped.
        assert_eq!(log_text(b"a\xffb", false), "a\u{fffd}b");
        assert_eq!(log_text(b"a\xff", true), "a\u{fffd}");
    }

    #[test]
    fn unknown_preset_or_incomplete_triple_is_refused() {
        let req = CodingTaskRequest {
            preset_id: Some(Uuid::new_v4()),
            ..Default::default()
        };
        assert!(matches!(
            resolve_couple(&req, &[]),
            Err(LanesError::NotFound { kind: "preset", .. })
        ));
        let req = CodingTaskRequest {
            model: Some("m".to_string()),
            provider: Some("p".to_string()),
            ..Default::default()
        };
        assert!(matches!(
            resolve_couple(&req, &[]),
            Err(LanesError::Validation {
                field: "backend",
                ..
            })
        ));
    }
}
