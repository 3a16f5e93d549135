//! Per-process figures of a fleet's children read from `/proc/<pid>`
//! (CPU seconds from `stat` utime+stime, resident memory from `status`
//! VmRSS) and the pods' LLM call counters from their `/metrics`.
//!
//! It only reads: it must never signal or otherwise touch a process.

use genesis_e2e::Fleet;

/// One child at one instant.
#[derive(Debug, Clone)]
pub struct ProcSample {
    /// The child's fleet name.
    pub name: String,
    /// utime + stime in clock ticks.
    pub cpu_ticks: u64,
    /// VmRSS in KiB.
    pub rss_kib: u64,
    /// Not a fleet child (a shared server or the bench): counted for CPU,
    /// left out of the services' memory figures.
    pub shared: bool,
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 when unknown), asked
/// once per run: every CPU delta converts with it.
fn clk_tck() -> f64 {
    static CLK_TCK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *CLK_TCK.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .filter(|v| *v > 0.0)
            .unwrap_or(100.0)
    })
}

/// utime + stime of `pid` from `/proc/<pid>/stat`.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    stat_ticks(pid, false)
}

/// utime + stime of `pid`, plus with `reaped` cutime + cstime, the CPU of
/// the children it has reaped. A server's short-lived processes
/// (PostgreSQL's autovacuum workers, a backend that disconnects) end
/// between two samples; their CPU then shows in the parent's children's
/// time, so a window keeps it.
fn stat_ticks(pid: u32, reaped: bool) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ticks(&stat, reaped)
}

/// The CPU clock ticks in one `/proc/<pid>/stat` line.
fn parse_stat_ticks(stat: &str, reaped: bool) -> Option<u64> {
    // The command name may hold spaces; fields count from after its ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime 15, cutime
    // 16, cstime 17.
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let own = field(14)? + field(15)?;
    if reaped {
        Some(own + field(16)? + field(17)?)
    } else {
        Some(own)
    }
}

/// The whole machine's busy CPU time in clock ticks, summed over its
/// cores: the first line of `/proc/stat` less its idle and iowait. Set
/// beside the fleet's own CPU over a window, it shows whether something
/// else on the machine was busy meanwhile.
pub fn machine_busy_ticks() -> Option<u64> {
    parse_machine_busy(&std::fs::read_to_string("/proc/stat").ok()?)
}

fn parse_machine_busy(stat: &str) -> Option<u64> {
    let line = stat.lines().next()?;
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is
    // already in user and nice).
    let v: Vec<u64> = fields
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 8 {
        return None;
    }
    Some(v[0] + v[1] + v[2] + v[5] + v[6] + v[7])
}

/// Clock ticks as seconds.
pub fn ticks_to_secs(ticks: u64) -> f64 {
    ticks as f64 / clk_tck()
}

/// VmRSS of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Sample every running child of `fleet`, plus the servers it shares the
/// machine with, each summed over its processes (`postgres`: the server and
/// every backend; `nats-server`) and this bench process (`bench`), so a
/// window's CPU is accounted for beyond the services'. A server process that
/// ends between two samples (an autovacuum worker, a backend) is counted
/// through its parent's reaped children's time.
pub fn sample(fleet: &Fleet) -> Vec<ProcSample> {
    let mut samples: Vec<ProcSample> = fleet
        .processes()
        .into_iter()
        .filter_map(|p| {
            let pid = p.pid?;
            Some(ProcSample {
                name: p.name,
                cpu_ticks: cpu_ticks(pid)?,
                rss_kib: rss_kib(pid).unwrap_or(0),
                shared: false,
            })
        })
        .collect();
    for server in SERVERS {
        samples.push(ProcSample {
            name: (*server).to_owned(),
            cpu_ticks: pids_named(server)
                .into_iter()
                .filter_map(|pid| stat_ticks(pid, true))
                .sum(),
            rss_kib: 0,
            shared: true,
        });
    }
    samples.push(ProcSample {
        name: "bench".to_owned(),
        cpu_ticks: cpu_ticks(std::process::id()).unwrap_or(0),
        rss_kib: rss_kib(std::process::id()).unwrap_or(0),
        shared: true,
    });
    samples
}

/// A fleet process held stopped (SIGSTOP) while this lives and continued
/// (SIGCONT) when it is dropped, so a failing window never leaves a service
/// frozen.
pub struct Stopped(u32);

impl Stopped {
    /// Stop `pid`.
    pub fn new(pid: u32) -> anyhow::Result<Stopped> {
        genesis_e2e::signal("STOP", pid)?;
        Ok(Stopped(pid))
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Err(e) = genesis_e2e::signal("CONT", self.0) {
            eprintln!("bench: could not continue process {}: {e}", self.0);
        }
    }
}

/// The shared servers [`sample`] sums by command name.
pub const SERVERS: &[&str] = &["postgres", "nats-server"];

/// Pids whose `/proc/<pid>/comm` is `name`.
fn pids_named(name: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .collect()
}

/// CPU seconds each child used between two samples.
pub fn cpu_delta(before: &[ProcSample], after: &[ProcSample]) -> Vec<(String, f64)> {
    let hz = clk_tck();
    after
        .iter()
        .map(|a| {
            let b = before
                .iter()
                .find(|b| b.name == a.name)
                .map_or(0, |b| b.cpu_ticks);
            (a.name.clone(), a.cpu_ticks.saturating_sub(b) as f64 / hz)
        })
        .collect()
}

