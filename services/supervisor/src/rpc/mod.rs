//! The `genesis.v1.AgentPod` service (DESIGN §4, spec §3.3): ClaimTick with
//! its bundle, RenewLease, governed InvokeTool, RecordCallAttempt with
//! server-side cost, and CompleteTick as the single passivation write. Each
//! request is validated into domain values on receipt (INVALID_ARGUMENT
//! naming the field); store and core errors are mapped once in
//! [`crate::error`]. Must never write on a lost lease, never trust a cost or
//! decision kind from the pod, and never run a tool outside the instance's
//! resolved toolset.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use genesis_core::budget::{FoundationalState, week_start_for};
use genesis_core::mapper::{AgentDecisionMapper, Completion, TickOutcome};
use genesis_core::modes::{ModeDefinition, ResolvedMode, resolve_mode, seed_catalogue};
use genesis_core::plan_hash::forced_replan_due;
use genesis_core::prompt::base_system_prompt;
use genesis_core::sites::policy_site_for;
use genesis_core::{
    AgentDispatcherOptions, AgentEventKind, AgentType, BudgetAxis, BudgetEnvelope, BudgetOverride,
    Limit,
};
use genesis_proto::convert::{parse_optional_uuid, parse_uuid, require, timestamp_from_chrono};
use genesis_proto::v1 as pb;
use genesis_proto::v1::agent_pod_server::AgentPod;
use genesis_store::llm::{CreditDraw, NewCallAttempt, PricedAttempt};
use genesis_store::tick::{
    ExpectedPrior, LedgerAction, TickCompletion as StoreCompletion, TickDecision,
};
use genesis_store::tool_invocations::{NewToolInvocation, find_in, insert_in, lease_held_in};
use genesis_store::{ClaimOutcome, ModeRow, PriorCounters, Store, StoreError};
use serde_json::{Value, json};
use tonic::{Request, Response, Status};
use tracing::{Instrument as _, Span};
use uuid::Uuid;

use crate::auth::check_tenant;
use crate::bundle::{
    ClaimKind, HeldForRead, corpus_to_proto, effective_options, instance_to_proto,
    platform_options, read_bundle, read_chat_tail, settle_bundle,
};
use crate::cache::catalogue::CatalogueCache;
use crate::cache::ledger::LedgerTailCache;
use crate::cache::tick_memo::{TickMemo, TickMemos};
use crate::cache::{ClaimCaches, ClaimKinds};
use crate::error::{SupervisorError, store_status};
use crate::metrics::Metrics;
use crate::ops::OpsProbe;
use crate::presets::{DefaultProvider, ModePreset, resolve_chain};
use crate::tools::{Governance, ToolContext, ToolRegistry};

/// Longest arguments JSON accepted for one tool call, in bytes.
pub const MAX_TOOL_ARGUMENTS_BYTES: usize = 256 * 1024;

/// Supervisor settings the service needs.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// Code/env options; the `system_configs` layer is applied per call.
    pub options: AgentDispatcherOptions,
    pub lease_ttl: Duration,
    pub max_attempts: u32,
    pub default_provider: DefaultProvider,
    /// Bytes of ledger tails held between claims (0: none; every claim
    /// reads the whole tail).
    pub ledger_cache_bytes: usize,
    /// Bytes of bundle catalogues held between claims (0: none; every claim
    /// is sent the catalogue).
    pub catalogue_cache_bytes: usize,
    /// What an attempt of a model with no price row is charged.
    pub unpriced_price: genesis_core::pricing::ModelPrice,
}

/// The AgentPod implementation.
#[derive(Clone)]
pub struct AgentPodService {
    store: Store,
    settings: Arc<ServiceSettings>,
    registry: Arc<ToolRegistry>,
    governance: Arc<dyn Governance>,
    metrics: Arc<Metrics>,
    ops: Arc<OpsProbe>,
    caches: Arc<ClaimCaches>,
    /// What each claim in flight read, spared from being read again.
    memos: Arc<TickMemos>,
}

fn status_of(err: StoreError, metrics: &Metrics) -> Status {
    if err == StoreError::LeaseLost {
        metrics.lease_lost();
    }
    store_status(&err)
}

/// Mode catalogue rows → core definitions; a row without its own toolset
/// takes the in-code seed's for that name.
fn mode_definitions(
    agent_type: AgentType,
    rows: &[ModeRow],
) -> Result<Vec<ModeDefinition>, SupervisorError> {
    let seeds = seed_catalogue(agent_type);
    rows.iter()
        .map(|r| {
            let budget_override = r
                .budget_override
                .as_ref()
                .map(BudgetOverride::from_json_value)
                .transpose()
                .map_err(SupervisorError::ModeResolution)?;
            let toolset = match &r.toolset {
                Some(t) => t.clone(),
                None => seeds
                    .iter()
                    .find(|s| s.name == r.name)
                    .map(|s| s.toolset.clone())
                    .unwrap_or_default(),
            };
            Ok(ModeDefinition {
                name: r.name.clone(),
                description: r.description.clone(),
                prompt_fragment: r.prompt_fragment.clone(),
                toolset,
                preset: r.preset_id.clone(),
                budget_override,
                system_seed: r.system_seed,
            })
        })
        .collect()
}

fn resolve(
    agent_type: AgentType,
    active_mode: Option<&str>,
    rows: &[ModeRow],
) -> Result<ResolvedMode, SupervisorError> {
    let defs = mode_definitions(agent_type, rows)?;
    resolve_mode(agent_type, active_mode, &defs).map_err(SupervisorError::ModeResolution)
}

fn budget_to_proto(b: &BudgetEnvelope) -> pb::BudgetEnvelope {
    let i64_of = |l: Limit| l.limited().map(|v| i64::try_from(v).unwrap_or(i64::MAX));
    let i32_of = |l: Limit| l.limited().map(|v| i32::try_from(v).unwrap_or(i32::MAX));
    pb::BudgetEnvelope {
        max_tokens: i64_of(b.max_tokens),
        max_tool_calls: i32_of(b.max_tool_calls),
        max_wall_ms: b
            .max_wall_seconds
            .limited()
            .map(|s| i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX)),
        max_cost_usd: b.max_dollars.limited(),
        max_turns: i32_of(b.max_turns),
        max_output_tokens_per_turn: i64_of(b.max_output_tokens_per_turn),
    }
}

/// An attempt's four disjoint token counts (checked non-negative before).
fn token_usage(a: &NewCallAttempt) -> genesis_core::pricing::TokenUsage {
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    genesis_core::pricing::TokenUsage {
        input_tokens: n(a.input_tokens),
        output_tokens: n(a.output_tokens),
        cache_read_tokens: n(a.cache_read_tokens),
        cache_write_tokens: n(a.cache_write_tokens),
    }
}

/// The most one turn of a chain of `models` can cost: the dearest of its
/// couples' worst cases (any couple may answer), a model without a row at
/// the fallback price; the scripted model is free.
fn worst_case_usd(
    models: &[String],
    rows: &[genesis_store::llm::PricingRow],
    unpriced: genesis_core::pricing::ModelPrice,
    prompt_tokens: u64,
    max_output_tokens: u64,
) -> f64 {
    models
        .iter()
        .map(|m| {
            let price = genesis_store::llm::choose_pricing("", m, rows)
                .map(|c| c.row.price())
                .unwrap_or(unpriced);
            price.worst_case_usd(prompt_tokens, max_output_tokens)
        })
        .fold(0.0, f64::max)
}

