//! An operator's edit of one mode of a type's catalogue (spec §2.5, §3.1
//! `agent_modes`): which fields may change (prompt fragment, toolset,
//! preset, budget override), the checks a new value must pass before
//! anything is written, and the old→new record of what an edit changed,
//! which is the audit row's content. The store applies the result to the
//! tenant's override row; control converts the request into a
//! [`ModeEdit`].
//!
//! Must never accept a toolset outside the type's tool superset (checked by
//! [`crate::modes::validate_mode_definition`], the rule every write to
//! `agent_modes` must pass), nor repair input: a value is accepted or
//! refused naming its field.

use serde_json::{Value, json};

use crate::budget::BudgetOverride;
use crate::enums::AgentType;
use crate::error::CoreError;
use crate::modes::{ModeDefinition, seed_catalogue, validate_mode_definition};
use crate::validate::{
    MAX_NAME_LEN, MAX_PROMPT_FRAGMENT_BYTES, MAX_TOOLSET_LEN, validate_name, validate_tool_name,
};

/// The fields of a mode an edit can change, as a reader of the catalogue
/// sees them (a stored NULL toolset already replaced by the seed's).
#[derive(Debug, Clone, PartialEq)]
pub struct ModeFields {
    pub prompt_fragment: String,
    pub toolset: Vec<String>,
    /// The pinned preset (id or name), if any.
    pub preset: Option<String>,
    pub budget_override: Option<BudgetOverride>,
}

impl ModeFields {
    /// The effective fields of a stored row of `agent_type`'s mode `name`:
    /// a NULL toolset is the in-code seed's toolset for that name (empty
    /// when the seed has no such mode), a stored budget must parse.
    pub fn from_stored(
        agent_type: AgentType,
        name: &str,
        prompt_fragment: &str,
        toolset: Option<&[String]>,
        preset: Option<&str>,
        budget_override: Option<&Value>,
    ) -> Result<Self, CoreError> {
        let toolset = match toolset {
            Some(t) => t.to_vec(),
            None => seed_catalogue(agent_type)
                .into_iter()
                .find(|m| m.name == name)
                .map(|m| m.toolset)
                .unwrap_or_default(),
        };
        Ok(Self {
            prompt_fragment: prompt_fragment.to_owned(),
            toolset,
            preset: preset.map(str::to_owned),
            budget_override: budget_override
                .filter(|v| !v.is_null())
                .map(BudgetOverride::from_json_value)
                .transpose()?,
        })
    }
}

/// What an operator asks to change; `None` keeps the field.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModeEdit {
    pub prompt_fragment: Option<String>,
    /// The whole new toolset.
    pub toolset: Option<Vec<String>>,
    /// `Some(None)` removes the pin.
    pub preset: Option<Option<String>>,
    /// `Some(None)` removes the override.
    pub budget_override: Option<Option<BudgetOverride>>,
}

/// One field an edit changed: its name and the old and new values as
/// recorded in the audit row.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldChange {
    pub field: &'static str,
    pub old: Value,
    pub new: Value,
}

/// The field names, as requests, audit rows and errors spell them.
pub const PROMPT_FRAGMENT: &str = "prompt_fragment";
pub const TOOLSET: &str = "toolset";
pub const PRESET: &str = "preset";
pub const BUDGET_OVERRIDE: &str = "budget_override";

fn invalid(field: &str, reason: impl Into<String>) -> CoreError {
    CoreError::invalid_argument(field, reason)
}

fn budget_json(b: Option<&BudgetOverride>) -> Value {
    b.map_or(Value::Null, BudgetOverride::to_json)
}

impl ModeEdit {
    /// Whether the edit names no field at all.
    pub fn is_empty(&self) -> bool {
        self.prompt_fragment.is_none()
            && self.toolset.is_none()
            && self.preset.is_none()
            && self.budget_override.is_none()
    }

