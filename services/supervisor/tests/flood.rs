//! Thousands of seeded malformed requests across every AgentPod RPC: random
//! bytes as the message body, corrupted encodings, fields of the wrong wire
//! type, missing, empty, malformed and unknown ids, oversized fields,
//! impossible values, a live session with unusable tool calls, and missing,
//! garbage and operator tokens. Asserts that the server never panics (health
//! still answers afterwards), that nothing is written (row counts, leases
//! and the event queue unchanged) and that every answer is precise.
//!
//! "Precise" for this service: INVALID_ARGUMENT, NOT_FOUND,
//! UNAUTHENTICATED, PERMISSION_DENIED, FAILED_PRECONDITION, ABORTED only as
//! the contract's `LEASE_LOST`, an OK `InvokeTool` only with an in-band tool
//! error, and INTERNAL only as tonic's own refusal of bytes that are not the
//! request message ("failed to decode Protobuf message: ..."): tonic-prost
//! maps a `prost::DecodeError` to INTERNAL inside its codec, following the
//! gRPC status-code table ("Error parsing request proto: INTERNAL"; the
//! library never generates INVALID_ARGUMENT), before any service code runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::{Harness, Rng, assert_serving, authed, raw_unary, snapshot, start_with, wire};
use genesis_core::TokenScope;
use genesis_proto::auth::{generate_token, token_sha256};
use genesis_proto::v1 as pb;
use genesis_proto::v1::agent_pod_client::AgentPodClient;
use genesis_proto::v1::claim_tick_response::Result as Claim;
use sqlx::PgPool;
use tonic::Code;
use uuid::Uuid;

/// One protobuf field, before encoding.
#[derive(Clone, Debug)]
enum F {
    /// Length-delimited: a string (possibly not UTF-8) or bytes.
    S(u32, Vec<u8>),
    /// Varint.
    V(u32, u64),
    /// A nested message.
    M(u32, Vec<F>),
}

impl F {
    fn num(&self) -> u32 {
        match self {
            F::S(n, _) | F::V(n, _) | F::M(n, _) => *n,
        }
    }
}

fn s(n: u32, text: &str) -> F {
    F::S(n, text.as_bytes().to_vec())
}

fn encode(fields: &[F]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields {
        match f {
            F::S(n, data) => wire::bytes(*n, data, &mut out),
            F::V(n, v) => wire::uint(*n, *v, &mut out),
            F::M(n, inner) => wire::bytes(*n, &encode(inner), &mut out),
        }
    }
    out
}

/// Replace (or add) field `n`.
fn set(fields: &mut Vec<F>, f: F) {
    let n = f.num();
    fields.retain(|x| x.num() != n);
    fields.push(f);
}

fn remove(fields: &mut Vec<F>, n: u32) {
    fields.retain(|x| x.num() != n);
}

/// The nested message `n` (created empty if absent).
fn nested(fields: &mut Vec<F>, n: u32) -> &mut Vec<F> {
    if !fields.iter().any(|f| matches!(f, F::M(m, _) if *m == n)) {
        set(fields, F::M(n, Vec::new()));
    }
    match fields
        .iter_mut()
        .find(|f| matches!(f, F::M(m, _) if *m == n))
    {
        Some(F::M(_, inner)) => inner,
        _ => unreachable!(),
    }
}

const RPCS: [&str; 10] = [
    "ClaimTick",
    "RenewLease",
    "InvokeTool",
    "RecordCallAttempt",
    "ReserveCredit",
    "CompleteTick",
    "ClaimReplay",
    "ReserveReplayCredit",
    "RecordReplayAttempt",
    "CompleteReplay",
];

/// A well-formed replay outcome (genesis_core::replay::ReplayOutcome).
const OUTCOME: &str = r#"{"end":"Complete","reasoning_summary":"s","wait_condition":"w","reason":"","actions":[],"turns":1,"input_tokens":1,"output_tokens":1,"served_models":["m"]}"#;

