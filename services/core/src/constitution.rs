//! The tenant constitution (spec §2.4, §3.8; DESIGN invariant 13): the rule
//! vocabulary (forbidden terms, forbidden patterns, action limits, scope
//! boundaries), their one-time validation and compilation, and the pure
//! check that the governance gate runs on the content of a proposal before
//! anything is persisted. A violation is data — `{blockedReason,
//! violations}` fed back to the model — never an error that ends the tick.
//! Must never do I/O (rules and counts are handed in by the caller), never
//! compile a regex per check, and never accept an unbounded pattern.

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

use crate::error::CoreError;
use crate::validate::{MAX_DESCRIPTION_BYTES, MAX_NAME_LEN, validate_name, validate_tool_name};

/// Longest forbidden term, in bytes.
pub const MAX_TERM_BYTES: usize = 256;
/// Longest forbidden-pattern source, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1024;
/// Compiled-program ceiling of one forbidden pattern, in bytes: a pattern
/// whose automaton would exceed it is refused when the rule is compiled.
pub const MAX_PATTERN_PROGRAM_BYTES: usize = 256 * 1024;
/// Most prefixes or scopes one boundary rule may list.
pub const MAX_SCOPE_ENTRIES: usize = 64;
/// Longest prefix or scope entry, in bytes.
pub const MAX_SCOPE_BYTES: usize = 512;
/// Most rules one tenant's constitution may hold.
pub const MAX_RULES: usize = 500;
/// Longest excerpt of offending text quoted in a violation's detail.
const MAX_EXCERPT_CHARS: usize = 80;

/// What one rule forbids. Serialised with a `kind` tag, exactly as the
/// `constitution_rules.kind` column and `params` JSON store it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "PascalCase")]
pub enum RuleKind {
    /// A word or phrase that may not appear in any checked field (matched
    /// case-insensitively, on word boundaries, so `kill` does not fire on
    /// `skill`).
    ForbiddenTerm {
        /// The term, as the operator wrote it.
        term: String,
    },
    /// A regular expression no checked field may match.
    ForbiddenPattern {
        /// The `regex` crate syntax source.
        pattern: String,
    },
    /// A ceiling on how often the agent may call `tool`: per tick, per UTC
    /// day, or both.
    ActionLimit {
        /// The governed tool the limit counts.
        tool: String,
        /// Most calls within one tick (lease session).
        #[serde(
            default,
            rename = "maxPerTick",
            skip_serializing_if = "Option::is_none"
        )]
        max_per_tick: Option<u32>,
        /// Most calls within the current UTC day.
        #[serde(default, rename = "maxPerDay", skip_serializing_if = "Option::is_none")]
        max_per_day: Option<u32>,
    },
    /// Where a proposed mission may reach: its target must start with one
    /// of `allowed_prefixes` (when any are listed), and neither its kind nor
    /// its target may fall under a `forbidden_scopes` entry.
    ScopeBoundary {
        /// Target prefixes a mission may name; empty = any target.
        #[serde(default, rename = "allowedPrefixes")]
        allowed_prefixes: Vec<String>,
        /// Mission kinds (exact, case-insensitive) or target prefixes that
        /// are out of bounds.
        #[serde(default, rename = "forbiddenScopes")]
        forbidden_scopes: Vec<String>,
    },
}

impl RuleKind {
    /// The stored discriminator (`constitution_rules.kind`).
    pub fn as_str(&self) -> &'static str {
        match self {
            RuleKind::ForbiddenTerm { .. } => "ForbiddenTerm",
            RuleKind::ForbiddenPattern { .. } => "ForbiddenPattern",
            RuleKind::ActionLimit { .. } => "ActionLimit",
            RuleKind::ScopeBoundary { .. } => "ScopeBoundary",
        }
    }
}

/// One rule of a tenant's constitution, as operators author it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConstitutionRule {
    /// Stable id (the `constitution_rules.id`), quoted back in violations.
    pub id: String,
    /// Short operator-facing name, quoted back in violations.
    pub name: String,
    /// What the rule forbids.
    #[serde(flatten)]
    pub kind: RuleKind,
    /// Why the rule exists, for the operator and the model.
    #[serde(default)]
    pub description: String,
    /// Governed tools this rule applies to; empty = every governed tool.
    /// (An `ActionLimit` always applies to its own `tool` only.)
    #[serde(default)]
    pub tools: Vec<String>,
}

