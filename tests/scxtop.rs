//! scxtop (sched-ext/scx's observability tool, from the Rust registry)
//! reads scx_nimble's stats socket: tests/guest/scxtop.sh asks its MCP
//! server for stats://scheduler/raw in the VM. Release tier only
//! (`vm/nimble-vm test --full`): scxtop takes minutes to build, and
//! `vm/nimble-vm setup --peers` installs it; without it this fails.

mod common;

mod full {
    use std::process::Command;

    #[test]
    #[ignore = "boots a VM; release tier (vm/nimble-vm test --full)"]
    fn scxtop_reads_the_stats_socket() {
        let root = env!("CARGO_MANIFEST_DIR");
        let scxtop = std::env::var_os("PATH")
            .and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join("scxtop"))
                    .find(|f| f.is_file())
            })
            .expect("scxtop not on PATH: vm/nimble-vm setup --peers installs it");
        let kernel = super::common::primary();
        let t0 = std::time::Instant::now();
        let out = Command::new(format!("{root}/vm/nimble-vm"))
            .current_dir(root)
            .args([
                "run",
                "--kernel",
                &kernel,
                "--topo",
                "n2l4",
                "--timeout",
                "400",
            ])
            .arg("--add")
            .arg(format!(
                "{}:/bin/scx_nimble",
                env!("CARGO_BIN_EXE_scx_nimble")
            ))
            .arg("--add")
            .arg(format!("{}:/bin/scxtop", scxtop.display()))
            .args(["--", "sh /tests/suite.sh -t 300 scxtop.sh"])
            .output()
            .expect("running vm/nimble-vm");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let ok = stdout.contains("PASS: scxtop reads scx_nimble's stats socket");
        let result = if ok { "passed" } else { "FAILED" };
        super::common::record(
            &kernel,
            "n2l4",
            "scxtop.sh",
            result,
            t0.elapsed().as_secs(),
            "",
        );
        assert!(ok, "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    }
}
