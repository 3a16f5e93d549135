//! Fuzz target `telemetry_env`: see `../bodies/telemetry_env.rs` for what it covers and
//! `../README.md` for how to run it. Holds no logic of its own, so the
//! regular corpus test runs exactly the same body.
#![no_main]

#[path = "../bodies/telemetry_env.rs"]
#[allow(dead_code, reason = "each includer uses a different part of the body")]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = body::run(data);
});
