//! Bearer-token authentication of the admin server: a tower layer that reads
//! `authorization: Bearer <token>`, looks up its SHA-256 in the store, and
//! puts the [`Caller`] in the request extensions for the services. Missing,
//! malformed, unknown, expired or revoked tokens are `UNAUTHENTICATED`; an
//! agent-pod token is `PERMISSION_DENIED` (it reaches the AgentPod service
//! and nothing else). A coder token is admitted with its [`CoderGrant`] on
//! the RPCs of [`CODER_RPCS`] only, every other path `PERMISSION_DENIED`
//! here, before any service runs; the services then hold it to its one
//! task ([`require_own_task`]). Health and reflection are open, as probes
//! need them.
//! The layer is the shared [`genesis_proto::gate`]; this module supplies the
//! admin server's lookup, scope, rate limit and refusal metrics.
//!
//! Must never log or echo a token, and never let a request through to a
//! service without a `Caller` in its extensions.

use genesis_core::{ErrorCode, TokenScope};
use genesis_proto::gate::{Gate, GateLayer, unknown_token};
use genesis_proto::status::coded;
use genesis_store::StoreError;
use genesis_store::tokens::{Admission, hash_token};
use tonic::Status;
use uuid::Uuid;

use crate::state::AppState;

/// The RPCs a coder token may call, each for its own task only: read the
/// task and its model chain, hold credit for and record its LLM calls,
/// register and heartbeat in the coordination registry, report progress,
/// attach artifacts, settle the task, and drive the Windows lane
/// as its own coder. Every other RPC, including any added later, refuses a
/// coder token until it is listed here.
pub const CODER_RPCS: &[&str] = &[
    "/genesis.v1.CodingTaskService/GetTask",
    "/genesis.v1.CodingTaskService/ReportProgress",
    "/genesis.v1.CodingTaskService/AttachArtifact",
    "/genesis.v1.CodingTaskService/CompleteTask",
    "/genesis.v1.CodingTaskService/TaskPresetChain",
    "/genesis.v1.CodingTaskService/ReserveCoderCredit",
    "/genesis.v1.CodingTaskService/RecordCoderAttempt",
    "/genesis.v1.RegistryService/Register",
    "/genesis.v1.RegistryService/Heartbeat",
    "/genesis.v1.WindowsLaneService/RunSpec",
    "/genesis.v1.WindowsLaneService/TaskStatus",
    "/genesis.v1.WindowsLaneService/Launch",
    "/genesis.v1.WindowsLaneService/Windows",
    "/genesis.v1.WindowsLaneService/Focus",
    "/genesis.v1.WindowsLaneService/Close",
    "/genesis.v1.WindowsLaneService/Snapshot",
    "/genesis.v1.WindowsLaneService/Click",
    "/genesis.v1.WindowsLaneService/Type",
    "/genesis.v1.WindowsLaneService/Key",
    "/genesis.v1.WindowsLaneService/WaitFor",
    "/genesis.v1.WindowsLaneService/Computer",
    "/genesis.v1.WindowsLaneService/Screenshot",
    "/genesis.v1.WindowsLaneService/Release",
];

/// Whether a coder token may call `path` at all.
pub fn coder_may_call(path: &str) -> bool {
    CODER_RPCS.contains(&path)
}

/// What a coder token is bound to: one coding task of one tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoderGrant {
    /// The tenant of the task (also the caller's tenant).
    pub tenant_id: Uuid,
    /// The one coding task the token acts on.
    pub task_id: Uuid,
}

/// What the gate admitted: the caller, with the grant of a coder token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// Who is calling.
    pub caller: Caller,
    /// `Some` for a coder token.
    pub coder: Option<CoderGrant>,
}

/// Who is calling: the authenticated operator token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's id (never the token).
    pub token_id: Uuid,
    /// `None`: a platform-wide operator token.
    pub tenant_id: Option<Uuid>,
    /// The token's label, recorded as the actor of audited writes.
    pub label: String,
}

impl Caller {
    /// A platform-wide operator (no tenant binding).
    pub fn is_platform(&self) -> bool {
        self.tenant_id.is_none()
    }

    /// Refuse unless the caller is platform-wide.
    pub fn require_platform(&self) -> Result<(), Status> {
        if self.is_platform() {
            Ok(())
        } else {
            Err(Status::permission_denied(
                "this RPC needs a platform-wide operator token",
            ))
        }
    }

    /// Refuse a tenant-bound caller acting on another tenant.
    pub fn authorize_tenant(&self, tenant_id: Uuid) -> Result<(), Status> {
        match self.tenant_id {
            Some(own) if own != tenant_id => Err(Status::permission_denied(
                "the token is bound to another tenant",
            )),
            _ => Ok(()),
        }
    }

    /// Parse a request's `tenant_id` field and authorize it, in that order.
    pub fn tenant(&self, field: &str, value: &str) -> Result<Uuid, Status> {
        let id = crate::status::uuid(field, value)?;
        self.authorize_tenant(id)?;
        Ok(id)
    }

