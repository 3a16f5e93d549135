//! Crash points for the fault suite: `GENESIS_FAULT_EXIT_AT=<point>[:<marker>]`
//! makes the pod abort (as abruptly as a SIGKILL, no shutdown path) when a
//! tick reaches `<point>` — `after_claim`, `after_tool`, `before_complete`
//! or `after_complete` (completed, not yet acked). With a marker path it
//! aborts once: the marker is created first, and a restarted pod that finds
//! it runs normally. `GENESIS_FAULT_EXIT_ON=<text>` aborts after claiming any
//! event whose payload contains `<text>`, every time: a poison event. Unset
//! (always, outside the fault tests) every check is a comparison against
//! `None`. Must never do anything but abort.

use std::sync::OnceLock;

/// The points a tick passes, in order.
pub const POINTS: &[&str] = &[
    "after_claim",
    "after_tool",
    "before_complete",
    "after_complete",
];

struct Plan {
    point: String,
    marker: Option<std::path::PathBuf>,
}

fn plan() -> Option<&'static Plan> {
    static PLAN: OnceLock<Option<Plan>> = OnceLock::new();
    PLAN.get_or_init(|| {
        let raw = std::env::var("GENESIS_FAULT_EXIT_AT").ok()?;
        let (point, marker) = match raw.split_once(':') {
            Some((p, m)) => (p.to_owned(), Some(std::path::PathBuf::from(m))),
            None => (raw, None),
        };
        if !POINTS.contains(&point.as_str()) {
            tracing::error!(%point, "GENESIS_FAULT_EXIT_AT names no crash point; ignored");
            return None;
        }
        tracing::warn!(%point, "fault injection armed: this pod aborts at that point of a tick");
        Some(Plan { point, marker })
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
