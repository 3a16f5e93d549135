//! Body of the `event_payload` fuzz target, shared with genesis-core's
//! `tests/fuzz_corpus.rs`: arbitrary bytes → serde_json → the payload checks
//! (`validate_payload`), the plan-input hash of every event kind and the
//! canonical JSON it hashes. Must never panic; a refusal is a typed
//! `CoreError::InvalidArgument` (or the JSON parser's error).

use genesis_core::plan_hash::canonical_json;
use genesis_core::validate::{MAX_EVENT_PAYLOAD_BYTES, validate_payload};
use genesis_core::{AgentEventKind, CoreError, PlanInputHash};
use serde_json::Value;

/// Why an input was refused.
#[derive(Debug)]
pub enum Refusal {
    /// Not JSON at all.
    Json(serde_json::Error),
    /// JSON, but not an acceptable event payload.
    Payload(CoreError),
}

/// Run one input. Checks, for any JSON document: its canonical form parses
/// back and is a fixpoint; the hash is 64 lower-case hex digits, parses as a
/// `PlanInputHash`, and does not depend on key order; a refused payload is
/// `InvalidArgument` naming the field.
pub fn run(data: &[u8]) -> Result<(), Refusal> {
    let value: Value = serde_json::from_slice(data).map_err(Refusal::Json)?;
    let canonical = canonical_json(&value);
    // The canonical text of a parsed value parses back (it nests no deeper
    // than the input did).
    let reparsed: Value = serde_json::from_str(&canonical).expect("canonical JSON parses back");
    // serde_json parses floats without the `float_roundtrip` feature, so a
    // float's shortest text may re-parse to a neighbouring f64: the fixpoint
    // and the text round trip of the hash are only promised without floats.
    let exact = !has_float(&value);
    if exact {
        assert_eq!(
            canonical_json(&reparsed),
            canonical,
            "canonical JSON is not a fixpoint"
        );
    }
    for kind in AgentEventKind::ALL {
        let hash = PlanInputHash::compute(*kind, Some(&value), "ops:0");
        assert_eq!(hash.as_str().len(), 64);
        assert_eq!(
            hash.as_str().parse::<PlanInputHash>().ok().as_ref(),
            Some(&hash)
        );
        assert_eq!(
            PlanInputHash::compute(*kind, Some(&value), "ops:0"),
            hash,
            "hash is not deterministic"
        );
        if exact {
            assert_eq!(
                PlanInputHash::compute(*kind, Some(&reparsed), "ops:0"),
                hash,
                "hash depends on key order"
            );
        }
    }
    match validate_payload("payload", &value, MAX_EVENT_PAYLOAD_BYTES) {
        Ok(()) => Ok(()),
        Err(CoreError::InvalidArgument { field, reason }) => {
            assert_eq!(field, "payload");
            Err(Refusal::Payload(CoreError::InvalidArgument {
                field,
                reason,
            }))
        }
        Err(other) => panic!("validate_payload answered an untyped refusal: {other:?}"),
    }
}

/// Whether any number in `v` is not an integer.
pub fn has_float(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(map) => map.values().any(has_float),
        _ => false,
    }
}