/// The live context a well-formed request would name.
struct Live {
    session: String,
    instance: String,
    tenant: String,
    event: String,
    /// A replay id the replay RPCs name: well-formed, of no replay (a
    /// replay's claim needs a journaled turn this harness does not make),
    /// so a baseline replay request is refused NOT_FOUND or LEASE_LOST and
    /// every field case below is refused at the edge before the store.
    replay: String,
}

/// A request of `rpc` that would be accepted (and write) as it stands:
/// every case below changes at least one thing that makes it refused.
fn baseline(rpc: &str, live: &Live) -> Vec<F> {
    let ids = vec![
        s(1, &live.session),
        s(2, &live.instance),
        s(3, &live.tenant),
    ];
    match rpc {
        "ClaimTick" => vec![s(1, &live.instance), s(2, &live.tenant)],
        "RenewLease" => ids,
        "InvokeTool" => {
            let mut f = ids;
            f.extend([
                s(4, "call-1"),
                s(5, "soa_send_message"),
                s(6, r#"{"body":"hello"}"#),
            ]);
            f
        }
        "RecordCallAttempt" => {
            let mut f = ids;
            f.extend([
                s(4, "inv-1"),
                F::M(
                    5,
                    vec![
                        s(1, "scripted-1"),
                        s(3, "scripted"),
                        s(5, "success"),
                        F::V(6, 10),
                        F::V(7, 5),
                    ],
                ),
            ]);
            f
        }
        "ReserveCredit" => {
            let mut f = ids;
            f.extend([s(4, "claude-opus-4-8"), F::V(5, 1_000), F::V(6, 1_000)]);
            f
        }
        "CompleteTick" => {
            let mut f = ids;
            f.extend([
                s(4, &live.event),
                F::M(5, vec![F::V(1, pb::TickCompletion::Complete as u64)]),
                s(8, "done"),
            ]);
            f
        }
        "ClaimReplay" => vec![s(1, &live.replay), s(2, &live.tenant)],
        "ReserveReplayCredit" => vec![
            s(1, &live.replay),
            s(2, &live.tenant),
            s(3, &live.session),
            s(4, "claude-opus-4-8"),
            F::V(5, 1_000),
            F::V(6, 1_000),
        ],
        "RecordReplayAttempt" => vec![
            s(1, &live.replay),
            s(2, &live.tenant),
            s(3, &live.session),
            s(4, "inv-1"),
            F::M(
                5,
                vec![
                    s(1, "claude-opus-4-8"),
                    s(3, "anthropic"),
                    s(5, "success"),
                    F::V(6, 10),
                    F::V(7, 5),
                ],
            ),
            s(6, &live.instance),
        ],
        "CompleteReplay" => vec![
            s(1, &live.replay),
            s(2, &live.tenant),
            s(3, &live.session),
            s(4, OUTCOME),
        ],
        other => panic!("no baseline for {other}"),
    }
}

/// The id fields of `rpc` (field number, what it holds).
fn id_fields(rpc: &str) -> &'static [u32] {
    match rpc {
        "ClaimTick" | "ClaimReplay" => &[1, 2],
        "CompleteTick" => &[1, 2, 3, 4],
        "RecordReplayAttempt" => &[1, 2, 3, 6],
        _ => &[1, 2, 3],
    }
}

