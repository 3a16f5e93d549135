//! Per-tick budget envelopes and the weekly credit window (spec §3.6, §3.4
//! step 9). Owns the `Limit` axis type, the per-type policy defaults, the
//! three-layer resolution (foundational → mode override → policy default),
//! the consumption check that names the exhausted axis, and the weekly dollar
//! ceiling. Must never read configuration or clocks itself: callers pass the
//! options and `now` in, so every rule stays a pure function.

/// One budget axis: either a finite ceiling or no ceiling at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit<T = u64> {
    /// At most this much.
    Limited(T),
    /// No ceiling (foundational phase).
    Unlimited,
}

impl<T: PartialOrd + Copy> Limit<T> {
    /// True when `used` has reached or passed this ceiling.
    pub fn is_exhausted_by(&self, used: T) -> bool {
        match self {
            Limit::Limited(max) => used >= *max,
            Limit::Unlimited => false,
        }
    }

    /// The finite ceiling, if any.
    pub fn limited(&self) -> Option<T> {
        match self {
            Limit::Limited(v) => Some(*v),
            Limit::Unlimited => None,
        }
    }
}

/// The per-tick envelope the invoker enforces at every loop boundary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetEnvelope {
    /// Total (input + output) tokens across the episode.
    pub max_tokens: Limit,
    /// Output tokens a single LLM turn may produce (the request's max_tokens).
    pub max_output_tokens_per_turn: Limit,
    /// Tool calls across the episode.
    pub max_tool_calls: Limit,
    /// Wall-clock seconds of the episode.
    pub max_wall_seconds: Limit,
    /// Dollars of the episode (computed server-side from usage).
    pub max_dollars: Limit<f64>,
    /// LLM turns of the episode.
    pub max_turns: Limit,
}

impl BudgetEnvelope {
    /// The shared standing-agent default (SOA and Compliance; missions too).
    pub const STANDING_DEFAULT: BudgetEnvelope = BudgetEnvelope {
        max_tokens: Limit::Limited(24_000),
        max_output_tokens_per_turn: Limit::Limited(4_096),
        max_tool_calls: Limit::Limited(12),
        max_wall_seconds: Limit::Limited(300),
        max_dollars: Limit::Limited(1.50),
        max_turns: Limit::Limited(12),
    };

    /// The Prompt Engineer's smaller default: one focused redaction pass.
    pub const PROMPT_REDACTOR_DEFAULT: BudgetEnvelope = BudgetEnvelope {
        max_tokens: Limit::Limited(8_000),
        max_output_tokens_per_turn: Limit::Limited(2_048),
        max_tool_calls: Limit::Limited(6),
        max_wall_seconds: Limit::Limited(120),
        max_dollars: Limit::Limited(0.50),
        max_turns: Limit::Limited(6),
    };
}

crate::enums::stored_enum! {
    /// The axis of a [`BudgetEnvelope`]; the text form is the budget-JSON key.
    BudgetAxis {
        /// [`BudgetEnvelope::max_tokens`].
        Tokens => "maxTokens",
        /// [`BudgetEnvelope::max_output_tokens_per_turn`].
        OutputTokensPerTurn => "maxOutputTokensPerTurn",
        /// [`BudgetEnvelope::max_tool_calls`].
        ToolCalls => "maxToolCalls",
        /// [`BudgetEnvelope::max_wall_seconds`].
        WallSeconds => "maxWallSeconds",
        /// [`BudgetEnvelope::max_dollars`].
        Dollars => "maxDollars",
        /// [`BudgetEnvelope::max_turns`].
        Turns => "maxTurns",
    }
}
