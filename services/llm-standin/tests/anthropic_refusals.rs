//! Every refusal rule of the Messages API stand-in, one test each: the
//! status, the `{"type":"error","error":{…}}` shape and the message.

mod common;

use common::{
    ANTHROPIC_HEADERS, KEY, anthropic, anthropic_body, assert_anthropic_error, post_raw, standin,
};
use genesis_llm_standin::{Endpoint, Reply, StandIn};
use serde_json::{Value, json};

fn tool(name: &str) -> Value {
    json!({"name": name, "description": "d", "input_schema": {"type": "object", "properties": {}}})
}

fn with(mut body: Value, key: &str, value: Value) -> Value {
    body[key] = value;
    body
}

/// user → assistant(tool_use ids) → `answer` as the user's content.
fn tool_round(ids: &[&str], answer: Value) -> Value {
    let uses: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type": "tool_use", "id": id, "name": "lookup", "input": {}}))
        .collect();
    with(
        with(anthropic_body(), "tools", json!([tool("lookup")])),
        "messages",
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": uses},
            {"role": "user", "content": answer}
        ]),
    )
}

#[tokio::test]
async fn a_valid_tool_conversation_is_answered() {
    let s = standin().await;
    let body = tool_round(
        &["toolu_a", "toolu_b"],
        json!([
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "2"},
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": [{"type": "text", "text": "1"}], "is_error": false},
            {"type": "text", "text": "and now?"}
        ]),
    );
    let body = with(
        body,
        "system",
        json!([{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]),
    );
    let (status, answer) = anthropic(&s, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "message");
}

#[tokio::test]
async fn missing_api_key_is_401() {
    let s = standin().await;
    let got = post_raw(
        &s,
        "/v1/messages",
        &[
            ("anthropic-version", "2023-06-01"),
            ("content-type", "application/json"),
        ],
        &anthropic_body().to_string(),
    )
    .await;
    assert_anthropic_error(
        &(got.0, got.2),
        401,
        "authentication_error",
        "x-api-key header is required",
    );
}

#[tokio::test]
async fn wrong_api_key_is_401() {
    let s = standin().await;
    let got = post_raw(
        &s,
        "/v1/messages",
        &[
            ("x-api-key", "sk-wrong"),
            ("anthropic-version", "2023-06-01"),
            ("content-type", "application/json"),
        ],
        &anthropic_body().to_string(),
    )
    .await;
    assert_anthropic_error(
        &(got.0, got.2),
        401,
        "authentication_error",
        "invalid x-api-key",
    );
}

#[tokio::test]
async fn a_bearer_token_is_not_an_anthropic_key() {
    let s = standin().await;
    let bearer = format!("Bearer {KEY}");
    let got = post_raw(
        &s,
        "/v1/messages",
        &[
            ("authorization", bearer.as_str()),
            ("anthropic-version", "2023-06-01"),
            ("content-type", "application/json"),
        ],
        &anthropic_body().to_string(),
    )
    .await;
    assert_anthropic_error(
        &(got.0, got.2),
        401,
        "authentication_error",
        "x-api-key header is required",
    );
}

#[tokio::test]
async fn missing_anthropic_version_is_400() {
    let s = standin().await;
    let got = post_raw(
        &s,
        "/v1/messages",
        &[("x-api-key", KEY), ("content-type", "application/json")],
        &anthropic_body().to_string(),
    )
    .await;
    assert_anthropic_error(
        &(got.0, got.2),
        400,
        "invalid_request_error",
        "anthropic-version: header is required",
    );
}

#[tokio::test]
async fn unknown_anthropic_version_is_400() {
    let s = standin().await;
    let got = post_raw(
        &s,
        "/v1/messages",
        &[
            ("x-api-key", KEY),
            ("anthropic-version", "2024-99-99"),
            ("content-type", "application/json"),
        ],
        &anthropic_body().to_string(),
    )
    .await;
    assert_anthropic_error(
        &(got.0, got.2),
        400,
        "invalid_request_error",
        "unknown version '2024-99-99'",
    );
}

