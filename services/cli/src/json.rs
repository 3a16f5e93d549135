//! Proto messages to and from JSON, generically, through the descriptor set
//! genesis-proto exports: the canonical proto3 JSON mapping with the proto's
//! own snake_case field names, 64-bit integers as numbers, every field shown
//! (defaults included) and timestamps as RFC 3339 text. Fields whose names end
//! in `_json` carry JSON text on the wire; here they are embedded as JSON
//! values (and, on input, a JSON value there is accepted and re-encoded), so
//! `--output json | jq` reaches inside them.
//!
//! This module owns no field lists: a field added to the proto shows up in
//! the output without a change here. It must never talk to the network.

use std::sync::OnceLock;

use genesis_proto::v1;
use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage, SerializeOptions};
use serde_json::{Map, Value};

use crate::error::CliError;

/// A generated message whose fully qualified proto name is known, so it can
/// be looked up in the descriptor set.
pub trait Wire: prost::Message + Default {
    /// The fully qualified name, e.g. `genesis.v1.Tenant`.
    const NAME: &'static str;
}

macro_rules! wire {
    ($($ty:ident),+ $(,)?) => {
        $( impl Wire for v1::$ty {
            const NAME: &'static str = concat!("genesis.v1.", stringify!($ty));
        } )+
    };
}

wire!(
    Tenant,
    ListTenantsResponse,
    AgentInstance,
    ListAgentsResponse,
    ResetAgentResponse,
    SendMessageResponse,
    ListMessagesResponse,
    SetModeResponse,
    ListModesResponse,
    Mode,
    EditModeResponse,
    GetLedgerResponse,
    AgentTrace,
    TurnReplay,
    WatchTurnsEvent,
    TurnEvent,
    AgentMessage,
    RaiseRedactorSignalResponse,
    Decision,
    ListDecisionsResponse,
    RespondDecisionResponse,
    LlmSite,
    ListSitesResponse,
    Preset,
    ListPresetsResponse,
    Pricing,
    ListPricingResponse,
    ConfigEntry,
    ListConfigResponse,
    Mission,
    ListMissionsResponse,
    ConstitutionRule,
    ListRulesResponse,
    RemoveRuleResponse,
    KnowledgeDocument,
    ListDocumentsResponse,
    RegistryAgent,
    RegistryListResponse,
    UnregisterResponse,
    RouteResponse,
    Coder,
    ListCodersResponse,
    CoderLogsResponse,
    CodingTask,
    CodingTaskArtifact,
    CodingTaskArtifactContent,
    ResolvedPresetChain,
    ListTasksResponse,
    RunSpecResponse,
    TaskStatusResponse,
    LaunchResponse,
    WindowsResponse,
    FocusResponse,
    CloseResponse,
    SnapshotResponse,
    ClickResponse,
    TypeResponse,
    KeyResponse,
    WaitForResponse,
    ComputerResponse,
    ScreenshotResponse,
    ReleaseResponse,
    CreateTokenResponse,
    ApiToken,
    ListTokensResponse,
);

fn pool() -> Result<&'static DescriptorPool, CliError> {
    static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(genesis_proto::FILE_DESCRIPTOR_SET).map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| CliError::Render(format!("descriptor set: {e}")))
}

fn descriptor<M: Wire>() -> Result<prost_reflect::MessageDescriptor, CliError> {
    pool()?
        .get_message_by_name(M::NAME)
        .ok_or_else(|| CliError::Render(format!("{} is not in the descriptor set", M::NAME)))
}

/// Renders a message as JSON (see the module doc for the mapping).
pub fn to_json<M: Wire>(message: &M) -> Result<Value, CliError> {
    let bytes = message.encode_to_vec();
    let dynamic = DynamicMessage::decode(descriptor::<M>()?, bytes.as_slice())
        .map_err(|e| CliError::Render(format!("{}: {e}", M::NAME)))?;
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .stringify_64_bit_integers(false)
        .skip_default_fields(false);
    let mut value = dynamic
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| CliError::Render(format!("{}: {e}", M::NAME)))?;
    embed_json_fields(&mut value);
    Ok(value)
}

