//! Host-side checks of the command line: bad input and a kernel without
//! sched_ext each give one clear line and a non-zero exit.

use std::path::Path;
use std::process::{Command, Output};

fn nimble(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scx_nimble"))
        .args(args)
        .output()
        .unwrap()
}

fn one_line_error(out: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "expected one line, got: {err}");
    assert!(err.starts_with("scx_nimble: "), "{err}");
    assert!(err.contains(needle), "{err:?} lacks {needle:?}");
    assert!(out.stdout.is_empty());
}

/// scx_nimble with the test hooks pointed at `sysfs` (sched_ext's sysfs
/// directory) and at a stats socket that does not exist, so a case runs the
/// same whatever the host kernel has (src/preflight.rs, src/tui/mod.rs).
fn nimble_on(sysfs: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scx_nimble"))
        .env("SCX_NIMBLE_TEST_SCHED_EXT_SYSFS", sysfs)
        .env("SCX_NIMBLE_TEST_STATS_SOCKET", sysfs.join("no-such-socket"))
        .args(args)
        .output()
        .unwrap()
}

/// A private directory laid out like /sys/kernel/sched_ext, no scheduler loaded.
fn fake_sched_ext() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("state"), "disabled\n").unwrap();
    d
}

#[test]
fn no_sched_ext_kernel() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("sched_ext");
    one_line_error(&nimble_on(&missing, &[]), 1, "this kernel has no sched_ext");
}

#[test]
fn malformed_flags() {
    one_line_error(&nimble(&["--slice-us", "abc"]), 2, "--slice-us");
    one_line_error(&nimble(&["--slice-us", "99"]), 2, "100..=100000");
    one_line_error(&nimble(&["--stats", "0"]), 2, "between 0.1 and 3600");
    one_line_error(&nimble(&["--bogus"]), 2, "unexpected argument");
    one_line_error(&nimble(&["--numa-rule", "v5"]), 2, "--numa-rule");
    one_line_error(
        &nimble(&["--numa-patience-us", "2000000"]),
        2,
        "0..=1000000",
    );
    one_line_error(&nimble(&["tune", "--numa-rule", "eevdf"]), 2, "--numa-rule");
    one_line_error(&nimble(&["--swq", "sometimes"]), 2, "--swq");
    one_line_error(&nimble(&["--swq-shards", "0"]), 2, "1..=16");
    one_line_error(&nimble(&["--swq-shards", "17"]), 2, "1..=16");
    one_line_error(&nimble(&["--swq-affinity=yes"]), 2, "--swq-affinity");
    one_line_error(&nimble(&["tune", "--swq", "david"]), 2, "--swq");
    one_line_error(&nimble(&["--imb-formula", "v9"]), 2, "--imb-formula");
    one_line_error(&nimble(&["--imb-numa-nr", "x"]), 2, "LEVEL=VALUE");
    one_line_error(&nimble(&["--imb-numa-nr", "0=1"]), 2, "--imb-numa-nr");
    one_line_error(&nimble(&["--imb-numa-nr", "1=-1"]), 2, "--imb-numa-nr");
    one_line_error(&nimble(&["--exit-dump-len", "-1"]), 2, "--exit-dump-len");
    one_line_error(&nimble(&["--slice-us", "-5"]), 2, "--slice-us");
    one_line_error(&nimble(&["--mem-migrate-mbps", "70000"]), 2, "0..=65536");
    one_line_error(&nimble(&["--mem-scan-ms", "50"]), 2, "100..=60000");
    one_line_error(&nimble(&["--json"]), 2, "--stats <SECS>|--monitor <SECS>");
    one_line_error(&nimble(&["topology", "--cpu", "x"]), 2, "--cpu");
    one_line_error(&nimble(&["--monitor", "0"]), 2, "between 0.1 and 3600");
    one_line_error(&nimble(&["--monitor", "1", "--stats", "1"]), 2, "--stats");
    one_line_error(&nimble(&["--stats-format", "xml"]), 2, "--stats-format");
    one_line_error(&nimble(&["tui", "--interval", "x"]), 2, "--interval");
    one_line_error(
        &nimble(&["tune", "--swq-affinity", "maybe"]),
        2,
        "--swq-affinity",
    );
}

#[test]
fn corrupt_topology_snapshot() {
    // A sysfs snapshot with a garbled CPU list: one line naming the file.
    let dir = std::env::temp_dir().join(format!("nimble-corrupt-{}", std::process::id()));
    let cpu = dir.join("devices/system/cpu");
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::write(cpu.join("online"), "0-x\n").unwrap();
    let root = dir.to_str().unwrap();
    one_line_error(
        &nimble(&["topology", "--sysfs-root", root]),
        1,
        "devices/system/cpu/online",
    );
    one_line_error(
        &nimble(&["topology", "--sysfs-root", "/nonexistent"]),
        1,
        "/nonexistent",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tune_without_a_running_scheduler() {
    // As root: "not running"; as a user: "must run as root". Either way one line.
    let d = fake_sched_ext();
    let out = nimble_on(d.path(), &["tune", "--numa-rule", "v3"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("scx_nimble is not running") || err.contains("must run as root"),
        "{err}"
    );
    one_line_error(&out, 1, "scx_nimble: error: ");
}

#[test]
fn version_and_help() {
    let v = nimble(&["--version"]);
    assert!(v.status.success());
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("scx_nimble "));
    let h = nimble(&["--help"]);
    assert!(h.status.success());
    let help = String::from_utf8_lossy(&h.stdout);
    for flag in [
        "--slice-us",
        "--stats",
        "--verbose",
        "--exit-dump-len",
        "--version",
        "--numa-rule",
        "--imb-formula",
        "--swq",
        "--swq-affinity",
        "--swq-shards",
        "--monitor",
        "--json",
        "--stats-format",
        "--help-stats",
        "--mem-scan-ms",
        "--mem-migrate-mbps",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn help_stats_lists_every_metric() {
    let out = nimble(&["--help-stats"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    // A sample from each struct; the unit test in src/stats/ checks them all.
    for m in [
        "steal_l1",
        "migrate_node",
        "swq_wait_p99_us",
        "wait_p50_us",
        "numa_refused",
        "imb_numa_nr",
        "busy_ticks",
        "swq_mode",
        "thresholds",
    ] {
        assert!(text.contains(m), "--help-stats lacks {m}");
    }
}

#[test]
fn tui_without_a_running_scheduler() {
    let d = fake_sched_ext();
    one_line_error(
        &nimble_on(d.path(), &["tui"]),
        1,
        "is the scheduler running?",
    );
}
