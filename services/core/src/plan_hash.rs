//! The B1 no-op short-circuit (spec §3.4 steps 2 and 4, §3.3 step 3): the
//! coarse ops-digest bucket, the SHA-256 `PlanInputHash` over canonical JSON
//! of the external drivers, the short-circuit decision and the idle / STUCK
//! counters. Must never hash the agent's own reasoning tail or anything else
//! that changes every tick — that would defeat the short-circuit.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::enums::AgentEventKind;
use crate::error::CoreError;
use crate::options::AgentDispatcherOptions;

/// A raw probe of the platform's own operational health over the last
/// window (IOpsDigestProbe).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OpsDigest {
    /// Database deadlocks since the previous probe.
    pub deadlocks_delta: u64,
    /// Rolled-back transactions since the previous probe.
    pub rollbacks_delta: u64,
    /// Fraction of failed requests, 0.0 ..= 1.0.
    pub error_rate: f64,
    /// Alerts currently firing.
    pub firing_alerts: u32,
}

/// Bucket thresholds. Each level is wide enough that ordinary jitter stays in
/// one bucket; crossing into the next is what an incident looks like.
const DEADLOCKS_ELEVATED: u64 = 5;
const DEADLOCKS_INCIDENT: u64 = 50;
const ROLLBACKS_ELEVATED: u64 = 100;
const ROLLBACKS_INCIDENT: u64 = 1_000;
const ERROR_RATE_ELEVATED: f64 = 0.02;
const ERROR_RATE_INCIDENT: f64 = 0.10;
const ALERTS_STORM: u32 = 5;

fn level(v: u64, elevated: u64, incident: u64) -> &'static str {
    if v >= incident {
        "incident"
    } else if v >= elevated {
        "elevated"
    } else {
        "ok"
    }
}

/// The coarse bucket of an ops digest that enters the plan-input hash, e.g.
/// `deadlocks=ok;rollbacks=ok;errors=ok;alerts=none`. A firing alert always
/// changes it (`none` → `firing`); 1 vs 3 alerts does not.
pub fn ops_bucket(digest: &OpsDigest) -> String {
    let errors = if digest.error_rate.is_nan() {
        "unknown"
    } else if digest.error_rate >= ERROR_RATE_INCIDENT {
        "incident"
    } else if digest.error_rate >= ERROR_RATE_ELEVATED {
        "elevated"
    } else {
        "ok"
    };
    let alerts = match digest.firing_alerts {
        0 => "none",
        n if n < ALERTS_STORM => "firing",
        _ => "storm",
    };
    format!(
        "deadlocks={};rollbacks={};errors={errors};alerts={alerts}",
        level(
            digest.deadlocks_delta,
            DEADLOCKS_ELEVATED,
            DEADLOCKS_INCIDENT
        ),
        level(
            digest.rollbacks_delta,
            ROLLBACKS_ELEVATED,
            ROLLBACKS_INCIDENT
        ),
    )
}

/// Writes `value` as canonical JSON: object keys sorted (by their UTF-8
/// bytes) at every depth, no insignificant whitespace. Independent of
/// serde_json's map ordering feature, so every crate hashes alike.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// SHA-256 (lower-case hex) of the tick's external drivers: the canonical
/// JSON of `{event_kind, payload, ops_bucket}` and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlanInputHash(String);

impl PlanInputHash {
    /// Hashes the drivers of one tick. A missing payload hashes as `null`.
    pub fn compute(event_kind: AgentEventKind, payload: Option<&Value>, ops_bucket: &str) -> Self {
        let mut doc = serde_json::Map::new();
        doc.insert(
            "event_kind".into(),
            Value::String(event_kind.as_str().into()),
        );
        doc.insert("ops_bucket".into(), Value::String(ops_bucket.into()));
        doc.insert("payload".into(), payload.cloned().unwrap_or(Value::Null));
        let canonical = canonical_json(&Value::Object(doc));
        Self(hex::encode(Sha256::digest(canonical.as_bytes())))
    }

