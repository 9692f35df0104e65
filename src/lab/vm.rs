//! `--vm TOPOLOGY`: the same plan run inside the project's VM (vm/nimble-vm),
//! the guest printing its events as marked lines on the console for the host
//! to collect. The host draws the tables and plots.

use crate::plan::{Plan, Sched};
use crate::runner::{Event, MARK};
use crate::variant;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository holding vm/nimble-vm: $NIMBLE_VM's, this binary's build
/// tree (target/release/..), or the current directory.
fn repo() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("NIMBLE_VM") {
        let p = PathBuf::from(p);
        return p
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .context("NIMBLE_VM must be the path of vm/nimble-vm");
    }
    let exe = std::env::current_exe()?;
    let candidates = [
        exe.ancestors().nth(3).map(Path::to_path_buf),
        std::env::current_dir().ok(),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|d| d.join("vm/nimble-vm").is_file())
        .context(
            "--vm needs the scx_nimble repository (vm/nimble-vm): run from it or set NIMBLE_VM",
        )
}

/// `--add SRC:DST` for the real benchmarks the plan runs that nimble-vm's
/// base image lacks: schbench (built by build.rs) as /bin/schbench;
/// dbench's tbench, tbench_srv (with their libraries) and its 25 MB
/// loadfile, at their host paths. (perf is in the base image.)
fn guest_adds(plan: &Plan) -> Result<Vec<String>> {
    let runs = |w: &str| plan.experiments.iter().any(|e| e.workload == w);
    let mut adds = vec![];
    if runs("mason-schbench") {
        let bin = crate::workloads::schbench_tool().bin;
        let p = variant::which(bin)
            .or_else(|| Some(Path::new(bin).to_path_buf()).filter(|p| p.is_file()))
            .context("mason-schbench: the schbench build.rs compiled is missing (cargo build)")?;
        adds.push(format!("{}:/bin/schbench", p.display()));
    }
    if !runs("dbench-tbench") {
        return Ok(adds);
    }
    for bin in ["tbench", "tbench_srv"] {
        let p = variant::which(bin).with_context(|| {
            format!("dbench-tbench: {bin} not found on PATH (Debian package dbench)")
        })?;
        adds.push(format!("{}:/bin/{bin}", p.display()));
    }
    let lf = crate::workloads::TBENCH_LOADFILE;
    if !Path::new(lf).is_file() {
        bail!("dbench-tbench: {lf} missing (Debian package dbench)");
    }
    adds.push(format!("{lf}:{lf}"));
    Ok(adds)
}

/// Runs `plan` in a `topo` VM booting `kernel`; every event reaches `sink`
/// as it arrives. Fails if the guest run failed (after its events).
pub fn run(
    plan: &Plan,
    topo: &str,
    kernel: Option<&str>,
    timeout_s: u64,
    sink: &mut dyn FnMut(Event),
) -> Result<()> {
    let repo = repo()?;
    let exe = std::env::current_exe()?;
    let nimble = repo.join("target/release/scx_nimble");
    if plan
        .variants
        .iter()
        .any(|v| matches!(v.sched, Sched::Nimble { .. }))
        && !nimble.is_file()
    {
        bail!("{} missing: cargo build --release first", nimble.display());
    }
    let adds = guest_adds(plan)?;
    // A private directory (mode 0700, a name nobody can predict): the lab
    // runs as root.
    let tmp = tempfile::Builder::new()
        .prefix("nimble-lab-vm-")
        .tempdir()
        .context("creating a private temporary directory")?;
    let plan_file = tmp.path().join("plan.json");
    std::fs::write(&plan_file, serde_json::to_vec(plan)?)?;
    let mut cmd = Command::new(repo.join("vm/nimble-vm"));
    cmd.current_dir(&repo)
        .args(["run", "--topo", topo, "--timeout", &timeout_s.to_string()]);
    if let Some(k) = kernel {
        cmd.args(["--kernel", k]);
    }
    cmd.arg("--add")
        .arg(format!("{}:/bin/nimble-lab", exe.display()));
    cmd.arg("--add")
        .arg(format!("{}:/lab/plan.json", plan_file.display()));
    // Peers come from the host's PATH into the guest's /bin.
    for v in &plan.variants {
        if let Sched::Peer { bin, .. } = &v.sched {
            let p = variant::which(bin)
                .with_context(|| format!("{}: {bin} not found on PATH", v.label))?;
            cmd.arg("--add").arg(format!("{}:/bin/{bin}", p.display()));
        }
    }
    for add in adds {
        cmd.arg("--add").arg(add);
    }
    cmd.args(["--", "nimble-lab", "__guest", "/lab/plan.json"]);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run vm/nimble-vm")?;
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut bad = 0;
    for line in out.lines() {
        let line = line?;
        match line.find(MARK) {
            Some(i) => match serde_json::from_str::<Event>(&line[i + MARK.len()..]) {
                Ok(e) => sink(e),
                Err(_) => {
                    // A kernel message can land inside a line on the console.
                    bad += 1;
                    eprintln!("nimble-lab: unreadable event line from the guest: {line}");
                }
            },
            // The harness's own exit marker; its status is ours below.
            None if line.starts_with("@@NIMBLE_EXIT=") => {}
            None => eprintln!("{line}"),
        }
    }
    let st = child.wait()?;
    drop(tmp);
    if !st.success() {
        bail!("the VM run failed ({st}; 124 = --vm-timeout)");
    }
    if bad > 0 {
        bail!("{bad} event lines from the guest could not be read");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{test_plan, Experiment};

    #[test]
    fn dbench_files_only_for_dbench_tbench() {
        let exp = |w: &str| Experiment {
            workload: w.into(),
            points: vec![1],
        };
        let plan = test_plan(&["eevdf"], vec![exp("tbench"), exp("perf-pipe")]);
        assert!(guest_adds(&plan).unwrap().is_empty());
        let plan = test_plan(&["eevdf"], vec![exp("dbench-tbench")]);
        match guest_adds(&plan) {
            Ok(adds) => {
                assert_eq!(adds.len(), 3, "{adds:?}");
                assert!(adds[0].ends_with(":/bin/tbench") && adds[1].ends_with(":/bin/tbench_srv"));
                let lf = crate::workloads::TBENCH_LOADFILE;
                assert_eq!(adds[2], format!("{lf}:{lf}"));
            }
            // Without dbench on the host: one line naming the package.
            Err(e) => assert!(e.to_string().contains("(Debian package dbench)"), "{e}"),
        }
    }
}
