//! Every refusal rule of the Chat Completions stand-in, one test each: the
//! status, the `{"error":{message,type,param,code}}` shape and the message.

mod common;

use common::{KEY, assert_openai_error, openai, openai_body, post_raw, standin};
use genesis_llm_standin::StandIn;
use serde_json::{Value, json};

fn with(mut body: Value, key: &str, value: Value) -> Value {
    body[key] = value;
    body
}

fn function(name: &str) -> Value {
    json!({"type": "function", "function": {"name": name, "description": "d",
        "parameters": {"type": "object", "properties": {}}}})
}

fn call(id: &str, arguments: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "lookup", "arguments": arguments}})
}

fn messages(list: Value) -> Value {
    with(
        with(openai_body(), "tools", json!([function("lookup")])),
        "messages",
        list,
    )
}

#[tokio::test]
async fn answered_parallel_tool_calls_are_accepted() {
    let s = standin().await;
    let body = messages(json!([
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [
            call("call_a", json!("{\"q\":\"a\"}")),
            call("call_b", json!("{\n  \"q\": \"b\"\n}"))
        ]},
        {"role": "tool", "tool_call_id": "call_b", "content": "2"},
        {"role": "tool", "tool_call_id": "call_a", "content": "1"},
        {"role": "user", "content": "next"}
    ]));
    let (status, answer) = openai(&s, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "chat.completion");
}

#[tokio::test]
async fn a_missing_authorization_is_401() {
    let s = standin().await;
    let got = post_raw(
        &s,
        "/v1/chat/completions",
        &[("content-type", "application/json")],
        &openai_body().to_string(),
    )
    .await;
    assert_openai_error(
        &(got.0, got.2),
        401,
        "You didn't provide an API key",
        None,
        None,
    );
}

#[tokio::test]
async fn a_wrong_key_is_401_invalid_api_key_and_masked() {
    let s = standin().await;
    let got = post_raw(
        &s,
        "/v1/chat/completions",
        &[
            ("authorization", "Bearer sk-wrong-key-123456789"),
            ("content-type", "application/json"),
        ],
        &openai_body().to_string(),
    )
    .await;
    let got = (got.0, got.2);
    assert_openai_error(
        &got,
        401,
        "Incorrect API key provided: sk-",
        None,
        Some("invalid_api_key"),
    );
    let message = got.1["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.contains("sk-wrong-key-123456789"), "{message}");
    assert!(message.contains("6789."), "{message}");
}

#[tokio::test]
async fn an_x_api_key_is_not_an_openai_key() {
    let s = standin().await;
    let got = post_raw(
        &s,
        "/v1/chat/completions",
        &[("x-api-key", KEY), ("content-type", "application/json")],
        &openai_body().to_string(),
    )
    .await;
    assert_openai_error(
        &(got.0, got.2),
        401,
        "You didn't provide an API key",
        None,
        None,
    );
}

#[tokio::test]
async fn a_body_that_is_not_json_is_400() {
    let s = standin().await;
    let bearer = format!("Bearer {KEY}");
    let got = post_raw(
        &s,
        "/v1/chat/completions",
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
        ],
        "model=gpt-4o",
    )
    .await;
    assert_openai_error(
        &(got.0, got.2),
        400,
        "We could not parse the JSON body of your request.",
        None,
        None,
    );
}

#[tokio::test]
async fn a_non_json_content_type_is_400() {
    let s = standin().await;
    let bearer = format!("Bearer {KEY}");
    let got = post_raw(
        &s,
        "/v1/chat/completions",
        &[
            ("authorization", &bearer),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
        &openai_body().to_string(),
    )
    .await;
    assert_openai_error(
        &(got.0, got.2),
        400,
        "We could not parse the JSON body of your request.",
        None,
        None,
    );
}

#[tokio::test]
async fn an_unknown_argument_is_400() {
    let s = standin().await;
    let got = openai(&s, &with(openai_body(), "system", json!("x"))).await;
    assert_openai_error(
        &got,
        400,
        "Unrecognized request argument supplied: system",
        None,
        None,
    );
}

#[tokio::test]
async fn a_missing_model_is_400() {
    let s = standin().await;
    let mut body = openai_body();
    body.as_object_mut().expect("object").remove("model");
    assert_openai_error(
        &openai(&s, &body).await,
        400,
        "you must provide a model parameter",
        None,
        None,
    );
}

#[tokio::test]
async fn an_unknown_model_is_404_when_models_are_listed() {
    let s = StandIn::builder()
        .key(KEY)
        .known_models(["gpt-4o"])
        .start()
        .await
        .expect("start");
    let got = openai(&s, &with(openai_body(), "model", json!("gpt-nope"))).await;
    assert_openai_error(
        &got,
        404,
        "The model `gpt-nope` does not exist or you do not have access to it.",
        None,
        Some("model_not_found"),
    );
    assert_eq!(openai(&s, &openai_body()).await.0, 200);
}

#[tokio::test]
async fn missing_messages_are_400() {
    let s = standin().await;
    let mut body = openai_body();
    body.as_object_mut().expect("object").remove("messages");
    assert_openai_error(
        &openai(&s, &body).await,
        400,
        "Missing required parameter: 'messages'.",
        Some("messages"),
        Some("missing_required_parameter"),
    );
}

#[tokio::test]
async fn empty_messages_are_400() {
    let s = standin().await;
    let got = openai(&s, &with(openai_body(), "messages", json!([]))).await;
    assert_openai_error(
        &got,
        400,
        "Invalid 'messages': empty array.",
        Some("messages"),
        Some("empty_array"),
    );
}

#[tokio::test]
async fn an_unknown_role_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &with(
            openai_body(),
            "messages",
            json!([{"role": "human", "content": "x"}]),
        ),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Invalid value: 'human'. Supported values are:",
        Some("messages[0].role"),
        Some("invalid_value"),
    );
}

