//! `genesis.v1.AgentService` (spec §3.9): instance lifecycle (Start, Stop,
//! Reset, Compliance), operator chat, the UI mode switch (source `ui`, via
//! the store's one chokepoint), the mode catalogue and the tenant's edits
//! of it (EditMode: validated at the edge, a tenant-bound caller's budget
//! override held within the platform's per-tick maxima, a preset's
//! credential names re-checked, written and audited by the store), the
//! ledger and a turn's episode trace (GetAgentTrace: the journal with its
//! priced attempts, [`crate::trace`]), the live turn stream (its credential
//! checked again while it is open, open streams capped: [`crate::streams`])
//! and the redactor signal.
//! Control owns every enqueue here.
//! Must never write `active_mode`, the ledger or the queue except through the
//! store calls built for them.

use std::pin::Pin;

use futures::Stream;
use genesis_core::ceilings::{check_tenant_budget_override, mode_bound};
use genesis_core::modes::seeded_budget;
use genesis_core::validate::{MAX_MESSAGE_BYTES, validate_message, validate_mode_name};
use genesis_core::{AgentEventKind, AgentSignalKind, AgentType, InstanceStatus, ModeChangeSource};
use genesis_proto::convert::{invalid_argument, optional_chrono};
use genesis_proto::v1::{self, agent_service_server::AgentService};
use serde_json::json;
use tokio::sync::{broadcast, mpsc};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use super::config::platform_options;
use super::llm::require_preset_keys;
use super::{observe, record_ids};
use crate::auth::{Caller, caller};
use crate::bootstrap::{ensure_compliance, ensure_signalled_redactor};
use crate::convert;
use crate::mode_edit::EditModeCommand;
use crate::state::AppState;
use crate::status::{
    control_status, field_status, limit, opt_text, parse_enum, parse_opt_enum, store_status, uuid,
};
use crate::streams::{Recheck, SessionStream, StreamCredential, next_check, recheck};
use crate::trace::TraceQuery;
use crate::watch::{HubEvent, HubKind};

/// Longest call-site id accepted.
const MAX_CALL_SITE_LEN: usize = 200;
/// Page size bounds of ListMessages and GetLedger.
const DEFAULT_PAGE: i64 = 50;
const MAX_PAGE: i64 = 500;

/// The service.
#[derive(Clone)]
pub struct Agents {
    state: AppState,
}

impl Agents {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }

    async fn require_gate(&self, tenant: Uuid) -> Result<(), Status> {
        if self.state.standing_agents_on(tenant).await? {
            Ok(())
        } else {
            Err(Status::failed_precondition(
                "standing agents are off for this tenant (deploy or tenant level)",
            ))
        }
    }
}

/// Parse `tenant_id` + `instance_id`, authorize the tenant.
fn ids(caller: &Caller, tenant: &str, instance: &str) -> Result<(Uuid, Uuid), Status> {
    let t = caller.tenant("tenant_id", tenant)?;
    let i = uuid("instance_id", instance)?;
    record_ids(t, Some(i));
    Ok((t, i))
}

/// The live stream type.
pub type TurnStream = Pin<Box<dyn Stream<Item = Result<v1::WatchTurnsEvent, Status>> + Send>>;

async fn load_hub_event(state: &AppState, ev: &HubEvent) -> Option<v1::WatchTurnsEvent> {
    use v1::watch_turns_event::Event;
    match &ev.kind {
        HubKind::Turn { ledger_id } => {
            let turns = state
                .store
                .ledger()
                .tail(ev.tenant_id, ev.instance_id, 8)
                .await
                .ok()?;
            let t = turns.iter().find(|t| t.id == *ledger_id)?;
            Some(v1::WatchTurnsEvent {
                event: Some(Event::Turn(convert::turn_event(t))),
            })
        }
        HubKind::Message { message_id } => {
            let msgs = state
                .store
                .messages()
                .list(ev.tenant_id, ev.instance_id, 16)
                .await
                .ok()?;
            let m = msgs.iter().find(|m| m.id == *message_id)?;
            Some(v1::WatchTurnsEvent {
                event: Some(Event::Message(v1::MessageEvent {
                    message: Some(convert::message(m)),
                })),
            })
        }
    }
}

#[tonic::async_trait]
impl AgentService for Agents {
    type WatchTurnsStream = TurnStream;

