//! The dashboard's pages, each assembled from the admin services' answers
//! for the session's tenant (and, for the mode audit trail and the spend
//! chart, from the store's tenant-scoped reads). Must never write.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use genesis_proto::v1;
use genesis_proto::v1::agent_service_server::AgentService as _;
use genesis_proto::v1::coding_task_service_server::CodingTaskService as _;
use genesis_proto::v1::decision_service_server::DecisionService as _;
use genesis_proto::v1::llm_service_server::LlmService as _;
use genesis_proto::v1::registry_service_server::RegistryService as _;
use tonic::Status;
use uuid::Uuid;

use super::render::{clip, esc, flash, layout, or_dash, ts, usd};
use super::{Flash, Session, rpc};
use crate::services::agents::Agents;
use crate::services::coding_tasks::CodingTasks;
use crate::services::decisions::Decisions;
use crate::services::registry::Registries;
use crate::state::AppState;
use crate::status::store_status;

fn csrf_field(s: &Session) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(&s.row.csrf_token)
    )
}

fn wrap(s: &Session, title: &str, body: &str) -> String {
    layout(title, &s.row.csrf_token, &s.tenant(), body)
}

/// `/agents`: every instance of the tenant, then the registry directory.
pub async fn agents(state: &AppState, s: &Session, f: &Flash) -> Result<String, Status> {
    let list = Agents::new(state.clone())
        .list_agents(rpc(
            s,
            v1::ListAgentsRequest {
                tenant_id: s.tenant(),
                agent_type: None,
                status: None,
            },
        ))
        .await?
        .into_inner();
    let mut body = flash(f.note.as_deref(), f.error.as_deref());
    body.push_str(
        "<section aria-labelledby=\"instances\"><h2 id=\"instances\">Standing instances</h2>",
    );
    if list.agents.is_empty() {
        body.push_str("<p>No agent instances yet. Turn standing agents on for the tenant to bootstrap its SOA.</p>");
    } else {
        body.push_str(
            "<div class=\"scroll\"><table id=\"agents\"><caption class=\"sr\">Agent instances</caption><thead><tr>\
<th scope=\"col\">Instance</th><th scope=\"col\">Type</th><th scope=\"col\">Status</th>\
<th scope=\"col\">Mode</th><th scope=\"col\">Phase</th><th scope=\"col\">Last decision</th>\
<th scope=\"col\">Next heartbeat</th><th scope=\"col\">Idle ticks</th><th scope=\"col\">Blocked turns</th>\
<th scope=\"col\">Provider failures</th></tr></thead><tbody>",
        );
        for a in &list.agents {
            let _ = write!(
                body,
                "<tr data-instance=\"{id}\"><td><a href=\"/agents/{id}\">{short}</a></td><td>{ty}</td>\
<td><span class=\"status {status}\">{status}</span></td><td>{mode}</td><td>{phase}</td><td>{dec}</td>\
<td>{next}</td><td class=\"num\">{idle}</td><td class=\"num\">{blocked}</td><td class=\"num\">{failures}</td></tr>",
                id = esc(&a.id),
                short = esc(&clip(&a.id, 8)),
                ty = esc(&a.agent_type),
                status = esc(&a.status),
                mode = or_dash(&a.active_mode),
                phase = or_dash(&a.phase),
                dec = or_dash(&a.last_decision_kind),
                next = ts(a.next_tick_at.as_ref()),
                idle = a.consecutive_idle_ticks,
                blocked = a.consecutive_blocked_turns,
                failures = a.consecutive_provider_failures,
            );
        }
        body.push_str("</tbody></table></div>");
    }
    body.push_str("</section><section aria-labelledby=\"registry\"><h2 id=\"registry\">Coordination registry</h2>");
    let reg = Registries::new(state.clone())
        .list(rpc(
            s,
            v1::RegistryListRequest {
                tenant_id: s.tenant(),
                role: None,
                capability: None,
            },
        ))
        .await;
    match reg {
        Ok(r) => {
            let r = r.into_inner();
            if r.agents.is_empty() {
                body.push_str("<p>No live registry entries.</p>");
            } else {
                body.push_str(
                    "<div class=\"scroll\"><table id=\"registry-entries\"><thead><tr><th scope=\"col\">Name</th>\
<th scope=\"col\">Role</th><th scope=\"col\">Capabilities</th><th scope=\"col\">Last heartbeat</th>\
<th scope=\"col\">Expires</th></tr></thead><tbody>",
                );
                for e in &r.agents {
                    let _ = write!(
                        body,
                        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        esc(&e.name),
                        esc(&e.role),
                        or_dash(&e.capabilities.join(", ")),
                        ts(e.last_heartbeat_at.as_ref()),
                        ts(e.expires_at.as_ref()),
                    );
                }
                body.push_str("</tbody></table></div>");
            }
        }
        Err(e) => {
            let _ = write!(
                body,
                "<p class=\"muted\">The registry is unavailable: {}</p>",
                esc(e.message())
            );
        }
    }
    body.push_str("</section>");
    Ok(wrap(s, "Agents", &body))
}

