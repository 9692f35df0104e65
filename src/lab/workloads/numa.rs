//! autonuma-benchmark-style memory locality. numa01: 2 processes whose
//! threads all sweep one buffer per process (so a process's threads want one
//! node); numa02: threads with private buffers. Both report the wall time,
//! how often each thread ran on the node holding the page it was sweeping
//! (asked of the kernel at each sample, so memory that moved counts where it
//! is now), and the pages the kernel migrated meanwhile.

use super::topo::{mem_node, page_node, pages_migrated, Topo};
use super::{cur_cpu, dedup_points, higher, lower, Crew, Metric, Opts, Spec, WORK_TIMEOUT_S};
use anyhow::{bail, Context, Result};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

const METRICS: &[Metric] = &[
    lower("time", "s"),
    higher("local_pct", "%"),
    lower("pages_moved", "pages"),
];

fn points(n: u32) -> Vec<u32> {
    dedup_points(vec![n / 2, n])
}

pub static SPEC01: Spec = Spec {
    name: "numa01",
    param: "threads",
    about: "autonuma numa01-style: 2 processes, THREADS/2 threads each sweeping a shared buffer",
    metrics: METRICS,
    default_points: points,
};

pub static SPEC02: Spec = Spec {
    name: "numa02",
    param: "threads",
    about: "autonuma numa02-style: THREADS threads, each sweeping its own first-touched buffer",
    metrics: METRICS,
    default_points: points,
};

/// One u64 per cache line: a pass costs a line fetch per 64 bytes, not 8.
const STRIDE: usize = 64 / 8;
/// Lines between two CPU samples (1 MiB of buffer).
const SAMPLE_EVERY: usize = (1 << 20) / 64;

/// (samples on the home node, samples) of one thread.
type Locality = (u64, u64);

/// Elements of `mib` MiB of u64, at least one page.
fn elems(mib: f64) -> usize {
    ((mib * (1 << 20) as f64) as usize / 8).max(512)
}

/// Writes every page of `buf` from this thread (first touch), and says on
/// which node it landed (where the kernel says; else this CPU's node).
fn touch(buf: &[AtomicU64], topo: &Topo) -> Option<u32> {
    buf.iter().step_by(512).for_each(|x| x.store(1, Relaxed));
    mem_node(buf).or_else(|| cur_cpu().and_then(|c| topo.node(c)))
}

/// `passes` read-modify-write sweeps over `buf`, starting at `start` so the
/// threads sharing a buffer do not move in lockstep; samples the CPU as it
/// goes, and with `trace` records each sample: `L` local, `R` remote.
fn sweep(
    buf: &[AtomicU64],
    start: usize,
    passes: u32,
    home: Option<u32>,
    topo: &Topo,
    mut trace: Option<&mut Vec<u8>>,
) -> Locality {
    let (head, tail) = buf.split_at((start * STRIDE).min(buf.len()));
    let (mut local, mut total) = (0, 0);
    for _ in 0..passes {
        // No per-line modulo: it would cost more than the line fetch.
        for (i, x) in tail.iter().chain(head).step_by(STRIDE).enumerate() {
            x.store(x.load(Relaxed).wrapping_add(1), Relaxed);
            if i % SAMPLE_EVERY == 0 {
                if let Some(node) = cur_cpu().and_then(|c| topo.node(c)) {
                    // Where this page is now; the first touch's node if
                    // the kernel cannot say.
                    let at = page_node(x as *const AtomicU64 as usize).or(home);
                    total += 1;
                    local += u64::from(Some(node) == at);
                    if let Some(t) = trace.as_deref_mut() {
                        t.push(if Some(node) == at { b'L' } else { b'R' });
                    }
                }
            }
        }
    }
    (local, total)
}

fn result(t0: Instant, moved0: u64, loc: &[Locality]) -> Result<Vec<(String, f64)>> {
    let time = t0.elapsed().as_secs_f64();
    let moved = pages_migrated().saturating_sub(moved0);
    let (local, total) = loc.iter().fold((0, 0), |(l, t), x| (l + x.0, t + x.1));
    if total == 0 {
        bail!("no CPU samples (sched_getcpu failing?)");
    }
    Ok(vec![
        ("time".into(), time),
        ("local_pct".into(), 100.0 * local as f64 / total as f64),
        ("pages_moved".into(), moved as f64),
    ])
}

/// One numa01 process: its main thread first-touches the shared buffer,
/// then `threads` threads sweep all of it.
fn process01(threads: u32, mib: f64, passes: u32, deadline: Instant) -> Result<Locality> {
    let topo = Arc::new(Topo::read());
    let buf: Arc<Vec<AtomicU64>> = Arc::new((0..elems(mib)).map(|_| AtomicU64::new(0)).collect());
    let home = touch(&buf, &topo);
    let mut crew = Crew::new();
    for t in 0..threads as usize {
        let (buf, topo) = (buf.clone(), topo.clone());
        let start = t * (buf.len() / STRIDE) / threads as usize;
        crew.spawn(move || sweep(&buf, start, passes, home, &topo, None))?;
    }
    let loc = crew.join(deadline, "numa01 threads")?;
    Ok(loc.iter().fold((0, 0), |(l, t), x| (l + x.0, t + x.1)))
}

