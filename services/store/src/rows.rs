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
