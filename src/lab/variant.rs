//! Bringing a variant's scheduler up and down, and checking it stayed up.
//!
//! A sample only counts for a variant if that variant's scheduler was
//! attached from before the sample started until after it ended: a scheduler
//! that fell off mid-run would otherwise report EEVDF's numbers as its own.

use crate::plan::{Sched, Variant};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SCX: &str = "/sys/kernel/sched_ext";

pub fn scx_state() -> Option<String> {
    fs::read_to_string(format!("{SCX}/state"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn scx_ops() -> String {
    fs::read_to_string(format!("{SCX}/root/ops"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The binary a variant runs: scx_nimble next to this executable (a build
/// tree, or /bin in the VM) before PATH; peers from PATH only.
pub fn binary(sched: &Sched) -> Result<Option<PathBuf>> {
    let name = match sched {
        Sched::Eevdf => return Ok(None),
        Sched::Nimble { .. } => "scx_nimble",
        Sched::Peer { bin, .. } => bin.as_str(),
    };
    if matches!(sched, Sched::Nimble { .. }) {
        if let Some(p) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join(name)))
            .filter(|p| p.is_file())
        {
            return Ok(Some(p));
        }
    }
    which(name)
        .map(Some)
        .with_context(|| format!("{name} not found on PATH"))
}

pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A running variant: the scheduler process (none for EEVDF).
pub struct Running {
    pub label: String,
    child: Option<Child>,
    log: PathBuf,
    /// What /sys/kernel/sched_ext/root/ops said once attached ("" for EEVDF).
    pub ops: String,
    pub attach_s: f64,
}

fn last_line(log: &Path) -> String {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no output)")
        .trim()
        .to_string()
}

/// Starts `v` and waits until the kernel reports it attached.
pub fn start(v: &Variant, timeout: Duration) -> Result<Running> {
    // A scheduler the kernel just threw out may still be on its way out.
    let t0 = Instant::now();
    while scx_state().as_deref() == Some("disabling") && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let state = scx_state();
    if let Sched::Eevdf = v.sched {
        if state.as_deref().is_some_and(|s| s != "disabled") {
            bail!(
                "{}: a sched_ext scheduler ({}) is loaded; EEVDF needs none",
                v.label,
                scx_ops()
            );
        }
        return Ok(Running {
            label: v.label.clone(),
            child: None,
            log: PathBuf::new(),
            ops: String::new(),
            attach_s: 0.0,
        });
    }
    match state.as_deref() {
        None => bail!("{}: this kernel has no sched_ext ({SCX} missing)", v.label),
        Some("disabled") => {}
        Some(s) => bail!(
            "{}: sched_ext is '{s}' ({}); stop that scheduler first",
            v.label,
            scx_ops()
        ),
    }
    let bin = binary(&v.sched)?.expect("not eevdf");
    let args = match &v.sched {
        Sched::Nimble { args } | Sched::Peer { args, .. } => args.clone(),
        Sched::Eevdf => unreachable!(),
    };
    // A private file (mode 0600, created exclusively under a name nobody
    // can predict): the lab runs as root. Removed when the variant stops.
    let label = v.label.replace(
        |c: char| !c.is_ascii_alphanumeric() && c != '.' && c != '-',
        "_",
    );
    let (out, log) = tempfile::Builder::new()
        .prefix(&format!("nimble-lab-{label}-"))
        .suffix(".log")
        .tempfile()
        .context("creating the scheduler's log file")?
        .keep()
        .context("keeping the scheduler's log file")?;
    let t0 = Instant::now();
    let child = Command::new(&bin)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("{}: cannot start {}", v.label, bin.display()))?;
    let mut r = Running {
        label: v.label.clone(),
        child: Some(child),
        log,
        ops: String::new(),
        attach_s: 0.0,
    };
    loop {
        if let Some(st) = r.child.as_mut().unwrap().try_wait()? {
            r.child = None;
            bail!(
                "{}: {} exited ({st}) before attaching: {}",
                v.label,
                bin.display(),
                last_line(&r.log)
            );
        }
        if scx_state().as_deref() == Some("enabled") {
            r.ops = scx_ops();
            r.attach_s = t0.elapsed().as_secs_f64();
            return Ok(r);
        }
        if t0.elapsed() > timeout {
            r.stop().ok();
            bail!(
                "{}: not attached within {} s: {}",
                v.label,
                timeout.as_secs(),
                last_line(&r.log)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Running {
    /// Fails if the scheduler is no longer the one attached.
    pub fn check(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if let Some(st) = child.try_wait()? {
            self.child = None;
            bail!(
                "{}: scheduler exited during the run ({st}): {}",
                self.label,
                last_line(&self.log)
            );
        }
        if scx_state().as_deref() != Some("enabled") || scx_ops() != self.ops {
            bail!(
                "{}: the kernel detached the scheduler during the run: {}",
                self.label,
                last_line(&self.log)
            );
        }
        Ok(())
    }

    /// SIGINT, as a user would; SIGKILL if it lingers. Waits for `disabled`.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let t0 = Instant::now();
        let mut status = None;
        while t0.elapsed() < Duration::from_secs(60) {
            if let Some(st) = child.try_wait()? {
                status = Some(st);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if status.is_none() {
            child.kill().ok();
            child.wait().ok();
            bail!(
                "{}: did not exit within 60 s of SIGINT (killed)",
                self.label
            );
        }
        while scx_state().as_deref().is_some_and(|s| s != "disabled") {
            if t0.elapsed() > Duration::from_secs(90) {
                bail!(
                    "{}: sched_ext still '{}' after exit",
                    self.label,
                    scx_state().unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        fs::remove_file(&self.log).ok();
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Error paths only: ask politely, then make sure it is gone.
        if let Some(mut c) = self.child.take() {
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let t0 = Instant::now();
            while matches!(c.try_wait(), Ok(None)) && t0.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(50));
            }
            c.kill().ok();
            c.wait().ok();
        }
    }
}
