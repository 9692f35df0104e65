//! rt-tests' cyclictest with SCHED_OTHER threads beside CPU hogs: the
//! wakeup latency of periodic timers on CPUs that a loop keeps busy, i.e.
//! how soon a woken task gets its CPU back from a running one (wakeup
//! preemption). THREADS cyclictest threads (`-p 0 --policy=other`, 1 ms
//! period; cyclictest 2.x pins thread N to CPU N) and one CPU loop per CPU
//! the machine has, started first.

use super::tool::Tool;
use super::{lower, Opts, Spec, WORK_TIMEOUT_S};
use anyhow::{bail, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub static SPEC: Spec = Spec {
    name: "cyclictest",
    param: "threads",
    about: "rt-tests cyclictest -t THREADS -p 0 --policy=other beside a CPU loop per CPU: wakeup latency",
    metrics: &[lower("avg_us", "us"), lower("max_us", "us")],
    // A thread per CPU: every CPU has a sleeper and a loop.
    default_points: |n| vec![n.max(1)],
};

const CYCLICTEST: Tool = Tool {
    bin: "cyclictest",
    package: "rt-tests",
};

/// One CPU loop per CPU until dropped.
struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hogs {
    fn start(n: usize) -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Hogs { stop, threads }
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

pub fn run(threads: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let _hogs = Hogs::start(cpus);
    // -D takes whole seconds; a run shorter than a second is one second.
    let secs = (opts.secs.ceil() as u64).max(1).to_string();
    let t = threads.to_string();
    let args = [
        "-t",
        &t,
        "-p",
        "0",
        "--policy=other",
        "-i",
        "1000",
        "-D",
        &secs,
        "-q",
    ];
    let out = CYCLICTEST.output(&args, Duration::from_secs(WORK_TIMEOUT_S))?;
    let per = parse(&out);
    if per.len() != threads as usize {
        bail!(
            "cyclictest printed {} thread lines, expected {threads}: {out:?}",
            per.len()
        );
    }
    let avg = per.iter().map(|(a, _)| a).sum::<f64>() / per.len() as f64;
    let max = per.iter().map(|(_, m)| *m).fold(0.0, f64::max);
    Ok(vec![("avg_us".into(), avg), ("max_us".into(), max)])
}

/// (Avg, Max) in us of every "T: ..." line: "T: 0 ( 819) P: 0 I:1000 C: 404
/// Min: 7 Act: 15 Avg: 11 Max: 77".
fn parse(out: &str) -> Vec<(f64, f64)> {
    let field = |l: &str, key: &str| -> Option<f64> {
        let rest = l.split(key).nth(1)?;
        rest.split_whitespace().next()?.parse().ok()
    };
    out.lines()
        .filter(|l| l.trim_start().starts_with("T:"))
        .filter_map(|l| Some((field(l, "Avg:")?, field(l, "Max:")?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cyclictest 2.40's -q output, captured.
    const OUT: &str = "# /dev/cpu_dma_latency set to 0us
T: 0 (  371) P: 0 I:1000 C:    323 Min:    290 Act:33530 Avg:10193 Max:   57454
T: 1 (  372) P: 0 I:1000 C:    327 Min:    346 Act:23835 Avg: 9890 Max:   67553
";

    #[test]
    fn parses_avg_and_max_per_thread() {
        assert_eq!(parse(OUT), vec![(10193.0, 57454.0), (9890.0, 67553.0)]);
        assert!(parse("nothing").is_empty());
    }

    #[test]
    fn cyclictest_tiny() {
        let m = crate::workloads::tests::check("cyclictest", 1);
        assert!(m["max_us"] >= m["avg_us"]);
    }
}
