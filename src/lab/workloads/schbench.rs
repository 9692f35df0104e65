//! The lab's own schbench-style wakeup latency (after Chris Mason's schbench,
//! but not it): message threads wake their workers through futexes and wait
//! for them; each worker measures how long it took from the wake to running,
//! then thinks briefly.

use super::{higher, lower, pow2_upto, Crew, Opts, Spec};
use anyhow::{bail, Result};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub static SPEC: Spec = Spec {
    name: "schbench",
    param: "workers",
    about: "own futex wakeup test, not Chris Mason's schbench: 2 message threads wake WORKERS",
    metrics: &[
        lower("p99", "us"),
        lower("p50", "us"),
        lower("p99.9", "us"),
        higher("wakeups_per_s", "1/s"),
    ],
    default_points: pow2_upto,
};

const MESSAGE_THREADS: usize = 2;
/// Think time: a fixed amount of arithmetic (≈ 30 µs on a current x86 core),
/// fixed rather than calibrated so every variant gets the same work.
const THINK_ITERS: u32 = 12_000;
/// Futex waits time out so a stop is always seen.
const WAIT: Duration = Duration::from_millis(100);

/// A futex word: 1 = posted. Workers and message threads each own one.
#[derive(Default)]
struct Slot {
    futex: AtomicU32,
    wake_ns: AtomicU64,
}

impl Slot {
    fn post(&self) {
        self.futex.store(1, Release);
        futex(
            &self.futex,
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
            None,
        );
    }

    /// Waits up to WAIT for a post; true (and consumed) if there was one.
    fn take(&self) -> bool {
        if self.futex.swap(0, Acquire) == 1 {
            return true;
        }
        futex(
            &self.futex,
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            0,
            Some(WAIT),
        );
        self.futex.swap(0, Acquire) == 1
    }
}

/// CLOCK_MONOTONIC in ns (what schbench measures wakeup latency with).
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn futex(word: &AtomicU32, op: i32, val: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: word lives as long as the call; EINTR/EAGAIN/ETIMEDOUT are
    // all handled by the callers re-checking the word.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, val, tsp, 0usize, 0u32) };
}

struct Group {
    msg: Slot,
    pending: AtomicU32,
    workers: Vec<Slot>,
    stop: AtomicBool,
}

fn think() {
    let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..THINK_ITERS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x);
}

/// Wakeup latencies in ns (u32: saturates at 4.3 s, halving the memory).
fn worker(g: &Group, me: usize) -> Vec<u32> {
    let mut lat = Vec::with_capacity(1 << 14);
    let slot = &g.workers[me];
    while !g.stop.load(Relaxed) {
        // The stop post is not a measured wakeup.
        if !slot.take() || g.stop.load(Relaxed) {
            continue;
        }
        let ns = mono_ns().saturating_sub(slot.wake_ns.load(Relaxed));
        lat.push(u32::try_from(ns).unwrap_or(u32::MAX));
        think();
        if g.pending.fetch_sub(1, AcqRel) == 1 {
            g.msg.post();
        }
    }
    lat
}

fn message(g: &Group, deadline: Instant) {
    while Instant::now() < deadline {
        g.pending.store(g.workers.len() as u32, Release);
        for w in &g.workers {
            w.wake_ns.store(mono_ns(), Relaxed);
            w.post();
        }
        // Until the last worker of this round posts us (or the run ends).
        while !g.msg.take() && Instant::now() < deadline {}
    }
    g.stop.store(true, Relaxed);
    g.workers.iter().for_each(Slot::post);
}

pub fn run(workers: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let secs = opts.secs.max(0.01);
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(secs);
    let mut msgs = Crew::new();
    let mut crew = Crew::new();
    for _ in 0..MESSAGE_THREADS {
        let g = Arc::new(Group {
            msg: Slot::default(),
            pending: AtomicU32::new(0),
            workers: (0..workers).map(|_| Slot::default()).collect(),
            stop: AtomicBool::new(false),
        });
        for me in 0..workers as usize {
            let g = g.clone();
            crew.spawn(move || worker(&g, me))?;
        }
        msgs.spawn(move || message(&g, deadline))?;
    }
    let end = deadline + Duration::from_secs(10) + 2 * WAIT;
    msgs.join(end, "schbench message threads")?;
    let elapsed = t0.elapsed().as_secs_f64();
    let mut lat: Vec<u32> = crew.join(end, "schbench workers")?.concat();
    if lat.is_empty() {
        bail!("schbench: no wakeups in {secs} s");
    }
    lat.sort_unstable();
    // Nearest-rank percentiles, ns → µs.
    let pct =
        |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1] as f64 / 1e3;
    Ok(vec![
        ("p99".into(), pct(0.99)),
        ("p50".into(), pct(0.50)),
        ("p99.9".into(), pct(0.999)),
        ("wakeups_per_s".into(), lat.len() as f64 / elapsed),
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn schbench_tiny() {
        let m = crate::workloads::tests::check("schbench", 2);
        assert!(m["p50"] <= m["p99"] && m["p99"] <= m["p99.9"]);
        assert!(m["wakeups_per_s"] > 0.0);
    }
}