#[tokio::test]
async fn non_json_content_type_is_400() {
    let s = standin().await;
    let got = post_raw(
        &s,
        "/v1/messages",
        &[
            ("x-api-key", KEY),
            ("anthropic-version", "2023-06-01"),
            ("content-type", "text/plain"),
        ],
        &anthropic_body().to_string(),
    )
    .await;
    assert_anthropic_error(
        &(got.0, got.2),
        400,
        "invalid_request_error",
        "application/json",
    );
}

#[tokio::test]
async fn a_body_that_is_not_json_is_400() {
    let s = standin().await;
    let got = post_raw(&s, "/v1/messages", &ANTHROPIC_HEADERS, "{\"model\": ").await;
    assert_anthropic_error(
        &(got.0, got.2),
        400,
        "invalid_request_error",
        "not valid JSON",
    );
}

#[tokio::test]
async fn an_unknown_top_level_field_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(anthropic_body(), "max_completion_tokens", json!(5)),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "max_completion_tokens: Extra inputs are not permitted",
    );
}

#[tokio::test]
async fn a_missing_model_is_400() {
    let s = standin().await;
    let mut body = anthropic_body();
    body.as_object_mut().expect("object").remove("model");
    assert_anthropic_error(
        &anthropic(&s, &body).await,
        400,
        "invalid_request_error",
        "model: Field required",
    );
}

#[tokio::test]
async fn an_empty_model_is_400() {
    let s = standin().await;
    let got = anthropic(&s, &with(anthropic_body(), "model", json!(""))).await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "model: String should have at least 1 character",
    );
}

#[tokio::test]
async fn an_unknown_model_is_404_when_models_are_listed() {
    let s = StandIn::builder()
        .key(KEY)
        .known_models(["claude-sonnet-4-5"])
        .start()
        .await
        .expect("start");
    let got = anthropic(&s, &with(anthropic_body(), "model", json!("claude-nope"))).await;
    assert_anthropic_error(&got, 404, "not_found_error", "model: claude-nope");
    assert_eq!(anthropic(&s, &anthropic_body()).await.0, 200);
}

#[tokio::test]
async fn a_missing_max_tokens_is_400() {
    let s = standin().await;
    let mut body = anthropic_body();
    body.as_object_mut().expect("object").remove("max_tokens");
    assert_anthropic_error(
        &anthropic(&s, &body).await,
        400,
        "invalid_request_error",
        "max_tokens: Field required",
    );
}

#[tokio::test]
async fn a_zero_max_tokens_is_400() {
    let s = standin().await;
    let got = anthropic(&s, &with(anthropic_body(), "max_tokens", json!(0))).await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "max_tokens: Input should be greater than or equal to 1",
    );
}

#[tokio::test]
async fn a_non_integer_max_tokens_is_400() {
    let s = standin().await;
    let got = anthropic(&s, &with(anthropic_body(), "max_tokens", json!("1024"))).await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "max_tokens: Input should be a valid integer",
    );
}

#[tokio::test]
async fn a_streaming_request_is_400() {
    let s = standin().await;
    let got = anthropic(&s, &with(anthropic_body(), "stream", json!(true))).await;
    assert_anthropic_error(&got, 400, "invalid_request_error", "stream:");
}

#[tokio::test]
async fn a_temperature_above_one_is_400() {
    let s = standin().await;
    let got = anthropic(&s, &with(anthropic_body(), "temperature", json!(1.5))).await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "temperature: Input should be less than or equal to 1",
    );
}

#[tokio::test]
async fn missing_messages_is_400() {
    let s = standin().await;
    let mut body = anthropic_body();
    body.as_object_mut().expect("object").remove("messages");
    assert_anthropic_error(
        &anthropic(&s, &body).await,
        400,
        "invalid_request_error",
        "messages: Field required",
    );
}

#[tokio::test]
async fn empty_messages_is_400() {
    let s = standin().await;
    let got = anthropic(&s, &with(anthropic_body(), "messages", json!([]))).await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "messages: at least one message is required",
    );
}

#[tokio::test]
async fn a_system_role_message_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "messages",
            json!([{"role": "system", "content": "x"}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "messages.0.role: Input should be 'user' or 'assistant'",
    );
}

#[tokio::test]
async fn a_first_assistant_message_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "messages",
            json!([{"role": "assistant", "content": "hi"}, {"role": "user", "content": "x"}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "first message must use the \"user\" role",
    );
}