/// One broken rule, as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleViolation {
    /// The rule's id.
    pub rule_id: String,
    /// The rule's name.
    pub rule_name: String,
    /// What exactly broke it (field and excerpt, or count and limit).
    pub detail: String,
}

/// A blocked call: serialised exactly as `{"blockedReason": ..,
/// "violations": [..]}` and returned to the model as the tool result, so it
/// can reconsider within the same episode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Violations {
    /// One sentence naming why the call was blocked.
    pub blocked_reason: String,
    /// Every rule the call broke, in constitution order.
    pub violations: Vec<RuleViolation>,
}

impl Violations {
    /// The JSON the model receives.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "blockedReason": self.blocked_reason,
            "violations": self.violations,
        })
    }
}

/// What the caller knows about the call beyond its text: how often the tool
/// already ran, and the mission scope a `soa_propose_task` names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckContext {
    /// Earlier (unblocked) calls of this tool within the current tick.
    pub calls_this_tick: u32,
    /// Earlier (unblocked) calls of this tool within the current UTC day.
    pub calls_today: u32,
    /// The proposed mission's kind, when the tool proposes one.
    pub mission_kind: Option<String>,
    /// The proposed mission's target, when the tool proposes one.
    pub target: Option<String>,
}

enum Compiled {
    Term {
        needle: String,
    },
    Pattern(Regex),
    Limit {
        tool: String,
        per_tick: Option<u32>,
        per_day: Option<u32>,
    },
    Boundary {
        allowed: Vec<String>,
        forbidden: Vec<String>,
    },
}

struct CompiledRule {
    id: String,
    name: String,
    tools: Vec<String>,
    body: Compiled,
}

/// A tenant's rules, validated and compiled once (patterns included), ready
/// to [`check`] any number of calls. Build with [`Constitution::compile`].
pub struct Constitution {
    rules: Vec<CompiledRule>,
}

impl std::fmt::Debug for Constitution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constitution")
            .field("rules", &self.rules.len())
            .finish()
    }
}

fn invalid(field: &str, reason: impl Into<String>) -> CoreError {
    CoreError::invalid_argument(field, reason)
}

fn check_bounded(field: &str, value: &str, max: usize) -> Result<(), CoreError> {
    if value.trim().is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(invalid(
            field,
            format!("is {} bytes; the limit is {max}", value.len()),
        ));
    }
    if value.contains('\0') {
        return Err(invalid(field, "must not contain NUL characters"));
    }
    Ok(())
}

fn check_list(field: &str, values: &[String]) -> Result<(), CoreError> {
    if values.len() > MAX_SCOPE_ENTRIES {
        return Err(invalid(
            field,
            format!(
                "has {} entries; the limit is {MAX_SCOPE_ENTRIES}",
                values.len()
            ),
        ));
    }
    for v in values {
        check_bounded(field, v, MAX_SCOPE_BYTES)?;
    }
    Ok(())
}

/// Validate one rule's shape without compiling it: the check the store and
/// the admin surface run before a rule is written.
pub fn validate_rule(rule: &ConstitutionRule) -> Result<(), CoreError> {
    compile_rule(rule).map(|_| ())
}