    /// Checks every value against its rule before anything is written:
    /// something to change; a fragment within `MAX_PROMPT_FRAGMENT_BYTES`
    /// without NUL (empty is allowed: no fragment); tool names well formed,
    /// at most `MAX_TOOLSET_LEN`, none twice, all within `agent_type`'s
    /// superset (the refusal names the first tool outside it); a preset
    /// reference that is a well-formed name or id; a budget override with
    /// at least one axis.
    pub fn validate(&self, agent_type: AgentType, mode: &str) -> Result<(), CoreError> {
        if self.is_empty() {
            return Err(invalid(
                "edit",
                "names no field to change (prompt_fragment, toolset, preset, budget_override)",
            ));
        }
        if let Some(f) = &self.prompt_fragment {
            if f.len() > MAX_PROMPT_FRAGMENT_BYTES {
                return Err(invalid(
                    PROMPT_FRAGMENT,
                    format!(
                        "is {} bytes; the limit is {MAX_PROMPT_FRAGMENT_BYTES}",
                        f.len()
                    ),
                ));
            }
            if f.contains('\0') {
                return Err(invalid(PROMPT_FRAGMENT, "must not contain NUL characters"));
            }
        }
        if let Some(tools) = &self.toolset {
            if tools.len() > MAX_TOOLSET_LEN {
                return Err(invalid(
                    TOOLSET,
                    format!("has {} tools; the limit is {MAX_TOOLSET_LEN}", tools.len()),
                ));
            }
            for (i, t) in tools.iter().enumerate() {
                validate_tool_name(TOOLSET, t)?;
                if tools[..i].contains(t) {
                    return Err(invalid(TOOLSET, format!("names {t:?} twice")));
                }
            }
            let def = ModeDefinition {
                name: mode.to_owned(),
                description: String::new(),
                prompt_fragment: String::new(),
                toolset: tools.clone(),
                preset: None,
                budget_override: None,
                system_seed: false,
            };
            validate_mode_definition(agent_type, &def).map_err(|e| match e {
                CoreError::ToolOutsideSuperset { tool, .. } => invalid(
                    TOOLSET,
                    format!("{tool:?} is outside the {agent_type} tool superset"),
                ),
                other => other,
            })?;
        }
        if let Some(Some(p)) = &self.preset {
            validate_name(PRESET, p, MAX_NAME_LEN)?;
        }
        if let Some(Some(b)) = &self.budget_override
            && *b == BudgetOverride::default()
        {
            return Err(invalid(
                BUDGET_OVERRIDE,
                "sets no axis; clear the override instead",
            ));
        }
        Ok(())
    }

    /// `current` with the edit applied, and the fields whose value it
    /// changed (old→new, in field order). Setting a field to its current
    /// value changes nothing and is not listed.
    pub fn apply(&self, current: &ModeFields) -> (ModeFields, Vec<FieldChange>) {
        let mut next = current.clone();
        let mut changes = Vec::new();
        if let Some(f) = &self.prompt_fragment
            && *f != current.prompt_fragment
        {
            changes.push(FieldChange {
                field: PROMPT_FRAGMENT,
                old: json!(current.prompt_fragment),
                new: json!(f),
            });
            next.prompt_fragment = f.clone();
        }
        if let Some(t) = &self.toolset
            && *t != current.toolset
        {
            changes.push(FieldChange {
                field: TOOLSET,
                old: json!(current.toolset),
                new: json!(t),
            });
            next.toolset = t.clone();
        }
        if let Some(p) = &self.preset
            && *p != current.preset
        {
            changes.push(FieldChange {
                field: PRESET,
                old: json!(current.preset),
                new: json!(p),
            });
            next.preset = p.clone();
        }
        if let Some(b) = &self.budget_override
            && *b != current.budget_override
        {
            changes.push(FieldChange {
                field: BUDGET_OVERRIDE,
                old: budget_json(current.budget_override.as_ref()),
                new: budget_json(b.as_ref()),
            });
            next.budget_override = *b;
        }
        (next, changes)
    }
}