/// `/agents/{id}`: summary, controls, live turns, chat, ledger, mode audit.
pub async fn agent(
    state: &AppState,
    s: &Session,
    instance: Uuid,
    f: &Flash,
) -> Result<String, Status> {
    let svc = Agents::new(state.clone());
    let id = instance.to_string();
    let a = svc
        .get_agent(rpc(
            s,
            v1::GetAgentRequest {
                tenant_id: s.tenant(),
                instance_id: id.clone(),
            },
        ))
        .await?
        .into_inner();
    let modes = svc
        .list_modes(rpc(
            s,
            v1::ListModesRequest {
                tenant_id: s.tenant(),
                agent_type: a.agent_type.clone(),
            },
        ))
        .await?
        .into_inner()
        .modes;
    let messages = svc
        .list_messages(rpc(
            s,
            v1::ListMessagesRequest {
                tenant_id: s.tenant(),
                instance_id: id.clone(),
                limit: 100,
                before: None,
            },
        ))
        .await?
        .into_inner()
        .messages;
    let ledger = svc
        .get_ledger(rpc(
            s,
            v1::GetLedgerRequest {
                tenant_id: s.tenant(),
                instance_id: id.clone(),
                limit: 50,
                before: None,
            },
        ))
        .await?
        .into_inner()
        .turns;
    let history = state
        .store
        .modes()
        .history(s.row.tenant_id, instance)
        .await
        .map_err(store_status)?;

    let csrf = csrf_field(s);
    let eid = esc(&id);
    let mut body = flash(f.note.as_deref(), f.error.as_deref());
    let _ = write!(
        body,
        "<section aria-labelledby=\"summary\"><h2 id=\"summary\">{ty} <code>{eid}</code></h2>\
<dl class=\"facts\"><dt>Status</dt><dd id=\"agent-status\"><span class=\"status {st}\">{st}</span></dd>\
<dt>Mode</dt><dd id=\"agent-mode\">{mode}</dd><dt>Phase</dt><dd>{phase}</dd>\
<dt>Last decision</dt><dd>{dec}</dd><dt>Next heartbeat</dt><dd>{next}</dd>\
<dt>Idle ticks</dt><dd>{idle}</dd><dt>Blocked turns</dt><dd>{blocked}</dd>\
<dt>Provider failures in a row</dt><dd>{failures}</dd>\
<dt>Budget-exhausted turns in a row</dt><dd>{exhausted}</dd>\
<dt>Foundational phase</dt><dd>{found}</dd></dl>",
        ty = esc(&a.agent_type),
        st = esc(&a.status),
        mode = or_dash(&a.active_mode),
        phase = or_dash(&a.phase),
        dec = or_dash(&a.last_decision_kind),
        next = ts(a.next_tick_at.as_ref()),
        idle = a.consecutive_idle_ticks,
        blocked = a.consecutive_blocked_turns,
        failures = a.consecutive_provider_failures,
        exhausted = a.consecutive_exhausted_turns,
        found = if a.is_building_starting_workset {
            format!("until {}", ts(a.workset_deadline_utc.as_ref()))
        } else {
            "complete".to_owned()
        },
    );
    // Lifecycle controls and the mode switcher.
    let _ = write!(
        body,
        "<div class=\"controls\"><form method=\"post\" action=\"/agents/{eid}/lifecycle\" class=\"inline\" \
id=\"lifecycle-form\" data-fetch data-state=\"lifecycle-state\">{csrf}\
<button name=\"action\" value=\"start\" type=\"submit\">Start</button>\
<button name=\"action\" value=\"stop\" type=\"submit\">Stop</button>\
<button name=\"action\" value=\"reset\" type=\"submit\" class=\"danger\" data-confirm=\"Reset clears this agent's memory and drains its queue. Continue?\">Reset</button></form>\
<form method=\"post\" action=\"/agents/{eid}/mode\" class=\"inline\" id=\"mode-form\">{csrf}\
<label for=\"mode\">Mode</label><select id=\"mode\" name=\"mode\">"
    );
    for m in &modes {
        let selected = if m.name == a.active_mode {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            body,
            "<option value=\"{n}\"{selected} title=\"{d}\">{n}</option>",
            n = esc(&m.name),
            d = esc(&m.description)
        );
    }
    body.push_str(
        "</select><button type=\"submit\">Switch mode</button></form>\
<p class=\"muted\" id=\"lifecycle-state\" aria-live=\"polite\"></p></div></section>",
    );

    // Live turns (filled by the page script from the SSE stream).
    let _ = write!(
        body,
        "<section aria-labelledby=\"live\"><h2 id=\"live\">Live turns</h2>\
<p class=\"muted\" id=\"live-state\" aria-live=\"polite\">Connecting…</p>\
<ol id=\"live-turns\" class=\"live\" data-events=\"/agents/{eid}/events\" aria-live=\"polite\"></ol></section>"
    );

    // Chat transcript.
    body.push_str(
        "<section aria-labelledby=\"chat\"><h2 id=\"chat\">Chat</h2><ol id=\"transcript\" class=\"chat\" aria-live=\"polite\">",
    );
    for m in messages.iter().rev() {
        let _ = write!(
            body,
            "<li class=\"msg {dir}\" data-id=\"{id}\"><span class=\"who\">{who}</span> <time>{at}</time><p>{b}</p></li>",
            dir = esc(&m.direction),
            id = esc(&m.id),
            who = if m.direction.starts_with("operator") {
                "operator"
            } else {
                "agent"
            },
            at = ts(m.created_at.as_ref()),
            b = esc(&m.body),
        );
    }
    let _ = write!(
        body,
        "</ol><form method=\"post\" action=\"/agents/{eid}/message\" id=\"message-form\" class=\"stack\" \
data-fetch data-state=\"message-state\">{csrf}\
<label for=\"body\">Message to the agent</label>\
<textarea id=\"body\" name=\"body\" rows=\"3\" maxlength=\"16384\" required></textarea>\
<button type=\"submit\">Send</button><p class=\"muted\" id=\"message-state\" aria-live=\"polite\"></p></form></section>"
    );

    // Ledger.
    body.push_str("<section aria-labelledby=\"ledger\"><h2 id=\"ledger\">Ledger</h2>");
    if ledger.is_empty() {
        body.push_str("<p>No turns yet.</p>");
    } else {
        body.push_str(
            "<div class=\"scroll\"><table id=\"ledger-turns\"><thead><tr><th scope=\"col\">Turn</th>\
<th scope=\"col\">Time</th><th scope=\"col\">Event</th><th scope=\"col\">Decision</th><th scope=\"col\">Mode</th>\
<th scope=\"col\">Reasoning</th><th scope=\"col\">Actions</th><th scope=\"col\">Model (requested → served)</th>\
<th scope=\"col\">Tokens in/out</th><th scope=\"col\">Cost</th></tr></thead><tbody>",
        );
        for t in &ledger {
            let mut actions = String::new();
            for act in &t.actions {
                let flag = if act.blocked {
                    " <span class=\"tag blocked\">blocked</span>"
                } else if act.side_effecting {
                    " <span class=\"tag\">side effect</span>"
                } else {
                    ""
                };
                let _ = write!(
                    actions,
                    "<li><code>{}</code>{flag}</li>",
                    esc(&act.tool_name)
                );
            }
            let model = match (t.requested_model.as_str(), t.served_model.as_str()) {
                ("", "") => "—".to_owned(),
                ("", served) => esc(served),
                (req, served) if req == served => esc(req),
                (req, served) => format!("{} → {}", esc(req), or_dash(served)),
            };
            let _ = write!(
                body,
                "<tr><td class=\"num\"><a href=\"/agents/{eid}/turns/{n}/trace\" title=\"The turn's episode trace\">{n}</a></td><td>{at}</td><td>{ev}</td><td><strong>{dec}</strong></td><td>{mode}</td>\
<td>{why}</td><td><ul class=\"plain\">{actions}</ul></td><td>{model}</td><td class=\"num\">{i}/{o}</td>\
<td class=\"num\">{cost}</td></tr>",
                n = t.turn_number,
                at = ts(t.created_at.as_ref()),
                ev = esc(&t.event_kind),
                dec = esc(&t.decision_kind),
                mode = or_dash(&t.active_mode),
                why = or_dash(&clip(&t.reasoning_summary, 400)),
                i = t.input_tokens,
                o = t.output_tokens,
                cost = usd(t.cost_usd),
            );
        }
        body.push_str("</tbody></table></div>");
    }
    body.push_str("</section>");

    // Mode audit trail.
    body.push_str("<section aria-labelledby=\"audit\"><h2 id=\"audit\">Mode changes</h2>");
    if history.is_empty() {
        body.push_str("<p>No mode changes.</p>");
    } else {
        body.push_str(
            "<table id=\"mode-audit\"><thead><tr><th scope=\"col\">Time</th><th scope=\"col\">From</th>\
<th scope=\"col\">To</th><th scope=\"col\">Source</th><th scope=\"col\">Actor</th></tr></thead><tbody>",
        );
        for h in history.iter().rev() {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                h.created_at.format("%Y-%m-%d %H:%M:%S UTC"),
                or_dash(h.from_mode.as_deref().unwrap_or_default()),
                esc(&h.to_mode),
                esc(h.source.as_str()),
                esc(&h.actor),
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("</section>");
    Ok(wrap(s, &format!("Agent {}", clip(&id, 8)), &body))
}

/// `/agents/{id}/turns/{turn}/trace`: one ledger turn's episode, as
/// `genesisctl agent trace` shows it — the turn, its budget per axis, its
/// decision's mapping, then each step in order (an LLM turn's request
/// messages, its answer and its attempts with their cost; a tool call's
/// arguments and result). Every text is escaped and shown whole.
pub async fn trace(
    state: &AppState,
    s: &Session,
    instance: Uuid,
    turn_number: i64,
) -> Result<String, Status> {
    let t = Agents::new(state.clone())
        .get_agent_trace(rpc(
            s,
            v1::GetAgentTraceRequest {
                tenant_id: s.tenant(),
                instance_id: instance.to_string(),
                turn_number,
            },
        ))
        .await?
        .into_inner();
    let turn = t.turn.clone().unwrap_or_default();
    let eid = esc(&instance.to_string());
    let model = match (turn.requested_model.as_str(), turn.served_model.as_str()) {
        ("", "") => "—".to_owned(),
        ("", served) => esc(served),
        (req, served) if req == served => esc(req),
        (req, served) => format!("{} → {}", esc(req), or_dash(served)),
    };
    let mut body = format!(
        "<p><a href=\"/agents/{eid}\">Back to the agent</a></p>\
<section aria-labelledby=\"turn\"><h2 id=\"turn\">Turn {n}</h2><dl class=\"facts\">\
<dt>Time</dt><dd>{at}</dd><dt>Event</dt><dd>{ev} <code>{event_id}</code></dd>\
<dt>Decision</dt><dd id=\"decision\"><strong>{dec}</strong></dd><dt>Phase</dt><dd>{phase}</dd>\
<dt>Mode</dt><dd>{mode}</dd><dt>Completion</dt><dd id=\"completion\">{completion}</dd>\
<dt>Budget axis</dt><dd>{axis}</dd><dt>End reason</dt><dd>{reason}</dd>\
<dt>Model (requested → served)</dt><dd>{model}</dd><dt>Tokens in/out</dt><dd>{i}/{o}</dd>\
<dt>Cost</dt><dd id=\"turn-cost\">{cost}</dd><dt>Reasoning</dt><dd>{why}</dd></dl></section>",
        n = turn.turn_number,
        at = ts(turn.created_at.as_ref()),
        ev = esc(&turn.event_kind),
        event_id = or_dash(&turn.event_id),
        dec = esc(&turn.decision_kind),
        phase = or_dash(&turn.phase),
        mode = or_dash(&turn.active_mode),
        completion = or_dash(&t.completion),
        axis = or_dash(&t.budget_axis),
        reason = or_dash(&t.end_reason),
        i = turn.input_tokens,
        o = turn.output_tokens,
        cost = usd(turn.cost_usd),
        why = or_dash(&turn.reasoning_summary),
    );
    let used = t.consumption.unwrap_or_default();
    let _ = write!(
        body,
        "<section aria-labelledby=\"budget\"><h2 id=\"budget\">Budget used</h2>\
<table id=\"budget-used\"><thead><tr><th scope=\"col\">Axis</th><th scope=\"col\" class=\"num\">Used</th></tr></thead><tbody>\
<tr><td>Tokens</td><td class=\"num\">{}</td></tr><tr><td>Tool calls</td><td class=\"num\">{}</td></tr>\
<tr><td>Turns</td><td class=\"num\">{}</td></tr><tr><td>Wall clock</td><td class=\"num\">{} ms</td></tr>\
</tbody></table></section>",
        used.tokens, used.tool_calls, used.turns, used.wall_ms
    );
    body.push_str("<section aria-labelledby=\"mapping\"><h2 id=\"mapping\">Decision mapping</h2>");
    if turn.actions.is_empty() {
        body.push_str("<p>No actions.</p>");
    } else {
        body.push_str(
            "<div class=\"scroll\"><table id=\"actions\"><thead><tr><th scope=\"col\">Tool</th>\
<th scope=\"col\">Side effect</th><th scope=\"col\">Blocked</th><th scope=\"col\">Arguments</th>\
<th scope=\"col\">Result</th></tr></thead><tbody>",
        );
        for a in &turn.actions {
            let _ = write!(
                body,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td><pre>{}</pre></td><td><pre>{}</pre></td></tr>",
                esc(&a.tool_name),
                yes_no(a.side_effecting),
                yes_no(a.blocked),
                esc(&a.arguments_json),
                esc(&a.result_json),
            );
        }
        body.push_str("</tbody></table></div>");
    }
    body.push_str("</section>");
    if !t.journal_pruned {
        body.push_str(&replay_form(state, s, &eid, turn.turn_number).await);
    }
    if !t.system_prompt.is_empty() {
        let _ = write!(
            body,
            "<section aria-labelledby=\"system\"><h2 id=\"system\">System prompt</h2><pre id=\"system-prompt\">{}</pre></section>",
            esc(&t.system_prompt)
        );
    }
    body.push_str("<section aria-labelledby=\"steps\"><h2 id=\"steps\">Steps</h2>");
    if t.journal_pruned {
        body.push_str(
            "<p id=\"no-journal\">No journal for this turn: it was pruned after its retention, \
or never written. The ledger turn above is what is kept.</p>",
        );
    }
    body.push_str("<ol id=\"trace-steps\" class=\"plain\">");
    for step in &t.steps {
        use v1::trace_step::Step;
        match &step.step {
            Some(Step::LlmTurn(l)) => trace_llm_turn(&mut body, step.seq, l),
            Some(Step::ToolCall(c)) => {
                let flag = if c.blocked {
                    " <span class=\"tag blocked\">blocked</span>"
                } else if c.side_effecting {
                    " <span class=\"tag\">side effect</span>"
                } else {
                    ""
                };
                let _ = write!(
                    body,
                    "<li class=\"step tool-call\" data-seq=\"{seq}\"><h3>Tool call <code>{name}</code>{flag}</h3>\
<p class=\"muted\">{call} · {at}</p><h4>Arguments</h4><pre>{args}</pre><h4>Result</h4><pre>{result}</pre></li>",
                    seq = step.seq,
                    name = esc(&c.tool_name),
                    call = esc(&c.call_id),
                    at = ts(step.created_at.as_ref()),
                    args = esc(&c.arguments_json),
                    result = esc(&c.result_json),
                );
            }
            Some(Step::UnreadableJson(raw)) => {
                let _ = write!(
                    body,
                    "<li class=\"step\" data-seq=\"{}\"><h3>Unreadable step</h3><pre>{}</pre></li>",
                    step.seq,
                    esc(raw)
                );
            }
            None => {}
        }
    }
    body.push_str("</ol>");
    if let Some(x) = &t.truncated {
        let _ = write!(
            body,
            "<p id=\"truncated\" class=\"note\">The journal reached its cap of {} bytes ({} journaled): \
the next {} step ({} bytes) and everything after it were not journaled.</p>",
            x.max_bytes,
            x.journal_bytes,
            esc(&x.dropped_kind),
            x.dropped_bytes
        );
    }
    body.push_str("</section>");
    Ok(wrap(
        s,
        &format!(
            "Agent {} turn {}",
            clip(&instance.to_string(), 8),
            turn.turn_number
        ),
        &body,
    ))
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// A priced amount, or "unknown" when the attempt could not be paired with
/// a priced one (never shown as zero).
fn usd_or_unknown(v: Option<f64>) -> String {
    v.map(usd).unwrap_or_else(|| "unknown".to_owned())
}

fn trace_llm_turn(body: &mut String, seq: i32, l: &v1::TraceLlmTurn) {
    let _ = write!(
        body,
        "<li class=\"step llm-turn\" data-seq=\"{seq}\"><h3>LLM turn {n}</h3>\
<p class=\"muted\">{model} → {served} · stop {stop} · invocation <code>{inv}</code></p><h4>Request</h4><ol class=\"chat\">",
        n = l.turn,
        model = esc(&l.model),
        served = or_dash(&l.served_model),
        stop = or_dash(&l.stop_reason),
        inv = esc(&l.invocation_id),
    );
    for m in &l.messages {
        trace_message(body, m);
    }
    body.push_str("</ol><h4>Response</h4>");
    if !l.error.is_empty() {
        let _ = write!(body, "<p class=\"error\">{}</p>", esc(&l.error));
    }
    if !l.text.is_empty() {
        let _ = write!(body, "<pre>{}</pre>", esc(&l.text));
    }
    if !l.tool_calls.is_empty() {
        body.push_str("<ul class=\"plain\">");
        for c in &l.tool_calls {
            let _ = write!(
                body,
                "<li>Tool call <code>{}</code> <code>{}</code><pre>{}</pre></li>",
                esc(&c.id),
                esc(&c.name),
                esc(&c.arguments_json)
            );
        }
        body.push_str("</ul>");
    }
    if let Some(u) = &l.usage {
        let _ = write!(
            body,
            "<p class=\"muted\">Tokens {}/{}</p>",
            u.input_tokens, u.output_tokens
        );
    }
    body.push_str(
        "<h4>Attempts</h4><div class=\"scroll\"><table class=\"attempts\"><thead><tr><th scope=\"col\">Provider</th>\
<th scope=\"col\">Requested</th><th scope=\"col\">Served</th><th scope=\"col\">Outcome</th>\
<th scope=\"col\" class=\"num\">Latency</th><th scope=\"col\" class=\"num\">Tokens in/out</th>\
<th scope=\"col\" class=\"num\">Cost</th><th scope=\"col\">Error</th></tr></thead><tbody>",
    );
    for a in &l.attempts {
        let u = a.usage.unwrap_or_default();
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{} ms</td>\
<td class=\"num\">{}/{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            esc(&a.provider),
            esc(&a.requested_model),
            or_dash(&a.served_model),
            esc(&a.outcome),
            a.latency_ms,
            u.input_tokens,
            u.output_tokens,
            usd_or_unknown(a.cost_usd),
            or_dash(&a.error),
        );
    }
    body.push_str("</tbody></table></div></li>");
}

fn trace_message(body: &mut String, m: &v1::TraceMessage) {
    let answers = if m.tool_call_id.is_empty() {
        String::new()
    } else {
        format!(" (answers <code>{}</code>)", esc(&m.tool_call_id))
    };
    let _ = write!(
        body,
        "<li class=\"msg {role}\"><span class=\"who\">{role}</span>{answers}<pre>{content}</pre>",
        role = esc(&m.role),
        content = esc(&m.content),
    );
    for c in &m.tool_calls {
        let _ = write!(
            body,
            "<p>Tool call <code>{}</code> <code>{}</code></p><pre>{}</pre>",
            esc(&c.id),
            esc(&c.name),
            esc(&c.arguments_json)
        );
    }
    body.push_str("</li>");
}

/// `/decisions`: the open queue with answer forms, then recent answers.
pub async fn decisions(state: &AppState, s: &Session, f: &Flash) -> Result<String, Status> {
    let all = Decisions::new(state.clone())
        .list_decisions(rpc(
            s,
            v1::ListDecisionsRequest {
                tenant_id: s.tenant(),
                status: None,
            },
        ))
        .await?
        .into_inner()
        .decisions;
    let csrf = csrf_field(s);
    let mut body = flash(f.note.as_deref(), f.error.as_deref());
    let (open, resolved): (Vec<_>, Vec<_>) = all.iter().partition(|d| d.status == "open");
    body.push_str("<section aria-labelledby=\"open\"><h2 id=\"open\">Open</h2>");
    if open.is_empty() {
        body.push_str("<p id=\"no-open\">Nothing is waiting for an answer.</p>");
    }
    for d in open {
        let meta: serde_json::Value =
            serde_json::from_str(&d.metadata_json).unwrap_or(serde_json::Value::Null);
        let options: Vec<String> = serde_json::from_str::<Vec<serde_json::Value>>(&d.options_json)
            .unwrap_or_default()
            .into_iter()
            .map(|v| match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            })
            .collect();
        let origin = match (
            meta.get("source").and_then(|v| v.as_str()),
            meta.get("soaInstanceId").and_then(|v| v.as_str()),
        ) {
            (Some(src), Some(inst)) => format!(
                "origin <code>{}</code>, instance <a href=\"/agents/{i}\">{short}</a>",
                esc(src),
                i = esc(inst),
                short = esc(&clip(inst, 8))
            ),
            (Some(src), None) => format!("origin <code>{}</code>", esc(src)),
            _ => "system".to_owned(),
        };
        let target = meta
            .get("targetMode")
            .or_else(|| meta.get("mode"))
            .or_else(|| meta.get("proposedMode"))
            .and_then(|v| v.as_str())
            .map(|m| format!("<p>Proposed mode: <strong>{}</strong></p>", esc(m)))
            .unwrap_or_default();
        let did = esc(&d.id);
        let _ = write!(
            body,
            "<article class=\"decision\" data-decision=\"{did}\" aria-labelledby=\"d-{did}\">\
<h3 id=\"d-{did}\">{title}</h3><p class=\"muted\"><span class=\"tag\">{kind}</span> {origin} · {at}</p>\
<p>{text}</p>{target}<form method=\"post\" action=\"/decisions/{did}/respond\" class=\"stack\">{csrf}",
            title = esc(&d.title),
            kind = esc(&d.kind),
            at = ts(d.created_at.as_ref()),
            text = or_dash(&d.body),
        );
        if d.kind == "mode_change" {
            let _ = write!(
                body,
                "<label for=\"n-{did}\">Notes</label><input id=\"n-{did}\" name=\"notes\" type=\"text\">\
<div class=\"row\"><button type=\"submit\" name=\"resolution\" value=\"approved\">Approve</button>\
<button type=\"submit\" name=\"resolution\" value=\"rejected\" class=\"danger\">Reject</button></div></form></article>"
            );
        } else {
            let list = if options.is_empty() {
                String::new()
            } else {
                let mut dl = format!("<datalist id=\"o-{did}\">");
                for o in &options {
                    let _ = write!(dl, "<option value=\"{}\">", esc(o));
                }
                dl.push_str("</datalist>");
                let _ = write!(
                    dl,
                    "<p class=\"muted\">Options: {}</p>",
                    options
                        .iter()
                        .map(|o| esc(o))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                dl
            };
            let _ = write!(
                body,
                "{list}<label for=\"r-{did}\">Answer</label>\
<input id=\"r-{did}\" name=\"resolution\" type=\"text\" list=\"o-{did}\" required>\
<label for=\"n-{did}\">Notes</label><input id=\"n-{did}\" name=\"notes\" type=\"text\">\
<button type=\"submit\">Answer</button></form></article>"
            );
        }
    }
    body.push_str(
        "</section><section aria-labelledby=\"resolved\"><h2 id=\"resolved\">Answered</h2>",
    );
    if resolved.is_empty() {
        body.push_str("<p>None yet.</p>");
    } else {
        body.push_str(
            "<div class=\"scroll\"><table id=\"answered\"><thead><tr><th scope=\"col\">Title</th><th scope=\"col\">Kind</th>\
<th scope=\"col\">Answer</th><th scope=\"col\">Notes</th><th scope=\"col\">By</th><th scope=\"col\">When</th>\
</tr></thead><tbody>",
        );
        for d in resolved.iter().take(50) {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&d.title),
                esc(&d.kind),
                esc(&d.resolution),
                or_dash(&d.resolution_notes),
                or_dash(&d.resolved_by),
                ts(d.resolved_at.as_ref()),
            );
        }
        body.push_str("</tbody></table></div>");
    }
    body.push_str("</section>");
    Ok(wrap(s, "Decisions", &body))
}

