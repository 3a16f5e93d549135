//! What the model is actually told, end to end: a real claim against the
//! migrated database through the real AgentPod server, the pod's planning
//! loop run on that bundle, and a recording `ChatClient` (the scripted
//! provider's answers, every request kept) injected through the
//! `ProviderFactory` seam. Covers the per-type base prompt and per-mode
//! fragment in the system text, the Compliance Research budget, and the
//! operator-chat tail in the objective.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use genesis_agent_pod::{Invoker, PodContext, PodMetrics, Supervisor, TickIds, run_tick};
use genesis_core::modes::seed_catalogue;
use genesis_core::prompt::{base_system_prompt, compose_system_prompt};
use genesis_core::{AgentType, BudgetEnvelope, InstanceStatus, MessageDirection, ModeChangeSource};
use genesis_llm::{
    ChatClient, ChatMessage, ChatRequest, ChatResponse, CredentialRef, FallbackInvoker, LlmError,
    LlmMetrics, ModelCouple, ProviderFactory, ScriptedProvider,
};
use genesis_proto::v1 as pb;
use genesis_proto::v1::claim_tick_response::Result as Claim;
use genesis_store::NewInstance;
use sqlx::PgPool;
use uuid::Uuid;

/// The scripted provider's answers, with every request it was sent kept.
#[derive(Default)]
struct Recording {
    scripted: ScriptedProvider,
    requests: Mutex<Vec<ChatRequest>>,
}

impl Recording {
    fn take(&self) -> Vec<ChatRequest> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }
}

#[async_trait::async_trait]
impl ChatClient for Recording {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let response = self.scripted.respond(&request);
        self.requests.lock().unwrap().push(request);
        Ok(response)
    }
}

/// Every couple of every chain is served by the one recording client.
struct RecordingFactory(Arc<Recording>);

impl ProviderFactory for RecordingFactory {
    fn client(
        &self,
        _couple: &ModelCouple,
        _credential: Option<&CredentialRef>,
    ) -> Result<Arc<dyn ChatClient>, LlmError> {
        Ok(self.0.clone())
    }
}

/// A pod talking to the harness's supervisor, its model calls recorded.
fn pod(h: &common::Harness, recording: &Arc<Recording>) -> PodContext {
    let llm = FallbackInvoker::new(Arc::new(RecordingFactory(recording.clone())))
        .with_metrics(Arc::new(LlmMetrics::default()));
    let credentials: HashMap<String, String> = HashMap::new();
    PodContext {
        supervisor: Supervisor::connect_lazy(&format!("http://{}", h.grpc), &h.token).unwrap(),
        invoker: Invoker::new(llm, Arc::new(credentials)),
        metrics: Arc::new(PodMetrics::default()),
        tool_schemas: Default::default(),
    }
}

/// An active instance of `agent_type` outside the foundational phase (so
/// its budget is the mode's or the policy's, not lifted), with no event,
/// switched to `mode` through the chokepoint when one is named.
async fn instance(h: &common::Harness, agent_type: AgentType, mode: Option<&str>) -> Uuid {
    let mut new = NewInstance::foundational(agent_type, InstanceStatus::Active);
    new.workset_deadline = None;
    new.seed_initialized = false;
    let id = h.store.instances().create(h.tenant, new).await.unwrap().id;
    if let Some(mode) = mode {
        h.store
            .modes()
            .set_active_mode(h.tenant, id, mode, ModeChangeSource::Ui, "test", None)
            .await
            .unwrap();
    }
    id
}

/// Wake `instance` with an operator message and claim the tick it makes.
async fn wake_and_claim(
    ctx: &PodContext,
    h: &common::Harness,
    instance: Uuid,
    text: &str,
) -> pb::TickBundle {
    h.store
        .messages()
        .send_operator_message(h.tenant, instance, text)
        .await
        .unwrap();
    claim(ctx, h, instance).await
}