fn compile_rule(rule: &ConstitutionRule) -> Result<CompiledRule, CoreError> {
    check_bounded("id", &rule.id, MAX_NAME_LEN)?;
    validate_name("name", &rule.name, MAX_NAME_LEN)?;
    if rule.description.len() > MAX_DESCRIPTION_BYTES {
        return Err(invalid(
            "description",
            format!(
                "is {} bytes; the limit is {MAX_DESCRIPTION_BYTES}",
                rule.description.len()
            ),
        ));
    }
    if rule.tools.len() > MAX_SCOPE_ENTRIES {
        return Err(invalid(
            "tools",
            format!(
                "has {} entries; the limit is {MAX_SCOPE_ENTRIES}",
                rule.tools.len()
            ),
        ));
    }
    for t in &rule.tools {
        validate_tool_name("tools", t)?;
    }
    let body = match &rule.kind {
        RuleKind::ForbiddenTerm { term } => {
            check_bounded("term", term, MAX_TERM_BYTES)?;
            Compiled::Term {
                needle: term.trim().to_lowercase(),
            }
        }
        RuleKind::ForbiddenPattern { pattern } => {
            check_bounded("pattern", pattern, MAX_PATTERN_BYTES)?;
            let re = RegexBuilder::new(pattern)
                .size_limit(MAX_PATTERN_PROGRAM_BYTES)
                .dfa_size_limit(MAX_PATTERN_PROGRAM_BYTES)
                .build()
                .map_err(|e| invalid("pattern", format!("does not compile: {e}")))?;
            Compiled::Pattern(re)
        }
        RuleKind::ActionLimit {
            tool,
            max_per_tick,
            max_per_day,
        } => {
            validate_tool_name("tool", tool)?;
            if max_per_tick.is_none() && max_per_day.is_none() {
                return Err(invalid(
                    "maxPerTick",
                    "an action limit needs maxPerTick, maxPerDay or both",
                ));
            }
            Compiled::Limit {
                tool: tool.clone(),
                per_tick: *max_per_tick,
                per_day: *max_per_day,
            }
        }
        RuleKind::ScopeBoundary {
            allowed_prefixes,
            forbidden_scopes,
        } => {
            check_list("allowedPrefixes", allowed_prefixes)?;
            check_list("forbiddenScopes", forbidden_scopes)?;
            if allowed_prefixes.is_empty() && forbidden_scopes.is_empty() {
                return Err(invalid(
                    "allowedPrefixes",
                    "a scope boundary needs allowedPrefixes, forbiddenScopes or both",
                ));
            }
            Compiled::Boundary {
                allowed: allowed_prefixes.clone(),
                forbidden: forbidden_scopes.clone(),
            }
        }
    };
    Ok(CompiledRule {
        id: rule.id.clone(),
        name: rule.name.clone(),
        tools: rule.tools.clone(),
        body,
    })
}

impl Constitution {
    /// Validate and compile every rule once. The first bad rule refuses the
    /// whole set, naming the field (`rules[3].pattern`), so a tenant never
    /// runs a silently weakened constitution.
    pub fn compile(rules: &[ConstitutionRule]) -> Result<Constitution, CoreError> {
        if rules.len() > MAX_RULES {
            return Err(invalid(
                "rules",
                format!("has {} rules; the limit is {MAX_RULES}", rules.len()),
            ));
        }
        let mut compiled = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let c = compile_rule(rule).map_err(|e| match e {
                CoreError::InvalidArgument { field, reason } => {
                    invalid(&format!("rules[{i}].{field}"), reason)
                }
                other => other,
            })?;
            compiled.push(c);
        }
        Ok(Constitution { rules: compiled })
    }

    /// The empty constitution: every call passes.
    pub fn empty() -> Constitution {
        Constitution { rules: Vec::new() }
    }

    /// How many rules are in force.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether no rule is in force.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

fn excerpt(text: &str, start: usize, end: usize) -> String {
    let s: String = text
        .get(start..end)
        .unwrap_or_default()
        .chars()
        .take(MAX_EXCERPT_CHARS)
        .collect();
    s
}

fn is_word_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Whether `needle` (already lower case) occurs in `text` on word
/// boundaries, case-insensitively.
fn contains_term(text: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let hay = text.to_lowercase();
    let first_is_word = is_word_char(needle.chars().next());
    let last_is_word = is_word_char(needle.chars().next_back());
    let mut from = 0;
    while let Some(pos) = hay.get(from..).and_then(|h| h.find(needle)) {
        let at = from + pos;
        let end = at + needle.len();
        let before = hay.get(..at).and_then(|h| h.chars().next_back());
        let after = hay.get(end..).and_then(|h| h.chars().next());
        let left_ok = !first_is_word || !is_word_char(before);
        let right_ok = !last_is_word || !is_word_char(after);
        if left_ok && right_ok {
            return true;
        }
        // Step past this occurrence's first character.
        from = at + needle.chars().next().map_or(1, char::len_utf8);
    }
    false
}

