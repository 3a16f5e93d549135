//! The error vocabulary of the pure domain: every way a core rule can refuse
//! its input. Owns `CoreError` and which catalogue code ([`ErrorCode`]) each
//! refusal carries; genesis-proto maps those onto status codes. Must never carry I/O errors (there is no
//! I/O in this crate) nor depend on any transport type.

use thiserror::Error;

use crate::error_code::{Coded, ErrorCode};

/// Every refusal the domain rules can produce. Each variant names exactly what
/// was wrong so the edge can return a field-level `INVALID_ARGUMENT` without
/// re-deriving the reason.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CoreError {
    /// A stored or supplied string is not a member of a closed enumeration.
    #[error("unknown {kind} value {value:?}{}", expected_list(.expected))]
    UnknownEnum {
        /// The enumeration's name, e.g. `AgentType`.
        kind: &'static str,
        /// The rejected text, verbatim.
        value: String,
        /// The text forms it accepts, so the message tells the caller what
        /// to send instead (empty: not listed).
        expected: &'static [&'static str],
    },
    /// An input field breaks a shared limit or shape rule.
    #[error("invalid argument {field}: {reason}")]
    InvalidArgument {
        /// The offending field, as the caller named it.
        field: String,
        /// Why it was refused, in words an operator can act on.
        reason: String,
    },
    /// A `system_configs` (or options) value could not be applied.
    #[error("invalid config value {value:?} for {key}: {reason}")]
    InvalidConfig {
        /// The configuration key, e.g. `AgentDispatcher:TickMaxTokens`.
        key: String,
        /// The rejected value, verbatim.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// A mode's budget override JSON is malformed or carries a bad axis.
    #[error("invalid budget override: {reason}")]
    InvalidBudgetJson {
        /// Why the JSON was refused.
        reason: String,
    },
    /// A mode name that is not in the agent type's catalogue.
    #[error("unknown mode {mode:?} for agent type {agent_type}")]
    UnknownMode {
        /// The agent type whose catalogue was searched.
        agent_type: crate::enums::AgentType,
        /// The mode name that was not found.
        mode: String,
    },
    /// A mode toolset grants a tool outside the type's superset: the resolve
    /// fails closed rather than authorising it.
    #[error("mode {mode:?} grants tool {tool:?} outside the agent type's tool superset")]
    ToolOutsideSuperset {
        /// The mode whose toolset leaked.
        mode: String,
        /// The out-of-superset tool.
        tool: String,
    },
    /// A call-site id that the static registry does not know.
    #[error("unknown LLM call-site {site:?}")]
    UnknownSite {
        /// The unknown site id.
        site: String,
    },
    /// A `GENESIS_DEFAULT_PROVIDER` outside `anthropic|openai|scripted`.
    #[error("unknown default provider {provider:?} (expected anthropic, openai or scripted)")]
    UnknownDefaultProvider {
        /// The refused spelling.
        provider: String,
    },
}

/// The "(expected one of …)" tail of an unknown-enum message; nothing when
/// the accepted forms are not listed.
fn expected_list(expected: &[&str]) -> String {
    if expected.is_empty() {
        String::new()
    } else {
        format!(" (expected one of {})", expected.join(", "))
    }
}

impl CoreError {
    /// This error's code in the catalogue ([`ErrorCode`]). The codes are
    /// part of the wire contract and never change once published.
    pub fn code(&self) -> ErrorCode {
        match self {
            CoreError::UnknownEnum { .. } => ErrorCode::UnknownEnum,
            CoreError::InvalidArgument { .. } => ErrorCode::InvalidArgument,
            CoreError::InvalidConfig { .. } => ErrorCode::InvalidConfig,
            CoreError::InvalidBudgetJson { .. } => ErrorCode::InvalidBudgetJson,
            CoreError::UnknownMode { .. } => ErrorCode::UnknownMode,
            CoreError::ToolOutsideSuperset { .. } => ErrorCode::ToolOutsideSuperset,
            CoreError::UnknownSite { .. } => ErrorCode::UnknownSite,
            CoreError::UnknownDefaultProvider { .. } => ErrorCode::UnknownDefaultProvider,
        }
    }

    /// Shorthand for an [`CoreError::InvalidArgument`].
    pub fn invalid_argument(field: impl Into<String>, reason: impl Into<String>) -> Self {
        CoreError::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl Coded for CoreError {
    fn code(&self) -> ErrorCode {
        CoreError::code(self)
    }

    /// A field refusal reads `field: reason`; every other refusal is its
    /// own text (the status mapping puts the code in front).
    fn public_message(&self) -> String {
        match self {
            CoreError::InvalidArgument { field, reason } => format!("{field}: {reason}"),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enums::AgentType;

    #[test]
    fn every_variant_has_a_distinct_stable_code() {
        let all = [
            CoreError::UnknownEnum {
                kind: "AgentType",
                value: "x".into(),
                expected: &[],
            },
            CoreError::invalid_argument("f", "r"),
            CoreError::InvalidConfig {
                key: "k".into(),
                value: "v".into(),
                reason: "r".into(),
            },
            CoreError::InvalidBudgetJson { reason: "r".into() },
            CoreError::UnknownMode {
                agent_type: AgentType::Soa,
                mode: "m".into(),
            },
            CoreError::ToolOutsideSuperset {
                mode: "m".into(),
                tool: "t".into(),
            },
            CoreError::UnknownSite { site: "s".into() },
            CoreError::UnknownDefaultProvider {
                provider: "p".into(),
            },
        ];
        let codes: std::collections::BTreeSet<_> = all.iter().map(CoreError::code).collect();
        assert_eq!(codes.len(), all.len());
        assert_eq!(all[0].code().as_str(), "UNKNOWN_ENUM");
        assert_eq!(all[5].code().as_str(), "TOOL_OUTSIDE_SUPERSET");
    }

    #[test]
    fn display_names_the_offending_value() {
        let e = CoreError::UnknownEnum {
            kind: "AgentType",
            value: "Bogus".into(),
            expected: &[],
        };
        assert_eq!(e.to_string(), "unknown AgentType value \"Bogus\"");
        let e = CoreError::UnknownEnum {
            kind: "TenantStatus",
            value: "Active".into(),
            expected: &["active", "suspended"],
        };
        assert_eq!(
            e.to_string(),
            "unknown TenantStatus value \"Active\" (expected one of active, suspended)"
        );
        let e = CoreError::invalid_argument("body", "too long");
        assert_eq!(e.to_string(), "invalid argument body: too long");
    }
}
