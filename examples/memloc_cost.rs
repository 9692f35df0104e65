//! What the memory-locality scan (src/memloc/) costs on this machine: the
//! scheduler's rounds over /proc, one a second, with their CPU time.
//!
//!   cargo run --release --example memloc_cost -- [ROUNDS]
//!
//! Prints the processes seen, the numa_maps reads and the CPU time per
//! round (user + system, from getrusage), and that as a share of one CPU
//! at the default period (--mem-scan-ms 1000).
use scx_nimble::memloc::Scanner;
use std::time::{Duration, Instant};

fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("node"))
                .count()
        })
        .unwrap_or(1);
    let procs = || {
        std::fs::read_dir("/proc").map_or(0, |d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
                .count()
        })
    };
    let mut s = Scanner::new("/proc", nodes.max(2));
    s.scan(std::process::id());
    let (mut cpu, mut wall, mut reads, mut cands) = (Duration::ZERO, Duration::ZERO, 0, 0);
    for _ in 0..rounds {
        std::thread::sleep(Duration::from_secs(1));
        let (c0, w0) = (cpu_time(), Instant::now());
        let (_, r) = s.scan(std::process::id());
        cpu += cpu_time() - c0;
        wall += w0.elapsed();
        reads += r.reads;
        cands += r.candidates;
    }
    let per = cpu / rounds;
    println!(
        "{} processes, {} rounds: {:.1} candidates and {:.1} numa_maps reads a round; \
         CPU {} us a round ({:.2} % of one CPU at 1 s), wall {} us",
        procs(),
        rounds,
        cands as f64 / rounds as f64,
        reads as f64 / rounds as f64,
        per.as_micros(),
        per.as_secs_f64() * 100.0,
        (wall / rounds).as_micros()
    );
}