    /// The actor recorded in audit rows.
    pub fn actor(&self) -> String {
        if self.label.trim().is_empty() {
            format!("token:{}", self.token_id)
        } else {
            format!("{} (token:{})", self.label, self.token_id)
        }
    }
}

/// The caller the auth layer (or the dashboard) stored in a request.
pub fn caller<T>(req: &tonic::Request<T>) -> Result<Caller, Status> {
    if let Some(a) = req.extensions().get::<Admitted>() {
        return Ok(a.caller.clone());
    }
    req.extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("no authenticated caller"))
}

/// The coder grant of the request's token, when it is a coder token.
pub fn coder_grant<T>(req: &tonic::Request<T>) -> Option<CoderGrant> {
    req.extensions().get::<Admitted>().and_then(|a| a.coder)
}

/// Refuse a coder token acting on any task but its own (PERMISSION_DENIED,
/// like a tenant-bound token on another tenant); other callers pass.
pub fn require_own_task<T>(req: &tonic::Request<T>, task_id: Uuid) -> Result<(), Status> {
    match coder_grant(req) {
        Some(g) if g.task_id != task_id => Err(coded(
            ErrorCode::PermissionDenied,
            "a coder token may act on its own coding task only",
        )),
        _ => Ok(()),
    }
}

/// Refuse every caller but the coder of `task_id`: the RPCs that hold
/// credit for and record a coder's LLM calls are the coder's alone, so no
/// operator token writes a coder's bill (and a coder only its own task's).
pub fn require_task_coder<T>(req: &tonic::Request<T>, task_id: Uuid) -> Result<(), Status> {
    match coder_grant(req) {
        Some(g) if g.task_id == task_id => Ok(()),
        Some(_) => Err(coded(
            ErrorCode::PermissionDenied,
            "a coder token may act on its own coding task only",
        )),
        None => Err(coded(
            ErrorCode::PermissionDenied,
            "only the task's coder (a coder token) records its LLM calls",
        )),
    }
}

/// Paths served without a token: health checks and reflection.
pub use genesis_proto::reflection::is_open_path;

/// Authenticate a raw operator token (the bearer header's value, or the
/// token an operator pastes into the dashboard's sign-in form).
pub async fn authenticate_token(state: &AppState, token: &str) -> Result<Caller, Status> {
    genesis_proto::gate::check_well_formed(token)?;
    let admitted = lookup(state, token).await?;
    if admitted.coder.is_some() {
        return Err(coded(
            ErrorCode::PermissionDenied,
            "a coder token may not sign in to the dashboard",
        ));
    }
    Ok(admitted.caller)
}

/// Look a well-formed token up and decide on the row found.
async fn lookup(state: &AppState, token: &str) -> Result<Admitted, Status> {
    let (row, task) = match state
        .store
        .tokens()
        .authenticate_bound(&hash_token(token))
        .await
    {
        Ok(found) => found,
        Err(StoreError::NotFound { .. }) => return Err(unknown_token()),
        Err(other) => return Err(crate::status::store_status(other)),
    };
    admit_bound(token, row, task)
}

/// [`admit`] for a row that may be a coder token: a coder row is admitted
/// with its grant when it names its tenant and task (the schema requires
/// both; a row without them is refused as unknown, never widened).
fn admit_bound(
    token: &str,
    row: genesis_store::tokens::ApiToken,
    task: Option<Uuid>,
) -> Result<Admitted, Status> {
    if row.scope != TokenScope::Coder {
        return admit(token, row).map(|caller| Admitted {
            caller,
            coder: None,
        });
    }
    match (
        row.admit(token, TokenScope::Coder, chrono::Utc::now()),
        row.tenant_id,
        task,
    ) {
        (Admission::Admitted, Some(tenant_id), Some(task_id)) => Ok(Admitted {
            caller: Caller {
                token_id: row.id,
                tenant_id: Some(tenant_id),
                label: row.label,
            },
            coder: Some(CoderGrant { tenant_id, task_id }),
        }),
        _ => Err(unknown_token()),
    }
}

/// Turn the row the index lookup found into a [`Caller`], by the store's
/// one gate decision ([`ApiToken::admit`]: constant-time hash match, then
/// usability, then scope). A row that does not match is refused exactly
/// like an unknown token.
///
/// [`ApiToken::admit`]: genesis_store::tokens::ApiToken::admit
fn admit(token: &str, row: genesis_store::tokens::ApiToken) -> Result<Caller, Status> {
    match row.admit(token, TokenScope::Operator, chrono::Utc::now()) {
        Admission::Admitted => Ok(Caller {
            token_id: row.id,
            tenant_id: row.tenant_id,
            label: row.label,
        }),
        Admission::OtherScope => Err(Status::permission_denied(
            "an agent-pod token may only call the AgentPod service",
        )),
        Admission::Unknown => Err(unknown_token()),
    }
}

/// The admin server's side of the shared bearer-token gate: operator
/// tokens from the store, then the caller's request-rate limit; every
/// refusal counted in the RPC metrics.
#[derive(Clone)]
pub struct OperatorGate {
    state: AppState,
}

impl Gate for OperatorGate {
    type Admitted = Admitted;