/// Price `attempt` in place: its cost, the row it was billed at and how
/// that row was chosen. The scripted provider is free; a model no row
/// prices is charged `unpriced`, never nothing.
fn apply_price(
    attempt: &mut NewCallAttempt,
    chosen: Option<&genesis_store::llm::ChosenPrice>,
    unpriced: genesis_core::pricing::ModelPrice,
) -> genesis_core::pricing::PricingSource {
    use genesis_core::pricing::{ModelPrice, PricingSource};
    let (price, priced_as, source) = if attempt.provider == genesis_core::presets::SCRIPTED_PROVIDER
    {
        (ModelPrice::FREE, None, PricingSource::Free)
    } else {
        match chosen {
            Some(c) => (c.row.price(), Some(c.row.model.clone()), c.source),
            None => (unpriced, None, PricingSource::Fallback),
        }
    };
    attempt.cost_usd = price.cost_usd(&token_usage(attempt));
    attempt.priced_as = priced_as;
    attempt.pricing_source = Some(source);
    source
}

/// One reported call attempt, checked as RecordCallAttempt checks it, ready
/// to be priced and written (`site_id` and `cost_usd` are filled then). A
/// batch of them (CompleteTick's `call_attempts`) is checked whole before
/// any is written. `prefix` names where the attempt sits in the request:
/// `""` for RecordCallAttempt, `call_attempts[i].` for CompleteTick.
fn reported_attempt(
    prefix: &str,
    ids: (Uuid, Uuid),
    invocation_id: &str,
    attempt: Option<&pb::CallAttempt>,
    prompt_overlay_sha256: &str,
) -> Result<NewCallAttempt, Status> {
    use genesis_proto::convert::invalid_argument as inv;
    let (instance_id, session) = ids;
    let a = require(&format!("{prefix}attempt"), attempt)?;
    // Every field is checked once, by the store's rule below; an empty
    // overlay hash means none.
    let prompt_overlay_sha256 =
        (!prompt_overlay_sha256.is_empty()).then(|| prompt_overlay_sha256.to_owned());
    let attempt = NewCallAttempt {
        instance_id,
        session,
        invocation_id: invocation_id.to_owned(),
        site_id: String::new(),
        requested_model: a.requested_model.clone(),
        served_model: a.served_model.clone(),
        provider: a.provider.clone(),
        credential_name: a.credential_name.clone(),
        outcome: a.outcome.clone(),
        input_tokens: a.input_tokens,
        output_tokens: a.output_tokens,
        cache_read_tokens: a.cache_read_tokens,
        cache_write_tokens: a.cache_write_tokens,
        latency_ms: a.latency_ms,
        error_message: a.error_message.clone(),
        cost_usd: 0.0,
        priced_as: None,
        pricing_source: None,
        prompt_overlay_sha256,
    };
    match attempt.check_reported() {
        Ok(()) => Ok(attempt),
        Err(StoreError::InvalidArgument { field, reason }) => {
            Err(inv(&format!("{prefix}{field}"), reason))
        }
        Err(e) => Err(store_status(&e)),
    }
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

fn tool_answer(
    result: Value,
    blocked: bool,
    side_effecting: bool,
    replayed: bool,
) -> pb::InvokeToolResponse {
    pb::InvokeToolResponse {
        result_json: result.to_string(),
        blocked,
        error: None,
        side_effecting,
        replayed,
    }
}

fn tool_error(code: &str, message: impl Into<String>) -> pb::InvokeToolResponse {
    pb::InvokeToolResponse {
        result_json: "{}".into(),
        blocked: false,
        error: Some(pb::ToolError {
            code: code.to_owned(),
            message: message.into(),
        }),
        side_effecting: false,
        replayed: false,
    }
}

/// The share of the catalogue budget (`GENESIS_CATALOGUE_CACHE_MB`) that
/// holds the memos of ticks in flight: a quarter, 4 MiB by default, room
/// for some 15,000 ticks claimed at once.
const TICK_MEMO_SHARE: usize = 4;

/// The share of the ledger-tail budget (`GENESIS_LEDGER_CACHE_MB`) that
/// holds each claimed instance's type and site chain, so its next claim
/// reads the bundle in the same round trip: a sixteenth, 4 MiB by default,
/// room for some 30,000 instances.
const CLAIM_KIND_SHARE: usize = 16;

impl AgentPodService {
    /// Build the service.
    pub fn new(
        store: Store,
        settings: ServiceSettings,
        registry: ToolRegistry,
        governance: Arc<dyn Governance>,
        metrics: Arc<Metrics>,
        ops: Arc<OpsProbe>,
    ) -> Self {
        Self {
            store,
            caches: Arc::new(ClaimCaches {
                ledger: LedgerTailCache::new(settings.ledger_cache_bytes),
                catalogue: CatalogueCache::new(settings.catalogue_cache_bytes),
                kinds: ClaimKinds::new(settings.ledger_cache_bytes / CLAIM_KIND_SHARE),
            }),
            memos: Arc::new(TickMemos::new(
                settings.catalogue_cache_bytes / TICK_MEMO_SHARE,
            )),
            settings: Arc::new(settings),
            registry: Arc::new(registry),
            governance,
            metrics,
            ops,
        }
    }

    /// Release a lease taken by a claim that cannot run (fail-closed mode
    /// resolution): the event stays unconsumed for a later claim.
    async fn release_lease(&self, tenant_id: Uuid, instance_id: Uuid, session: Uuid) {
        let res = self
            .store
            .instances()
            .release_lease(tenant_id, instance_id, session)
            .await;
        if let Err(e) = res {
            tracing::warn!(error = %e, %instance_id, "could not release the lease; it will expire");
        }
    }

    async fn claim(&self, req: pb::ClaimTickRequest) -> Result<pb::ClaimTickResponse, Status> {
        use pb::claim_tick_response::Result as R;
        let instance_id = parse_uuid("instance_id", &req.instance_id)?;
        let tenant_id = parse_uuid("tenant_id", &req.tenant_id)?;
        let _hint = parse_optional_uuid("event_id", req.event_id.as_deref())?;
        let session = Uuid::new_v4();
        let started = Utc::now();
        let week_start = week_start_for(started);
        let tail = i64::from(self.settings.options.ledger_tail.max(1));
        // An instance claimed before: ask for its bundle with the claim.
        let asked = self.caches.kinds.lookup(tenant_id, instance_id);
        let joined = asked
            .as_deref()
            .map(|k| {
                let b = k.bundle_for(instance_id, tail, week_start);
                let held = HeldForRead::lookup(&self.caches, &b);
                let ask = held.ask(&b);
                (b, held, ask)
            })
            .filter(|(_, _, ask)| ask.joins_claim());
        let outcome = self
            .store
            .claim_tick_reading(
                tenant_id,
                instance_id,
                session,
                self.settings.lease_ttl,
                self.settings.max_attempts,
                joined.as_ref().map(|(_, _, ask)| ask),
            )
            .await;
        let (outcome, joined_raw) = match outcome {
            Ok((claim, raw)) => (Ok(claim), raw),
            Err(e) => (Err(e), None),
        };
        let claim = match outcome {
            Ok(ClaimOutcome::Claimed(c)) => c,
            Ok(ClaimOutcome::LeaseHeld) => {
                self.metrics.claim("lease_held");
                let expires = self
                    .store
                    .instances()
                    .get(tenant_id, instance_id)
                    .await
                    .ok()
                    .and_then(|i| i.lease_expires_at);
                return Ok(pb::ClaimTickResponse {
                    result: Some(R::LeaseHeld(pb::LeaseHeld {
                        lease_expires_at: expires.map(timestamp_from_chrono),
                    })),
                });
            }
            Ok(ClaimOutcome::NothingDue { heartbeat, .. }) => {
                self.metrics.claim("nothing_due");
                return Ok(pb::ClaimTickResponse {
                    result: Some(R::NothingDue(pb::NothingDue {
                        heartbeat_seeded: heartbeat.created_at
                            >= started - chrono::Duration::seconds(1),
                        next_tick_at: Some(timestamp_from_chrono(heartbeat.visible_at)),
                    })),
                });
            }
            Err(StoreError::FailedPrecondition { reason })
                if reason.starts_with("agent instance is ") =>
            {
                self.metrics.claim("not_active");
                let status = reason.trim_start_matches("agent instance is ").to_owned();
                return Ok(pb::ClaimTickResponse {
                    result: Some(R::NotActive(pb::NotActive { status })),
                });
            }
            Err(e) => {
                self.metrics.claim("error");
                return Err(store_status(&e));
            }
        };

        let instance = &claim.instance;
        let now = Utc::now();
        let site = policy_site_for(instance.agent_type);
        // A redactor also reads its bound call-site's chain: the overlay it
        // reviews (spec §3.9).
        let redaction_site = instance
            .call_site_id
            .as_deref()
            .filter(|_| instance.agent_type == AgentType::PromptRedactor);
        let mut sites: Vec<String> = genesis_core::sites::site_chain(site)
            .into_iter()
            .map(str::to_owned)
            .collect();
        if let Some(target) = redaction_site {
            for s in genesis_core::sites::site_chain(target) {
                if !sites.iter().any(|have| have == s) {
                    sites.push(s.to_owned());
                }
            }
        }
        let found = ClaimKind {
            tenant_id,
            agent_type: instance.agent_type,
            sites,
        };
        // The joined read was made for the asked type and site chain: it
        // serves only an instance that still yields the same.
        let read = match (joined, joined_raw) {
            (Some((b, held, _)), Some(raw)) if asked.as_deref() == Some(&found) => {
                self.metrics.claim_read("joined");
                settle_bundle(&self.caches, &b, held, raw, None)
            }
            (joined, _) => {
                self.metrics.claim_read(if joined.is_some() {
                    "redone"
                } else {
                    "separate"
                });
                let b = found.bundle_for(instance_id, tail, week_start);
                read_bundle(&self.store, &self.caches, &b).await
            }
        };
        if asked.as_deref() != Some(&found) {
            self.caches.kinds.remember(instance_id, found);
        }
        let read = match read {
            Ok(r) => {
                self.metrics.ledger_cache(r.ledger_cache);
                self.metrics.catalogue_cache(r.catalogue_cache);
                r
            }
            Err(e) => {
                self.metrics.claim("error");
                self.release_lease(tenant_id, instance_id, session).await;
                return Err(store_status(&e));
            }
        };
        let opts = effective_options(&self.settings.options, &read.catalogue.configs);
        let mode = match resolve(
            instance.agent_type,
            instance.active_mode.as_deref(),
            &read.catalogue.modes,
        ) {
            Ok(m) => m,
            Err(e) => {
                self.metrics.claim("mode_resolution_failed");
                tracing::error!(%tenant_id, %instance_id, error = %e, "claim refused: mode resolution failed closed");
                self.release_lease(tenant_id, instance_id, session).await;
                return Err(e.into());
            }
        };
        let foundational = instance
            .is_building_starting_workset
            .then_some(instance.workset_deadline_utc)
            .flatten()
            .map(|deadline| FoundationalState { deadline, now });
        let limit = opts.weekly_credit_usd;
        let spent = read.credit_spent.unwrap_or(0.0);
        let window = genesis_core::CreditWindow {
            week_start,
            limit_usd: limit,
            spent_usd: spent,
        };
        let status = genesis_core::credit_status(&window, opts.credit_enforcement_enabled);
        // A mode's override never lifts an axis above the platform's
        // per-tick maximum, however long ago it was written, except where
        // the catalogue's own seed of the mode is wider (Research).
        let mode_budget = mode.budget_override.map(|o| {
            let seeded = genesis_core::modes::seeded_budget(mode.agent_type, &mode.name);
            o.within_platform(&genesis_core::ceilings::mode_bound(
                &platform_options(&self.settings.options, &read.catalogue.configs),
                seeded.as_ref(),
            ))
        });
        // The pod enforces only this envelope and never re-reads the window,
        // so the dollar axis is capped at what the window has left, in every
        // phase (the foundational envelope is otherwise unlimited).
        let budget = genesis_core::cap_to_credit(
            &genesis_core::resolve_tick_budget(
                &genesis_core::policy_default(instance.agent_type, &opts),
                mode_budget.as_ref(),
                foundational,
                &opts,
            ),
            &window,
            opts.credit_enforcement_enabled,
        );
        let credit = pb::CreditStatus {
            limit_usd: limit,
            spent_usd: spent,
            remaining_usd: status.remaining,
            // Core's remaining credit, so the wire and the gate share one
            // rule; metered windows (enforcement off) still report it.
            exhausted: status.remaining <= 0.0,
            enforcement_enabled: opts.credit_enforcement_enabled,
            window_start: Some(timestamp_from_chrono(week_start)),
            window_end: Some(timestamp_from_chrono(
                week_start + chrono::Duration::days(7),
            )),
        };
        let ops = self.ops.current();
        let event = &claim.event;
        // Only an event that answers the operator reads the chat (its own
        // round trip; see `read_chat_tail` for why not in the claim).
        let chat_tail = match read_chat_tail(&self.store, tenant_id, instance_id, event).await {
            Ok(tail) => tail,
            Err(e) => {
                self.metrics.claim("error");
                self.release_lease(tenant_id, instance_id, session).await;
                return Err(store_status(&e));
            }
        };
        let bundle = pb::TickBundle {
            session_id: session.to_string(),
            lease_expires_at: instance
                .lease_expires_at
                .or_else(|| {
                    chrono::Duration::from_std(self.settings.lease_ttl)
                        .ok()
                        .map(|d| now + d)
                })
                .map(timestamp_from_chrono),
            instance: Some(instance_to_proto(instance)),
            event: Some(pb::TickEvent {
                id: event.id.to_string(),
                kind: event.event_kind.as_str().to_owned(),
                payload_json: event.payload.to_string(),
                sequence_number: event.sequence_number,
                attempts: event.attempts,
                visible_at: Some(timestamp_from_chrono(event.visible_at)),
            }),
            ledger_tail: read.ledger_tail,
            open_items: Some(pb::OpenItems {
                missions: read
                    .missions
                    .iter()
                    .map(|m| pb::OpenMission {
                        id: m.id.to_string(),
                        title: m.title.clone(),
                        status: m.status.clone(),
                        created_at: Some(timestamp_from_chrono(m.created_at)),
                    })
                    .collect(),
                escalations: read
                    .escalations
                    .iter()
                    .map(|e| pb::OpenEscalation {
                        id: e.id.to_string(),
                        kind: e.kind.clone(),
                        title: e.title.clone(),
                        created_at: Some(timestamp_from_chrono(e.created_at)),
                    })
                    .collect(),
            }),
            ops_digest: Some(ops.to_proto(self.ops.window())),
            mode: Some(pb::ResolvedMode {
                name: mode.name.clone(),
                toolset: mode.toolset.clone(),
                prompt_fragment: mode.prompt_fragment.clone(),
                // The type's invariant base for this tenant, then the
                // mode's fragment: nothing per tick, so every tick of an
                // instance sends the same cacheable prefix.
                system_prompt: mode.system_prompt(&base_system_prompt(
                    instance.agent_type,
                    &instance.tenant_id.to_string(),
                )),
            }),
            budget: Some(budget_to_proto(&budget)),
            preset_chain: Some(resolve_chain(
                site,
                &read.catalogue.bindings,
                mode.preset.as_deref().map(|reference| ModePreset {
                    mode: &mode.name,
                    reference,
                    candidates: &read.catalogue.mode_presets,
                }),
                self.settings.default_provider,
            )),
            credit: Some(credit),
            forced_replan_due: forced_replan_due(
                u32::try_from(instance.idle_ticks_since_replan).unwrap_or(0),
                &opts,
            ),
            tools: self.registry.schemas_for(&mode.toolset),
            compliance_corpus: read.corpus.as_ref().map(corpus_to_proto),
            redaction_target: redaction_site.map(|target| {
                crate::redaction::Review::of(target, &read.catalogue.bindings).to_proto()
            }),
            chat_tail,
        };
        self.memos.remember(
            session,
            TickMemo {
                tenant_id,
                instance_id,
                event_id: event.id,
                event_kind: event.event_kind,
                agent_type: instance.agent_type,
                active_mode: instance.active_mode.clone(),
                prior: PriorCounters::from(instance),
                catalogue_epoch: read.catalogue_epoch,
                opts,
            },
        );
        self.metrics.claim("bundle");
        Ok(pb::ClaimTickResponse {
            result: Some(R::Bundle(bundle)),
        })
    }

    async fn invoke(&self, req: pb::InvokeToolRequest) -> Result<pb::InvokeToolResponse, Status> {
        let session = parse_uuid("session_id", &req.session_id)?;
        let instance_id = parse_uuid("instance_id", &req.instance_id)?;
        let tenant_id = parse_uuid("tenant_id", &req.tenant_id)?;
        if req.call_id.trim().is_empty() || req.call_id.len() > 200 {
            return Err(genesis_proto::convert::invalid_argument(
                "call_id",
                "must be 1 to 200 bytes",
            ));
        }
        if req.tool_name.trim().is_empty() || req.tool_name.len() > 200 {
            return Err(genesis_proto::convert::invalid_argument(
                "tool_name",
                "must be 1 to 200 bytes",
            ));
        }
        if req.arguments_json.len() > MAX_TOOL_ARGUMENTS_BYTES {
            return Err(genesis_proto::convert::invalid_argument(
                "arguments_json",
                format!("must be at most {MAX_TOOL_ARGUMENTS_BYTES} bytes"),
            ));
        }
        let tool_label = if self.registry.get(&req.tool_name).is_some() {
            req.tool_name.clone()
        } else {
            "unregistered".to_owned()
        };
        let metrics = &self.metrics;
        let mut tx = self
            .store
            .tenant_tx(tenant_id)
            .await
            .map_err(|e| status_of(e, metrics))?;
        // (a) the session still holds the lease; share-locked until commit.
        if !lease_held_in(tx.conn(), instance_id, session)
            .await
            .map_err(|e| status_of(e, metrics))?
        {
            return Err(status_of(StoreError::LeaseLost, metrics));
        }
        // (c) idempotency: a repeat returns the stored result, runs nothing.
        if let Some(prior) = find_in(tx.conn(), session, &req.call_id)
            .await
            .map_err(|e| status_of(e, metrics))?
        {
            metrics.tool_call(&tool_label, "replayed");
            return Ok(tool_answer(
                prior.result,
                prior.blocked,
                prior.side_effecting,
                true,
            ));
        }
        // (b) the tool is in the instance's resolved toolset (the
        // tenant's catalogue: its edit of a mode over the platform's).
        let catalogue = genesis_store::modes::instance_catalogue_in(tx.conn(), instance_id)
            .await
            .map_err(|e| status_of(e, metrics))?;
        let mode = resolve(
            catalogue.agent_type,
            catalogue.active_mode.as_deref(),
            &catalogue.modes,
        )
        .map_err(Status::from)?;
        if !mode.toolset.iter().any(|t| t == &req.tool_name) {
            metrics.tool_call(&tool_label, "TOOL_NOT_AUTHORIZED");
            return Ok(tool_error(
                "TOOL_NOT_AUTHORIZED",
                format!(
                    "{} is not in the toolset of mode {}",
                    req.tool_name, mode.name
                ),
            ));
        }
        let Some(tool) = self.registry.get(&req.tool_name).cloned() else {
            metrics.tool_call(&tool_label, "TOOL_NOT_IMPLEMENTED");
            return Ok(tool_error(
                "TOOL_NOT_IMPLEMENTED",
                format!(
                    "{} is authorised in mode {} but not served by this supervisor",
                    req.tool_name, mode.name
                ),
            ));
        };
        // (d) arguments against the tool's schema: a precise in-band error.
        let args: Value = match serde_json::from_str(if req.arguments_json.trim().is_empty() {
            "{}"
        } else {
            &req.arguments_json
        }) {
            Ok(v) => v,
            Err(e) => {
                metrics.tool_call(&tool_label, "INVALID_ARGUMENTS");
                return Ok(tool_error(
                    "INVALID_ARGUMENTS",
                    format!("arguments_json is not JSON: {e}"),
                ));
            }
        };
        if let Err(e) = crate::tools::schema::validate(&tool.schema(), &args) {
            metrics.tool_call(&tool_label, "INVALID_ARGUMENTS");
            return Ok(tool_error("INVALID_ARGUMENTS", e.to_string()));
        }
        // (e) governance: a violation is a blocked result, never an error.
        // Action limits count this instance's earlier calls of the tool.
        let calls = if crate::tools::constitution_gate::GOVERNED_TOOLS.contains(&tool.name()) {
            let (this_tick, today) = genesis_store::constitution::call_counts(
                tx.conn(),
                instance_id,
                session,
                tool.name(),
            )
            .await
            .map_err(|e| status_of(e, metrics))?;
            crate::tools::CallCounts { this_tick, today }
        } else {
            crate::tools::CallCounts::default()
        };
        let (result, blocked, side_effecting) = match self
            .governance
            .check(tenant_id, tool.name(), &args, calls)
            .await
        {
            Err(v) => (v.to_result(), true, false),
            Ok(()) => {
                // (f) the handler in the tenant transaction.
                let mut ctx = ToolContext {
                    conn: tx.conn(),
                    tenant_id,
                    instance_id,
                    session,
                };
                match tool.run(&mut ctx, &args).await {
                    Ok(result) => (result, false, tool.side_effecting()),
                    Err(e) => {
                        metrics.tool_call(&tool_label, e.code);
                        return Ok(tool_error(e.code, e.message));
                    }
                }
            }
        };
        let record = NewToolInvocation {
            instance_id,
            session,
            call_id: req.call_id.clone(),
            tool_name: req.tool_name.clone(),
            arguments: args,
            result: result.clone(),
            blocked,
            side_effecting,
        };
        let inserted = insert_in(tx.conn(), tenant_id, &record).await;
        match inserted {
            Ok(_) => {
                tx.commit().await.map_err(|e| status_of(e, metrics))?;
                metrics.tool_call(&tool_label, if blocked { "blocked" } else { "ok" });
                Ok(tool_answer(result, blocked, side_effecting, false))
            }
            Err(StoreError::Conflict { .. }) => {
                // A concurrent call with the same key won: ours rolls back.
                drop(tx);
                let prior = self
                    .store
                    .tool_invocations()
                    .find(tenant_id, session, &req.call_id)
                    .await
                    .map_err(|e| status_of(e, metrics))?
                    .ok_or_else(|| Status::aborted("concurrent tool call vanished; retry"))?;
                metrics.tool_call(&tool_label, "replayed");
                Ok(tool_answer(
                    prior.result,
                    prior.blocked,
                    prior.side_effecting,
                    true,
                ))
            }
            Err(e) => Err(status_of(e, metrics)),
        }
    }

    /// ReserveCredit: the worst case of the next LLM turn held against the
    /// tenant's weekly window before the turn is sent.
    async fn reserve(
        &self,
        req: pb::ReserveCreditRequest,
    ) -> Result<pb::ReserveCreditResponse, Status> {
        use genesis_proto::convert::invalid_argument as inv;
        let session = parse_uuid("session_id", &req.session_id)?;
        let instance_id = parse_uuid("instance_id", &req.instance_id)?;
        let tenant_id = parse_uuid("tenant_id", &req.tenant_id)?;
        if req.models.is_empty() || req.models.len() > 64 {
            return Err(inv("models", "must name 1 to 64 models of the chain"));
        }
        if let Some(i) = req
            .models
            .iter()
            .position(|m| m.trim().is_empty() || m.len() > 200)
        {
            return Err(inv(&format!("models[{i}]"), "must be 1 to 200 bytes"));
        }
        let count =
            |field: &str, v: i64| u64::try_from(v).map_err(|_| inv(field, "must be non-negative"));
        let prompt = count("prompt_tokens", req.prompt_tokens)?;
        let output = count("max_output_tokens", req.max_output_tokens)?;
        let memo = self.memos.recall(session, tenant_id, instance_id, None);
        let opts = match memo.as_deref() {
            Some(m) => m.opts.clone(),
            None => {
                let ctx = self
                    .store
                    .llm()
                    .record_context(tenant_id, instance_id, "", &req.models[0])
                    .await
                    .map_err(|e| status_of(e, &self.metrics))?;
                effective_options(&self.settings.options, &ctx.configs)
            }
        };
        if !opts.credit_enforcement_enabled {
            return Ok(pb::ReserveCreditResponse {
                granted: true,
                limit_usd: opts.weekly_credit_usd,
                ..Default::default()
            });
        }
        let rows = self
            .store
            .llm()
            .list_pricing()
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        let amount = worst_case_usd(
            &req.models,
            &rows,
            self.settings.unpriced_price,
            prompt,
            output,
        );
        let r = self
            .store
            .credit()
            .reserve(
                (tenant_id, instance_id, session),
                week_start_for(Utc::now()),
                opts.weekly_credit_usd,
                amount,
            )
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        if !r.granted {
            tracing::info!(
                %tenant_id,
                %instance_id,
                worst_case_usd = amount,
                spent_usd = r.spent_usd,
                held_usd = r.held_usd,
                limit_usd = r.limit_usd,
                "a turn's worst case would cross the weekly credit ceiling; not granted"
            );
        }
        Ok(pb::ReserveCreditResponse {
            granted: r.granted,
            reserved_usd: if r.granted { amount } else { 0.0 },
            spent_usd: r.spent_usd,
            held_usd: r.held_usd,
            limit_usd: r.limit_usd,
        })
    }

    async fn record_attempt(
        &self,
        req: pb::RecordCallAttemptRequest,
    ) -> Result<pb::RecordCallAttemptResponse, Status> {
        let session = parse_uuid("session_id", &req.session_id)?;
        let instance_id = parse_uuid("instance_id", &req.instance_id)?;
        let tenant_id = parse_uuid("tenant_id", &req.tenant_id)?;
        let attempt = reported_attempt(
            "",
            (instance_id, session),
            &req.invocation_id,
            req.attempt.as_ref(),
            &req.prompt_overlay_sha256,
        )?;
        let memo = self.memos.recall(session, tenant_id, instance_id, None);
        let recorded = self
            .write_attempt(tenant_id, attempt, memo.as_deref())
            .await?;
        Ok(pb::RecordCallAttemptResponse {
            snapshot_id: recorded.snapshot.id.to_string(),
            cost_usd: recorded.cost_usd,
            snapshot_cost_usd: recorded.snapshot.cost_usd,
        })
    }

    /// Record one checked attempt under its invocation's snapshot, priced
    /// here and drawn from the credit window (RecordCallAttempt). `memo`:
    /// what this tick's claim read, which spares the context read when the
    /// price is held too.
    async fn write_attempt(
        &self,
        tenant_id: Uuid,
        attempt: NewCallAttempt,
        memo: Option<&TickMemo>,
    ) -> Result<genesis_store::llm::RecordedAttempt, Status> {
        let priced = self.price_attempt(tenant_id, attempt, memo).await?;
        let recorded = self
            .store
            .llm()
            .record_call_attempt(tenant_id, &priced.attempt, priced.credit)
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        self.metrics.cost(priced.attempt.cost_usd);
        Ok(recorded)
    }

    /// Price one checked attempt from usage and the pricing table, set its
    /// policy site and the credit window it draws from (RecordCallAttempt,
    /// and each of CompleteTick's `call_attempts`, which the completion
    /// writes with its turn).
    async fn price_attempt(
        &self,
        tenant_id: Uuid,
        mut attempt: NewCallAttempt,
        memo: Option<&TickMemo>,
    ) -> Result<PricedAttempt, Status> {
        let metrics = &self.metrics;
        // Providers report dated or suffixed ids for the model they served
        // (`gpt-4o-2024-08-06` for `gpt-4o`); an unpriced served id is priced
        // as the requested model rather than at zero, so the credit window
        // still draws down.
        let priced_model = if attempt.served_model.is_empty() {
            &attempt.requested_model
        } else {
            &attempt.served_model
        };
        let held = memo.and_then(|m| {
            self.memos
                .price(m.catalogue_epoch, priced_model, &attempt.requested_model)
                .map(|price| (m, price))
        });
        let (agent_type, opts, price) = match held {
            Some((m, price)) => {
                metrics.tick_context("attempt_held");
                (m.agent_type, m.opts.clone(), price)
            }
            None => {
                metrics.tick_context("attempt_read");
                // One read: the instance's type (for the site), the DB-first
                // config and the price of the served model, else of the
                // requested one, with the epoch it was read at.
                let ctx = self
                    .store
                    .llm()
                    .record_context(
                        tenant_id,
                        attempt.instance_id,
                        priced_model,
                        &attempt.requested_model,
                    )
                    .await
                    .map_err(|e| status_of(e, metrics))?;
                let chosen = genesis_store::llm::choose_pricing(
                    &attempt.served_model,
                    &attempt.requested_model,
                    &ctx.prices,
                );
                self.memos.learn_price(
                    ctx.catalogue_epoch,
                    priced_model,
                    &attempt.requested_model,
                    chosen.clone(),
                );
                let opts = effective_options(&self.settings.options, &ctx.configs);
                (ctx.agent_type, opts, chosen)
            }
        };
        let priced_model = priced_model.clone();
        let source = apply_price(&mut attempt, price.as_ref(), self.settings.unpriced_price);
        if source == genesis_core::pricing::PricingSource::Fallback {
            metrics.unpriced_model();
            tracing::warn!(
                model = %priced_model,
                cost_usd = attempt.cost_usd,
                "no price for model; attempt charged at the unpriced fallback price"
            );
        }
        attempt.site_id = policy_site_for(agent_type).to_owned();
        let credit = CreditDraw {
            week_start: week_start_for(Utc::now()),
            limit_usd: opts.weekly_credit_usd,
        };
        Ok(PricedAttempt { attempt, credit })
    }

    /// CompleteTick for a tick whose every provider failed: no turn, the
    /// event deferred with its attempts recorded (see [`Store::defer_tick`]).
    async fn defer(
        &self,
        ids: (Uuid, Uuid, Uuid),
        event_id: Uuid,
        call_attempts: Vec<PricedAttempt>,
        reason: &str,
        opts: &AgentDispatcherOptions,
    ) -> Result<pb::CompleteTickResponse, Status> {
        let (tenant_id, instance_id, session) = ids;
        let deferred = self
            .store
            .defer_tick(ids, event_id, &call_attempts, reason, opts)
            .await;
        self.memos.forget(session);
        let deferred = deferred.map_err(|e| status_of(e, &self.metrics))?;
        for a in &call_attempts {
            self.metrics.cost(a.attempt.cost_usd);
        }
        self.metrics.provider_failure_deferral();
        tracing::warn!(
            %tenant_id,
            %instance_id,
            %event_id,
            consecutive_provider_failures = deferred.consecutive_provider_failures,
            visible_at = %deferred.visible_at,
            reason,
            "every llm provider failed; the tick's event is deferred"
        );
        Ok(pb::CompleteTickResponse {
            decision_kind: String::new(),
            phase: String::new(),
            next_tick_at: Some(timestamp_from_chrono(deferred.visible_at)),
            halted: false,
            ledger_id: String::new(),
            turn_number: 0,
            attention_request_id: deferred.attention_request_id.map(|a| a.to_string()),
            deferred: true,
            consecutive_provider_failures: deferred.consecutive_provider_failures,
        })
    }

    /// The turn's context read again (`genesis_complete_context`, one
    /// round trip): for a tick this supervisor holds no memo of (claimed
    /// through another replica, evicted, or before a restart), or one whose
    /// snapshot was named rather than carried.
    async fn turn_context(
        &self,
        tenant_id: Uuid,
        event_id: Uuid,
        instance_id: Uuid,
        snapshot_id: Option<Uuid>,
    ) -> Result<TurnContext, Status> {
        let pre = self
            .store
            .complete_context(tenant_id, event_id, instance_id, snapshot_id)
            .await
            .map_err(|e| status_of(e, &self.metrics))?;
        let snapshot = match (snapshot_id, pre.snapshot) {
            (Some(_), Some(row)) => Some(row),
            (Some(_), None) => return Err(Status::not_found("llm call snapshot not found")),
            _ => None,
        };
        Ok(TurnContext {
            // An unknown event still goes to the store, whose session guard
            // and event check answer LEASE_LOST or INVALID_ARGUMENT with
            // nothing written.
            known_kind: pre
                .event_kind
                .as_deref()
                .and_then(|k| k.parse::<AgentEventKind>().ok()),
            prior: pre.prior,
            snapshot,
            opts: effective_options(&self.settings.options, &pre.configs),
            mode: recorded_mode(pre.active_mode.as_deref(), pre.agent_type.as_deref()),
        })
    }

    async fn complete(
        &self,
        req: pb::CompleteTickRequest,
    ) -> Result<pb::CompleteTickResponse, Status> {
        use genesis_proto::convert::invalid_argument as inv;
        let session = parse_uuid("session_id", &req.session_id)?;
        let instance_id = parse_uuid("instance_id", &req.instance_id)?;
        let tenant_id = parse_uuid("tenant_id", &req.tenant_id)?;
        let event_id = parse_uuid("event_id", &req.event_id)?;
        let outcome = require("outcome", req.outcome.as_ref())?;
        let completion = match pb::TickCompletion::try_from(outcome.completion) {
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
        };
        let side_effecting_actions = u32::try_from(outcome.side_effecting_actions)
            .map_err(|_| inv("outcome.side_effecting_actions", "must be non-negative"))?;
        let plan_input_hash = match req.plan_input_hash.as_str() {
            "" => None,
            h => Some(
                h.to_ascii_lowercase()
                    .parse::<genesis_core::PlanInputHash>()
                    .map_err(|e| {
                        inv(
                            "plan_input_hash",
                            format!("must be 64 hex digits (SHA-256): {e}"),
                        )
                    })?,
            ),
        };
        let snapshot_id = parse_optional_uuid("snapshot_id", req.snapshot_id.as_deref())?;
        if snapshot_id.is_some() && !req.call_attempts.is_empty() {
            return Err(inv(
                "snapshot_id",
                "must be unset when call_attempts are sent (the turn links their snapshot)",
            ));
        }
        let pending = req
            .call_attempts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                reported_attempt(
                    &format!("call_attempts[{i}]."),
                    (instance_id, session),
                    &p.invocation_id,
                    p.attempt.as_ref(),
                    &p.prompt_overlay_sha256,
                )
            })
            .collect::<Result<Vec<_>, Status>>()?;
        if let Some(c) = &req.consumption
            && (c.tokens < 0 || c.tool_calls < 0 || c.turns < 0 || c.wall_ms < 0)
        {
            return Err(inv("consumption", "counts must be non-negative"));
        }
        let mut actions = Vec::with_capacity(req.actions.len());
        for (i, a) in req.actions.iter().enumerate() {
            let parse = |field: &str, text: &str| -> Result<Value, Status> {
                if text.trim().is_empty() {
                    return Ok(json!({}));
                }
                serde_json::from_str(text)
                    .map_err(|e| inv(&format!("actions[{i}].{field}"), format!("not JSON: {e}")))
            };
            actions.push(LedgerAction {
                tool_name: a.tool_name.clone(),
                arguments: parse("arguments_json", &a.arguments_json)?,
                result: Some(parse("result_json", &a.result_json)?),
                side_effecting: a.side_effecting,
                blocked: a.blocked,
            });
        }
        let metrics = &self.metrics;
        let memo = self
            .memos
            .recall(session, tenant_id, instance_id, Some(event_id));
        // The episode's last attempts, priced here and written by the
        // completion with its turn, after its session guard: a lost lease
        // writes none of them.
        let mut call_attempts = Vec::with_capacity(pending.len());
        for attempt in pending {
            call_attempts.push(
                self.price_attempt(tenant_id, attempt, memo.as_deref())
                    .await?,
            );
        }
        let turn = match memo {
            // What the claim read: no read. A snapshot named without
            // attempts is read below.
            Some(m) if snapshot_id.is_none() => {
                metrics.tick_context("complete_held");
                TurnContext::remembered(&m)
            }
            _ => {
                metrics.tick_context("complete_read");
                self.turn_context(tenant_id, event_id, instance_id, snapshot_id)
                    .await?
            }
        };
        let TurnContext {
            known_kind,
            prior,
            snapshot,
            opts,
            mode: turn_mode,
        } = turn;
        if let Completion::ProviderFailed { reason } = &completion {
            return self
                .defer(
                    (tenant_id, instance_id, session),
                    event_id,
                    call_attempts,
                    reason,
                    &opts,
                )
                .await;
        }
        let event_kind = known_kind.unwrap_or(AgentEventKind::AgentTick);
        // The counters as the claim or this read saw them: the store writes
        // the turn in one statement while they still hold under the lock.
        let expect = known_kind
            .zip(prior)
            .map(|(event_kind, counters)| ExpectedPrior {
                counters,
                event_kind,
            });
        let was_idle = matches!(
            completion,
            Completion::ShortCircuited | Completion::CreditExhausted
        );
        let completion_name = completion_label(&completion);
        let mapped = AgentDecisionMapper::map(&TickOutcome {
            event_kind,
            raised_escalation: outcome.raised_escalation,
            side_effecting_actions,
            completion,
        });
        let decision_payload = json!({
            "actions": actions,
            "waitCondition": req.wait_condition,
            "reasoningSummary": req.reasoning_summary,
            "activeMode": turn_mode,
            // How the episode ended and what it spent, so a budget cut or a
            // failure is visible on the turn (spec §3.5: the axis is recorded).
            "completion": completion_name,
            "budgetAxis": outcome.budget_axis.as_deref().filter(|a| !a.is_empty()),
            "endReason": (!outcome.reason.is_empty()).then_some(outcome.reason.as_str()),
            "consumption": req.consumption.as_ref().map(|c| json!({
                "tokens": c.tokens, "toolCalls": c.tool_calls, "turns": c.turns, "wallMs": c.wall_ms,
            })),
        });
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let attempt_costs: Vec<f64> = call_attempts.iter().map(|p| p.attempt.cost_usd).collect();
        let store_completion = StoreCompletion {
            event_id,
            decision: TickDecision::Derived {
                kind: mapped.kind.clone(),
                phase: mapped.phase.to_owned(),
                planned: !was_idle,
            },
            plan_input_hash,
            actions,
            reasoning_summary: non_empty(&req.reasoning_summary),
            wait_condition: non_empty(&req.wait_condition),
            decision_payload,
            llm_call_snapshot_id: snapshot.as_ref().map(|s| s.id),
            served_model: snapshot.as_ref().and_then(|s| s.served_model.clone()),
            cost_usd: snapshot.as_ref().map(|s| s.cost_usd),
            input_tokens: snapshot.as_ref().map(|s| s.input_tokens),
            output_tokens: snapshot.as_ref().map(|s| s.output_tokens),
            call_attempts,
        };
        let done = self
            .store
            .complete_tick_expecting(
                tenant_id,
                instance_id,
                session,
                store_completion,
                &opts,
                expect.as_ref(),
            )
            .await;
        // Written or refused, the memo has served: a retry reads again.
        self.memos.forget(session);
        let done = done.map_err(|e| status_of(e, metrics))?;
        for cost in attempt_costs {
            metrics.cost(cost);
        }
        metrics.complete(done.halted, done.prior_read);
        Ok(pb::CompleteTickResponse {
            decision_kind: done.decision_kind.as_str().to_owned(),
            phase: done.phase,
            next_tick_at: done.next_tick_at.map(timestamp_from_chrono),
            halted: done.halted,
            ledger_id: done.ledger_id.to_string(),
            turn_number: done.turn_number,
            attention_request_id: done.attention_request_id.map(|a| a.to_string()),
            deferred: false,
            consecutive_provider_failures: 0,
        })
    }
}