pub fn run01(threads: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let per_proc = (threads / 2).max(1);
    let mib = opts.mem_mb as f64 / 2.0;
    let moved0 = pages_migrated();
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(WORK_TIMEOUT_S);
    let mut kids = Vec::new();
    for _ in 0..2 {
        let mut fds = [0i32; 2];
        // SAFETY: fds has room for two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            bail!("numa01: pipe2: {}", std::io::Error::last_os_error());
        }
        // SAFETY: the child only runs our own code and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // Dies with the parent, so a killed sample leaves no sweepers.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            // A panic must not unwind into the forked copy of our caller.
            let r = std::panic::catch_unwind(|| process01(per_proc, mib, opts.loops, deadline));
            let rep: [u64; 3] = match r {
                Ok(Ok((l, t))) => [0, l, t],
                _ => [1, 0, 0],
            };
            unsafe {
                libc::write(fds[1], rep.as_ptr() as *const libc::c_void, 24);
                libc::_exit(0);
            }
        }
        // SAFETY: closing our copy of the write end, so EOF means the child died.
        unsafe { libc::close(fds[1]) };
        if pid < 0 {
            unsafe { libc::close(fds[0]) };
            bail!("numa01: fork: {}", std::io::Error::last_os_error());
        }
        kids.push((pid, fds[0]));
    }
    let mut loc = Vec::new();
    let mut err = None;
    for &(pid, rd) in &kids {
        let r = report(rd, deadline);
        // SAFETY: our child and our descriptor; a child that has not exited
        // by now is killed so it cannot linger.
        unsafe {
            libc::close(rd);
            if r.is_err() {
                libc::kill(pid, libc::SIGKILL);
            }
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        match r {
            Ok(x) => loc.push(x),
            Err(e) => err = err.or(Some(e)),
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    result(t0, moved0, &loc).context("numa01")
}

/// Reads a numa01 child's [error, local, total] report, waiting at most
/// until `deadline`.
fn report(rd: i32, deadline: Instant) -> Result<Locality> {
    let mut pfd = libc::pollfd {
        fd: rd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        .min(i32::MAX as u128);
    // SAFETY: one valid pollfd.
    if unsafe { libc::poll(&mut pfd, 1, ms as i32) } != 1 {
        bail!("numa01: a process did not report within {WORK_TIMEOUT_S} s");
    }
    let mut rep = [0u64; 3];
    // SAFETY: reads at most 24 bytes into rep (the child writes them at once).
    let n = unsafe { libc::read(rd, rep.as_mut_ptr() as *mut libc::c_void, 24) };
    match (n, rep[0]) {
        (24, 0) => Ok((rep[1], rep[2])),
        (24, _) => bail!("numa01: a process failed (thread start or join)"),
        _ => bail!("numa01: a process died without reporting"),
    }
}

pub fn run02(threads: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let topo = Arc::new(Topo::read());
    let mib = opts.mem_mb as f64 / threads as f64;
    let passes = opts.loops;
    let moved0 = pages_migrated();
    let t0 = Instant::now();
    // Diagnosis (docs/lab.md, stop 61): each thread's first and last CPU,
    // its buffer's node and its samples in order on stderr.
    let trace = std::env::var_os("NIMBLE_LAB_NUMA_TRACE").is_some();
    let mut crew = Crew::new();
    for _ in 0..threads {
        let topo = topo.clone();
        crew.spawn(move || {
            // Private, and first touched by the thread that sweeps it.
            let buf: Vec<AtomicU64> = (0..elems(mib)).map(|_| AtomicU64::new(0)).collect();
            let first = cur_cpu();
            let home = touch(&buf, &topo);
            let mut samples = Vec::new();
            let loc = sweep(&buf, 0, passes, home, &topo, trace.then_some(&mut samples));
            if trace {
                eprintln!(
                    "numa02 thread: cpu {first:?} to {:?}, buffer on node {home:?}, local {}/{}: {}",
                    cur_cpu(),
                    loc.0,
                    loc.1,
                    String::from_utf8_lossy(&samples)
                );
            }
            loc
        })?;
    }
    let loc = crew.join(t0 + Duration::from_secs(WORK_TIMEOUT_S), "numa02")?;
    result(t0, moved0, &loc).context("numa02")
}

#[cfg(test)]
mod tests {
    fn check(name: &str) {
        let m = crate::workloads::tests::check(name, 2);
        assert!(m["time"] > 0.0);
        assert!((0.0..=100.0).contains(&m["local_pct"]), "{m:?}");
        assert!(m["pages_moved"] >= 0.0, "{m:?}");
    }

    #[test]
    fn numa01_tiny() {
        check("numa01");
    }

    #[test]
    fn numa02_tiny() {
        check("numa02");
    }
}
