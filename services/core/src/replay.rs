//! Replays of a recorded turn against another preset (a dry run): which
//! tool calls a replay may answer and how ([`rule_for`]: a read-only tool
//! from the journal, anything with an effect "not executed (replay)"), what
//! a replay ends with ([`ReplayOutcome`], the one shape the pod reports,
//! the supervisor checks and the store keeps beside the original turn) and
//! a replay's lifecycle ([`ReplayStatus`]). Owns no I/O. Must never let a
//! replay reach a tool with an effect: the pod asks [`rule_for`] before it
//! answers any call, and nothing of a replay is ever sent to the
//! supervisor's InvokeTool.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::enums::stored_enum;
use crate::error::CoreError;
use crate::journal::ToolCallStep;
use crate::modes::{CONTROL_TERMINATORS, ToolClass, tool_class};

stored_enum! {
    /// Where a replay is, as `agent_replays.status` stores it.
    ReplayStatus {
        /// Asked for; its message is on the way to a pod.
        Pending => "pending",
        /// A pod claimed it and is running it.
        Running => "running",
        /// Finished: its outcome is kept.
        Done => "done",
        /// Could not be run (its error says why).
        Failed => "failed",
    }
}

/// How long a pod's claim of a replay stands before another pod may take
/// it over (its pod died): twice the standing default wall budget of an
/// episode, so a live replay is never taken from under its pod. A replay
/// is not renewed; one that outlives this is run again by the next claim,
/// and the attempts both paid are kept.
pub const CLAIM_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// What a replayed tool call is answered with, in its result's `replay`
/// field when the tool was not run.
pub const NOT_EXECUTED: &str = "not executed (replay)";

/// What a read-only call the journal does not hold is answered with.
pub const NOT_IN_JOURNAL: &str = "not in the journal (replay)";

/// How a replay answers a call of one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayRule {
    /// A read-only tool: answered with the result the original episode got
    /// for the same call (same name, same arguments), when it made one.
    FromJournal,
    /// Anything else — an artifact record, an escalation, a message, a
    /// self-applying verb, a tool outside the superset: never run.
    NotExecuted,
    /// A control terminator: ends the replayed episode as it ends any.
    Terminator,
}

/// How a replay answers a call of `tool`. Fail-closed: only a tool the
/// superset classes as read-only is answered from the journal.
pub fn rule_for(tool: &str) -> ReplayRule {
    if CONTROL_TERMINATORS.contains(&tool) {
        ReplayRule::Terminator
    } else if tool_class(tool) == Some(ToolClass::ReadOnly) {
        ReplayRule::FromJournal
    } else {
        ReplayRule::NotExecuted
    }
}

/// How one replayed call was actually answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answered {
    /// With the original episode's result of the same call.
    FromJournal,
    /// A read-only call the original episode never made: not run either.
    NotInJournal,
    /// A tool with an effect (or outside the superset): not run.
    NotExecuted,
}

impl Answered {
    /// The wire and display form.
    pub fn as_str(self) -> &'static str {
        match self {
            Answered::FromJournal => "from_journal",
            Answered::NotInJournal => "not_in_journal",
            Answered::NotExecuted => "not_executed",
        }
    }
}

/// Answer a replayed call of `tool` with `arguments`, given the original
/// episode's tool calls: the result handed to the model and how it was
/// found. A terminator is the caller's to handle; it is answered as not
/// executed here should one reach it.
pub fn answer(tool: &str, arguments: &Value, journal: &[ToolCallStep]) -> (Value, Answered) {
    match rule_for(tool) {
        ReplayRule::FromJournal => match journal
            .iter()
            .find(|c| c.tool_name == tool && &c.arguments == arguments)
        {
            Some(c) => (c.result.clone(), Answered::FromJournal),
            None => (
                json!({"replay": NOT_IN_JOURNAL, "tool": tool}),
                Answered::NotInJournal,
            ),
        },
        ReplayRule::NotExecuted | ReplayRule::Terminator => (
            json!({"replay": NOT_EXECUTED, "tool": tool}),
            Answered::NotExecuted,
        ),
    }
}

/// One call the replayed model made, and how it was answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayAction {
    pub tool_name: String,
    pub arguments: Value,
    /// What the model was handed back.
    pub result: Value,
    pub answered: Answered,
}

