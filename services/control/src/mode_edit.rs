//! `EditMode`'s request as a validated domain value: the agent type, the
//! mode name and genesis-core's [`ModeEdit`], every field checked (the
//! toolset against the type's tool superset) before the store is called.
//! This conversion is where the RPC's `INVALID_ARGUMENT`s come from, each
//! naming its field. Must never reach the database: whether the mode or
//! the preset exists is the store's answer.

use genesis_core::AgentType;
use genesis_core::budget::BudgetOverride;
use genesis_core::mode_edit::ModeEdit;
use genesis_core::validate::validate_mode_name;
use genesis_proto::convert::invalid_argument;
use genesis_proto::v1;
use tonic::Status;

use crate::status::{core_status, field_status, parse_enum};

/// A checked `EditModeRequest` (its tenant is authorized separately,
/// first).
#[derive(Debug, Clone, PartialEq)]
pub struct EditModeCommand {
    pub agent_type: AgentType,
    pub mode: String,
    pub edit: ModeEdit,
}

impl TryFrom<&v1::EditModeRequest> for EditModeCommand {
    type Error = Status;

    fn try_from(req: &v1::EditModeRequest) -> Result<Self, Status> {
        let agent_type: AgentType = parse_enum("agent_type", &req.agent_type)?;
        validate_mode_name("mode", &req.mode).map_err(|e| field_status("mode", e))?;
        let preset = req
            .preset
            .as_ref()
            .map(|p| (!p.is_empty()).then(|| p.clone()));
        let budget_override = match (&req.budget_override, req.clear_budget_override) {
            (Some(_), true) => {
                return Err(invalid_argument(
                    "clear_budget_override",
                    "cannot be set together with budget_override",
                ));
            }
            (Some(b), false) => Some(Some(budget_override(b)?)),
            (None, true) => Some(None),
            (None, false) => None,
        };
        let edit = ModeEdit {
            prompt_fragment: req.prompt_fragment.clone(),
            toolset: req.toolset.as_ref().map(|t| t.tools.clone()),
            preset,
            budget_override,
        };
        edit.validate(agent_type, &req.mode).map_err(core_status)?;
        Ok(Self {
            agent_type,
            mode: req.mode.clone(),
            edit,
        })
    }
}

/// The wire budget envelope as a mode's budget override: every set axis
/// positive, the wall clock in whole seconds.
fn budget_override(b: &v1::BudgetEnvelope) -> Result<BudgetOverride, Status> {
    fn positive<T: Into<i64> + Copy>(axis: &str, v: Option<T>) -> Result<Option<u64>, Status> {
        v.map(|n| {
            u64::try_from(n.into())
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    invalid_argument(
                        &format!("budget_override.{axis}"),
                        format!("must be positive, got {}", n.into()),
                    )
                })
        })
        .transpose()
    }
    let wall = positive("max_wall_ms", b.max_wall_ms)?
        .map(|ms| {
            if ms % 1000 == 0 {
                Ok(ms / 1000)
            } else {
                Err(invalid_argument(
                    "budget_override.max_wall_ms",
                    format!("must be whole seconds (a multiple of 1000), got {ms}"),
                ))
            }
        })
        .transpose()?;
    let dollars = match b.max_cost_usd {
        Some(d) if !(d.is_finite() && d > 0.0) => {
            return Err(invalid_argument(
                "budget_override.max_cost_usd",
                format!("must be a positive number, got {d}"),
            ));
        }
        other => other,
    };
    Ok(BudgetOverride {
        max_tokens: positive("max_tokens", b.max_tokens)?,
        max_output_tokens_per_turn: positive(
            "max_output_tokens_per_turn",
            b.max_output_tokens_per_turn,
        )?,
        max_tool_calls: positive("max_tool_calls", b.max_tool_calls)?,
        max_wall_seconds: wall,
        max_dollars: dollars,
        max_turns: positive("max_turns", b.max_turns)?,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is the test failing
mod tests {
    use super::*;

    fn req() -> v1::EditModeRequest {
        v1::EditModeRequest {
            tenant_id: String::new(),
            agent_type: "Compliance".into(),
            mode: "Cadence".into(),
            ..Default::default()
        }
    }

    fn refused(r: v1::EditModeRequest) -> String {
        let e = EditModeCommand::try_from(&r).expect_err("refused");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        e.message().to_owned()
    }

    #[test]
    fn a_request_becomes_the_edit_it_names() {
        let mut r = req();
        r.prompt_fragment = Some("focus".into());
        r.toolset = Some(v1::ModeToolset {
            tools: vec!["soa_send_message".into()],
        });
        r.preset = Some(String::new());
        r.budget_override = Some(v1::BudgetEnvelope {
            max_turns: Some(4),
            max_wall_ms: Some(30_000),
            ..Default::default()
        });
        let c = EditModeCommand::try_from(&r).unwrap();
        assert_eq!(c.agent_type, AgentType::Compliance);
        assert_eq!(
            c.edit,
            ModeEdit {
                prompt_fragment: Some("focus".into()),
                toolset: Some(vec!["soa_send_message".into()]),
                preset: Some(None),
                budget_override: Some(Some(BudgetOverride {
                    max_turns: Some(4),
                    max_wall_seconds: Some(30),
                    ..BudgetOverride::default()
                })),
            }
        );
        let mut clear = req();
        clear.clear_budget_override = true;
        assert_eq!(
            EditModeCommand::try_from(&clear)
                .unwrap()
                .edit
                .budget_override,
            Some(None)
        );
    }

    #[test]
    fn each_bad_field_is_refused_by_name() {
        let m = refused(req());
        assert!(m.starts_with("edit:"), "{m}");
        let mut r = req();
        r.agent_type = "Robot".into();
        assert!(refused(r).starts_with("agent_type:"));
        let mut r = req();
        r.mode = "no spaces".into();
        r.prompt_fragment = Some(String::new());
        assert!(refused(r).starts_with("mode:"));
        let mut r = req();
        r.toolset = Some(v1::ModeToolset {
            tools: vec!["soa_propose_task".into()],
        });
        let m = refused(r);
        assert!(
            m.starts_with("toolset:") && m.contains("soa_propose_task"),
            "{m}"
        );
        for (budget, field) in [
            (
                v1::BudgetEnvelope {
                    max_tokens: Some(0),
                    ..Default::default()
                },
                "budget_override.max_tokens",
            ),
            (
                v1::BudgetEnvelope {
                    max_wall_ms: Some(1500),
                    ..Default::default()
                },
                "budget_override.max_wall_ms",
            ),
            (
                v1::BudgetEnvelope {
                    max_cost_usd: Some(f64::NAN),
                    ..Default::default()
                },
                "budget_override.max_cost_usd",
            ),
            (v1::BudgetEnvelope::default(), "budget_override"),
        ] {
            let mut r = req();
            r.budget_override = Some(budget);
            let m = refused(r);
            assert!(m.starts_with(&format!("{field}:")), "{field}: {m}");
        }
        let mut r = req();
        r.budget_override = Some(v1::BudgetEnvelope {
            max_turns: Some(2),
            ..Default::default()
        });
        r.clear_budget_override = true;
        assert!(refused(r).starts_with("clear_budget_override:"));
    }
}
