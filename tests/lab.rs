//! nimble-lab end to end: its command line on the host, a whole EEVDF-only
//! experiment natively (no sched_ext needed), and the README's minimal call in
//! the VM (ignored by default, like every VM test).

mod common;

use common::primary as kernel;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nimble-lab"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("running nimble-lab")
}

/// nimble-lab ARGS in the VM (`--vm`): run once more, recorded as
/// `retried` under NAME, when the guest kernel died of a stray int3 while
/// patching its text (TCG running stale code, about one boot in 100-150:
/// docs/testing.md), as tests/vm.rs does for its boots. Any other failure
/// is the test's.
fn lab_vm(args: &[&str], name: &str) -> Output {
    let run = || lab(args);
    let out = run();
    let both = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() || !(both.contains("Oops: int3") && both.contains("Kernel panic")) {
        return out;
    }
    eprintln!("{name}: the guest hit a TCG int3 oops; running it once more");
    common::record(&kernel(), "n2l4", name, "retried", 0, "");
    run()
}

/// nimble-lab ARGS, which must succeed: its stdout.
fn lab_ok(args: &[&str]) -> String {
    let out = lab(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn tmpdir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The JSON holds `runs` samples per variant and point, and each cell's
/// statistics are those of its samples; pct columns follow the baseline.
fn check_json(path: &Path, runs: usize, variants: &[&str]) -> Value {
    let j: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert!(j["error"].is_null(), "run failed: {}", j["error"]);
    assert!(!j["env"]["kernel"].as_str().unwrap().is_empty());
    let labels: Vec<&str> = j["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, variants);
    let base = j["baseline"].as_str().unwrap();
    let median_of = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        }
    };
    for x in j["experiments"].as_array().unwrap() {
        let cells = x["results"].as_array().unwrap();
        let points = x["points"].as_array().unwrap();
        assert_eq!(
            cells.len(),
            points.len() * variants.len(),
            "{}",
            x["workload"]
        );
        for c in cells {
            let s: Vec<f64> = c["samples"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let what = format!(
                "{} {} {} {}",
                x["workload"], x["metric"], c["variant"], c["point"]
            );
            assert_eq!(s.len(), runs, "{what}: samples");
            assert_eq!(c["n"].as_u64().unwrap() as usize, runs, "{what}: n");
            let mean = s.iter().sum::<f64>() / runs as f64;
            let sd = if runs > 1 {
                (s.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (runs - 1) as f64).sqrt()
            } else {
                0.0
            };
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
            assert!(close(c["mean"].as_f64().unwrap(), mean), "{what}: mean");
            assert!(close(c["stddev"].as_f64().unwrap(), sd), "{what}: stddev");
            assert!(
                close(c["median"].as_f64().unwrap(), median_of(&s)),
                "{what}: median"
            );
            let (lo, hi) = s
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
            assert!(
                close(c["min"].as_f64().unwrap(), lo) && close(c["max"].as_f64().unwrap(), hi),
                "{what}"
            );
            // pct vs the baseline's median at the same point, positive = better.
            let b = cells
                .iter()
                .find(|b| b["variant"] == base && b["point"] == c["point"])
                .unwrap()["median"]
                .as_f64()
                .unwrap();
            let m = median_of(&s);
            let pct = if x["higher_is_better"].as_bool().unwrap() {
                (m - b) / b * 100.0
            } else {
                (b - m) / b * 100.0
            };
            if b != 0.0 {
                assert!(
                    close(c["pct_vs_baseline"].as_f64().unwrap(), pct),
                    "{what}: pct"
                );
            }
        }
    }
    j
}

#[test]
fn help_documents_everything() {
    let out = lab(&["--help"]);
    assert!(out.status.success());
    let h = String::from_utf8_lossy(&out.stdout);
    for w in [
        "hackbench",
        "schbench",
        "tbench",
        "stream",
        "shell8",
        "numa01",
        "numa02",
        "dbench-tbench",
        "perf-messaging",
        "perf-pipe",
        "not dbench's tbench",
        "not Chris Mason's schbench",
        "seed000",
        "seed002",
        "eevdf",
        "nimble[:FLAGS]",
        "scx_NAME",
        "--runs",
        "--vm",
        "--json",
        "pct vs baseline",
    ] {
        assert!(h.contains(w), "--help lacks {w}");
    }
}

#[test]
fn bad_input_is_one_line() {
    for (args, expect) in [
        (vec!["nosuch"], "unknown experiment 'nosuch'"),
        (vec!["tbench", "--variants", "cfs"], "variant 'cfs'"),
        (
            vec!["tbench", "--variants", "eevdf,eevdf", "--baseline", "x"],
            "--baseline 'x'",
        ),
        (
            vec!["tbench", "--variants", "a=eevdf,a=nimble"],
            "given twice",
        ),
        (vec!["tbench", "--runs", "0"], "--runs"),
        (vec!["tbench", "--vm", "n9"], "unknown --vm topology 'n9'"),
        (vec!["tbench", "--points", "0"], "positive"),
        (
            vec!["tbench", "--variants", "scx_nosuchsched"],
            "scx_nosuchsched not found",
        ),
        (vec!["tbench", "--kernel", "sid"], "--vm"),
        (vec![], "required"),
    ] {
        let out = lab(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

/// A whole experiment with the kernel's own scheduler only: runs on any Linux.
#[test]
fn eevdf_only_experiment_natively() {
    let d = tmpdir("native");
    let json = d.join("t.json");
    let stdout = lab_ok(&[
        "tbench",
        "schbench",
        "--variants",
        "eevdf,again=eevdf",
        "--runs",
        "3",
        "--points",
        "1,2",
        "--secs",
        "0.3",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        stdout.contains("clients  eevdf") && stdout.contains("(0.00 pct)"),
        "{stdout}"
    );
    let j = check_json(&json, 3, &["eevdf", "again"]);
    assert_eq!(j["machine"], "native");
    let metrics: Vec<&str> = j["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["metric"].as_str().unwrap())
        .collect();
    assert!(
        metrics.contains(&"throughput") && metrics.contains(&"p99"),
        "{metrics:?}"
    );
    for w in ["tbench", "schbench"] {
        for ext in ["svg", "png"] {
            let f = d.join(format!("t-{w}.{ext}"));
            assert!(
                std::fs::metadata(&f).is_ok_and(|m| m.len() > 1000),
                "{}",
                f.display()
            );
        }
    }
    // `report` redraws the same tables from the saved JSON, and the plots.
    let redrawn = d.join("redrawn");
    let again = lab_ok(&[
        "report",
        json.to_str().unwrap(),
        "--plot-dir",
        redrawn.to_str().unwrap(),
    ]);
    assert_eq!(
        again, stdout,
        "report FILE.json differs from the run's own tables"
    );
    assert!(redrawn.join("t-tbench.svg").exists());
    // Without a terminal, progress is a line per sample with an ETA.
    let err = String::from_utf8_lossy(
        &lab(&[
            "tbench",
            "--variants",
            "eevdf",
            "--runs",
            "2",
            "--points",
            "1",
            "--secs",
            "0.2",
            "--no-plots",
        ])
        .stderr,
    )
    .into_owned();
    assert!(
        err.contains("nimble-lab: [2/2] round 2/2: eevdf tbench 1: ") && err.contains("ETA "),
        "{err}"
    );
}

fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
}

/// The real benchmarks (dbench's tbench, perf bench sched) under EEVDF: a few
/// seconds (tbench runs 2 s a sample). `vm/nimble-vm setup` installs both
/// packages: without them this fails, it does not skip.
#[test]
fn real_benchmarks_natively() {
    for bin in ["tbench", "tbench_srv", "perf"] {
        assert!(
            on_path(bin),
            "{bin} not on PATH: run vm/nimble-vm setup (packages dbench, linux-perf)"
        );
    }
    let d = tmpdir("real");
    let json = d.join("r.json");
    let stdout = lab_ok(&[
        "dbench-tbench",
        "perf-messaging",
        "perf-pipe",
        "mason-schbench",
        "--variants",
        "eevdf",
        "--runs",
        "2",
        "--points",
        "1",
        "--secs",
        "1",
        "--loops",
        "100",
        "--no-plots",
        "--json",
        json.to_str().unwrap(),
    ]);
    let j = check_json(&json, 2, &["eevdf"]);
    let got: Vec<(&str, &str)> = j["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["workload"].as_str().unwrap(),
                x["metric"].as_str().unwrap(),
            )
        })
        .collect();
    let want = [
        ("dbench-tbench", "throughput"),
        ("dbench-tbench", "max_latency"),
        ("perf-messaging", "time"),
        ("perf-pipe", "usecs_per_op"),
        ("perf-pipe", "ops_per_s"),
        ("mason-schbench", "p99"),
        ("mason-schbench", "p50"),
        ("mason-schbench", "p99.9"),
        ("mason-schbench", "request_p99"),
        ("mason-schbench", "rps_p50"),
    ];
    assert_eq!(got, want, "{stdout}");
    for x in j["experiments"].as_array().unwrap() {
        for c in x["results"].as_array().unwrap() {
            // max_latency may be 0.0 ms at the report's resolution; a
            // 1 s schbench has no whole second of RPS.
            if x["metric"] != "max_latency" && x["metric"] != "rps_p50" {
                assert!(c["min"].as_f64().unwrap() > 0.0, "{x}");
            }
        }
    }
}

/// The README's minimal call, in the VM: EEVDF and scx_nimble interleaved,
/// every sample in the JSON, scx_nimble attached for each of its rounds.
#[test]
#[ignore = "boots a VM; run with --include-ignored"]
fn vm_minimal_call_hackbench() {
    let d = tmpdir("vm");
    let json = d.join("out.json");
    let t0 = std::time::Instant::now();
    let k = kernel();
    let out = lab_vm(
        &[
            "hackbench",
            "--variants",
            "eevdf,nimble",
            "--runs",
            "3",
            "--vm",
            "n2l4",
            "--points",
            "1,4",
            "--loops",
            "30",
            "--json",
            json.to_str().unwrap(),
            "--kernel",
            &k,
        ],
        "nimble-lab:hackbench",
    );
    let result = if out.status.success() {
        "passed"
    } else {
        "FAILED"
    };
    let secs = t0.elapsed().as_secs();
    common::record(&kernel(), "n2l4", "nimble-lab:hackbench", result, secs, "");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success());
    let j = check_json(&json, 3, &["eevdf", "nimble"]);
    assert_eq!(j["machine"], "vm:n2l4");
    assert_eq!(j["env"]["cpus"], 8);
    assert_eq!(j["env"]["nodes"], 2);
    let v = &j["variants"].as_array().unwrap()[1];
    let ops: Vec<&str> = v["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert_eq!(ops.len(), 3);
    assert!(ops.iter().all(|o| o.starts_with("nimble")), "{ops:?}");
    assert!(d.join("out-hackbench.png").is_file() && d.join("out-hackbench.svg").is_file());
}

/// The real benchmarks the presets use, tiny, in the VM: dbench's tbench
/// and Chris Mason's schbench (copied into the guest by --vm), under EEVDF
/// and scx_nimble, one round.
#[test]
#[ignore = "boots a VM; run with --include-ignored"]
fn vm_real_benchmarks_tiny() {
    let d = tmpdir("vm-real");
    let json = d.join("real.json");
    let t0 = std::time::Instant::now();
    let k = kernel();
    let out = lab_vm(
        &[
            "dbench-tbench",
            "mason-schbench",
            "--variants",
            "eevdf,nimble",
            "--runs",
            "1",
            "--points",
            "2",
            "--secs",
            "2",
            "--vm",
            "n2l4",
            "--no-plots",
            "--json",
            json.to_str().unwrap(),
            "--kernel",
            &k,
        ],
        "nimble-lab:real-tiny",
    );
    let result = if out.status.success() {
        "passed"
    } else {
        "FAILED"
    };
    common::record(
        &kernel(),
        "n2l4",
        "nimble-lab:real-tiny",
        result,
        t0.elapsed().as_secs(),
        "",
    );
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let j = check_json(&json, 1, &["eevdf", "nimble"]);
    for x in j["experiments"].as_array().unwrap() {
        if x["metric"] == "throughput" || x["metric"] == "p50" {
            for c in x["results"].as_array().unwrap() {
                assert!(c["min"].as_f64().unwrap() > 0.0, "{x}");
            }
        }
    }
    // Progress lines reached the host while the guest ran.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nimble-lab: [4/4] round 1/1: "), "{err}");
}