/// The span of one AgentPod RPC: the method and the tenant, instance and
/// session the request names. Ids are recorded only once they parse as UUIDs,
/// so a malformed request never puts its raw text into logs or exported
/// spans; the handler still refuses it with INVALID_ARGUMENT.
fn rpc_span(method: &'static str, tenant_id: &str, instance_id: &str, session_id: &str) -> Span {
    let span = tracing::info_span!(
        "rpc",
        method,
        tenant_id = tracing::field::Empty,
        instance_id = tracing::field::Empty,
        session_id = tracing::field::Empty,
    );
    for (field, raw) in [
        ("tenant_id", tenant_id),
        ("instance_id", instance_id),
        ("session_id", session_id),
    ] {
        if let Ok(id) = raw.parse::<Uuid>() {
            span.record(field, tracing::field::display(id));
        }
    }
    span
}

#[tonic::async_trait]
impl AgentPod for AgentPodService {
    async fn claim_tick(
        &self,
        request: Request<pb::ClaimTickRequest>,
    ) -> Result<Response<pb::ClaimTickResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span("ClaimTick", &req.tenant_id, &req.instance_id, "");
        self.claim(req).instrument(span).await.map(Response::new)
    }

    async fn renew_lease(
        &self,
        request: Request<pb::RenewLeaseRequest>,
    ) -> Result<Response<pb::RenewLeaseResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span(
            "RenewLease",
            &req.tenant_id,
            &req.instance_id,
            &req.session_id,
        );
        async move {
            let session = parse_uuid("session_id", &req.session_id)?;
            let instance_id = parse_uuid("instance_id", &req.instance_id)?;
            let tenant_id = parse_uuid("tenant_id", &req.tenant_id)?;
            self.store
                .renew_lease(tenant_id, instance_id, session, self.settings.lease_ttl)
                .await
                .map_err(|e| status_of(e, &self.metrics))?;
            let expires = chrono::Duration::from_std(self.settings.lease_ttl)
                .ok()
                .map(|d| Utc::now() + d);
            Ok(Response::new(pb::RenewLeaseResponse {
                lease_expires_at: expires.map(timestamp_from_chrono),
            }))
        }
        .instrument(span)
        .await
    }

    async fn invoke_tool(
        &self,
        request: Request<pb::InvokeToolRequest>,
    ) -> Result<Response<pb::InvokeToolResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span(
            "InvokeTool",
            &req.tenant_id,
            &req.instance_id,
            &req.session_id,
        );
        self.invoke(req).instrument(span).await.map(Response::new)
    }

    async fn record_call_attempt(
        &self,
        request: Request<pb::RecordCallAttemptRequest>,
    ) -> Result<Response<pb::RecordCallAttemptResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span(
            "RecordCallAttempt",
            &req.tenant_id,
            &req.instance_id,
            &req.session_id,
        );
        self.record_attempt(req)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn reserve_credit(
        &self,
        request: Request<pb::ReserveCreditRequest>,
    ) -> Result<Response<pb::ReserveCreditResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span(
            "ReserveCredit",
            &req.tenant_id,
            &req.instance_id,
            &req.session_id,
        );
        self.reserve(req).instrument(span).await.map(Response::new)
    }

    async fn complete_tick(
        &self,
        request: Request<pb::CompleteTickRequest>,
    ) -> Result<Response<pb::CompleteTickResponse>, Status> {
        check_tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        let span = rpc_span(
            "CompleteTick",
            &req.tenant_id,
            &req.instance_id,
            &req.session_id,
        );
        self.complete(req).instrument(span).await.map(Response::new)
    }
}

