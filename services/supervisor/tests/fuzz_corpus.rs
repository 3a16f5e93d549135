//! The `supervisor_tool_args` fuzz body (`fuzz/bodies/`), run as a regular
//! test so it cannot rot without cargo-fuzz: every committed seed under
//! `fuzz/corpus/supervisor_tool_args/` plus a few hundred seeded random
//! inputs, asserting no panic and, for the seeds whose verdict is known,
//! which tools accept them. Must never hold checks of its own that the fuzz
//! target lacks: the body is the single source of both.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is the test failing

#[path = "../../../fuzz/seeds.rs"]
mod seeds;

#[path = "../../../fuzz/bodies/supervisor_tool_args.rs"]
mod supervisor_tool_args;

use seeds::{corpus, seed};

use supervisor_tool_args::Verdict;

fn accepted_by(verdict: Verdict) -> Vec<&'static str> {
    match verdict {
        Verdict::Parsed { accepted_by } => accepted_by,
        other => panic!("expected parsed arguments, got {other:?}"),
    }
}

#[test]
fn every_supervisor_tool_args_seed_runs_without_panicking() {
    for (name, data) in corpus("supervisor_tool_args", 20) {
        std::panic::catch_unwind(|| supervisor_tool_args::run(&data))
            .unwrap_or_else(|_| panic!("supervisor_tool_args panicked on seed {name}"));
    }
}

#[test]
fn supervisor_tool_args_seeds_get_their_verdicts() {
    let seeds = corpus("supervisor_tool_args", 20);
    let run = |suffix: &str| supervisor_tool_args::run(seed(&seeds, suffix));

    assert!(accepted_by(run("-send-message-ok")).contains(&"soa_send_message"));
    assert!(accepted_by(run("-decision-ok")).contains(&"soa_propose_decision"));
    // At the size ceiling the arguments are still parsed and judged.
    assert!(matches!(run("-at-limit"), Verdict::Parsed { .. }));
    // Blank arguments are an empty object: only tools without a required
    // property take them, and never the message tool.
    let blank = accepted_by(run("-blank"));
    assert_eq!(blank, accepted_by(run("-empty-object")));
    assert_eq!(blank, accepted_by(run("-empty")));
    assert!(!blank.contains(&"soa_send_message"));
    for refused_by_the_message_tool in [
        "-body-too-long",
        "-body-empty",
        "-body-number",
        "-extra-property",
        "-duplicate-keys",
    ] {
        assert!(
            !accepted_by(run(refused_by_the_message_tool)).contains(&"soa_send_message"),
            "{refused_by_the_message_tool}"
        );
    }
    assert!(!accepted_by(run("-decision-11-options")).contains(&"soa_propose_decision"));
    for not_an_object in ["-array", "-string", "-null", "-number"] {
        assert_eq!(accepted_by(run(not_an_object)), Vec::<&str>::new());
    }
    for not_json in [
        "-deep-array-300",
        "-not-json",
        "-trailing",
        "-lone-surrogate",
    ] {
        assert_eq!(run(not_json), Verdict::NotJson, "{not_json}");
    }
    assert_eq!(run("-non-utf8"), Verdict::NotUtf8);
    assert_eq!(run("-oversized"), Verdict::TooLarge);
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
fn random_bytes_never_panic_the_supervisor_tool_args_body() {
    let mut rng = Rng(0x5e9e_a795);
    for case in 0..300 {
        let data: Vec<u8> = (0..rng.below(512)).map(|_| rng.next() as u8).collect();
        std::panic::catch_unwind(|| supervisor_tool_args::run(&data))
            .unwrap_or_else(|_| panic!("case {case} panicked: {data:?}"));
    }
}

#[test]
fn random_argument_objects_never_panic_the_supervisor_tool_args_body() {
    // Objects over the property names the tool schemas use, with values of
    // every JSON type, so the schema checks and readers past the type test
    // are reached.
    const KEYS: &[&str] = &[
        "body",
        "title",
        "options",
        "query",
        "limit",
        "id",
        "tags",
        "mode",
        "projectId",
        "missionId",
        "question",
        "text",
        "key",
        "language",
    ];
    let mut rng = Rng(0x5e9e_0002);
    for case in 0..300 {
        let mut fields = Vec::new();
        for _ in 0..rng.below(5) {
            let key = KEYS[rng.below(KEYS.len() as u64) as usize];
            let value = match rng.below(8) {
                0 => "null".to_owned(),
                1 => (rng.next() as i64).to_string(),
                2 => format!("{}", rng.below(100)),
                3 => "1.5".to_owned(),
                4 => "\"\"".to_owned(),
                5 => format!("\"{}\"", "x".repeat(rng.below(600) as usize)),
                6 => "[\"a\", 1, null]".to_owned(),
                _ => "{\"nested\": true}".to_owned(),
            };
            fields.push(format!("\"{key}\": {value}"));
        }
        let text = format!("{{{}}}", fields.join(", "));
        std::panic::catch_unwind(|| supervisor_tool_args::run(text.as_bytes()))
            .unwrap_or_else(|_| panic!("case {case} panicked: {text}"));
    }
}