fn scope_matches(scope: &str, kind: Option<&str>, target: Option<&str>) -> bool {
    kind.is_some_and(|k| k.eq_ignore_ascii_case(scope))
        || target.is_some_and(|t| t.to_lowercase().starts_with(&scope.to_lowercase()))
}

/// Check one governed call against a tenant's constitution.
///
/// `fields` are the call's content as `(field name, text)` pairs (title,
/// body, options...); term and pattern rules read them, limit rules read the
/// counts in `context`, boundary rules its mission kind and target. Every
/// broken rule is reported, not just the first, so the model can fix the
/// call in one retry. `Ok(())` means the call may proceed.
pub fn check(
    tool: &str,
    fields: &[(&str, &str)],
    constitution: &Constitution,
    context: &CheckContext,
) -> Result<(), Violations> {
    let mut found = Vec::new();
    for rule in &constitution.rules {
        let applies = rule.tools.is_empty() || rule.tools.iter().any(|t| t == tool);
        let mut push = |detail: String| {
            found.push(RuleViolation {
                rule_id: rule.id.clone(),
                rule_name: rule.name.clone(),
                detail,
            })
        };
        match &rule.body {
            Compiled::Term { needle } if applies => {
                if let Some((field, _)) =
                    fields.iter().find(|(_, text)| contains_term(text, needle))
                {
                    push(format!("{field} contains the forbidden term {needle:?}"));
                }
            }
            Compiled::Pattern(re) if applies => {
                if let Some((field, m)) = fields
                    .iter()
                    .find_map(|(field, text)| re.find(text).map(|m| (field, (text, m))))
                {
                    let (text, m) = m;
                    push(format!(
                        "{field} matches the forbidden pattern {:?} at {:?}",
                        re.as_str(),
                        excerpt(text, m.start(), m.end())
                    ));
                }
            }
            Compiled::Limit {
                tool: limited,
                per_tick,
                per_day,
            } if limited == tool => {
                if let Some(max) = per_tick
                    && context.calls_this_tick >= *max
                {
                    push(format!(
                        "{tool} already called {} time(s) this tick; the limit is {max} per tick",
                        context.calls_this_tick
                    ));
                } else if let Some(max) = per_day
                    && context.calls_today >= *max
                {
                    push(format!(
                        "{tool} already called {} time(s) today; the limit is {max} per day",
                        context.calls_today
                    ));
                }
            }
            Compiled::Boundary { allowed, forbidden }
                if applies && (context.mission_kind.is_some() || context.target.is_some()) =>
            {
                let kind = context.mission_kind.as_deref();
                let target = context.target.as_deref();
                if let Some(scope) = forbidden.iter().find(|s| scope_matches(s, kind, target)) {
                    push(format!(
                        "the mission's scope falls under the forbidden scope {scope:?}"
                    ));
                } else if !allowed.is_empty() {
                    match target {
                        None => push(format!(
                            "the mission names no target; targets must start with one of {allowed:?}"
                        )),
                        Some(t) if !allowed.iter().any(|p| t.starts_with(p.as_str())) => push(
                            format!("target {t:?} is outside the allowed prefixes {allowed:?}"),
                        ),
                        Some(_) => {}
                    }
                }
            }
            _ => {}
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = found.iter().map(|v| v.rule_name.as_str()).collect();
    Err(Violations {
        blocked_reason: format!(
            "{tool} was blocked by the tenant constitution ({} rule(s) broken: {}); \
             nothing was recorded — revise the call and try again",
            found.len(),
            names.join(", ")
        ),
        violations: found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(id: &str, kind: RuleKind) -> ConstitutionRule {
        ConstitutionRule {
            id: id.into(),
            name: format!("rule {id}"),
            kind,
            description: String::new(),
            tools: Vec::new(),
        }
    }

    fn term(id: &str, t: &str) -> ConstitutionRule {
        rule(id, RuleKind::ForbiddenTerm { term: t.into() })
    }

    fn compile(rules: &[ConstitutionRule]) -> Constitution {
        Constitution::compile(rules).unwrap()
    }

    #[test]
    fn a_clean_call_passes_and_the_empty_constitution_passes_everything() {
        let c = compile(&[term("r1", "delete production")]);
        let ctx = CheckContext::default();
        assert_eq!(
            check("soa_send_message", &[("body", "hello")], &c, &ctx),
            Ok(())
        );
        assert!(Constitution::empty().is_empty());
        assert_eq!(
            check(
                "soa_send_message",
                &[("body", "delete production")],
                &Constitution::empty(),
                &ctx
            ),
            Ok(())
        );
    }

    #[test]
    fn forbidden_terms_match_case_insensitively_on_word_boundaries() {
        let c = compile(&[term("r1", "kill")]);
        let ctx = CheckContext::default();
        let err = check(
            "soa_send_message",
            &[("title", "ok"), ("body", "We KILL it")],
            &c,
            &ctx,
        )
        .unwrap_err();
        assert_eq!(err.violations.len(), 1);
        assert_eq!(err.violations[0].rule_id, "r1");
        assert_eq!(
            err.violations[0].detail,
            "body contains the forbidden term \"kill\""
        );
        assert_eq!(
            check("t", &[("body", "a new skill; killing")], &c, &ctx),
            Ok(())
        );
        assert!(check("t", &[("body", "kill.")], &c, &ctx).is_err());
        // Terms that end in punctuation still match.
        let c = compile(&[term("r2", "rm -rf /")]);
        assert!(check("t", &[("body", "then rm -rf / everything")], &c, &ctx).is_err());
    }

    #[test]
    fn forbidden_patterns_are_compiled_once_and_quote_the_match() {
        let c = compile(&[rule(
            "p1",
            RuleKind::ForbiddenPattern {
                pattern: r"(?i)\bpassword\s*=\s*\S+".into(),
            },
        )]);
        let err = check(
            "soa_propose_task",
            &[("description", "set Password = hunter2 now")],
            &c,
            &CheckContext::default(),
        )
        .unwrap_err();
        assert!(
            err.violations[0].detail.contains("\"Password = hunter2\""),
            "{err:?}"
        );
        assert_eq!(
            check(
                "t",
                &[("description", "no secrets")],
                &c,
                &CheckContext::default()
            ),
            Ok(())
        );
    }

    #[test]
    fn bad_patterns_and_oversized_patterns_are_refused_by_field() {
        let bad = rule(
            "p",
            RuleKind::ForbiddenPattern {
                pattern: "(".into(),
            },
        );
        let err = Constitution::compile(&[term("ok", "x"), bad]).unwrap_err();
        match err {
            CoreError::InvalidArgument { field, reason } => {
                assert_eq!(field, "rules[1].pattern");
                assert!(reason.starts_with("does not compile"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let long = rule(
            "p",
            RuleKind::ForbiddenPattern {
                pattern: "a".repeat(MAX_PATTERN_BYTES + 1),
            },
        );
        assert!(validate_rule(&long).is_err());
        // Within the source limit but an automaton beyond the program ceiling.
        let huge = rule(
            "p",
            RuleKind::ForbiddenPattern {
                pattern: r"\w{200}\w{200}\w{200}".into(),
            },
        );
        let err = validate_rule(&huge).unwrap_err();
        assert!(err.to_string().contains("pattern"), "{err}");
    }

    #[test]
    fn action_limits_count_per_tick_and_per_day() {
        let c = compile(&[rule(
            "l1",
            RuleKind::ActionLimit {
                tool: "soa_propose_task".into(),
                max_per_tick: Some(1),
                max_per_day: Some(3),
            },
        )]);
        let ctx = |tick, day| CheckContext {
            calls_this_tick: tick,
            calls_today: day,
            ..CheckContext::default()
        };
        assert_eq!(check("soa_propose_task", &[], &c, &ctx(0, 2)), Ok(()));
        let err = check("soa_propose_task", &[], &c, &ctx(1, 1)).unwrap_err();
        assert!(err.violations[0].detail.contains("limit is 1 per tick"));
        let err = check("soa_propose_task", &[], &c, &ctx(0, 3)).unwrap_err();
        assert!(err.violations[0].detail.contains("limit is 3 per day"));
        // Other tools are not counted by this limit.
        assert_eq!(check("soa_send_message", &[], &c, &ctx(9, 9)), Ok(()));
        let empty = rule(
            "l2",
            RuleKind::ActionLimit {
                tool: "soa_propose_task".into(),
                max_per_tick: None,
                max_per_day: None,
            },
        );
        assert!(validate_rule(&empty).is_err());
    }

    #[test]
    fn scope_boundaries_check_kind_and_target() {
        let c = compile(&[rule(
            "s1",
            RuleKind::ScopeBoundary {
                allowed_prefixes: vec!["repo:acme/".into()],
                forbidden_scopes: vec!["MissionOperations".into(), "repo:acme/billing".into()],
            },
        )]);
        let ctx = |kind: &str, target: Option<&str>| CheckContext {
            mission_kind: Some(kind.into()),
            target: target.map(str::to_owned),
            ..CheckContext::default()
        };
        assert_eq!(
            check(
                "soa_propose_task",
                &[],
                &c,
                &ctx("MissionDevelopment", Some("repo:acme/web"))
            ),
            Ok(())
        );
        let err = check(
            "soa_propose_task",
            &[],
            &c,
            &ctx("missionoperations", Some("repo:acme/web")),
        )
        .unwrap_err();
        assert!(err.violations[0].detail.contains("forbidden scope"));
        assert!(
            check(
                "soa_propose_task",
                &[],
                &c,
                &ctx("MissionDevelopment", Some("repo:acme/billing/x"))
            )
            .is_err()
        );
        let err = check(
            "soa_propose_task",
            &[],
            &c,
            &ctx("MissionDevelopment", Some("repo:other/x")),
        )
        .unwrap_err();
        assert!(
            err.violations[0]
                .detail
                .contains("outside the allowed prefixes")
        );
        let err = check(
            "soa_propose_task",
            &[],
            &c,
            &ctx("MissionDevelopment", None),
        )
        .unwrap_err();
        assert!(err.violations[0].detail.contains("names no target"));
        // A call that proposes no mission is not scope-checked.
        assert_eq!(
            check(
                "soa_send_message",
                &[("body", "x")],
                &c,
                &CheckContext::default()
            ),
            Ok(())
        );
    }

    #[test]
    fn rules_scoped_to_tools_apply_only_to_those_tools() {
        let mut r = term("r1", "secret");
        r.tools = vec!["soa_send_message".into()];
        let c = compile(&[r]);
        let ctx = CheckContext::default();
        assert!(check("soa_send_message", &[("body", "a secret")], &c, &ctx).is_err());
        assert_eq!(
            check("soa_propose_decision", &[("body", "a secret")], &c, &ctx),
            Ok(())
        );
    }

    #[test]
    fn every_broken_rule_is_reported_and_serialised_exactly() {
        let c = compile(&[term("r1", "alpha"), term("r2", "beta"), term("r3", "gamma")]);
        let err = check(
            "soa_propose_decision",
            &[("title", "alpha"), ("body", "and beta")],
            &c,
            &CheckContext::default(),
        )
        .unwrap_err();
        assert_eq!(err.violations.len(), 2);
        let v = serde_json::to_value(&err).unwrap();
        assert_eq!(v, err.to_json());
        assert_eq!(v.as_object().unwrap().len(), 2);
        assert!(
            v["blockedReason"]
                .as_str()
                .unwrap()
                .contains("rule r1, rule r2")
        );
        assert_eq!(
            v["violations"][1],
            json!({"ruleId": "r2", "ruleName": "rule r2", "detail": "body contains the forbidden term \"beta\""})
        );
    }

    #[test]
    fn rules_round_trip_through_their_stored_json() {
        let r = rule(
            "l1",
            RuleKind::ActionLimit {
                tool: "soa_propose_task".into(),
                max_per_tick: Some(2),
                max_per_day: None,
            },
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["kind"], "ActionLimit");
        assert_eq!(v["maxPerTick"], 2);
        assert_eq!(serde_json::from_value::<ConstitutionRule>(v).unwrap(), r);
        assert_eq!(r.kind.as_str(), "ActionLimit");
        let bad_name = ConstitutionRule {
            name: String::new(),
            ..term("x", "y")
        };
        assert!(validate_rule(&bad_name).is_err());
        let bad_tool = ConstitutionRule {
            tools: vec!["Bad-Tool".into()],
            ..term("x", "y")
        };
        assert!(validate_rule(&bad_tool).is_err());
        assert!(validate_rule(&term("x", " ")).is_err());
    }
}
