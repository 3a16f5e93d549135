//! The `proto_requests` fuzz body (`fuzz/bodies/proto_requests.rs`), run as
//! a regular test so it cannot rot without cargo-fuzz: every committed seed
//! under `fuzz/corpus/proto_requests/` plus a few hundred random inputs for
//! every request type, asserting no panic and a typed `prost::DecodeError`
//! for the malformed seeds. Must never hold checks the fuzz target lacks.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

#[path = "../../../fuzz/seeds.rs"]
mod seeds;

#[path = "../../../fuzz/bodies/proto_requests.rs"]
mod proto_requests;

use std::path::PathBuf;

use seeds::corpus;

use proptest::prelude::*;

#[test]
fn the_body_covers_every_request_message_of_the_protos() {
    let mut expected = Vec::new();
    for file in ["agent_pod.proto", "admin.proto"] {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../proto/genesis/v1")
            .join(file);
        for line in std::fs::read_to_string(path).unwrap().lines() {
            if let Some(rest) = line.strip_prefix("message ") {
                let name = rest.split(|c: char| !c.is_alphanumeric()).next().unwrap();
                if name.ends_with("Request") {
                    expected.push(name.to_owned());
                }
            }
        }
    }
    let mut listed: Vec<String> = proto_requests::REQUEST_TYPES
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    expected.sort();
    listed.sort();
    assert_eq!(
        listed, expected,
        "the fuzz body must decode every request type"
    );
    assert!(
        listed.len() <= 256,
        "the selector byte must reach every type"
    );
}

#[test]
fn every_proto_seed_runs_without_panicking() {
    for (name, data) in corpus("proto_requests", 20) {
        let _ = std::panic::catch_unwind(|| proto_requests::run(&data))
            .unwrap_or_else(|_| panic!("proto_requests panicked on seed {name}"));
    }
}

#[test]
fn malformed_proto_seeds_are_decode_errors() {
    let seeds = corpus("proto_requests", 20);
    for suffix in [
        "-truncated-length",
        "-truncated-varint",
        "-varint-overflow",
        "-bad-wire-type-6",
        "-bad-wire-type-7",
        "-field-zero",
        "-fixed64-truncated",
        "-oversized-claimed-length",
    ] {
        let data = &seeds.iter().find(|(n, _)| n.ends_with(suffix)).unwrap().1;
        assert!(
            proto_requests::run(data).is_err(),
            "{suffix} must be refused"
        );
    }
    let ok = &seeds
        .iter()
        .find(|(n, _)| n.ends_with("-claim-uuid"))
        .unwrap()
        .1;
    assert!(proto_requests::run(ok).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_any_request_decoder(
        selector in 0u8..=255,
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut data = vec![selector];
        data.extend_from_slice(&body);
        let _ = proto_requests::run(&data);
    }
}