/// `/spend`: the weekly credit window and this week's spend per day and
/// per agent as an inline SVG bar chart.
pub async fn spend(state: &AppState, s: &Session) -> Result<String, Status> {
    let t = s.row.tenant_id;
    let cfg = state
        .store
        .config()
        .layers(Some(t))
        .await
        .map_err(store_status)?;
    // The ceiling the supervisor enforces: the tenant's value within the
    // platform's for it (a malformed row is skipped there too).
    let (opts, _) =
        genesis_core::AgentDispatcherOptions::default().for_tenant(&cfg.platform, &cfg.effective);
    let now = chrono::Utc::now();
    let week = genesis_store::credit::week_start(now);
    let window = state
        .store
        .credit()
        .current(t, week, opts.weekly_credit_usd)
        .await
        .map_err(store_status)?;
    let rows = state
        .store
        .credit()
        .daily_spend(t, week)
        .await
        .map_err(store_status)?;

    let pct = if window.limit_usd > 0.0 {
        (window.spent_usd / window.limit_usd * 100.0).clamp(0.0, 100.0)
    } else {
        100.0
    };
    let mut body = format!(
        "<section aria-labelledby=\"window\"><h2 id=\"window\">Weekly credit window</h2>\
<dl class=\"facts\"><dt>Window</dt><dd>{from} → {to}</dd><dt>Ceiling</dt><dd id=\"limit\">{limit}</dd>\
<dt>Spent</dt><dd id=\"spent\">{spent}</dd><dt>Remaining</dt><dd id=\"remaining\">{left}</dd>\
<dt>Enforcement</dt><dd>{enf}</dd></dl>\
<div class=\"meter\" role=\"meter\" aria-valuemin=\"0\" aria-valuemax=\"100\" aria-valuenow=\"{pct:.0}\" \
aria-label=\"Share of the weekly ceiling spent\"><svg viewBox=\"0 0 100 4\" preserveAspectRatio=\"none\" width=\"100%\" height=\"16\">\
<rect width=\"100\" height=\"4\" class=\"track\"/><rect width=\"{pct:.2}\" height=\"4\" class=\"fill\"/></svg></div></section>",
        from = window.week_start.format("%Y-%m-%d"),
        to = window.week_end().format("%Y-%m-%d"),
        limit = usd(window.limit_usd),
        spent = usd(window.spent_usd),
        left = usd(window.remaining_usd()),
        enf = if opts.credit_enforcement_enabled {
            "on"
        } else {
            "off (spend is recorded, never refused)"
        },
    );

    // Per day (7 bars, Monday first), stacked by nothing: one total each.
    let mut per_day = [0.0_f64; 7];
    let mut per_agent: BTreeMap<(String, Uuid), (f64, i64)> = BTreeMap::new();
    for r in &rows {
        let d = (r.day - week).num_days();
        if let Some(slot) = usize::try_from(d).ok().and_then(|d| per_day.get_mut(d)) {
            *slot += r.cost_usd;
        }
        let e = per_agent
            .entry((r.agent_type.clone(), r.instance_id))
            .or_insert((0.0, 0));
        e.0 += r.cost_usd;
        e.1 += r.calls;
    }
    body.push_str(&bar_chart(
        "spend-per-day",
        "Spend per day this week",
        &["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
            .iter()
            .zip(per_day)
            .map(|(d, v)| ((*d).to_owned(), v))
            .collect::<Vec<_>>(),
    ));
    let agents: Vec<(String, f64)> = per_agent
        .iter()
        .map(|((ty, id), (v, _))| (format!("{ty} {}", clip(&id.to_string(), 8)), *v))
        .collect();
    if agents.is_empty() {
        body.push_str("<p>No planning calls were priced this week.</p>");
    } else {
        body.push_str(&bar_chart(
            "spend-per-agent",
            "Spend per agent this week",
            &agents,
        ));
        body.push_str(
            "<table id=\"spend-table\"><thead><tr><th scope=\"col\">Agent</th><th scope=\"col\" class=\"num\">Calls</th>\
<th scope=\"col\" class=\"num\">Spend</th></tr></thead><tbody>",
        );
        for ((ty, id), (v, calls)) in &per_agent {
            let _ = write!(
                body,
                "<tr><td><a href=\"/agents/{id}\">{ty} {short}</a></td><td class=\"num\">{calls}</td><td class=\"num\">{}</td></tr>",
                usd(*v),
                ty = esc(ty),
                short = esc(&clip(&id.to_string(), 8)),
            );
        }
        body.push_str("</tbody></table>");
    }
    Ok(wrap(s, "Spend", &body))
}

/// A horizontal bar chart as inline SVG with a text alternative per bar.
fn bar_chart(id: &str, title: &str, bars: &[(String, f64)]) -> String {
    let max = bars.iter().map(|b| b.1).fold(0.0_f64, f64::max);
    let row_h = 24;
    let height = row_h * bars.len().max(1) + 8;
    let mut svg = format!(
        "<figure class=\"chart\"><figcaption id=\"{id}-title\">{t}</figcaption>\
<svg id=\"{id}\" role=\"img\" aria-labelledby=\"{id}-title\" viewBox=\"0 0 600 {height}\" width=\"100%\">",
        id = esc(id),
        t = esc(title)
    );
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = i * row_h + 4;
        let w = if max > 0.0 { v / max * 380.0 } else { 0.0 };
        let _ = write!(
            svg,
            "<g><title>{l}: {val}</title><text x=\"0\" y=\"{ty}\" class=\"label\">{l}</text>\
<rect x=\"150\" y=\"{y}\" width=\"{w:.1}\" height=\"16\" class=\"bar\"/>\
<text x=\"{tx:.1}\" y=\"{ty}\" class=\"value\">{val}</text></g>",
            l = esc(label),
            val = usd(*v),
            ty = y + 13,
            tx = 156.0 + w,
        );
    }
    svg.push_str("</svg></figure>");
    svg
}

