//! Running a child program with a deadline and capped output. Owns the one
//! place the crate spawns processes: every child runs without a shell, in its
//! own process group, with stdin either null or a given byte string, and its
//! stdout/stderr read concurrently up to a cap (the rest is drained and
//! dropped, so a chatty child never blocks on a full pipe). Must never leave
//! the child's process group alive past the deadline, nor past the child's
//! own exit (a backgrounded grandchild would otherwise outlive the call).

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// How long the output readers may still run once the process group is gone:
/// a grandchild that escaped the group (`setsid`) could hold a pipe open, and
/// must not stall the call.
const READER_GRACE: Duration = Duration::from_secs(2);

/// What a finished (or killed) child left behind.
#[derive(Debug)]
pub(crate) struct Captured {
    /// The exit status; `None` only if waiting on the killed child failed.
    pub status: Option<ExitStatus>,
    /// The first `cap` bytes of stdout.
    pub stdout: Vec<u8>,
    /// Whether stdout had more than `cap` bytes.
    pub stdout_truncated: bool,
    /// The first `cap` bytes of stderr.
    pub stderr: Vec<u8>,
    /// Whether stderr had more than `cap` bytes.
    pub stderr_truncated: bool,
    /// Whether the deadline expired and the group was killed.
    pub timed_out: bool,
    /// Wall-clock time from spawn to reaping.
    pub elapsed: Duration,
}

impl Captured {
    /// Whether the child exited on its own with status 0.
    pub fn success(&self) -> bool {
        !self.timed_out && self.status.is_some_and(|s| s.success())
    }
}

/// What an output reader has kept so far; shared so a reader abandoned
/// after the grace period still gives back what it read.
#[derive(Debug, Default)]
struct Kept {
    bytes: Vec<u8>,
    truncated: bool,
}

type SharedKept = Arc<Mutex<Kept>>;

fn lock(kept: &SharedKept) -> std::sync::MutexGuard<'_, Kept> {
    // A poisoned lock only means a reader panicked mid-append; the bytes
    // are still the best account of the output there is.
    kept.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Read `reader` to its end into `kept`, keeping the first `cap` bytes.
async fn read_capped<R: AsyncRead + Unpin>(mut reader: R, cap: usize, kept: SharedKept) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let mut k = lock(&kept);
                let room = cap.saturating_sub(k.bytes.len());
                if n > room {
                    k.truncated = true;
                }
                k.bytes.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// Send SIGKILL to the process group `pgid` (the child's pid, since it was
/// spawned with `process_group(0)`). Refuses pids 0 and 1, which would
/// address our own group or every process.
fn kill_group(pgid: u32) {
    let Ok(raw) = i32::try_from(pgid) else {
        return;
    };
    if raw <= 1 {
        return;
    }
    if let Some(pid) = rustix::process::Pid::from_raw(raw) {
        // ESRCH (the group is already gone) is the expected common case.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Run `cmd` (already given its program, arguments, cwd and environment)
/// to completion or until `timeout`, feeding it `stdin` and capturing at
/// most `cap` bytes of each output stream.
pub(crate) async fn run(
    cmd: &mut Command,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    cap: usize,
) -> std::io::Result<Captured> {
    cmd.process_group(0)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let pgid = child.id();

    let out_kept = SharedKept::default();
    let err_kept = SharedKept::default();
    let out = child
        .stdout
        .take()
        .map(|r| tokio::spawn(read_capped(r, cap, out_kept.clone())));
    let err = child
        .stderr
        .take()
        .map(|r| tokio::spawn(read_capped(r, cap, err_kept.clone())));
    let feeder = match (child.stdin.take(), stdin) {
        (Some(mut pipe), Some(bytes)) => Some(tokio::spawn(async move {
            // A child that exits without reading its input is not an error
            // here; its exit status says what happened.
            let _ = pipe.write_all(&bytes).await;
            let _ = pipe.shutdown().await;
        })),
        _ => None,
    };

    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => (status.ok(), false),
        Err(_) => {
            if let Some(pgid) = pgid {
                kill_group(pgid);
            }
            let _ = child.start_kill();
            (child.wait().await.ok(), true)
        }
    };
    // The leader is reaped; anything it left running in its group goes too.
    if let Some(pgid) = pgid {
        kill_group(pgid);
    }
    if let Some(feeder) = feeder {
        feeder.abort();
    }
    let elapsed = started.elapsed();

    let ((stdout, stdout_truncated), (stderr, stderr_truncated)) =
        tokio::join!(join_reader(out, &out_kept), join_reader(err, &err_kept));
    Ok(Captured {
        status,
        stdout,
        stdout_truncated,
        stderr,
        stderr_truncated,
        timed_out,
        elapsed,
    })
}

/// Wait (briefly) for an output reader, then take what it kept. A reader
/// still blocked after the grace period (a process outside the group holds
/// the pipe) is abandoned and its output reported as truncated.
async fn join_reader(
    handle: Option<tokio::task::JoinHandle<()>>,
    kept: &SharedKept,
) -> (Vec<u8>, bool) {
    let mut abandoned = false;
    if let Some(mut handle) = handle
        && tokio::time::timeout(READER_GRACE, &mut handle)
            .await
            .is_err()
    {
        handle.abort();
        abandoned = true;
    }
    let mut k = lock(kept);
    (std::mem::take(&mut k.bytes), k.truncated || abandoned)
}
