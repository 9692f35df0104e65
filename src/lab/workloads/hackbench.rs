//! hackbench (rt-tests): process-mode groups of 20 senders × 20 receivers
//! over socketpairs; the seed's wakeup-heavy throughput test.

use super::{lower, Opts, Spec, WORK_TIMEOUT_S};
use anyhow::{anyhow, bail, Context, Result};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub static SPEC: Spec = Spec {
    name: "hackbench",
    param: "groups",
    about: "rt-tests hackbench -g GROUPS -l LOOPS (processes, sockets): run time",
    metrics: &[lower("time", "s")],
    default_points: |n| {
        [1, 2, 4, 8]
            .into_iter()
            .filter(|&g| g == 1 || g <= 2 * n)
            .collect()
    },
};

pub fn run(groups: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let mut cmd = Command::new("hackbench");
    cmd.args([
        "-g",
        &groups.to_string(),
        "-l",
        &opts.loops.max(1).to_string(),
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec. Its own
    // process group lets a timeout kill hackbench's children too; the death
    // signal stops it if the lab kills this sample process.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            anyhow!("hackbench not found on PATH (Debian package rt-tests)")
        }
        _ => anyhow!("cannot start hackbench: {e}"),
    })?;
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    // Drained in threads so a full pipe never stalls hackbench.
    let to = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).ok();
        s
    });
    let te = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).ok();
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(WORK_TIMEOUT_S) {
            // SAFETY: plain syscall on hackbench's own process group.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            child.wait().ok();
            bail!("hackbench did not finish within {WORK_TIMEOUT_S} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (to.join().unwrap_or_default(), te.join().unwrap_or_default());
    if !status.success() {
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        bail!("hackbench failed ({status}): {last}");
    }
    let time = parse_time(&out)
        .with_context(|| format!("no 'Time:' line in hackbench output: {out:?}"))?;
    Ok(vec![("time".into(), time)])
}

/// The number after "Time:" (hackbench prints e.g. "Time: 0.019").
fn parse_time(out: &str) -> Option<f64> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Time:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_time() {
        assert_eq!(
            parse_time("Running in process mode\nTime: 0.019\n"),
            Some(0.019)
        );
        assert_eq!(parse_time("nothing"), None);
    }

    #[test]
    fn hackbench_tiny() {
        if Command::new("hackbench").arg("--help").output().is_err() {
            eprintln!("hackbench not installed: skipped");
            return;
        }
        let m = crate::workloads::tests::check("hackbench", 2);
        assert!(m["time"] > 0.0);
    }
}
