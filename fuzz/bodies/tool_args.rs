//! Body of the `tool_args` fuzz target, shared with genesis-llm's
//! `tests/fuzz_corpus.rs`: arbitrary JSON as tool-call arguments — through
//! genesis-core's payload check, as the `input` of an Anthropic `tool_use`
//! block and the `arguments` string of an OpenAI tool call (the providers'
//! argument handling), through a scripted-provider rule, and as a mode's
//! budget override (`BudgetOverride::from_json_str`). Must never panic;
//! refusals are typed.

use genesis_core::validate::{MAX_EVENT_PAYLOAD_BYTES, validate_payload};
use genesis_core::{BudgetEnvelope, BudgetOverride, CoreError};
use genesis_llm::{LlmError, Script, parse_anthropic_response, parse_openai_response};
use serde_json::{Value, json};

/// Run one input.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);

    // A mode's budget override: typed refusal, or a value that round-trips.
    match BudgetOverride::from_json_str(&text) {
        Ok(o) => {
            assert_eq!(BudgetOverride::from_json_value(&o.to_json()), Ok(o));
            let _ = o.apply_to(&BudgetEnvelope::STANDING_DEFAULT);
        }
        Err(CoreError::InvalidBudgetJson { .. }) => {}
        Err(other) => panic!("budget override refused untyped: {other:?}"),
    }

    // OpenAI: the text is the arguments string, verbatim.
    let body = json!({
        "model": "m",
        "choices": [{"message": {"content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "soa_send_message", "arguments": text}}
        ]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}
    });
    let wire = serde_json::to_vec(&body).expect("a json! value serialises");
    match parse_openai_response(&wire) {
        Ok(r) => {
            let args = &r.tool_calls[0].arguments;
            assert!(args.is_object());
            if !text.trim().is_empty() {
                assert_eq!(
                    Some(args),
                    serde_json::from_str::<Value>(&text).ok().as_ref()
                );
            }
        }
        Err(LlmError::MalformedResponse { .. }) => {
            let parsed = serde_json::from_str::<Value>(&text);
            assert!(
                !text.trim().is_empty() && parsed.as_ref().map_or(true, |v| !v.is_object()),
                "object arguments were refused"
            );
        }
        Err(other) => panic!("openai arguments refused untyped: {other:?}"),
    }

    let Ok(args) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    match validate_payload("arguments", &args, MAX_EVENT_PAYLOAD_BYTES) {
        Ok(()) | Err(CoreError::InvalidArgument { .. }) => {}
        Err(other) => panic!("argument payload refused untyped: {other:?}"),
    }

    // Anthropic: the value is the tool_use input.
    let body = json!({
        "model": "m",
        "content": [{"type": "tool_use", "id": "t1", "name": "soa_send_message", "input": args}],
        "usage": {"input_tokens": 1, "output_tokens": 1}
    });
    let wire = serde_json::to_vec(&body).expect("a json! value serialises");
    match parse_anthropic_response(&wire) {
        Ok(r) => assert_eq!(r.tool_calls[0].arguments, args),
        // Refused: not an object, or nested past the parser's depth limit
        // once wrapped in the response envelope.
        Err(LlmError::MalformedResponse { .. }) => {}
        Err(other) => panic!("anthropic input refused untyped: {other:?}"),
    }

    // A scripted rule emitting these arguments: accepted only as an object.
    let is_object = args.is_object();
    let script = json!({"rules": [{"turns": [[{"name": "soa_send_message", "arguments": args}]]}]});
    if Script::from_json(&script.to_string()).is_ok() {
        assert!(is_object, "a script rule accepted non-object arguments");
    }
}
