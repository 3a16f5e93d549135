//! `agent trace` for people: one ledger turn's episode as sections — the
//! turn's header, the budget it used per axis, how its decision was mapped
//! to actions, then each journal step in order (an LLM turn's request
//! messages, its answer and its attempts table; a tool call's arguments
//! and result) — with long texts cut and marked (`--output json` prints the
//! whole trace instead, uncut).
//!
//! Pure text formatting: this module must never do I/O. Every text it
//! returns goes through the printer, which strips terminal controls.

use std::fmt::Write as _;

use genesis_proto::v1;

use crate::table::{fold_lines, local_instant, render_table};

/// Longest message or result text shown in full; longer ones are cut.
pub const MAX_TEXT: usize = 400;
/// Longest cell of the attempts and mapping tables.
const MAX_CELL: usize = 80;

/// The trace as sections of text.
pub fn render(t: &v1::AgentTrace) -> String {
    let mut out = String::new();
    let turn = t.turn.clone().unwrap_or_default();
    let _ = writeln!(
        out,
        "Turn {} of {}",
        turn.turn_number,
        or_dash(&turn.instance_id)
    );
    let at = turn
        .created_at
        .as_ref()
        .and_then(|ts| chrono::DateTime::from_timestamp(ts.seconds, 0))
        .and_then(|d| local_instant(&d.to_rfc3339()))
        .unwrap_or_else(|| "-".into());
    let model = match (turn.requested_model.as_str(), turn.served_model.as_str()) {
        ("", "") => "-".to_owned(),
        (r, s) if r == s || r.is_empty() => s.to_owned(),
        (r, s) => format!("{r} -> {}", or_dash(s)),
    };
    let rows = [
        ("created", at),
        (
            "event",
            format!("{} ({})", turn.event_kind, or_dash(&turn.event_id)),
        ),
        ("decision", turn.decision_kind.clone()),
        ("phase", or_dash(&turn.phase)),
        ("mode", or_dash(&turn.active_mode)),
        ("completion", or_dash(&t.completion)),
        ("budget axis", or_dash(&t.budget_axis)),
        ("end reason", or_dash(&t.end_reason)),
        ("model", model),
        (
            "tokens",
            format!("{} in / {} out", turn.input_tokens, turn.output_tokens),
        ),
        ("cost", usd(Some(turn.cost_usd))),
        ("summary", or_dash(&cut(&turn.reasoning_summary))),
    ];
    out.push_str(&indent(&render_table(
        &["", ""],
        &rows
            .iter()
            .map(|(k, v)| vec![(*k).to_owned(), fold_lines(v)])
            .collect::<Vec<_>>(),
    )));

    out.push_str("\nBudget used\n");
    let c = t.consumption.unwrap_or_default();
    out.push_str(&indent(&render_table(
        &["AXIS", "USED"],
        &[
            vec!["tokens".into(), c.tokens.to_string()],
            vec!["tool calls".into(), c.tool_calls.to_string()],
            vec!["turns".into(), c.turns.to_string()],
            vec!["wall".into(), format!("{} ms", c.wall_ms)],
        ],
    )));

    out.push_str("\nDecision mapping\n");
    if turn.actions.is_empty() {
        out.push_str("  no actions\n");
    } else {
        let rows: Vec<Vec<String>> = turn
            .actions
            .iter()
            .map(|a| {
                vec![
                    a.tool_name.clone(),
                    yes_no(a.side_effecting),
                    yes_no(a.blocked),
                    cell(&a.arguments_json),
                    cell(&a.result_json),
                ]
            })
            .collect();
        out.push_str(&indent(&render_table(
            &["TOOL", "SIDE EFFECT", "BLOCKED", "ARGUMENTS", "RESULT"],
            &rows,
        )));
    }

    if !t.system_prompt.is_empty() {
        out.push_str("\nSystem prompt\n");
        out.push_str(&indent(&cut(&t.system_prompt)));
        out.push('\n');
    }

    out.push_str("\nSteps\n");
    if t.journal_pruned {
        out.push_str(
            "  No journal for this turn: it was pruned after its retention, or never \
             written. The ledger turn above is what is kept.\n",
        );
    }
    for s in &t.steps {
        use v1::trace_step::Step;
        match &s.step {
            Some(Step::LlmTurn(l)) => llm_turn(&mut out, s.seq, l),
            Some(Step::ToolCall(c)) => {
                let mut flags = Vec::new();
                if c.side_effecting {
                    flags.push("side effect");
                }
                if c.blocked {
                    flags.push("blocked");
                }
                let _ = writeln!(
                    out,
                    "\n[{}] Tool call {} ({}){}",
                    s.seq,
                    c.tool_name,
                    c.call_id,
                    if flags.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", flags.join(", "))
                    }
                );
                let _ = writeln!(out, "    arguments  {}", cut(&c.arguments_json));
                let _ = writeln!(out, "    result     {}", cut(&c.result_json));
            }
            Some(Step::UnreadableJson(raw)) => {
                let _ = writeln!(out, "\n[{}] Unreadable step: {}", s.seq, cut(raw));
            }
            None => {}
        }
    }
    if let Some(x) = &t.truncated {
        let _ = writeln!(
            out,
            "\nJournal truncated at its cap of {} bytes ({} journaled): the next {} step \
             ({} bytes) and everything after it were not journaled.",
            x.max_bytes, x.journal_bytes, x.dropped_kind, x.dropped_bytes
        );
    }
    out
}

