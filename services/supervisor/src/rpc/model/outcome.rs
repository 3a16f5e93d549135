//! A reported tick outcome's completion as genesis-core's [`Completion`]:
//! the wire enum with its budget axis (under the wire's and the budget
//! JSON's spellings) or its reason. Owns the INVALID_ARGUMENT answers of
//! `outcome.completion` and `outcome.budget_axis`.

use genesis_core::BudgetAxis;
use genesis_core::mapper::Completion;
use genesis_proto::convert::invalid_argument as inv;
use genesis_proto::v1 as pb;
use tonic::Status;

/// The outcome's completion, with its budget axis or reason.
pub(super) fn completion(outcome: &pb::TickOutcome) -> Result<Completion, Status> {
    Ok(match pb::TickCompletion::try_from(outcome.completion) {
        Ok(pb::TickCompletion::Complete) => Completion::Complete,
        Ok(pb::TickCompletion::Blocked) => Completion::Blocked,
        Ok(pb::TickCompletion::ShortCircuited) => Completion::ShortCircuited,
        Ok(pb::TickCompletion::CreditExhausted) => Completion::CreditExhausted,
        Ok(pb::TickCompletion::BudgetExhausted) => {
            let axis = outcome.budget_axis.as_deref().unwrap_or_default();
            Completion::BudgetExhausted {
                axis: parse_axis(axis).ok_or_else(|| {
                    inv(
                        "outcome.budget_axis",
                        format!("unknown budget axis {axis:?}"),
                    )
                })?,
            }
        }
        Ok(pb::TickCompletion::Failed) => Completion::Failed {
            reason: outcome.reason.clone(),
        },
        Ok(pb::TickCompletion::ProviderFailed) => Completion::ProviderFailed {
            reason: outcome.reason.clone(),
        },
        Ok(pb::TickCompletion::Unspecified) | Err(_) => {
            return Err(inv(
                "outcome.completion",
                "must be set to a known completion",
            ));
        }
    })
}

fn parse_axis(text: &str) -> Option<BudgetAxis> {
    match text {
        "tokens" | "maxTokens" => Some(BudgetAxis::Tokens),
        "tool_calls" | "maxToolCalls" => Some(BudgetAxis::ToolCalls),
        "wall_ms" | "wall_seconds" | "maxWallSeconds" => Some(BudgetAxis::WallSeconds),
        "cost_usd" | "dollars" | "maxDollars" => Some(BudgetAxis::Dollars),
        "turns" | "maxTurns" => Some(BudgetAxis::Turns),
        "output_tokens_per_turn" | "maxOutputTokensPerTurn" => {
            Some(BudgetAxis::OutputTokensPerTurn)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_axes_accept_wire_and_json_spellings() {
        assert_eq!(parse_axis("tokens"), Some(BudgetAxis::Tokens));
        assert_eq!(parse_axis("maxTurns"), Some(BudgetAxis::Turns));
        assert_eq!(parse_axis("wall_ms"), Some(BudgetAxis::WallSeconds));
        assert_eq!(parse_axis("bogus"), None);
    }
}
