//! Edge conversions shared by every gRPC server and client: UUID text to
//! `Uuid` with a field-naming `INVALID_ARGUMENT`, `google.protobuf.Timestamp`
//! to and from `chrono`, the stable `LEASE_LOST` status, the list of every
//! RPC decoded from [`crate::FILE_DESCRIPTOR_SET`] for auth-matrix tests, and
//! the bounded label a metric gives a request path ([`rpc_label`]).
//!
//! Only shape checks live here (is it a UUID, is it a valid instant). Domain
//! validation (is it a known mode, is the tenant allowed) belongs to
//! genesis-core and the services; this module must never reach the database.

use chrono::{DateTime, Utc};
use prost::Message as _;
use prost_types::{FileDescriptorSet, Timestamp};
use tonic::{Code, Status};
use uuid::Uuid;

/// Longest slice of a rejected value echoed back in an error message, so a
/// huge or hostile input cannot bloat the status.
const ECHO_LIMIT: usize = 64;

/// Message prefix of the `ABORTED` status a session-guarded AgentPod call
/// answers when the session no longer holds the instance's lease.
pub const LEASE_LOST: &str = "LEASE_LOST";

/// `INVALID_ARGUMENT` naming the offending field, the one shape every
/// validation failure at the edge takes.
pub fn invalid_argument(field: &str, problem: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{field}: {problem}"))
}

/// A rejected value as an error message quotes it: debug-quoted and cut at
/// [`ECHO_LIMIT`] bytes (on a character boundary) with an ellipsis, so
/// every edge quotes bad input the same bounded way.
pub fn echo(value: &str) -> String {
    let mut end = value.len().min(ECHO_LIMIT);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    if end < value.len() {
        format!("{:?}…", &value[..end])
    } else {
        format!("{value:?}")
    }
}

/// Parses a required UUID field. Empty → "required"; anything but a UUID in
/// text form → "not a UUID", both `INVALID_ARGUMENT` naming `field`.
pub fn parse_uuid(field: &str, value: &str) -> Result<Uuid, Status> {
    if value.is_empty() {
        return Err(invalid_argument(field, "required"));
    }
    Uuid::try_parse(value)
        .map_err(|_| invalid_argument(field, format!("not a UUID: {}", echo(value))))
}

/// Parses an `optional string` UUID field: unset → `None`. A field that is
/// set must hold a UUID (set-but-empty is refused, not read as unset, so a
/// client bug cannot silently widen a filter).
pub fn parse_optional_uuid(field: &str, value: Option<&str>) -> Result<Option<Uuid>, Status> {
    value.map(|v| parse_uuid(field, v)).transpose()
}

/// Requires a message-typed field to be present (proto3 makes every message
/// field optional on the wire).
pub fn require<'a, T>(field: &str, value: Option<&'a T>) -> Result<&'a T, Status> {
    value.ok_or_else(|| invalid_argument(field, "required"))
}

/// Converts an instant to the wire form. Total: every `DateTime<Utc>` fits.
pub fn timestamp_from_chrono(at: DateTime<Utc>) -> Timestamp {
    Timestamp {
        seconds: at.timestamp(),
        // Always below 2e9 (leap seconds reach 1_999_999_999), so it fits.
        nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(999_999_999),
    }
}

/// Converts an optional instant to the wire form (`None` stays unset).
pub fn optional_timestamp(at: Option<DateTime<Utc>>) -> Option<Timestamp> {
    at.map(timestamp_from_chrono)
}

/// Converts a wire timestamp to an instant. `nanos` outside `0..1e9` or
/// seconds outside chrono's range are `INVALID_ARGUMENT` naming `field`.
pub fn chrono_from_timestamp(field: &str, ts: &Timestamp) -> Result<DateTime<Utc>, Status> {
    let nanos = u32::try_from(ts.nanos)
        .ok()
        .filter(|n| *n < 1_000_000_000)
        .ok_or_else(|| invalid_argument(field, format!("nanos out of range: {}", ts.nanos)))?;
    DateTime::from_timestamp(ts.seconds, nanos)
        .ok_or_else(|| invalid_argument(field, format!("seconds out of range: {}", ts.seconds)))
}