fn llm_turn(out: &mut String, seq: i32, l: &v1::TraceLlmTurn) {
    let _ = writeln!(
        out,
        "\n[{seq}] LLM turn {} ({} -> {}, stop {})",
        l.turn,
        l.model,
        or_dash(&l.served_model),
        or_dash(&l.stop_reason)
    );
    out.push_str("  Request\n");
    for m in &l.messages {
        message(out, m);
    }
    out.push_str("  Response\n");
    if !l.error.is_empty() {
        let _ = writeln!(out, "    error: {}", cut(&l.error));
    }
    if !l.text.is_empty() {
        let _ = writeln!(out, "    text: {}", cut(&l.text));
    }
    for c in &l.tool_calls {
        let _ = writeln!(
            out,
            "    tool call {} {} {}",
            c.id,
            c.name,
            cut(&c.arguments_json)
        );
    }
    if let Some(u) = &l.usage {
        let _ = writeln!(
            out,
            "    tokens: {} in / {} out",
            u.input_tokens, u.output_tokens
        );
    }
    out.push_str("  Attempts\n");
    let rows: Vec<Vec<String>> = l
        .attempts
        .iter()
        .map(|a| {
            let u = a.usage.unwrap_or_default();
            vec![
                a.provider.clone(),
                a.requested_model.clone(),
                or_dash(&a.served_model),
                a.outcome.clone(),
                format!("{} ms", a.latency_ms),
                format!("{}/{}", u.input_tokens, u.output_tokens),
                usd(a.cost_usd),
                if a.error.is_empty() {
                    "-".into()
                } else {
                    cell(&a.error)
                },
            ]
        })
        .collect();
    out.push_str(&indent(&indent(&render_table(
        &[
            "PROVIDER",
            "REQUESTED",
            "SERVED",
            "OUTCOME",
            "LATENCY",
            "TOKENS",
            "COST",
            "ERROR",
        ],
        &rows,
    ))));
}

fn message(out: &mut String, m: &v1::TraceMessage) {
    let who = if m.tool_call_id.is_empty() {
        m.role.clone()
    } else {
        format!("{} ({})", m.role, m.tool_call_id)
    };
    let _ = writeln!(out, "    {who}: {}", cut(&m.content));
    for c in &m.tool_calls {
        let _ = writeln!(
            out,
            "      tool call {} {} {}",
            c.id,
            c.name,
            cut(&c.arguments_json)
        );
    }
}

