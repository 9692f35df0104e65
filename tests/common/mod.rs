//! What the VM tests of tests/vm.rs and tests/lab.rs share: the kernel they
//! boot, and the results table `vm/nimble-vm test` prints.

use std::io::Write;

/// The kernel suite of the functional tests: trixie-backports (the newest
/// sched_ext kernel) unless NIMBLE_VM_KERNEL names another.
pub fn primary() -> String {
    std::env::var("NIMBLE_VM_KERNEL").unwrap_or_else(|_| "trixie-backports".into())
}

/// Appends the outcome, and each "CASE name seconds" line the script printed,
/// to $NIMBLE_VM_RESULTS (`vm/nimble-vm test` prints that file at the end).
pub fn record(suite: &str, topo: &str, script: &str, result: &str, secs: u64, stdout: &str) {
    let Ok(path) = std::env::var("NIMBLE_VM_RESULTS") else {
        return;
    };
    let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    else {
        return;
    };
    let _ = writeln!(f, "{suite} {topo} {script} {result} {secs}");
    for case in stdout.lines().filter_map(|l| l.strip_prefix("CASE ")) {
        if let Some((name, secs)) = case.split_once(' ') {
            let _ = writeln!(f, "{suite} {topo} {script}:{name} passed {secs}");
        }
    }
}
