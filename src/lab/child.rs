//! A child process run to completion within a time limit, its output
//! captured: what the lab's samples and the hackbench workload both need.

use anyhow::Result;
use std::io::Read;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The last non-blank line of stderr: what a failed child said last.
    pub fn last_err_line(&self) -> &str {
        self.stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
    }
}

/// Waits for `child` (spawned with piped stdout and stderr), draining both
/// in threads so a full pipe never stalls it. None if it ran past `timeout`:
/// it is then killed, with its whole process group if `group` (the child made
/// itself a group leader).
pub fn wait(mut child: Child, timeout: Duration, group: bool) -> Result<Option<Finished>> {
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            r.read_to_string(&mut s).ok();
            s
        })
    };
    let to = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let te = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if t0.elapsed() > timeout {
            if group {
                // SAFETY: a plain syscall on the child's own process group.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            } else {
                child.kill().ok();
            }
            child.wait().ok();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Some(Finished {
        status,
        stdout: to.join().unwrap_or_default(),
        stderr: te.join().unwrap_or_default(),
    }))
}
