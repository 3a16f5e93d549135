//! The constitution behind the [`Governance`] hook (spec §2.4, §3.8; DESIGN
//! invariant 13): loads each tenant's enabled `constitution_rules`
//! (compiled once, cached for a short TTL), and checks the content of the
//! four governed verbs — `soa_propose_task` (with its mission kind and
//! target for the scope boundaries), `soa_propose_decision`,
//! `soa_send_message`, `soa_propose_mode_change` — before their handlers
//! run. A violation is returned as `{blockedReason, violations}` (the
//! supervisor records the call as blocked and persists nothing else) and
//! counted. Must never let a governed call through when the rules cannot be
//! loaded or compiled (fail closed), and never check tools outside the
//! governed set.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use genesis_core::constitution::{self, CheckContext, Constitution};
use genesis_store::Store;
use serde_json::Value;
use uuid::Uuid;

use super::{CallCounts, Governance, Violation, Violations};

/// The tools whose content the constitution checks.
pub const GOVERNED_TOOLS: &[&str] = &[
    "soa_propose_task",
    "soa_propose_decision",
    "soa_send_message",
    "soa_propose_mode_change",
];

/// How long a tenant's compiled rules are reused before reloading.
pub const DEFAULT_RULES_TTL: Duration = Duration::from_secs(10);

/// The constitution gate. Cheap to share (`Arc`); one per supervisor.
pub struct ConstitutionGovernance {
    store: Store,
    ttl: Duration,
    cache: Mutex<HashMap<Uuid, (Instant, Arc<Constitution>)>>,
    blocked: AtomicU64,
}

impl ConstitutionGovernance {
    /// A gate reading rules through `store`, cached for `ttl` (zero = always
    /// reload, which tests use to see a rule change at once).
    pub fn new(store: Store, ttl: Duration) -> Self {
        Self {
            store,
            ttl,
            cache: Mutex::new(HashMap::new()),
            blocked: AtomicU64::new(0),
        }
    }

    /// Calls blocked by the constitution since start (the
    /// `governance_blocked_total` metric).
    pub fn blocked_total(&self) -> u64 {
        self.blocked.load(Ordering::Relaxed)
    }

    /// Drop a tenant's cached rules (after an operator edits them).
    pub fn invalidate(&self, tenant_id: Uuid) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.remove(&tenant_id);
        }
    }

    async fn rules_for(&self, tenant_id: Uuid) -> Result<Arc<Constitution>, String> {
        if let Ok(cache) = self.cache.lock()
            && let Some((at, c)) = cache.get(&tenant_id)
            && at.elapsed() < self.ttl
        {
            return Ok(c.clone());
        }
        let rules = self
            .store
            .constitution()
            .list_enabled(tenant_id)
            .await
            .map_err(|e| format!("the tenant constitution could not be loaded: {e}"))?;
        let compiled = Arc::new(
            Constitution::compile(&rules)
                .map_err(|e| format!("the tenant constitution does not compile: {e}"))?,
        );
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(tenant_id, (Instant::now(), compiled.clone()));
        }
        Ok(compiled)
    }

    fn block(&self, tool: &str, v: Violations) -> Result<(), Violations> {
        self.blocked.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            tool,
            violations = v.violations.len(),
            "governance blocked a tool call"
        );
        Err(v)
    }
}

/// The text fields of a governed call that term and pattern rules read.
pub fn content_fields(tool: &str, args: &Value) -> Vec<(String, String)> {
    let keys: &[&str] = match tool {
        "soa_propose_task" => &["title", "description", "target"],
        "soa_propose_decision" => &["title", "body"],
        "soa_send_message" => &["body"],
        "soa_propose_mode_change" => &["targetMode", "reason"],
        _ => &[],
    };
    let mut fields: Vec<(String, String)> = keys
        .iter()
        .filter_map(|k| {
            args.get(*k)
                .and_then(Value::as_str)
                .map(|s| ((*k).to_owned(), s.to_owned()))
        })
        .collect();
    if tool == "soa_propose_decision"
        && let Some(options) = args.get("options").and_then(Value::as_array)
    {
        for (i, o) in options.iter().enumerate() {
            if let Some(s) = o.as_str() {
                fields.push((format!("options[{i}]"), s.to_owned()));
            }
        }
    }
    fields
}

#[async_trait::async_trait]
impl Governance for ConstitutionGovernance {
    async fn check(
        &self,
        tenant_id: Uuid,
        tool: &str,
        args: &Value,
        calls: CallCounts,
    ) -> Result<(), Violations> {
        if !GOVERNED_TOOLS.contains(&tool) {
            return Ok(());
        }
        let rules = match self.rules_for(tenant_id).await {
            Ok(r) => r,
            Err(reason) => {
                return self.block(
                    tool,
                    Violations {
                        blocked_reason: format!("{tool} was blocked: {reason}"),
                        violations: vec![Violation {
                            rule: "constitution".into(),
                            message: reason,
                        }],
                    },
                );
            }
        };
        if rules.is_empty() {
            return Ok(());
        }
        let owned = content_fields(tool, args);
        let fields: Vec<(&str, &str)> = owned
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut context = CheckContext {
            calls_this_tick: calls.this_tick,
            calls_today: calls.today,
            ..CheckContext::default()
        };
        if tool == "soa_propose_task" {
            context.mission_kind = args.get("kind").and_then(Value::as_str).map(str::to_owned);
            context.target = args
                .get("target")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        match constitution::check(tool, &fields, &rules, &context) {
            Ok(()) => Ok(()),
            Err(v) => self.block(
                tool,
                Violations {
                    blocked_reason: v.blocked_reason,
                    violations: v
                        .violations
                        .into_iter()
                        .map(|r| Violation {
                            rule: r.rule_id,
                            message: format!("{}: {}", r.rule_name, r.detail),
                        })
                        .collect(),
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_fields_follow_the_governed_tool() {
        let args = json!({"title": "t", "body": "b", "options": ["x", 1, "y"], "extra": "e"});
        let f = content_fields("soa_propose_decision", &args);
        let names: Vec<_> = f.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["title", "body", "options[0]", "options[2]"]);
        assert!(content_fields("agent_query_memory", &args).is_empty());
        let f = content_fields(
            "soa_propose_task",
            &json!({"title": "a", "description": "d", "target": "repo"}),
        );
        assert_eq!(f.len(), 3);
    }
}
