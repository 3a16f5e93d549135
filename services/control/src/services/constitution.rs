//! `genesis.v1.ConstitutionService`: the operator's view of a tenant's
//! constitution — list the enabled rules, add a forbidden-pattern rule,
//! remove (disable) a rule. Every rule is validated by genesis-core's
//! `validate_rule` before anything is written. The supervisor's
//! constitution cache picks an added or removed rule up within its TTL; no
//! cache lives here. Must never write a rule except through
//! `genesis_store::constitution`, and never answer for a tenant the caller
//! is not bound to.

use genesis_core::constitution::{ConstitutionRule, RuleKind, validate_rule};
use genesis_proto::v1::{self, constitution_service_server::ConstitutionService};
use genesis_store::constitution::NewConstitutionRule;
use tonic::{Request, Response, Status};

use super::{observe, record_ids};
use crate::auth::caller;
use crate::state::AppState;
use crate::status::{core_status, store_status, uuid};

/// The inline flag that makes a stored pattern case-insensitive, as the
/// proto's `ConstitutionRule.pattern` promises.
const CASE_INSENSITIVE: &str = "(?i)";

/// The service.
#[derive(Clone)]
pub struct Constitutions {
    state: AppState,
}

impl Constitutions {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

/// The pattern as stored: the operator's pattern with `(?i)` in front
/// (unless it already starts with it), so matching is case-insensitive.
pub fn stored_pattern(pattern: &str) -> String {
    if pattern.starts_with(CASE_INSENSITIVE) {
        pattern.to_owned()
    } else {
        format!("{CASE_INSENSITIVE}{pattern}")
    }
}

/// Core rule → wire `ConstitutionRule`. The wire has one `pattern` field:
/// a `ForbiddenPattern` answers its regex (without the leading `(?i)` the
/// server adds), a `ForbiddenTerm` its term, and the rule kinds the wire
/// cannot express (`ActionLimit`, `ScopeBoundary`) an empty pattern.
/// `created_at` is unset: the store's rule listing carries no timestamps.
pub fn rule(tenant_id: uuid::Uuid, r: &ConstitutionRule) -> v1::ConstitutionRule {
    let pattern = match &r.kind {
        RuleKind::ForbiddenPattern { pattern } => pattern
            .strip_prefix(CASE_INSENSITIVE)
            .unwrap_or(pattern)
            .to_owned(),
        RuleKind::ForbiddenTerm { term } => term.clone(),
        RuleKind::ActionLimit { .. } | RuleKind::ScopeBoundary { .. } => String::new(),
    };
    v1::ConstitutionRule {
        id: r.id.clone(),
        tenant_id: tenant_id.to_string(),
        name: r.name.clone(),
        description: r.description.clone(),
        pattern,
        created_at: None,
    }
}

/// `AddRuleRequest` → the store's new rule, validated by genesis-core
/// (`INVALID_ARGUMENT` naming `name`, `description` or `pattern`).
pub fn new_rule(req: &v1::AddRuleRequest) -> Result<NewConstitutionRule, Status> {
    if req.pattern.trim().is_empty() {
        return Err(genesis_proto::convert::invalid_argument(
            "pattern",
            "must not be empty",
        ));
    }
    let new = NewConstitutionRule {
        name: req.name.trim().to_owned(),
        kind: RuleKind::ForbiddenPattern {
            pattern: stored_pattern(&req.pattern),
        },
        description: req.description.clone(),
        tools: Vec::new(),
    };
    validate_rule(&ConstitutionRule {
        id: "new".to_owned(),
        name: new.name.clone(),
        kind: new.kind.clone(),
        description: new.description.clone(),
        tools: new.tools.clone(),
    })
    .map_err(core_status)?;
    Ok(new)
}

#[tonic::async_trait]
impl ConstitutionService for Constitutions {
    /// The tenant's enabled rules, oldest first (the order violations are
    /// reported in). Removed rules are disabled rows and are not listed.
    async fn list_rules(
        &self,
        request: Request<v1::ListRulesRequest>,
    ) -> Result<Response<v1::ListRulesResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.ConstitutionService/ListRules",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                record_ids(t, None);
                let rows = self
                    .state
                    .store
                    .constitution()
                    .list_enabled(t)
                    .await
                    .map_err(store_status)?;
                Ok(v1::ListRulesResponse {
                    rules: rows.iter().map(|r| rule(t, r)).collect(),
                })
            },
        )
        .await
    }

    /// Add a `ForbiddenPattern` rule applying to every governed tool. The
    /// pattern is matched case-insensitively; a pattern that does not
    /// compile or is oversized is refused and nothing is written. The
    /// supervisor enforces the rule once its constitution cache refreshes
    /// (within its TTL).
    async fn add_rule(
        &self,
        request: Request<v1::AddRuleRequest>,
    ) -> Result<Response<v1::ConstitutionRule>, Status> {
        observe(
            &self.state,
            "/genesis.v1.ConstitutionService/AddRule",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let new = new_rule(req)?;
                record_ids(t, None);
                let row = self
                    .state
                    .store
                    .constitution()
                    .insert(t, &new)
                    .await
                    .map_err(store_status)?;
                tracing::info!(rule = %row.id, actor = %caller.actor(), "constitution rule added");
                Ok(rule(t, &row))
            },
        )
        .await
    }

    /// Remove a rule by disabling it (the row stays for audit): `removed`
    /// is true when this call disabled it, false when it was already
    /// disabled; an unknown id (or another tenant's) is `NOT_FOUND`. The
    /// supervisor stops enforcing it once its cache refreshes (within its
    /// TTL).
    async fn remove_rule(
        &self,
        request: Request<v1::RemoveRuleRequest>,
    ) -> Result<Response<v1::RemoveRuleResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.ConstitutionService/RemoveRule",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = uuid("rule_id", &req.rule_id)?;
                record_ids(t, None);
                let repo = self.state.store.constitution();
                let was_enabled = repo
                    .list_enabled(t)
                    .await
                    .map_err(store_status)?
                    .iter()
                    .any(|r| r.id == id.to_string());
                repo.set_enabled(t, id, false)
                    .await
                    .map_err(store_status)?;
                if was_enabled {
                    tracing::info!(rule = %id, actor = %caller.actor(), "constitution rule removed");
                }
                Ok(v1::RemoveRuleResponse {
                    removed: was_enabled,
                })
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn add(name: &str, pattern: &str) -> v1::AddRuleRequest {
        v1::AddRuleRequest {
            tenant_id: uuid::Uuid::nil().to_string(),
            name: name.into(),
            description: String::new(),
            pattern: pattern.into(),
        }
    }

    #[test]
    fn stored_patterns_are_case_insensitive_and_shown_without_the_flag() {
        assert_eq!(stored_pattern("secret"), "(?i)secret");
        assert_eq!(stored_pattern("(?i)secret"), "(?i)secret");
        let new = new_rule(&add("no-secrets", "secret")).expect("valid");
        let r = ConstitutionRule {
            id: "x".into(),
            name: new.name,
            kind: new.kind,
            description: String::new(),
            tools: Vec::new(),
        };
        assert_eq!(rule(uuid::Uuid::nil(), &r).pattern, "secret");
    }

    #[test]
    fn invalid_rules_are_refused_naming_the_field() {
        for (req, field) in [
            (add("r", "(unclosed"), "pattern:"),
            (add("r", ""), "pattern:"),
            (add("r", &"a".repeat(2000)), "pattern:"),
            (add("", "ok"), "name:"),
        ] {
            let e = new_rule(&req).expect_err("refused");
            assert_eq!(e.code(), Code::InvalidArgument);
            assert!(e.message().starts_with(field), "{}", e.message());
        }
    }
}
