#!/usr/bin/env python3
"""Writes the committed seed corpus under corpus/<target>/: a few dozen small
inputs per target, including truncated, oversized, deeply nested and
non-UTF-8 ones. Deterministic; re-run after changing it and commit the
result. The regular tests (tests/fuzz_corpus.rs in core, llm, proto,
supervisor and telemetry) run every file here through the same bodies the
fuzz targets use."""
import json, os, random

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20240611)

def write(target, items):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        if not name.startswith("crash-"):  # minimised crashes are kept
            os.remove(os.path.join(d, name))
    for i, (name, data) in enumerate(items):
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        with open(os.path.join(d, f"{i:02d}-{name}"), "wb") as f:
            f.write(data)

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def field(num, wire, payload=b""):
    return varint(num << 3 | wire) + payload

def ld(num, data):
    return field(num, 2, varint(len(data)) + data)

def nested(depth):
    m = b""
    for _ in range(depth):
        m = ld(1, m)
    return m

UUID = b"0b5e8f6e-3c1a-4f7e-9a57-2c1d3e4f5a6b"
proto = [
    ("empty", b""),
    ("selector-only", b"\x00"),
    ("claim-uuid", b"\x00" + ld(1, UUID)),
    ("two-strings", b"\x01" + ld(1, UUID) + ld(2, UUID)),
    ("varint-fields", b"\x02" + field(1, 0, varint(5)) + field(3, 0, varint(2**63))),
    ("truncated-length", b"\x03" + b"\x0a\xff\x01abc"),
    ("truncated-varint", b"\x04" + b"\x08\xff\xff"),
    ("varint-overflow", b"\x05" + b"\x08" + b"\xff" * 11),
    ("non-utf8-string", b"\x06" + ld(1, b"\xff\xfe\xc3\x28")),
    ("bad-wire-type-6", b"\x07" + bytes([0x0e, 0x01])),
    ("bad-wire-type-7", b"\x08" + bytes([0x0f, 0x01])),
    ("group-start-no-end", b"\x09" + field(1, 3)),
    ("field-zero", b"\x0a" + bytes([0x00, 0x01])),
    ("fixed64-truncated", b"\x0b" + field(2, 1, b"\x01\x02")),
    ("fixed32", b"\x0c" + field(2, 5, b"\x01\x02\x03\x04")),
    ("deep-nesting-64", b"\x0d" + nested(64)),
    ("deep-nesting-120", b"\x0e" + nested(120)),
    ("oversized-claimed-length", b"\x0f" + b"\x0a" + varint(1 << 40)),
    ("oversized-string", b"\x10" + ld(1, b"x" * 70000)),
    ("max-field-number", b"\x11" + field((1 << 29) - 1, 0, b"\x01")),
    ("timestamp-like", b"\x12" + field(1, 0, varint(2**64 - 1)) + field(2, 0, varint(2**32 - 1))),
    ("repeated-unknown", b"\x13" + b"".join(ld(n, b"v") for n in range(1, 40))),
    ("last-selector", bytes([74]) + ld(1, UUID)),
    ("selector-wraps", bytes([255]) + ld(1, UUID)),
]
for i in range(16):
    sel = rng.randrange(256)
    body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 48)))
    proto.append((f"random-{i}", bytes([sel]) + body))
write("proto_requests", proto)

def deep_array(n):
    return "[" * n + "]" * n

def deep_object(n):
    return '{"a":' * n + "1" + "}" * n

