//! Tests that boot the scheduler in a sched_ext kernel under qemu (see
//! vm/nimble-vm) and run guest scripts from tests/guest/ there. They take
//! minutes, so they are ignored by default; the README's test command runs
//! them with `--include-ignored`.
//!
//! Each (kernel, topology) pair boots once and runs all of its scripts in
//! that boot (tests/guest/suite.sh resets the guest between them); every
//! script is still its own test here, named `<kernel>::<topology>_<case>`,
//! with its own result and seconds in the results table. The first test of
//! a pair boots it; the others read what their script printed.
//!
//! Tiers: `vm/nimble-vm test` (CI) runs every case on trixie-backports but
//! the `FullOnly` ones, and on sid only attach/load on n2l4 (`Both`: the
//! kernel version matters to it); `vm/nimble-vm test --full` adds every
//! other case on sid (`full::sid::*`), the `FullOnly` cases and the
//! 10-minute soak (`full::backports::*`) and the long durations
//! (NIMBLE_VM_TIER=full, passed to the guest scripts as NIMBLE_TIER). The
//! cases a tier leaves out are listed as skipped in the results table.

#[allow(dead_code)] // primary() is the lab's
mod common;

use common::record;
use scx_nimble::bpf_intf::nimble_limits_MAX_NUMA_LEVELS;
use scx_nimble::topology::sysfs::parse_cpulist;
use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

const BACKPORTS: &str = "trixie-backports";
const SID: &str = "sid";
/// A script's limit inside the guest (suite.sh kills it then).
const SCRIPT_LIMIT_S: u64 = 900;

/// `ci` or `full` (vm/nimble-vm test --full).
fn tier() -> String {
    std::env::var("NIMBLE_VM_TIER").unwrap_or_else(|_| "ci".into())
}

/// Where a case runs. Every case in the CI tier runs on trixie-backports;
/// `Both` also on sid (the kernel version matters to it), `Backports` on
/// sid in the full tier only; `FullOnly` in the full tier only, on
/// trixie-backports: the soak, and cases whose mechanism another CI case
/// covers (numa_loops: numa_locality and n4's numa_mixed; attach/load on n4
/// and l2: flat, n2l4 and smt), moved to keep the CI tier under 30 min.
#[derive(Clone, Copy, PartialEq)]
enum Runs {
    Both,
    Backports,
    FullOnly,
}

impl Runs {
    /// Whether the case runs on `suite` in `tier`.
    fn on(self, suite: &str, tier: &str) -> bool {
        let full = tier == "full";
        match self {
            Runs::Both => true,
            Runs::Backports => suite == BACKPORTS || full,
            Runs::FullOnly => suite == BACKPORTS && full,
        }
    }
}

struct Case {
    topo: &'static str,
    script: &'static str,
    runs: Runs,
}

/// What one script did in its boot.
#[derive(Clone)]
struct Outcome {
    rc: i32,
    secs: u64,
    out: String,
}

/// What each script of one boot group did, by script name.
type Outcomes = BTreeMap<String, Outcome>;

/// One VM at a time (they already use every host core); each (suite, topo)
/// pair's outcomes once booted.
static BOOTS: Mutex<Option<HashMap<(String, String), Outcomes>>> = Mutex::new(None);

/// The scripts of (suite, topo) in this tier, in table order.
/// NIMBLE_VM_ONLY=a.sh,b.sh (for working on a case: pick its test by name
/// too) boots only those scripts.
fn group(suite: &str, topo: &str) -> Vec<&'static str> {
    let only = std::env::var("NIMBLE_VM_ONLY").ok();
    CASES
        .iter()
        .filter(|c| c.topo == topo && c.runs.on(suite, &tier()))
        .filter(|c| {
            only.as_ref()
                .is_none_or(|o| o.split(',').any(|s| s == c.script))
        })
        .map(|c| c.script)
        .collect()
}

/// The results table lists the cases this tier leaves out as skipped, so
/// that a case that did not run never reads as passed.
fn record_skipped() {
    for suite in [BACKPORTS, SID] {
        let left_out = |c: &&Case| !c.runs.on(suite, &tier()) && c.runs.on(suite, "full");
        for c in CASES.iter().filter(left_out) {
            record(suite, c.topo, c.script, "skipped(--full)", 0, "");
        }
    }
}

