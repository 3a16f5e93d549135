//! The bundle a claim answers with, once its read and mode are settled:
//! the budget envelope and credit status the tick runs under (decided by
//! genesis-core's `AgentTickSupervisor`), and the wire
//! `TickBundle` (instance, event, ledger tail, open items, ops digest,
//! resolved mode with its system prompt, preset chain, tool schemas,
//! corpus, redaction target, chat tail). Must never read or write the
//! database, and never hand the pod a dollar axis above what the tenant's
//! weekly credit window has left.

use chrono::{DateTime, Utc};
use genesis_core::modes::ResolvedMode;
use genesis_core::plan_hash::forced_replan_due;
use genesis_core::prompt::base_system_prompt;
use genesis_core::tick::{AgentTickSupervisor, ClaimInputs, ClaimTerms};
use genesis_core::{AgentDispatcherOptions, BudgetEnvelope, Limit};
use genesis_proto::convert::timestamp_from_chrono;
use genesis_proto::v1 as pb;
use genesis_store::{EventRow, InstanceRow};
use uuid::Uuid;

use crate::bundle::{BundleRead, corpus_to_proto, instance_to_proto, platform_options};
use crate::ops::OpsReading;
use crate::presets::{ModePreset, resolve_chain};
use crate::rpc::AgentPodService;

/// The tick a claim took, as the steps after the claim see it.
pub(super) struct Taken<'a> {
    pub session: Uuid,
    pub instance: &'a InstanceRow,
    pub event: &'a EventRow,
    pub now: DateTime<Utc>,
    /// The start of the credit window's week.
    pub week_start: DateTime<Utc>,
    /// The instance's policy site.
    pub site: &'static str,
    /// A redactor's bound call-site, the overlay it reviews.
    pub redaction_site: Option<&'a str>,
}

/// What the tick runs under besides its configuration.
pub(super) struct TickTerms {
    pub mode: ResolvedMode,
    pub budget: BudgetEnvelope,
    pub credit: pb::CreditStatus,
}

impl AgentPodService {
    /// The tick's budget envelope and credit status, as the
    /// `AgentTickSupervisor` decides them from the claim's read and mode.
    pub(super) fn tick_terms(
        &self,
        t: &Taken<'_>,
        read: &BundleRead,
        opts: &AgentDispatcherOptions,
        mode: ResolvedMode,
    ) -> TickTerms {
        let Taken {
            instance,
            now,
            week_start,
            ..
        } = *t;
        let platform = platform_options(&self.settings.options, &read.catalogue.configs);
        let ClaimTerms {
            budget,
            window,
            credit,
        } = AgentTickSupervisor::new(opts).claim_terms(&ClaimInputs {
            agent_type: instance.agent_type,
            foundational_deadline: instance
                .is_building_starting_workset
                .then_some(instance.workset_deadline_utc)
                .flatten(),
            now,
            week_start,
            credit_spent_usd: read.credit_spent.unwrap_or(0.0),
            mode: &mode,
            platform: &platform,
        });
        let credit = pb::CreditStatus {
            limit_usd: window.limit_usd,
            spent_usd: window.spent_usd,
            remaining_usd: credit.remaining,
            // Core's remaining credit, so the wire and the gate share one
            // rule; metered windows (enforcement off) still report it.
            exhausted: credit.remaining <= 0.0,
            enforcement_enabled: opts.credit_enforcement_enabled,
            window_start: Some(timestamp_from_chrono(week_start)),
            window_end: Some(timestamp_from_chrono(
                week_start + chrono::Duration::days(7),
            )),
        };
        TickTerms {
            mode,
            budget,
            credit,
        }
    }

    /// The wire bundle of the tick.
    pub(super) fn tick_bundle(
        &self,
        t: &Taken<'_>,
        read: BundleRead,
        terms: TickTerms,
        opts: &AgentDispatcherOptions,
        ops: &OpsReading,
        chat_tail: Option<pb::ChatTail>,
    ) -> pb::TickBundle {
        let Taken {
            session,
            instance,
            event,
            now,
            site,
            redaction_site,
            ..
        } = *t;
        let TickTerms {
            mode,
            budget,
            credit,
        } = terms;
        pb::TickBundle {
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
                opts,
            ),
            tools: self.registry.schemas_for(&mode.toolset),
            compliance_corpus: read.corpus.as_ref().map(corpus_to_proto),
            redaction_target: redaction_site.map(|target| {
                crate::redaction::Review::of(target, &read.catalogue.bindings).to_proto()
            }),
            chat_tail,
            journal: Vec::new(),
        }
    }
}

pub(in crate::rpc) fn budget_to_proto(b: &BudgetEnvelope) -> pb::BudgetEnvelope {
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
