//! hackbench (rt-tests): process-mode groups of 20 senders × 20 receivers
//! over socketpairs; the seed's wakeup-heavy throughput test.

use super::tool::Tool;
use super::{lower, Opts, Spec, WORK_TIMEOUT_S};
use anyhow::{Context, Result};
use std::time::Duration;

pub static SPEC: Spec = Spec {
    name: "hackbench",
    param: "groups",
    about: "rt-tests hackbench -g GROUPS -l LOOPS (processes, sockets): run time",
    metrics: &[lower("time", "s")],
    default_points: group_points,
};

/// 1, 2, 4, 8 groups, up to twice the CPUs (perf-messaging's too).
pub(super) fn group_points(n: u32) -> Vec<u32> {
    [1, 2, 4, 8]
        .into_iter()
        .filter(|&g| g == 1 || g <= 2 * n)
        .collect()
}

const HACKBENCH: Tool = Tool {
    bin: "hackbench",
    package: "rt-tests",
};

pub fn run(groups: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let (g, l) = (groups.to_string(), opts.loops.max(1).to_string());
    let out = HACKBENCH.output(&["-g", &g, "-l", &l], Duration::from_secs(WORK_TIMEOUT_S))?;
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
        let m = crate::workloads::tests::check("hackbench", 2);
        assert!(m["time"] > 0.0);
    }
}
