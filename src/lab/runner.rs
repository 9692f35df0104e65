//! Runs a plan: rounds of every variant in rotated order, each variant
//! attached once per round for all its samples. Everything observed is an
//! [`Event`], sent to a sink as it happens: collected in memory natively,
//! printed as marked lines from the VM guest for the host to collect.

use crate::child;
use crate::plan::{Plan, Variant};
use crate::variant;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One line of the guest's output carries one event after this marker.
pub const MARK: &str = "@@LAB@@ ";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event {
    /// Where the experiment ran.
    Env(Env),
    /// A variant's scheduler attached (once per round).
    Attach {
        round: u32,
        variant: String,
        ops: String,
        attach_s: f64,
    },
    Sample(Sample),
    /// The variant's scheduler fell off (it exited, or the kernel unloaded
    /// it) during a sample: that sample is dropped, the variant's round
    /// ends, and the next rounds try it again. How often this happens is a
    /// result too.
    Detached {
        round: u32,
        variant: String,
        message: String,
    },
    /// The run stopped on this error; samples before it stand.
    Error {
        message: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Env {
    pub kernel: String,
    pub date: String,
    pub cpus: u32,
    pub nodes: u32,
    pub llcs: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub round: u32,
    pub variant: String,
    pub workload: String,
    pub point: u32,
    pub metrics: Vec<(String, f64)>,
    pub wall_s: f64,
}

pub fn env() -> Env {
    let uname = {
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        unsafe { libc::uname(&mut u) };
        unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    let count = |dir: &str, pre: &str| -> u32 {
        std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        n.strip_prefix(pre)
                            .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
                    })
                    .count() as u32
            })
            .unwrap_or(0)
    };
    // LLCs: distinct shared_cpu_list of each CPU's last-level cache.
    let mut llcs = std::collections::BTreeSet::new();
    let cpus = count("/sys/devices/system/cpu", "cpu");
    for c in 0..cpus {
        let base = format!("/sys/devices/system/cpu/cpu{c}/cache");
        let last = (0..8)
            .rev()
            .map(|i| format!("{base}/index{i}/shared_cpu_list"))
            .find_map(|p| std::fs::read_to_string(p).ok());
        if let Some(l) = last {
            llcs.insert(l.trim().to_string());
        }
    }
    Env {
        kernel: uname,
        date: now_utc(),
        cpus,
        nodes: count("/sys/devices/system/node", "node").max(1),
        llcs: llcs.len().max(1) as u32,
    }
}

/// ISO 8601, UTC, from the system clock (no date crate for one line).
pub fn now_utc() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::gmtime_r(&t, &mut tm) };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// Runs every round; the first error ends the run (after an Error event).
pub fn run(plan: &Plan, sink: &mut dyn FnMut(Event)) -> Result<()> {
    sink(Event::Env(env()));
    let r = run_rounds(plan, sink);
    if let Err(e) = &r {
        sink(Event::Error {
            message: format!("{e:#}"),
        });
    }
    r
}

/// /proc/sys's file for a dotted sysctl name.
fn sysctl_path(key: &str) -> String {
    format!("/proc/sys/{}", key.replace('.', "/"))
}

/// The variants' sysctls: each one's values while it runs, the values
/// found at the start for the others and after the run.
struct Sysctls(Vec<(String, String)>);

impl Sysctls {
    fn read(plan: &Plan) -> Result<Self> {
        let mut found = Vec::new();
        for (k, _) in plan.variants.iter().flat_map(|v| &v.sysctls) {
            if !found.iter().any(|(f, _): &(String, String)| f == k) {
                let v = std::fs::read_to_string(sysctl_path(k))
                    .with_context(|| format!("sysctl {k}: reading {}", sysctl_path(k)))?;
                found.push((k.clone(), v.trim().to_string()));
            }
        }
        Ok(Self(found))
    }

    fn write(key: &str, value: &str) -> Result<()> {
        std::fs::write(sysctl_path(key), value)
            .with_context(|| format!("sysctl {key}={value}: writing {}", sysctl_path(key)))
    }

    fn apply(&self, v: &Variant) -> Result<()> {
        for (k, orig) in &self.0 {
            let val = v
                .sysctls
                .iter()
                .find(|(x, _)| x == k)
                .map_or(orig, |(_, x)| x);
            Self::write(k, val)?;
        }
        Ok(())
    }
}

impl Drop for Sysctls {
    fn drop(&mut self) {
        for (k, v) in &self.0 {
            let _ = Self::write(k, v);
        }
    }
}