/// How the replayed episode ended, and what it would have done: the
/// alternative decision shown beside the original turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayOutcome {
    /// How it ended, in the ledger's words (`Complete`, `Blocked`,
    /// `BudgetExhausted:<axis>`, `CreditExhausted`, `Failed`).
    pub end: String,
    /// The terminator's summary, or what stopped it.
    pub reasoning_summary: String,
    pub wait_condition: String,
    /// Why it blocked or failed; empty otherwise.
    pub reason: String,
    /// Every call the model made, in order (terminators excluded).
    pub actions: Vec<ReplayAction>,
    /// LLM turns the replay took.
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The models that served its turns, in order, each once.
    pub served_models: Vec<String>,
}

/// The most actions a replay reports: a turn's tool-call budget is far
/// below this, so more is a malformed report.
pub const MAX_ACTIONS: usize = 256;
/// The most bytes of one reported text field.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;
/// The most bytes of a whole reported outcome's JSON.
pub const MAX_OUTCOME_BYTES: usize = 2 * 1024 * 1024;

impl ReplayOutcome {
    /// Refuse a report that is not one: an end that is no known end, a
    /// text field past its size, too many actions, an action with no tool
    /// name, or an action claiming to have been run. Each refusal names
    /// its field.
    pub fn check(&self) -> Result<(), CoreError> {
        let bad = |field: &str, reason: &str| CoreError::InvalidArgument {
            field: format!("outcome.{field}"),
            reason: reason.into(),
        };
        let known = ["Complete", "Blocked", "CreditExhausted", "Failed"];
        if !known.contains(&self.end.as_str()) && !self.end.starts_with("BudgetExhausted:") {
            return Err(bad(
                "end",
                "must be Complete, Blocked, BudgetExhausted:<axis>, CreditExhausted or Failed",
            ));
        }
        for (field, text) in [
            ("reasoning_summary", &self.reasoning_summary),
            ("wait_condition", &self.wait_condition),
            ("reason", &self.reason),
        ] {
            if text.len() > MAX_TEXT_BYTES {
                return Err(bad(field, "longer than 16 KiB"));
            }
        }
        if self.actions.len() > MAX_ACTIONS {
            return Err(bad("actions", "more than 256 actions"));
        }
        for (i, a) in self.actions.iter().enumerate() {
            if a.tool_name.trim().is_empty() || a.tool_name.len() > 200 {
                return Err(bad(
                    &format!("actions[{i}].tool_name"),
                    "must be 1 to 200 bytes",
                ));
            }
            // The pod's own rule, checked again: a report that says a tool
            // with an effect was answered from the journal is not a replay's.
            if a.answered == Answered::FromJournal
                && rule_for(&a.tool_name) != ReplayRule::FromJournal
            {
                return Err(bad(
                    &format!("actions[{i}].answered"),
                    "only a read-only tool is answered from the journal",
                ));
            }
        }
        if self.served_models.len() > 64 || self.served_models.iter().any(|m| m.len() > 200) {
            return Err(bad(
                "served_models",
                "at most 64 names of at most 200 bytes",
            ));
        }
        Ok(())
    }

