//! Row decoding shared by the repositories: rows are read as `to_jsonb(row)`
//! and deserialised with serde, so one struct definition serves plain
//! queries and the server-side tick functions alike. Must never be used for
//! input validation: it only trusts rows the schema already constrained.

use serde::de::DeserializeOwned;

use crate::error::StoreError;

/// Decode one `to_jsonb` row.
pub(crate) fn decode<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, StoreError> {
    serde_json::from_value(value).map_err(StoreError::from)
}

/// `name` when it is a plain lower-case identifier (letters, digits,
/// underscores, not starting with a digit, at most the 63 bytes PostgreSQL
/// keeps), quoted; anything else is refused, naming `what`, before it
/// reaches the server. The one check for the few statements that must name
/// a table, role or database they cannot bind as a parameter; quoting a
/// plain lower-case name names the same object as leaving it bare.
pub(crate) fn quoted_identifier(what: &str, name: &str) -> Result<String, StoreError> {
    let plain = !name.is_empty()
        && name.len() <= 63
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        Ok(format!("\"{name}\""))
    } else {
        Err(StoreError::invalid(
            what,
            "must be a plain lower-case identifier",
        ))
    }
}

/// Decode a list of `to_jsonb` rows.
pub(crate) fn decode_all<T: DeserializeOwned>(
    values: Vec<serde_json::Value>,
) -> Result<Vec<T>, StoreError> {
    values.into_iter().map(decode).collect()
}

/// Refuse an empty or oversized text field before it reaches the database.
pub(crate) fn check_text(field: &str, value: &str, max: usize) -> Result<(), StoreError> {
    if value.trim().is_empty() {
        return Err(StoreError::invalid(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(StoreError::invalid(
            field,
            format!("must be at most {max} bytes, got {}", value.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_with_an_unknown_phase_is_a_decode_error_naming_the_column() {
        let row = serde_json::json!({
            "id": uuid::Uuid::nil(), "tenant_id": uuid::Uuid::nil(), "agent_type": "Soa",
            "status": "active", "active_mode": null, "phase": "idle:napping",
            "next_tick_at": null, "consecutive_idle_ticks": 0, "consecutive_blocked_turns": 0,
            "idle_ticks_since_replan": 0, "plan_input_hash": null, "last_decision_kind": null,
            "is_building_starting_workset": false, "workset_deadline_utc": null,
            "lease_session": null, "lease_expires_at": null, "call_site_id": null,
            "created_at": "2026-12-01T00:00:00Z", "updated_at": "2026-12-01T00:00:00Z"
        });
        match decode::<crate::InstanceRow>(row) {
            Err(StoreError::Database(message)) => {
                assert!(message.contains("column phase"), "{message}");
                assert!(message.contains("idle:napping"), "{message}");
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
    }

    #[test]
    fn only_plain_identifiers_are_quoted() {
        assert_eq!(
            quoted_identifier("table", "agent_state_ledger").as_deref(),
            Ok("\"agent_state_ledger\"")
        );
        let long = "a".repeat(64);
        for bad in [
            "",
            "1x",
            "a;b",
            "Agent",
            "a b",
            "a\"b",
            "pg_catalog.pg_class",
            long.as_str(),
        ] {
            assert!(quoted_identifier("table", bad).is_err(), "{bad}");
        }
    }
}
