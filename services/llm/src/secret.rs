//! A secret string (API key, OAuth token) whose `Debug` and `Display` never
//! show the value.
//!
//! This module must never offer a way to print the value; the only reader is
//! [`Secret::expose`], used when building the HTTP header.

use serde::{Deserialize, Serialize};

/// A credential value, redacted in every formatted output so presets and
/// errors can be logged safely.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The raw value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when no value is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}