/// What a completion's turn is written with besides the pod's report.
struct TurnContext {
    /// The claimed event's kind; `None` when the event is not this
    /// instance's (the store then refuses the write).
    known_kind: Option<AgentEventKind>,
    /// The counters the rules start from; `None` for an unknown instance.
    prior: Option<PriorCounters>,
    /// The back-linked call snapshot.
    snapshot: Option<genesis_store::llm::CallSnapshotRow>,
    opts: AgentDispatcherOptions,
    /// The mode the turn ran in, as recorded.
    mode: Option<String>,
}

impl TurnContext {
    /// The context as the tick's claim read it: the mode the pod was
    /// served, the configuration of the claim's catalogue, the counters and
    /// event kind the turn write compares under the lock. It names no
    /// snapshot: a named one is read (`turn_context`), and pending attempts
    /// are written, and linked, by the completion itself.
    fn remembered(m: &TickMemo) -> Self {
        Self {
            known_kind: Some(m.event_kind),
            prior: Some(m.prior.clone()),
            snapshot: None,
            opts: m.opts.clone(),
            mode: recorded_mode(m.active_mode.as_deref(), Some(m.agent_type.as_str())),
        }
    }
}

/// The completion as the turn records it.
fn completion_label(c: &Completion) -> &'static str {
    match c {
        Completion::Complete => "complete",
        Completion::Blocked => "blocked",
        Completion::ShortCircuited => "short_circuited",
        Completion::CreditExhausted => "credit_exhausted",
        Completion::BudgetExhausted { .. } => "budget_exhausted",
        Completion::Failed { .. } => "failed",
        Completion::ProviderFailed { .. } => "provider_failed",
    }
}

