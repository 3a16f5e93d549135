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
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 when unknown).
fn clk_tck() -> f64 {
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
}

/// utime + stime of `pid` from `/proc/<pid>/stat`.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields count from after its ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
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

/// Sample every running child of `fleet`.
pub fn sample(fleet: &Fleet) -> Vec<ProcSample> {
    fleet
        .processes()
        .into_iter()
        .filter_map(|p| {
            let pid = p.pid?;
            Some(ProcSample {
                name: p.name,
                cpu_ticks: cpu_ticks(pid)?,
                rss_kib: rss_kib(pid).unwrap_or(0),
            })
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
    let client = reqwest::Client::new();
    let mut total = 0;
    for p in fleet
        .processes()
        .into_iter()
        .filter(|p| p.name.starts_with("agent-pod"))
    {
        let url = format!("http://{}/metrics", p.http);
        if let Ok(r) = client
            .get(&url)
            .timeout(std::time::Duration::from_secs(3))
            .send()
            .await
            && let Ok(text) = r.text().await
        {
            total += counter(&text, "genesis_pod_llm_calls_total").unwrap_or(0);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_reads_the_named_sample_and_ignores_comments() {
        let text = "# HELP genesis_pod_llm_calls_total x\n# TYPE genesis_pod_llm_calls_total counter\ngenesis_pod_llm_calls_total 7\nother 3\n";
        assert_eq!(counter(text, "genesis_pod_llm_calls_total"), Some(7));
        assert_eq!(counter(text, "missing"), None);
    }

    #[test]
    fn own_process_has_cpu_and_memory_figures() {
        let me = std::process::id();
        assert!(cpu_ticks(me).is_some());
        assert!(rss_kib(me).is_some_and(|k| k > 0));
        assert_eq!(cpu_ticks(u32::MAX), None);
    }
}