/// Runs `script` (booting its (suite, topo) group if no test did yet) and
/// returns what it printed; panics if it failed.
fn run_case(suite: &str, topo: &str, script: &str) -> String {
    let mut boots = BOOTS.lock().unwrap_or_else(|e| e.into_inner());
    let boots = boots.get_or_insert_with(|| {
        record_skipped();
        HashMap::new()
    });
    let key = (suite.to_string(), topo.to_string());
    if !boots.contains_key(&key) {
        let scripts = group(suite, topo);
        assert!(
            scripts.contains(&script),
            "{script} on {topo} ({suite}) is not in the {} tier (`vm/nimble-vm test --full`) or NIMBLE_VM_ONLY",
            tier()
        );
        boots.insert(key.clone(), boot_group(suite, topo, &scripts));
    }
    let o = &boots[&key][script];
    print!("{}", o.out);
    assert!(
        o.rc == 0,
        "{script} in VM topology {topo} ({suite}) failed (status {})",
        o.rc
    );
    o.out.clone()
}

/// Boots (suite, topo) until every script has an outcome. A boot that never
/// reached the scripts (a boot hang under TCG, seen once in ~100 boots), or
/// whose kernel hit a stray int3 (TCG running stale code while the kernel
/// patches its text for a static key, seen once in ~150 runs, as sched_ext
/// enabled), is booted once more from the script it stopped in: that is not
/// the test's outcome. A script's own failure is never retried; a script
/// that took the guest down fails, and the scripts after it run in a new
/// boot.
fn boot_group(suite: &str, topo: &str, scripts: &[&str]) -> Outcomes {
    let mut done = Outcomes::new();
    let mut retried = false;
    while done.len() < scripts.len() {
        let pending: Vec<&str> = scripts
            .iter()
            .copied()
            .filter(|s| !done.contains_key(*s))
            .collect();
        let t0 = Instant::now();
        let (stdout, stderr) = boot(suite, topo, &pending);
        let wall = t0.elapsed().as_secs();
        let mut ran = split_console(&stdout);
        let in_scripts: u64 = ran.values().map(|o| o.secs).sum();
        record(
            suite,
            topo,
            "(boot)",
            "-",
            wall.saturating_sub(in_scripts),
            "",
        );
        // The script the guest stopped in, if it did not finish them all.
        let stopped = pending.iter().find(|s| !ran.contains_key(**s)).copied();
        if let Some(s) = stopped {
            let started = stdout.contains(&format!("@@CASE_BEGIN {s}@@"));
            let no_boot = stderr.contains("did not reach the command")
                || stderr.contains("before running the command");
            let both = format!("{stdout}{stderr}");
            let tcg_int3 = both.contains("Oops: int3") && both.contains("Kernel panic");
            if (no_boot || tcg_int3) && !retried {
                retried = true;
                let why = if no_boot {
                    "did not boot to"
                } else {
                    "hit a TCG int3 oops in"
                };
                eprintln!("vm.rs: the {topo} guest ({suite}) {why} {s}; booting it again");
                print!("{stdout}");
                eprint!("{stderr}");
                record(suite, topo, s, "retried", 0, "");
            } else {
                // A script that took the guest down fails alone (the rest get
                // a new boot); a guest that never ran one fails them all.
                let (why, failed) = if started {
                    ("the guest died or timed out in this script", vec![s])
                } else {
                    ("the guest never started the scripts", pending.clone())
                };
                for f in failed {
                    let out = format!(
                        "{}\n--- {why}; console:\n{stdout}\n--- host:\n{stderr}",
                        console_after(&stdout, f)
                    );
                    ran.insert(
                        f.to_string(),
                        Outcome {
                            rc: -1,
                            secs: 0,
                            out,
                        },
                    );
                }
            }
        }
        for s in &pending {
            if let Some(o) = ran.remove(*s) {
                let result = if o.rc == 0 { "passed" } else { "FAILED" };
                record(suite, topo, s, result, o.secs, &o.out);
                done.insert(s.to_string(), o);
            }
        }
    }
    done
}

