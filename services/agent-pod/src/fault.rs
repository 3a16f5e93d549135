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
//! unavailable) and NAKs it, every time. Must never do anything but abort or
//! fail a tick.

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
    fn an_unknown_point_arms_nothing() {
        assert_eq!(parse("before_clam"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse(":/tmp/x.fired"), None);
        assert_eq!(parse("BEFORE_CLAIM"), None);
    }
}