/// A malformed, missing, unknown or mistyped id in one id field. Never a
/// form `Uuid::try_parse` accepts for a live id (upper case, braces, urn:
/// or simple forms of a live id would be the live id).
fn break_id(rng: &mut Rng, rpc: &str, f: &mut Vec<F>, live: &Live) -> &'static str {
    let n = *rng.pick(id_fields(rpc));
    let uuid = Uuid::new_v4().to_string();
    match rng.below(12) {
        0 => {
            set(f, s(n, ""));
            "empty id"
        }
        1 => {
            set(f, s(n, &rng.junk(40)));
            "junk id"
        }
        2 => {
            set(f, s(n, &uuid[..35]));
            "truncated uuid"
        }
        3 => {
            set(
                f,
                s(n, &uuid.replacen(|c: char| c.is_ascii_hexdigit(), "g", 1)),
            );
            "non-hex uuid"
        }
        4 => {
            set(f, s(n, &format!("{uuid} ")));
            "uuid with a trailing space"
        }
        5 => {
            set(f, s(n, &format!("{}\0{}", &uuid[..8], &uuid[9..])));
            "uuid with a NUL"
        }
        6 => {
            set(f, s(n, &"a".repeat(1000)));
            "1000-byte id"
        }
        7 => {
            set(f, F::S(n, vec![0xff, 0xfe, 0xc3, 0x28]));
            "id not UTF-8"
        }
        8 => {
            remove(f, n);
            "missing id"
        }
        9 => {
            set(f, s(n, &uuid));
            "unknown id"
        }
        10 => {
            // Another live id in the wrong field (a tenant's id as an
            // instance's, ...): well-formed, names nothing of that kind.
            let other = if n == 3 || (rpc == "ClaimTick" && n == 2) || rpc.contains("Replay") {
                &live.instance
            } else {
                &live.tenant
            };
            set(f, s(n, other));
            "live id of the wrong kind"
        }
        _ => {
            set(f, F::V(n, rng.next_u64()));
            "id as a varint"
        }
    }
}

