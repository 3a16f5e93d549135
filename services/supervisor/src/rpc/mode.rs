//! The mode an instance runs in, resolved from its tenant's catalogue rows
//! over the in-code seed by genesis-core's rule: the one chokepoint
//! ClaimTick serves the pod through and InvokeTool authorises against.
//! Must never answer a mode it could not resolve (an unknown name, a
//! malformed budget override, a toolset outside the type's superset): the
//! error refuses the RPC (fail closed).

use genesis_core::modes::{ModeDefinition, ResolvedMode, resolve_mode, seed_catalogue};
use genesis_core::{AgentType, BudgetOverride};
use genesis_store::ModeRow;

use crate::error::SupervisorError;

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

/// The instance's mode from its catalogue rows, failing closed: the one
/// resolution ClaimTick serves the pod and InvokeTool authorises against.
pub(super) fn resolve(
    agent_type: AgentType,
    active_mode: Option<&str>,
    rows: &[ModeRow],
) -> Result<ResolvedMode, SupervisorError> {
    let defs = mode_definitions(agent_type, rows)?;
    resolve_mode(agent_type, active_mode, &defs).map_err(SupervisorError::ModeResolution)
}