/// The mode a turn ran in, as the ledger records it: the instance's
/// `active_mode`, or its type's default mode while none was ever set (the
/// mode the claim resolved).
fn recorded_mode(active_mode: Option<&str>, agent_type: Option<&str>) -> Option<String> {
    match active_mode {
        Some(mode) if !mode.is_empty() => Some(mode.to_owned()),
        _ => agent_type?
            .parse::<AgentType>()
            .ok()
            .and_then(genesis_core::default_mode)
            .map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_recorded_mode_falls_back_to_the_types_default() {
        assert_eq!(
            super::recorded_mode(Some("Incident"), Some("Soa")).as_deref(),
            Some("Incident")
        );
        assert_eq!(
            super::recorded_mode(None, Some("Soa")).as_deref(),
            Some("Strategic")
        );
        assert_eq!(
            super::recorded_mode(Some(""), Some("Compliance")).as_deref(),
            Some("Cadence")
        );
        assert_eq!(super::recorded_mode(None, Some("Bogus")), None);
        assert_eq!(super::recorded_mode(None, None), None);
    }

    use super::*;

    fn attempt_of(
        provider: &str,
        input: i64,
        output: i64,
        read: i64,
        write: i64,
    ) -> NewCallAttempt {
        NewCallAttempt {
            instance_id: Uuid::nil(),
            session: Uuid::nil(),
            invocation_id: "i".into(),
            site_id: String::new(),
            requested_model: "m".into(),
            served_model: "m-20250101".into(),
            provider: provider.into(),
            credential_name: "k".into(),
            outcome: "success".into(),
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            latency_ms: 1,
            error_message: String::new(),
            cost_usd: 0.0,
            priced_as: None,
            pricing_source: None,
            prompt_overlay_sha256: None,
        }
    }

    #[test]
    fn an_attempt_is_priced_by_its_row_free_when_scripted_and_never_zero_unpriced() {
        use genesis_core::pricing::{ModelPrice, PricingSource};
        let chosen = genesis_store::llm::ChosenPrice {
            row: genesis_store::llm::PricingRow {
                model: "m".into(),
                input_usd_per_mtok: 3.0,
                output_usd_per_mtok: 15.0,
                cache_read_usd_per_mtok: 0.3,
                cache_write_usd_per_mtok: 3.75,
                updated_at: Utc::now(),
            },
            source: PricingSource::Prefix,
        };
        let unpriced = ModelPrice::fallback(15.0, 75.0);
        let mut a = attempt_of("anthropic", 1_000_000, 100_000, 10_000, 1_000);
        assert_eq!(
            apply_price(&mut a, Some(&chosen), unpriced),
            PricingSource::Prefix
        );
        assert!(
            (a.cost_usd - (3.0 + 1.5 + 0.003 + 0.00375)).abs() < 1e-9,
            "{}",
            a.cost_usd
        );
        assert_eq!(a.priced_as.as_deref(), Some("m"));
        assert_eq!(a.pricing_source, Some(PricingSource::Prefix));

        let mut a = attempt_of("anthropic", 1_000_000, 0, 0, 0);
        assert_eq!(apply_price(&mut a, None, unpriced), PricingSource::Fallback);
        assert!((a.cost_usd - 15.0).abs() < 1e-9, "{}", a.cost_usd);
        assert_eq!(a.priced_as, None);

        // Even with a row for its model, the scripted provider spent nothing.
        let mut a = attempt_of("scripted", 1_000_000, 1_000_000, 0, 0);
        assert_eq!(
            apply_price(&mut a, Some(&chosen), unpriced),
            PricingSource::Free
        );
        assert_eq!(a.cost_usd, 0.0);
    }

    #[test]
    fn budget_axes_accept_wire_and_json_spellings() {
        assert_eq!(parse_axis("tokens"), Some(BudgetAxis::Tokens));
        assert_eq!(parse_axis("maxTurns"), Some(BudgetAxis::Turns));
        assert_eq!(parse_axis("wall_ms"), Some(BudgetAxis::WallSeconds));
        assert_eq!(parse_axis("bogus"), None);
    }
}
