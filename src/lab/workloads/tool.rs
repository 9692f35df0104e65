//! Running the real benchmark programs (dbench's tbench, perf bench): each in
//! a process group of its own, so a timeout or an error kills its forked
//! children too, and each dying with the sample process.

use anyhow::{anyhow, bail, Result};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A program on PATH and the Debian package that installs it (for the error).
pub(crate) struct Tool {
    pub bin: &'static str,
    pub package: &'static str,
}

impl Tool {
    /// Starts `bin ARGS` as a process group leader, stdin closed, stdout and
    /// stderr piped (for [`Group::finish`]); a missing binary is a one-line
    /// error naming the package.
    pub fn spawn(&self, args: &[&str]) -> Result<Group> {
        let mut cmd = Command::new(self.bin);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow!(
                "{} not found on PATH (Debian package {})",
                self.bin,
                self.package
            ),
            _ => anyhow!("cannot start {}: {e}", self.bin),
        })?;
        Ok(Group {
            name: self.bin,
            child: Some(child),
        })
    }

    /// Runs `bin ARGS` to completion within `limit`; its stdout.
    pub fn output(&self, args: &[&str], limit: Duration) -> Result<String> {
        self.spawn(args)?.finish(Instant::now() + limit)
    }
}

/// perf (Debian's linux-perf): `perf bench sched messaging` and `pipe`.
pub(crate) const PERF: Tool = Tool {
    bin: "perf",
    package: "linux-perf",
};

/// A started tool; dropping it kills its whole process group.
pub(crate) struct Group {
    name: &'static str,
    child: Option<Child>,
}

impl Group {
    /// Waits for it until `deadline` (then kills the group); its stdout if
    /// it exited successfully, else an error with its last stderr line.
    pub fn finish(mut self, deadline: Instant) -> Result<String> {
        let child = self.child.take().expect("a group is finished once");
        let limit = deadline.saturating_duration_since(Instant::now());
        let Some(done) = crate::child::wait(child, limit, true)? else {
            bail!("{} did not finish within {} s", self.name, limit.as_secs());
        };
        if !done.status.success() {
            bail!(
                "{} failed ({}): {}",
                self.name,
                done.status,
                done.last_err_line()
            );
        }
        Ok(done.stdout)
    }

    /// The child, for polling (None once finished).
    pub fn child(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: a plain syscall on the child's own process group.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            c.wait().ok();
        }
    }
}

/// The number just before `unit` on the last line that has `unit` as a word
/// (perf prints e.g. "22.472800 usecs/op", tbench "Throughput 206.3 MB/sec").
pub(crate) fn number_before(out: &str, unit: &str) -> Option<f64> {
    out.lines()
        .rev()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let i = w.iter().position(|x| *x == unit)?;
            w.get(i.checked_sub(1)?)?.parse::<f64>().ok()
        })
        .filter(|v| v.is_finite() && *v >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_before_units() {
        let out =
            "     Total time: 0.224 [sec]\n\n      22.472800 usecs/op\n          44498 ops/sec\n";
        assert_eq!(number_before(out, "usecs/op"), Some(22.4728));
        assert_eq!(number_before(out, "ops/sec"), Some(44498.0));
        assert_eq!(number_before(out, "[sec]"), Some(0.224));
        assert_eq!(number_before(out, "MB/sec"), None);
        assert_eq!(number_before("usecs/op", "usecs/op"), None);
    }

    #[test]
    fn missing_tool_names_its_package() {
        let t = Tool {
            bin: "nimble-lab-no-such-tool",
            package: "nosuchpkg",
        };
        let e = t.output(&[], Duration::from_secs(1)).err().unwrap();
        assert_eq!(
            e.to_string(),
            "nimble-lab-no-such-tool not found on PATH (Debian package nosuchpkg)"
        );
    }
}