/// A refusal in the fields other than the ids (the ids stay live).
fn break_field(rng: &mut Rng, rpc: &str, f: &mut Vec<F>) -> &'static str {
    match rpc {
        "ClaimTick" => match rng.below(3) {
            0 => {
                set(f, s(3, ""));
                "set but empty event_id"
            }
            1 => {
                set(f, s(3, &rng.junk(50)));
                "junk event_id"
            }
            _ => {
                set(f, F::M(3, vec![F::V(1, 1)]));
                "event_id as a message"
            }
        },
        "RenewLease" => {
            set(f, s(1, &Uuid::new_v4().to_string()));
            "a session that holds no lease"
        }
        "InvokeTool" => {
            let cases: [(&str, u32, String); 14] = [
                ("empty call_id", 4, String::new()),
                ("blank call_id", 4, "   ".into()),
                ("201-byte call_id", 4, "c".repeat(201)),
                ("empty tool_name", 5, String::new()),
                ("201-byte tool_name", 5, "t".repeat(201)),
                ("unknown tool", 5, rng.junk(30)),
                ("arguments not JSON", 6, r#"{"body": "hel"#.into()),
                ("arguments an array", 6, "[1, 2]".into()),
                ("body not a string", 6, r#"{"body": 5}"#.into()),
                ("body missing", 6, "{}".into()),
                (
                    "an unknown property",
                    6,
                    r#"{"body": "hi", "to": "x"}"#.into(),
                ),
                (
                    "arguments over 256 KiB",
                    6,
                    format!(
                        r#"{{"body":"{}"}}"#,
                        "x".repeat(genesis_supervisor::service::MAX_TOOL_ARGUMENTS_BYTES)
                    ),
                ),
                (
                    "arguments nested 300 deep",
                    6,
                    format!("{}{}", "[".repeat(300), "]".repeat(300)),
                ),
                ("a lone surrogate", 6, r#"{"body": "\udc00"}"#.into()),
            ];
            let (what, n, value) = &cases[rng.below(cases.len())];
            set(f, s(*n, value));
            what
        }
        "RecordCallAttempt" => match rng.below(9) {
            0 => {
                set(f, s(4, ""));
                "empty invocation_id"
            }
            1 => {
                set(f, s(4, &"i".repeat(201)));
                "201-byte invocation_id"
            }
            2 => {
                remove(f, 5);
                "attempt missing"
            }
            3 => {
                set(nested(f, 5), F::V(6, u64::MAX));
                "negative input_tokens"
            }
            4 => {
                set(nested(f, 5), F::V(9, (-5i64) as u64));
                "negative latency"
            }
            5 => {
                set(nested(f, 5), s(5, &rng.junk(20)));
                "unknown outcome"
            }
            6 => {
                set(f, s(6, "abc"));
                "short overlay hash"
            }
            7 => {
                set(f, s(6, &"A".repeat(64)));
                "upper-case overlay hash"
            }
            _ => {
                set(f, s(5, &rng.junk(30)));
                "attempt as junk text"
            }
        },
        "ReserveCredit" | "ReserveReplayCredit" => match rng.below(5) {
            0 => {
                remove(f, 4);
                "no models"
            }
            1 => {
                set(f, s(4, ""));
                "an empty model"
            }
            2 => {
                set(f, s(4, &"m".repeat(201)));
                "a 201-byte model"
            }
            3 => {
                set(f, F::V(5, u64::MAX));
                "negative prompt tokens"
            }
            _ => {
                set(f, F::V(6, (-7i64) as u64));
                "negative output cap"
            }
        },
        "CompleteTick" => match rng.below(11) {
            0 => {
                remove(f, 5);
                "outcome missing"
            }
            1 => {
                set(nested(f, 5), F::V(1, 0));
                "unspecified completion"
            }
            2 => {
                set(nested(f, 5), F::V(1, 99));
                "unknown completion"
            }
            3 => {
                let o = nested(f, 5);
                set(o, F::V(1, pb::TickCompletion::BudgetExhausted as u64));
                set(o, s(5, "gold"));
                "unknown budget axis"
            }
            4 => {
                set(nested(f, 5), F::V(3, u64::MAX));
                "negative side-effecting count"
            }
            5 => {
                set(f, s(6, "0123"));
                "short plan hash"
            }
            6 => {
                set(f, F::M(12, vec![F::V(1, u64::MAX)]));
                "negative consumption"
            }
            7 => {
                set(
                    f,
                    F::M(10, vec![s(1, "soa_send_message"), s(2, "{not json")]),
                );
                "action arguments not JSON"
            }
            8 => {
                set(f, s(11, &rng.junk(20)));
                "junk snapshot_id"
            }
            9 => {
                set(f, s(11, &Uuid::new_v4().to_string()));
                "unknown snapshot_id"
            }
            _ => {
                set(
                    f,
                    s(
                        8,
                        &"r".repeat(genesis_store::tick::MAX_COMPLETION_BYTES + 1),
                    ),
                );
                "summary over the store's ceiling"
            }
        },
        "ClaimReplay" => {
            set(f, F::M(1, vec![F::V(1, 1)]));
            "replay_id as a message"
        }
        "RecordReplayAttempt" => match rng.below(6) {
            0 => {
                set(f, s(4, ""));
                "empty invocation_id"
            }
            1 => {
                remove(f, 5);
                "attempt missing"
            }
            2 => {
                set(nested(f, 5), F::V(6, u64::MAX));
                "negative input_tokens"
            }
            3 => {
                set(nested(f, 5), s(5, &rng.junk(20)));
                "unknown outcome"
            }
            4 => {
                set(f, s(6, &rng.junk(20)));
                "junk instance_id"
            }
            _ => {
                set(f, s(5, &rng.junk(30)));
                "attempt as junk text"
            }
        },
        "CompleteReplay" => match rng.below(6) {
            0 => {
                remove(f, 4);
                "neither an outcome nor an error"
            }
            1 => {
                set(f, s(5, "boom"));
                "both an outcome and an error"
            }
            2 => {
                set(f, s(4, "{not json"));
                "outcome not JSON"
            }
            3 => {
                set(f, s(4, &OUTCOME.replace("Complete", "Sneaky")));
                "an unknown end"
            }
            4 => {
                set(
                    f,
                    s(
                        4,
                        &OUTCOME.replace(
                            r#""actions":[]"#,
                            r#""actions":[{"tool_name":"soa_send_message","arguments":{},"result":{},"answered":"from_journal"}]"#,
                        ),
                    ),
                );
                "an effect answered from the journal"
            }
            _ => {
                remove(f, 4);
                set(f, s(5, &"e".repeat(4_001)));
                "an error over 4000 bytes"
            }
        },
        other => panic!("no field cases for {other}"),
    }
}

/// The in-band error code of an encoded InvokeToolResponse (field 3, a
/// ToolError whose field 1 is the code), if any.
fn tool_error_code(resp: &[u8]) -> Option<String> {
    fn fields(mut b: &[u8]) -> Option<Vec<(u64, Vec<u8>)>> {
        fn varint(b: &mut &[u8]) -> Option<u64> {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let (&byte, rest) = b.split_first()?;
                *b = rest;
                v |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    return Some(v);
                }
            }
            None
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b)?;
            match key & 7 {
                0 => {
                    varint(&mut b)?;
                }
                2 => {
                    let len = usize::try_from(varint(&mut b)?).ok()?;
                    let (data, rest) = b.split_at_checked(len)?;
                    out.push((key >> 3, data.to_vec()));
                    b = rest;
                }
                _ => return None,
            }
        }
        Some(out)
    }
    let error = fields(resp)?.into_iter().find(|(n, _)| *n == 3)?.1;
    let code = fields(&error)?.into_iter().find(|(n, _)| *n == 1)?.1;
    String::from_utf8(code).ok()
}

