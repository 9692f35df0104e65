//! The real `perf bench sched pipe` (Debian's linux-perf): two processes
//! ping-pong a pipe; PAIRS such pairs run at once, each its own perf.

use super::tool::PERF;
use super::{higher, lower, pow2_upto, Opts, Spec, WORK_TIMEOUT_S};
use anyhow::{Context, Result};
use std::time::{Duration, Instant};

pub static SPEC: Spec = Spec {
    name: "perf-pipe",
    param: "pairs",
    about: "real perf bench sched pipe -l LOOPS (linux-perf), PAIRS at once: mean usecs/op",
    metrics: &[lower("usecs_per_op", "us"), higher("ops_per_s", "1/s")],
    // Up to one task per CPU: beyond that it measures the queueing.
    default_points: |n| pow2_upto(n / 2),
};

pub fn run(pairs: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let l = opts.loops.max(1).to_string();
    let args = ["bench", "sched", "pipe", "-l", &l];
    // All start before any is waited for; an error drops (kills) the rest.
    let running = (0..pairs)
        .map(|_| PERF.spawn(&args))
        .collect::<Result<Vec<_>>>()?;
    let deadline = Instant::now() + Duration::from_secs(WORK_TIMEOUT_S);
    let (mut usecs, mut ops) = (0.0, 0.0);
    for g in running {
        let out = g.finish(deadline)?;
        let (u, o) = parse(&out)
            .with_context(|| format!("no 'usecs/op' and 'ops/sec' in perf's output: {out:?}"))?;
        usecs += u;
        ops += o;
    }
    Ok(vec![
        ("usecs_per_op".into(), usecs / pairs as f64),
        ("ops_per_s".into(), ops),
    ])
}

/// (usecs/op, ops/sec) from perf's "   22.472800 usecs/op" and "   44498 ops/sec".
fn parse(out: &str) -> Option<(f64, f64)> {
    Some((
        super::tool::number_before(out, "usecs/op")?,
        super::tool::number_before(out, "ops/sec")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perf 6.1's output, captured.
    const OUT: &str = "# Running 'sched/pipe' benchmark:
# Executed 10000 pipe operations between two processes

     Total time: 0.224 [sec]

      22.472800 usecs/op
          44498 ops/sec
";

    #[test]
    fn parses_usecs_and_ops() {
        assert_eq!(parse(OUT), Some((22.4728, 44498.0)));
        assert_eq!(parse("     Total time: 0.224 [sec]\n"), None);
    }

    #[test]
    fn perf_pipe_tiny() {
        let m = crate::workloads::tests::check("perf-pipe", 2);
        assert!(m["usecs_per_op"] > 0.0 && m["ops_per_s"] > 0.0);
    }
}
