//! `genesisctl watch`: the live terminal view of a tenant's turns and chat
//! messages over the `WatchTurns` server stream. One line per turn (local
//! time, short instance id, agent type, event kind, decision kind, mode,
//! phase, tokens, cost, served model, reasoning summary cut to fit) and one
//! per message (`→ operator: ...` for what the operator said, `← agent: ...`
//! for what the agent said); with `--output json`, one JSON object per
//! stream event and line.
//!
//! The stream has no deadline (it lives until the operator stops it, or
//! `--count` / `--until-decision` is met). This module only reads: it must
//! never call anything that changes state.

use std::collections::HashMap;

use chrono::{DateTime, Local};
use genesis_core::AgentDecisionKind;
use genesis_proto::v1;
use genesis_proto::v1::watch_turns_event::Event;

use crate::cli::{Output, WatchArgs};
use crate::commands::Ctx;
use crate::error::CliError;
use crate::table::{fold_lines, truncate};
use crate::validate::opt_uuid;

/// Characters of the reasoning summary shown on a turn line.
pub const SUMMARY_CHARS: usize = 80;

/// Characters of an instance id shown on a line (the UUID's first group).
pub const SHORT_ID: usize = 8;

fn short_id(id: &str) -> &str {
    id.get(..SHORT_ID).unwrap_or(id)
}

fn local_time(at: Option<&prost_types::Timestamp>) -> String {
    at.and_then(|ts| {
        let nanos = u32::try_from(ts.nanos).ok()?;
        DateTime::from_timestamp(ts.seconds, nanos)
    })
    .map(|at| at.with_timezone(&Local))
    .unwrap_or_else(Local::now)
    .format("%H:%M:%S")
    .to_string()
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() { "-" } else { text }
}

/// The line of one turn. `agent_type` is looked up by the caller (the
/// stream's TurnEvent does not carry it); `?` when unknown.
pub fn turn_line(turn: &v1::TurnEvent, agent_type: &str) -> String {
    let summary = truncate(&fold_lines(turn.reasoning_summary.trim()), SUMMARY_CHARS);
    let mut line = format!(
        "{}  {}  {}  {}  {}  mode={}  phase={}  tokens={}  ${:.4}  {}",
        local_time(turn.created_at.as_ref()),
        short_id(&turn.instance_id),
        or_dash(agent_type),
        or_dash(&turn.event_kind),
        or_dash(&turn.decision_kind),
        or_dash(&turn.mode),
        or_dash(&turn.phase),
        turn.tokens,
        turn.cost_usd,
        or_dash(&turn.served_model),
    );
    if !summary.is_empty() {
        line.push_str("  ");
        line.push_str(&summary);
    }
    line
}

/// The line of one chat message: the arrow and label name the speaker.
pub fn message_line(message: &v1::AgentMessage) -> String {
    let speaker = match message.direction.as_str() {
        "operator_to_agent" => "→ operator:".to_owned(),
        "agent_to_operator" => "← agent:".to_owned(),
        other => format!("· {}:", or_dash(other)),
    };
    format!(
        "{}  {}  {} {}",
        local_time(message.created_at.as_ref()),
        short_id(&message.instance_id),
        speaker,
        fold_lines(message.body.trim())
    )
}

/// The `--until-decision` kind: one of the known AgentDecisionKind names
/// (an unknown name could never match and would wait forever).
pub fn until_decision(value: &str) -> Result<AgentDecisionKind, CliError> {
    match value.parse::<AgentDecisionKind>() {
        Ok(kind) if kind.is_known() => Ok(kind),
        _ => {
            let known: Vec<&str> = AgentDecisionKind::KNOWN
                .iter()
                .map(|k| k.as_str())
                .collect();
            Err(CliError::usage(format!(
                "--until-decision: unknown decision kind {value:?} (expected one of {})",
                known.join(", ")
            )))
        }
    }
}