payloads = [
    ("empty-object", "{}"),
    ("empty-array", "[]"),
    ("null", "null"),
    ("scalar", "42"),
    ("string", '"hello"'),
    ("operator-message", json.dumps({"text": "deploy the thing", "messageId": "x"})),
    ("mission", json.dumps({"missionId": "m-1", "status": "blocked", "previous": "active"})),
    ("escalation", json.dumps({"resolution": "approve", "resolutionNotes": "ok", "attentionRequestId": "a"})),
    ("signal", json.dumps({"signalKind": "HumanRequest", "detail": {"k": [1, 2, 3]}})),
    ("nul-in-string", '{"text": "a\\u0000b"}'),
    ("nul-in-key", '{"a\\u0000": 1}'),
    ("lone-surrogate", '{"text": "\\ud800"}'),
    ("unicode-keys", json.dumps({"é": 1, "e": 2, "😀": 3, "Z": 4}, ensure_ascii=False)),
    ("duplicate-keys", '{"a": 1, "a": 2}'),
    ("big-numbers", '[18446744073709551615, -9223372036854775808, 1e308, -0.0, 5e-324]'),
    ("number-overflow", "[1e400]"),
    ("truncated-object", '{"text": "hel'),
    ("truncated-array", "[1, 2, "),
    ("trailing-garbage", "{} x"),
    ("bom", "\ufeff{}"),
    ("non-utf8", b'{"text": "\xff\xfe"}'),
    ("non-utf8-raw", b"\xc3\x28\xa0\xa1"),
    ("deep-array-100", deep_array(100)),
    ("deep-array-127", deep_array(127)),
    ("deep-array-200", deep_array(200)),
    ("deep-object-120", deep_object(120)),
    ("deep-object-300", deep_object(300)),
    ("oversized-70k", json.dumps({"text": "x" * 70000})),
    ("at-limit", json.dumps({"t": "y" * (64 * 1024 - 10)})),
    ("many-keys", json.dumps({f"k{i}": i for i in range(2000)})),
    ("whitespace-only", "   \n\t "),
]
write("event_payload", payloads)

anthropic_ok = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-8",
    "content": [{"type": "text", "text": "thinking"},
                {"type": "tool_use", "id": "tu_1", "name": "soa_send_message", "input": {"message": "hi"}}],
    "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 2},
}
openai_ok = {
    "id": "c1", "object": "chat.completion", "model": "gpt-4o",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "soa_send_message", "arguments": "{\"message\":\"hi\"}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1}},
}
def variant(base, **kw):
    d = json.loads(json.dumps(base))
    d.update(kw)
    return json.dumps(d)
