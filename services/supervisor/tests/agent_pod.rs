//! The AgentPod service end to end: the real server on 127.0.0.1:0 through
//! `genesis_supervisor::serve`, a real tonic client, and a fresh PostgreSQL
//! database per test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use genesis_core::{AgentType, InstanceStatus, TokenScope};
use genesis_proto::auth::{bearer_value, generate_token, token_sha256};
use genesis_proto::v1 as pb;
use genesis_proto::v1::agent_pod_client::AgentPodClient;
use genesis_proto::v1::claim_tick_response::Result as Claim;
use genesis_store::{NewInstance, Store, inspect};
use genesis_supervisor::SupervisorConfig;
use sqlx::PgPool;
use tonic::transport::Channel;
use tonic::{Code, Request};
use uuid::Uuid;

/// The shared fixture (`common::Harness`: store, pool, tenant, SOA, token,
/// channel, http address) plus a typed client.
struct Harness {
    base: common::Harness,
    client: AgentPodClient<Channel>,
}

impl std::ops::Deref for Harness {
    type Target = common::Harness;

    fn deref(&self) -> &common::Harness {
        &self.base
    }
}

async fn start(pool: PgPool) -> Harness {
    start_with(pool, |_| {}).await
}

async fn start_with(pool: PgPool, configure: impl FnOnce(&mut SupervisorConfig)) -> Harness {
    let base = common::start_with(pool, configure).await;
    Harness {
        client: AgentPodClient::new(base.channel.clone()),
        base,
    }
}

fn authed<T>(token: &str, msg: T) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut()
        .insert("authorization", bearer_value(token).unwrap());
    r
}

impl Harness {
    fn req<T>(&self, msg: T) -> Request<T> {
        authed(&self.token, msg)
    }

    async fn claim_instance(&mut self, instance: Uuid) -> pb::TickBundle {
        let resp = self
            .client
            .claim_tick(self.req(pb::ClaimTickRequest {
                instance_id: instance.to_string(),
                tenant_id: self.tenant.to_string(),
                event_id: None,
            }))
            .await
            .unwrap()
            .into_inner();
        match resp.result {
            Some(Claim::Bundle(b)) => b,
            other => panic!("expected a bundle, got {other:?}"),
        }
    }

    async fn claim(&mut self) -> pb::TickBundle {
        self.claim_instance(self.instance).await
    }

    fn invoke(
        &self,
        session: &str,
        call_id: &str,
        tool: &str,
        args: &str,
    ) -> Request<pb::InvokeToolRequest> {
        self.req(pb::InvokeToolRequest {
            event_id: String::new(),
            session_id: session.to_owned(),
            instance_id: self.instance.to_string(),
            tenant_id: self.tenant.to_string(),
            call_id: call_id.to_owned(),
            tool_name: tool.to_owned(),
            arguments_json: args.to_owned(),
        })
    }

    /// A CompleteTick that must succeed.
    async fn complete(&self, req: pb::CompleteTickRequest) -> pb::CompleteTickResponse {
        self.client
            .clone()
            .complete_tick(self.req(req))
            .await
            .unwrap()
            .into_inner()
    }

    /// An operator message to `instance`: the event its next claim takes.
    async fn wake(&self, instance: Uuid, text: &str) {
        self.store
            .messages()
            .send_operator_message(self.tenant, instance, text)
            .await
            .unwrap();
    }

    /// Put the SOA's lease a second in the past, its session unchanged.
    async fn expire_lease(&self) {
        inspect::force_lease_expired(&self.pool, self.instance)
            .await
            .unwrap();
    }