/// The console after `script` began (what it printed before the guest died).
fn console_after(stdout: &str, script: &str) -> String {
    let mark = format!("@@CASE_BEGIN {script}@@");
    stdout
        .split_once(&mark)
        .map(|(_, rest)| rest.to_string())
        .unwrap_or_default()
}

/// Each finished script's outcome, from suite.sh's marker lines.
fn split_console(stdout: &str) -> Outcomes {
    let mut ran = BTreeMap::new();
    let mut cur: Option<(String, String)> = None;
    for line in stdout.lines() {
        if let Some(s) = line
            .strip_prefix("@@CASE_BEGIN ")
            .and_then(|l| l.strip_suffix("@@"))
        {
            cur = Some((s.to_string(), String::new()));
        } else if let Some(end) = line
            .strip_prefix("@@CASE_END ")
            .and_then(|l| l.strip_suffix("@@"))
        {
            let w: Vec<&str> = end.split_whitespace().collect();
            if let (Some((name, out)), [s, rc, secs]) = (cur.take(), w.as_slice()) {
                if name == *s {
                    ran.insert(
                        name,
                        Outcome {
                            rc: rc.parse().unwrap_or(-1),
                            secs: secs.parse().unwrap_or(0),
                            out,
                        },
                    );
                }
            }
        } else if let Some((_, out)) = cur.as_mut() {
            out.push_str(line);
            out.push('\n');
        }
    }
    ran
}

