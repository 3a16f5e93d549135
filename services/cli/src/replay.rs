//! `agent replay` and `agent replay-show` for people: the original turn and
//! its replay against another preset side by side — how each ended, its
//! summary, and each action, the replay's with how it was answered (from
//! the journal, not executed, not in the journal) — then what the replay
//! cost. Pure text formatting: this module must never do I/O (the command
//! polls; this only says whether to go on).

use std::fmt::Write as _;
use std::time::Duration;

use genesis_proto::v1;

use crate::table::{fold_lines, render_table, truncate};
use crate::trace::cut;

/// How often `agent replay` asks after a replay it waits for.
pub const POLL: Duration = Duration::from_millis(500);

/// Longest cell of the actions table.
const MAX_CELL: usize = 60;

/// Whether the replay is still to finish (pending or running).
pub fn running(r: &v1::TurnReplay) -> bool {
    matches!(r.status.as_str(), "pending" | "running")
}

fn cell(text: &str) -> String {
    truncate(&fold_lines(text), MAX_CELL)
}

/// The replay beside its original turn, as text.
pub fn render(r: &v1::TurnReplay) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Replay {} of turn {} of {} against preset {}: {}",
        r.id, r.turn_number, r.instance_id, r.preset_id, r.status
    );
    if !r.error.is_empty() {
        let _ = writeln!(out, "Error: {}", cut(&r.error));
    }
    let _ = writeln!(
        out,
        "Cost: ${:.4} in {} attempt(s), recorded under the call tag Replay (tenant credit; not the agent's turns)",
        r.cost_usd, r.attempts
    );
    let original = r.original.clone().unwrap_or_default();
    let alternative = r.alternative.clone();
    out.push('\n');
    let rows = vec![
        vec![
            "ended".to_owned(),
            cell(&original.decision_kind),
            alternative.as_ref().map_or("-".into(), |a| cell(&a.end)),
        ],
        vec![
            "summary".to_owned(),
            cell(&original.reasoning_summary),
            alternative
                .as_ref()
                .map_or("-".into(), |a| cell(&a.reasoning_summary)),
        ],
        vec![
            "model".to_owned(),
            cell(&original.served_model),
            alternative
                .as_ref()
                .map_or("-".into(), |a| cell(&a.served_models.join(", "))),
        ],
        vec![
            "actions".to_owned(),
            original.actions.len().to_string(),
            alternative
                .as_ref()
                .map_or("-".into(), |a| a.actions.len().to_string()),
        ],
    ];
    out.push_str(&render_table(&["", "ORIGINAL", "REPLAY"], &rows));
    out.push_str("\nOriginal actions:\n");
    let rows: Vec<Vec<String>> = original
        .actions
        .iter()
        .map(|a| {
            vec![
                cell(&a.tool_name),
                cell(&a.arguments_json),
                cell(&a.result_json),
            ]
        })
        .collect();
    if rows.is_empty() {
        out.push_str("  (none)\n");
    } else {
        out.push_str(&render_table(&["TOOL", "ARGUMENTS", "RESULT"], &rows));
    }
    out.push_str("\nReplay actions (nothing with an effect was run):\n");
    match &alternative {
        None if running(r) => out.push_str("  (not finished)\n"),
        None => out.push_str("  (none)\n"),
        Some(a) if a.actions.is_empty() => out.push_str("  (none)\n"),
        Some(a) => {
            let rows: Vec<Vec<String>> = a
                .actions
                .iter()
                .map(|x| {
                    vec![
                        cell(&x.tool_name),
                        cell(&x.arguments_json),
                        x.answered.clone(),
                    ]
                })
                .collect();
            out.push_str(&render_table(&["TOOL", "ARGUMENTS", "ANSWERED"], &rows));
        }
    }
    if let Some(a) = &alternative {
        let _ = writeln!(
            out,
            "\nReplay used {} turn(s), {} input and {} output tokens.",
            a.turns, a.input_tokens, a.output_tokens
        );
        if !a.reason.is_empty() {
            let _ = writeln!(out, "Reason: {}", cut(&a.reason));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replay(status: &str) -> v1::TurnReplay {
        v1::TurnReplay {
            id: "r1".into(),
            instance_id: "i1".into(),
            turn_number: 2,
            preset_id: "p2".into(),
            status: status.into(),
            original: Some(v1::LedgerTurn {
                decision_kind: "ActedWithTool".into(),
                reasoning_summary: "greeted".into(),
                served_model: "claude-sonnet-4-5".into(),
                actions: vec![v1::ActionRecord {
                    tool_name: "soa_send_message".into(),
                    arguments_json: "{\"body\":\"hi\"}".into(),
                    result_json: "{\"id\":\"m1\"}".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            cost_usd: 0.0123,
            attempts: 2,
            ..Default::default()
        }
    }

    #[test]
    fn a_finished_replay_is_shown_beside_the_original_with_each_answer() {
        let mut r = replay("done");
        r.alternative = Some(v1::ReplayAlternative {
            end: "Complete".into(),
            reasoning_summary: "would greet briefly".into(),
            served_models: vec!["claude-haiku-4-5".into()],
            actions: vec![v1::ReplayedAction {
                tool_name: "soa_send_message".into(),
                arguments_json: "{\"body\":\"hello\"}".into(),
                result_json: "{}".into(),
                answered: "not_executed".into(),
            }],
            turns: 2,
            ..Default::default()
        });
        let text = render(&r);
        assert!(text.contains("against preset p2: done"), "{text}");
        assert!(text.contains("$0.0123 in 2 attempt(s)"), "{text}");
        assert!(
            text.contains("ActedWithTool") && text.contains("Complete"),
            "{text}"
        );
        assert!(text.contains("claude-haiku-4-5"), "{text}");
        assert!(text.contains("not_executed"), "{text}");
        assert!(!running(&r));
    }

    #[test]
    fn a_pending_replay_says_it_has_not_finished_and_a_failed_one_why() {
        let r = replay("pending");
        assert!(running(&r));
        assert!(render(&r).contains("(not finished)"));
        let mut f = replay("failed");
        f.error = "No LLM couple is usable".into();
        let text = render(&f);
        assert!(!running(&f));
        assert!(text.contains("Error: No LLM couple is usable"), "{text}");
    }
}
