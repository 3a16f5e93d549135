//! Crash points for the fault suite: `GENESIS_FAULT_EXIT_AT=<point>[:<marker>]`
//! makes the pod abort (as abruptly as a SIGKILL, no shutdown path) when a
//! tick reaches `<point>` — `before_claim` (message received, no ClaimTick
//! sent yet: no lease, no attempt counted), `after_claim`, `after_tool`,
//! `before_complete` or `after_complete` (completed, not yet acked). With a marker path it
//! aborts once: the marker is created first, and a restarted pod that finds
//! it runs normally. `GENESIS_FAULT_EXIT_ON=<text>` aborts after claiming any
//! event whose payload contains `<text>`, every time: a poison event. Unset
//! (always, outside the fault tests) every check is a comparison against
//! `None`. `GENESIS_FAULT_FAIL_ON=<text>` is the poison that does not crash:
//! the pod treats such a claimed tick as failed (as if the supervisor were
//! unavailable) and NAKs it, every time. `GENESIS_FAULT_PAUSE_AT=<point>:<marker>:<secs>`
//! holds the tick at `<point>` for `<secs>` seconds, once (the marker is
//! created when the pause starts): the partition rows cut the pod's network
//! while it waits there. Must never do anything but abort, fail or hold a
//! tick.

use std::sync::OnceLock;

/// The points a tick passes, in order.
pub const POINTS: &[&str] = &[
    "before_claim",
    "after_claim",
    "after_tool",
    "before_complete",
    "after_complete",
];

#[derive(Debug, PartialEq)]
struct Plan {
    point: String,
    marker: Option<std::path::PathBuf>,
}

/// Parse `<point>[:<marker>]`; `None` (and the fault disarmed) when the
/// point is not one of [`POINTS`], so a typo cannot arm an abort that
/// never fires where the test expects it.
fn parse(raw: &str) -> Option<Plan> {
    let (point, marker) = match raw.split_once(':') {
        Some((p, m)) => (p, Some(std::path::PathBuf::from(m))),
        None => (raw, None),
    };
    POINTS.contains(&point).then(|| Plan {
        point: point.to_owned(),
        marker,
    })
}

fn plan() -> Option<&'static Plan> {
    static PLAN: OnceLock<Option<Plan>> = OnceLock::new();
    PLAN.get_or_init(|| {
        let raw = std::env::var("GENESIS_FAULT_EXIT_AT").ok()?;
        let Some(plan) = parse(&raw) else {
            tracing::error!(value = %raw, "GENESIS_FAULT_EXIT_AT names no crash point; ignored");
            return None;
        };
        tracing::warn!(point = %plan.point, "fault injection armed: this pod aborts at that point of a tick");
        Some(plan)
    })
    .as_ref()
}

/// Abort here if the armed point is `point` (once, when a marker is set).
pub fn hit(point: &str) {
    let Some(plan) = plan() else { return };
    if plan.point != point {
        return;
    }
    if let Some(marker) = &plan.marker {
        // create_new: exactly one pod process aborts, even with several.
        if std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(marker)
            .is_err()
        {
            return;
        }
    }
    eprintln!("fault injection: aborting at {point}");
    std::process::abort();
}

/// A pause at a point: `<point>:<marker>:<secs>`.
#[derive(Debug, PartialEq)]
struct Pause {
    point: String,
    marker: std::path::PathBuf,
    secs: u64,
}

/// Parse `<point>:<marker>:<secs>`; `None` (disarmed) for anything else.
fn parse_pause(raw: &str) -> Option<Pause> {
    let (point, rest) = raw.split_once(':')?;
    let (marker, secs) = rest.rsplit_once(':')?;
    let secs = secs.parse().ok().filter(|s| (1..=600).contains(s))?;
    (POINTS.contains(&point) && !marker.is_empty()).then(|| Pause {
        point: point.to_owned(),
        marker: marker.into(),
        secs,
    })
}

/// Hold the tick here for the armed pause, once (the first tick to reach
/// the point creates the marker, which the test waits for).
pub async fn pause(point: &str) {
    static PAUSE: OnceLock<Option<Pause>> = OnceLock::new();
    let armed = PAUSE.get_or_init(|| {
        let raw = std::env::var("GENESIS_FAULT_PAUSE_AT").ok()?;
        let parsed = parse_pause(&raw);
        if parsed.is_none() {
            tracing::error!(value = %raw, "GENESIS_FAULT_PAUSE_AT is not <point>:<marker>:<secs>; ignored");
        }
        parsed
    });
    let Some(p) = armed else { return };
    if p.point != point
        || std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p.marker)
            .is_err()
    {
        return;
    }
    eprintln!("fault injection: pausing {} s at {point}", p.secs);
    tokio::time::sleep(std::time::Duration::from_secs(p.secs)).await;
    eprintln!("fault injection: resuming after the pause at {point}");
}

/// Abort after claiming an event whose payload carries the armed poison text.
pub fn poison(payload_json: &str) {
    static POISON: OnceLock<Option<String>> = OnceLock::new();
    let armed = POISON.get_or_init(|| {
        std::env::var("GENESIS_FAULT_EXIT_ON")
            .ok()
            .filter(|t| !t.is_empty())
    });
    if let Some(text) = armed
        && payload_json.contains(text.as_str())
    {
        eprintln!("fault injection: aborting on a poison event");
        std::process::abort();
    }
}

/// Whether a claimed event carries the armed fail-without-crash poison text.
pub fn fails(payload_json: &str) -> bool {
    static FAIL: OnceLock<Option<String>> = OnceLock::new();
    let armed = FAIL.get_or_init(|| {
        std::env::var("GENESIS_FAULT_FAIL_ON")
            .ok()
            .filter(|t| !t.is_empty())
    });
    armed
        .as_deref()
        .is_some_and(|text| payload_json.contains(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_of_a_tick_parses_in_order_from_before_the_claim() {
        assert_eq!(
            POINTS,
            [
                "before_claim",
                "after_claim",
                "after_tool",
                "before_complete",
                "after_complete"
            ]
        );
        for point in POINTS {
            assert_eq!(
                parse(point),
                Some(Plan {
                    point: (*point).to_owned(),
                    marker: None
                })
            );
        }
        assert_eq!(
            parse("before_claim:/tmp/x.fired"),
            Some(Plan {
                point: "before_claim".into(),
                marker: Some("/tmp/x.fired".into())
            })
        );
    }

    #[test]
    fn a_pause_needs_a_known_point_a_marker_and_its_seconds() {
        assert_eq!(
            parse_pause("after_tool:/tmp/p.fired:8"),
            Some(Pause {
                point: "after_tool".into(),
                marker: "/tmp/p.fired".into(),
                secs: 8
            })
        );
        for bad in [
            "after_tool:/tmp/p.fired",
            "after_tool::8",
            "after_tol:/tmp/p.fired:8",
            "after_tool:/tmp/p.fired:0",
            "after_tool:/tmp/p.fired:601",
            "after_tool:/tmp/p.fired:soon",
        ] {
            assert_eq!(parse_pause(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_unknown_point_arms_nothing() {
        assert_eq!(parse("before_clam"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse(":/tmp/x.fired"), None);
        assert_eq!(parse("BEFORE_CLAIM"), None);
    }
}