/// One VM boot running `scripts` with suite.sh: (stdout, stderr).
fn boot(suite: &str, topo: &str, scripts: &[&str]) -> (String, String) {
    let root = env!("CARGO_MANIFEST_DIR");
    let bin = env!("CARGO_BIN_EXE_scx_nimble");
    let limit = 120 + SCRIPT_LIMIT_S * scripts.len() as u64;
    let cmd = format!(
        "NIMBLE_TIER={} sh /tests/suite.sh -t {SCRIPT_LIMIT_S} {}",
        tier(),
        scripts.join(" ")
    );
    let out = Command::new(format!("{root}/vm/nimble-vm"))
        .current_dir(root)
        .args(["run", "--kernel", suite, "--topo", topo])
        .args(["--timeout", &limit.to_string()])
        .arg("--add")
        .arg(format!("{bin}:/bin/scx_nimble"))
        .arg("--add")
        .arg(format!("{}:/bin/nimble-pingpong", env!("NIMBLE_PINGPONG")))
        .arg("--add")
        .arg(format!("{}:/bin/nimble-sleepers", env!("NIMBLE_SLEEPERS")))
        .arg("--add")
        .arg(format!("{}:/bin/nimble-churn", env!("NIMBLE_CHURN")))
        .arg("--add")
        .arg(format!("{}:/bin/nimble-memhog", env!("NIMBLE_MEMHOG")))
        .args(["--", &cmd])
        .output()
        .expect("running vm/nimble-vm (did `vm/nimble-vm setup` run?)");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The script's own assertions are the test (most cases).
fn script_only(_topo: &str, _out: &str) {}

/// `name: topo, script, runs, host_check;` entries (see `Runs`): tests
/// `backports::name` and `sid::name` in CI, `full::backports::name` and
/// `full::sid::name` in the full tier only. The host check reads the
/// script's output (topology and thresholds against the kernel's, JSON sums).
macro_rules! vm_cases {
    ($($name:ident: $topo:literal, $script:literal, $runs:ident, $check:ident;)*) => {
        const CASES: &[Case] = &[$(Case { topo: $topo, script: $script, runs: Runs::$runs },)*];
        /// trixie-backports: the newest sched_ext kernel Debian ships (7.3.x).
        mod backports {
            use super::*;
            $(if_runs!($runs in ci_backports, $name, BACKPORTS, $topo, $script, $check);)*
        }
        /// sid (7.2.x): the cases where the kernel version matters.
        mod sid {
            use super::*;
            $(if_runs!($runs in ci_sid, $name, SID, $topo, $script, $check);)*
        }
        /// `vm/nimble-vm test --full`: the soak, and every other case on sid.
        mod full {
            mod backports {
                use super::super::*;
                $(if_runs!($runs in full_backports, $name, BACKPORTS, $topo, $script, $check);)*
            }
            mod sid {
                use super::super::*;
                $(if_runs!($runs in full_sid, $name, SID, $topo, $script, $check);)*
            }
        }
    };
}

macro_rules! vm_test {
    ($name:ident, $suite:expr, $topo:literal, $script:literal, $check:ident) => {
        #[test]
        #[ignore = "boots a VM; run with --include-ignored"]
        fn $name() {
            $check($topo, &run_case($suite, $topo, $script));
        }
    };
}

/// A test in the module named when the case runs there (`Runs::on`).
macro_rules! if_runs {
    (Both in ci_backports, $($t:tt)*) => { vm_test!($($t)*); };
    (Backports in ci_backports, $($t:tt)*) => { vm_test!($($t)*); };
    (Both in ci_sid, $($t:tt)*) => { vm_test!($($t)*); };
    (FullOnly in full_backports, $($t:tt)*) => { vm_test!($($t)*); };
    (Backports in full_sid, $($t:tt)*) => { vm_test!($($t)*); };
    ($runs:ident in $module:ident, $($t:tt)*) => {};
}

// Each topology's scripts run in this order in its boot. The reliability
// suite (load, faults, hostile input) and the functional tests.
vm_cases! {
    flat_attach_load: "flat", "attach_load.sh", Backports, script_only;
    flat_hostile_input: "flat", "errors.sh", Backports, script_only;
    flat_nice19_not_starved: "flat", "nice.sh", Backports, script_only;
    flat_topology_matches_kernel: "flat", "topology.sh", Backports, topology_matches_kernel;
    n2l4_attach_load: "n2l4", "attach_load.sh", Both, script_only;
    n2l4_hotplug_two_cpus: "n2l4", "hotplug.sh", Backports, script_only;
    n2l4_signals_int_term_kill: "n2l4", "signals.sh", Backports, script_only;
    n2l4_torture_forks_wakeups_nice_cgroups: "n2l4", "torture.sh", Backports, script_only;
    n2l4_nice_weights_across_llcs: "n2l4", "weights.sh", Backports, script_only;
    n2l4_cgroup_weights_2000_cgroups_siblings_move_nice_depth4: "n2l4", "cgroup_weights.sh", Backports, script_only;
    n2l4_node_running_counts: "n2l4", "nodes.sh", Backports, script_only;
    n2l4_pinned_task_runs: "n2l4", "pinned.sh", Backports, script_only;
    n2l4_numa_pair_stays_local_by_rule: "n2l4", "numa_locality.sh", Backports, script_only;
    n2l4_numa_threads_follow_their_memory: "n2l4", "numa_memory.sh", Backports, script_only;
    n2l4_numa_spread: "n2l4", "numa_spread.sh", FullOnly, script_only;
    n2l4_numa_loops_stay_by_rule: "n2l4", "numa_loops.sh", FullOnly, script_only;
    n2l4_cpu_queues_keep_wakees: "n2l4", "cpuq.sh", Backports, script_only;
    n2l4_rt_loop_strands_no_sleeper: "n2l4", "rt_coexist.sh", Backports, script_only;
    n2l4_sched_idle_share_and_wakeups: "n2l4", "sched_idle.sh", Backports, script_only;
    n2l4_cpu_max_quota_child_live_change: "n2l4", "cpu_max.sh", Backports, script_only;
    n2l4_weights_hold_through_renice_and_moves: "n2l4", "weights_churn.sh", Backports, script_only;
    n2l4_pinned_pingpong_pairs_progress: "n2l4", "pingpong.sh", Backports, script_only;
    n2l4_periodic_task_beside_a_loop: "n2l4", "periodic.sh", Backports, script_only;
    n2l4_pipe_pairs_share_an_llc: "n2l4", "wake_affine.sh", FullOnly, script_only;
    n2l4_stats_monitor_json_and_tui: "n2l4", "stats.sh", Backports, stats_json_sums;
    n2l4_topology_matches_kernel: "n2l4", "topology.sh", Backports, topology_matches_kernel;
    n2l4_verifier_budget_load_times: "n2l4", "verifier.sh", Backports, script_only;
    n2l4_thresholds_in_map: "n2l4", "thresholds.sh", FullOnly, thresholds_in_map;
    n2l4_soak_10min_churn: "n2l4", "soak.sh", FullOnly, script_only;
    n4_attach_load: "n4", "attach_load.sh", FullOnly, script_only;
    n4_node_running_counts: "n4", "nodes.sh", FullOnly, script_only;
    n4_numa_spread_nearest_first: "n4", "numa_spread.sh", Backports, script_only;
    n4_numa_mixed_load_each_rule: "n4", "numa_mixed.sh", FullOnly, script_only;
    n4_numa_threads_follow_their_memory: "n4", "numa_memory.sh", FullOnly, script_only;
    n4_topology_matches_kernel: "n4", "topology.sh", Backports, topology_matches_kernel;
    n4_thresholds_in_map: "n4", "thresholds.sh", Backports, thresholds_in_map;
    smt_attach_load: "smt", "attach_load.sh", FullOnly, script_only;
    smt_topology_matches_kernel: "smt", "topology.sh", Backports, topology_matches_kernel;
    l2_attach_load: "l2", "attach_load.sh", FullOnly, script_only;
    l2_swq_modes_hackbench_and_live_switch: "l2", "swq_modes.sh", Backports, script_only;
    l2_swq_pinned_and_remote_llc_tasks_run: "l2", "swq_pinned.sh", Backports, script_only;
    l2_swq_affinity_pulls_only_allowed: "l2", "swq_affinity.sh", Backports, script_only;
    l2_topology_matches_kernel: "l2", "topology.sh", Backports, topology_matches_kernel;
    big_64cpus_verifier_load_and_exit: "big", "verifier.sh", FullOnly, script_only;
    big_64cpus_topology_matches_kernel: "big", "topology.sh", FullOnly, topology_matches_kernel;
    big_64cpus_thresholds_in_map: "big", "thresholds.sh", FullOnly, thresholds_in_map;
    limits_128cpus_32nodes_64llcs_verifier_load_and_exit: "limits", "verifier.sh", FullOnly, script_only;
}

/// A /proc/schedstat cpumask ("00000000,000000ff") as a sorted CPU list.
fn hexmask_cpus(mask: &str) -> Vec<u64> {
    let hex: String = mask.chars().filter(|c| *c != ',').collect();
    let mut cpus = vec![];
    for (i, d) in hex.chars().rev().enumerate() {
        let v = d.to_digit(16).expect("hex mask");
        cpus.extend(
            (0..4)
                .filter(|b| v & (1 << b) != 0)
                .map(|b| (i * 4 + b) as u64),
        );
    }
    cpus.sort();
    cpus
}

fn cpulist_cpus(list: &str) -> Vec<u64> {
    parse_cpulist(list)
        .expect("a cpulist")
        .into_iter()
        .map(|c| c as u64)
        .collect()
}

/// numa_levels map key: node * MAX_NUMA_LEVELS + level (src/bpf/intf.h).
const MAX_NUMA_LEVELS: usize = nimble_limits_MAX_NUMA_LEVELS as usize;

/// One level as the kernel shows it: name, CPUs, flags.
type KernelDomain = (String, Vec<u64>, Vec<String>);

/// The kernel's domains in a script's output ("S" and "K" lines, see
/// kernel_domains in tests/guest/lib.sh), by (cpu, domain index).
fn kernel_domains(out: &str) -> BTreeMap<(String, String), KernelDomain> {
    let mut kernel: BTreeMap<(String, String), KernelDomain> = BTreeMap::new();
    for l in out.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        let key = |w: &[&str]| (w[1].to_string(), w[2].to_string());
        match w.first() {
            Some(&"S") => kernel.entry(key(&w)).or_default().1 = hexmask_cpus(w[4]),
            Some(&"K") => {
                let e = kernel.entry(key(&w)).or_default();
                e.0 = w[3].to_string();
                e.2 = w[4..].iter().map(|s| s.to_string()).collect();
            }
            _ => {}
        }
    }
    kernel
}

