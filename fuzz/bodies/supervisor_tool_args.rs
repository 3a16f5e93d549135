//! Body of the `supervisor_tool_args` fuzz target, shared with
//! genesis-supervisor's `tests/fuzz_corpus.rs`: arbitrary bytes as the
//! `arguments_json` of an `InvokeTool`, through everything the supervisor
//! does with them before a handler touches the database — the UTF-8 the
//! wire guarantees, the size ceiling, the blank-means-`{}` JSON parse,
//! `tools::schema::validate` against the schema of every registered tool,
//! and the typed readers of `tools::args` over every property the schemas
//! name and every key the arguments carry. Must never panic; refusals are
//! typed and name a `$`-rooted path.

use genesis_supervisor::ToolRegistry;
use genesis_supervisor::service::MAX_TOOL_ARGUMENTS_BYTES;
use genesis_supervisor::tools::{ToolError, args, schema};
use serde_json::Value;

/// What the supervisor made of one input.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not UTF-8: a protobuf string field cannot carry it at all.
    NotUtf8,
    /// Over `MAX_TOOL_ARGUMENTS_BYTES`: refused before parsing.
    TooLarge,
    /// Not JSON: the in-band `INVALID_ARGUMENTS` error.
    NotJson,
    /// Parsed; the tools whose schema accepts the value, by name.
    Parsed { accepted_by: Vec<&'static str> },
}

/// A typed reader's refusal: `INVALID_ARGUMENTS`, naming `$.field` (or an
/// element of it).
fn check_refusal(err: &ToolError, field: &str) {
    assert_eq!(err.code, args::INVALID, "{err:?}");
    assert!(
        err.message.starts_with(&format!("$.{field}")),
        "refusal of {field} names another path: {}",
        err.message
    );
}

/// Every typed reader over `field` of `value`: each either reads or refuses
/// precisely, and what it reads obeys its contract.
fn read_field(value: &Value, field: &str) {
    match args::required_str(value, field) {
        Ok(s) => assert!(!s.trim().is_empty()),
        Err(e) => check_refusal(&e, field),
    }
    match args::optional_str(value, field) {
        Ok(Some(s)) => assert!(!s.trim().is_empty()),
        Ok(None) => assert!(value.get(field).is_none_or(Value::is_null)),
        Err(e) => check_refusal(&e, field),
    }
    match args::required_uuid(value, field) {
        Ok(id) => assert_eq!(args::optional_uuid(value, field), Ok(Some(id))),
        Err(e) => check_refusal(&e, field),
    }
    if let Err(e) = args::optional_uuid(value, field) {
        check_refusal(&e, field);
    }
    match args::limit(value, field, 10, 1, 50) {
        Ok(n) => assert!((1..=50).contains(&n)),
        Err(e) => check_refusal(&e, field),
    }
    match args::string_list(value, field) {
        Ok(items) => {
            let given = value
                .get(field)
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            assert_eq!(items.len(), given);
        }
        Err(e) => check_refusal(&e, field),
    }
}

/// Run one input.
pub fn run(data: &[u8]) -> Verdict {
    let Ok(text) = std::str::from_utf8(data) else {
        return Verdict::NotUtf8;
    };
    if text.len() > MAX_TOOL_ARGUMENTS_BYTES {
        return Verdict::TooLarge;
    }
    // As `AgentPodService::invoke` reads it: blank is an empty object.
    let source = if text.trim().is_empty() { "{}" } else { text };
    let Ok(value) = serde_json::from_str::<Value>(source) else {
        return Verdict::NotJson;
    };

    let registry = ToolRegistry::standard();
    let mut accepted_by = Vec::new();
    let mut fields: Vec<String> = Vec::new();
    for name in registry.names() {
        let tool = registry.get(name).expect("a listed tool is registered");
        let tool_schema = tool.schema();
        match schema::validate(&tool_schema, &value) {
            Ok(()) => {
                // Every tool takes an object: nothing else may pass.
                assert!(value.is_object(), "{name} accepted {value}");
                accepted_by.push(name);
            }
            Err(e) => {
                assert!(e.path.starts_with('$'), "{name}: path {:?}", e.path);
                assert!(!e.problem.is_empty(), "{name}: a refusal without a problem");
                assert_eq!(e.to_string(), format!("{}: {}", e.path, e.problem));
            }
        }
        // Deterministic: the same value gets the same verdict.
        assert_eq!(
            schema::validate(&tool_schema, &value).is_ok(),
            accepted_by.last() == Some(&name)
        );
        if let Some(props) = tool_schema.get("properties").and_then(Value::as_object) {
            fields.extend(props.keys().cloned());
        }
    }
    if let Some(obj) = value.as_object() {
        fields.extend(obj.keys().take(64).cloned());
    }
    fields.sort();
    fields.dedup();
    for field in &fields {
        read_field(&value, field);
    }
    Verdict::Parsed { accepted_by }
}
