//! Tests that boot the scheduler in a sched_ext kernel under qemu (see
//! vm/nimble-vm) and run a guest script from tests/guest/ there. They take a
//! minute or more each, so they are ignored by default; the README's test
//! command runs them with `--include-ignored`.

use std::process::Command;
use std::sync::Mutex;

/// One VM at a time: they already use every host core.
static VM: Mutex<()> = Mutex::new(());

fn in_vm(topo: &str, script: &str) {
    let _one = VM.lock().unwrap_or_else(|e| e.into_inner());
    let root = env!("CARGO_MANIFEST_DIR");
    let bin = env!("CARGO_BIN_EXE_scx_nimble");
    let status = Command::new(format!("{root}/vm/nimble-vm"))
        .current_dir(root)
        .args(["run", "--topo", topo, "--timeout", "400"])
        .arg("--add")
        .arg(format!("{bin}:/bin/scx_nimble"))
        .args(["--", &format!("/tests/{script}")])
        .status()
        .expect("running vm/nimble-vm (did `vm/nimble-vm setup` run?)");
    assert!(
        status.success(),
        "{script} in VM topology {topo} failed: {status}"
    );
}

macro_rules! vm_tests {
    ($($name:ident: $topo:literal, $script:literal;)*) => {$(
        #[test]
        #[ignore = "boots a VM; run with --include-ignored"]
        fn $name() {
            in_vm($topo, $script);
        }
    )*};
}

vm_tests! {
    flat_attach_load: "flat", "attach_load.sh";
    n2l4_attach_load: "n2l4", "attach_load.sh";
    n4_attach_load: "n4", "attach_load.sh";
    smt_attach_load: "smt", "attach_load.sh";
    n2l4_pinned_task_runs: "n2l4", "pinned.sh";
    n2l4_hotplug_restart: "n2l4", "hotplug.sh";
    flat_error_cases: "flat", "errors.sh";
}