/// The value of counter `name` in a Prometheus text exposition.
pub fn counter(text: &str, name: &str) -> Option<u64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let mut it = l.split_whitespace();
        let key = it.next()?;
        if key == name {
            it.next()?.parse::<f64>().ok().map(|v| v as u64)
        } else {
            None
        }
    })
}

/// Sum of `genesis_pod_llm_calls_total` over the fleet's pods.
pub async fn llm_calls(fleet: &Fleet) -> u64 {
    fleet_counter(fleet, "agent-pod", "genesis_pod_llm_calls_total").await
}

/// ClaimTick answers of `outcome` the supervisor has given.
pub async fn claims(fleet: &Fleet, outcome: &str) -> u64 {
    let sample = format!("genesis_supervisor_claims_total{{outcome=\"{outcome}\"}}");
    fleet_counter(fleet, "supervisor", &sample).await
}

/// Sum of counter sample `sample` over the processes whose name starts
/// with `process` (an unreachable `/metrics` counts 0).
async fn fleet_counter(fleet: &Fleet, process: &str, sample: &str) -> u64 {
    let client = reqwest::Client::new();
    let mut total = 0;
    for p in fleet
        .processes()
        .into_iter()
        .filter(|p| p.name.starts_with(process))
    {
        let url = format!("http://{}/metrics", p.http);
        if let Ok(r) = client
            .get(&url)
            .timeout(std::time::Duration::from_secs(3))
            .send()
            .await
            && let Ok(text) = r.text().await
        {
            total += counter(&text, sample).unwrap_or(0);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state letter of `/proc/<pid>/stat` (after the command's `)`).
    fn state(pid: u32) -> char {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        let after = stat.rsplit_once(')').expect("comm").1;
        after.trim_start().chars().next().expect("state")
    }

    #[test]
    fn a_stopped_process_is_continued_when_the_guard_drops() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        // A signal takes effect when the target next runs: poll for it.
        let settles_to = |stopped: bool| {
            (0..500).any(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                (state(pid) == 'T') == stopped
            })
        };
        let held = Stopped::new(pid).expect("stop");
        let stopped = settles_to(true);
        drop(held);
        let continued = settles_to(false);
        let _ = child.kill();
        let _ = child.wait();
        assert!(stopped, "never stopped");
        assert!(continued, "not continued on drop");
        // A process that is not there is an error, not a silent no-op.
        assert!(Stopped::new(u32::MAX / 2).is_err());
    }

    #[test]
    fn counter_reads_the_named_sample_and_ignores_comments() {
        let text = "# HELP genesis_pod_llm_calls_total x\n# TYPE genesis_pod_llm_calls_total counter\ngenesis_pod_llm_calls_total 7\nother 3\n";
        assert_eq!(counter(text, "genesis_pod_llm_calls_total"), Some(7));
        assert_eq!(counter(text, "missing"), None);
    }

    #[test]
    fn the_shared_servers_are_found_by_command_name() {
        // This test process is found under its own command name, and a
        // name no process has finds nothing.
        let me = std::fs::read_to_string(format!("/proc/{}/comm", std::process::id()))
            .expect("own comm");
        assert!(pids_named(me.trim_end()).contains(&std::process::id()));
        assert!(pids_named("no-such-command-here").is_empty());
    }

    #[test]
    fn a_stat_line_gives_own_time_and_with_reaped_children_theirs_too() {
        // pid (comm with spaces) state, then fields 4..: utime is 14.
        let line = "42 (post gres: x) S 1 2 3 4 5 6 7 8 9 10 100 20 7 3 20 0 1 0";
        assert_eq!(parse_stat_ticks(line, false), Some(120));
        assert_eq!(parse_stat_ticks(line, true), Some(130));
        assert_eq!(parse_stat_ticks("42 (x) S 1 2", true), None);
        assert_eq!(parse_stat_ticks("no parenthesis", false), None);
    }

    #[test]
    fn a_reaped_childs_cpu_stays_in_the_parents_figure() {
        let me = std::process::id();
        let before = stat_ticks(me, true).expect("own stat");
        // A child that burns CPU, then ends and is reaped.
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh");
        assert!(status.success());
        let own_after = cpu_ticks(me).expect("own stat");
        let with_reaped_after = stat_ticks(me, true).expect("own stat");
        assert!(
            with_reaped_after > before && with_reaped_after > own_after,
            "the child's CPU is not counted: before {before}, own {own_after}, with reaped {with_reaped_after}"
        );
    }

    #[test]
    fn the_machines_busy_time_leaves_out_idle_and_iowait() {
        let stat = "cpu  100 5 30 1000 40 2 3 7 11 0\ncpu0 50 2 15 500 20 1 1 3 5 0\n";
        assert_eq!(parse_machine_busy(stat), Some(100 + 5 + 30 + 2 + 3 + 7));
        assert_eq!(parse_machine_busy("cpu0 1 2 3 4 5 6 7 8\n"), None);
        assert_eq!(parse_machine_busy("cpu 1 2 3\n"), None);
        assert_eq!(parse_machine_busy("cpu 1 x 3 4 5 6 7 8\n"), None);
        assert!(machine_busy_ticks().is_some());
    }

    #[test]
    fn own_process_has_cpu_and_memory_figures() {
        let me = std::process::id();
        assert!(cpu_ticks(me).is_some());
        assert!(rss_kib(me).is_some_and(|k| k > 0));
        assert_eq!(cpu_ticks(u32::MAX), None);
    }
}