#[tokio::test]
async fn a_user_message_without_content_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &with(openai_body(), "messages", json!([{"role": "user"}])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Missing required parameter: 'messages[0].content'.",
        Some("messages[0].content"),
        Some("missing_required_parameter"),
    );
}

#[tokio::test]
async fn an_assistant_message_with_neither_content_nor_tool_calls_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &messages(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null},
            {"role": "user", "content": "y"}
        ])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Invalid value for 'content': expected a string, got null.",
        Some("messages.[1].content"),
        None,
    );
}

#[tokio::test]
async fn an_empty_tool_calls_array_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &messages(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "thinking", "tool_calls": []},
            {"role": "user", "content": "y"}
        ])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Invalid 'messages[1].tool_calls': empty array.",
        Some("messages[1].tool_calls"),
        Some("empty_array"),
    );
}

#[tokio::test]
async fn arguments_sent_as_an_object_are_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &messages(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [call("call_a", json!({"q": 1}))]},
            {"role": "tool", "tool_call_id": "call_a", "content": "1"}
        ])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string, but got an object instead.",
        Some("messages[1].tool_calls[0].function.arguments"),
        Some("invalid_type"),
    );
}

#[tokio::test]
async fn arguments_that_are_not_json_are_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &messages(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [call("call_a", json!("{q: 1"))]},
            {"role": "tool", "tool_call_id": "call_a", "content": "1"}
        ])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "the arguments are not valid JSON",
        Some("messages[1].tool_calls[0].function.arguments"),
        Some("invalid_value"),
    );
}

#[tokio::test]
async fn a_tool_call_that_is_not_a_function_is_400() {
    let s = standin().await;
    let mut c = call("call_a", json!("{}"));
    c["type"] = json!("code");
    let got = openai(
        &s,
        &messages(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [c]},
            {"role": "tool", "tool_call_id": "call_a", "content": "1"}
        ])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Invalid value: 'code'. Supported values are: 'function' and 'custom'.",
        Some("messages[1].tool_calls[0].type"),
        Some("invalid_value"),
    );
}

#[tokio::test]
async fn a_tool_call_answered_after_a_user_message_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &messages(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [call("call_a", json!("{}")), call("call_b", json!("{}"))]},
            {"role": "tool", "tool_call_id": "call_a", "content": "1"},
            {"role": "user", "content": "where is b?"},
            {"role": "tool", "tool_call_id": "call_b", "content": "2"}
        ])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_b",
        Some("messages.[1].role"),
        None,
    );
}

#[tokio::test]
async fn a_tool_call_never_answered_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &messages(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [call("call_a", json!("{}"))]}
        ])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "did not have response messages: call_a",
        Some("messages.[1].role"),
        None,
    );
}

#[tokio::test]
async fn a_tool_message_without_a_preceding_tool_call_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &messages(json!([
            {"role": "user", "content": "x"},
            {"role": "tool", "tool_call_id": "call_a", "content": "1"}
        ])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
        Some("messages.[1].role"),
        None,
    );
}

#[tokio::test]
async fn a_tool_message_answering_an_unknown_id_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &messages(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [call("call_a", json!("{}"))]},
            {"role": "tool", "tool_call_id": "call_a", "content": "1"},
            {"role": "tool", "tool_call_id": "call_zzz", "content": "2"}
        ])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
        Some("messages.[3].role"),
        None,
    );
}

#[tokio::test]
async fn a_tool_message_without_tool_call_id_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &messages(json!([
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [call("call_a", json!("{}"))]},
            {"role": "tool", "content": "1"}
        ])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Missing required parameter: 'messages[2].tool_call_id'.",
        Some("messages[2].tool_call_id"),
        Some("missing_required_parameter"),
    );
}

#[tokio::test]
async fn a_tool_that_is_not_a_function_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &with(openai_body(), "tools", json!([{"type": "retrieval"}])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Invalid value: 'retrieval'. Supported values are: 'function' and 'custom'.",
        Some("tools[0].type"),
        Some("invalid_value"),
    );
}

