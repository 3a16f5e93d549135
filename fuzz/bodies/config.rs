//! Body of the `config` fuzz target, shared with genesis-core's
//! `tests/fuzz_corpus.rs`: arbitrary key/value strings through
//! `AgentDispatcherOptions::with_system_configs` (DB-first config, spec §3.6)
//! and `options::parse_duration`, then the cadence and budget rules on
//! whatever options were accepted. Must never panic; a refusal is a typed
//! `CoreError::InvalidConfig` naming one of the given keys.

use genesis_core::options::{keys, parse_duration};
use genesis_core::{
    AgentDispatcherOptions, AgentType, CoreError, compute_next_heartbeat_delay, compute_tick_delay,
    policy_default,
};

/// Split an input into `(key, value)` entries: one per line, `key=value`
/// (no `=`: the whole line is the value of an empty key). A key written
/// `#N` stands for the Nth known key (mod their count), so the fuzzer
/// reaches every parser without guessing the names.
pub fn entries(data: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(data);
    text.split('\n')
        .map(|line| {
            let (k, v) = line.split_once('=').unwrap_or(("", line));
            let key = match k.strip_prefix('#').and_then(|n| n.parse::<usize>().ok()) {
                Some(n) => keys::ALL[n % keys::ALL.len()].to_owned(),
                None => k.to_owned(),
            };
            (key, v.to_owned())
        })
        .collect()
}

/// Run one input. Returns the refusal when a known key had a bad value.
pub fn run(data: &[u8]) -> Result<(), CoreError> {
    let entries = entries(data);
    for (_, value) in &entries {
        match parse_duration(value) {
            Ok(d) => assert!(!d.is_zero(), "parse_duration accepted a zero duration"),
            Err(CoreError::InvalidArgument { .. }) => {}
            Err(other) => panic!("parse_duration answered an untyped refusal: {other:?}"),
        }
    }
    let base = AgentDispatcherOptions::default();
    let opts = match base.with_system_configs(entries.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    {
        Ok(opts) => opts,
        Err(CoreError::InvalidConfig { key, value, reason }) => {
            assert!(
                entries.iter().any(|(k, _)| *k == key),
                "refusal names a key that was not given: {key}"
            );
            return Err(CoreError::InvalidConfig { key, value, reason });
        }
        Err(other) => panic!("with_system_configs answered an untyped refusal: {other:?}"),
    };
    for idle in [0, 1, 2, 7, 64, 1_000, u32::MAX] {
        let tick = compute_tick_delay(&opts, idle);
        assert!(tick <= opts.max_backoff_interval.max(opts.tick_base_delay));
        let next = compute_next_heartbeat_delay(&opts, idle);
        if opts.standing_agent_idle_heartbeat_enabled {
            assert_eq!(next, opts.standing_agent_heartbeat_interval);
        } else {
            assert_eq!(next, tick);
        }
    }
    for agent_type in AgentType::ALL {
        let _ = policy_default(*agent_type, &opts);
    }
    let now = chrono::Utc::now();
    assert!(genesis_core::budget::workset_deadline_from(now, &opts) >= now);
    let window = genesis_core::CreditWindow::fresh(now, &opts);
    let status = genesis_core::credit_status(&window, opts.credit_enforcement_enabled);
    assert!(status.remaining.is_finite() && status.remaining >= 0.0);
    Ok(())
}