/// Text cut at [`MAX_TEXT`] characters, the cut marked with how much more
/// there is and where to read it.
pub fn cut(text: &str) -> String {
    let n = text.chars().count();
    if n <= MAX_TEXT {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(MAX_TEXT).collect();
    let _ = write!(s, "… [cut: {} more chars; -o json shows all]", n - MAX_TEXT);
    s
}

/// One table cell: one line, at most [`MAX_CELL`] characters.
fn cell(text: &str) -> String {
    crate::table::truncate(&fold_lines(text), MAX_CELL)
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else {
                format!("  {l}\n")
            }
        })
        .collect()
}

fn or_dash(s: &str) -> String {
    if s.trim().is_empty() {
        "-".into()
    } else {
        s.to_owned()
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// A priced amount, or `unknown` when it could not be matched (never 0).
fn usd(v: Option<f64>) -> String {
    match v {
        Some(v) => format!("${v:.4}"),
        None => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> v1::AgentTrace {
        let attempt =
            |provider: &str, outcome: &str, cost: Option<f64>, error: &str| v1::TraceAttempt {
                provider: provider.into(),
                requested_model: "m".into(),
                served_model: if error.is_empty() {
                    "m".into()
                } else {
                    String::new()
                },
                outcome: outcome.into(),
                latency_ms: 40,
                cost_usd: cost,
                error: error.into(),
                ..Default::default()
            };
        v1::AgentTrace {
            turn: Some(v1::LedgerTurn {
                turn_number: 4,
                instance_id: "inst".into(),
                decision_kind: "ActedWithTool".into(),
                cost_usd: 0.03,
                ..Default::default()
            }),
            completion: "completed".into(),
            consumption: Some(v1::Consumption {
                tokens: 360,
                tool_calls: 1,
                turns: 3,
                wall_ms: 1500,
            }),
            system_prompt: "be brief".into(),
            steps: vec![
                v1::TraceStep {
                    seq: 0,
                    created_at: None,
                    step: Some(v1::trace_step::Step::LlmTurn(v1::TraceLlmTurn {
                        turn: 1,
                        model: "m".into(),
                        messages: vec![v1::TraceMessage {
                            role: "user".into(),
                            content: format!("{}TAIL", "x".repeat(1000)),
                            ..Default::default()
                        }],
                        attempts: vec![
                            attempt("anthropic", "server_error", Some(0.0), "HTTP 529"),
                            attempt("openai", "success", None, ""),
                        ],
                        ..Default::default()
                    })),
                },
                v1::TraceStep {
                    seq: 1,
                    created_at: None,
                    step: Some(v1::trace_step::Step::ToolCall(v1::TraceToolCall {
                        call_id: "c1".into(),
                        tool_name: "soa_send_message".into(),
                        arguments_json: "{\"message\":\"hi\"}".into(),
                        result_json: "{\"ok\":true}".into(),
                        side_effecting: true,
                        blocked: false,
                    })),
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn sections_show_the_turn_budget_steps_and_attempts() {
        let text = render(&trace());
        assert!(text.starts_with("Turn 4 of inst\n"), "{text}");
        for part in [
            "completion   completed",
            "Budget used",
            "turns       3",
            "System prompt",
            "[0] LLM turn 1",
            "PROVIDER   REQUESTED  SERVED  OUTCOME       LATENCY  TOKENS  COST     ERROR",
            "anthropic  m          -       server_error  40 ms    0/0     $0.0000  HTTP 529",
            "openai     m          m       success       40 ms    0/0     unknown  -",
            "[1] Tool call soa_send_message (c1) [side effect]",
            "result     {\"ok\":true}",
        ] {
            assert!(text.contains(part), "{part:?} missing in\n{text}");
        }
        // The long message is cut, and says so.
        assert!(!text.contains("TAIL"), "{text}");
        assert!(text.contains("[cut: 604 more chars; -o json shows all]"));
    }

    #[test]
    fn a_pruned_journal_is_said_so() {
        let t = v1::AgentTrace {
            journal_pruned: true,
            ..trace()
        };
        let t = v1::AgentTrace { steps: vec![], ..t };
        assert!(render(&t).contains("No journal for this turn"));
    }
}
