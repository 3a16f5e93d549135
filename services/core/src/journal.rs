//! The episode journal's rules (DESIGN's durable episodes): what a step of
//! an episode is ([`JournalKind`]), how large one episode's journal may grow
//! and how long a journal is kept ([`JournalLimits`], with their documented
//! defaults). Owns no storage and no I/O: the store appends and prunes, the
//! writer of an episode decides what a step holds. Must never hold a
//! credential: a step is stored as the redaction rules leave it.

use std::time::Duration;

use crate::enums::stored_enum;
use crate::error::CoreError;

stored_enum! {
    /// One step of an episode, as `agent_episode_journal.kind` stores it.
    JournalKind {
        /// An LLM turn: the request as sent (redacted), the response as
        /// received, and its attempts.
        LlmTurn => "llm_turn",
        /// A tool call: its name, arguments, the result returned to the
        /// model, and whether it had a side effect.
        ToolCall => "tool_call",
        /// The marker written once, in place of the first step that would
        /// have passed the episode's cap; nothing is journaled after it.
        Truncated => "truncated",
    }
}

/// Default of [`JournalLimits::max_episode_bytes`]: 4 MiB, room for a long
/// episode's prompts and tool results.
pub const DEFAULT_MAX_EPISODE_BYTES: u32 = 4 * 1024 * 1024;
/// Default of [`JournalLimits::retention`]: 30 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The smallest cap accepted: one ordinary step must fit.
pub const MIN_MAX_EPISODE_BYTES: u32 = 16 * 1024;
/// The largest cap accepted (the size of an integer column's reach is far
/// beyond; this bounds what one reclaimed tick reads back).
pub const MAX_MAX_EPISODE_BYTES: u32 = 256 * 1024 * 1024;
/// The shortest retention accepted: a day, so a resumed episode (reclaimed
/// within a lease or a few) always finds its journal.
pub const MIN_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// How much of an episode is journaled and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalLimits {
    /// Bytes of one episode's steps (their JSON text); the first step past
    /// it becomes the [`JournalKind::Truncated`] marker.
    pub max_episode_bytes: u32,
    /// How long a journal is kept after it was written; the ledger turn it
    /// explains is kept forever.
    pub retention: Duration,
}

impl Default for JournalLimits {
    fn default() -> Self {
        JournalLimits {
            max_episode_bytes: DEFAULT_MAX_EPISODE_BYTES,
            retention: DEFAULT_RETENTION,
        }
    }
}

impl JournalLimits {
    /// Refuse limits that would disable the journal or keep it too briefly
    /// for a reclaimed tick to resume from it.
    pub fn check(&self) -> Result<(), CoreError> {
        if !(MIN_MAX_EPISODE_BYTES..=MAX_MAX_EPISODE_BYTES).contains(&self.max_episode_bytes) {
            return Err(CoreError::InvalidArgument {
                field: "journal max episode bytes".into(),
                reason: format!(
                    "must be {MIN_MAX_EPISODE_BYTES}..={MAX_MAX_EPISODE_BYTES}, got {}",
                    self.max_episode_bytes
                ),
            });
        }
        if self.retention < MIN_RETENTION {
            return Err(CoreError::InvalidArgument {
                field: "journal retention".into(),
                reason: format!("must be at least a day, got {} s", self.retention.as_secs()),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_stored_as_the_schema_lists_them() {
        assert_eq!(JournalKind::TEXTS, ["llm_turn", "tool_call", "truncated"]);
        assert_eq!(
            "tool_call".parse::<JournalKind>().ok(),
            Some(JournalKind::ToolCall)
        );
        assert!("ToolCall".parse::<JournalKind>().is_err());
    }

    #[test]
    fn limits_refuse_a_cap_or_retention_that_would_defeat_resuming() {
        assert!(JournalLimits::default().check().is_ok());
        for bad in [
            JournalLimits {
                max_episode_bytes: 0,
                ..Default::default()
            },
            JournalLimits {
                max_episode_bytes: MAX_MAX_EPISODE_BYTES + 1,
                ..Default::default()
            },
            JournalLimits {
                retention: Duration::from_secs(3600),
                ..Default::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