#[tokio::test]
async fn a_function_tool_without_function_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &with(openai_body(), "tools", json!([{"type": "function"}])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Missing required parameter: 'tools[0].function'.",
        Some("tools[0].function"),
        Some("missing_required_parameter"),
    );
}

#[tokio::test]
async fn a_function_name_with_a_space_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &with(openai_body(), "tools", json!([function("send message")])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "Invalid 'tools[0].function.name': string does not match pattern.",
        Some("tools[0].function.name"),
        Some("invalid_value"),
    );
}

#[tokio::test]
async fn a_function_name_of_65_characters_is_400() {
    let s = standin().await;
    let got = openai(
        &s,
        &with(openai_body(), "tools", json!([function(&"f".repeat(65))])),
    )
    .await;
    assert_openai_error(
        &got,
        400,
        "string too long. Expected a string with maximum length 64, but got a string with length 65 instead.",
        Some("tools[0].function.name"),
        Some("string_above_max_length"),
    );
}

#[tokio::test]
async fn function_parameters_that_are_not_an_object_schema_are_400() {
    let s = standin().await;
    let tool =
        json!({"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}});
    let got = openai(&s, &with(openai_body(), "tools", json!([tool]))).await;
    assert_openai_error(
        &got,
        400,
        "Invalid schema for function 'f': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"array\"'.",
        Some("tools[0].function.parameters"),
        Some("invalid_function_parameters"),
    );
}

#[tokio::test]
async fn function_parameters_that_are_a_string_are_400() {
    let s = standin().await;
    let tool = json!({"type": "function", "function": {"name": "f", "parameters": "{\"type\":\"object\"}"}});
    let got = openai(&s, &with(openai_body(), "tools", json!([tool]))).await;
    assert_openai_error(
        &got,
        400,
        "Invalid type for 'tools[0].function.parameters': expected an object, but got a string instead.",
        Some("tools[0].function.parameters"),
        Some("invalid_type"),
    );
}

#[tokio::test]
async fn max_tokens_and_max_completion_tokens_together_are_400() {
    let s = standin().await;
    let body = with(
        with(openai_body(), "max_tokens", json!(10)),
        "max_completion_tokens",
        json!(10),
    );
    assert_openai_error(
        &openai(&s, &body).await,
        400,
        "max_tokens and max_completion_tokens cannot both be set",
        Some("max_tokens"),
        None,
    );
}

#[tokio::test]
async fn max_tokens_on_a_reasoning_model_is_400() {
    let s = standin().await;
    for model in ["o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini"] {
        let body = with(
            with(openai_body(), "model", json!(model)),
            "max_tokens",
            json!(100),
        );
        assert_openai_error(
            &openai(&s, &body).await,
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            Some("max_tokens"),
            Some("unsupported_parameter"),
        );
        let body = with(
            with(openai_body(), "model", json!(model)),
            "max_completion_tokens",
            json!(100),
        );
        assert_eq!(
            openai(&s, &body).await.0,
            200,
            "{model} takes max_completion_tokens"
        );
    }
    let chat = with(
        with(openai_body(), "model", json!("gpt-4o")),
        "max_tokens",
        json!(100),
    );
    assert_eq!(openai(&s, &chat).await.0, 200, "gpt-4o takes max_tokens");
}

#[tokio::test]
async fn a_temperature_on_a_reasoning_model_is_400() {
    let s = standin().await;
    let body = with(
        with(openai_body(), "model", json!("o3")),
        "temperature",
        json!(0.2),
    );
    assert_openai_error(
        &openai(&s, &body).await,
        400,
        "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.",
        Some("temperature"),
        Some("unsupported_value"),
    );
}

#[tokio::test]
async fn a_zero_max_tokens_is_400() {
    let s = standin().await;
    let got = openai(&s, &with(openai_body(), "max_tokens", json!(0))).await;
    assert_openai_error(
        &got,
        400,
        "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead.",
        Some("max_tokens"),
        Some("integer_below_min_value"),
    );
}

#[tokio::test]
async fn a_temperature_above_two_is_400() {
    let s = standin().await;
    let got = openai(&s, &with(openai_body(), "temperature", json!(2.5))).await;
    assert_openai_error(
        &got,
        400,
        "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 2.5 instead.",
        Some("temperature"),
        Some("decimal_above_max_value"),
    );
}

#[tokio::test]
async fn a_streaming_request_is_400() {
    let s = standin().await;
    let got = openai(&s, &with(openai_body(), "stream", json!(true))).await;
    assert_openai_error(&got, 400, "stream:", Some("stream"), None);
}

#[tokio::test]
async fn an_unknown_path_is_404() {
    let s = standin().await;
    let bearer = format!("Bearer {KEY}");
    let got = post_raw(
        &s,
        "/v1/completions",
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
        ],
        "{}",
    )
    .await;
    assert_openai_error(
        &(got.0, got.2),
        404,
        "Invalid URL (POST /v1/completions)",
        None,
        None,
    );
}