/// `topology --json` names, spans and flags equal the guest kernel's
/// (names and masks from /proc/schedstat, flags from debugfs) for every CPU.
fn topology_matches_kernel(topo: &str, out: &str) {
    let kernel = kernel_domains(out);
    let mut checked = 0;
    for l in out.lines().filter_map(|l| l.strip_prefix("J ")) {
        let j: serde_json::Value = serde_json::from_str(l).expect("topology --json output");
        let cpu = format!("cpu{}", j["cpu"]);
        let ours = j["domains"].as_array().unwrap();
        let theirs: Vec<&KernelDomain> = kernel
            .iter()
            .filter(|((c, _), _)| *c == cpu)
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            ours.len(),
            theirs.len(),
            "{topo} {cpu}: ours {l}, kernel {theirs:?}"
        );
        for (d, (name, cpus, flags)) in ours.iter().zip(theirs) {
            assert_eq!(d["name"], name.as_str(), "{topo} {cpu}: {l}");
            assert_eq!(
                &cpulist_cpus(d["cpus"].as_str().unwrap()),
                cpus,
                "{topo} {cpu} {name} span"
            );
            assert_eq!(d["span_weight"].as_u64().unwrap() as usize, cpus.len());
            let f: Vec<&str> = d["flags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap())
                .collect();
            assert_eq!(f, *flags, "{topo} {cpu} {name} flags");
        }
        checked += 1;
    }
    assert!(
        checked >= 4 * 3,
        "only {checked} CPU/formula outputs checked in {topo}"
    );
}