    async fn list_agents(
        &self,
        request: Request<v1::ListAgentsRequest>,
    ) -> Result<Response<v1::ListAgentsResponse>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/ListAgents", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let agent_type: Option<AgentType> =
                parse_opt_enum("agent_type", req.agent_type.as_deref())?;
            let status: Option<InstanceStatus> = parse_opt_enum("status", req.status.as_deref())?;
            record_ids(t, None);
            let rows = self
                .state
                .store
                .instances()
                .list(t, agent_type)
                .await
                .map_err(store_status)?;
            Ok(v1::ListAgentsResponse {
                agents: rows
                    .iter()
                    .filter(|i| status.is_none_or(|s| i.status == s))
                    .map(convert::instance)
                    .collect(),
            })
        })
        .await
    }

    async fn get_agent(
        &self,
        request: Request<v1::GetAgentRequest>,
    ) -> Result<Response<v1::AgentInstance>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/GetAgent", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let (t, i) = ids(&caller, &req.tenant_id, &req.instance_id)?;
            let row = self
                .state
                .store
                .instances()
                .get(t, i)
                .await
                .map_err(store_status)?;
            Ok(convert::instance(&row))
        })
        .await
    }

    async fn start_agent(
        &self,
        request: Request<v1::StartAgentRequest>,
    ) -> Result<Response<v1::AgentInstance>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/StartAgent", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let (t, i) = ids(&caller, &req.tenant_id, &req.instance_id)?;
            let inst = self
                .state
                .store
                .instances()
                .get(t, i)
                .await
                .map_err(store_status)?;
            if inst.agent_type.is_standing() {
                self.require_gate(t).await?;
            }
            let row = self
                .state
                .store
                .instances()
                .set_status(t, i, InstanceStatus::Active)
                .await
                .map_err(store_status)?;
            Ok(convert::instance(&row))
        })
        .await
    }

    async fn stop_agent(
        &self,
        request: Request<v1::StopAgentRequest>,
    ) -> Result<Response<v1::AgentInstance>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/StopAgent", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let (t, i) = ids(&caller, &req.tenant_id, &req.instance_id)?;
            let row = self
                .state
                .store
                .instances()
                .set_status(t, i, InstanceStatus::Paused)
                .await
                .map_err(store_status)?;
            Ok(convert::instance(&row))
        })
        .await
    }

    async fn reset_agent(
        &self,
        request: Request<v1::ResetAgentRequest>,
    ) -> Result<Response<v1::ResetAgentResponse>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/ResetAgent", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let (t, i) = ids(&caller, &req.tenant_id, &req.instance_id)?;
            let out = self
                .state
                .store
                .reset_instance(t, i)
                .await
                .map_err(store_status)?;
            let row = self
                .state
                .store
                .instances()
                .get(t, i)
                .await
                .map_err(store_status)?;
            Ok(v1::ResetAgentResponse {
                instance: Some(convert::instance(&row)),
                cleared_turns: out.cleared_turns,
                drained_events: out.drained_events,
            })
        })
        .await
    }

    async fn start_compliance(
        &self,
        request: Request<v1::StartComplianceRequest>,
    ) -> Result<Response<v1::AgentInstance>, Status> {
        observe(
            &self.state,
            "/genesis.v1.AgentService/StartCompliance",
            async {
                let caller = caller(&request)?;
                let t = caller.tenant("tenant_id", &request.get_ref().tenant_id)?;
                record_ids(t, None);
                self.require_gate(t).await?;
                let (inst, _) = ensure_compliance(&self.state.store, &self.state.locks, t)
                    .await
                    .map_err(control_status)?;
                let row = self
                    .state
                    .store
                    .instances()
                    .set_status(t, inst.id, InstanceStatus::Active)
                    .await
                    .map_err(store_status)?;
                Ok(convert::instance(&row))
            },
        )
        .await
    }

    async fn stop_compliance(
        &self,
        request: Request<v1::StopComplianceRequest>,
    ) -> Result<Response<v1::AgentInstance>, Status> {
        observe(
            &self.state,
            "/genesis.v1.AgentService/StopCompliance",
            async {
                let caller = caller(&request)?;
                let t = caller.tenant("tenant_id", &request.get_ref().tenant_id)?;
                record_ids(t, None);
                let existing = self
                    .state
                    .store
                    .instances()
                    .list(t, Some(AgentType::Compliance))
                    .await
                    .map_err(store_status)?;
                let inst = existing
                    .first()
                    .ok_or_else(|| Status::not_found("the tenant has no Compliance instance"))?;
                let row = self
                    .state
                    .store
                    .instances()
                    .set_status(t, inst.id, InstanceStatus::Paused)
                    .await
                    .map_err(store_status)?;
                Ok(convert::instance(&row))
            },
        )
        .await
    }

    async fn send_message(
        &self,
        request: Request<v1::SendMessageRequest>,
    ) -> Result<Response<v1::SendMessageResponse>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/SendMessage", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let (t, i) = ids(&caller, &req.tenant_id, &req.instance_id)?;
            validate_message("body", &req.body).map_err(|e| field_status("body", e))?;
            let (message, event) = self
                .state
                .store
                .messages()
                .send_operator_message(t, i, &req.body)
                .await
                .map_err(store_status)?;
            Ok(v1::SendMessageResponse {
                message: Some(convert::message(&message)),
                event_id: event.id.to_string(),
            })
        })
        .await
    }

    async fn list_messages(
        &self,
        request: Request<v1::ListMessagesRequest>,
    ) -> Result<Response<v1::ListMessagesResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.AgentService/ListMessages",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let (t, i) = ids(&caller, &req.tenant_id, &req.instance_id)?;
                let n = limit("limit", req.limit, DEFAULT_PAGE, MAX_PAGE)?;
                let before = optional_chrono("before", req.before.as_ref())?;
                let messages = self.state.store.messages();
                // Existence first, so an unknown instance is NOT_FOUND, not empty.
                self.state
                    .store
                    .instances()
                    .get(t, i)
                    .await
                    .map_err(store_status)?;
                let fetch = if before.is_some() { MAX_PAGE + n } else { n };
                let rows = messages.list(t, i, fetch).await.map_err(store_status)?;
                let out: Vec<_> = rows
                    .iter()
                    .rev()
                    .filter(|m| before.is_none_or(|b| m.created_at < b))
                    .take(usize::try_from(n).unwrap_or(usize::MAX))
                    .map(convert::message)
                    .collect();
                Ok(v1::ListMessagesResponse { messages: out })
            },
        )
        .await
    }

    async fn set_mode(
        &self,
        request: Request<v1::SetModeRequest>,
    ) -> Result<Response<v1::SetModeResponse>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/SetMode", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let (t, i) = ids(&caller, &req.tenant_id, &req.instance_id)?;
            validate_mode_name("mode", &req.mode).map_err(|e| field_status("mode", e))?;
            let change = self
                .state
                .store
                .modes()
                .set_active_mode(t, i, &req.mode, ModeChangeSource::Ui, &caller.actor(), None)
                .await
                .map_err(store_status)?;
            let row = self
                .state
                .store
                .instances()
                .get(t, i)
                .await
                .map_err(store_status)?;
            Ok(v1::SetModeResponse {
                previous_mode: change
                    .from_mode
                    .clone()
                    .or_else(|| genesis_core::default_mode(row.agent_type).map(str::to_owned))
                    .unwrap_or_default(),
                instance: Some(convert::instance(&row)),
                mode_change_event_id: change.id.to_string(),
            })
        })
        .await
    }

    async fn list_modes(
        &self,
        request: Request<v1::ListModesRequest>,
    ) -> Result<Response<v1::ListModesResponse>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/ListModes", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let agent_type: AgentType = parse_enum("agent_type", &req.agent_type)?;
            record_ids(t, None);
            let rows = self
                .state
                .store
                .modes()
                .catalogue_for(t, agent_type)
                .await
                .map_err(store_status)?;
            Ok(v1::ListModesResponse {
                modes: rows.iter().map(convert::mode).collect(),
            })
        })
        .await
    }

    async fn get_mode(
        &self,
        request: Request<v1::GetModeRequest>,
    ) -> Result<Response<v1::Mode>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/GetMode", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let agent_type: AgentType = parse_enum("agent_type", &req.agent_type)?;
            validate_mode_name("mode", &req.mode).map_err(|e| field_status("mode", e))?;
            record_ids(t, None);
            let row = self
                .state
                .store
                .modes()
                .get(t, agent_type, &req.mode)
                .await
                .map_err(store_status)?;
            Ok(convert::mode(&row))
        })
        .await
    }

    async fn edit_mode(
        &self,
        request: Request<v1::EditModeRequest>,
    ) -> Result<Response<v1::EditModeResponse>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/EditMode", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let cmd = EditModeCommand::try_from(req)?;
            record_ids(t, None);
            // A tenant-bound caller's override answers to the platform's
            // per-tick maxima, as the TickMax* keys themselves do, widened
            // only where the catalogue's own seed of the mode is wider.
            if let Some(Some(budget)) = &cmd.edit.budget_override
                && !caller.is_platform()
            {
                let platform = platform_options(&self.state, t).await?;
                let seeded = seeded_budget(cmd.agent_type, &cmd.mode);
                check_tenant_budget_override(budget, &mode_bound(&platform, seeded.as_ref()))
                    .map_err(|e| Status::permission_denied(format!("budget_override: {e}")))?;
            }
            // A preset given to a mode answers to the keys the tenant may
            // use today, as AttachPreset's does; an unknown one is the
            // store's refusal.
            if let Some(Some(named)) = &cmd.edit.preset {
                let presets = self
                    .state
                    .store
                    .llm()
                    .list_presets(t)
                    .await
                    .map_err(store_status)?;
                if let Some(p) = presets
                    .iter()
                    .find(|p| p.id.to_string() == *named || p.name == *named)
                {
                    require_preset_keys(&self.state.llm_keys, t, p)?;
                }
            }
            let actor = caller.actor();
            let out = self
                .state
                .store
                .modes()
                .edit(t, cmd.agent_type, &cmd.mode, &cmd.edit, &actor)
                .await
                .map_err(store_status)?;
            if let Some(event) = &out.event {
                tracing::info!(
                    tenant = %t, agent_type = %cmd.agent_type, mode = %cmd.mode, actor = %actor,
                    event = %event.id, changes = %event.changes, "catalogue mode edited"
                );
            }
            Ok(v1::EditModeResponse {
                mode: Some(convert::mode(&out.mode)),
                changed: out.changes.iter().map(|c| c.field.to_owned()).collect(),
                mode_change_event_id: out.event.map(|e| e.id.to_string()).unwrap_or_default(),
            })
        })
        .await
    }

    async fn get_ledger(
        &self,
        request: Request<v1::GetLedgerRequest>,
    ) -> Result<Response<v1::GetLedgerResponse>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/GetLedger", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let (t, i) = ids(&caller, &req.tenant_id, &req.instance_id)?;
            let n = limit("limit", req.limit, DEFAULT_PAGE, MAX_PAGE)?;
            if req.before.is_some_and(|b| b <= 0) {
                return Err(invalid_argument("before", "must be a positive turn number"));
            }
            self.state
                .store
                .instances()
                .get(t, i)
                .await
                .map_err(store_status)?;
            let ledger = self.state.store.ledger();
            let fetch = if req.before.is_some() {
                MAX_PAGE + n
            } else {
                n
            };
            let rows = ledger.tail(t, i, fetch).await.map_err(store_status)?;
            let mut turns = Vec::new();
            for turn in rows
                .iter()
                .rev()
                .filter(|x| req.before.is_none_or(|b| x.turn_number < b))
                .take(usize::try_from(n).unwrap_or(usize::MAX))
            {
                let actions = ledger.actions(t, turn.id).await.map_err(store_status)?;
                turns.push(convert::ledger_turn(turn, &actions));
            }
            Ok(v1::GetLedgerResponse { turns })
        })
        .await
    }

    async fn get_agent_trace(
        &self,
        request: Request<v1::GetAgentTraceRequest>,
    ) -> Result<Response<v1::AgentTrace>, Status> {
        observe(
            &self.state,
            "/genesis.v1.AgentService/GetAgentTrace",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let q = TraceQuery::try_from(req)?;
                record_ids(t, Some(q.instance_id));
                let trace = self
                    .state
                    .store
                    .traces()
                    .turn(t, q.instance_id, q.turn_number)
                    .await
                    .map_err(store_status)?;
                Ok(crate::trace::agent_trace(&trace))
            },
        )
        .await
    }

    async fn replay_turn(
        &self,
        request: Request<v1::ReplayTurnRequest>,
    ) -> Result<Response<v1::TurnReplay>, Status> {
        observe(&self.state, "/genesis.v1.AgentService/ReplayTurn", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let q = crate::replay::ReplayQuery::try_from(req)?;
            record_ids(t, Some(q.instance_id));
            crate::replay::ask(&self.state, t, q).await
        })
        .await
    }

    async fn get_turn_replay(
        &self,
        request: Request<v1::GetTurnReplayRequest>,
    ) -> Result<Response<v1::TurnReplay>, Status> {
        observe(
            &self.state,
            "/genesis.v1.AgentService/GetTurnReplay",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                let id = crate::status::uuid("replay_id", &req.replay_id)?;
                record_ids(t, None);
                crate::replay::read(&self.state.store, t, id).await
            },
        )
        .await
    }

    async fn watch_turns(
        &self,
        request: Request<v1::WatchTurnsRequest>,
    ) -> Result<Response<Self::WatchTurnsStream>, Status> {
        let state = self.state.clone();
        observe(&self.state, "/genesis.v1.AgentService/WatchTurns", async move {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let only = crate::status::opt_uuid("instance_id", req.instance_id.as_deref())?;
            record_ids(t, only);
            if let Some(i) = only {
                state.store.instances().get(t, i).await.map_err(store_status)?;
            }
            // The dashboard's stream re-checks its session; a gRPC one its token.
            let credential = match request.extensions().get::<SessionStream>() {
                Some(s) => StreamCredential::Session(s.session_sha256.clone()),
                None => StreamCredential::Token(caller.token_id),
            };
            // Held until the stream's task ends: that frees the slot.
            let slot = state.streams.acquire(caller.token_id, t)?;
            let mut rx = state.hub.subscribe();
            let (tx, out) = mpsc::channel::<Result<v1::WatchTurnsEvent, Status>>(64);
            let shutdown = state.shutdown.clone();
            let every = state.config.stream_recheck();
            tokio::spawn(async move {
                let _slot = slot;
                // The first check at once: it learns the credential's expiry.
                let mut check_at = tokio::time::Instant::now();
                loop {
                    let ev = tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tx.closed() => return,
                        () = tokio::time::sleep_until(check_at) => {
                            match recheck(&state.store, &credential).await {
                                Recheck::Usable { expires_at } => {
                                    check_at = next_check(tokio::time::Instant::now(), every, expires_at);
                                }
                                Recheck::Ended(status) => {
                                    tracing::info!(tenant = %t, token = %caller.token_id, "WatchTurns closed: {}", status.message());
                                    let _ = tx.send(Err(status)).await;
                                    return;
                                }
                                Recheck::Unknown(e) => {
                                    tracing::warn!(tenant = %t, error = %e, "WatchTurns: the credential could not be checked again; the stream stays open");
                                    check_at = tokio::time::Instant::now() + every;
                                }
                            }
                            continue;
                        }
                        ev = rx.recv() => ev,
                    };
                    match ev {
                        Ok(ev) => {
                            if ev.tenant_id != t || only.is_some_and(|i| i != ev.instance_id) {
                                continue;
                            }
                            if let Some(item) = load_hub_event(&state, &ev).await
                                && tx.send(Ok(item)).await.is_err()
                            {
                                return;
                            }
                        }
                        Err(broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(tenant = %t, skipped = n, "WatchTurns subscriber lagged");
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    }
                }
            });
            let stream: TurnStream = Box::pin(tokio_stream::wrappers::ReceiverStream::new(out));
            Ok(stream)
        })
        .await
    }

    async fn raise_redactor_signal(
        &self,
        request: Request<v1::RaiseRedactorSignalRequest>,
    ) -> Result<Response<v1::RaiseRedactorSignalResponse>, Status> {
        observe(
            &self.state,
            "/genesis.v1.AgentService/RaiseRedactorSignal",
            async {
                let caller = caller(&request)?;
                let req = request.get_ref();
                let t = caller.tenant("tenant_id", &req.tenant_id)?;
                crate::status::text("call_site_id", &req.call_site_id, MAX_CALL_SITE_LEN)?;
                let kind: AgentSignalKind = parse_enum("signal_kind", &req.signal_kind)?;
                opt_text("note", &req.note, MAX_MESSAGE_BYTES)?;
                record_ids(t, None);
                let (inst, created) = ensure_signalled_redactor(
                    &self.state.store,
                    &self.state.locks,
                    t,
                    &req.call_site_id,
                )
                .await
                .map_err(control_status)?;
                let payload = json!({
                    "signalKind": kind.as_str(),
                    "callSiteId": req.call_site_id,
                    "note": req.note,
                    "raisedBy": caller.actor(),
                });
                let out = self
                    .state
                    .store
                    .events()
                    .enqueue(
                        t,
                        inst.id,
                        AgentEventKind::ExternalSignalReceived,
                        &payload,
                        None,
                    )
                    .await
                    .map_err(store_status)?;
                Ok(v1::RaiseRedactorSignalResponse {
                    instance_id: inst.id.to_string(),
                    event_id: out.event.id.to_string(),
                    instance_created: created,
                })
            },
        )
        .await
    }
}