async fn claim(ctx: &PodContext, h: &common::Harness, instance: Uuid) -> pb::TickBundle {
    let resp = ctx
        .supervisor
        .claim_tick(pb::ClaimTickRequest {
            instance_id: instance.to_string(),
            tenant_id: h.tenant.to_string(),
            event_id: None,
        })
        .await
        .unwrap();
    match resp.result {
        Some(Claim::Bundle(b)) => b,
        other => panic!("expected a bundle, got {other:?}"),
    }
}

fn ids(h: &common::Harness, instance: Uuid, b: &pb::TickBundle) -> TickIds {
    TickIds {
        session_id: b.session_id.clone(),
        instance_id: instance.to_string(),
        tenant_id: h.tenant.to_string(),
    }
}

/// The first user message of a request: the objective.
fn objective(request: &ChatRequest) -> &str {
    request
        .messages
        .iter()
        .find_map(|m| match m {
            ChatMessage::User { content } => Some(content.as_str()),
            _ => None,
        })
        .expect("every request carries the objective")
}

/// For each of the ten seeded modes, the system text the pod sends the
/// model is the type's base prompt for this tenant followed by that mode's
/// fragment as migrated — a fragment that is non-empty and no other mode's,
/// so the check cannot pass on an empty or shared one.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn every_mode_sends_its_types_base_prompt_and_its_own_fragment(pool: PgPool) {
    let h = common::start(pool).await;
    let recording = Arc::new(Recording::default());
    let ctx = pod(&h, &recording);
    let tenant = h.tenant.to_string();
    let mut fragments = HashSet::new();
    let mut modes = 0;
    for agent_type in [
        AgentType::Soa,
        AgentType::Compliance,
        AgentType::PromptRedactor,
    ] {
        let rows = h.store.modes().catalogue(agent_type).await.unwrap();
        let base = base_system_prompt(agent_type, &tenant);
        for seed in seed_catalogue(agent_type) {
            let label = format!("{agent_type} {}", seed.name);
            let fragment = rows
                .iter()
                .find(|r| r.name == seed.name)
                .map(|r| r.prompt_fragment.clone())
                .unwrap();
            assert!(!fragment.trim().is_empty(), "{label}: an empty fragment");
            assert!(
                fragments.insert(fragment.clone()),
                "{label}: a fragment shared with another mode"
            );
            let id = instance(&h, agent_type, Some(&seed.name)).await;
            let b = wake_and_claim(&ctx, &h, id, "What is the status?").await;
            assert_eq!(b.mode.as_ref().unwrap().name, seed.name, "{label}");
            run_tick(&ctx, &ids(&h, id, &b), b).await.unwrap();
            let requests = recording.take();
            assert!(!requests.is_empty(), "{label}: the model was called");
            for r in &requests {
                assert!(r.system.starts_with(&base), "{label}: the base comes first");
                assert!(
                    r.system.contains(&fragment),
                    "{label}: the fragment is sent"
                );
                assert_eq!(
                    r.system,
                    compose_system_prompt(&base, &fragment, ""),
                    "{label}: base, blank line, fragment, nothing else"
                );
            }
            modes += 1;
        }
    }
    assert_eq!(modes, 10);
}

/// Compliance Research runs on its widened budget through a real claim
/// (the migrated row's override), a Compliance instance in its default
/// mode on the standard budget.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn compliance_research_is_claimed_with_the_widened_budget(pool: PgPool) {
    let h = common::start(pool).await;
    let recording = Arc::new(Recording::default());
    let ctx = pod(&h, &recording);
    let research = instance(&h, AgentType::Compliance, Some("Research")).await;
    let cadence = instance(&h, AgentType::Compliance, None).await;
    let b = wake_and_claim(&ctx, &h, research, "Write the access-control chapter.").await;
    assert_eq!(b.mode.as_ref().unwrap().name, "Research");
    assert_eq!(
        b.budget.unwrap(),
        pb::BudgetEnvelope {
            max_tokens: Some(48_000),
            max_tool_calls: Some(24),
            max_wall_ms: Some(600_000),
            max_cost_usd: Some(4.00),
            max_turns: Some(24),
            // Not part of the override: the standard per-turn cap.
            max_output_tokens_per_turn: Some(4_096),
        }
    );
    let b = wake_and_claim(&ctx, &h, cadence, "How are we doing?").await;
    assert_eq!(b.mode.as_ref().unwrap().name, "Cadence");
    let standard = BudgetEnvelope::STANDING_DEFAULT;
    assert_eq!(
        b.budget.unwrap(),
        pb::BudgetEnvelope {
            max_tokens: Some(24_000),
            max_tool_calls: Some(12),
            max_wall_ms: Some(300_000),
            max_cost_usd: Some(1.50),
            max_turns: Some(12),
            max_output_tokens_per_turn: Some(4_096),
        }
    );
    assert_eq!(standard.max_tokens.limited(), Some(24_000));
}