/// The kernel's imb_numa_nr and span of each NUMA level (SD_NUMA domains,
/// lowest first) on every node of the VM topologies thresholds.sh runs on,
/// worked out by hand from build_sched_domains() (kernel/sched/topology.c)
/// rather than by src/topology, so that the map is checked against the
/// kernel's rule and not against a copy of our own code. The x86 levels
/// before degeneration: MC (the LLC), PKG and NODE (the node), then one
/// NUMA level per larger SLIT distance. The first level above the LLC sets
/// imb = its LLC count, or span / 8 (at least 1) with one LLC, and
/// imb_span = the first NUMA level's span; each level above gets
/// imb * max(1, span / imb_span).
/// - n2l4 (nodes of 2 LLCs x 2 CPUs): PKG: 2 LLCs, imb 2, imb_span 8;
///   NUMA(8): 2 * 8/8 = 2.
/// - n4 (nodes of 1 LLC x 2 CPUs, SLIT 20 within pairs, 40 across): PKG:
///   1 LLC, 2/8 -> 1, imb_span 4; NUMA(4): 1 * 4/4 = 1; NUMA(8): 1 * 8/4 = 2.
/// - big (nodes of 2 LLCs x 4 CPUs, SLIT 20 within groups of 4 nodes, 30
///   across): PKG: 2 LLCs, imb 2, imb_span 32; NUMA(32): 2 * 32/32 = 2;
///   NUMA(64): 2 * 64/32 = 4.
fn kernel_thresholds(topo: &str) -> Vec<(u64, usize)> {
    match topo {
        "n2l4" => vec![(2, 8)],
        "n4" => vec![(1, 4), (2, 8)],
        "big" => vec![(2, 32), (4, 64)],
        _ => panic!("no hand-derived thresholds for {topo}"),
    }
}

