//! The `event_payload` and `config` fuzz bodies (`fuzz/bodies/`), run as
//! regular tests so they cannot rot without cargo-fuzz: every committed seed
//! under `fuzz/corpus/<target>/` plus a few hundred random inputs, asserting
//! no panic and, for the seeds whose verdict is known, the typed refusal.
//! Must never hold checks of its own that the fuzz targets lack: the bodies
//! are the single source of both.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

#[path = "../../../fuzz/seeds.rs"]
mod seeds;

#[path = "../../../fuzz/bodies/event_payload.rs"]
mod event_payload;

#[path = "../../../fuzz/bodies/config.rs"]
mod config;

use seeds::{corpus, seed};

use genesis_core::CoreError;
use proptest::prelude::*;

#[test]
fn every_event_payload_seed_runs_without_panicking() {
    for (name, data) in corpus("event_payload", 20) {
        let _ = std::panic::catch_unwind(|| event_payload::run(&data))
            .unwrap_or_else(|_| panic!("event_payload panicked on seed {name}"));
    }
}

#[test]
fn event_payload_seeds_get_their_typed_refusals() {
    let seeds = corpus("event_payload", 20);
    use event_payload::Refusal;
    assert!(event_payload::run(seed(&seeds, "-operator-message")).is_ok());
    assert!(event_payload::run(seed(&seeds, "-at-limit")).is_ok());
    for refused_json in [
        "-deep-array-200",
        "-deep-object-300",
        "-truncated-object",
        "-non-utf8",
        "-number-overflow",
    ] {
        assert!(
            matches!(event_payload::run(seed(&seeds, refused_json)), Err(Refusal::Json(e)) if !e.to_string().is_empty()),
            "{refused_json} must be refused by the JSON parser"
        );
    }
    for refused_payload in ["-nul-in-string", "-nul-in-key", "-oversized-70k"] {
        assert!(
            matches!(
                event_payload::run(seed(&seeds, refused_payload)),
                Err(Refusal::Payload(CoreError::InvalidArgument { ref field, .. })) if field == "payload"
            ),
            "{refused_payload} must be refused as an invalid payload"
        );
    }
}

#[test]
fn every_config_seed_runs_without_panicking() {
    for (name, data) in corpus("config", 20) {
        let _ = std::panic::catch_unwind(|| config::run(&data))
            .unwrap_or_else(|_| panic!("config panicked on seed {name}"));
    }
}

#[test]
fn config_seeds_get_their_typed_refusals() {
    let seeds = corpus("config", 20);
    for (suffix, key) in [
        ("-zero-duration", "AgentDispatcher:LeaseTtl"),
        ("-hhmmss-bad-minutes", "AgentDispatcher:MaxBackoffInterval"),
        ("-days-overflow", "AgentDispatcher:WorksetDeadline"),
        (
            "-u32-overflow",
            "AgentDispatcher:MaxConsecutiveBlockedTurns",
        ),
        ("-backoff-nan", "AgentDispatcher:BackoffFactor"),
        ("-credit-negative", "AgentDispatcher:WeeklyCreditUsd"),
    ] {
        match config::run(seed(&seeds, suffix)) {
            Err(CoreError::InvalidConfig { key: k, .. }) => assert_eq!(k, key, "{suffix}"),
            other => panic!("{suffix}: expected InvalidConfig for {key}, got {other:?}"),
        }
    }
    for accepted in [
        "-empty",
        "-durations",
        "-hhmmss",
        "-unknown-keys",
        "-backoff-huge",
    ] {
        assert_eq!(config::run(seed(&seeds, accepted)), Ok(()), "{accepted}");
    }
}

#[test]
fn config_entries_map_index_keys_to_known_keys() {
    let e = config::entries(b"#0=1\nplain=2\nnovalue");
    assert_eq!(e[0].0, genesis_core::options::keys::ALL[0]);
    assert_eq!(e[1], ("plain".to_owned(), "2".to_owned()));
    assert_eq!(e[2], (String::new(), "novalue".to_owned()));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_the_event_payload_body(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = event_payload::run(&data);
    }

    #[test]
    fn random_json_never_panics_the_event_payload_body(text in "[\\[\\]{}\":,0-9a-z\\\\ .eE+-]{0,256}") {
        let _ = event_payload::run(text.as_bytes());
    }

    #[test]
    fn random_bytes_never_panic_the_config_body(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = config::run(&data);
    }

    #[test]
    fn random_known_key_values_never_panic_the_config_body(
        entries in proptest::collection::vec((0usize..64, "[0-9a-zA-Z:.+-]{0,24}"), 0..8)
    ) {
        let text: Vec<String> = entries.iter().map(|(k, v)| format!("#{k}={v}")).collect();
        let _ = config::run(text.join("\n").as_bytes());
    }
}