/// Runs `watch` until the stream ends or a stop condition is met.
pub async fn run(ctx: &mut Ctx<'_>, args: &WatchArgs) -> Result<(), CliError> {
    let tenant_id = ctx.tenant("watch")?;
    let instance_id = opt_uuid("--instance", args.instance.as_deref())?;
    let until = args
        .until_decision
        .as_deref()
        .map(until_decision)
        .transpose()?;
    let request = v1::WatchTurnsRequest {
        tenant_id: tenant_id.clone(),
        instance_id,
    };
    let mut stream = ctx
        .conn()
        .await?
        .agents_streaming()
        .watch_turns(request)
        .await?
        .into_inner();
    // The stream is open and subscribed from here on: say so on stderr
    // (stdout stays the turn lines), so a script can start its story
    // after this line and miss no turn.
    eprintln!("watching tenant {tenant_id}: turns and messages from now on");
    let mut agent_types: HashMap<String, String> = HashMap::new();
    let mut seen: u64 = 0;
    while let Some(item) = stream.message().await? {
        let Some(event) = &item.event else { continue };
        if ctx.out.format() == Output::Json {
            ctx.out.json(&crate::json::to_json(&item)?)?;
        }
        match event {
            Event::Message(m) => {
                if let (Output::Table, Some(message)) = (ctx.out.format(), &m.message) {
                    ctx.out.text(&message_line(message))?;
                }
            }
            Event::Turn(turn) => {
                if ctx.out.format() == Output::Table {
                    let agent_type =
                        agent_type(ctx, &mut agent_types, &tenant_id, &turn.instance_id).await;
                    ctx.out.text(&turn_line(turn, &agent_type))?;
                }
                seen += 1;
                if until
                    .as_ref()
                    .is_some_and(|kind| kind.as_str() == turn.decision_kind)
                {
                    return Ok(());
                }
                if args.count.is_some_and(|n| seen >= n) {
                    return Ok(());
                }
            }
        }
    }
    if let Some(kind) = &until {
        return Err(CliError::StreamEnded(format!(
            "after {seen} turns without a {kind} turn"
        )));
    }
    if let Some(wanted) = args.count {
        return Err(CliError::StreamEnded(format!(
            "after {seen} of {wanted} turns"
        )));
    }
    Ok(())
}

/// The agent type of an instance, fetched once per instance with GetAgent
/// and cached; `?` when the lookup fails (the view must not die for it).
async fn agent_type(
    ctx: &mut Ctx<'_>,
    cache: &mut HashMap<String, String>,
    tenant_id: &str,
    instance_id: &str,
) -> String {
    if let Some(t) = cache.get(instance_id) {
        return t.clone();
    }
    let request = v1::GetAgentRequest {
        tenant_id: tenant_id.to_owned(),
        instance_id: instance_id.to_owned(),
    };
    let found = match ctx.conn().await {
        Ok(conn) => conn
            .agents()
            .get_agent(request)
            .await
            .ok()
            .map(|r| r.into_inner().agent_type),
        Err(_) => None,
    };
    let agent_type = found
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "?".into());
    cache.insert(instance_id.to_owned(), agent_type.clone());
    agent_type
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_types::Timestamp;

    fn at(seconds: i64) -> Option<Timestamp> {
        Some(Timestamp { seconds, nanos: 0 })
    }

    #[test]
    fn turn_lines_show_every_field_in_order() {
        let turn = v1::TurnEvent {
            instance_id: "0195b5a0-1234-7000-8000-000000000001".into(),
            event_kind: "OperatorMessage".into(),
            decision_kind: "ActedWithTool".into(),
            mode: "Dialogue".into(),
            phase: "acted".into(),
            reasoning_summary: "Answered the operator\nand queued a follow-up".into(),
            served_model: "claude-opus-4-8".into(),
            tokens: 1520,
            cost_usd: 0.0123,
            created_at: at(1_700_000_000),
            ..Default::default()
        };
        let line = turn_line(&turn, "Soa");
        let time = local_time(at(1_700_000_000).as_ref());
        assert_eq!(
            line,
            format!(
                "{time}  0195b5a0  Soa  OperatorMessage  ActedWithTool  mode=Dialogue  phase=acted  \
                 tokens=1520  $0.0123  claude-opus-4-8  Answered the operator and queued a follow-up"
            )
        );
    }

    #[test]
    fn turn_lines_mark_missing_values_and_cut_long_summaries() {
        let turn = v1::TurnEvent {
            instance_id: "abc".into(),
            decision_kind: "SomethingNew".into(),
            reasoning_summary: "x".repeat(500),
            ..Default::default()
        };
        let line = turn_line(&turn, "?");
        assert!(
            line.contains("  abc  ?  -  SomethingNew  mode=-  phase=-  tokens=0  $0.0000  -  "),
            "{line}"
        );
        let summary = line.rsplit("  ").next().expect("summary");
        assert_eq!(summary.chars().count(), SUMMARY_CHARS);
        assert!(summary.ends_with('…'));
    }

    #[test]
    fn message_lines_name_the_speaker() {
        let mut message = v1::AgentMessage {
            instance_id: "0195b5a0-1234-7000-8000-000000000001".into(),
            direction: "operator_to_agent".into(),
            body: "status?".into(),
            created_at: at(0),
            ..Default::default()
        };
        assert!(message_line(&message).ends_with("  0195b5a0  → operator: status?"));
        message.direction = "agent_to_operator".into();
        message.body = "all quiet\n".into();
        assert!(message_line(&message).ends_with("  0195b5a0  ← agent: all quiet"));
    }

    #[test]
    fn until_decision_accepts_known_kinds_only() {
        assert_eq!(
            until_decision("Escalated").expect("known"),
            AgentDecisionKind::Escalated
        );
        let err = until_decision("escalated").expect_err("case matters");
        assert!(
            err.to_string()
                .contains("expected one of Initialized, Heartbeat"),
            "{err}"
        );
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
        assert!(until_decision("").is_err());
    }
}