/// A reply is planned with the conversation: of twelve messages, the
/// objective carries the last ten, oldest first, both directions, up to
/// the message the tick answers (not one sent after it), a 10 KB body cut
/// to the bound with a marker. A heartbeat is sent no chat at all.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_reply_is_planned_with_the_last_ten_chat_messages(pool: PgPool) {
    let h = common::start(pool).await;
    let recording = Arc::new(Recording::default());
    let ctx = pod(&h, &recording);
    // The harness's SOA opens with AgentInitialized: no chat for it.
    let b = claim(&ctx, &h, h.instance).await;
    assert_eq!(b.event.as_ref().unwrap().kind, "AgentInitialized");
    assert_eq!(b.chat_tail, None);
    run_tick(&ctx, &ids(&h, h.instance, &b), b).await.unwrap();
    recording.take();

    let soa = instance(&h, AgentType::Soa, None).await;
    let long = format!("long {}", "x".repeat(10 * 1024));
    // Messages 1..=11 in turn (odd: the agent's, even: the operator's);
    // message 7 is 10 KB.
    for n in 1..=11 {
        let direction = if n % 2 == 1 {
            MessageDirection::AgentToOperator
        } else {
            MessageDirection::OperatorToAgent
        };
        let body = if n == 7 {
            long.clone()
        } else {
            format!("message {n}")
        };
        h.store
            .messages()
            .append(h.tenant, soa, direction, &body)
            .await
            .unwrap();
    }
    // Message 12 wakes the agent; message 13 arrives before its tick runs.
    h.store
        .messages()
        .send_operator_message(h.tenant, soa, "message 12")
        .await
        .unwrap();
    h.store
        .messages()
        .send_operator_message(h.tenant, soa, "message 13")
        .await
        .unwrap();
    let b = claim(&ctx, &h, soa).await;
    let tail = b
        .chat_tail
        .clone()
        .expect("an operator message carries the chat");
    assert_eq!(tail.messages.len(), 10);
    assert!(tail.earlier_omitted);
    run_tick(&ctx, &ids(&h, soa, &b), b).await.unwrap();
    let requests = recording.take();
    let objective = objective(&requests[0]);

    assert!(objective.contains("[earlier messages omitted]"));
    let mut at = 0;
    for n in 3..=12 {
        let who = if n % 2 == 1 { "you" } else { "operator" };
        let line = if n == 7 {
            format!("- {who}: long xxx")
        } else {
            format!("- {who}: message {n}\n")
        };
        let found = objective[at..]
            .find(&line)
            .unwrap_or_else(|| panic!("message {n} missing or out of order in:\n{objective}"));
        at += found + line.len();
    }
    for absent in [
        "- you: message 1\n",
        "- operator: message 2\n",
        "message 13",
    ] {
        assert!(!objective.contains(absent), "{absent:?} in:\n{objective}");
    }
    // The 10 KB message: its first 1,000 characters and a marker, no more.
    let bound = genesis_core::prompt::CHAT_MESSAGE_MAX_CHARS as usize;
    let shown: String = long.chars().take(bound).collect();
    assert!(objective.contains(&format!(
        "- you: {shown} [truncated: first {bound} of {} characters shown]\n",
        long.chars().count()
    )));
    assert!(!objective.contains(&"x".repeat(bound)));
    assert!(objective.len() < 8 * 1024, "{} bytes", objective.len());
}
