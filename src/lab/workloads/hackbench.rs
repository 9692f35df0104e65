//! hackbench (rt-tests): process-mode groups of 20 senders × 20 receivers
//! over socketpairs; the seed's wakeup-heavy throughput test.

use super::{lower, Opts, Spec, WORK_TIMEOUT_S};
use anyhow::{anyhow, bail, Context, Result};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

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
    let child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            anyhow!("hackbench not found on PATH (Debian package rt-tests)")
        }
        _ => anyhow!("cannot start hackbench: {e}"),
    })?;
    let limit = Duration::from_secs(WORK_TIMEOUT_S);
    let Some(done) = crate::child::wait(child, limit, true)? else {
        bail!("hackbench did not finish within {WORK_TIMEOUT_S} s");
    };
    if !done.status.success() {
        bail!(
            "hackbench failed ({}): {}",
            done.status,
            done.last_err_line()
        );
    }
    let out = done.stdout;
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