/// Parses a message from JSON text, as an operator writes it in a file
/// (`llm preset upsert --file`). Unknown fields, wrong types and malformed
/// JSON are usage errors naming `source` and the problem.
pub fn from_json<M: Wire>(source: &str, text: &str) -> Result<M, CliError> {
    let mut value: Value = serde_json::from_str(text)
        .map_err(|e| CliError::usage(format!("{source}: not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(CliError::usage(format!("{source}: expected a JSON object")));
    }
    stringify_json_fields(&mut value);
    let dynamic = DynamicMessage::deserialize_with_options(
        descriptor::<M>()?,
        value,
        &DeserializeOptions::new(),
    )
    .map_err(|e| CliError::usage(format!("{source}: {e}")))?;
    dynamic
        .transcode_to::<M>()
        .map_err(|e| CliError::usage(format!("{source}: {e}")))
}

fn is_json_text_field(key: &str) -> bool {
    key.ends_with("_json") || key.ends_with("Json")
}

/// Replaces the JSON text of `*_json` fields by the value it encodes; an
/// empty text becomes `null`; text that is not JSON stays a string (the
/// output never hides what the server sent).
fn embed_json_fields(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if is_json_text_field(key) {
                    if let Value::String(text) = field {
                        if text.trim().is_empty() {
                            *field = Value::Null;
                        } else if let Ok(parsed) = serde_json::from_str::<Value>(text) {
                            *field = parsed;
                        }
                    }
                } else {
                    embed_json_fields(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(embed_json_fields),
        _ => {}
    }
}

/// The inverse of [`embed_json_fields`] for input: a `*_json` field given as
/// a JSON value is re-encoded as text; `null` becomes the empty text.
fn stringify_json_fields(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if is_json_text_field(key) {
                    match field {
                        Value::String(_) => {}
                        Value::Null => *field = Value::String(String::new()),
                        other => *other = Value::String(other.to_string()),
                    }
                } else {
                    stringify_json_fields(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(stringify_json_fields),
        _ => {}
    }
}

/// An empty JSON object, for commands whose answer carries nothing to show.
pub fn empty_object() -> Value {
    Value::Object(Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_types::Timestamp;

    #[test]
    fn messages_render_with_proto_field_names_and_numeric_int64() {
        let turn = v1::TurnEvent {
            tenant_id: "t".into(),
            instance_id: "i".into(),
            turn_number: 7,
            decision_kind: "ActedWithTool".into(),
            tokens: 1234,
            cost_usd: 0.25,
            created_at: Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            ..Default::default()
        };
        let json = to_json(&turn).expect("renders");
        assert_eq!(json["turn_number"], 7);
        assert_eq!(json["tokens"], 1234);
        assert_eq!(json["cost_usd"], 0.25);
        assert_eq!(json["decision_kind"], "ActedWithTool");
        assert_eq!(json["created_at"], "2023-11-14T22:13:20Z");
        // Defaults are shown, not skipped.
        assert_eq!(json["reasoning_summary"], "");
    }

    #[test]
    fn json_text_fields_are_embedded() {
        let decision = v1::Decision {
            id: "d".into(),
            metadata_json: r#"{"source":"soa"}"#.into(),
            options_json: String::new(),
            ..Default::default()
        };
        let json = to_json(&decision).expect("renders");
        assert_eq!(json["metadata_json"]["source"], "soa");
        assert_eq!(json["options_json"], Value::Null);
    }

    #[test]
    fn oneof_events_render_under_their_case_name() {
        let event = v1::WatchTurnsEvent {
            event: Some(v1::watch_turns_event::Event::Message(v1::MessageEvent {
                message: Some(v1::AgentMessage {
                    body: "hi".into(),
                    direction: "agent_to_operator".into(),
                    ..Default::default()
                }),
            })),
        };
        let json = to_json(&event).expect("renders");
        assert_eq!(json["message"]["message"]["body"], "hi");
        assert!(json.get("turn").is_none());
    }

    #[test]
    fn presets_parse_from_operator_json_with_embedded_overlays() {
        let text = r#"{
            "name": "fast",
            "primary": {"model": "claude-opus-4-8", "provider": "anthropic",
                        "backend": "api", "credential_names": ["main", "spare"]},
            "fallback_chain": [{"model": "gpt-5", "provider": "openai"}],
            "overlays_json": {"sampling": {"temperature": 0.2}}
        }"#;
        let preset: v1::Preset = from_json("preset.json", text).expect("parses");
        assert_eq!(preset.name, "fast");
        let primary = preset.primary.expect("primary set");
        assert_eq!(primary.credential_names, ["main", "spare"]);
        assert_eq!(preset.fallback_chain[0].provider, "openai");
        let overlays: Value = serde_json::from_str(&preset.overlays_json).expect("json text");
        assert_eq!(overlays["sampling"]["temperature"], 0.2);
    }

    #[test]
    fn preset_files_with_unknown_fields_are_usage_errors() {
        let err = from_json::<v1::Preset>("preset.json", r#"{"name":"x","modle":"y"}"#)
            .expect_err("unknown field refused");
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
        let text = err.to_string();
        assert!(text.starts_with("preset.json: "), "{text}");
        assert!(text.contains("modle"), "{text}");
    }

    #[test]
    fn malformed_preset_files_are_usage_errors() {
        let err = from_json::<v1::Preset>("p.json", "{not json").expect_err("refused");
        assert!(
            err.to_string().starts_with("p.json: not valid JSON"),
            "{err}"
        );
        let err = from_json::<v1::Preset>("p.json", "[1]").expect_err("refused");
        assert_eq!(err.to_string(), "p.json: expected a JSON object");
    }
}