/// How one answer is classified; `Err` names an imprecise one.
fn judge(rpc: &str, r: &Result<Vec<u8>, tonic::Status>) -> Result<String, String> {
    match r {
        Ok(resp) if rpc == "InvokeTool" => match tool_error_code(resp) {
            Some(code)
                if [
                    "TOOL_NOT_AUTHORIZED",
                    "TOOL_NOT_IMPLEMENTED",
                    "INVALID_ARGUMENTS",
                ]
                .contains(&code.as_str()) =>
            {
                Ok(format!("OK in-band {code}"))
            }
            other => Err(format!("answered OK without a tool error ({other:?})")),
        },
        Ok(_) => Err("answered OK".into()),
        Err(s) => {
            let m = s.message();
            let precise = match s.code() {
                Code::InvalidArgument
                | Code::NotFound
                | Code::Unauthenticated
                | Code::PermissionDenied
                | Code::FailedPrecondition => !m.trim().is_empty(),
                Code::Aborted => m.starts_with("LEASE_LOST"),
                Code::Internal => m.starts_with("failed to decode Protobuf message"),
                _ => false,
            };
            if precise {
                Ok(format!("{:?}", s.code()))
            } else {
                Err(format!("{:?} {m}", s.code()))
            }
        }
    }
}

async fn claim(h: &Harness) -> pb::TickBundle {
    let resp = AgentPodClient::new(h.channel.clone())
        .claim_tick(authed(
            Some(&h.token),
            pb::ClaimTickRequest {
                instance_id: h.instance.to_string(),
                tenant_id: h.tenant.to_string(),
                event_id: None,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    match resp.result {
        Some(Claim::Bundle(b)) => b,
        other => panic!("expected a bundle, got {other:?}"),
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn thousands_of_malformed_agent_pod_requests_get_precise_refusals_and_write_nothing(
    pool: PgPool,
) {
    // The flood's bad tokens all come from one address: the failed-auth
    // limit (tests/auth_failures.rs) would soon answer them all alike.
    let h = start_with(pool, |c| c.auth_failures_per_minute = 0).await;
    // A live session, so malformed requests can name it and reach the
    // lease, tool and completion checks.
    let b = claim(&h).await;
    let live = Live {
        session: b.session_id.clone(),
        instance: h.instance.to_string(),
        tenant: h.tenant.to_string(),
        event: b.event.as_ref().unwrap().id.clone(),
        replay: Uuid::new_v4().to_string(),
    };
    let operator = generate_token();
    h.store
        .tokens()
        .insert(
            Some(h.tenant),
            TokenScope::Operator,
            &token_sha256(&operator),
            "op",
            None,
        )
        .await
        .unwrap();
    let listed: Vec<String> = genesis_proto::convert::all_rpcs()
        .into_iter()
        .filter(|(svc, _)| svc == genesis_proto::auth::AGENT_POD_SERVICE)
        .map(|(_, m)| m)
        .collect();
    assert_eq!(listed, RPCS, "every AgentPod RPC is flooded");
    let before = snapshot(&h.pool).await;

    // Seeded, so a failure names inputs that replay.
    let mut rng = Rng::new(0x0a6e_9f10_0d5e_ed01);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut sent = 0;
    for round in 0..500 {
        for rpc in RPCS {
            let path = format!("/{}/{rpc}", genesis_proto::auth::AGENT_POD_SERVICE);
            let mut token = Some(h.token.as_str());
            let (what, body): (&str, Vec<u8>) = match round % 5 {
                // Random bytes as the message.
                0 => ("random bytes", rng.bytes(256)),
                // A request that names no live lease, then corrupted: a
                // byte set to a non-UTF-8 value, or truncated.
                1 => {
                    let mut f = baseline(rpc, &live);
                    // Field 1: the instance of a claim, the session otherwise.
                    set(&mut f, s(1, &Uuid::new_v4().to_string()));
                    let mut bytes = encode(&f);
                    if rng.below(2) == 0 {
                        for _ in 0..1 + rng.below(3) {
                            let i = rng.below(bytes.len());
                            bytes[i] = 0x80 | rng.next_u64() as u8;
                        }
                        ("corrupted bytes", bytes)
                    } else {
                        bytes.truncate(rng.below(bytes.len()));
                        ("truncated", bytes)
                    }
                }
                2 | 3 => {
                    let mut f = baseline(rpc, &live);
                    let what = break_id(&mut rng, rpc, &mut f, &live);
                    (what, encode(&f))
                }
                _ => {
                    let mut f = baseline(rpc, &live);
                    let what = break_field(&mut rng, rpc, &mut f);
                    // Now and then the credential is the problem instead.
                    match rng.below(12) {
                        0 => token = None,
                        1 => token = Some("gen_garbage"),
                        2 => token = Some(&operator),
                        _ => {}
                    }
                    (what, encode(&f))
                }
            };
            let r = raw_unary(&h.channel, &path, body.clone(), token).await;
            sent += 1;
            match judge(rpc, &r) {
                Ok(class) => *seen.entry(class).or_default() += 1,
                Err(why) => wrong.push(format!(
                    "{rpc} ({what}, round {round}): {why}; body {:?}",
                    &body[..body.len().min(120)]
                )),
            }
        }
    }
    assert!(sent >= 2500, "only {sent} requests");
    eprintln!("answers to {sent} malformed requests: {seen:?}");
    assert!(
        wrong.is_empty(),
        "{} imprecise answers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // Every kind of refusal was exercised, so the flood cannot pass by
    // never reaching past one gate.
    for class in [
        "InvalidArgument",
        "NotFound",
        "Unauthenticated",
        "PermissionDenied",
        "Aborted",
        "Internal",
        "OK in-band INVALID_ARGUMENTS",
        "OK in-band TOOL_NOT_AUTHORIZED",
    ] {
        assert!(
            seen.get(class).copied().unwrap_or(0) > 0,
            "no {class} among {seen:?}"
        );
    }
    assert_eq!(snapshot(&h.pool).await, before, "nothing was written");
    // The server is still up and still serves the live session.
    assert_serving(&h.channel).await;
    AgentPodClient::new(h.channel.clone())
        .renew_lease(authed(
            Some(&h.token),
            pb::RenewLeaseRequest {
                session_id: live.session,
                instance_id: live.instance,
                tenant_id: live.tenant,
            },
        ))
        .await
        .expect("the live session is still served");
}
