//! Per-tenant bootstrap (spec §3.2), the default preset seeder (spec §3.7)
//! and the ensure-create of singleton instances. With AutoBootstrap on, every tenant whose standing-agents gate
//! is on (deploy level and tenant level) gets exactly one SOA, created in the
//! foundational phase, Active with an `AgentInitialized` opener when
//! StandingAgentsIdleByDefault, else Paused. Tenants created or enabled at
//! runtime are picked up by `LISTEN genesis_tenants` and by a periodic
//! re-scan, without a restart. A scan reads one census of every tenant and
//! its SOA and works only on tenants where something is missing, so an idle
//! fleet's re-scan costs one query, not a lock and three reads per tenant.
//!
//! The singleton holds across control replicas: the find-or-create runs
//! under a PostgreSQL advisory lock keyed by tenant and singleton, so two
//! concurrent bootstraps of one tenant create one instance. Must never
//! create an instance through anything but the store.

use std::time::Duration;

use genesis_core::presets::{DEFAULT_PRESET_NAME, DefaultProvider, SEEDED_SITES, code_default};
use genesis_core::{AgentType, InstanceStatus, TenantStatus};
use genesis_store::llm::{DefaultSeed, PresetCouple};
use genesis_store::{InstanceRow, NewInstance, Store, TenantCensus};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::ControlError;
use crate::notices::{Notice, NoticeStream};
use crate::state::AppState;

/// The channel a tenant insert or a gate change notifies.
pub const TENANTS_CHANNEL: &str = "genesis_tenants";

/// First key of every advisory lock control takes ("GENS").
const LOCK_CLASS: i32 = 0x4745_4E53;

/// Run `work` while holding the advisory lock named `name` (hashed into
/// the second key) on a connection of `locks`. The lock is released after
/// `work`, or with the connection if that fails.
pub async fn with_advisory_lock<T, F, Fut>(
    locks: &PgPool,
    name: &str,
    work: F,
) -> Result<T, ControlError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<T, ControlError>>,
{
    let mut conn = locks.acquire().await?;
    genesis_store::locks::lock(&mut conn, LOCK_CLASS, name)
        .await
        .map_err(|e| ControlError::Database(e.to_string()))?;
    let result = work().await;
    let unlocked = genesis_store::locks::unlock(&mut conn, LOCK_CLASS, name).await;
    if unlocked.is_err() {
        // Closing the session releases every lock it held.
        drop(conn.detach());
    }
    result
}

/// Find the instance `matches` selects among the tenant's instances of
/// `agent_type`, or create it with `new` — under the singleton lock.
/// Returns the instance and whether this call created it.
pub async fn ensure_singleton(
    store: &Store,
    locks: &PgPool,
    tenant_id: Uuid,
    agent_type: AgentType,
    key: &str,
    new: NewInstance,
    matches: impl Fn(&InstanceRow) -> bool,
) -> Result<(InstanceRow, bool), ControlError> {
    let name = format!("singleton:{tenant_id}:{agent_type}:{key}");
    with_advisory_lock(locks, &name, || {
        find_or_create(store, tenant_id, agent_type, new, matches)
    })
    .await
}

/// The find-or-create of [`ensure_singleton`], for a caller that already
/// holds a lock serialising it.
async fn find_or_create(
    store: &Store,
    tenant_id: Uuid,
    agent_type: AgentType,
    new: NewInstance,
    matches: impl Fn(&InstanceRow) -> bool,
) -> Result<(InstanceRow, bool), ControlError> {
    let existing = store.instances().list(tenant_id, Some(agent_type)).await?;
    if let Some(found) = existing.into_iter().find(|i| matches(i)) {
        return Ok((found, false));
    }
    Ok((store.instances().create(tenant_id, new).await?, true))
}

/// Ensure the tenant's one SOA (spec §3.2 step 2).
pub async fn ensure_soa(
    store: &Store,
    locks: &PgPool,
    tenant_id: Uuid,
    idle_by_default: bool,
) -> Result<(InstanceRow, bool), ControlError> {
    let status = if idle_by_default {
        InstanceStatus::Active
    } else {
        InstanceStatus::Paused
    };
    ensure_singleton(
        store,
        locks,
        tenant_id,
        AgentType::Soa,
        "",
        NewInstance::foundational(AgentType::Soa, status),
        |_| true,
    )
    .await
}

/// Ensure the tenant's Compliance instance (created Paused; StartCompliance
/// then starts it).
pub async fn ensure_compliance(
    store: &Store,
    locks: &PgPool,
    tenant_id: Uuid,
) -> Result<(InstanceRow, bool), ControlError> {
    ensure_singleton(
        store,
        locks,
        tenant_id,
        AgentType::Compliance,
        "",
        NewInstance::foundational(AgentType::Compliance, InstanceStatus::Paused),
        |_| true,
    )
    .await
}

