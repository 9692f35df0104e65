//! STREAM-style memory bandwidth: THREADS threads, each owning (allocating
//! and first-touching, so its pages land on its node) a contiguous chunk of
//! arrays a, b, c; copy, scale, add, triad, each timed across all threads.

use super::{dedup_points, higher, Crew, Opts, Spec, WORK_TIMEOUT_S};
use anyhow::{bail, Result};
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

pub static SPEC: Spec = Spec {
    name: "stream",
    param: "threads",
    about: "STREAM-style copy/scale/add/triad over MEM_MB MiB, THREADS threads: best MB/s",
    metrics: &[
        higher("triad", "MB/s"),
        higher("copy", "MB/s"),
        higher("scale", "MB/s"),
        higher("add", "MB/s"),
    ],
    default_points: |n| dedup_points(vec![n / 4, n / 2, n]),
};

const SCALAR: f64 = 3.0;
/// Kernels in STREAM's order, with the arrays each moves (as STREAM counts).
const KERNELS: [(&str, f64); 4] = [("copy", 2.0), ("scale", 2.0), ("add", 3.0), ("triad", 3.0)];

/// One thread: allocates its chunks, then runs `reps` rounds of the four
/// kernels; thread 0 times each kernel between barriers (all threads' work).
fn worker(n: usize, reps: usize, bar: &Barrier, timer: bool) -> Vec<[f64; 4]> {
    // vec![x; n] with x != 0 writes every element here: first touch.
    let (mut a, mut b, mut c) = (vec![1.0f64; n], vec![2.0f64; n], vec![0.0f64; n]);
    c.iter_mut().for_each(|x| *x = black_box(0.0));
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let mut t = [0.0; 4];
        for (k, tk) in t.iter_mut().enumerate() {
            bar.wait();
            let start = Instant::now();
            match k {
                0 => c.iter_mut().zip(&a).for_each(|(c, a)| *c = *a),
                1 => b.iter_mut().zip(&c).for_each(|(b, c)| *b = SCALAR * c),
                2 => c
                    .iter_mut()
                    .zip(a.iter().zip(&b))
                    .for_each(|(c, (a, b))| *c = a + b),
                _ => a
                    .iter_mut()
                    .zip(b.iter().zip(&c))
                    .for_each(|(a, (b, c))| *a = b + SCALAR * c),
            }
            black_box((&mut a, &mut b, &mut c));
            bar.wait();
            if timer {
                *tk = start.elapsed().as_secs_f64();
            }
        }
        times.push(t);
    }
    times
}

pub fn run(threads: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let total_elems = opts.mem_mb as usize * (1 << 20) / 8;
    let n = total_elems / 3 / threads as usize;
    if n == 0 {
        bail!(
            "stream: {} MiB is too little for {threads} threads",
            opts.mem_mb
        );
    }
    // STREAM's NTIMES: at least 2, the first (warm-up) not counted.
    let reps = opts.loops.max(2) as usize;
    let bar = Arc::new(Barrier::new(threads as usize));
    let mut crew = Crew::new();
    for t in 0..threads {
        let bar = bar.clone();
        crew.spawn(move || worker(n, reps, &bar, t == 0))?;
    }
    let deadline = Instant::now() + Duration::from_secs(WORK_TIMEOUT_S);
    let times = crew.join(deadline, "stream")?.swap_remove(0);
    let bytes = |arrays: f64| arrays * (n * threads as usize * 8) as f64;
    let mut best = [f64::INFINITY; 4];
    for t in &times[1..] {
        for k in 0..4 {
            best[k] = best[k].min(t[k]);
        }
    }
    // Primary (triad) first, then STREAM's order.
    let rate = |k: usize| bytes(KERNELS[k].1) / best[k].max(1e-9) / 1e6;
    Ok([3, 0, 1, 2]
        .iter()
        .map(|&k| (KERNELS[k].0.to_string(), rate(k)))
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn stream_tiny() {
        let m = crate::workloads::tests::check("stream", 2);
        for k in ["triad", "copy", "scale", "add"] {
            assert!(m[k] > 0.0, "{k}");
        }
    }
}
