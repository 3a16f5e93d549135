//! Body of the `llm_response` fuzz target, shared with genesis-llm's
//! `tests/fuzz_corpus.rs`: arbitrary bytes as an Anthropic Messages and an
//! OpenAI chat completions response body through the providers' parsers,
//! and the first line as `Retry-After` / `retry-after-ms` hints. Must never
//! panic; a refused body is `LlmError::MalformedResponse`.

use genesis_llm::{LlmError, parse_anthropic_response, parse_openai_response, parse_retry_after};
use reqwest::header::{HeaderMap, HeaderValue};

/// What the two parsers answered.
#[derive(Debug)]
pub struct Parsed {
    pub anthropic: Result<genesis_llm::ChatResponse, LlmError>,
    pub openai: Result<genesis_llm::ChatResponse, LlmError>,
}

fn check(answer: &Result<genesis_llm::ChatResponse, LlmError>) {
    match answer {
        Ok(r) => {
            for call in &r.tool_calls {
                assert!(
                    call.arguments.is_object(),
                    "tool call arguments must be an object"
                );
            }
        }
        Err(LlmError::MalformedResponse { .. }) => {}
        Err(other) => panic!("a response body was refused with {other:?}"),
    }
}

/// Run one input through both parsers and the retry-hint reader.
pub fn run(data: &[u8]) -> Parsed {
    let parsed = Parsed {
        anthropic: parse_anthropic_response(data),
        openai: parse_openai_response(data),
    };
    check(&parsed.anthropic);
    check(&parsed.openai);
    let line = data.split(|b| *b == b'\n').next().unwrap_or_default();
    if let Ok(value) = HeaderValue::from_bytes(line) {
        for name in ["retry-after", "retry-after-ms"] {
            let mut headers = HeaderMap::new();
            headers.insert(name, value.clone());
            let _ = parse_retry_after(&headers, std::time::SystemTime::now());
        }
    }
    parsed
}