a_text = json.dumps(anthropic_ok)
o_text = json.dumps(openai_ok)
llm = [
    ("anthropic-ok", a_text),
    ("openai-ok", o_text),
    ("anthropic-truncated", a_text[: len(a_text) // 2]),
    ("openai-truncated", o_text[: len(o_text) // 2]),
    ("anthropic-no-model", variant(anthropic_ok, model=None)),
    ("anthropic-content-not-array", variant(anthropic_ok, content={"type": "text"})),
    ("anthropic-block-no-type", variant(anthropic_ok, content=[{"text": "x"}])),
    ("anthropic-tool-input-array", variant(anthropic_ok, content=[{"type": "tool_use", "id": "t", "name": "n", "input": [1]}])),
    ("anthropic-negative-usage", variant(anthropic_ok, usage={"input_tokens": -1, "output_tokens": 1})),
    ("anthropic-float-usage", variant(anthropic_ok, usage={"input_tokens": 1.5, "output_tokens": 1})),
    ("anthropic-huge-usage", variant(anthropic_ok, usage={"input_tokens": 18446744073709551615, "output_tokens": 1e30})),
    ("anthropic-unknown-blocks", variant(anthropic_ok, content=[{"type": "thinking", "thinking": "x"}, {"type": "future"}])),
    ("anthropic-stop-other", variant(anthropic_ok, stop_reason="pause_turn")),
    ("openai-no-choices", variant(openai_ok, choices=[])),
    ("openai-args-not-json", variant(openai_ok, choices=[{"message": {"content": "x", "tool_calls": [{"id": "c", "function": {"name": "n", "arguments": "{oops"}}]}}])),
    ("openai-args-array", variant(openai_ok, choices=[{"message": {"tool_calls": [{"id": "c", "function": {"name": "n", "arguments": "[1,2]"}}]}}])),
    ("openai-args-blank", variant(openai_ok, choices=[{"message": {"tool_calls": [{"id": "c", "function": {"name": "n", "arguments": "  "}}]}}])),
    ("openai-content-number", variant(openai_ok, choices=[{"message": {"content": 7}}])),
    ("openai-tool-calls-object", variant(openai_ok, choices=[{"message": {"tool_calls": {}}}])),
    ("openai-no-usage", variant(openai_ok, usage=None)),
    ("openai-deep-args", variant(openai_ok, choices=[{"message": {"tool_calls": [{"id": "c", "function": {"name": "n", "arguments": deep_object(127)}}]}}])),
    ("deep-array-200", deep_array(200)),
    ("oversized-text", variant(anthropic_ok, content=[{"type": "text", "text": "z" * 100000}])),
    ("non-utf8", b'{"model": "\xff", "content": []}'),
    ("empty", b""),
    ("retry-after-seconds", "120\n" + a_text),
    ("retry-after-float", "1.5\n" + o_text),
    ("retry-after-huge-float", "1e300\n{}"),
    ("retry-after-negative", "-5\n{}"),
    ("retry-after-date", "Wed, 21 Oct 2015 07:28:00 GMT\n{}"),
    ("retry-after-far-date", "Fri, 31 Dec 9999 23:59:59 GMT\n{}"),
    ("retry-after-u64-max", "18446744073709551615\n{}"),
    ("retry-after-nan", "NaN\n{}"),
]
write("llm_response", llm)

tool = [
    ("object", json.dumps({"message": "hello"})),
    ("empty-object", "{}"),
    ("blank", "   "),
    ("empty", b""),
    ("array", "[1, 2, 3]"),
    ("string", '"just text"'),
    ("null", "null"),
    ("budget-ok", json.dumps({"maxTokens": 1000, "maxToolCalls": 5, "maxDollars": 0.5})),
    ("budget-all-axes", json.dumps({"maxTokens": 1, "maxOutputTokensPerTurn": 2, "maxToolCalls": 3, "maxWallSeconds": 4, "maxDollars": 5.5, "maxTurns": 6})),
    ("budget-nulls", json.dumps({"maxTokens": None, "maxDollars": None})),
    ("budget-zero", json.dumps({"maxTokens": 0})),
    ("budget-negative", json.dumps({"maxDollars": -1})),
    ("budget-float-int-axis", json.dumps({"maxTurns": 1.5})),
    ("budget-unknown-key", json.dumps({"maxtokens": 5})),
    ("budget-huge", '{"maxTokens": 18446744073709551616, "maxDollars": 1e308}'),
    ("budget-string", json.dumps({"maxTokens": "10"})),
    ("nul-in-string", '{"message": "a\\u0000"}'),
    ("lone-surrogate", '{"message": "\\udc00"}'),
    ("nested-args", json.dumps({"proposal": {"title": "t", "steps": [{"n": i} for i in range(50)]}})),
    ("deep-object-126", deep_object(126)),
    ("deep-object-200", deep_object(200)),
    ("deep-array-130", deep_array(130)),
    ("truncated", '{"message": "hel'),
    ("trailing", '{"a": 1} {"b": 2}'),
    ("non-utf8", b'{"message": "\xff"}'),
    ("template-placeholders", json.dumps({"message": "{{operator_text}} {{event}} {{turn}}"})),
    ("oversized", json.dumps({"message": "q" * 70000})),
    ("duplicate-keys", '{"a": 1, "a": {"b": 2}}'),
]
write("tool_args", tool)

config = [
    ("empty", b""),
    ("known-ints", "#0=1000\n#1=200\n#2=10"),
    ("unlimited", "AgentDispatcher:TickMaxTokens=unlimited\nAgentDispatcher:TickMaxDollars=UNLIMITED"),
    ("durations", "AgentDispatcher:PollingInterval=500ms\nAgentDispatcher:StandingAgentHeartbeatInterval=24h\nAgentDispatcher:WorksetDeadline=1d"),
    ("hhmmss", "AgentDispatcher:MaxBackoffInterval=00:30:00"),
    ("hhmmss-bad-minutes", "AgentDispatcher:MaxBackoffInterval=00:60:00"),
    ("hhmmss-huge-hours", "AgentDispatcher:MaxBackoffInterval=18446744073709551615:59:59"),
    ("days-overflow", "AgentDispatcher:WorksetDeadline=18446744073709551615d"),
    ("ms-max", "AgentDispatcher:TickBaseDelay=18446744073709551615ms"),
    ("zero-duration", "AgentDispatcher:LeaseTtl=0s"),
    ("negative", "AgentDispatcher:MaxAttempts=-1"),
    ("u32-overflow", "AgentDispatcher:MaxConsecutiveBlockedTurns=4294967296"),
    ("backoff-huge", "AgentDispatcher:StandingAgentIdleHeartbeatEnabled=false\nAgentDispatcher:BackoffFactor=1e308\nAgentDispatcher:TickBaseDelay=1s\nAgentDispatcher:MaxBackoffInterval=18446744073709551615s"),
    ("backoff-nan", "AgentDispatcher:BackoffFactor=NaN"),
    ("backoff-inf", "AgentDispatcher:BackoffFactor=inf"),
    ("backoff-tiny", "AgentDispatcher:StandingAgentIdleHeartbeatEnabled=FALSE\nAgentDispatcher:BackoffFactor=1e-300"),
    ("credit-huge", "AgentDispatcher:WeeklyCreditUsd=1e308\nAgentDispatcher:CreditEnforcementEnabled=true"),
    ("credit-negative", "AgentDispatcher:WeeklyCreditUsd=-5"),
    ("bools", "AgentDispatcher:EphemeralPod=TrUe\nAgentDispatcher:AutoBootstrap=yes"),
    ("unknown-keys", "Other:Setting=whatever\nnot a pair\n=\n==="),
    ("whitespace-values", "AgentDispatcher:MaxAttempts=  7  \n#3=\t30s "),
    ("unit-only", "#4=ms\n#4=s\n#4=:"),
    ("colons", "#5=1:2\n#5=1:2:3:4\n#5=::"),
    ("non-utf8", b"AgentDispatcher:PollingInterval=\xff\xfe"),
    ("all-known-keys-bad", "\n".join(f"#{i}=bogus" for i in range(40))),
    ("all-known-keys-one", "\n".join(f"#{i}=1" for i in range(40))),
    ("huge-index", "#99999999999999999999=1\n#18446744073709551615=2"),
    ("oversized-value", "AgentDispatcher:LedgerTail=" + "9" * 5000),
    ("unicode-digits", "AgentDispatcher:MaxAttempts=\u0663"),
]
write("config", config)

# Supervisor tool-call arguments (the `arguments_json` of an InvokeTool).
MAX_TOOL_ARGS = 256 * 1024
UUID_TEXT = UUID.decode()
def padded_body(total):
    head, tail = '{"body":"', '"}'
    return head + "p" * (total - len(head) - len(tail)) + tail
supervisor_args = [
    ("send-message-ok", json.dumps({"body": "hello"})),
    ("decision-ok", json.dumps({"title": "Ship it", "options": ["yes", "no"]})),
    ("blank", "  \n\t "),
    ("empty", b""),
    ("empty-object", "{}"),
    ("decision-11-options", json.dumps({"title": "t", "options": [str(i) for i in range(11)]})),
    ("body-too-long", json.dumps({"body": "x" * 16385})),
    ("body-empty", json.dumps({"body": ""})),
    ("body-number", json.dumps({"body": 5})),
    ("extra-property", json.dumps({"body": "hi", "to": "x"})),
    ("blank-strings", json.dumps({"title": "   ", "body": "  "})),
    ("array", "[1, 2]"),
    ("string", '"just text"'),
    ("null", "null"),
    ("number", "42"),
    ("deep-array-300", deep_array(300)),
    ("deep-object-120", deep_object(120)),
    ("not-json", '{"body": "hel'),
    ("trailing", '{"body": "a"} x'),
    ("non-utf8", b'{"body": "\xff"}'),
    ("lone-surrogate", '{"body": "\\udc00"}'),
    ("nul-in-body", '{"body": "a\\u0000b"}'),
    ("oversized", padded_body(MAX_TOOL_ARGS + 1)),
    ("at-limit", padded_body(MAX_TOOL_ARGS)),
    ("reader-fields", json.dumps({"id": UUID_TEXT, "instanceId": "not-a-uuid", "limit": 51, "tags": ["a", 1], "query": " "})),
    ("reader-fields-ok", json.dumps({"id": UUID_TEXT, "limit": 50, "tags": ["a", "b"], "query": "q"})),
    ("limit-float", json.dumps({"limit": 1.5})),
    ("limit-huge", '{"limit": 18446744073709551616, "maxResults": -1e308}'),
    ("unicode-body", json.dumps({"body": "\U0001F600" * 100}, ensure_ascii=False)),
    ("duplicate-keys", '{"body": "a", "body": 5}'),
    ("many-keys", json.dumps({f"k{i}": i for i in range(2000)})),
]
for i in range(8):
    n = rng.randrange(1, 64)
    supervisor_args.append((f"random-{i}", "".join(rng.choice('{}[]":,0123456789abcdeftruny ') for _ in range(n))))
write("supervisor_tool_args", supervisor_args)

# OTEL_* environments (`#N` = the Nth variable telemetry_env.rs reads:
# endpoint, protocol, service name, resource attributes, export interval).
telemetry = [
    ("empty", b""),
    ("protocol-without-endpoint", "#1=http/protobuf"),
    ("grpc-ok", "#0=http://collector:4317"),
    ("http-ok", "#0=https://collector:4318/\n#1=http/protobuf\n#4=15000"),
    ("https-grpc", "#0=https://collector:4317"),
    ("no-scheme", "#0=collector:4317"),
    ("ftp-scheme", "#0=ftp://collector"),
    ("no-host", "#0=http://"),
    ("bad-protocol", "#0=http://collector:4317\n#1=http/json"),
    ("protocol-padded", "#0=http://collector:4317\n#1=  grpc  "),
    ("interval-zero", "#0=http://collector:4317\n#4=0"),
    ("interval-negative", "#0=http://collector:4317\n#4=-5"),
    ("interval-float", "#0=http://collector:4317\n#4=1.5"),
    ("interval-overflow", "#0=http://collector:4317\n#4=18446744073709551616"),
    ("interval-padded", "#0=http://collector:4317\n#4= 500 "),
    ("service-name", "#2=  my-service  "),
    ("resource-attributes", "#3=service.name=from-attrs,team=ops, =x,novalue,k = v ,"),
    ("service-name-wins", "#2=explicit\n#3=service.name=from-attrs"),
    ("service-name-empty-attribute", "#3=service.name="),
    ("blank-values", "#0=   \n#2=  \n#4=\t"),
    ("non-utf8", b"#0=http://\xff\xfe:4317/"),
    ("huge-endpoint", "#0=http://" + "a" * 70000),
    ("ipv6", "#0=http://[::1]:4317"),
    ("userinfo", "#0=http://user:secret@collector:4317"),
    ("path-query-fragment", "#0=http://collector:4318/base/?q=1#frag\n#1=http/protobuf"),
    ("control-chars", "#0=http://coll\tector:4317"),
    ("unknown-keys", "OTEL_OTHER=1\nPATH=/bin\nno equals sign"),
    ("later-line-wins", "#0=ftp://bad\n#0=http://collector:4317"),
    ("huge-index", "#99999999999999999999=http://x\n#18446744073709551615=grpc"),
    ("log-formats", "#2=json\n#3=text"),
]
write("telemetry_env", telemetry)
