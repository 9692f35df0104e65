//! The real `perf bench sched messaging` (Debian's linux-perf): perf's copy
//! of hackbench, groups of 20 senders × 20 receivers (processes, sockets).

use super::tool::PERF;
use super::{lower, Opts, Spec, WORK_TIMEOUT_S};
use anyhow::{Context, Result};
use std::time::Duration;

pub static SPEC: Spec = Spec {
    name: "perf-messaging",
    param: "groups",
    about: "real perf bench sched messaging -g GROUPS -l LOOPS (linux-perf): total time",
    metrics: &[lower("time", "s")],
    // As hackbench's: the same work at the same points.
    default_points: super::hackbench::group_points,
};

pub fn run(groups: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let (g, l) = (groups.to_string(), opts.loops.max(1).to_string());
    let args = ["bench", "sched", "messaging", "-g", &g, "-l", &l];
    let out = PERF.output(&args, Duration::from_secs(WORK_TIMEOUT_S))?;
    let time = parse_total_time(&out)
        .with_context(|| format!("no 'Total time:' line in perf's output: {out:?}"))?;
    Ok(vec![("time".into(), time)])
}

/// perf prints "     Total time: 0.154 [sec]".
fn parse_total_time(out: &str) -> Option<f64> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Total time:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perf 6.1's output, captured.
    const OUT: &str = "# Running 'sched/messaging' benchmark:
# 20 sender and receiver processes per group
# 2 groups == 80 processes run

     Total time: 0.154 [sec]
";

    #[test]
    fn parses_total_time() {
        assert_eq!(parse_total_time(OUT), Some(0.154));
        assert_eq!(parse_total_time("# Running\n"), None);
        assert_eq!(parse_total_time("Total time: x [sec]"), None);
    }

    #[test]
    fn perf_messaging_tiny() {
        let m = crate::workloads::tests::check("perf-messaging", 2);
        assert!(m["time"] > 0.0);
    }
}