    async fn count(&self, table: &str) -> i64 {
        inspect::count_rows(&self.pool, table).await.unwrap()
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn claim_tick_returns_the_bundle(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    assert!(Uuid::parse_str(&b.session_id).is_ok());
    assert_eq!(b.event.as_ref().unwrap().kind, "AgentInitialized");
    let mode = b.mode.unwrap();
    assert_eq!(mode.name, "Strategic");
    assert!(mode.toolset.contains(&"soa_send_message".to_owned()));
    // The SOA's base for this tenant, then the mode's fragment.
    let base = genesis_core::prompt::base_system_prompt(AgentType::Soa, &h.tenant.to_string());
    assert_eq!(
        mode.system_prompt,
        genesis_core::prompt::compose_system_prompt(&base, &mode.prompt_fragment, "")
    );
    // ... and that fragment is the migrated one, never an empty string.
    assert!(
        mode.prompt_fragment.starts_with("MODE: Strategic — "),
        "{:?}",
        mode.prompt_fragment
    );
    let tool_names: Vec<_> = b.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        tool_names.contains(&"soa_send_message") && tool_names.contains(&"soa_propose_decision")
    );
    // Foundational phase: every axis unlimited, the per-turn cap raised.
    let budget = b.budget.unwrap();
    assert_eq!(budget.max_tokens, None);
    assert_eq!(budget.max_turns, None);
    assert_eq!(budget.max_output_tokens_per_turn, Some(16_384));
    let chain = b.preset_chain.unwrap();
    assert_eq!(chain.requested_site_id, "Agent:Planning");
    assert!(chain.preset_id.is_empty());
    assert_eq!(chain.couples[0].provider, "scripted");
    let credit = b.credit.unwrap();
    assert_eq!(credit.limit_usd, 60.0);
    assert!(!credit.exhausted);
    assert!(b.ops_digest.unwrap().bucket.contains("deadlocks="));
    assert!(b.open_items.unwrap().missions.is_empty());
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_bound_preset_on_the_parent_site_is_the_chain(pool: PgPool) {
    let mut h = start(pool).await;
    let couple = |m: &str, p: &str| genesis_store::llm::PresetCouple {
        model: m.into(),
        provider: p.into(),
        backend: String::new(),
        credentials: vec!["ANTHROPIC_API_KEY".into()],
    };
    let preset = h
        .store
        .llm()
        .create_preset(
            h.tenant,
            genesis_store::llm::NewPreset {
                name: "family".into(),
                primary: couple("claude-sonnet-4-5", "anthropic"),
                fallback: vec![couple("scripted-1", "scripted")],
                overlays: serde_json::json!({}),
            },
        )
        .await
        .unwrap();
    h.store
        .llm()
        .bind_site(h.tenant, "Agent:Default", preset.id)
        .await
        .unwrap();
    let chain = h.claim().await.preset_chain.unwrap();
    assert_eq!(chain.resolved_site_id, "Agent:Default");
    assert_eq!(chain.preset_id, preset.id.to_string());
    assert_eq!(chain.couples.len(), 2);
    assert_eq!(chain.couples[0].model, "claude-sonnet-4-5");
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_weekly_ceiling_is_reported_exhausted_in_the_foundational_phase(pool: PgPool) {
    let mut h = start(pool).await;
    let week = genesis_store::credit::week_start(chrono::Utc::now());
    h.store
        .credit()
        .draw_down(h.tenant, week, 60.0, 60.0)
        .await
        .unwrap();
    let b = h.claim().await;
    assert!(b.instance.unwrap().is_building_starting_workset);
    let credit = b.credit.unwrap();
    assert!(credit.exhausted, "{credit:?}");
    assert_eq!(credit.remaining_usd, 0.0);
    assert!(credit.enforcement_enabled);
}

/// With enforcement off the window is only metered: the bundle still says
/// nothing remains, and says enforcement is off, so the pod plans on.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_metered_window_reports_exhaustion_with_enforcement_off(pool: PgPool) {
    let mut h = start(pool).await;
    inspect::fixture_config_row(
        &h.pool,
        h.tenant,
        genesis_core::options::keys::CREDIT_ENFORCEMENT_ENABLED,
        "false",
    )
    .await
    .unwrap();
    let week = genesis_store::credit::week_start(chrono::Utc::now());
    h.store
        .credit()
        .draw_down(h.tenant, week, 60.0, 61.0)
        .await
        .unwrap();
    let b = h.claim().await;
    let credit = b.credit.unwrap();
    assert!(credit.exhausted, "{credit:?}");
    assert!(!credit.enforcement_enabled, "{credit:?}");
    assert_eq!(credit.remaining_usd, 0.0);
    // A metered window does not cap the envelope's dollar axis either.
    assert_eq!(b.budget.unwrap().max_cost_usd, None);
}

/// A second foundational instance of the harness's tenant, for a claim that
/// does not wait on the first instance's lease.
async fn another_foundational(h: &Harness) -> Uuid {
    h.store
        .instances()
        .create(
            h.tenant,
            NewInstance::foundational(AgentType::Soa, InstanceStatus::Active),
        )
        .await
        .unwrap()
        .id
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_foundational_claim_caps_the_dollar_axis_at_the_credit_left(pool: PgPool) {
    let mut h = start(pool).await;
    let week = genesis_store::credit::week_start(chrono::Utc::now());
    h.store
        .credit()
        .draw_down(h.tenant, week, 60.0, 58.5)
        .await
        .unwrap();
    let b = h.claim().await;
    assert!(b.instance.unwrap().is_building_starting_workset);
    let budget = b.budget.unwrap();
    assert_eq!(budget.max_cost_usd, Some(1.50), "{budget:?}");
    // Every other axis keeps the foundational exemption.
    assert_eq!(budget.max_tokens, None);
    assert_eq!(budget.max_turns, None);
    assert_eq!(budget.max_tool_calls, None);
    assert_eq!(budget.max_wall_ms, None);
    assert_eq!(budget.max_output_tokens_per_turn, Some(16_384));
    assert_eq!(b.credit.unwrap().remaining_usd, 1.50);

    // With enforcement off the window is only metered: no dollar ceiling.
    h.store
        .config()
        .set(
            Some(h.tenant),
            "AgentDispatcher:CreditEnforcementEnabled",
            "false",
        )
        .await
        .unwrap();
    let other = another_foundational(&h).await;
    let b = h.claim_instance(other).await;
    assert!(b.instance.unwrap().is_building_starting_workset);
    assert_eq!(b.budget.unwrap().max_cost_usd, None);
    assert!(!b.credit.unwrap().enforcement_enabled);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_standing_claim_takes_the_smaller_of_its_dollar_axis_and_the_credit_left(pool: PgPool) {
    let mut h = start(pool).await;
    let other = another_foundational(&h).await;
    for i in [h.instance, other] {
        h.store
            .instances()
            .complete_workset(h.tenant, i)
            .await
            .unwrap();
    }
    // Plenty left: the policy's own $1.50 stands.
    assert_eq!(h.claim().await.budget.unwrap().max_cost_usd, Some(1.50));
    let week = genesis_store::credit::week_start(chrono::Utc::now());
    h.store
        .credit()
        .draw_down(h.tenant, week, 60.0, 59.75)
        .await
        .unwrap();
    assert_eq!(
        h.claim_instance(other).await.budget.unwrap().max_cost_usd,
        Some(0.25)
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_config_write_changes_the_next_claims_budget(pool: PgPool) {
    let mut h = start(pool).await;
    let other = h
        .store
        .instances()
        .create(
            h.tenant,
            NewInstance::foundational(AgentType::Soa, InstanceStatus::Active),
        )
        .await
        .unwrap()
        .id;
    for i in [h.instance, other] {
        h.store
            .instances()
            .complete_workset(h.tenant, i)
            .await
            .unwrap();
    }
    assert_eq!(h.claim().await.budget.unwrap().max_turns, Some(12));
    h.store
        .config()
        .set(Some(h.tenant), "AgentDispatcher:TickMaxTurns", "3")
        .await
        .unwrap();
    assert_eq!(
        h.claim_instance(other).await.budget.unwrap().max_turns,
        Some(3)
    );
}

/// A mode's budget override written before the platform lowered its
/// per-tick maxima never lifts a claim above them: each axis above is
/// brought down to the platform's value, an axis below it stands, and an
/// override may still exceed the tenant's own lowered default.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_stale_mode_override_never_takes_a_claim_past_the_platforms_maxima(pool: PgPool) {
    use genesis_core::budget::BudgetOverride;
    use genesis_core::mode_edit::ModeEdit;
    use genesis_core::options::keys::{TICK_MAX_DOLLARS, TICK_MAX_TURNS};
    let mut h = start(pool).await;
    let standing = [h.instance, another_foundational(&h).await];
    for i in standing {
        h.store
            .instances()
            .complete_workset(h.tenant, i)
            .await
            .unwrap();
    }
    let mode = genesis_core::modes::default_mode(AgentType::Soa).unwrap();
    h.store
        .modes()
        .edit(
            h.tenant,
            AgentType::Soa,
            mode,
            &ModeEdit {
                budget_override: Some(Some(BudgetOverride {
                    max_turns: Some(40),
                    max_dollars: Some(5.0),
                    max_tool_calls: Some(2),
                    ..BudgetOverride::default()
                })),
                ..ModeEdit::default()
            },
            "test",
        )
        .await
        .unwrap();
    let store = h.store.clone();
    let config = store.config();
    config.set(None, TICK_MAX_TURNS, "20").await.unwrap();
    config
        .set_by_tenant(h.tenant, TICK_MAX_TURNS, "4")
        .await
        .unwrap();
    let b = h.claim_instance(standing[0]).await.budget.unwrap();
    assert_eq!(
        (b.max_turns, b.max_tool_calls),
        (Some(20), Some(2)),
        "above the tenant's own 4, held at the platform's 20: {b:?}"
    );
    config.set(None, TICK_MAX_TURNS, "3").await.unwrap();
    config.set(None, TICK_MAX_DOLLARS, "0.25").await.unwrap();
    let b = h.claim_instance(standing[1]).await.budget.unwrap();
    assert_eq!(
        (b.max_turns, b.max_cost_usd, b.max_tool_calls),
        (Some(3), Some(0.25), Some(2)),
        "{b:?}"
    );
}

/// Platform-only ceilings: a claim takes the tenant's own value of a
/// bounded key only within the platform's value for the tenant, however
/// stale the tenant's row; the platform's own row for the tenant lifts it
/// past the global value and outlives the tenant lowering beneath it.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenant_row_never_takes_a_claim_past_the_platforms_value(pool: PgPool) {
    use genesis_core::options::keys::{
        CREDIT_ENFORCEMENT_ENABLED, TICK_MAX_TURNS, WEEKLY_CREDIT_USD,
    };
    let mut h = start(pool).await;
    let mut standing = vec![h.instance];
    for _ in 0..4 {
        standing.push(another_foundational(&h).await);
    }
    for i in &standing {
        h.store
            .instances()
            .complete_workset(h.tenant, *i)
            .await
            .unwrap();
    }
    let store = h.store.clone();
    let config = store.config();
    let t = h.tenant;

    // The tenant lowered within the platform's values: its own hold.
    config.set(None, WEEKLY_CREDIT_USD, "100").await.unwrap();
    config
        .set_by_tenant(t, WEEKLY_CREDIT_USD, "80")
        .await
        .unwrap();
    config.set_by_tenant(t, TICK_MAX_TURNS, "10").await.unwrap();
    let b = h.claim_instance(standing[0]).await;
    assert_eq!(b.credit.unwrap().limit_usd, 80.0);
    assert_eq!(b.budget.unwrap().max_turns, Some(10));

    // The platform lowers its values below the tenant's rows: its own hold.
    config.set(None, WEEKLY_CREDIT_USD, "20").await.unwrap();
    config.set(None, TICK_MAX_TURNS, "5").await.unwrap();
    let b = h.claim_instance(standing[1]).await;
    assert_eq!(b.credit.unwrap().limit_usd, 20.0, "the platform's credit");
    assert_eq!(b.budget.unwrap().max_turns, Some(5), "the platform's turns");

    // A tenant row switching enforcement off (as one written before the
    // check existed) switches nothing off.
    config
        .set_by_tenant(t, CREDIT_ENFORCEMENT_ENABLED, "false")
        .await
        .unwrap();
    let b = h.claim_instance(standing[2]).await;
    assert!(b.credit.unwrap().enforcement_enabled);

    // The platform grants this tenant more than the global value ...
    config.set(Some(t), WEEKLY_CREDIT_USD, "500").await.unwrap();
    let b = h.claim_instance(standing[3]).await;
    assert_eq!(b.credit.unwrap().limit_usd, 500.0);
    // ... the tenant lowers beneath the grant, which stays the platform's.
    config
        .set_by_tenant(t, WEEKLY_CREDIT_USD, "300")
        .await
        .unwrap();
    let b = h.claim_instance(standing[4]).await;
    assert_eq!(b.credit.unwrap().limit_usd, 300.0);
    let layers = config.layers(Some(t)).await.unwrap();
    assert_eq!(layers.platform[WEEKLY_CREDIT_USD], "500");
    assert_eq!(layers.effective[WEEKLY_CREDIT_USD], "300");
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn invoke_tool_with_a_lost_lease_writes_nothing(pool: PgPool) {
    let mut h = start(pool).await;
    h.claim().await;
    let stale = Uuid::new_v4().to_string();
    let err = h
        .client
        .invoke_tool(h.invoke(&stale, "c1", "soa_send_message", r#"{"body":"hi"}"#))
        .await
        .unwrap_err();
    assert!(genesis_proto::convert::is_lease_lost(&err), "{err:?}");
    assert_eq!(h.count("agent_messages").await, 0);
    assert_eq!(h.count("tool_invocations").await, 0);
}

/// The holder's own session after its lease ran out, before anyone else
/// claimed: InvokeTool answers LEASE_LOST and writes nothing. A call the
/// session made and reports now was billed by the provider, so
/// RecordCallAttempt answers LEASE_LOST too (the tick ends) but keeps the
/// attempt, its snapshot and its spend. A session id this supervisor never
/// issued writes nothing.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_expired_lease_is_lost_for_tools_and_kept_for_a_billed_attempt(pool: PgPool) {
    let mut h = start(pool).await;
    let s = h.claim().await.session_id;
    h.expire_lease().await;
    let err = h
        .client
        .clone()
        .invoke_tool(h.invoke(&s, "c1", "soa_send_message", r#"{"body":"hi"}"#))
        .await
        .unwrap_err();
    assert!(genesis_proto::convert::is_lease_lost(&err), "{err:?}");
    let attempt = |session: &str| pb::RecordCallAttemptRequest {
        journal_step_json: String::new(),
        event_id: String::new(),
        session_id: session.to_owned(),
        instance_id: h.instance.to_string(),
        tenant_id: h.tenant.to_string(),
        invocation_id: "inv-1".into(),
        attempt: Some(pb::CallAttempt {
            requested_model: "claude-sonnet-4-5".into(),
            served_model: "claude-sonnet-4-5".into(),
            provider: "anthropic".into(),
            credential_name: "ANTHROPIC_API_KEY".into(),
            outcome: "success".into(),
            input_tokens: 1000,
            output_tokens: 1000,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            latency_ms: 5,
            error_message: String::new(),
        }),
        prompt_overlay_sha256: String::new(),
    };
    // A session nobody issued: refused, nothing written.
    let forged = Uuid::new_v4().to_string();
    let err = h
        .client
        .clone()
        .record_call_attempt(h.req(attempt(&forged)))
        .await
        .unwrap_err();
    assert!(genesis_proto::convert::is_lease_lost(&err), "{err:?}");
    assert_eq!(h.count("llm_call_snapshots").await, 0);
    assert_eq!(h.count("llm_call_attempts").await, 0);
    assert_eq!(h.count("credit_windows").await, 0);
    // The genuine session's billed call: LEASE_LOST, and on the books.
    let err = h
        .client
        .clone()
        .record_call_attempt(h.req(attempt(&s)))
        .await
        .unwrap_err();
    assert!(genesis_proto::convert::is_lease_lost(&err), "{err:?}");
    assert_eq!(h.count("agent_messages").await, 0);
    assert_eq!(h.count("tool_invocations").await, 0);
    assert_eq!(h.count("llm_call_snapshots").await, 1);
    assert_eq!(h.count("llm_call_attempts").await, 1);
    assert_eq!(h.count("agent_episode_journal").await, 0);
    // 1,000 in and 1,000 out at Sonnet 4.5's $3 / $15 per million.
    let spent = inspect::one_credit_window_spent(&h.pool).await.unwrap();
    assert!((spent - 0.018).abs() < 1e-9, "spent {spent}");
    // The session is still the recorded holder: nothing reclaimed it.
    let (holder, _) = inspect::instance_lease(&h.pool, h.instance).await.unwrap();
    assert_eq!(holder.map(|u| u.to_string()), Some(s));
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tool_outside_the_toolset_is_refused_in_band_without_a_write(pool: PgPool) {
    let mut h = start(pool).await;
    let s = h.claim().await.session_id;
    let resp = h
        .client
        .invoke_tool(h.invoke(&s, "c1", "mission_ask_user", r#"{"question":"?"}"#))
        .await
        .unwrap()
        .into_inner();
    let err = resp.error.expect("refused");
    assert_eq!(err.code, "TOOL_NOT_AUTHORIZED");
    assert!(
        err.message.contains("mission_ask_user") && err.message.contains("Strategic"),
        "{}",
        err.message
    );
    assert_eq!(h.count("tool_invocations").await, 0);
    assert_eq!(h.count("attention_requests").await, 0);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn malformed_arguments_get_a_precise_error_and_no_write(pool: PgPool) {
    let mut h = start(pool).await;
    let s = h.claim().await.session_id;
    for (args, needle) in [
        (r#"{"body": 5}"#, "$.body: expected string"),
        (r#"{}"#, "$.body: required"),
        ("not json", "not JSON"),
    ] {
        let resp = h
            .client
            .invoke_tool(h.invoke(&s, "c1", "soa_send_message", args))
            .await
            .unwrap()
            .into_inner();
        let err = resp.error.expect("refused");
        assert_eq!(err.code, "INVALID_ARGUMENTS");
        assert!(err.message.contains(needle), "{args}: {}", err.message);
    }
    assert_eq!(h.count("agent_messages").await, 0);
    assert_eq!(h.count("tool_invocations").await, 0);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_same_call_id_twice_has_one_side_effect(pool: PgPool) {
    let mut h = start(pool).await;
    let s = h.claim().await.session_id;
    let first = h
        .client
        .invoke_tool(h.invoke(
            &s,
            "call-7",
            "soa_send_message",
            r#"{"body":"hello operator"}"#,
        ))
        .await
        .unwrap()
        .into_inner();
    // A chat message is a control verb, not a side effect for the mapper.
    assert!(first.error.is_none() && !first.replayed && !first.side_effecting);
    let second = h
        .client
        .invoke_tool(h.invoke(
            &s,
            "call-7",
            "soa_send_message",
            r#"{"body":"hello operator"}"#,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(second.replayed);
    assert_eq!(second.result_json, first.result_json);
    assert_eq!(h.count("agent_messages").await, 1);
    let direction = inspect::one_message_direction(&h.pool).await.unwrap();
    assert_eq!(direction, "agent_to_operator");
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_proposed_decision_lands_on_the_queue_and_the_roster(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let resp = h
        .client
        .invoke_tool(h.invoke(
            &b.session_id,
            "d1",
            "soa_propose_decision",
            r#"{"title":"Ship it?","body":"why","options":["yes","no"]}"#,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(resp.error.is_none(), "{:?}", resp.error);
    let inspect::AttentionFields {
        kind,
        metadata: meta,
        ..
    } = inspect::one_attention_request(&h.pool, None).await.unwrap();
    assert_eq!(kind, "decision");
    assert_eq!(meta["source"], "soa");
    assert_eq!(meta["soaInstanceId"], h.instance.to_string());
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn record_call_attempt_prices_usage_server_side_and_draws_down_credit(pool: PgPool) {
    let mut h = start(pool).await;
    let s = h.claim().await.session_id;
    let attempt = |model: &str| pb::CallAttempt {
        requested_model: model.into(),
        served_model: model.into(),
        provider: "anthropic".into(),
        credential_name: "ANTHROPIC_API_KEY".into(),
        outcome: "success".into(),
        input_tokens: 1000,
        output_tokens: 1000,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        latency_ms: 5,
        error_message: String::new(),
    };
    let req = |a| {
        h.req(pb::RecordCallAttemptRequest {
            journal_step_json: String::new(),
            event_id: String::new(),
            session_id: s.clone(),
            instance_id: h.instance.to_string(),
            tenant_id: h.tenant.to_string(),
            invocation_id: "inv-1".into(),
            attempt: Some(a),
            prompt_overlay_sha256: String::new(),
        })
    };
    let r = h
        .client
        .clone()
        .record_call_attempt(req(attempt("claude-sonnet-4-5")))
        .await
        .unwrap()
        .into_inner();
    // claude-sonnet-4-5 is priced 3 / 15 USD per million tokens.
    assert!((r.cost_usd - 0.018).abs() < 1e-9, "{}", r.cost_usd);
    // A model with no row is charged the platform's fallback price (15 / 75
    // by default), never nothing, so it still draws the window down.
    let unpriced = h
        .client
        .clone()
        .record_call_attempt(req(attempt("no-such-model")))
        .await
        .unwrap()
        .into_inner();
    assert!(
        (unpriced.cost_usd - 0.09).abs() < 1e-9,
        "{}",
        unpriced.cost_usd
    );
    assert_eq!(unpriced.snapshot_id, r.snapshot_id);
    assert!((unpriced.snapshot_cost_usd - 0.108).abs() < 1e-9);
    let spent = inspect::one_credit_window_spent(&h.pool).await.unwrap();
    assert!((spent - 0.108).abs() < 1e-9, "{spent}");
    // A dated served name is priced by the row it extends with a date.
    let mut dated = attempt("claude-sonnet-4-5");
    dated.served_model = "claude-sonnet-4-5-20250929".into();
    let d = h
        .client
        .clone()
        .record_call_attempt(req(dated))
        .await
        .unwrap()
        .into_inner();
    assert!((d.cost_usd - 0.018).abs() < 1e-9, "{}", d.cost_usd);
    // The scripted provider spends nothing, whatever its usage.
    let mut scripted = attempt("scripted-1");
    scripted.provider = "scripted".into();
    scripted.credential_name = "none".into();
    let free = h
        .client
        .clone()
        .record_call_attempt(req(scripted))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(free.cost_usd, 0.0);
    let spent = inspect::one_credit_window_spent(&h.pool).await.unwrap();
    assert!((spent - 0.126).abs() < 1e-9, "{spent}");
    // Each attempt says which row priced it and how.
    let priced = inspect::attempt_pricing(&h.pool).await.unwrap();
    assert_eq!(
        priced,
        [
            (
                "claude-sonnet-4-5".into(),
                Some("claude-sonnet-4-5".into()),
                Some("exact".into())
            ),
            ("no-such-model".into(), None, Some("fallback".into())),
            (
                "claude-sonnet-4-5-20250929".into(),
                Some("claude-sonnet-4-5".into()),
                Some("prefix".into())
            ),
            ("scripted-1".into(), None, Some("free".into())),
        ]
    );
    let mut bad = attempt("claude-sonnet-4-5");
    bad.input_tokens = -1;
    let err = h
        .client
        .clone()
        .record_call_attempt(req(bad))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("attempt.input_tokens"),
        "{}",
        err.message()
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn complete_tick_with_a_stale_session_is_lease_lost_and_writes_nothing(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let event_id = b.event.unwrap().id;
    let complete = |session: String| {
        h.req(pb::CompleteTickRequest {
            session_id: session,
            instance_id: h.instance.to_string(),
            tenant_id: h.tenant.to_string(),
            event_id: event_id.clone(),
            outcome: Some(pb::TickOutcome {
                completion: pb::TickCompletion::Complete as i32,
                raised_escalation: false,
                side_effecting_actions: 0,
                reason: String::new(),
                budget_axis: None,
            }),
            plan_input_hash: String::new(),
            was_idle: false,
            reasoning_summary: "greeted".into(),
            wait_condition: String::new(),
            actions: vec![],
            snapshot_id: None,
            consumption: None,
            call_attempts: vec![],
        })
    };
    let err = h
        .client
        .clone()
        .complete_tick(complete(Uuid::new_v4().to_string()))
        .await
        .unwrap_err();
    assert!(genesis_proto::convert::is_lease_lost(&err), "{err:?}");
    assert_eq!(h.count("agent_state_ledger").await, 0);
    let consumed = inspect::count_consumed_events(&h.pool).await.unwrap();
    assert_eq!(consumed, 0);
    // The real session completes: the mapper's kind for AgentInitialized.
    let done = h
        .client
        .clone()
        .complete_tick(complete(b.session_id.clone()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.decision_kind, "Initialized");
    assert!(!done.halted);
    assert_eq!(h.count("agent_state_ledger").await, 1);
    // An unspecified completion is refused naming the field.
    let mut bad = complete(b.session_id);
    bad.get_mut().outcome.as_mut().unwrap().completion = 0;
    let err = h.client.clone().complete_tick(bad).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("outcome.completion"));
}

async fn call(
    client: &mut AgentPodClient<Channel>,
    method: &str,
    token: Option<&str>,
) -> tonic::Status {
    fn with<T>(msg: T, token: Option<&str>) -> Request<T> {
        match token {
            Some(t) => authed(t, msg),
            None => Request::new(msg),
        }
    }
    let r = match method {
        "ClaimTick" => client
            .claim_tick(with(pb::ClaimTickRequest::default(), token))
            .await
            .map(|_| ()),
        "RenewLease" => client
            .renew_lease(with(pb::RenewLeaseRequest::default(), token))
            .await
            .map(|_| ()),
        "InvokeTool" => client
            .invoke_tool(with(pb::InvokeToolRequest::default(), token))
            .await
            .map(|_| ()),
        "RecordCallAttempt" => client
            .record_call_attempt(with(pb::RecordCallAttemptRequest::default(), token))
            .await
            .map(|_| ()),
        "ReserveCredit" => client
            .reserve_credit(with(pb::ReserveCreditRequest::default(), token))
            .await
            .map(|_| ()),
        "CompleteTick" => client
            .complete_tick(with(pb::CompleteTickRequest::default(), token))
            .await
            .map(|_| ()),
        "ClaimReplay" => client
            .claim_replay(with(pb::ClaimReplayRequest::default(), token))
            .await
            .map(|_| ()),
        "ReserveReplayCredit" => client
            .reserve_replay_credit(with(pb::ReserveReplayCreditRequest::default(), token))
            .await
            .map(|_| ()),
        "RecordReplayAttempt" => client
            .record_replay_attempt(with(pb::RecordReplayAttemptRequest::default(), token))
            .await
            .map(|_| ()),
        "CompleteReplay" => client
            .complete_replay(with(pb::CompleteReplayRequest::default(), token))
            .await
            .map(|_| ()),
        other => panic!("AgentPod.{other} has no case in the auth matrix: add one"),
    };
    r.expect_err("refused before the handler")
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn every_agent_pod_rpc_refuses_missing_bad_and_operator_tokens(pool: PgPool) {
    // Every refusal here comes from one address: the failed-auth limit
    // (tests/auth_failures.rs) would soon answer them all alike.
    let mut h = start_with(pool, |c| c.auth_failures_per_minute = 0).await;
    let operator = generate_token();
    h.store
        .tokens()
        .insert(
            Some(h.tenant),
            TokenScope::Operator,
            &token_sha256(&operator),
            "op",
            None,
        )
        .await
        .unwrap();
    let revoked = generate_token();
    let row = h
        .store
        .tokens()
        .insert(
            None,
            TokenScope::AgentPod,
            &token_sha256(&revoked),
            "old",
            None,
        )
        .await
        .unwrap();
    h.store.tokens().revoke(row.id).await.unwrap();
    let methods: Vec<String> = genesis_proto::convert::all_rpcs()
        .into_iter()
        .filter(|(s, _)| s == genesis_proto::auth::AGENT_POD_SERVICE)
        .map(|(_, m)| m)
        .collect();
    assert_eq!(methods.len(), 10, "{methods:?}");
    for m in &methods {
        assert_eq!(
            call(&mut h.client, m, None).await.code(),
            Code::Unauthenticated,
            "{m} without a token"
        );
        assert_eq!(
            call(&mut h.client, m, Some("gen_garbage")).await.code(),
            Code::Unauthenticated,
            "{m} bad token"
        );
        assert_eq!(
            call(&mut h.client, m, Some(&generate_token())).await.code(),
            Code::Unauthenticated,
            "{m} unknown"
        );
        assert_eq!(
            call(&mut h.client, m, Some(&revoked)).await.code(),
            Code::Unauthenticated,
            "{m} revoked"
        );
        assert_eq!(
            call(&mut h.client, m, Some(&operator)).await.code(),
            Code::PermissionDenied,
            "{m} operator"
        );
        // The agent-pod token passes the gate: the empty request fails validation instead.
        let token = h.token.clone();
        assert_eq!(
            call(&mut h.client, m, Some(&token)).await.code(),
            Code::InvalidArgument,
            "{m} agent token"
        );
    }
}

/// The gate remembers admitted tokens (`GENESIS_TOKEN_CACHE_MS`), but a
/// revocation is honoured as soon as its notice arrives: here the memory
/// would trust the row for a minute, and the revoked token is refused
/// within the wait below anyway.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_token_revoked_while_in_use_is_refused_without_waiting_for_the_cache(pool: PgPool) {
    let mut h = start_with(pool, |c| c.token_cache_ms = 60_000).await;
    // The server's LISTEN is in place once its connection shows it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let listening = inspect::count_listening_on(&h.pool, "genesis_api_tokens")
            .await
            .unwrap();
        if listening == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the supervisor never listened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let token = h.token.clone();
    // Admitted (twice, so the second is served from memory when the first
    // raced the LISTEN): the empty request fails validation past the gate.
    for _ in 0..2 {
        assert_eq!(
            call(&mut h.client, "RenewLease", Some(&token)).await.code(),
            Code::InvalidArgument
        );
    }
    let id = h
        .store
        .tokens()
        .find_by_hash(&token_sha256(&token))
        .await
        .unwrap()
        .unwrap()
        .id;
    assert!(h.store.tokens().revoke(id).await.unwrap());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let code = call(&mut h.client, "RenewLease", Some(&token)).await.code();
        if code == Code::Unauthenticated {
            break;
        }
        assert_eq!(
            code,
            Code::InvalidArgument,
            "admitted until the notice lands"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "a revoked token was still admitted 10 s later (the cache's TTL is 60 s)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And it stays refused.
    assert_eq!(
        call(&mut h.client, "ClaimTick", Some(&token)).await.code(),
        Code::Unauthenticated
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn health_is_open_and_http_reports_ready_and_metrics(pool: PgPool) {
    let mut h = start(pool).await;
    h.claim().await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(h.channel.clone());
    let served = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health needs no token")
        .into_inner();
    assert_eq!(
        served.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    let ready = reqwest_get(h.http, "/readyz").await;
    assert_eq!(ready.0, 200);
    let metrics = reqwest_get(h.http, "/metrics").await;
    assert!(
        metrics
            .1
            .contains("genesis_supervisor_claims_total{outcome=\"bundle\"} 1"),
        "{}",
        metrics.1
    );
}

async fn reqwest_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, out)
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn renew_lease_extends_the_holders_lease_and_refuses_any_other_session(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let expires = |pool: PgPool, instance: Uuid| async move {
        inspect::instance_lease(&pool, instance)
            .await
            .unwrap()
            .1
            .unwrap()
    };
    let before = expires(h.pool.clone(), h.instance).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let renew = |session: String| {
        h.req(pb::RenewLeaseRequest {
            session_id: session,
            instance_id: h.instance.to_string(),
            tenant_id: h.tenant.to_string(),
        })
    };
    let r = h
        .client
        .clone()
        .renew_lease(renew(b.session_id.clone()))
        .await
        .unwrap()
        .into_inner();
    let after = expires(h.pool.clone(), h.instance).await;
    assert!(
        after > before,
        "renewal moves the expiry: {before} -> {after}"
    );
    let reported = r.lease_expires_at.unwrap();
    assert_eq!(
        reported.seconds,
        after.timestamp(),
        "the answer is the stored expiry"
    );

    // Another session: LEASE_LOST, and the holder's lease is untouched.
    let err = h
        .client
        .clone()
        .renew_lease(renew(Uuid::new_v4().to_string()))
        .await
        .unwrap_err();
    assert!(genesis_proto::convert::is_lease_lost(&err), "{err:?}");
    assert_eq!(expires(h.pool.clone(), h.instance).await, after);
    // A malformed session id names the field and writes nothing.
    let err = h
        .client
        .clone()
        .renew_lease(renew("not-a-uuid".into()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("session_id"), "{}", err.message());
    assert_eq!(expires(h.pool.clone(), h.instance).await, after);
}

/// Reflection answers without a token in v1 and v1alpha (older grpcurl,
/// Postman and Evans speak only v1alpha), lists exactly the AgentPod and the
/// open services, and resolves no symbol of control's admin services.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn reflection_v1_and_v1alpha_list_only_what_the_supervisor_serves(pool: PgPool) {
    use genesis_e2e::reflection::reflect;
    let h = start(pool).await;
    let mut want: Vec<String> = genesis_supervisor::SERVED_SERVICES
        .iter()
        .chain(genesis_proto::reflection::OPEN_SERVICES)
        .map(|s| (*s).to_owned())
        .collect();
    want.sort();
    assert!(want.iter().any(|s| s == "genesis.v1.AgentPod"), "{want:?}");
    for v1alpha in [false, true] {
        let mut listed = reflect(h.channel.clone(), v1alpha, None)
            .await
            .unwrap()
            .unwrap();
        listed.sort();
        assert_eq!(listed, want, "v1alpha: {v1alpha}");
        for known in ["genesis.v1.AgentPod", "genesis.v1.AgentPod.ClaimTick"] {
            let found = reflect(h.channel.clone(), v1alpha, Some(known))
                .await
                .unwrap();
            assert!(found.is_ok(), "{known} (v1alpha: {v1alpha}): {found:?}");
        }
        for hidden in [
            "genesis.v1.TenantService",
            "genesis.v1.TenantService.ListTenants",
        ] {
            let refused = reflect(h.channel.clone(), v1alpha, Some(hidden))
                .await
                .unwrap();
            assert!(
                matches!(&refused, Err(e) if e.starts_with("NotFound")),
                "{hidden} resolved (v1alpha: {v1alpha}): {refused:?}"
            );
        }
    }
}

/// The holder's own session renews a live lease; once that lease has
/// expired (before anyone reclaimed it) RenewLease answers LEASE_LOST and
/// writes nothing, as InvokeTool and RecordCallAttempt do: the expiry stays
/// in the past, so the event stays reclaimable.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_expired_lease_cannot_be_renewed_by_its_own_session(pool: PgPool) {
    let mut h = start(pool).await;
    let s = h.claim().await.session_id;
    let renew = |h: &Harness| {
        h.req(pb::RenewLeaseRequest {
            session_id: s.clone(),
            instance_id: h.instance.to_string(),
            tenant_id: h.tenant.to_string(),
        })
    };
    h.client
        .clone()
        .renew_lease(renew(&h))
        .await
        .expect("a live lease renews");
    h.expire_lease().await;
    let lease = |pool: PgPool, instance: Uuid| async move {
        inspect::instance_lease(&pool, instance).await.unwrap()
    };
    let before = lease(h.pool.clone(), h.instance).await;
    let err = h.client.clone().renew_lease(renew(&h)).await.unwrap_err();
    assert!(genesis_proto::convert::is_lease_lost(&err), "{err:?}");
    assert_eq!(
        lease(h.pool.clone(), h.instance).await,
        before,
        "nothing written"
    );
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn malformed_agent_pod_requests_name_the_field_and_write_nothing(pool: PgPool) {
    let mut h = start(pool).await;
    let claim = |instance: &str, tenant: &str| {
        h.req(pb::ClaimTickRequest {
            instance_id: instance.to_owned(),
            tenant_id: tenant.to_owned(),
            event_id: None,
        })
    };
    let t = h.tenant.to_string();
    let i = h.instance.to_string();
    for (req, field) in [
        (claim("nope", &t), "instance_id"),
        (claim(&i, ""), "tenant_id"),
        (claim(&i, "12345"), "tenant_id"),
    ] {
        let e = h.client.clone().claim_tick(req).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{field}: {e:?}");
        assert!(
            e.message().contains(field),
            "{field} not named in {}",
            e.message()
        );
    }
    let leased = inspect::count_leased_instances(&h.pool).await.unwrap();
    assert_eq!(leased, 0, "no refused claim took a lease");

    let b = h.claim().await;
    let big = format!(
        "{{\"body\":\"{}\"}}",
        "x".repeat(genesis_supervisor::service::MAX_TOOL_ARGUMENTS_BYTES)
    );
    for (session, call, args, field) in [
        ("not-a-uuid", "c1", "{}", "session_id"),
        (b.session_id.as_str(), "", "{}", "call_id"),
        (b.session_id.as_str(), "c2", big.as_str(), "arguments_json"),
    ] {
        let e = h
            .client
            .clone()
            .invoke_tool(h.invoke(session, call, "soa_send_message", args))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{field}: {e:?}");
        assert!(
            e.message().contains(field),
            "{field} not named in {}",
            e.message()
        );
    }
    assert_eq!(h.count("agent_messages").await, 0);
    assert_eq!(h.count("tool_invocations").await, 0);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_budget_cut_is_recorded_on_the_turn_with_its_axis_and_consumption(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let done = h
        .client
        .clone()
        .complete_tick(h.req(pb::CompleteTickRequest {
            session_id: b.session_id.clone(),
            instance_id: h.instance.to_string(),
            tenant_id: h.tenant.to_string(),
            event_id: b.event.unwrap().id,
            outcome: Some(pb::TickOutcome {
                completion: pb::TickCompletion::BudgetExhausted as i32,
                raised_escalation: false,
                side_effecting_actions: 0,
                reason: "turn budget of 3 spent".into(),
                budget_axis: Some("turns".into()),
            }),
            plan_input_hash: String::new(),
            was_idle: false,
            reasoning_summary: "ran out of turns".into(),
            wait_condition: String::new(),
            actions: vec![],
            snapshot_id: None,
            consumption: Some(pb::Consumption {
                tokens: 1200,
                tool_calls: 2,
                turns: 3,
                wall_ms: 900,
            }),
            call_attempts: vec![],
        }))
        .await
        .unwrap()
        .into_inner();
    // A budget cut is not the planner's verdict: it never counts toward
    // STUCK, and has its own streak instead.
    assert_eq!(done.phase, "idle:exhausted");
    let (pool, instance) = (h.pool.clone(), h.instance);
    let streaks = || {
        let pool = pool.clone();
        async move {
            let c = inspect::instance_counters(&pool, instance).await.unwrap();
            (c.consecutive_blocked_turns, c.consecutive_exhausted_turns)
        }
    };
    assert_eq!(streaks().await, (0, 1));
    // The next completed tick ends the streak.
    h.wake(h.instance, "again").await;
    let next = h.claim().await;
    let event = next.event.unwrap().id;
    h.complete(completion_with(&h, &next.session_id, &event, vec![]))
        .await;
    assert_eq!(streaks().await, (0, 0));
    let payload = inspect::one_ledger_payload(&h.pool).await.unwrap();
    assert_eq!(payload["completion"], "budget_exhausted", "{payload}");
    assert_eq!(payload["budgetAxis"], "turns");
    assert_eq!(payload["endReason"], "turn budget of 3 spent");
    assert_eq!(payload["consumption"]["turns"], 3);
    assert_eq!(payload["consumption"]["tokens"], 1200);
    assert_eq!(payload["activeMode"], "Strategic");
}

/// A stand-in Alertmanager on loopback: `GET /api/v2/alerts` answers
/// `firing` alerts (or a 500 when `firing` is `u32::MAX`) and counts hits.
async fn fake_alertmanager() -> (
    String,
    Arc<std::sync::atomic::AtomicU32>,
    Arc<std::sync::atomic::AtomicU32>,
) {
    use std::sync::atomic::{AtomicU32, Ordering};
    let firing = Arc::new(AtomicU32::new(0));
    let hits = Arc::new(AtomicU32::new(0));
    let (f, h) = (firing.clone(), hits.clone());
    let app = axum::Router::new().route(
        "/api/v2/alerts",
        axum::routing::get(move || {
            let (f, h) = (f.clone(), h.clone());
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                let n = f.load(Ordering::SeqCst);
                if n == u32::MAX {
                    return (http::StatusCode::INTERNAL_SERVER_ERROR, "down".to_owned());
                }
                let alerts: Vec<_> = (0..n)
                    .map(|i| serde_json::json!({"labels": {"alertname": format!("A{i}")}, "status": {"state": "active"}}))
                    .collect();
                (http::StatusCode::OK, serde_json::to_string(&alerts).unwrap())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), firing, hits)
}

/// Wait until the sampler has finished a sample begun after now: two more
/// hits on the fake (the second starts only after the first was recorded).
async fn next_sample(hits: &std::sync::atomic::AtomicU32) {
    let start = hits.load(std::sync::atomic::Ordering::SeqCst);
    for _ in 0..100 {
        if hits.load(std::sync::atomic::Ordering::SeqCst) >= start + 2 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the ops sampler did not poll the fake Alertmanager");
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_ops_digest_carries_the_alerts_the_background_sampler_read(pool: PgPool) {
    use std::sync::atomic::Ordering;
    let (url, firing, hits) = fake_alertmanager().await;
    firing.store(3, Ordering::SeqCst);
    let mut h = start_with(pool, |c| {
        c.alertmanager_url = Some(url);
        c.ops_sample_secs = 1;
        c.ops_window_secs = 60;
    })
    .await;
    next_sample(&hits).await;
    let before = hits.load(Ordering::SeqCst);
    let digest = h.claim().await.ops_digest.unwrap();
    assert!(
        digest.summary.contains("firing alerts: 3"),
        "{}",
        digest.summary
    );
    assert!(digest.bucket.contains("alerts=firing"), "{}", digest.bucket);
    assert!(
        digest.summary.contains("over the last 60s"),
        "{}",
        digest.summary
    );
    // pg_stat_database was read: the database figures are known.
    assert!(
        digest.summary.contains("database deadlocks +"),
        "{}",
        digest.summary
    );
    // The claim itself never calls Alertmanager.
    assert!(hits.load(Ordering::SeqCst) <= before + 1);

    // An alert storm moves the bucket (which is what forces a re-plan).
    firing.store(7, Ordering::SeqCst);
    next_sample(&hits).await;
    let other = new_active_soa(&h).await;
    let storm = h.claim_instance(other).await.ops_digest.unwrap();
    assert!(storm.bucket.contains("alerts=storm"), "{}", storm.bucket);
    assert_ne!(storm.bucket, digest.bucket);

    // Alertmanager failing: the figure is unknown, and the claim still works.
    firing.store(u32::MAX, Ordering::SeqCst);
    next_sample(&hits).await;
    let third = new_active_soa(&h).await;
    let down = h.claim_instance(third).await.ops_digest.unwrap();
    assert!(
        down.summary.contains("firing alerts: unknown"),
        "{}",
        down.summary
    );
    assert!(down.bucket.contains("alerts=none"), "{}", down.bucket);
}

async fn new_active_soa(h: &Harness) -> Uuid {
    h.store
        .instances()
        .create(
            h.tenant,
            NewInstance::foundational(AgentType::Soa, InstanceStatus::Active),
        )
        .await
        .unwrap()
        .id
}

async fn compliance_instance(store: &Store, tenant: Uuid) -> Uuid {
    store
        .instances()
        .create(
            tenant,
            NewInstance::foundational(AgentType::Compliance, InstanceStatus::Active),
        )
        .await
        .unwrap()
        .id
}

async fn ingest_compliance(store: &Store, tenant: Uuid, project: Uuid) {
    let mut tx = store.tenant_tx(tenant).await.unwrap();
    genesis_store::knowledge::ingest(
        tx.conn(),
        tenant,
        &genesis_store::knowledge::NewKnowledgeDocument {
            project_id: Some(project),
            kind: genesis_store::knowledge::KnowledgeKind::Compliance,
            title: "Access policy".into(),
            body: "Access reviews happen quarterly.".into(),
            source: "wiki".into(),
        },
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_compliance_claim_carries_the_cold_swept_corpus_of_its_own_tenant(pool: PgPool) {
    let mut h = start(pool).await;
    let compliance = compliance_instance(&h.store, h.tenant).await;
    let mut projects = [Uuid::new_v4(), Uuid::new_v4()];
    projects.sort();
    for p in projects {
        ingest_compliance(&h.store, h.tenant, p).await;
    }
    // Another tenant's project never appears.
    let other = h.store.tenants().create("other").await.unwrap().id;
    ingest_compliance(&h.store, other, Uuid::new_v4()).await;

    let b = h.claim_instance(compliance).await;
    // The opener names no project: the sweep discovered them.
    assert!(!b.event.unwrap().payload_json.contains("rojectIds"));
    let corpus = b
        .compliance_corpus
        .expect("a Compliance bundle has a corpus");
    let ids: Vec<String> = corpus
        .projects
        .iter()
        .map(|p| p.project_id.clone())
        .collect();
    assert_eq!(ids, projects.map(|p| p.to_string()));
    assert!(corpus.projects.iter().all(|p| p.documents == 1));
    assert_eq!(corpus.tenant_wide_entries, 0);
    assert!(!corpus.truncated);
    // Other types carry none.
    assert_eq!(h.claim().await.compliance_corpus, None);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_empty_tenants_compliance_claim_has_an_empty_corpus(pool: PgPool) {
    let mut h = start(pool).await;
    let compliance = compliance_instance(&h.store, h.tenant).await;
    let b = h.claim_instance(compliance).await;
    assert_eq!(
        b.compliance_corpus,
        Some(pb::ComplianceCorpus::default()),
        "the sweep ran and found nothing"
    );
}

async fn preset_with_overlay(
    h: &Harness,
    name: &str,
    model: &str,
    overlay: &str,
) -> genesis_store::llm::PresetRow {
    h.store
        .llm()
        .create_preset(
            h.tenant,
            genesis_store::llm::NewPreset {
                name: name.into(),
                primary: genesis_store::llm::PresetCouple {
                    model: model.into(),
                    provider: "scripted".into(),
                    backend: String::new(),
                    credentials: vec![],
                },
                fallback: vec![],
                overlays: serde_json::json!({"prompt_overlay": overlay, "tool_policy_id": "tp-strict"}),
            },
        )
        .await
        .unwrap()
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_claim_carries_the_presets_overlay_and_the_snapshot_records_its_hash(pool: PgPool) {
    let mut h = start(pool).await;
    let p = preset_with_overlay(&h, "terse", "scripted-1", "Answer in one line.").await;
    h.store
        .llm()
        .bind_site(h.tenant, "Agent:Planning", p.id)
        .await
        .unwrap();
    let b = h.claim().await;
    let chain = b.preset_chain.unwrap();
    assert_eq!(chain.prompt_overlay, "Answer in one line.");
    assert_eq!(chain.tool_policy_id, "tp-strict");
    assert!(chain.mode_preset_of.is_empty());
    let hash = genesis_core::prompt::overlay_sha256(&chain.prompt_overlay).unwrap();
    let attempt = pb::CallAttempt {
        requested_model: "scripted-1".into(),
        served_model: "scripted-1".into(),
        provider: "scripted".into(),
        outcome: "success".into(),
        ..Default::default()
    };
    // A malformed hash is refused by field, and nothing is recorded.
    let err = h
        .client
        .clone()
        .record_call_attempt(h.req(pb::RecordCallAttemptRequest {
            journal_step_json: String::new(),
            event_id: String::new(),
            session_id: b.session_id.clone(),
            instance_id: h.instance.to_string(),
            tenant_id: h.tenant.to_string(),
            invocation_id: "inv-o".into(),
            attempt: Some(attempt.clone()),
            prompt_overlay_sha256: "NOT-A-HASH".into(),
        }))
        .await
        .expect_err("a malformed hash is refused");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("prompt_overlay_sha256"),
        "{}",
        err.message()
    );
    assert_eq!(h.count("llm_call_snapshots").await, 0);
    let r = h
        .client
        .clone()
        .record_call_attempt(h.req(pb::RecordCallAttemptRequest {
            journal_step_json: String::new(),
            event_id: String::new(),
            session_id: b.session_id.clone(),
            instance_id: h.instance.to_string(),
            tenant_id: h.tenant.to_string(),
            invocation_id: "inv-o".into(),
            attempt: Some(attempt),
            prompt_overlay_sha256: hash.clone(),
        }))
        .await
        .unwrap()
        .into_inner();
    let snap = h
        .store
        .llm()
        .snapshot(h.tenant, r.snapshot_id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(snap.prompt_overlay_sha256.as_deref(), Some(hash.as_str()));
    // The overlay text itself is never stored on the snapshot.
    let raw = inspect::one_call_snapshot_text(&h.pool).await.unwrap();
    assert!(!raw.contains("Answer in one line."), "{raw}");
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_active_modes_preset_wins_over_the_site_binding(pool: PgPool) {
    let mut h = start(pool).await;
    let site = preset_with_overlay(&h, "site", "site-model", "site overlay").await;
    let incident = preset_with_overlay(&h, "incident", "incident-model", "incident overlay").await;
    h.store
        .llm()
        .bind_site(h.tenant, "Agent:Planning", site.id)
        .await
        .unwrap();
    // The shared catalogue names the preset by id on Incident only.
    inspect::force_mode_preset(&h.pool, "Soa", "Incident", &incident.id.to_string())
        .await
        .unwrap();
    // Strategic (the default mode) has no preset: the site binding decides.
    let chain = h.claim().await.preset_chain.unwrap();
    assert_eq!(chain.preset_id, site.id.to_string());
    assert_eq!(chain.prompt_overlay, "site overlay");
    h.shutdown.cancel();

    // A second instance in Incident resolves the mode's preset.
    let mut h2 = start(h.pool.clone()).await;
    let site2 = preset_with_overlay(&h2, "site", "site-model", "site overlay").await;
    let incident2 =
        preset_with_overlay(&h2, "incident", "incident-model", "incident overlay").await;
    h2.store
        .llm()
        .bind_site(h2.tenant, "Agent:Planning", site2.id)
        .await
        .unwrap();
    inspect::force_active_mode(&h2.pool, h2.instance, "Incident")
        .await
        .unwrap();
    // The catalogue row names tenant 1's preset id: for tenant 2 it does not
    // exist, so resolution falls back to the site chain (no failed claim).
    let chain = h2.claim().await.preset_chain.unwrap();
    assert_eq!(chain.preset_id, site2.id.to_string());
    assert!(chain.mode_preset_of.is_empty());
    h2.shutdown.cancel();

    // Named by preset name, the one catalogue row resolves in every tenant.
    inspect::force_mode_preset(&h2.pool, "Soa", "Incident", "incident")
        .await
        .unwrap();
    let mut h3 = start(h2.pool.clone()).await;
    let _site3 = preset_with_overlay(&h3, "site", "site-model", "site overlay").await;
    let incident3 =
        preset_with_overlay(&h3, "incident", "incident-model", "incident overlay").await;
    inspect::force_active_mode(&h3.pool, h3.instance, "Incident")
        .await
        .unwrap();
    let chain = h3.claim().await.preset_chain.unwrap();
    assert_eq!(chain.preset_id, incident3.id.to_string());
    assert_eq!(chain.mode_preset_of, "Incident");
    assert_eq!(chain.couples[0].model, "incident-model");
    assert_eq!(chain.prompt_overlay, "incident overlay");
    let _ = (incident, incident2);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn after_seeding_resolution_lands_the_seeded_default_preset(pool: PgPool) {
    use genesis_core::presets::{DEFAULT_PRESET_NAME, DefaultProvider, SEEDED_SITES, code_default};
    let mut h = start(pool).await;
    let couples: Vec<genesis_store::llm::PresetCouple> = code_default(DefaultProvider::Scripted)
        .iter()
        .map(Into::into)
        .collect();
    h.store
        .llm()
        .seed_default_preset(h.tenant, DEFAULT_PRESET_NAME, &couples, SEEDED_SITES)
        .await
        .unwrap();
    let chain = h.claim().await.preset_chain.unwrap();
    assert_eq!(chain.preset_name, "Default");
    assert_eq!(chain.resolved_site_id, "Agent:Default");
    assert!(!chain.preset_id.is_empty());
    assert_eq!(chain.couples[0].model, "scripted-1");
}

/// An attempt of a real, priced model (claude-sonnet-4-5: 3 / 15 USD per
/// million tokens), so the turn's cost shows the pricing.
fn priced_attempt(outcome: &str, input_tokens: i64) -> pb::CallAttempt {
    pb::CallAttempt {
        requested_model: "claude-sonnet-4-5".into(),
        served_model: "claude-sonnet-4-5".into(),
        provider: "anthropic".into(),
        credential_name: "ANTHROPIC_API_KEY".into(),
        outcome: outcome.into(),
        input_tokens,
        output_tokens: 1000,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        latency_ms: 5,
        error_message: String::new(),
    }
}

fn pending(attempt: pb::CallAttempt) -> pb::PendingCallAttempt {
    pb::PendingCallAttempt {
        journal_step_json: String::new(),
        invocation_id: "inv-last".into(),
        attempt: Some(attempt),
        prompt_overlay_sha256: String::new(),
    }
}

/// A CompleteTick of `session` for the claimed event carrying `attempts`.
fn completion_with(
    h: &Harness,
    session: &str,
    event_id: &str,
    attempts: Vec<pb::PendingCallAttempt>,
) -> pb::CompleteTickRequest {
    pb::CompleteTickRequest {
        session_id: session.to_owned(),
        instance_id: h.instance.to_string(),
        tenant_id: h.tenant.to_string(),
        event_id: event_id.to_owned(),
        outcome: Some(pb::TickOutcome {
            completion: pb::TickCompletion::Complete as i32,
            ..Default::default()
        }),
        reasoning_summary: "done".into(),
        call_attempts: attempts,
        ..Default::default()
    }
}

/// The episode's last call travels with CompleteTick: recorded as
/// RecordCallAttempt records it (priced here, drawn from the credit window,
/// under the invocation's snapshot) and linked from the turn with its cost.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn complete_tick_records_the_pending_attempts_and_links_their_snapshot(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let event_id = b.event.unwrap().id;
    let req = completion_with(
        &h,
        &b.session_id,
        &event_id,
        vec![
            pending(priced_attempt("server_error", 0)),
            pending(priced_attempt("success", 1000)),
        ],
    );
    let done = h.complete(req).await;
    assert_eq!(h.count("llm_call_attempts").await, 2);
    assert_eq!(h.count("llm_call_snapshots").await, 1);
    let turn = inspect::ledger_turn_cost(&h.pool, done.ledger_id.parse::<Uuid>().unwrap())
        .await
        .unwrap();
    let (snapshot, cost) = (turn.llm_call_snapshot_id, turn.cost_usd);
    let (stored, snapshot_cost) = inspect::one_call_snapshot_cost(&h.pool).await.unwrap();
    assert_eq!(
        snapshot,
        Some(stored),
        "the turn links the attempts' snapshot"
    );
    // claude-sonnet-4-5: 3 / 15 USD per million; 1000 + 1000 tokens on the success,
    // 1000 output tokens on the failed attempt.
    assert!((snapshot_cost - 0.033).abs() < 1e-9, "{snapshot_cost}");
    assert!((cost.unwrap() - 0.033).abs() < 1e-9, "{cost:?}");
    let spent = inspect::one_credit_window_spent(&h.pool).await.unwrap();
    assert!((spent - 0.033).abs() < 1e-9, "{spent}");
}

/// Every pending attempt is checked before any is written: one bad attempt
/// refuses the completion whole, naming its place, and the tick can still
/// be completed by its session afterwards.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_bad_pending_attempt_refuses_the_completion_and_writes_nothing(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let event_id = b.event.unwrap().id;
    let turns_before = h.count("agent_state_ledger").await;
    let mut long_model = priced_attempt("success", 1);
    long_model.requested_model = "m".repeat(201);
    for (attempts, field) in [
        (
            vec![
                pending(priced_attempt("success", 1)),
                pending(priced_attempt("exploded", 1)),
            ],
            "call_attempts[1].attempt.outcome",
        ),
        (
            vec![pending(priced_attempt("success", -1))],
            "call_attempts[0].attempt.input_tokens",
        ),
        (
            vec![pending(long_model)],
            "call_attempts[0].attempt.requested_model",
        ),
        (
            vec![pb::PendingCallAttempt {
                attempt: None,
                ..pending(priced_attempt("success", 1))
            }],
            "call_attempts[0].attempt",
        ),
        (
            vec![pb::PendingCallAttempt {
                invocation_id: String::new(),
                ..pending(priced_attempt("success", 1))
            }],
            "call_attempts[0].invocation_id",
        ),
        (
            vec![pb::PendingCallAttempt {
                prompt_overlay_sha256: "not-a-hash".into(),
                ..pending(priced_attempt("success", 1))
            }],
            "call_attempts[0].prompt_overlay_sha256",
        ),
    ] {
        let err = h
            .client
            .clone()
            .complete_tick(h.req(completion_with(&h, &b.session_id, &event_id, attempts)))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{field}");
        assert!(
            err.message().starts_with(&format!("{field}:")),
            "{field}: {}",
            err.message()
        );
        assert_eq!(h.count("llm_call_attempts").await, 0, "{field}");
        assert_eq!(h.count("llm_call_snapshots").await, 0, "{field}");
        assert_eq!(h.count("agent_state_ledger").await, turns_before, "{field}");
    }
    // A snapshot id beside pending attempts is ambiguous: refused too.
    let mut both = completion_with(
        &h,
        &b.session_id,
        &event_id,
        vec![pending(priced_attempt("success", 1))],
    );
    both.snapshot_id = Some(Uuid::new_v4().to_string());
    let err = h
        .client
        .clone()
        .complete_tick(h.req(both))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("snapshot_id:"),
        "{}",
        err.message()
    );
    assert_eq!(h.count("llm_call_attempts").await, 0);
    // The session still holds its tick.
    h.client
        .clone()
        .complete_tick(h.req(completion_with(
            &h,
            &b.session_id,
            &event_id,
            vec![pending(priced_attempt("success", 1))],
        )))
        .await
        .unwrap();
    assert_eq!(h.count("llm_call_attempts").await, 1);
    assert_eq!(h.count("agent_state_ledger").await, turns_before + 1);
}

/// A session that lost its lease records none of its pending attempts.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn pending_attempts_of_a_stale_session_are_not_recorded(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let event_id = b.event.unwrap().id;
    let err = h
        .client
        .clone()
        .complete_tick(h.req(completion_with(
            &h,
            &Uuid::new_v4().to_string(),
            &event_id,
            vec![pending(priced_attempt("success", 1))],
        )))
        .await
        .unwrap_err();
    assert!(genesis_proto::convert::is_lease_lost(&err), "{err:?}");
    assert_eq!(h.count("llm_call_attempts").await, 0);
    assert_eq!(h.count("llm_call_snapshots").await, 0);
    assert_eq!(h.count("credit_windows").await, 0);
}

/// A completion refused while its session still holds the lease (here: an
/// event it did not claim) writes no turn, but the calls the episode made
/// under that lease are still recorded and drawn from the credit window;
/// the completion that follows records its own attempt once more.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_refused_completion_still_pays_for_the_calls_made_under_its_lease(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let event_id = b.event.unwrap().id;
    let turns_before = h.count("agent_state_ledger").await;
    let err = h
        .client
        .clone()
        .complete_tick(h.req(completion_with(
            &h,
            &b.session_id,
            &Uuid::new_v4().to_string(),
            vec![pending(priced_attempt("success", 1000))],
        )))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert_eq!(h.count("llm_call_attempts").await, 1);
    assert_eq!(h.count("agent_state_ledger").await, turns_before);
    let spent = inspect::one_credit_window_spent(&h.pool).await.unwrap();
    assert!((spent - 0.018).abs() < 1e-9, "{spent}");
    h.complete(completion_with(
        &h,
        &b.session_id,
        &event_id,
        vec![pending(priced_attempt("success", 1000))],
    ))
    .await;
    assert_eq!(h.count("llm_call_attempts").await, 2);
    assert_eq!(h.count("agent_state_ledger").await, turns_before + 1);
}

/// Complete the claimed tick of `b` with `summary`, then make the instance
/// due again with an operator message.
async fn complete_and_wake(h: &Harness, b: &pb::TickBundle, summary: &str) {
    let event_id = b.event.as_ref().unwrap().id.clone();
    let mut req = completion_with(h, &b.session_id, &event_id, vec![]);
    req.reasoning_summary = summary.to_owned();
    h.complete(req).await;
    h.wake(h.instance, summary).await;
}

/// Claim and complete `n` turns, summarised "turn 1" … "turn n".
async fn run_turns(h: &mut Harness, n: u32) {
    for i in 1..=n {
        let b = h.claim().await;
        complete_and_wake(h, &b, &format!("turn {i}")).await;
    }
}

/// The pod's view of the tail: (turn number, reasoning summary).
fn tail_of(b: &pb::TickBundle) -> Vec<(i64, String)> {
    b.ledger_tail
        .iter()
        .map(|t| (t.turn_number, t.reasoning_summary.clone()))
        .collect()
}

/// The tail as the database holds it: what every claim must hand the pod,
/// whatever the supervisor held from earlier claims.
async fn tail_in_db(h: &Harness, tail: i64) -> Vec<(i64, String)> {
    inspect::ledger_tail(&h.pool, h.instance, tail)
        .await
        .unwrap()
}

/// `genesis_supervisor_{family}_total{{label}="{value}"}` (0 when absent).
async fn labelled_counter(h: &Harness, family: &str, label: &str, value: &str) -> u64 {
    let (_, text) = reqwest_get(h.http, "/metrics").await;
    let prefix = format!("genesis_supervisor_{family}_total{{{label}=\"{value}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |v| v.parse().unwrap())
}

async fn outcome_counter(h: &Harness, family: &str, outcome: &str) -> u64 {
    labelled_counter(h, family, "outcome", outcome).await
}

/// `genesis_supervisor_store_batch_{what}_total{call="{call}"}`.
async fn batch_counter(h: &Harness, what: &str, call: &str) -> u64 {
    labelled_counter(h, &format!("store_batch_{what}"), "call", call).await
}

/// The claims and completions of a tick go through the store's batchers,
/// and `/metrics` shows how many statements answered how many calls.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn metrics_count_the_batched_claims_and_completions(pool: PgPool) {
    let mut h = start(pool).await;
    run_turns(&mut h, 3).await;
    let claims = batch_counter(&h, "calls", "claim").await
        + batch_counter(&h, "calls", "claim_and_read").await;
    assert!(claims >= 3, "three claims were batched calls: {claims}");
    // A completion whose claim's reads are held is one batched statement;
    // one without takes the locked path in a transaction of its own.
    let completes = batch_counter(&h, "calls", "complete").await;
    assert!(
        (1..=3).contains(&completes),
        "{completes} batched completions"
    );
    let statements = batch_counter(&h, "statements", "complete").await;
    assert!(
        (1..=completes).contains(&statements),
        "{statements} statements for {completes} calls"
    );
}

async fn catalogue_counter(h: &Harness, outcome: &str) -> u64 {
    outcome_counter(h, "catalogue_cache", outcome).await
}

async fn ledger_cache_counter(h: &Harness, outcome: &str) -> u64 {
    outcome_counter(h, "ledger_cache", outcome).await
}

/// The catalogue epoch with the supervisor's held catalogues: the first claim
/// reads the catalogue, later ones are not sent it, and an admin write to
/// any catalogue table (a tenant's configuration, the global mode rows) is
/// in force from the very next claim.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_held_catalogue_is_read_again_only_after_an_admin_write(pool: PgPool) {
    let mut h = start(pool).await;
    run_turns(&mut h, 3).await;
    assert_eq!(
        (
            catalogue_counter(&h, "miss").await,
            catalogue_counter(&h, "hit").await,
            catalogue_counter(&h, "stale").await
        ),
        (1, 2, 0)
    );

    inspect::fixture_config_row(
        &h.pool,
        h.tenant,
        genesis_core::options::keys::WEEKLY_CREDIT_USD,
        "123.5",
    )
    .await
    .unwrap();
    let b = h.claim().await;
    assert_eq!(
        b.credit.as_ref().unwrap().limit_usd,
        123.5,
        "the new configuration"
    );
    assert_eq!(catalogue_counter(&h, "stale").await, 1);
    complete_and_wake(&h, &b, "after the config write").await;

    inspect::force_default_mode_fragment(&h.pool, "Soa", "A fragment written just now.")
        .await
        .unwrap();
    let b = h.claim().await;
    assert_eq!(
        b.mode.as_ref().unwrap().prompt_fragment,
        "A fragment written just now.",
        "the new mode row"
    );
    assert_eq!(catalogue_counter(&h, "stale").await, 2);
    complete_and_wake(&h, &b, "after the mode write").await;

    // Nothing written since: held again, with both changes.
    let b = h.claim().await;
    assert_eq!(catalogue_counter(&h, "hit").await, 3);
    assert_eq!(b.credit.as_ref().unwrap().limit_usd, 123.5);
    assert_eq!(
        b.mode.as_ref().unwrap().prompt_fragment,
        "A fragment written just now."
    );
}

/// `GENESIS_CATALOGUE_CACHE_MB=0`: every claim is sent the catalogue.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn with_the_catalogue_cache_off_every_claim_reads_the_catalogue(pool: PgPool) {
    let mut h = start_with(pool, |c| c.catalogue_cache_mb = 0).await;
    run_turns(&mut h, 3).await;
    assert_eq!(outcome_counter(&h, "catalogue_cache", "miss").await, 3);
    assert_eq!(outcome_counter(&h, "catalogue_cache", "hit").await, 0);
}

/// Through the gRPC surface, the supervisor's completion
/// reads the counters with its context read and every turn is written in
/// one statement (none falls back to the lock), numbered without a gap.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn completions_write_their_turn_in_one_statement(pool: PgPool) {
    let mut h = start(pool).await;
    run_turns(&mut h, 6).await;
    assert_eq!(outcome_counter(&h, "complete_reads", "held").await, 6);
    assert_eq!(outcome_counter(&h, "complete_reads", "stale").await, 0);
    assert_eq!(outcome_counter(&h, "complete_reads", "locked").await, 0);
    let numbers = inspect::ledger_turn_numbers(&h.pool, h.instance)
        .await
        .unwrap();
    assert_eq!(numbers, (1..=6).collect::<Vec<_>>());
    let (lease, _) = inspect::instance_lease(&h.pool, h.instance).await.unwrap();
    assert_eq!(lease, None, "every completion released the lease");
}

/// The supervisor's held ledger tails: after the first claim
/// only the new turns are read (hit), the tail the pod gets is always the
/// database's newest 12 turns in order, and after a reset deletes the
/// ledger the held tail is refused by the database (stale) and the pod gets
/// the new ledger, never the deleted turns.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_held_ledger_tail_reads_only_new_turns_and_never_outlives_a_reset(pool: PgPool) {
    let mut h = start(pool).await;
    for i in 1..=15 {
        let b = h.claim().await;
        assert_eq!(tail_of(&b), tail_in_db(&h, 12).await, "claim {i}");
        complete_and_wake(&h, &b, &format!("turn {i}")).await;
    }
    let b = h.claim().await;
    let tail = tail_of(&b);
    assert_eq!(tail.len(), 12);
    assert_eq!(tail.first().unwrap(), &(4, "turn 4".to_owned()));
    assert_eq!(tail.last().unwrap(), &(15, "turn 15".to_owned()));
    assert_eq!(tail, tail_in_db(&h, 12).await);
    // The first two claims held nothing: there was no turn yet at the
    // first, and an empty ledger is not held.
    assert_eq!(ledger_cache_counter(&h, "miss").await, 2);
    assert_eq!(ledger_cache_counter(&h, "hit").await, 14);
    assert_eq!(ledger_cache_counter(&h, "stale").await, 0);

    // Hand the lease back and reset: the whole ledger goes, numbering
    // starts again at 1, and the held tail names turn 15.
    inspect::force_lease_released(&h.pool, h.instance)
        .await
        .unwrap();
    h.store.reset_instance(h.tenant, h.instance).await.unwrap();
    h.store
        .messages()
        .send_operator_message(h.tenant, h.instance, "after reset")
        .await
        .unwrap();
    let b = h.claim().await;
    assert_eq!(tail_of(&b), vec![], "the reset ledger is empty");
    assert_eq!(ledger_cache_counter(&h, "stale").await, 1);
    complete_and_wake(&h, &b, "new turn 1").await;
    let b = h.claim().await;
    assert_eq!(tail_of(&b), vec![(1, "new turn 1".to_owned())]);
    complete_and_wake(&h, &b, "new turn 2").await;
    let b = h.claim().await;
    assert_eq!(
        tail_of(&b),
        vec![(1, "new turn 1".to_owned()), (2, "new turn 2".to_owned())]
    );
}

/// The same ledger with a turn rewritten behind the supervisor's back at
/// the held turn's number but with a new id (what a reset followed by as
/// many new turns looks like): the id check refuses the held tail and the
/// pod gets the rows as they are.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_held_turn_whose_id_changed_is_not_trusted(pool: PgPool) {
    let mut h = start(pool).await;
    run_turns(&mut h, 3).await;
    // The last claim held turns 1 and 2. Give turn 2 a new id and summary,
    // as a reset and two new turns would.
    inspect::fixture_replace_ledger_turn(&h.pool, h.instance, 2, "rewritten")
        .await
        .unwrap();
    let b = h.claim().await;
    assert_eq!(
        tail_of(&b),
        vec![
            (1, "turn 1".to_owned()),
            (2, "rewritten".to_owned()),
            (3, "turn 3".to_owned())
        ]
    );
    assert_eq!(ledger_cache_counter(&h, "stale").await, 1);
}

/// With the cache off every claim reads the whole tail and nothing is
/// counted as a hit.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_zero_ledger_cache_reads_the_whole_tail_every_claim(pool: PgPool) {
    let mut h = start_with(pool, |c| c.ledger_cache_mb = 0).await;
    for i in 1..=3 {
        let b = h.claim().await;
        assert_eq!(tail_of(&b), tail_in_db(&h, 12).await);
        complete_and_wake(&h, &b, &format!("turn {i}")).await;
    }
    let b = h.claim().await;
    assert_eq!(tail_of(&b).len(), 3);
    assert_eq!(ledger_cache_counter(&h, "hit").await, 0);
    assert_eq!(ledger_cache_counter(&h, "miss").await, 4);
}

async fn context_counter(h: &Harness, outcome: &str) -> u64 {
    outcome_counter(h, "tick_context", outcome).await
}

/// Claim and complete one tick whose last call travels with CompleteTick;
/// the cost the turn records.
async fn tick_with_attempt(h: &mut Harness, input_tokens: i64) -> f64 {
    let b = h.claim().await;
    tick_with_attempt_of(h, &b, input_tokens).await
}

async fn tick_with_attempt_of(h: &Harness, b: &pb::TickBundle, input_tokens: i64) -> f64 {
    let event_id = b.event.as_ref().unwrap().id.clone();
    // Each episode's invocation has its own snapshot.
    let mut attempt = pending(priced_attempt("success", input_tokens));
    attempt.invocation_id = format!("inv-{}", b.session_id);
    let req = completion_with(h, &b.session_id, &event_id, vec![attempt]);
    let done = h.complete(req).await;
    h.wake(h.instance, "wake").await;
    inspect::ledger_turn_cost(&h.pool, done.ledger_id.parse::<Uuid>().unwrap())
        .await
        .unwrap()
        .cost_usd
        .unwrap()
}

/// The supervisor's tick memos and held prices: a completion of a tick
/// this supervisor claimed, with its last call attempt, reads no context.
/// The claim read the event, type, mode, counters and configuration, and
/// the price was read once, at the epoch of the claims that use it. Every
/// turn still costs what the price table says.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_claimed_tick_completes_without_reading_its_context_again(pool: PgPool) {
    let mut h = start(pool).await;
    for _ in 0..4 {
        // claude-sonnet-4-5: 3 / 15 USD per million; 2000 in, 1000 out.
        let cost = tick_with_attempt(&mut h, 2000).await;
        assert!((cost - 0.021).abs() < 1e-9, "{cost}");
    }
    assert_eq!(context_counter(&h, "complete_held").await, 4);
    assert_eq!(context_counter(&h, "complete_read").await, 0);
    assert_eq!(
        context_counter(&h, "attempt_read").await,
        1,
        "the first price"
    );
    assert_eq!(context_counter(&h, "attempt_held").await, 3);
    assert_eq!(outcome_counter(&h, "complete_reads", "held").await, 4);
    let spent = inspect::one_credit_window_spent(&h.pool).await.unwrap();
    assert!((spent - 0.084).abs() < 1e-9, "{spent}");
    let modes: Vec<Option<String>> = inspect::ledger_summaries_and_modes(&h.pool, h.instance)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, mode)| mode)
        .collect();
    assert_eq!(
        modes,
        vec![Some("Strategic".to_owned()); 4],
        "the type's default"
    );
}

/// A price write raises the catalogue epoch: a tick
/// claimed before it is priced as of its claim, every tick claimed after it
/// at the new price. This fails if a held price outlives the write.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_price_write_is_in_force_from_the_next_claim(pool: PgPool) {
    let mut h = start(pool).await;
    let old = tick_with_attempt(&mut h, 1000).await;
    assert!((old - 0.018).abs() < 1e-9, "{old}");

    let b = h.claim().await;
    inspect::force_input_price(&h.pool, "claude-sonnet-4-5", 30.0)
        .await
        .unwrap();
    let during = tick_with_attempt_of(&h, &b, 1000).await;
    assert!(
        (during - 0.018).abs() < 1e-9,
        "claimed before the write: {during}"
    );

    for _ in 0..2 {
        let new = tick_with_attempt(&mut h, 1000).await;
        assert!((new - 0.045).abs() < 1e-9, "claimed after the write: {new}");
    }
    assert_eq!(
        context_counter(&h, "attempt_read").await,
        2,
        "read once before the write and once after it"
    );
    assert_eq!(context_counter(&h, "attempt_held").await, 2);
}

/// A tick claimed through one supervisor and completed through another
/// (another replica, or after a restart) has no memo there: the context is
/// read, and the turn is the same.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tick_claimed_through_another_supervisor_reads_its_context(pool: PgPool) {
    let mut h = start(pool.clone()).await;
    let other = common::start(pool).await;
    let b = h.claim().await;
    let event_id = b.event.as_ref().unwrap().id.clone();
    let req = completion_with(
        &h,
        &b.session_id,
        &event_id,
        vec![pending(priced_attempt("success", 1000))],
    );
    let done = AgentPodClient::new(other.channel.clone())
        .complete_tick(h.req(req))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.turn_number, 1);
    let turn = inspect::ledger_turn_cost(&h.pool, done.ledger_id.parse::<Uuid>().unwrap())
        .await
        .unwrap();
    let (cost, mode) = (turn.cost_usd.unwrap(), turn.active_mode);
    assert!((cost - 0.018).abs() < 1e-9, "{cost}");
    assert_eq!(mode.as_deref(), Some("Strategic"));
    let (_, text) = reqwest_get(other.http, "/metrics").await;
    for line in [
        "genesis_supervisor_tick_context_total{outcome=\"complete_read\"} 1",
        "genesis_supervisor_tick_context_total{outcome=\"attempt_read\"} 1",
        "genesis_supervisor_complete_reads_total{outcome=\"held\"} 1",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    assert_eq!(context_counter(&h, "complete_held").await, 0);
}

/// The turn records the mode its claim served the pod, even when an
/// operator switches the mode while the tick runs; the next claim serves
/// and records the new one.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_turn_records_the_mode_its_claim_served(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    assert_eq!(b.mode.as_ref().unwrap().name, "Strategic");
    h.store
        .modes()
        .set_active_mode(
            h.tenant,
            h.instance,
            "Incident",
            genesis_core::ModeChangeSource::Ui,
            "op",
            None,
        )
        .await
        .unwrap();
    complete_and_wake(&h, &b, "ran in Strategic").await;
    let b = h.claim().await;
    assert_eq!(b.mode.as_ref().unwrap().name, "Incident");
    complete_and_wake(&h, &b, "ran in Incident").await;
    let modes = inspect::ledger_summaries_and_modes(&h.pool, h.instance)
        .await
        .unwrap();
    assert_eq!(
        modes,
        vec![
            (
                Some("ran in Strategic".to_owned()),
                Some("Strategic".to_owned())
            ),
            (
                Some("ran in Incident".to_owned()),
                Some("Incident".to_owned())
            ),
        ]
    );
}

/// With the catalogue cache off the memos are off too: every completion
/// and attempt reads its context, and the turns are the same.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn with_the_catalogue_cache_off_every_completion_reads_its_context(pool: PgPool) {
    let mut h = start_with(pool, |c| c.catalogue_cache_mb = 0).await;
    for _ in 0..2 {
        let cost = tick_with_attempt(&mut h, 1000).await;
        assert!((cost - 0.018).abs() < 1e-9, "{cost}");
    }
    assert_eq!(context_counter(&h, "complete_read").await, 2);
    assert_eq!(context_counter(&h, "attempt_read").await, 2);
    assert_eq!(context_counter(&h, "complete_held").await, 0);
    assert_eq!(context_counter(&h, "attempt_held").await, 0);
}

async fn claim_reads(h: &Harness, outcome: &str) -> u64 {
    outcome_counter(h, "claim_reads", outcome).await
}

/// An instance claimed before has its bundle read in the
/// claim's own round trip, and the bundle is the same as a separate read's
/// (the tail the database holds, the held catalogue and tail still used).
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_instance_claimed_before_reads_its_bundle_with_the_claim(pool: PgPool) {
    let mut h = start(pool).await;
    for i in 1..=5 {
        let b = h.claim().await;
        let tail = i64::try_from(b.ledger_tail.len()).unwrap();
        assert_eq!(tail_of(&b), tail_in_db(&h, 12).await, "claim {i}");
        assert_eq!(tail, i - 1);
        complete_and_wake(&h, &b, &format!("turn {i}")).await;
    }
    assert_eq!(claim_reads(&h, "separate").await, 1, "the first claim");
    assert_eq!(claim_reads(&h, "joined").await, 4);
    assert_eq!(claim_reads(&h, "redone").await, 0);
    assert_eq!(ledger_cache_counter(&h, "hit").await, 3);
    assert_eq!(catalogue_counter(&h, "hit").await, 4);
}

/// A joined read is made for the type and site chain the instance had at
/// its last claim; when the claimed instance yields another chain (a
/// redactor rebound to another call-site), the read is discarded and made
/// again for the new chain, and the next claim joins again.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_joined_read_for_another_site_chain_is_read_again(pool: PgPool) {
    let mut h = start(pool).await;
    let planning = preset_with_overlay(&h, "planning", "scripted-1", "Plan carefully.").await;
    h.store
        .llm()
        .bind_site(h.tenant, "Agent:Planning", planning.id)
        .await
        .unwrap();
    let redactor = h
        .store
        .instances()
        .create(
            h.tenant,
            NewInstance {
                agent_type: AgentType::PromptRedactor,
                status: InstanceStatus::Active,
                call_site_id: Some("Agent:Default".into()),
                workset_deadline: None,
                seed_initialized: false,
            },
        )
        .await
        .unwrap()
        .id;
    let claim_redactor = async |h: &mut Harness| {
        h.wake(redactor, "review").await;
        let b = h.claim_instance(redactor).await;
        let event_id = b.event.as_ref().unwrap().id.clone();
        let mut req = completion_with(h, &b.session_id, &event_id, vec![]);
        req.instance_id = redactor.to_string();
        h.complete(req).await;
        b
    };
    let b = claim_redactor(&mut h).await;
    let target = b.redaction_target.unwrap();
    assert_eq!(target.call_site_id, "Agent:Default");
    assert_ne!(target.resolved_site_id, "Agent:Planning");
    inspect::force_call_site(&h.pool, redactor, "Agent:Planning")
        .await
        .unwrap();
    let b = claim_redactor(&mut h).await;
    let target = b.redaction_target.unwrap();
    assert_eq!(
        (target.resolved_site_id.as_str(), target.preset_id),
        ("Agent:Planning", planning.id.to_string()),
        "the bindings were read for the new chain"
    );
    assert_eq!(claim_reads(&h, "redone").await, 1);
    claim_redactor(&mut h).await;
    assert_eq!(
        (
            claim_reads(&h, "separate").await,
            claim_reads(&h, "redone").await,
            claim_reads(&h, "joined").await
        ),
        (1, 1, 1)
    );
}

/// `GENESIS_LEDGER_CACHE_MB=0` holds no instance kinds either: every
/// claim reads its bundle after it.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn with_the_ledger_cache_off_every_claim_reads_its_bundle_after_it(pool: PgPool) {
    let mut h = start_with(pool, |c| c.ledger_cache_mb = 0).await;
    run_turns(&mut h, 3).await;
    assert_eq!(claim_reads(&h, "separate").await, 3);
    assert_eq!(claim_reads(&h, "joined").await, 0);
}

/// DESIGN §5.8 on the database: a catalogue row that grants a Compliance mode
/// `soa_propose_task` (outside the Compliance superset) makes the claim fail
/// closed with MODE_RESOLUTION_FAILED: no bundle, so no tool runs and no turn
/// is written. Restoring the row (which raises the catalogue epoch) lets the
/// instance's next tick run.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_catalogue_row_granting_compliance_soa_propose_task_fails_the_claim_closed(pool: PgPool) {
    let mut h = start(pool).await;
    let compliance = compliance_instance(&h.store, h.tenant).await;
    let seed: Vec<String> = genesis_core::modes::seed_catalogue(AgentType::Compliance)
        .into_iter()
        .find(|m| m.name == "Cadence")
        .expect("the Cadence seed")
        .toolset;
    let mut widened = seed.clone();
    widened.push("soa_propose_task".into());
    inspect::force_mode_toolset(&h.pool, "Compliance", "Cadence", Some(widened.as_slice()))
        .await
        .unwrap();
    let claim = |h: &Harness| {
        h.req(pb::ClaimTickRequest {
            instance_id: compliance.to_string(),
            tenant_id: h.tenant.to_string(),
            event_id: None,
        })
    };
    let err = h.client.claim_tick(claim(&h)).await.expect_err("claimed");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().starts_with("MODE_RESOLUTION_FAILED")
            && err.message().contains("soa_propose_task"),
        "{}",
        err.message()
    );
    let turns = inspect::count_ledger_turns(&h.pool, compliance)
        .await
        .unwrap();
    assert_eq!(turns, 0);

    // The seed restored: the instance ticks again once any lease the
    // refused claim left has lapsed.
    inspect::force_mode_toolset(&h.pool, "Compliance", "Cadence", None)
        .await
        .unwrap();
    inspect::force_lease_released(&h.pool, compliance)
        .await
        .unwrap();
    let bundle = h.claim_instance(compliance).await;
    let mode = bundle.mode.expect("a resolved mode");
    assert_eq!(mode.name, "Cadence");
    assert!(
        !mode.toolset.iter().any(|t| t == "soa_propose_task"),
        "{:?}",
        mode.toolset
    );
}

/// A tick whose every provider failed is deferred, not completed: its
/// attempts are billed, its event goes back to the queue unconsumed with
/// its delivery attempt given back (so an outage never dead-letters it),
/// no turn is written, the STUCK counter never moves and the agent stays
/// active. The fifth failure in a row raises one attention request; a
/// completed tick ends the streak.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_provider_failure_defers_the_event_and_never_counts_toward_stuck(pool: PgPool) {
    let mut h = start(pool).await;
    h.wake(h.instance, "hello?").await;
    // The AgentInitialized opener first, completed normally.
    let b = h.claim().await;
    let opener = b.event.unwrap().id;
    h.complete(completion_with(&h, &b.session_id, &opener, vec![]))
        .await;
    let failed = |h: &Harness, session: &str, event: &str| {
        let mut req = completion_with(
            h,
            session,
            event,
            vec![pending(priced_attempt("server_error", 0))],
        );
        req.outcome = Some(pb::TickOutcome {
            completion: pb::TickCompletion::ProviderFailed as i32,
            reason: "LLM call failed: all providers exhausted".into(),
            ..Default::default()
        });
        req
    };
    let turns_before = h.count("agent_state_ledger").await;
    let mut message_event = String::new();
    for round in 1..=7 {
        // Make the deferred event due again without waiting for its delay.
        inspect::force_pending_events_due(&h.pool, "OperatorMessage")
            .await
            .unwrap();
        let b = h.claim().await;
        let event = b.event.unwrap();
        assert_eq!(event.kind, "OperatorMessage", "round {round}");
        if round > 1 {
            assert_eq!(event.id, message_event, "the same event comes back");
        }
        message_event = event.id.clone();
        let done = h.complete(failed(&h, &b.session_id, &event.id)).await;
        assert!(done.deferred, "round {round}: {done:?}");
        assert!(done.ledger_id.is_empty() && done.turn_number == 0);
        assert_eq!(done.consecutive_provider_failures, round);
        assert_eq!(
            done.attention_request_id.is_some(),
            round == 5,
            "round {round}: the request is raised once, at the threshold"
        );
        let inspect::EventRedelivery {
            attempts,
            consumed,
            published,
            visible_later: later,
        } = inspect::event_redelivery(
            &h.pool,
            event.id.parse::<Uuid>().unwrap(),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
        assert_eq!(
            (attempts, consumed, published, later),
            (0, false, false, true),
            "round {round}: given back, pending, to be published again, later"
        );
    }
    assert_eq!(h.count("agent_state_ledger").await, turns_before, "no turn");
    let c = inspect::instance_counters(&h.pool, h.instance)
        .await
        .unwrap();
    let (status, blocked, failures, leased) = (
        c.status,
        c.consecutive_blocked_turns,
        c.consecutive_provider_failures,
        c.leased,
    );
    assert_eq!(
        (status.as_str(), blocked, failures, leased),
        ("active", 0, 7, false)
    );
    let requests = inspect::count_attention_requests_of_kind(&h.pool, "provider_failure")
        .await
        .unwrap();
    let dead = inspect::count_attention_requests_of_kind(&h.pool, "dead_letter")
        .await
        .unwrap();
    assert_eq!((requests, dead), (1, 0));
    // Each failed attempt was recorded and billed at its row's price.
    let (n, cost) = inspect::attempts_with_outcome(&h.pool, "server_error")
        .await
        .unwrap();
    assert_eq!(n, 7);
    assert!((cost - 7.0 * 0.015).abs() < 1e-9, "{cost}");
    // The provider answers again: the message is handled once, the streak ends.
    inspect::force_event_due(&h.pool, message_event.parse::<Uuid>().unwrap())
        .await
        .unwrap();
    let b = h.claim().await;
    assert_eq!(b.event.as_ref().unwrap().id, message_event);
    assert_eq!(
        b.instance.as_ref().unwrap().consecutive_provider_failures,
        7
    );
    let done = h
        .complete(completion_with(&h, &b.session_id, &message_event, vec![]))
        .await;
    assert!(!done.deferred);
    assert_eq!(done.decision_kind, "MessageAcknowledged");
    let failures = inspect::instance_counters(&h.pool, h.instance)
        .await
        .unwrap()
        .consecutive_provider_failures;
    assert_eq!(failures, 0);
}

/// A deferral by a session that no longer holds the lease writes nothing.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_provider_failure_of_a_lost_lease_writes_nothing(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let event = b.event.unwrap().id;
    let mut req = completion_with(
        &h,
        &Uuid::new_v4().to_string(),
        &event,
        vec![pending(priced_attempt("server_error", 0))],
    );
    req.outcome = Some(pb::TickOutcome {
        completion: pb::TickCompletion::ProviderFailed as i32,
        reason: "down".into(),
        ..Default::default()
    });
    let err = h
        .client
        .clone()
        .complete_tick(h.req(req))
        .await
        .expect_err("not the lease holder");
    assert!(genesis_proto::convert::is_lease_lost(&err), "{err:?}");
    assert_eq!(h.count("llm_call_attempts").await, 0);
    let (failures, visible_now) =
        inspect::event_due_and_instance_failures(&h.pool, event.parse::<Uuid>().unwrap())
            .await
            .unwrap();
    assert_eq!((failures, visible_now), (0, true));
}

/// A ReserveCredit of `session` on `instance` for the worst case of one
/// claude-opus-4-8 turn: 1,000 prompt tokens at the dearest prompt price
/// ($18.75/Mtok, a cache write) and 1,000 output tokens at $75/Mtok.
fn reservation(h: &Harness, instance: Uuid, session: &str) -> pb::ReserveCreditRequest {
    pb::ReserveCreditRequest {
        session_id: session.to_owned(),
        instance_id: instance.to_string(),
        tenant_id: h.tenant.to_string(),
        models: vec!["claude-opus-4-8".into()],
        prompt_tokens: 1_000,
        max_output_tokens: 1_000,
    }
}

/// The weekly ceiling holds before a call: two ticks of one tenant racing
/// for the last dollars of the window get one grant between them, the
/// refusal writes nothing, and the grant stops counting once its tick
/// completes (its real cost is then drawn instead).
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn concurrent_reservations_never_cross_the_weekly_ceiling(pool: PgPool) {
    let mut h = start(pool).await;
    let other = another_foundational(&h).await;
    let worst = (1_000.0 * 18.75 + 1_000.0 * 75.0) / 1e6; // 0.09375
    let week = genesis_store::credit::week_start(chrono::Utc::now());
    // $0.10 left of the default $60: room for one worst case, not two.
    h.store
        .credit()
        .draw_down(h.tenant, week, 60.0, 59.90)
        .await
        .unwrap();
    let a = h.claim().await;
    let b = h.claim_instance(other).await;
    for _round in 0..5 {
        let (mut ca, mut cb) = (h.client.clone(), h.client.clone());
        let (ra, rb) = tokio::join!(
            ca.reserve_credit(h.req(reservation(&h, h.instance, &a.session_id))),
            cb.reserve_credit(h.req(reservation(&h, other, &b.session_id))),
        );
        let (ra, rb) = (ra.unwrap().into_inner(), rb.unwrap().into_inner());
        assert_eq!(
            u8::from(ra.granted) + u8::from(rb.granted),
            1,
            "exactly one of {ra:?} and {rb:?}"
        );
        let granted = if ra.granted { &ra } else { &rb };
        assert!((granted.reserved_usd - worst).abs() < 1e-12, "{granted:?}");
        // The same session asking again replaces its own reservation.
        let (session, instance) = if ra.granted {
            (&a.session_id, h.instance)
        } else {
            (&b.session_id, other)
        };
        let again = h
            .client
            .clone()
            .reserve_credit(h.req(reservation(&h, instance, session)))
            .await
            .unwrap()
            .into_inner();
        assert!(again.granted, "{again:?}");
        inspect::force_credit_reservations_cleared(&h.pool)
            .await
            .unwrap();
    }
    // A's grant holds; B is refused and nothing of B's is written.
    let ra = h
        .client
        .clone()
        .reserve_credit(h.req(reservation(&h, h.instance, &a.session_id)))
        .await
        .unwrap()
        .into_inner();
    assert!(ra.granted);
    let rb = h
        .client
        .clone()
        .reserve_credit(h.req(reservation(&h, other, &b.session_id)))
        .await
        .unwrap()
        .into_inner();
    assert!(!rb.granted && rb.reserved_usd == 0.0, "{rb:?}");
    assert!((rb.held_usd - worst).abs() < 1e-12, "{rb:?}");
    assert_eq!(h.count("credit_reservations").await, 1);
    // A completes: its lease is released, so its reservation no longer
    // counts, and B's turn now fits.
    let event = a.event.unwrap().id;
    h.complete(completion_with(&h, &a.session_id, &event, vec![]))
        .await;
    let rb = h
        .client
        .clone()
        .reserve_credit(h.req(reservation(&h, other, &b.session_id)))
        .await
        .unwrap()
        .into_inner();
    assert!(rb.granted, "{rb:?}");
    assert_eq!(
        h.count("credit_reservations").await,
        1,
        "A's lapsed row went"
    );
}

/// ReserveCredit refuses bad input and a session that lost its lease, and
/// grants without holding anything when enforcement is off.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_reservation_checks_its_input_its_lease_and_enforcement(pool: PgPool) {
    let mut h = start(pool).await;
    let a = h.claim().await;
    let mut bad = reservation(&h, h.instance, &a.session_id);
    bad.models.clear();
    let err = h
        .client
        .clone()
        .reserve_credit(h.req(bad))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("models"), "{}", err.message());
    let mut bad = reservation(&h, h.instance, &a.session_id);
    bad.max_output_tokens = -1;
    let err = h
        .client
        .clone()
        .reserve_credit(h.req(bad))
        .await
        .unwrap_err();
    assert!(
        err.message().starts_with("max_output_tokens"),
        "{}",
        err.message()
    );
    let stale = reservation(&h, h.instance, &Uuid::new_v4().to_string());
    let err = h
        .client
        .clone()
        .reserve_credit(h.req(stale))
        .await
        .unwrap_err();
    assert!(genesis_proto::convert::is_lease_lost(&err), "{err:?}");
    assert_eq!(h.count("credit_reservations").await, 0);
    // A tick claimed while enforcement is off holds nothing.
    let event = a.event.unwrap().id;
    h.complete(completion_with(&h, &a.session_id, &event, vec![]))
        .await;
    inspect::fixture_config_row(
        &h.pool,
        h.tenant,
        "AgentDispatcher:CreditEnforcementEnabled",
        "false",
    )
    .await
    .unwrap();
    h.wake(h.instance, "next").await;
    let c = h.claim().await;
    let free = h
        .client
        .clone()
        .reserve_credit(h.req(reservation(&h, h.instance, &c.session_id)))
        .await
        .unwrap()
        .into_inner();
    assert!(free.granted && free.reserved_usd == 0.0, "{free:?}");
    assert_eq!(h.count("credit_reservations").await, 0);
}

/// A recorded attempt of `claude-sonnet-4-5` (priced by the seeded row).
fn sonnet_attempt() -> pb::CallAttempt {
    pb::CallAttempt {
        requested_model: "claude-sonnet-4-5".into(),
        served_model: "claude-sonnet-4-5".into(),
        provider: "anthropic".into(),
        credential_name: "ANTHROPIC_API_KEY".into(),
        outcome: "success".into(),
        input_tokens: 1000,
        output_tokens: 100,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        latency_ms: 5,
        error_message: String::new(),
    }
}

/// An LLM turn's journal step as a pod sends it; `system` carries a
/// credential the supervisor must mask before it stores the step.
fn turn_step(turn: u32, attempts: usize) -> serde_json::Value {
    let attempt = serde_json::json!({
        "provider": "anthropic", "credential_name": "ANTHROPIC_API_KEY",
        "requested_model": "claude-sonnet-4-5", "served_model": "claude-sonnet-4-5",
        "outcome": "success", "latency_ms": 5,
        "usage": {"input_tokens": 1000, "output_tokens": 100},
    });
    serde_json::json!({
        "turn": turn,
        "invocation_id": "inv-journal",
        "request": {
            "model": "claude-sonnet-4-5",
            "system": "Be brief. Key: sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123",
            "messages": [{"role": "user", "content": "EVENT: AgentInitialized"}],
            "tools": ["soa_send_message", "phase_complete"],
            "max_output_tokens": 512,
        },
        "response": {
            "tool_calls": [{"id": "c1", "name": "soa_send_message", "arguments": {"body": "hello"}}],
            "served_model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1000, "output_tokens": 100},
        },
        "attempts": vec![attempt; attempts],
    })
}

/// The journal's writers: a turn's step is written with its last attempt
/// and a tool call's with its effect, each in one transaction; a step that
/// is not one, or names an event the session did not claim, is refused
/// with nothing written (no attempt, no spend, no tool effect); a
/// credential in a step is masked; and the claim that takes the event over
/// after the lease ran out is handed the journal to resume from.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn turns_and_tool_calls_are_journaled_with_their_writes_and_resumed_by_the_next_claim(
    pool: PgPool,
) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let session = b.session_id.clone();
    let event = b.event.as_ref().unwrap().id.clone();
    assert!(b.journal.is_empty(), "a first claim has nothing to resume");
    let record = |step: String, event_id: String| {
        h.req(pb::RecordCallAttemptRequest {
            session_id: session.clone(),
            instance_id: h.instance.to_string(),
            tenant_id: h.tenant.to_string(),
            invocation_id: "inv-journal".into(),
            attempt: Some(sonnet_attempt()),
            prompt_overlay_sha256: String::new(),
            journal_step_json: step,
            event_id,
        })
    };
    // Refused, each naming its field, with nothing written.
    let refusals = [
        (
            turn_step(1, 0).to_string(),
            event.clone(),
            "journal_step_json",
        ),
        (
            "{\"turn\": 1}".to_owned(),
            event.clone(),
            "journal_step_json",
        ),
        (turn_step(1, 1).to_string(), String::new(), "event_id"),
        (
            with_context(turn_step(1, 1), serde_json::json!([])).to_string(),
            event.clone(),
            "journal_step_json",
        ),
    ];
    for (step, event_id, field) in refusals {
        let err = h
            .client
            .clone()
            .record_call_attempt(record(step, event_id))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().starts_with(field), "{field}: {err:?}");
    }
    // Another event of the instance (not the one this session claimed).
    h.wake(h.instance, "queued behind the opener").await;
    let other = inspect::event_ids_of_kind(&h.pool, h.instance, "OperatorMessage")
        .await
        .unwrap()
        .pop()
        .expect("the operator message is queued");
    let err = h
        .client
        .clone()
        .record_call_attempt(record(turn_step(1, 1).to_string(), other.to_string()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert_eq!(h.count("llm_call_attempts").await, 0);
    assert_eq!(h.count("credit_windows").await, 0);
    assert_eq!(h.count("agent_episode_journal").await, 0);

    // The turn: its attempt and its step in one write, with the context
    // the episode was claimed with.
    let couples = serde_json::json!([{
        "model": "claude-sonnet-4-5", "provider": "anthropic",
        "credential_names": ["ANTHROPIC_API_KEY"]
    }]);
    let recorded = h
        .client
        .clone()
        .record_call_attempt(record(
            with_context(turn_step(1, 1), couples).to_string(),
            event.clone(),
        ))
        .await
        .unwrap()
        .into_inner();
    // A tool call naming another event runs nothing.
    let mut wrong = h.invoke(
        &session,
        "inv-journal:1:c1",
        "soa_send_message",
        r#"{"body":"hello"}"#,
    );
    wrong.get_mut().event_id = other.to_string();
    let err = h.client.clone().invoke_tool(wrong).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert_eq!(
        h.count("agent_messages").await,
        1,
        "only the operator's message"
    );
    assert_eq!(h.count("tool_invocations").await, 0);
    // The tool call: its effect and its step in one write.
    let mut call = h.invoke(
        &session,
        "inv-journal:1:c1",
        "soa_send_message",
        r#"{"body":"hello"}"#,
    );
    call.get_mut().event_id = event.clone();
    let ran = h
        .client
        .clone()
        .invoke_tool(call)
        .await
        .unwrap()
        .into_inner();
    assert!(ran.error.is_none() && !ran.replayed, "{ran:?}");
    assert_eq!(h.count("agent_messages").await, 2);

    let steps = h
        .store
        .journal()
        .episode(h.tenant, event.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!(steps[0].kind.as_str(), "llm_turn");
    let turn: genesis_core::journal::LlmTurnStep =
        serde_json::from_value(steps[0].entry.clone()).unwrap();
    assert_eq!(
        turn.snapshot_id.as_deref(),
        Some(recorded.snapshot_id.as_str())
    );
    assert_eq!(turn.snapshot_cost_usd, Some(recorded.snapshot_cost_usd));
    assert!(recorded.snapshot_cost_usd > 0.0);
    // The system prompt is kept once per tenant, named by its hash in the
    // step, and put back when the journal is read.
    assert_eq!(h.count("agent_prompt_texts").await, 1);
    let stored: String = sqlx::query_scalar(
        "SELECT entry->'request'->>'system_sha256' FROM agent_episode_journal WHERE seq = 0",
    )
    .fetch_one(&h.pool)
    .await
    .unwrap();
    assert_eq!(turn.request.system_sha256.as_deref(), Some(stored.as_str()));
    let raw: Option<String> = sqlx::query_scalar(
        "SELECT entry->'request'->>'system' FROM agent_episode_journal WHERE seq = 0",
    )
    .fetch_one(&h.pool)
    .await
    .unwrap();
    assert_eq!(raw, None, "the step does not repeat the prompt's text");
    let context = turn.request.context.as_ref().expect("the context is kept");
    assert_eq!(context.couples[0].model, "claude-sonnet-4-5");
    assert_eq!(context.budget.max_turns, Some(12));
    let system = turn.request.system.unwrap();
    assert!(!system.contains("sk-ant-api03"), "{system}");
    assert!(system.contains("[REDACTED:api_key]"), "{system}");
    assert_eq!(steps[1].kind.as_str(), "tool_call");
    let tool: genesis_core::journal::ToolCallStep =
        serde_json::from_value(steps[1].entry.clone()).unwrap();
    assert_eq!(tool.call_id, "inv-journal:1:c1");
    assert_eq!(
        (tool.side_effecting, tool.blocked),
        (ran.side_effecting, false)
    );
    assert_eq!(tool.result.to_string(), ran.result_json);

    // The pod dies; its lease runs out; the next claim takes the same
    // event over and is handed its journal.
    h.expire_lease().await;
    let again = h.claim().await;
    assert_ne!(again.session_id, session);
    assert_eq!(again.event.as_ref().unwrap().id, event);
    let kinds: Vec<&str> = again.journal.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, ["llm_turn", "tool_call"]);
    assert_eq!(
        again.journal.iter().map(|s| s.seq).collect::<Vec<_>>(),
        [0, 1]
    );
    let handed: genesis_core::journal::ToolCallStep =
        serde_json::from_str(&again.journal[1].entry_json).unwrap();
    assert_eq!(handed, tool);
}

/// `step` with a recorded claim context of `couples` and a 12-turn budget.
fn with_context(mut step: serde_json::Value, couples: serde_json::Value) -> serde_json::Value {
    step["request"]["context"] = serde_json::json!({
        "resolved_site_id": "Agent:Planning",
        "couples": couples,
        "budget": {"max_turns": 12}
    });
    step
}

/// An episode whose journal outgrows its cap: the step that would pass it
/// becomes one truncation marker, later steps are dropped, and the episode
/// still records its attempts, runs its tool and completes its turn, whose
/// last attempt (with its own step) rides with the completion.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_journal_past_its_cap_is_cut_with_a_marker_and_the_episode_still_completes(pool: PgPool) {
    let cap = genesis_core::journal::MIN_MAX_EPISODE_BYTES;
    let mut h = start_with(pool, |c| c.journal_max_episode_bytes = cap).await;
    let b = h.claim().await;
    let session = b.session_id.clone();
    let event = b.event.as_ref().unwrap().id.clone();
    let mut big = turn_step(1, 1);
    big["request"]["messages"][0]["content"] = "x".repeat(cap as usize).into();
    let recorded = h
        .client
        .clone()
        .record_call_attempt(h.req(pb::RecordCallAttemptRequest {
            session_id: session.clone(),
            instance_id: h.instance.to_string(),
            tenant_id: h.tenant.to_string(),
            invocation_id: "inv-journal".into(),
            attempt: Some(sonnet_attempt()),
            prompt_overlay_sha256: String::new(),
            journal_step_json: big.to_string(),
            event_id: event.clone(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(recorded.cost_usd > 0.0, "the attempt is recorded and paid");
    let mut call = h.invoke(
        &session,
        "inv-journal:1:c1",
        "soa_send_message",
        r#"{"body":"hello"}"#,
    );
    call.get_mut().event_id = event.clone();
    let ran = h
        .client
        .clone()
        .invoke_tool(call)
        .await
        .unwrap()
        .into_inner();
    assert!(ran.error.is_none(), "{ran:?}");
    assert_eq!(h.count("agent_messages").await, 1, "the tool ran");
    let mut last = pending(sonnet_attempt());
    last.invocation_id = "inv-journal".into();
    last.journal_step_json = turn_step(2, 1).to_string();
    let done = h
        .complete(completion_with(&h, &session, &event, vec![last]))
        .await;
    assert!(!done.ledger_id.is_empty(), "the turn is written");

    let steps = h
        .store
        .journal()
        .episode(h.tenant, event.parse().unwrap())
        .await
        .unwrap();
    let kinds: Vec<&str> = steps.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, ["truncated"], "one marker, nothing after it");
    assert_eq!(steps[0].entry["dropped_kind"], "llm_turn");
    assert_eq!(steps[0].entry["max_bytes"], cap);
    assert!(steps[0].entry["dropped_bytes"].as_i64().unwrap() > i64::from(cap));
    assert_eq!(h.count("llm_call_attempts").await, 2);
}

/// The completion's last attempt carries its turn's step into the turn's
/// own transaction; a completion whose step is not one is refused with
/// nothing written.
#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_last_turn_is_journaled_with_the_completion_or_not_at_all(pool: PgPool) {
    let mut h = start(pool).await;
    let b = h.claim().await;
    let event = b.event.as_ref().unwrap().id.clone();
    let mut bad = pending(sonnet_attempt());
    bad.journal_step_json = turn_step(0, 1).to_string();
    let err = h
        .client
        .clone()
        .complete_tick(h.req(completion_with(&h, &b.session_id, &event, vec![bad])))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message()
            .starts_with("call_attempts[0].journal_step_json"),
        "{err:?}"
    );
    assert_eq!(h.count("llm_call_attempts").await, 0);
    assert_eq!(h.count("agent_state_ledger").await, 0);
    let mut good = pending(sonnet_attempt());
    good.journal_step_json = turn_step(1, 1).to_string();
    h.complete(completion_with(&h, &b.session_id, &event, vec![good]))
        .await;
    let steps = h
        .store
        .journal()
        .episode(h.tenant, event.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].kind.as_str(), "llm_turn");
    assert!(steps[0].entry["snapshot_cost_usd"].as_f64().unwrap() > 0.0);
}
