//! UnixBench shell8-style fork/exec: SHELLS threads each fork, have the child
//! report its first CPU and exec `true`, and reap it; also where fork placed
//! the child relative to its parent (same node, same LLC).

use super::topo::Topo;
use super::{cur_cpu, higher, Crew, Opts, Spec};
use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub static SPEC: Spec = Spec {
    name: "shell8",
    param: "shells",
    about:
        "UnixBench shell8-style: SHELLS concurrent fork+exec(true) loops; rate and child placement",
    metrics: &[
        higher("execs_per_s", "1/s"),
        higher("same_node_pct", "%"),
        higher("same_llc_pct", "%"),
    ],
    default_points: |_| vec![8],
};

/// argv for exec: `true` itself, or `sh -c true` where there is none.
fn true_argv() -> Result<Vec<CString>> {
    let path = std::env::var("PATH").unwrap_or_default();
    let dirs = ["/bin", "/usr/bin"]
        .into_iter()
        .chain(path.split(':').filter(|d| !d.is_empty()));
    let argv: Vec<String> = match dirs
        .clone()
        .map(|d| format!("{d}/true"))
        .find(|p| Path::new(p).exists())
    {
        Some(t) => vec![t],
        None => match dirs
            .map(|d| format!("{d}/sh"))
            .find(|p| Path::new(p).exists())
        {
            Some(sh) => vec![sh, "-c".into(), "true".into()],
            None => bail!("shell8: neither 'true' nor 'sh' found (/bin, /usr/bin, PATH)"),
        },
    };
    Ok(argv
        .into_iter()
        .map(|s| CString::new(s).expect("no NUL in path"))
        .collect())
}

#[derive(Default)]
struct Tally {
    execs: u64,
    placed: u64,
    same_node: u64,
    same_llc: u64,
}

fn shell(argv: &[CString], topo: &Topo, deadline: Instant) -> Result<Tally> {
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let mut fds = [0i32; 2];
    // Non-blocking read end: a child that never wrote cannot block us; both
    // ends close on exec, so other threads' children do not hold them.
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        bail!("pipe2: {}", std::io::Error::last_os_error());
    }
    let [rd, wr] = fds;
    let mut t = Tally::default();
    let res = (|| {
        while Instant::now() < deadline {
            let parent = cur_cpu();
            // SAFETY: the child only calls async-signal-safe functions
            // (sched_getcpu, write, execv, _exit) on memory prepared before.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                unsafe {
                    let cpu = libc::sched_getcpu();
                    libc::write(wr, &cpu as *const i32 as *const libc::c_void, 4);
                    libc::execv(ptrs[0], ptrs.as_ptr());
                    libc::_exit(127);
                }
            }
            if pid < 0 {
                bail!("fork: {}", std::io::Error::last_os_error());
            }
            let mut status = 0;
            // SAFETY: pid is our child; EINTR is retried.
            while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    bail!("waitpid: {e}");
                }
            }
            if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                bail!("{:?} failed (wait status {status:#x})", argv[0]);
            }
            t.execs += 1;
            let mut cpu = -1i32;
            // SAFETY: reads at most 4 bytes into cpu.
            let n = unsafe { libc::read(rd, &mut cpu as *mut i32 as *mut libc::c_void, 4) };
            let child = u32::try_from(cpu).ok().filter(|_| n == 4);
            if let (Some(p), Some(c)) = (parent, child) {
                t.placed += 1;
                t.same_node += u64::from(topo.node(p).is_some() && topo.node(p) == topo.node(c));
                t.same_llc += u64::from(topo.llc(p).is_some() && topo.llc(p) == topo.llc(c));
            }
        }
        Ok(())
    })();
    // SAFETY: closing our own descriptors once.
    unsafe {
        libc::close(rd);
        libc::close(wr);
    }
    res.map(|_| t)
}

pub fn run(shells: u32, opts: &Opts) -> Result<Vec<(String, f64)>> {
    let argv = Arc::new(true_argv()?);
    let topo = Arc::new(Topo::read());
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(opts.secs.max(0.01));
    let mut crew = Crew::new();
    for _ in 0..shells {
        let (argv, topo) = (argv.clone(), topo.clone());
        crew.spawn(move || shell(&argv, &topo, deadline))?;
    }
    let tallies = crew.join(deadline + Duration::from_secs(30), "shell8")?;
    let elapsed = t0.elapsed().as_secs_f64();
    let mut all = Tally::default();
    for t in tallies {
        let t = t.context("shell8")?;
        all.execs += t.execs;
        all.placed += t.placed;
        all.same_node += t.same_node;
        all.same_llc += t.same_llc;
    }
    if all.placed == 0 {
        bail!("shell8: no child reported its CPU");
    }
    let pct = |x: u64| 100.0 * x as f64 / all.placed as f64;
    Ok(vec![
        ("execs_per_s".into(), all.execs as f64 / elapsed),
        ("same_node_pct".into(), pct(all.same_node)),
        ("same_llc_pct".into(), pct(all.same_llc)),
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn shell8_tiny() {
        let m = crate::workloads::tests::check("shell8", 2);
        assert!(m["execs_per_s"] > 0.0);
        assert!((0.0..=100.0).contains(&m["same_node_pct"]));
        assert!((0.0..=100.0).contains(&m["same_llc_pct"]));
    }
}