/// Converts an optional wire timestamp (unset → `None`).
pub fn optional_chrono(
    field: &str,
    ts: Option<&Timestamp>,
) -> Result<Option<DateTime<Utc>>, Status> {
    ts.map(|t| chrono_from_timestamp(field, t)).transpose()
}

/// Reads a count that the wire types as signed but that must not be
/// negative (token counts, latencies): `INVALID_ARGUMENT` naming `field`
/// otherwise.
pub fn non_negative(field: &str, value: i64) -> Result<u64, Status> {
    u64::try_from(value)
        .map_err(|_| invalid_argument(field, format!("must not be negative: {value}")))
}

/// Reads the `completion` of a `TickOutcome`. `UNSPECIFIED` and numbers this
/// build does not know are refused: the supervisor must never guess how a
/// tick ended.
pub fn tick_completion(field: &str, value: i32) -> Result<crate::v1::TickCompletion, Status> {
    match crate::v1::TickCompletion::try_from(value) {
        Ok(crate::v1::TickCompletion::Unspecified) => Err(invalid_argument(field, "required")),
        Ok(completion) => Ok(completion),
        Err(_) => Err(invalid_argument(
            field,
            format!("unknown TickCompletion {value}"),
        )),
    }
}

/// The status a session-guarded AgentPod call answers when its session has
/// lost the lease. `ABORTED` because it is a concurrency conflict: the pod
/// drops the tick without retrying the call.
pub fn lease_lost(detail: impl std::fmt::Display) -> Status {
    Status::aborted(format!("{LEASE_LOST}: {detail}"))
}

/// Whether a status is the [`lease_lost`] answer (pods branch on it).
pub fn is_lease_lost(status: &Status) -> bool {
    status.code() == Code::Aborted && status.message().starts_with(LEASE_LOST)
}

/// Every RPC of package `genesis.v1` as `(fully qualified service, method)`,
/// e.g. `("genesis.v1.AgentPod", "ClaimTick")`, in declaration order, read
/// from the embedded descriptor set. Auth-matrix tests iterate it so a new RPC
/// cannot ship without an auth decision.
pub fn all_rpcs() -> Vec<(String, String)> {
    let fds = FileDescriptorSet::decode(crate::FILE_DESCRIPTOR_SET)
        .expect("FILE_DESCRIPTOR_SET is encoded by this crate's build script");
    fds.file
        .iter()
        .filter(|file| file.package() == "genesis.v1")
        .flat_map(|file| {
            file.service.iter().flat_map(move |service| {
                let qualified = format!("{}.{}", file.package(), service.name());
                service
                    .method
                    .iter()
                    .map(move |method| (qualified.clone(), method.name().to_owned()))
            })
        })
        .collect()
}

/// [`crate::FILE_DESCRIPTOR_SET`] (encoded) as a server answering only
/// `served` (fully qualified service names) describes itself through
/// reflection: every other service is removed, and a file left with no
/// service that no kept file imports is removed whole (control's set has no
/// `agent_pod.proto`), so neither a listing nor a symbol lookup finds a
/// service the server does not answer. A file that loses some services also
/// loses their comments (the source info of services is positional).
pub fn descriptor_set_serving(served: &[&str]) -> Vec<u8> {
    let mut fds = FileDescriptorSet::decode(crate::FILE_DESCRIPTOR_SET)
        .expect("FILE_DESCRIPTOR_SET is encoded by this crate's build script");
    let mut emptied = Vec::new();
    for file in &mut fds.file {
        let package = file.package().to_owned();
        let before = file.service.len();
        file.service
            .retain(|s| served.contains(&format!("{package}.{}", s.name()).as_str()));
        if file.service.len() != before {
            if let Some(info) = file.source_code_info.as_mut() {
                // Path [6, i, …] names service i: indices moved, drop them.
                info.location.retain(|l| l.path.first() != Some(&6));
            }
            if file.service.is_empty() {
                emptied.push(file.name().to_owned());
            }
        }
    }
    let imported: Vec<String> = fds
        .file
        .iter()
        .filter(|f| !emptied.iter().any(|e| e == f.name()))
        .flat_map(|f| f.dependency.clone())
        .collect();
    fds.file.retain(|f| {
        !emptied.iter().any(|e| e == f.name()) || imported.iter().any(|i| i == f.name())
    });
    fds.encode_to_vec()
}