/// A task's progress as one cell: the percentage and the latest message.
fn progress(t: &v1::CodingTask) -> String {
    match (t.progress_percent, t.progress_message.as_str()) {
        (None, "") => "—".to_owned(),
        (Some(p), "") => format!("{p}%"),
        (None, m) => esc(&clip(m, 80)),
        (Some(p), m) => format!("{p}% · {}", esc(&clip(m, 80))),
    }
}

/// A task's Windows hold as one cell.
fn windows_hold(t: &v1::CodingTask) -> String {
    match &t.windows_hold {
        None => "—".to_owned(),
        Some(h) if h.host.is_empty() => esc(&h.state),
        Some(h) => format!(
            "{} on <code>{}</code> until {}",
            esc(&h.state),
            esc(&h.host),
            ts(h.lease_expires_at.as_ref())
        ),
    }
}

/// `/tasks`: the tenant's coding tasks, newest first, with each one's
/// coder, progress, artifacts and Windows hold.
pub async fn tasks(state: &AppState, s: &Session) -> Result<String, Status> {
    let all = CodingTasks::new(state.clone())
        .list_tasks(rpc(
            s,
            v1::ListTasksRequest {
                tenant_id: s.tenant(),
                status: None,
                coder_id: None,
            },
        ))
        .await?
        .into_inner()
        .tasks;
    let mut body =
        String::from("<section aria-labelledby=\"all\"><h2 id=\"all\">Coding tasks</h2>");
    if all.is_empty() {
        body.push_str("<p id=\"no-tasks\">No coding task yet.</p>");
    } else {
        body.push_str(
            "<table id=\"tasks\"><thead><tr><th scope=\"col\">Task</th><th scope=\"col\">Status</th>\
<th scope=\"col\">Coder</th><th scope=\"col\">Progress</th><th scope=\"col\">Artifacts</th>\
<th scope=\"col\">Cost</th><th scope=\"col\">Windows</th><th scope=\"col\">Updated</th></tr></thead><tbody>",
        );
        for t in &all {
            let _ = write!(
                body,
                "<tr><td><a href=\"/tasks/{id}\">{title}</a></td><td>{status}</td><td>{coder}</td>\
<td>{progress}</td><td>{artifacts}</td><td>{cost}</td><td>{windows}</td><td>{updated}</td></tr>",
                id = esc(&t.id),
                cost = usd(t.cost_usd),
                title = esc(&clip(&t.title, 80)),
                status = esc(&t.status),
                coder = or_dash(t.coder_id.as_deref().unwrap_or_default()),
                progress = progress(t),
                artifacts = t.artifact_count,
                windows = windows_hold(t),
                updated = ts(t.updated_at.as_ref()),
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("</section>");
    Ok(wrap(s, "Tasks", &body))
}

/// `/tasks/{id}`: one task with its instructions, progress, artifacts
/// (names and sizes; their content stays with the API) and Windows hold.
pub async fn task(state: &AppState, s: &Session, id: Uuid) -> Result<String, Status> {
    let t = CodingTasks::new(state.clone())
        .get_task(rpc(
            s,
            v1::GetTaskRequest {
                tenant_id: s.tenant(),
                task_id: id.to_string(),
            },
        ))
        .await?
        .into_inner();
    let couple = t.couple.clone().unwrap_or_default();
    let mut body = format!(
        "<section aria-labelledby=\"facts\"><h2 id=\"facts\">{title}</h2><dl class=\"facts\">\
<dt>Status</dt><dd id=\"status\">{status}</dd><dt>Coder</dt><dd id=\"coder\">{coder}</dd>\
<dt>Progress</dt><dd id=\"progress\">{progress}</dd><dt>Cost</dt><dd id=\"cost\">{cost}</dd>\
<dt>Windows</dt><dd id=\"windows\">{windows}</dd>\
<dt>Model</dt><dd>{model} ({provider})</dd><dt>Repository</dt><dd>{repo} {branch}</dd>\
<dt>Created</dt><dd>{created}</dd><dt>Settled</dt><dd>{settled}</dd></dl>\
<h3>Instructions</h3><pre>{instructions}</pre>",
        title = esc(&t.title),
        status = esc(&t.status),
        coder = or_dash(t.coder_id.as_deref().unwrap_or_default()),
        progress = progress(&t),
        cost = usd(t.cost_usd),
        windows = windows_hold(&t),
        model = esc(&couple.model),
        provider = esc(&couple.provider),
        repo = or_dash(&t.repository),
        branch = or_dash(&t.branch),
        created = ts(t.created_at.as_ref()),
        settled = ts(t.completed_at.as_ref()),
        instructions = esc(&t.instructions),
    );
    if !t.result_summary.is_empty() {
        let _ = write!(
            body,
            "<h3>Result</h3><p id=\"summary\">{}</p>",
            esc(&t.result_summary)
        );
    }
    body.push_str(
        "</section><section aria-labelledby=\"artifacts\"><h2 id=\"artifacts\">Artifacts</h2>",
    );
    if t.artifacts.is_empty() {
        body.push_str("<p id=\"no-artifacts\">No artifact attached.</p>");
    } else {
        body.push_str(
            "<table id=\"artifact-list\"><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Kind</th>\
<th scope=\"col\">Size</th><th scope=\"col\">Attached</th></tr></thead><tbody>",
        );
        for a in &t.artifacts {
            let _ = write!(
                body,
                "<tr><td><a href=\"/tasks/{task}/artifacts/{aid}\">{name}</a></td><td>{kind}</td>\
<td>{size} B</td><td>{at}</td></tr>",
                task = esc(&t.id),
                aid = esc(&a.id),
                name = esc(&a.name),
                kind = esc(&a.kind),
                size = a.size_bytes,
                at = ts(a.created_at.as_ref()),
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("</section>");
    Ok(wrap(s, &format!("Task {}", clip(&t.title, 60)), &body))
}

/// `/tasks/{id}/artifacts/{artifact}`: one artifact's content, escaped,
/// as its coder attached it (a patch to review before applying it).
pub async fn artifact(
    state: &AppState,
    s: &Session,
    task: Uuid,
    artifact: Uuid,
) -> Result<String, Status> {
    let a = CodingTasks::new(state.clone())
        .get_artifact(rpc(
            s,
            v1::GetArtifactRequest {
                tenant_id: s.tenant(),
                task_id: task.to_string(),
                artifact_id: artifact.to_string(),
            },
        ))
        .await?
        .into_inner();
    let meta = a.artifact.unwrap_or_default();
    let body = format!(
        "<section aria-labelledby=\"artifact\"><h2 id=\"artifact\">{name}</h2>\
<p><a href=\"/tasks/{task}\">Back to the task</a> · {kind} · {size} B · {at}</p>\
<pre id=\"content\">{content}</pre></section>",
        name = esc(&meta.name),
        task = esc(&task.to_string()),
        kind = esc(&meta.kind),
        size = meta.size_bytes,
        at = ts(meta.created_at.as_ref()),
        content = esc(&a.content),
    );
    Ok(wrap(
        s,
        &format!("Artifact {}", clip(&meta.name, 60)),
        &body,
    ))
}

/// The trace page's replay button: the tenant's presets to replay the turn
/// against, as a dry run (`genesisctl agent replay`).
async fn replay_form(state: &AppState, s: &Session, eid: &str, turn_number: i64) -> String {
    let presets = crate::services::llm::Llms::new(state.clone())
        .list_presets(rpc(
            s,
            v1::ListPresetsRequest {
                tenant_id: s.tenant(),
            },
        ))
        .await
        .map(|r| r.into_inner().presets)
        .unwrap_or_default();
    let mut out = String::from(
        "<section aria-labelledby=\"replay\"><h2 id=\"replay\">Replay against another preset</h2>\
<p>A dry run: the preset is asked with this turn's inputs; every tool with an effect is answered \
\u{201c}not executed (replay)\u{201d} and every read-only one from the journal. Its calls are billed to \
the tenant's credit under the call tag Replay, not to the agent's turns.</p>",
    );
    if presets.is_empty() {
        out.push_str("<p>No preset to replay against: create one first.</p></section>");
        return out;
    }
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/agents/{eid}/turns/{turn_number}/replay\" class=\"inline\" id=\"replay-form\">{}\
<label for=\"replay-preset\">Preset</label> <select id=\"replay-preset\" name=\"preset\">",
        csrf_field(s)
    );
    for p in &presets {
        let _ = write!(
            out,
            "<option value=\"{}\">{} ({})</option>",
            esc(&p.id),
            esc(&p.name),
            esc(&p
                .primary
                .as_ref()
                .map(|c| c.model.clone())
                .unwrap_or_default())
        );
    }
    out.push_str("</select> <button type=\"submit\">Replay</button></form></section>");
    out
}

/// `/replays/{id}`: a replay beside its original turn, as `genesisctl
/// agent replay` shows it; refreshed every two seconds until it finishes.
pub async fn replay(state: &AppState, s: &Session, replay_id: Uuid) -> Result<String, Status> {
    let r = Agents::new(state.clone())
        .get_turn_replay(rpc(
            s,
            v1::GetTurnReplayRequest {
                tenant_id: s.tenant(),
                replay_id: replay_id.to_string(),
            },
        ))
        .await?
        .into_inner();
    let original = r.original.clone().unwrap_or_default();
    let eid = esc(&r.instance_id);
    let running = matches!(r.status.as_str(), "pending" | "running");
    let mut body = String::new();
    if running {
        body.push_str("<meta http-equiv=\"refresh\" content=\"2\">");
    }
    let alt = r.alternative.clone();
    let _ = write!(
        body,
        "<p><a href=\"/agents/{eid}/turns/{n}/trace\">Back to the turn's trace</a></p>\
<section aria-labelledby=\"replay\"><h2 id=\"replay\">Replay</h2><dl class=\"facts\">\
<dt>Status</dt><dd id=\"replay-status\"><strong>{status}</strong></dd><dt>Preset</dt><dd><code>{preset}</code></dd>\
<dt>Error</dt><dd>{error}</dd>\
<dt>Cost (call tag Replay)</dt><dd id=\"replay-cost\">${cost:.4} in {attempts} attempt(s)</dd></dl></section>\
<section aria-labelledby=\"beside\"><h2 id=\"beside\">Original and replay</h2>\
<table id=\"replay-beside\"><thead><tr><th scope=\"col\"></th><th scope=\"col\">Original</th><th scope=\"col\">Replay</th></tr></thead><tbody>\
<tr><td>Ended</td><td>{dec}</td><td id=\"replay-end\">{end}</td></tr>\
<tr><td>Summary</td><td>{why}</td><td>{alt_why}</td></tr>\
<tr><td>Model</td><td>{model}</td><td>{alt_model}</td></tr>\
<tr><td>Actions</td><td>{acts}</td><td>{alt_acts}</td></tr></tbody></table></section>",
        n = r.turn_number,
        status = esc(&r.status),
        preset = esc(&r.preset_id),
        error = or_dash(&r.error),
        cost = r.cost_usd,
        attempts = r.attempts,
        dec = esc(&original.decision_kind),
        why = or_dash(&original.reasoning_summary),
        model = or_dash(&original.served_model),
        acts = original.actions.len(),
        end = alt.as_ref().map_or("\u{2014}".into(), |a| esc(&a.end)),
        alt_why = alt
            .as_ref()
            .map_or("\u{2014}".into(), |a| or_dash(&a.reasoning_summary)),
        alt_model = alt
            .as_ref()
            .map_or("\u{2014}".into(), |a| or_dash(&a.served_models.join(", "))),
        alt_acts = alt
            .as_ref()
            .map_or("\u{2014}".into(), |a| a.actions.len().to_string()),
    );
    body.push_str(
        "<section aria-labelledby=\"replay-actions\"><h2 id=\"replay-actions\">Replay actions</h2>\
<p>Nothing with an effect was run.</p>",
    );
    match &alt {
        Some(a) if !a.actions.is_empty() => {
            body.push_str(
                "<div class=\"scroll\"><table id=\"replayed\"><thead><tr><th scope=\"col\">Tool</th>\
<th scope=\"col\">Answered</th><th scope=\"col\">Arguments</th><th scope=\"col\">Result</th></tr></thead><tbody>",
            );
            for x in &a.actions {
                let _ = write!(
                    body,
                    "<tr><td><code>{}</code></td><td>{}</td><td><pre>{}</pre></td><td><pre>{}</pre></td></tr>",
                    esc(&x.tool_name),
                    esc(&x.answered),
                    esc(&x.arguments_json),
                    esc(&x.result_json),
                );
            }
            body.push_str("</tbody></table></div>");
        }
        _ if running => body.push_str("<p>Not finished yet.</p>"),
        _ => body.push_str("<p>No actions.</p>"),
    }
    body.push_str("</section>");
    Ok(wrap(s, &format!("Replay of turn {}", r.turn_number), &body))
}

#[cfg(test)]
mod tests {
    use super::bar_chart;

    #[test]
    fn the_bar_chart_scales_to_the_largest_bar_and_escapes_labels() {
        let svg = bar_chart("c", "T", &[("<a>".to_owned(), 2.0), ("b".to_owned(), 1.0)]);
        assert!(svg.contains("width=\"380.0\""), "{svg}");
        assert!(svg.contains("width=\"190.0\""), "{svg}");
        assert!(svg.contains("&lt;a&gt;"));
        assert!(!svg.contains("<a>"));
    }

    #[test]
    fn an_all_zero_chart_draws_empty_bars() {
        let svg = bar_chart("c", "T", &[("Mon".to_owned(), 0.0)]);
        assert!(svg.contains("width=\"0.0\""));
    }
}