    /// The 64-character lower-case hex form, as stored in `plan_input_hash`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PlanInputHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for PlanInputHash {
    type Err = CoreError;

    /// Accepts exactly 64 lower-case hex digits (what `compute` writes).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Self(s.to_owned()))
        } else {
            Err(CoreError::invalid_argument(
                "plan_input_hash",
                "expected 64 lower-case hex digits",
            ))
        }
    }
}

impl Serialize for PlanInputHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for PlanInputHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Whether this tick must re-plan despite an unchanged hash: it would be the
/// Nth consecutive idle tick since the last real plan
/// (`ForcedReplanEveryNIdleTicks`). `idle_ticks_since_replan` is the
/// pre-tick counter.
pub fn forced_replan_due(idle_ticks_since_replan: u32, opts: &AgentDispatcherOptions) -> bool {
    idle_ticks_since_replan.saturating_add(1) >= opts.forced_replan_every_n_idle_ticks
}

/// Whether to skip the LLM call and idle: only for an `AgentTick`, only when
/// the hash equals the prior tick's, and never when a forced re-plan is due.
pub fn should_short_circuit(
    event_kind: AgentEventKind,
    new_hash: &PlanInputHash,
    prior_hash: Option<&PlanInputHash>,
    idle_ticks_since_replan: u32,
    opts: &AgentDispatcherOptions,
) -> bool {
    event_kind == AgentEventKind::AgentTick
        && prior_hash == Some(new_hash)
        && !forced_replan_due(idle_ticks_since_replan, opts)
}

/// Whether a completed tick counts as idle (spec §3.3 step 3): an
/// `AgentTick` whose hash matches the prior tick's.
pub fn is_idle_tick(
    event_kind: AgentEventKind,
    new_hash: &PlanInputHash,
    prior_hash: Option<&PlanInputHash>,
) -> bool {
    event_kind == AgentEventKind::AgentTick && prior_hash == Some(new_hash)
}

/// The instance's idle counters, as stored on `agent_instances`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdleCounters {
    /// Consecutive idle ticks (drives the geometric backoff).
    pub consecutive_idle_ticks: u32,
    /// Idle ticks since the last real plan (drives the forced re-plan).
    pub idle_ticks_since_replan: u32,
}

/// The post-tick counters, returned as
/// `(consecutive_idle_ticks, idle_ticks_since_replan)`.
/// `consecutive_idle_ticks` increments on an idle tick and resets otherwise.
/// `idle_ticks_since_replan` increments on an idle tick that skipped the LLM
/// and resets whenever a real plan ran (`planned`), which is how the forced
/// re-plan restarts its count.
pub fn next_idle_counters(prior: IdleCounters, is_idle: bool, planned: bool) -> (u32, u32) {
    let consecutive = if is_idle {
        prior.consecutive_idle_ticks.saturating_add(1)
    } else {
        0
    };
    let since_replan = if planned || !is_idle {
        0
    } else {
        prior.idle_ticks_since_replan.saturating_add(1)
    };
    (consecutive, since_replan)
}

/// The post-tick `consecutive_blocked_turns` (spec §3.3 step 4): increments
/// on a genuine block, resets otherwise.
pub fn next_blocked_turns(prior: u32, blocked: bool) -> u32 {
    if blocked { prior.saturating_add(1) } else { 0 }
}

/// The exhausted streak after a tick: turns that ended without a
/// terminator because a per-tick budget ran out or the pod failed (phase
/// `idle:exhausted`); any other outcome ends it. Never the STUCK counter.
pub fn next_exhausted_turns(prior: u32, exhausted: bool) -> u32 {
    if exhausted {
        prior.saturating_add(1)
    } else {
        0
    }
}