/// The HTTP/2 path gRPC uses for an RPC: `/service/method`.
pub fn rpc_path(service: &str, method: &str) -> String {
    format!("/{service}/{method}")
}

/// The label value a metric uses for a request path that has not been
/// routed yet (an auth refusal, say): not one of [`all_rpcs`].
pub const UNKNOWN_RPC: &str = "unknown";

/// What a metric may label a request with: `path` itself when it is the
/// [`rpc_path`] of one of [`all_rpcs`], else [`UNKNOWN_RPC`]. The path is
/// the caller's to choose, so an unauthenticated request to random paths
/// must not mint label values (each one a new time series, forever).
pub fn rpc_label(path: &str) -> &str {
    static KNOWN: std::sync::OnceLock<std::collections::HashSet<String>> =
        std::sync::OnceLock::new();
    let known = KNOWN.get_or_init(|| {
        all_rpcs()
            .iter()
            .map(|(service, method)| rpc_path(service, method))
            .collect()
    });
    if known.contains(path) {
        path
    } else {
        UNKNOWN_RPC
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone as _;

    #[test]
    fn parse_uuid_accepts_canonical_text() {
        let id = Uuid::new_v4();
        assert_eq!(
            parse_uuid("instance_id", &id.to_string()).expect("accepted"),
            id
        );
    }

    #[test]
    fn parse_uuid_refuses_empty_naming_the_field() {
        let err = parse_uuid("instance_id", "").expect_err("empty is refused");
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(err.message(), "instance_id: required");
    }

    #[test]
    fn parse_uuid_refuses_garbage_naming_the_field() {
        let err = parse_uuid("tenant_id", "not-a-uuid").expect_err("garbage is refused");
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().starts_with("tenant_id: not a UUID"),
            "{}",
            err.message()
        );
        assert!(err.message().contains("not-a-uuid"));
    }

    #[test]
    fn parse_uuid_truncates_long_echoes() {
        let long = "é".repeat(1000);
        let err = parse_uuid("event_id", &long).expect_err("garbage is refused");
        assert!(err.message().len() < 120, "{}", err.message());
    }

    #[test]
    fn optional_uuid_unset_is_none_but_set_empty_is_refused() {
        assert_eq!(
            parse_optional_uuid("event_id", None).expect("accepted"),
            None
        );
        let id = Uuid::new_v4();
        assert_eq!(
            parse_optional_uuid("event_id", Some(&id.to_string())).expect("accepted"),
            Some(id)
        );
        let err = parse_optional_uuid("event_id", Some("")).expect_err("set-empty is refused");
        assert_eq!(err.message(), "event_id: required");
    }

    #[test]
    fn require_names_the_missing_field() {
        assert_eq!(require("outcome", Some(&3)).expect("accepted"), &3);
        let err = require::<u8>("outcome", None).expect_err("absent is refused");
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(err.message(), "outcome: required");
    }

    #[test]
    fn timestamps_round_trip_with_nanoseconds() {
        let at = Utc
            .with_ymd_and_hms(2026, 3, 1, 12, 30, 5)
            .single()
            .expect("a valid date")
            + chrono::Duration::nanoseconds(123_456_789);
        let ts = timestamp_from_chrono(at);
        assert_eq!(ts.nanos, 123_456_789);
        assert_eq!(chrono_from_timestamp("at", &ts).expect("accepted"), at);
        let before_epoch = Utc.timestamp_opt(-5, 7).single().expect("a valid instant");
        assert_eq!(
            chrono_from_timestamp("at", &timestamp_from_chrono(before_epoch)).expect("accepted"),
            before_epoch
        );
    }

    #[test]
    fn invalid_timestamps_are_refused_naming_the_field() {
        for nanos in [-1, 1_000_000_000] {
            let err = chrono_from_timestamp("visible_at", &Timestamp { seconds: 0, nanos })
                .expect_err("nanos out of range");
            assert_eq!(err.code(), Code::InvalidArgument);
            assert!(
                err.message().starts_with("visible_at: nanos"),
                "{}",
                err.message()
            );
        }
        let err = chrono_from_timestamp(
            "visible_at",
            &Timestamp {
                seconds: i64::MAX,
                nanos: 0,
            },
        )
        .expect_err("seconds out of range");
        assert!(
            err.message().starts_with("visible_at: seconds"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn optional_timestamps_map_unset_to_none() {
        assert_eq!(optional_chrono("before", None).expect("accepted"), None);
        assert_eq!(optional_timestamp(None), None);
        let now = Utc::now();
        let ts = optional_timestamp(Some(now));
        assert_eq!(
            optional_chrono("before", ts.as_ref()).expect("accepted"),
            Some(now)
        );
    }

    #[test]
    fn lease_lost_is_aborted_and_recognised() {
        let status = lease_lost("session 1 no longer holds instance 2");
        assert_eq!(status.code(), Code::Aborted);
        assert!(is_lease_lost(&status));
        assert!(!is_lease_lost(&Status::aborted("something else")));
        assert!(!is_lease_lost(&Status::failed_precondition(
            "LEASE_LOST: wrong code"
        )));
    }

    #[test]
    fn only_known_rpc_paths_are_their_own_label() {
        for (service, method) in all_rpcs() {
            let path = rpc_path(&service, &method);
            assert_eq!(rpc_label(&path), path);
        }
        for random in [
            "",
            "/",
            "/genesis.v1.TenantService/NoSuchMethod",
            "/genesis.v1.NoSuchService/GetTenant",
            "/genesis.v1.TenantService/GetTenant/",
            "genesis.v1.TenantService/GetTenant",
            "/x9f3c1e",
        ] {
            assert_eq!(rpc_label(random), UNKNOWN_RPC, "{random:?}");
        }
    }

    #[test]
    fn a_served_descriptor_set_holds_only_the_served_services() {
        let served = ["genesis.v1.TenantService", "genesis.v1.AgentService"];
        let fds =
            FileDescriptorSet::decode(descriptor_set_serving(&served).as_slice()).expect("encoded");
        let services: Vec<String> = fds
            .file
            .iter()
            .flat_map(|f| {
                f.service
                    .iter()
                    .map(move |s| format!("{}.{}", f.package(), s.name()))
            })
            .collect();
        assert_eq!(services, served);
        let names: Vec<&str> = fds.file.iter().map(|f| f.name()).collect();
        assert!(
            !names.iter().any(|n| n.ends_with("agent_pod.proto")),
            "{names:?}"
        );
        // What the kept files import is kept.
        for file in &fds.file {
            for dep in &file.dependency {
                assert!(
                    names.contains(&dep.as_str()),
                    "{dep} missing from {names:?}"
                );
            }
        }
        // Serving every service changes nothing but the encoding.
        let all: Vec<String> = all_rpcs().into_iter().map(|(s, _)| s).collect();
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let full =
            FileDescriptorSet::decode(descriptor_set_serving(&all).as_slice()).expect("encoded");
        assert_eq!(
            full,
            FileDescriptorSet::decode(crate::FILE_DESCRIPTOR_SET).expect("encoded")
        );
    }

    #[test]
    fn all_rpcs_lists_every_agent_pod_rpc() {
        let rpcs = all_rpcs();
        let pod: Vec<&str> = rpcs
            .iter()
            .filter(|(s, _)| s == "genesis.v1.AgentPod")
            .map(|(_, m)| m.as_str())
            .collect();
        assert_eq!(
            pod,
            [
                "ClaimTick",
                "RenewLease",
                "InvokeTool",
                "RecordCallAttempt",
                "ReserveCredit",
                "CompleteTick",
                "ClaimReplay",
                "ReserveReplayCredit",
                "RecordReplayAttempt",
                "CompleteReplay"
            ]
        );
    }

    #[test]
    fn all_rpcs_covers_every_admin_service() {
        let rpcs = all_rpcs();
        let mut services: Vec<&str> = rpcs.iter().map(|(s, _)| s.as_str()).collect();
        services.dedup();
        assert_eq!(
            services,
            [
                "genesis.v1.AgentPod",
                "genesis.v1.TenantService",
                "genesis.v1.AgentService",
                "genesis.v1.DecisionService",
                "genesis.v1.LlmService",
                "genesis.v1.ConfigService",
                "genesis.v1.MissionService",
                "genesis.v1.ConstitutionService",
                "genesis.v1.KnowledgeService",
                "genesis.v1.RegistryService",
                "genesis.v1.CoderService",
                "genesis.v1.CodingTaskService",
                "genesis.v1.WindowsLaneService",
                "genesis.v1.TokenService",
            ]
        );
        assert!(rpcs.contains(&("genesis.v1.AgentService".into(), "WatchTurns".into())));
        assert!(rpcs.contains(&("genesis.v1.WindowsLaneService".into(), "Release".into())));
        // No well-known import contributes services.
        assert!(rpcs.iter().all(|(s, _)| s.starts_with("genesis.v1.")));
        let windows = rpcs
            .iter()
            .filter(|(s, _)| s == "genesis.v1.WindowsLaneService")
            .count();
        assert_eq!(windows, 14);
    }

    #[test]
    fn all_rpcs_has_no_duplicates_and_paths_match_generated_code() {
        let rpcs = all_rpcs();
        let mut sorted = rpcs.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), rpcs.len());
        assert_eq!(
            rpc_path("genesis.v1.AgentPod", "ClaimTick"),
            "/genesis.v1.AgentPod/ClaimTick"
        );
        // The generated servers' names agree with the descriptor's.
        use crate::v1::{agent_pod_server, token_service_server, windows_lane_service_server};
        assert_eq!(
            agent_pod_server::SERVICE_NAME,
            crate::auth::AGENT_POD_SERVICE
        );
        for name in [
            agent_pod_server::SERVICE_NAME,
            token_service_server::SERVICE_NAME,
            windows_lane_service_server::SERVICE_NAME,
        ] {
            assert!(rpcs.iter().any(|(s, _)| s == name), "{name}");
        }
    }

    #[test]
    fn non_negative_refuses_negative_counts() {
        assert_eq!(non_negative("input_tokens", 12).expect("accepted"), 12);
        assert_eq!(non_negative("input_tokens", 0).expect("accepted"), 0);
        let err = non_negative("input_tokens", -1).expect_err("negative is refused");
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message()
                .starts_with("input_tokens: must not be negative")
        );
    }

    #[test]
    fn tick_completion_refuses_unspecified_and_unknown() {
        use crate::v1::TickCompletion;
        assert_eq!(
            tick_completion("outcome.completion", TickCompletion::Blocked as i32)
                .expect("accepted"),
            TickCompletion::Blocked
        );
        let err = tick_completion("outcome.completion", 0).expect_err("unspecified");
        assert_eq!(err.message(), "outcome.completion: required");
        let err = tick_completion("outcome.completion", 99).expect_err("unknown");
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("99"));
    }

    #[test]
    fn every_rpc_and_service_carries_a_leading_comment() {
        // Source info paths: 6 = FileDescriptorProto.service,
        // 2 = ServiceDescriptorProto.method.
        let fds = FileDescriptorSet::decode(crate::FILE_DESCRIPTOR_SET).expect("descriptor set");
        let mut undocumented = Vec::new();
        for file in fds.file.iter().filter(|f| f.package() == "genesis.v1") {
            let info = file
                .source_code_info
                .as_ref()
                .expect("protox keeps source info");
            let documented = |path: &[i32]| {
                info.location
                    .iter()
                    .any(|l| l.path == path && !l.leading_comments().trim().is_empty())
            };
            for (si, service) in file.service.iter().enumerate() {
                let si = i32::try_from(si).expect("few services");
                if !documented(&[6, si]) {
                    undocumented.push(service.name().to_owned());
                }
                for (mi, method) in service.method.iter().enumerate() {
                    let mi = i32::try_from(mi).expect("few methods");
                    if !documented(&[6, si, 2, mi]) {
                        undocumented.push(format!("{}.{}", service.name(), method.name()));
                    }
                }
            }
        }
        assert!(undocumented.is_empty(), "undocumented: {undocumented:?}");
    }

    /// DESIGN §5.12: cost is computed by the supervisor; the pod never sends
    /// a dollar amount. Every message an AgentPod RPC accepts, and every
    /// message nested in one, is walked: no field may be named for money.
    #[test]
    fn no_agent_pod_request_can_carry_a_dollar_amount() {
        let fds = FileDescriptorSet::decode(crate::FILE_DESCRIPTOR_SET).expect("descriptor set");
        let messages: std::collections::HashMap<String, &prost_types::DescriptorProto> = fds
            .file
            .iter()
            .flat_map(|f| {
                f.message_type
                    .iter()
                    .map(move |m| (format!(".{}.{}", f.package(), m.name()), m))
            })
            .collect();
        let enums: std::collections::HashSet<String> = fds
            .file
            .iter()
            .flat_map(|f| {
                f.enum_type
                    .iter()
                    .map(move |e| format!(".{}.{}", f.package(), e.name()))
            })
            .collect();
        let service = fds
            .file
            .iter()
            .flat_map(|f| f.service.iter())
            .find(|s| s.name() == "AgentPod")
            .expect("the AgentPod service");
        let mut todo: Vec<String> = service
            .method
            .iter()
            .map(|m| m.input_type().to_owned())
            .collect();
        assert!(todo.len() >= 5, "{todo:?}");
        let mut seen = std::collections::HashSet::new();
        let mut money = Vec::new();
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            // Enums and well-known types (Timestamp, Struct) carry no amounts.
            let Some(message) = messages.get(&name) else {
                assert!(
                    enums.contains(&name) || name.starts_with(".google.protobuf."),
                    "unknown type {name}"
                );
                continue;
            };
            assert!(
                message.nested_type.is_empty(),
                "{name}: nested types are not walked"
            );
            for field in &message.field {
                let lower = field.name().to_ascii_lowercase();
                if ["cost", "usd", "dollar", "price", "amount", "spend"]
                    .iter()
                    .any(|w| lower.contains(w))
                {
                    money.push(format!("{name}.{}", field.name()));
                }
                if !field.type_name().is_empty() {
                    todo.push(field.type_name().to_owned());
                }
            }
        }
        assert!(
            seen.contains(".genesis.v1.RecordCallAttemptRequest"),
            "{seen:?}"
        );
        assert!(
            seen.contains(".genesis.v1.CallAttempt"),
            "nested messages walked: {seen:?}"
        );
        assert!(
            money.is_empty(),
            "a pod could send a dollar amount in {money:?}"
        );
    }
}
