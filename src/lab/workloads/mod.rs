//! The lab's workloads. Each runs once per sample, in a child process
//! (`nimble-lab __workload NAME POINT`), so a hung or crashed workload never
//! takes the experiment's bookkeeping with it.
//!
//! A workload has one parameter (its "point": groups, workers, clients,
//! threads…) and reports one or more metrics; the first is the primary one,
//! used for the seed-style table's headline and the plot.

use anyhow::{anyhow, bail, Result};

mod crew;
mod cyclictest;
mod dbench_tbench;
mod hackbench;
mod mason_schbench;
mod numa;
mod perf_messaging;
mod perf_pipe;
mod schbench;
mod shell8;
mod stream;
mod tbench;
mod tool;
mod topo;

pub(crate) use crew::Crew;
pub(crate) use dbench_tbench::LOADFILE as TBENCH_LOADFILE;
pub(crate) use mason_schbench::tool as schbench_tool;
pub(crate) use topo::cur_cpu;

/// One number a workload reports.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
    pub higher_is_better: bool,
}

/// What the lab needs to know about a workload before running it.
#[derive(Debug)]
pub struct Spec {
    pub name: &'static str,
    /// What the point means, e.g. "groups", "workers", "clients", "threads".
    pub param: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    /// metrics[0] is the primary metric.
    pub metrics: &'static [Metric],
    /// Default points for a machine with `nr_cpus` CPUs.
    pub default_points: fn(nr_cpus: u32) -> Vec<u32>,
}

/// Knobs shared by all workloads (each uses the ones that apply to it).
#[derive(Debug, Clone, Copy)]
pub struct Opts {
    /// Duration of the time-based workloads (schbench, tbench, shell8,
    /// dbench-tbench), s.
    pub secs: f64,
    /// Loops of the work-based ones (hackbench -l, perf bench -l, STREAM
    /// repetitions, numa passes).
    pub loops: u32,
    /// Memory of the memory-bound ones (STREAM arrays, numa01/02 buffers), MiB in all.
    pub mem_mb: u32,
}

pub const ALL: &[&Spec] = &[
    &hackbench::SPEC,
    &schbench::SPEC,
    &tbench::SPEC,
    &stream::SPEC,
    &shell8::SPEC,
    &numa::SPEC01,
    &numa::SPEC02,
    &dbench_tbench::SPEC,
    &perf_messaging::SPEC,
    &perf_pipe::SPEC,
    &mason_schbench::SPEC,
    &cyclictest::SPEC,
];

pub fn spec(name: &str) -> Option<&'static Spec> {
    ALL.iter().copied().find(|s| s.name == name)
}

/// Runs one sample of `name` at `point`: (metric name, value) for every
/// metric of its Spec, in that order.
pub fn run(name: &str, point: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    if point == 0 {
        bail!("{name}: the point must be at least 1");
    }
    let out = match name {
        "hackbench" => hackbench::run(point, opts)?,
        "schbench" => schbench::run(point, opts)?,
        "tbench" => tbench::run(point, opts)?,
        "stream" => stream::run(point, opts)?,
        "shell8" => shell8::run(point, opts)?,
        "numa01" => numa::run01(point, opts)?,
        "numa02" => numa::run02(point, opts)?,
        "dbench-tbench" => dbench_tbench::run(point, opts)?,
        "perf-messaging" => perf_messaging::run(point, opts)?,
        "perf-pipe" => perf_pipe::run(point, opts)?,
        "mason-schbench" => mason_schbench::run(point, opts)?,
        "cyclictest" => cyclictest::run(point, opts)?,
        _ => bail!("unknown workload '{name}'"),
    };
    // Every workload must report exactly its Spec's metrics, in order.
    let spec = spec(name).ok_or_else(|| anyhow!("workload '{name}' has no Spec"))?;
    let names: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
    let want: Vec<&str> = spec.metrics.iter().map(|m| m.name).collect();
    if names != want {
        bail!("{name}: reported {names:?}, expected {want:?}");
    }
    Ok(out)
}

/// A metric where more is better.
pub(crate) const fn higher(name: &'static str, unit: &'static str) -> Metric {
    Metric {
        name,
        unit,
        higher_is_better: true,
    }
}

/// A metric where less is better.
pub(crate) const fn lower(name: &'static str, unit: &'static str) -> Metric {
    Metric {
        name,
        unit,
        higher_is_better: false,
    }
}

/// Upper bound on a work-based sample (STREAM, numa, hackbench), so that a
/// workload always terminates even outside the lab's own sample timeout.
pub(crate) const WORK_TIMEOUT_S: u64 = 3600;

/// Powers of two from 1 up to `max` (at least [1]).
pub(crate) fn pow2_upto(max: u32) -> Vec<u32> {
    std::iter::successors(Some(1u32), |&p| p.checked_mul(2))
        .take_while(|&p| p <= max.max(1))
        .collect()
}

/// `pts` with each clamped to >= 1, sorted and deduplicated.
pub(crate) fn dedup_points(mut pts: Vec<u32>) -> Vec<u32> {
    pts.iter_mut().for_each(|p| *p = (*p).max(1));
    pts.sort_unstable();
    pts.dedup();
    pts
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn tiny() -> Opts {
        Opts {
            secs: 0.3,
            loops: 2,
            mem_mb: 8,
        }
    }

    /// Runs `name` tiny at `point`, checks every metric is finite, and
    /// returns them by name.
    pub fn check(name: &str, point: u32) -> std::collections::HashMap<String, f64> {
        let out = run(name, point, &tiny()).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        for (k, v) in &out {
            assert!(v.is_finite(), "{name}: {k} = {v}");
            assert!(*v >= 0.0, "{name}: {k} = {v}");
        }
        eprintln!("{name} {point}: {out:?}");
        out.into_iter().collect()
    }

    #[test]
    fn all_in_order_with_points() {
        let names: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        let want = [
            "hackbench",
            "schbench",
            "tbench",
            "stream",
            "shell8",
            "numa01",
            "numa02",
            "dbench-tbench",
            "perf-messaging",
            "perf-pipe",
            "mason-schbench",
            "cyclictest",
        ];
        assert_eq!(names, want);
        for s in ALL {
            assert!(!s.metrics.is_empty());
            for n in [1, 2, 8, 64] {
                let p = (s.default_points)(n);
                assert!(
                    !p.is_empty() && p.iter().all(|&x| x >= 1),
                    "{} {n}: {p:?}",
                    s.name
                );
            }
        }
        assert_eq!(pow2_upto(8), [1, 2, 4, 8]);
        assert_eq!(dedup_points(vec![0, 1, 2]), [1, 2]);
    }
}