/// The numa_levels map of the running scheduler holds, for every node and
/// NUMA level, the kernel's imb_numa_nr (mainline formula, against the
/// hand-derived table above, whose spans are checked against the booted
/// kernel's domains), and with an override that value at its level and
/// `topology`'s for the other levels (v4 is no kernel's current rule).
fn thresholds_in_map(topo: &str, out: &str) {
    let kernel = kernel_domains(out);
    let table = kernel_thresholds(topo);
    let mut configs = 0;
    let mut map: Vec<serde_json::Value> = vec![];
    let mut formula = String::new();
    let mut ovr: Option<(usize, u64)> = None;
    for l in out.lines() {
        if let Some(f) = l.strip_prefix("F ") {
            let mut w = f.split_whitespace();
            formula = w.next().unwrap().to_string();
            ovr = w
                .next()
                .unwrap()
                .split_once('=')
                .map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap()));
            configs += 1;
        } else if let Some(b) = l.strip_prefix("B ") {
            map = serde_json::from_str(b).expect("bpftool JSON");
        } else if let Some(t) = l.strip_prefix("T ") {
            let (node, json) = t.split_once(' ').unwrap();
            let node: usize = node.parse().unwrap();
            let j: serde_json::Value = serde_json::from_str(json).unwrap();
            let is_numa = |flags: &serde_json::Value| {
                flags.as_array().unwrap().iter().any(|f| f == "SD_NUMA")
            };
            let ours: Vec<&serde_json::Value> = j["domains"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| is_numa(&d["flags"]))
                .collect();
            // The booted kernel's NUMA spans are the table's.
            let cpu = format!("cpu{}", j["cpu"]);
            let spans: Vec<usize> = kernel
                .iter()
                .filter(|((c, _), d)| *c == cpu && d.2.iter().any(|f| f == "SD_NUMA"))
                .map(|(_, d)| d.1.len())
                .collect();
            let want_spans: Vec<usize> = table.iter().map(|t| t.1).collect();
            assert_eq!(spans, want_spans, "{topo} {cpu}: the kernel's NUMA spans");
            assert_eq!(ours.len(), table.len(), "{topo} node {node}: NUMA levels");
            for (i, d) in ours.iter().enumerate() {
                let key = node * MAX_NUMA_LEVELS + i;
                let entry = map
                    .iter()
                    .find(|e| e["formatted"]["key"].as_u64() == Some(key as u64))
                    .expect("map entry");
                let v = &entry["formatted"]["value"];
                let want = match ovr {
                    Some((level, value)) if level == i + 1 => value,
                    _ if formula == "mainline" => table[i].0,
                    _ => d["imb_numa_nr"].as_u64().unwrap(),
                };
                assert_eq!(
                    v["imb_numa_nr"].as_u64().unwrap(),
                    want,
                    "{topo} node {node} level {i} ({formula}): {v}"
                );
                assert_eq!(
                    v["span_weight"].as_u64().unwrap() as usize,
                    table[i].1,
                    "{topo} node {node} level {i}"
                );
            }
        }
    }
    assert_eq!(configs, 2, "{topo}: expected two configurations");
}

/// Under load, the JSON form of `--monitor` parses, and every
/// counter's per-node and per-LLC values add up to its total (one snapshot
/// is read at one moment, so the sums must be exact).
fn stats_json_sums(topo: &str, out: &str) {
    assert_eq!(topo, "n2l4", "the sums below know n2l4's shape");
    let snaps: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| l.strip_prefix("J "))
        .map(|l| serde_json::from_str(l).expect("--monitor --json line"))
        .collect();
    assert!(snaps.len() >= 3, "only {} JSON snapshots", snaps.len());
    for s in &snaps {
        let total = s["total"].as_object().expect("total");
        let nodes: Vec<&serde_json::Value> = s["nodes"].as_object().unwrap().values().collect();
        let llcs: Vec<&serde_json::Value> = s["llcs"].as_object().unwrap().values().collect();
        assert_eq!((nodes.len(), llcs.len()), (2, 4), "{s}");
        for (k, v) in total {
            if k.ends_with("_us") {
                continue; // quantiles do not add up
            }
            let t = v
                .as_i64()
                .unwrap_or_else(|| panic!("{k} is not an integer"));
            let sum = |g: &[&serde_json::Value]| -> i64 {
                g.iter().map(|x| x[k].as_i64().unwrap()).sum()
            };
            assert_eq!(sum(&nodes), t, "{k}: nodes {:?} vs total", nodes);
            // LLC runnable counts are read apart from the node ones.
            if k != "nr_running" {
                assert_eq!(sum(&llcs), t, "{k}: LLCs vs total");
            }
        }
        assert!(total["run_direct"].as_u64().unwrap() > 0, "{s}");
        assert!(total["llc_own"].as_u64().unwrap() > 0, "{s}");
        assert_eq!(s["cpus"].as_object().unwrap().len(), 8);
        for (id, c) in s["cpus"].as_object().unwrap() {
            let cpu: u64 = id.parse().unwrap();
            assert_eq!(c["llc"].as_u64(), Some(cpu / 2), "cpu {cpu}");
            assert_eq!(c["node"].as_u64(), Some(cpu / 4), "cpu {cpu}");
        }
        let th = s["thresholds"].as_array().unwrap();
        assert_eq!(th.len(), 2, "one NUMA level per node: {th:?}");
        assert_eq!(s["numa_rule"], "mainline");
    }
}