fn run_rounds(plan: &Plan, sink: &mut dyn FnMut(Event)) -> Result<()> {
    let sysctls = Sysctls::read(plan)?;
    for round in 0..plan.runs {
        for v in plan.round_order(round) {
            eprintln!("nimble-lab: round {}/{}: {}", round + 1, plan.runs, v.label);
            sysctls.apply(v)?;
            let cgroup = v.cgroup.as_deref().map(make_cgroup).transpose()?;
            let mut sched = variant::start(v, Duration::from_secs(plan.attach_timeout_s))?;
            if !sched.ops.is_empty() {
                eprintln!(
                    "nimble-lab:   attached as {} in {:.1} s",
                    sched.ops, sched.attach_s
                );
            }
            sink(Event::Attach {
                round,
                variant: v.label.clone(),
                ops: sched.ops.clone(),
                attach_s: sched.attach_s,
            });
            'variant: for e in &plan.experiments {
                for &point in &e.points {
                    let t0 = Instant::now();
                    let metrics = sample(
                        &e.workload,
                        point,
                        &plan.opts(&e.workload),
                        plan.sample_timeout_s,
                        cgroup.as_ref(),
                    )
                    .with_context(|| format!("{}: {} at {point}", v.label, e.workload))?;
                    // Still attached after the sample: the numbers are the variant's.
                    if let Err(err) = sched.check() {
                        let message = format!("{err:#}");
                        eprintln!(
                            "nimble-lab:   DETACHED during {} at {point}: {message}",
                            e.workload
                        );
                        sink(Event::Detached {
                            round,
                            variant: v.label.clone(),
                            message,
                        });
                        break 'variant;
                    }
                    // The host's progress (progress.rs) prints the sample.
                    let wall_s = t0.elapsed().as_secs_f64();
                    sink(Event::Sample(Sample {
                        round,
                        variant: v.label.clone(),
                        workload: e.workload.clone(),
                        point,
                        metrics,
                        wall_s,
                    }));
                }
            }
            sched.stop()?;
        }
    }
    Ok(())
}

/// Makes /sys/fs/cgroup/`path` and turns the cpu controller on at each
/// level above it, so cpu.weight applies all the way down; returns its
/// cgroup.procs path for [`sample`].
fn make_cgroup(path: &str) -> Result<CString> {
    let root = std::path::Path::new("/sys/fs/cgroup");
    let mut dir = root.to_path_buf();
    for part in path.split('/') {
        // Fails harmlessly where it is on already.
        let _ = std::fs::write(dir.join("cgroup.subtree_control"), "+cpu");
        dir.push(part);
        if !dir.is_dir() {
            std::fs::create_dir(&dir)
                .with_context(|| format!("making cgroup {}", dir.display()))?;
        }
    }
    let weight = dir.join("cpu.weight");
    anyhow::ensure!(
        weight.exists(),
        "{}: no cpu controller there",
        dir.display()
    );
    Ok(CString::new(
        dir.join("cgroup.procs").into_os_string().into_vec(),
    )?)
}

/// One sample in a child process (`nimble-lab __workload`), killed after
/// `timeout_s`; in the cgroup whose cgroup.procs is `cgroup`, if given,
/// from before it execs (so every task it forks starts there).
fn sample(
    workload: &str,
    point: u32,
    o: &crate::workloads::Opts,
    timeout_s: u64,
    cgroup: Option<&CString>,
) -> Result<Vec<(String, f64)>> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    if let Some(procs) = cgroup.cloned() {
        // SAFETY: only open/write/close between fork and exec, no allocation.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let r = match libc::write(fd, b"0".as_ptr().cast(), 1) {
                    1 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                };
                libc::close(fd);
                r
            });
        }
    }
    let child = cmd
        .args(["__workload", workload, &point.to_string()])
        .args([
            "--secs",
            &o.secs.to_string(),
            "--loops",
            &o.loops.to_string(),
        ])
        .args(["--mem-mb", &o.mem_mb.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let Some(done) = child::wait(child, Duration::from_secs(timeout_s), false)? else {
        bail!("killed after {timeout_s} s (--sample-timeout)");
    };
    if !done.status.success() {
        bail!(
            "workload failed ({}): {}",
            done.status,
            done.last_err_line()
        );
    }
    let out = done.stdout;
    serde_json::from_str(out.trim())
        .with_context(|| format!("bad workload output '{}'", out.trim()))
}
