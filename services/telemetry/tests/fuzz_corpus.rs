//! The `telemetry_env` fuzz body (`fuzz/bodies/`), run as a regular test so
//! it cannot rot without cargo-fuzz: every committed seed under
//! `fuzz/corpus/telemetry_env/` plus a few hundred seeded random
//! environments, asserting no panic and, for the seeds whose verdict is
//! known, the typed refusal. Must never hold checks of its own that the
//! fuzz target lacks: the body is the single source of both.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is the test failing

#[path = "../../../fuzz/seeds.rs"]
mod seeds;

#[path = "../../../fuzz/bodies/telemetry_env.rs"]
mod telemetry_env;

use seeds::{corpus, seed};
use std::time::Duration;

use genesis_telemetry::{OtlpProtocol, TelemetryError};

#[test]
fn every_telemetry_env_seed_runs_without_panicking() {
    for (name, data) in corpus("telemetry_env", 20) {
        let _ = std::panic::catch_unwind(|| telemetry_env::run(&data))
            .unwrap_or_else(|_| panic!("telemetry_env panicked on seed {name}"));
    }
}

#[test]
fn telemetry_env_seeds_get_their_configs_and_typed_refusals() {
    let seeds = corpus("telemetry_env", 20);
    let run = |suffix: &str| telemetry_env::run(seed(&seeds, suffix));

    let none = run("-empty").unwrap();
    assert_eq!(none.otlp, None);
    assert_eq!(none.service_name, telemetry_env::DEFAULT_SERVICE);
    assert_eq!(run("-protocol-without-endpoint").unwrap().otlp, None);
    let grpc = run("-grpc-ok").unwrap().otlp.unwrap();
    assert_eq!(grpc.protocol, OtlpProtocol::Grpc);
    assert_eq!(grpc.traces_url(), "http://collector:4317");
    let http = run("-http-ok").unwrap().otlp.unwrap();
    assert_eq!(http.protocol, OtlpProtocol::HttpProtobuf);
    assert_eq!(http.metric_export_interval, Duration::from_secs(15));
    assert_eq!(http.traces_url(), "https://collector:4318/v1/traces");
    assert_eq!(
        run("-interval-padded")
            .unwrap()
            .otlp
            .unwrap()
            .metric_export_interval,
        Duration::from_millis(500)
    );
    assert_eq!(run("-service-name").unwrap().service_name, "my-service");
    let attrs = run("-resource-attributes").unwrap();
    assert_eq!(attrs.service_name, "from-attrs");
    assert_eq!(
        attrs.resource_attributes,
        [
            ("service.name".to_owned(), "from-attrs".to_owned()),
            ("team".to_owned(), "ops".to_owned()),
            ("k".to_owned(), "v".to_owned()),
        ]
    );
    assert_eq!(run("-service-name-wins").unwrap().service_name, "explicit");
    assert_eq!(run("-blank-values").unwrap().otlp, None);
    assert_eq!(
        run("-later-line-wins").unwrap().otlp.unwrap().endpoint,
        "http://collector:4317"
    );
    assert!(run("-ipv6").is_ok());

    for (suffix, endpoint_refused) in [
        ("-https-grpc", true),
        ("-no-scheme", true),
        ("-ftp-scheme", true),
        ("-no-host", true),
        ("-non-utf8", true),
        ("-huge-endpoint", true),
        ("-control-chars", true),
    ] {
        assert_eq!(
            matches!(run(suffix), Err(TelemetryError::InvalidEndpoint { .. })),
            endpoint_refused,
            "{suffix}"
        );
    }
    assert!(
        matches!(run("-bad-protocol"), Err(TelemetryError::InvalidProtocol(v)) if v == "http/json")
    );
    for (suffix, value) in [
        ("-interval-zero", "0"),
        ("-interval-negative", "-5"),
        ("-interval-float", "1.5"),
        ("-interval-overflow", "18446744073709551616"),
    ] {
        assert!(
            matches!(run(suffix), Err(TelemetryError::InvalidExportInterval(ref v)) if v == value),
            "{suffix}"
        );
    }
}

#[test]
fn environment_lines_map_index_keys_to_the_variables() {
    let env = telemetry_env::environment(b"#0=a\n#6=b\nPLAIN=c\nnovalue\n#0=d");
    assert_eq!(env[telemetry_env::VARS[0]], "d", "a later line wins");
    assert_eq!(env[telemetry_env::VARS[1]], "b");
    assert_eq!(env["PLAIN"], "c");
    assert_eq!(env.len(), 3);
}

/// splitmix64, so a failing random input replays from its index.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn random_bytes_never_panic_the_telemetry_env_body() {
    let mut rng = Rng(0x07e1_e3e7);
    for case in 0..300 {
        let data: Vec<u8> = (0..rng.below(256)).map(|_| rng.next() as u8).collect();
        let _ = std::panic::catch_unwind(|| telemetry_env::run(&data))
            .unwrap_or_else(|_| panic!("case {case} panicked: {data:?}"));
    }
}

#[test]
fn random_variable_values_never_panic_the_telemetry_env_body() {
    // Values drawn from the characters URLs, numbers and lists are made of,
    // for every variable, so the parsers past the first check are reached.
    const ALPHABET: &[u8] = b"hts:/.@[]?#=,0123456789abcflopru-_ %\t";
    let mut rng = Rng(0x07e1_0002);
    for case in 0..300 {
        let mut text = String::new();
        for _ in 0..1 + rng.below(6) {
            let mut value = String::new();
            if rng.below(2) == 0 {
                value.push_str(["http://", "https://", ""][rng.below(3) as usize]);
            }
            for _ in 0..rng.below(40) {
                value.push(char::from(
                    ALPHABET[rng.below(ALPHABET.len() as u64) as usize],
                ));
            }
            text.push_str(&format!("#{}={value}\n", rng.below(5)));
        }
        let _ = std::panic::catch_unwind(|| telemetry_env::run(text.as_bytes()))
            .unwrap_or_else(|_| panic!("case {case} panicked: {text:?}"));
    }
}