/// The audit row's `changes` document: `{field: {old, new}}` per change.
pub fn changes_json(changes: &[FieldChange]) -> Value {
    Value::Object(
        changes
            .iter()
            .map(|c| (c.field.to_owned(), json!({"old": c.old, "new": c.new})))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incident() -> ModeFields {
        ModeFields::from_stored(AgentType::Soa, "Incident", "be careful", None, None, None).unwrap()
    }

    #[test]
    fn a_stored_null_toolset_reads_as_the_seed_toolset() {
        let seed = seed_catalogue(AgentType::Soa)
            .into_iter()
            .find(|m| m.name == "Incident")
            .unwrap();
        assert_eq!(incident().toolset, seed.toolset);
        let own = vec!["soa_send_message".to_owned()];
        let f = ModeFields::from_stored(AgentType::Soa, "Incident", "", Some(&own), None, None)
            .unwrap();
        assert_eq!(f.toolset, own);
        let bad = json!({"maxTokens": -1});
        assert!(
            ModeFields::from_stored(AgentType::Soa, "Incident", "", None, None, Some(&bad))
                .is_err()
        );
    }

    #[test]
    fn an_edit_lists_each_changed_field_old_to_new_and_skips_unchanged_ones() {
        let cur = incident();
        let edit = ModeEdit {
            prompt_fragment: Some("be quick".into()),
            toolset: Some(cur.toolset.clone()),
            preset: Some(Some("ops".into())),
            budget_override: Some(Some(BudgetOverride {
                max_turns: Some(3),
                ..BudgetOverride::default()
            })),
        };
        edit.validate(AgentType::Soa, "Incident").unwrap();
        let (next, changes) = edit.apply(&cur);
        assert_eq!(next.prompt_fragment, "be quick");
        assert_eq!(next.preset.as_deref(), Some("ops"));
        assert_eq!(
            changes_json(&changes),
            json!({
                "prompt_fragment": {"old": "be careful", "new": "be quick"},
                "preset": {"old": null, "new": "ops"},
                "budget_override": {"old": null, "new": {"maxTurns": 3}},
            })
        );
        // Applying it again changes nothing.
        assert_eq!(edit.apply(&next), (next.clone(), vec![]));
        // Clearing is a change back to null.
        let clear = ModeEdit {
            preset: Some(None),
            budget_override: Some(None),
            ..ModeEdit::default()
        };
        let (_, changes) = clear.apply(&next);
        assert_eq!(
            changes_json(&changes),
            json!({
                "preset": {"old": "ops", "new": null},
                "budget_override": {"old": {"maxTurns": 3}, "new": null},
            })
        );
    }

    #[test]
    fn a_toolset_outside_the_superset_is_refused_naming_the_tool() {
        let edit = |tools: &[&str]| ModeEdit {
            toolset: Some(tools.iter().map(|t| (*t).to_owned()).collect()),
            ..ModeEdit::default()
        };
        // The self-applying verb is the SOA's only.
        let e = edit(&["soa_send_message", "soa_propose_task"])
            .validate(AgentType::Compliance, "Cadence")
            .unwrap_err();
        assert!(
            matches!(&e, CoreError::InvalidArgument { field, reason }
                if field == TOOLSET && reason.contains("\"soa_propose_task\"")),
            "{e:?}"
        );
        edit(&["soa_send_message", "soa_propose_task"])
            .validate(AgentType::Soa, "Strategic")
            .unwrap();
        for (tools, needle) in [
            (&["phase_complete"][..], "phase_complete"),
            (&["rm_rf"][..], "rm_rf"),
            (&["Soa_Send"][..], "lower-case"),
            (&["soa_send_message", "soa_send_message"][..], "twice"),
        ] {
            let e = edit(tools)
                .validate(AgentType::Soa, "Strategic")
                .unwrap_err();
            assert!(e.to_string().contains(needle), "{tools:?}: {e}");
        }
        edit(&[]).validate(AgentType::Soa, "Idle").unwrap();
    }

    #[test]
    fn other_bad_values_are_refused_naming_their_field() {
        let cases = [
            (ModeEdit::default(), "edit"),
            (
                ModeEdit {
                    prompt_fragment: Some("x".repeat(MAX_PROMPT_FRAGMENT_BYTES + 1)),
                    ..ModeEdit::default()
                },
                PROMPT_FRAGMENT,
            ),
            (
                ModeEdit {
                    prompt_fragment: Some("a\0b".into()),
                    ..ModeEdit::default()
                },
                PROMPT_FRAGMENT,
            ),
            (
                ModeEdit {
                    preset: Some(Some(" ops".into())),
                    ..ModeEdit::default()
                },
                PRESET,
            ),
            (
                ModeEdit {
                    budget_override: Some(Some(BudgetOverride::default())),
                    ..ModeEdit::default()
                },
                BUDGET_OVERRIDE,
            ),
        ];
        for (edit, field) in cases {
            match edit.validate(AgentType::Soa, "Strategic") {
                Err(CoreError::InvalidArgument { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        let empty_fragment = ModeEdit {
            prompt_fragment: Some(String::new()),
            ..ModeEdit::default()
        };
        empty_fragment
            .validate(AgentType::Soa, "Strategic")
            .unwrap();
    }
}