    async fn admit(&self, path: &str, token: &str) -> Result<Admitted, Status> {
        let admitted = lookup(&self.state, token).await?;
        if admitted.coder.is_some() && !coder_may_call(path) {
            return Err(coded(
                ErrorCode::PermissionDenied,
                "a coder token may only read, report on and settle its own coding task",
            ));
        }
        self.state
            .limits
            .check(&admitted.caller, crate::limits::Class::of(path))?;
        Ok(admitted)
    }

    fn refused(&self, path: &str, status: &Status) {
        self.state.metrics.record_rpc(path, status.code());
    }
}

/// The tower layer.
pub type AuthLayer = GateLayer<OperatorGate>;

/// A layer authenticating against `state.store`.
pub fn layer(state: AppState) -> AuthLayer {
    GateLayer::new(OperatorGate { state })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(tenant: Option<Uuid>) -> Caller {
        Caller {
            token_id: Uuid::new_v4(),
            tenant_id: tenant,
            label: "ops".into(),
        }
    }

    #[test]
    fn a_tenant_bound_caller_is_confined_to_its_tenant() {
        let a = Uuid::new_v4();
        let c = caller(Some(a));
        assert!(c.authorize_tenant(a).is_ok());
        assert_eq!(
            c.authorize_tenant(Uuid::new_v4())
                .expect_err("other")
                .code(),
            tonic::Code::PermissionDenied
        );
        assert_eq!(
            c.require_platform().expect_err("bound").code(),
            tonic::Code::PermissionDenied
        );
        assert_eq!(
            c.tenant("tenant_id", "nope").expect_err("bad uuid").code(),
            tonic::Code::InvalidArgument
        );
    }

    #[test]
    fn a_platform_caller_may_act_on_any_tenant() {
        let c = caller(None);
        assert!(c.authorize_tenant(Uuid::new_v4()).is_ok());
        assert!(c.require_platform().is_ok());
    }

    fn row(token: &str, scope: TokenScope) -> genesis_store::tokens::ApiToken {
        genesis_store::tokens::ApiToken {
            id: Uuid::new_v4(),
            tenant_id: None,
            scope,
            pod_tenants: genesis_core::PodTenants::all(),
            token_sha256: hash_token(token),
            label: "ops".into(),
            expires_at: None,
            revoked_at: None,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_row_is_admitted_only_when_its_stored_hash_matches_the_presented_token() {
        let token = genesis_proto::auth::generate_token();
        let found = row(&token, TokenScope::Operator);
        let id = found.id;
        assert_eq!(admit(&token, found).expect("matching hash").token_id, id);

        // A row whose stored hash is another token's: refused, as unknown.
        let other = row(&genesis_proto::auth::generate_token(), TokenScope::Operator);
        let refused = admit(&token, other).expect_err("mismatching hash");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        assert_eq!(refused.message(), "unknown, expired or revoked token");

        // One flipped hex digit is enough to refuse.
        let mut tampered = row(&token, TokenScope::Operator);
        let last = if tampered.token_sha256.ends_with('0') {
            "1"
        } else {
            "0"
        };
        tampered.token_sha256.pop();
        tampered.token_sha256.push_str(last);
        assert_eq!(
            admit(&token, tampered).expect_err("one digit off").code(),
            tonic::Code::Unauthenticated
        );
    }

    #[test]
    fn a_matching_agent_pod_row_is_denied_not_admitted() {
        let token = genesis_proto::auth::generate_token();
        assert_eq!(
            admit(&token, row(&token, TokenScope::AgentPod))
                .expect_err("agent-pod scope")
                .code(),
            tonic::Code::PermissionDenied
        );
    }

    #[test]
    fn a_coder_row_is_admitted_with_its_grant_and_only_with_one() {
        let token = genesis_proto::auth::generate_token();
        let tenant = Uuid::new_v4();
        let task = Uuid::new_v4();
        let mut coder = row(&token, TokenScope::Coder);
        coder.tenant_id = Some(tenant);
        let admitted = admit_bound(&token, coder.clone(), Some(task)).expect("bound coder");
        assert_eq!(
            admitted.coder,
            Some(CoderGrant {
                tenant_id: tenant,
                task_id: task
            })
        );
        assert_eq!(admitted.caller.tenant_id, Some(tenant));
        // Without its task the row widens to nothing: refused as unknown.
        assert_eq!(
            admit_bound(&token, coder, None)
                .expect_err("no task")
                .code(),
            tonic::Code::Unauthenticated
        );
        // An operator row never carries a grant.
        let op = admit_bound(&token, row(&token, TokenScope::Operator), None).expect("operator");
        assert_eq!(op.coder, None);
        assert!(coder_may_call(
            "/genesis.v1.CodingTaskService/ReportProgress"
        ));
        assert!(!coder_may_call("/genesis.v1.CodingTaskService/CreateTask"));
        assert!(!coder_may_call("/genesis.v1.CoderService/SpawnCoder"));
    }

    #[test]
    fn only_health_and_reflection_are_open() {
        assert!(is_open_path("/grpc.health.v1.Health/Check"));
        assert!(is_open_path(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
        ));
        assert!(!is_open_path("/genesis.v1.TenantService/ListTenants"));
    }
}