/// Whether the STUCK guard halts the instance this tick: only when enforced
/// (pod path) and the post-tick blocked count reached the maximum.
pub fn stuck_halt_due(blocked_turns_after: u32, opts: &AgentDispatcherOptions) -> bool {
    opts.enforce_stuck_guard && blocked_turns_after >= opts.max_consecutive_blocked_turns
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_recursively() {
        let a = json!({"b": 1, "a": {"z": [1, {"y": 2, "x": 3}], "c": null}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"z":[1,{"x":3,"y":2}]},"b":1}"#
        );
        assert_eq!(canonical_json(&json!("q\"s")), r#""q\"s""#);
    }

    #[test]
    fn hash_ignores_key_order_but_not_content() {
        let bucket = ops_bucket(&OpsDigest::default());
        let p1 = json!({"text": "hi", "meta": {"a": 1, "b": 2}});
        let p2: Value = serde_json::from_str(r#"{"meta":{"b":2,"a":1},"text":"hi"}"#).unwrap();
        let h1 = PlanInputHash::compute(AgentEventKind::AgentTick, Some(&p1), &bucket);
        let h2 = PlanInputHash::compute(AgentEventKind::AgentTick, Some(&p2), &bucket);
        assert_eq!(h1, h2);
        assert_eq!(h1.as_str().len(), 64);
        let h3 = PlanInputHash::compute(
            AgentEventKind::AgentTick,
            Some(&json!({"text": "ho"})),
            &bucket,
        );
        assert_ne!(h1, h3);
        let h4 = PlanInputHash::compute(AgentEventKind::OperatorMessage, Some(&p1), &bucket);
        assert_ne!(h1, h4);
        let h5 = PlanInputHash::compute(AgentEventKind::AgentTick, Some(&p1), "deadlocks=incident");
        assert_ne!(h1, h5);
        let none = PlanInputHash::compute(AgentEventKind::AgentTick, None, &bucket);
        let null = PlanInputHash::compute(AgentEventKind::AgentTick, Some(&Value::Null), &bucket);
        assert_eq!(none, null);
    }

    #[test]
    fn hash_is_sha256_of_the_canonical_document() {
        let h = PlanInputHash::compute(AgentEventKind::AgentTick, None, "b");
        let expected = hex::encode(Sha256::digest(
            br#"{"event_kind":"AgentTick","ops_bucket":"b","payload":null}"#,
        ));
        assert_eq!(h.as_str(), expected);
        assert_eq!(h.to_string().parse::<PlanInputHash>().unwrap(), h);
    }

    #[test]
    fn malformed_stored_hash_is_refused() {
        for bad in ["", "abc", &"A".repeat(64), &"g".repeat(64), &"0".repeat(65)] {
            assert_eq!(
                bad.parse::<PlanInputHash>().unwrap_err().code(),
                crate::ErrorCode::InvalidArgument
            );
        }
    }

    #[test]
    fn jitter_keeps_the_bucket_an_incident_flips_it() {
        let calm = OpsDigest {
            deadlocks_delta: 0,
            rollbacks_delta: 3,
            error_rate: 0.001,
            firing_alerts: 0,
        };
        let jitter = OpsDigest {
            deadlocks_delta: 2,
            rollbacks_delta: 40,
            error_rate: 0.008,
            firing_alerts: 0,
        };
        assert_eq!(ops_bucket(&calm), ops_bucket(&jitter));
        assert_eq!(
            ops_bucket(&calm),
            "deadlocks=ok;rollbacks=ok;errors=ok;alerts=none"
        );
        for incident in [
            OpsDigest {
                deadlocks_delta: 80,
                ..calm
            },
            OpsDigest {
                rollbacks_delta: 5_000,
                ..calm
            },
            OpsDigest {
                error_rate: 0.25,
                ..calm
            },
            OpsDigest {
                firing_alerts: 1,
                ..calm
            },
        ] {
            assert_ne!(ops_bucket(&calm), ops_bucket(&incident), "{incident:?}");
        }
        let one = OpsDigest {
            firing_alerts: 1,
            ..calm
        };
        let three = OpsDigest {
            firing_alerts: 3,
            ..calm
        };
        assert_eq!(ops_bucket(&one), ops_bucket(&three));
        assert!(
            ops_bucket(&OpsDigest {
                error_rate: f64::NAN,
                ..calm
            })
            .contains("errors=unknown")
        );
    }

    #[test]
    fn short_circuit_only_for_unchanged_ticks_without_forced_replan() {
        let o = AgentDispatcherOptions::default();
        let h = PlanInputHash::compute(AgentEventKind::AgentTick, None, "b");
        let other = PlanInputHash::compute(AgentEventKind::AgentTick, None, "c");
        assert!(should_short_circuit(
            AgentEventKind::AgentTick,
            &h,
            Some(&h),
            0,
            &o
        ));
        assert!(should_short_circuit(
            AgentEventKind::AgentTick,
            &h,
            Some(&h),
            18,
            &o
        ));
        // The 20th idle tick re-plans.
        assert!(!should_short_circuit(
            AgentEventKind::AgentTick,
            &h,
            Some(&h),
            19,
            &o
        ));
        assert!(!should_short_circuit(
            AgentEventKind::AgentTick,
            &h,
            Some(&h),
            u32::MAX,
            &o
        ));
        assert!(!should_short_circuit(
            AgentEventKind::AgentTick,
            &h,
            Some(&other),
            0,
            &o
        ));
        assert!(!should_short_circuit(
            AgentEventKind::AgentTick,
            &h,
            None,
            0,
            &o
        ));
        for e in AgentEventKind::ALL
            .iter()
            .filter(|e| **e != AgentEventKind::AgentTick)
        {
            assert!(!should_short_circuit(*e, &h, Some(&h), 0, &o), "{e}");
        }
    }

    #[test]
    fn forced_replan_cycle_over_many_idle_ticks() {
        let o = AgentDispatcherOptions {
            forced_replan_every_n_idle_ticks: 4,
            ..Default::default()
        };
        let h = PlanInputHash::compute(AgentEventKind::AgentTick, None, "b");
        let mut c = IdleCounters::default();
        let mut plans = Vec::new();
        for tick in 0..12 {
            let skip = should_short_circuit(
                AgentEventKind::AgentTick,
                &h,
                Some(&h),
                c.idle_ticks_since_replan,
                &o,
            );
            if !skip {
                plans.push(tick);
            }
            let (a, b) = next_idle_counters(c, true, !skip);
            c = IdleCounters {
                consecutive_idle_ticks: a,
                idle_ticks_since_replan: b,
            };
        }
        assert_eq!(plans, [3, 7, 11]);
        assert_eq!(c.consecutive_idle_ticks, 12);
    }

    #[test]
    fn idle_counters_follow_the_spec() {
        let prior = IdleCounters {
            consecutive_idle_ticks: 4,
            idle_ticks_since_replan: 2,
        };
        assert_eq!(next_idle_counters(prior, true, false), (5, 3));
        assert_eq!(next_idle_counters(prior, true, true), (5, 0));
        assert_eq!(next_idle_counters(prior, false, true), (0, 0));
        assert_eq!(next_idle_counters(prior, false, false), (0, 0));
        let max = IdleCounters {
            consecutive_idle_ticks: u32::MAX,
            idle_ticks_since_replan: u32::MAX,
        };
        assert_eq!(next_idle_counters(max, true, false), (u32::MAX, u32::MAX));
        let h = PlanInputHash::compute(AgentEventKind::AgentTick, None, "b");
        assert!(is_idle_tick(AgentEventKind::AgentTick, &h, Some(&h)));
        assert!(!is_idle_tick(AgentEventKind::OperatorMessage, &h, Some(&h)));
        assert!(!is_idle_tick(AgentEventKind::AgentTick, &h, None));
    }

    #[test]
    fn stuck_guard_counts_and_halts_only_when_enforced() {
        let o = AgentDispatcherOptions::default();
        assert_eq!(next_blocked_turns(2, true), 3);
        assert_eq!(next_blocked_turns(2, false), 0);
        assert!(!stuck_halt_due(2, &o));
        assert!(stuck_halt_due(3, &o));
        let warm = AgentDispatcherOptions {
            enforce_stuck_guard: false,
            ..o
        };
        assert!(!stuck_halt_due(30, &warm));
    }
}
