//! The main job, run the way a newcomer runs it: `scripts/demo.sh` in its
//! non-interactive mode (`--ci`, the debug binaries the suite already built),
//! asserting on its output that every step of the story happened. Must never
//! run the demo against anything but its own database (`genesis_demo`) and
//! its own stream names.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn the_demo_plays_the_whole_story_and_exits_cleanly() {
    if let Some(missing) = genesis_e2e::binaries_missing() {
        println!("skipped: {missing}");
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let started = Instant::now();
    let out = Command::new("timeout")
        .arg("300")
        .arg("bash")
        .arg(root.join("scripts/demo.sh"))
        .args(["--ci", "--debug", "--no-build"])
        .current_dir(&root)
        .output()
        .expect("run scripts/demo.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "demo exited with {:?} after {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status,
        started.elapsed()
    );
    for step in [
        "bootstrapped (Active, foundational phase, AgentInitialized seeded)",
        "turn: Initialized",
        "Hello, I am your Strategic Orchestration Agent",
        "turn: MessageAcknowledged",
        "turn: Escalated",
        "is on the queue",
        "turn: EscalationResumed",
        "acme's operator token on globex: refused",
        "PERMISSION_DENIED",
        "acme's operator token on acme: allowed",
        "turn: Heartbeat",
        "Plan inputs unchanged",
        "demo: story complete",
    ] {
        assert!(
            stdout.contains(step),
            "demo output lacks {step:?}\n{stdout}"
        );
    }
    // Turns stream live from genesisctl watch (WatchTurns) while the story runs.
    let live: Vec<&str> = stdout.lines().filter(|l| l.contains("live │")).collect();
    assert!(
        live.iter().any(|l| l.contains("Initialized"))
            && live.iter().any(|l| l.contains("EscalationResumed")),
        "no live watch lines for the turns:\n{stdout}"
    );
    // The ledger table the demo prints carries decision kinds, served model and cost.
    assert!(
        stdout.contains("scripted-1"),
        "no served model in the ledger:\n{stdout}"
    );
    assert!(started.elapsed() < Duration::from_secs(300));
}
