//! The `llm_response` and `tool_args` fuzz bodies (`fuzz/bodies/`), run as
//! regular tests so they cannot rot without cargo-fuzz: every committed seed
//! under `fuzz/corpus/<target>/` plus a few hundred random inputs, asserting
//! no panic and `MalformedResponse` for the bodies that are not the wire
//! format. Must never hold checks the fuzz targets lack.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

#[path = "../../../fuzz/seeds.rs"]
mod seeds;

#[path = "../../../fuzz/bodies/llm_response.rs"]
mod llm_response;

#[path = "../../../fuzz/bodies/tool_args.rs"]
mod tool_args;

use seeds::{corpus, seed};
use std::time::Duration;

use genesis_llm::{LlmError, parse_retry_after};
use proptest::prelude::*;
use reqwest::header::{HeaderMap, HeaderValue};

fn malformed(r: &Result<genesis_llm::ChatResponse, LlmError>) -> bool {
    matches!(r, Err(LlmError::MalformedResponse { detail }) if !detail.is_empty())
}

#[test]
fn every_llm_response_seed_runs_without_panicking() {
    for (name, data) in corpus("llm_response", 20) {
        let _ = std::panic::catch_unwind(|| llm_response::run(&data))
            .unwrap_or_else(|_| panic!("llm_response panicked on seed {name}"));
    }
}

#[test]
fn llm_response_seeds_parse_or_are_malformed() {
    let seeds = corpus("llm_response", 20);
    let a = llm_response::run(seed(&seeds, "-anthropic-ok"));
    let r = a.anthropic.unwrap();
    assert_eq!(r.served_model, "claude-opus-4-8");
    assert_eq!(r.tool_calls.len(), 1);
    assert!(
        malformed(&a.openai),
        "an Anthropic body is not an OpenAI one"
    );
    let o = llm_response::run(seed(&seeds, "-openai-ok"));
    assert_eq!(o.openai.unwrap().tool_calls[0].arguments["message"], "hi");
    for suffix in [
        "-anthropic-truncated",
        "-anthropic-no-model",
        "-anthropic-content-not-array",
        "-anthropic-block-no-type",
        "-anthropic-tool-input-array",
        "-anthropic-negative-usage",
        "-anthropic-float-usage",
        "-non-utf8",
        "-empty",
        "-deep-array-200",
    ] {
        assert!(
            malformed(&llm_response::run(seed(&seeds, suffix)).anthropic),
            "{suffix}"
        );
    }
    for suffix in [
        "-openai-truncated",
        "-openai-no-choices",
        "-openai-args-not-json",
        "-openai-args-array",
        "-openai-content-number",
        "-openai-tool-calls-object",
        "-openai-no-usage",
    ] {
        assert!(
            malformed(&llm_response::run(seed(&seeds, suffix)).openai),
            "{suffix}"
        );
    }
    let blank = llm_response::run(seed(&seeds, "-openai-args-blank"))
        .openai
        .unwrap();
    assert_eq!(blank.tool_calls[0].arguments, serde_json::json!({}));
}

#[test]
fn an_absurd_retry_hint_is_no_hint_instead_of_a_panic() {
    for (name, value) in [
        ("retry-after-ms", "1e300"),
        ("retry-after", "1e300"),
        ("retry-after", "1e20"),
    ] {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_static(value));
        assert_eq!(
            parse_retry_after(&headers, std::time::SystemTime::now()),
            None,
            "{name}: {value}"
        );
    }
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", HeaderValue::from_static("1.5"));
    assert_eq!(
        parse_retry_after(&headers, std::time::SystemTime::now()),
        Some(Duration::from_millis(1500))
    );
}

#[test]
fn every_tool_args_seed_runs_without_panicking() {
    for (name, data) in corpus("tool_args", 20) {
        std::panic::catch_unwind(|| tool_args::run(&data))
            .unwrap_or_else(|_| panic!("tool_args panicked on seed {name}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_the_llm_response_body(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = llm_response::run(&data);
    }

    #[test]
    fn random_json_ish_text_never_panics_the_llm_response_body(text in "[\\[\\]{}\":,0-9a-z_ .eE+-]{0,256}") {
        let _ = llm_response::run(text.as_bytes());
    }

    #[test]
    fn random_bytes_never_panic_the_tool_args_body(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        tool_args::run(&data);
    }

    #[test]
    fn random_json_ish_text_never_panics_the_tool_args_body(text in "[\\[\\]{}\":,0-9a-zA-Z .eE+-]{0,256}") {
        tool_args::run(text.as_bytes());
    }
}