/// The tenant feature that activates the Prompt Engineer (spec §3.9: it
/// ships dark).
pub const PROMPT_REDACTOR_FLAG: &str = "prompt-redactor";

/// The lock that serialises the prompt-redactor feature switch with the
/// signals that ensure-create redactors, so a redactor created while the
/// feature is being turned on cannot stay paused.
fn redactor_feature_lock(tenant_id: Uuid) -> String {
    format!("redactor-feature:{tenant_id}")
}

/// Pause or activate every redactor of the tenant to match the feature.
async fn align_redactors(
    store: &Store,
    tenant_id: Uuid,
    enabled: bool,
) -> Result<usize, ControlError> {
    let (from, to) = if enabled {
        (InstanceStatus::Paused, InstanceStatus::Active)
    } else {
        (InstanceStatus::Active, InstanceStatus::Paused)
    };
    let mut changed = 0;
    for inst in store
        .instances()
        .list(tenant_id, Some(AgentType::PromptRedactor))
        .await?
    {
        if inst.status == from {
            store.instances().set_status(tenant_id, inst.id, to).await?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// Turn the prompt-redactor feature on or off (SetFeature). On: the flag
/// first, then every paused redactor is activated — which re-arms the
/// signals queued while it was dark, so they are ticked now. Off: every
/// active redactor is paused first, then the flag, so a crash in between
/// leaves the safe state (flag on, redactors paused) that a retry of the
/// same call completes. Returns the tenant and how many redactors changed.
pub async fn set_redactor_feature(
    store: &Store,
    locks: &PgPool,
    tenant_id: Uuid,
    enabled: bool,
) -> Result<(genesis_store::tenants::Tenant, usize), ControlError> {
    with_advisory_lock(locks, &redactor_feature_lock(tenant_id), || async {
        if enabled {
            let tenant = store
                .tenants()
                .set_feature_flag(tenant_id, PROMPT_REDACTOR_FLAG, true)
                .await?;
            let changed = align_redactors(store, tenant_id, true).await?;
            Ok((tenant, changed))
        } else {
            let changed = align_redactors(store, tenant_id, false).await?;
            let tenant = store
                .tenants()
                .set_feature_flag(tenant_id, PROMPT_REDACTOR_FLAG, false)
                .await?;
            Ok((tenant, changed))
        }
    })
    .await
}

/// RaiseRedactorSignal's instance: ensure-create the Paused redactor bound
/// to `call_site_id` (bursty: never bootstrapped, created on a signal,
/// outside the foundational phase), and when the tenant's prompt-redactor feature is on,
/// make sure it is active (a redactor created, or paused by an operator,
/// while the feature is on runs on the next signal). Serialised with
/// [`set_redactor_feature`]. Returns the instance and whether it was
/// created.
pub async fn ensure_signalled_redactor(
    store: &Store,
    locks: &PgPool,
    tenant_id: Uuid,
    call_site_id: &str,
) -> Result<(InstanceRow, bool), ControlError> {
    // The feature lock serialises every redactor creation of the tenant, so
    // the find-or-create runs under it directly (a nested singleton lock
    // would hold a second lock connection per waiting caller).
    with_advisory_lock(locks, &redactor_feature_lock(tenant_id), || async {
        let new = NewInstance {
            agent_type: AgentType::PromptRedactor,
            status: InstanceStatus::Paused,
            call_site_id: Some(call_site_id.to_owned()),
            workset_deadline: None,
            seed_initialized: false,
        };
        let (inst, created) =
            find_or_create(store, tenant_id, AgentType::PromptRedactor, new, |i| {
                i.call_site_id.as_deref() == Some(call_site_id)
            })
            .await?;
        let on = store
            .tenants()
            .get(tenant_id)
            .await?
            .feature_enabled(PROMPT_REDACTOR_FLAG);
        let inst = if on && inst.status == InstanceStatus::Paused {
            store
                .instances()
                .set_status(tenant_id, inst.id, InstanceStatus::Active)
                .await?
        } else {
            inst
        };
        Ok((inst, created))
    })
    .await
}

/// The default seeder (spec §3.7 point 2): once per tenant, a preset named
/// `Default` holding the code-default couples of `GENESIS_DEFAULT_PROVIDER`
/// (genesis-core's one list), bound to Agent:Default and
/// PromptRedactor:Default where those have no binding yet, so resolution
/// lands a real, operator-editable preset rather than the code default.
/// Idempotent across replicas (the store's once-per-tenant row); an
/// operator's later detach or replacement is never undone.
pub async fn seed_default_preset(
    store: &Store,
    tenant_id: Uuid,
    provider: DefaultProvider,
) -> Result<DefaultSeed, ControlError> {
    let couples: Vec<PresetCouple> = code_default(provider).iter().map(Into::into).collect();
    let seeded = store
        .llm()
        .seed_default_preset(tenant_id, DEFAULT_PRESET_NAME, &couples, SEEDED_SITES)
        .await?;
    match &seeded {
        DefaultSeed::Seeded { preset_id, bound } => {
            tracing::info!(tenant = %tenant_id, preset = %preset_id, sites = ?bound, %provider, "seeded the Default preset");
        }
        DefaultSeed::NameTaken => {
            tracing::warn!(tenant = %tenant_id, "a preset named Default already exists; the default seeder left it and every binding alone");
        }
        DefaultSeed::AlreadySeeded => {}
    }
    Ok(seeded)
}

/// Bootstrap one tenant: seed its default preset (every tenant, whatever
/// its gates), then its SOA if both gate levels are on; returns whether a
/// SOA was created. A failed seed is logged and never stops the SOA.
pub async fn bootstrap_tenant(state: &AppState, tenant_id: Uuid) -> Result<bool, ControlError> {
    // The service refuses to serve without a provider; a library embedder
    // that set none gets no seeded preset, never a fake one.
    match state.config.default_provider {
        Some(provider) if !state.seeded(tenant_id) => {
            match seed_default_preset(&state.store, tenant_id, provider).await {
                Ok(_) => state.mark_seeded(tenant_id),
                Err(e) => {
                    tracing::warn!(tenant = %tenant_id, error = %e, "bootstrap: default preset seeding failed")
                }
            }
        }
        Some(_) => {}
        None => {
            tracing::warn!(tenant = %tenant_id, "no GENESIS_DEFAULT_PROVIDER: the Default preset is not seeded")
        }
    }
    if !state.config.standing_agents_enabled || !state.config.auto_bootstrap {
        return Ok(false);
    }
    let tenant = state.store.tenants().get(tenant_id).await?;
    if !tenant.standing_agents_on() {
        return Ok(false);
    }
    let (soa, created) = ensure_soa(
        &state.store,
        &state.locks,
        tenant_id,
        state.config.standing_agents_idle_by_default,
    )
    .await?;
    // Surface the SOA in the coordination registry (spec 2.2); a registry
    // outage never fails the bootstrap.
    if let Err(e) = state.lanes.ensure_soa_registered(tenant_id, soa.id).await {
        tracing::warn!(tenant = %tenant_id, error = %e, "bootstrap: SOA registry registration failed");
    }
    if created {
        state.metrics.add_bootstrapped();
        tracing::info!(tenant = %tenant_id, instance = %soa.id, status = %soa.status, "bootstrap: SOA created");
    }
    Ok(created)
}

/// What one scan does for one tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanStep {
    /// Nothing is missing (or the tenant is not active).
    Nothing,
    /// Run [`bootstrap_tenant`]: its preset is not seeded by this process,
    /// or the gates are on and it has no SOA.
    Bootstrap,
    /// Its SOA exists but this replica does not keep its registry entry
    /// alive yet (another replica or an operator created it).
    Register(Uuid),
}

/// The scan's rule for one tenant: only what [`bootstrap_tenant`] would
/// change is done, so a scan of a fleet where nothing is missing writes
/// nothing and reads only the census. `soa_gates_on` is the deploy level
/// with AutoBootstrap; `registered` whether this replica holds the
/// tenant's SOA entry.
pub fn scan_step(
    tenant: &TenantCensus,
    seeded: bool,
    soa_gates_on: bool,
    registered: bool,
) -> ScanStep {
    if tenant.status != TenantStatus::Active {
        return ScanStep::Nothing;
    }
    if !seeded {
        return ScanStep::Bootstrap;
    }
    if !soa_gates_on || !tenant.standing_agents_enabled {
        return ScanStep::Nothing;
    }
    match tenant.soa_id {
        None => ScanStep::Bootstrap,
        Some(soa) if !registered => ScanStep::Register(soa),
        Some(_) => ScanStep::Nothing,
    }
}

/// Scan every tenant (the start-up pass and each re-scan): one census
/// query, then [`bootstrap_tenant`] only for a tenant [`scan_step`] finds
/// something missing in, and a registry entry for a SOA this replica does
/// not yet keep. One failing tenant never stops the rest. Returns the SOAs
/// created.
pub async fn bootstrap_all(state: &AppState) -> Result<usize, ControlError> {
    let soa_gates_on = state.config.standing_agents_enabled && state.config.auto_bootstrap;
    let mut created = 0;
    for t in state.store.tenants().census().await? {
        let registered = t.soa_id.is_some_and(|soa| state.lanes.knows_soa(t.id, soa));
        match scan_step(&t, state.seeded(t.id), soa_gates_on, registered) {
            ScanStep::Nothing => {}
            ScanStep::Bootstrap => match bootstrap_tenant(state, t.id).await {
                Ok(true) => created += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(tenant = %t.id, error = %e, "bootstrap: tenant failed"),
            },
            ScanStep::Register(soa) => {
                if let Err(e) = state.lanes.ensure_soa_registered(t.id, soa).await {
                    tracing::warn!(tenant = %t.id, error = %e, "bootstrap: SOA registry registration failed");
                }
            }
        }
    }
    Ok(created)
}

fn tenant_of(payload: &str) -> Option<Uuid> {
    serde_json::from_str::<serde_json::Value>(payload)
        .ok()?
        .get("tenant_id")?
        .as_str()?
        .parse()
        .ok()
}

/// How long the first scan waits for control's LISTEN connection: the scan
/// that follows `Listening` covers every tenant created before it, and
/// notices every tenant after.
const FIRST_SCAN_WAIT: Duration = Duration::from_secs(2);

/// The bootstrap loop: a full scan at start and every `rescan`, and one
/// tenant at a time as `genesis_tenants` notifies (`notices`, from control's
/// LISTEN connection). Each time that connection listens (at start, after a
/// lost connection, or when notices were dropped) it scans at once, so a
/// tenant created while no notice could arrive does not wait for the
/// rescan. It always runs (every tenant gets the default preset, seeded once
/// per process and tenant); the SOA part is skipped when the deploy level or
/// AutoBootstrap is off.
pub async fn run_bootstrap(
    state: AppState,
    rescan: Duration,
    mut notices: NoticeStream,
    shutdown: CancellationToken,
) {
    if !state.config.standing_agents_enabled || !state.config.auto_bootstrap {
        // The SOA bootstrap is off; the loop still runs for the default
        // preset seeder, which every tenant gets.
        tracing::info!("bootstrap: SOA bootstrap disabled by configuration; seeding presets only");
    }
    let mut next_scan = tokio::time::Instant::now() + FIRST_SCAN_WAIT.min(rescan);
    loop {
        if tokio::time::Instant::now() >= next_scan {
            if let Err(e) = bootstrap_all(&state).await {
                tracing::warn!(error = %e, "bootstrap: scan failed");
            }
            next_scan = tokio::time::Instant::now() + rescan;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(next_scan) => {}
            n = notices.recv() => match n {
                Notice::Payload(p) => {
                    if let Some(t) = tenant_of(&p)
                        && let Err(e) = bootstrap_tenant(&state, t).await
                    {
                        tracing::warn!(tenant = %t, error = %e, "bootstrap: tenant failed");
                    }
                }
                Notice::Listening => next_scan = tokio::time::Instant::now(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(status: TenantStatus, enabled: bool, soa: Option<Uuid>) -> TenantCensus {
        TenantCensus {
            id: Uuid::now_v7(),
            status,
            standing_agents_enabled: enabled,
            soa_id: soa,
        }
    }

    #[test]
    fn a_tenant_with_nothing_missing_gets_nothing() {
        let soa = Uuid::now_v7();
        let t = tenant(TenantStatus::Active, true, Some(soa));
        assert_eq!(scan_step(&t, true, true, true), ScanStep::Nothing);
        // Gates off at either level: the SOA part is not this scan's.
        assert_eq!(scan_step(&t, true, false, false), ScanStep::Nothing);
        let off = tenant(TenantStatus::Active, false, None);
        assert_eq!(scan_step(&off, true, true, false), ScanStep::Nothing);
    }

    #[test]
    fn an_inactive_tenant_is_neither_seeded_nor_given_a_soa() {
        for status in TenantStatus::ALL {
            let t = tenant(*status, true, None);
            let expected = if *status == TenantStatus::Active {
                ScanStep::Bootstrap
            } else {
                ScanStep::Nothing
            };
            assert_eq!(scan_step(&t, false, true, false), expected, "{status}");
        }
    }

    #[test]
    fn an_unseeded_tenant_is_bootstrapped_whatever_its_gates() {
        for (enabled, gates, soa) in [
            (false, false, None),
            (true, true, Some(Uuid::now_v7())),
            (true, false, None),
        ] {
            let t = tenant(TenantStatus::Active, enabled, soa);
            assert_eq!(scan_step(&t, false, gates, true), ScanStep::Bootstrap);
        }
    }

    #[test]
    fn a_missing_soa_is_created_and_an_unknown_one_registered() {
        let t = tenant(TenantStatus::Active, true, None);
        assert_eq!(scan_step(&t, true, true, false), ScanStep::Bootstrap);
        let soa = Uuid::now_v7();
        let t = tenant(TenantStatus::Active, true, Some(soa));
        assert_eq!(scan_step(&t, true, true, false), ScanStep::Register(soa));
    }
}