#[tokio::test]
async fn two_user_messages_in_a_row_are_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "messages",
            json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "roles must alternate between \"user\" and \"assistant\"",
    );
}

#[tokio::test]
async fn an_empty_text_block_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "messages",
            json!([{"role": "user", "content": [{"type": "text", "text": ""}]}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "messages.0.content.0.text: text content blocks must be non-empty",
    );
}

#[tokio::test]
async fn an_unanswered_tool_use_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &tool_round(
            &["toolu_a", "toolu_b"],
            json!([
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "1"}
            ]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_b",
    );
}

#[tokio::test]
async fn a_tool_use_in_the_last_message_is_400() {
    let s = standin().await;
    let body = with(
        with(anthropic_body(), "tools", json!([tool("lookup")])),
        "messages",
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {}}]}
        ]),
    );
    assert_anthropic_error(
        &anthropic(&s, &body).await,
        400,
        "invalid_request_error",
        "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_a",
    );
}

#[tokio::test]
async fn a_tool_result_after_text_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &tool_round(
            &["toolu_a"],
            json!([
                {"type": "text", "text": "here you go"},
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "1"}
            ]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message",
    );
}

#[tokio::test]
async fn a_tool_result_for_an_unknown_id_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &tool_round(
            &["toolu_a"],
            json!([
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "1"},
                {"type": "tool_result", "tool_use_id": "toolu_zzz", "content": "2"}
            ]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_zzz",
    );
}

#[tokio::test]
async fn a_tool_result_without_a_previous_tool_use_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "messages",
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "1"}]}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "unexpected `tool_use_id` found in `tool_result` blocks: toolu_a",
    );
}

#[tokio::test]
async fn a_reused_tool_use_id_is_400() {
    let s = standin().await;
    let body = with(
        with(anthropic_body(), "tools", json!([tool("lookup")])),
        "messages",
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "1"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "1"}]}
        ]),
    );
    assert_anthropic_error(
        &anthropic(&s, &body).await,
        400,
        "invalid_request_error",
        "messages.3.content.0: `tool_use` ids must be unique",
    );
}

#[tokio::test]
async fn a_tool_use_id_with_bad_characters_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &tool_round(
            &["call.1"],
            json!([
                {"type": "tool_result", "tool_use_id": "call.1", "content": "1"}
            ]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "messages.1.content.0.tool_use.id: String should match pattern",
    );
}

#[tokio::test]
async fn a_tool_use_input_that_is_not_an_object_is_400() {
    let s = standin().await;
    let body = with(
        with(anthropic_body(), "tools", json!([tool("lookup")])),
        "messages",
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": "{}"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "1"}]}
        ]),
    );
    assert_anthropic_error(
        &anthropic(&s, &body).await,
        400,
        "invalid_request_error",
        "messages.1.content.0.tool_use.input: Input should be a valid dictionary",
    );
}

#[tokio::test]
async fn a_tool_use_block_from_the_user_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "messages",
            json!([{"role": "user", "content": [{"type": "tool_use", "id": "toolu_a", "name": "x", "input": {}}]}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "`tool_use` blocks are only allowed in assistant messages",
    );
}

#[tokio::test]
async fn a_tool_result_block_from_the_assistant_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "messages",
            json!([
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "1"}]}
            ]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "`tool_result` blocks are only allowed in user messages",
    );
}

#[tokio::test]
async fn an_unknown_block_type_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "messages",
            json!([{"role": "user", "content": [{"type": "function_call", "x": 1}]}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "Input tag 'function_call' found using 'type'",
    );
}

#[tokio::test]
async fn a_tool_name_with_a_dot_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(anthropic_body(), "tools", json!([tool("soa.send")])),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'",
    );
}

#[tokio::test]
async fn a_tool_name_of_65_characters_is_400() {
    let s = standin().await;
    let long = "a".repeat(65);
    let got = anthropic(
        &s,
        &with(anthropic_body(), "tools", json!([tool("ok"), tool(&long)])),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "tools.1.custom.name: String should match pattern",
    );
    let ok = anthropic(
        &s,
        &with(anthropic_body(), "tools", json!([tool(&"a".repeat(64))])),
    )
    .await;
    assert_eq!(ok.0, 200, "64 characters are allowed: {}", ok.1);
}