    /// Parse and check a reported outcome's JSON.
    pub fn parse(json: &str) -> Result<Self, CoreError> {
        if json.len() > MAX_OUTCOME_BYTES {
            return Err(CoreError::InvalidArgument {
                field: "outcome_json".into(),
                reason: "larger than 2 MiB".into(),
            });
        }
        let outcome: ReplayOutcome =
            serde_json::from_str(json).map_err(|e| CoreError::InvalidArgument {
                field: "outcome_json".into(),
                reason: e.to_string(),
            })?;
        outcome.check()?;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(tool: &str, args: Value, result: Value) -> ToolCallStep {
        ToolCallStep {
            call_id: "inv:1:c1".into(),
            tool_name: tool.into(),
            arguments: args,
            result,
            side_effecting: false,
            blocked: false,
        }
    }

    #[test]
    fn only_read_only_tools_are_answered_from_the_journal() {
        assert_eq!(rule_for("soa_query_telemetry"), ReplayRule::FromJournal);
        assert_eq!(rule_for("agent_query_memory"), ReplayRule::FromJournal);
        for effectful in [
            "soa_send_message",
            "soa_propose_decision",
            "soa_propose_task",
            "compliance_dossier_record",
            "agent_workset_complete",
            "mission_ask_user",
            "no_such_tool",
        ] {
            assert_eq!(rule_for(effectful), ReplayRule::NotExecuted, "{effectful}");
        }
        assert_eq!(rule_for("phase_complete"), ReplayRule::Terminator);
        assert_eq!(rule_for("phase_blocked"), ReplayRule::Terminator);
    }

    #[test]
    fn a_read_only_call_is_answered_with_the_same_calls_result_and_nothing_else() {
        let journal = vec![
            recorded(
                "soa_query_telemetry",
                json!({"window": "1h"}),
                json!({"rows": 3}),
            ),
            recorded(
                "soa_send_message",
                json!({"body": "hi"}),
                json!({"id": "m1"}),
            ),
        ];
        assert_eq!(
            answer("soa_query_telemetry", &json!({"window": "1h"}), &journal),
            (json!({"rows": 3}), Answered::FromJournal)
        );
        let (other, how) = answer("soa_query_telemetry", &json!({"window": "2h"}), &journal);
        assert_eq!(how, Answered::NotInJournal);
        assert_eq!(other["replay"], NOT_IN_JOURNAL);
        // The original message was sent; the replay's is not, even with the
        // same arguments, and is never answered with the original's result.
        let (sent, how) = answer("soa_send_message", &json!({"body": "hi"}), &journal);
        assert_eq!(how, Answered::NotExecuted);
        assert_eq!(
            sent,
            json!({"replay": NOT_EXECUTED, "tool": "soa_send_message"})
        );
    }

    fn outcome() -> ReplayOutcome {
        ReplayOutcome {
            end: "Complete".into(),
            reasoning_summary: "done".into(),
            wait_condition: "the next event".into(),
            reason: String::new(),
            actions: vec![ReplayAction {
                tool_name: "soa_send_message".into(),
                arguments: json!({"body": "hi"}),
                result: json!({"replay": NOT_EXECUTED}),
                answered: Answered::NotExecuted,
            }],
            turns: 2,
            input_tokens: 10,
            output_tokens: 5,
            served_models: vec!["claude-haiku-4-5".into()],
        }
    }

    #[test]
    fn an_outcome_round_trips_and_every_malformed_one_is_refused_by_field() {
        let ok = outcome();
        let text = serde_json::to_string(&ok).unwrap();
        assert_eq!(ReplayOutcome::parse(&text).unwrap(), ok);
        let mut b = ok.clone();
        b.end = "BudgetExhausted:turns".into();
        assert!(b.check().is_ok());

        let field_of = |o: ReplayOutcome| match o.check() {
            Err(CoreError::InvalidArgument { field, .. }) => field,
            other => panic!("expected a refusal, got {other:?}"),
        };
        let mut o = ok.clone();
        o.end = "Deferred".into();
        assert_eq!(field_of(o), "outcome.end");
        let mut o = ok.clone();
        o.reason = "x".repeat(MAX_TEXT_BYTES + 1);
        assert_eq!(field_of(o), "outcome.reason");
        let mut o = ok.clone();
        o.actions[0].tool_name = " ".into();
        assert_eq!(field_of(o), "outcome.actions[0].tool_name");
        let mut o = ok.clone();
        o.actions[0].answered = Answered::FromJournal;
        assert_eq!(field_of(o), "outcome.actions[0].answered");
        let mut o = ok.clone();
        o.actions = vec![ok.actions[0].clone(); MAX_ACTIONS + 1];
        assert_eq!(field_of(o), "outcome.actions");
        match ReplayOutcome::parse("{\"end\":1}") {
            Err(CoreError::InvalidArgument { field, .. }) => assert_eq!(field, "outcome_json"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(ReplayOutcome::parse(&" ".repeat(MAX_OUTCOME_BYTES + 1)).is_err());
    }

    #[test]
    fn statuses_read_as_stored() {
        for s in ["pending", "running", "done", "failed"] {
            assert_eq!(s.parse::<ReplayStatus>().unwrap().as_str(), s);
        }
        assert!("finished".parse::<ReplayStatus>().is_err());
    }
}