#[tokio::test]
async fn a_tool_without_input_schema_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "tools",
            json!([{"name": "x", "description": "d"}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "tools.0.custom.input_schema: Field required",
    );
}

#[tokio::test]
async fn a_tool_schema_that_is_not_an_object_schema_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "tools",
            json!([{"name": "x", "input_schema": {"type": "string"}}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "tools.0.custom.input_schema.type: Input should be 'object'",
    );
}

#[tokio::test]
async fn duplicate_tool_names_are_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(anthropic_body(), "tools", json!([tool("x"), tool("x")])),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "tools: Tool names must be unique.",
    );
}

#[tokio::test]
async fn a_system_that_is_a_number_is_400() {
    let s = standin().await;
    let got = anthropic(&s, &with(anthropic_body(), "system", json!(42))).await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "system: Input should be a valid string or a list of text blocks",
    );
}

#[tokio::test]
async fn a_system_block_that_is_not_text_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "system",
            json!([{"type": "image", "source": {}}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "system.0.type: Input should be 'text'",
    );
}

#[tokio::test]
async fn a_cache_control_that_is_not_ephemeral_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "system",
            json!([{"type": "text", "text": "s", "cache_control": {"type": "persistent"}}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "system.0.cache_control.type: Input should be 'ephemeral'",
    );
}

#[tokio::test]
async fn a_cache_control_ttl_other_than_5m_or_1h_is_400() {
    let s = standin().await;
    let got = anthropic(
        &s,
        &with(
            anthropic_body(),
            "system",
            json!([{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "2h"}}]),
        ),
    )
    .await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "system.0.cache_control.ttl: Input should be '5m' or '1h'",
    );
}

#[tokio::test]
async fn a_cache_control_with_an_extra_key_is_400() {
    let s = standin().await;
    let mut t = tool("x");
    t["cache_control"] = json!({"type": "ephemeral", "scope": "org"});
    let got = anthropic(&s, &with(anthropic_body(), "tools", json!([t]))).await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "tools.0.custom.cache_control.scope: Extra inputs are not permitted",
    );
}

#[tokio::test]
async fn five_cache_control_blocks_are_400_and_four_are_fine() {
    let s = standin().await;
    let cached = |n: usize| -> Value {
        let blocks: Vec<Value> = (0..n)
            .map(|i| json!({"type": "text", "text": format!("part {i}"), "cache_control": {"type": "ephemeral"}}))
            .collect();
        with(
            anthropic_body(),
            "messages",
            json!([{"role": "user", "content": blocks}]),
        )
    };
    let got = anthropic(&s, &cached(5)).await;
    assert_anthropic_error(
        &got,
        400,
        "invalid_request_error",
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    );
    let ok = anthropic(&s, &cached(4)).await;
    assert_eq!(ok.0, 200, "{}", ok.1);
}

#[tokio::test]
async fn a_tool_choice_naming_an_unknown_tool_is_400() {
    let s = standin().await;
    let body = with(
        with(anthropic_body(), "tools", json!([tool("x")])),
        "tool_choice",
        json!({"type": "tool", "name": "y"}),
    );
    assert_anthropic_error(
        &anthropic(&s, &body).await,
        400,
        "invalid_request_error",
        "tool_choice.tool.name",
    );
}

#[tokio::test]
async fn an_unknown_path_is_404() {
    let s = standin().await;
    let got = post_raw(&s, "/v1/messages/batches", &ANTHROPIC_HEADERS, "{}").await;
    assert_anthropic_error(&(got.0, got.2), 404, "not_found_error", "Not Found");
}

#[tokio::test]
async fn a_refused_request_does_not_consume_the_queued_answer() {
    let s = standin().await;
    s.push_anthropic(Reply::text("scripted"));
    let refused = anthropic(&s, &with(anthropic_body(), "max_tokens", json!(0))).await;
    assert_eq!(refused.0, 400);
    assert_eq!(s.pending(Endpoint::Anthropic), 1);
    let (status, answer) = anthropic(&s, &anthropic_body()).await;
    assert_eq!(status, 200);
    assert_eq!(answer["content"][0]["text"], "scripted");
    assert_eq!(s.pending(Endpoint::Anthropic), 0);
}
