//! The default `--stats`/`--monitor` output: a few aligned lines per
//! interval, counters as rates per second over the interval (or since
//! attach for the first), shares as percentages, per-node and per-LLC lines
//! only where there are several, swq and NUMA lines only when those
//! mechanisms run. `--stats-format line` keeps the one-line form for grep.

use super::{Group, Metrics};
use std::fmt::Write as _;

/// Label column width: every line after the header starts with one.
const LABEL: usize = 10;

/// `cur - prev` for counters (0 when a counter went back, after a restart).
fn d(cur: u64, prev: u64) -> u64 {
    cur.saturating_sub(prev)
}

fn pct(part: u64, whole: u64) -> String {
    match whole {
        0 => "-".into(),
        _ => format!("{:.1}%", 100.0 * part as f64 / whole as f64),
    }
}

/// A rate: "1234/s", "12.3/s" below 100, "0/s".
fn rate(n: u64, secs: f64) -> String {
    let r = n as f64 / secs;
    if r == 0.0 {
        "0/s".into()
    } else if r < 100.0 {
        format!("{r:.1}/s")
    } else {
        format!("{r:.0}/s")
    }
}

/// A wait in us as "850us", "14.7ms", "1.2s"; "-" with no samples.
fn wait(n: u64, us: f64) -> String {
    match (n, us) {
        (0, _) => "-".into(),
        (_, u) if u < 1000.0 => format!("{u:.0}us"),
        (_, u) if u < 1_000_000.0 => format!("{:.1}ms", u / 1000.0),
        (_, u) => format!("{:.1}s", u / 1_000_000.0),
    }
}

fn row(s: &mut String, label: &str, body: &str) {
    let _ = writeln!(s, "  {label:<LABEL$}{body}");
}

/// CPU busy % over the interval from /proc/stat ticks, whole machine; "-"
/// for the first sample (the ticks count since boot, not since attach).
fn busy_pct(prev: Option<&Metrics>, m: &Metrics) -> String {
    let Some(prev) = prev else { return "-".into() };
    let (mut busy, mut total) = (0, 0);
    for (cpu, c) in &m.cpus {
        let p = prev.cpus.get(cpu);
        busy += d(c.busy_ticks, p.map_or(0, |p| p.busy_ticks));
        total += d(c.total_ticks, p.map_or(0, |p| p.total_ticks));
    }
    pct(busy, total)
}

/// The interval's output, ending with a newline. `prev`: the previous
/// sample (None: rates since attach).
pub fn human(prev: Option<&Metrics>, m: &Metrics) -> String {
    // A reload (hotplug) restarts the counters and the uptime: count that
    // interval from the new attach, not against the old scheduler's totals.
    let prev = prev.filter(|p| p.uptime_s < m.uptime_s);
    let zero = Group::default();
    let pg = |f: &dyn Fn(&Metrics) -> Option<&Group>| prev.and_then(f).unwrap_or(&zero);
    let secs = (m.uptime_s - prev.map_or(0.0, |p| p.uptime_s)).max(1e-3);
    let (t, p) = (&m.total, pg(&|p| Some(&p.total)));
    let dd = |f: fn(&Group) -> u64| d(f(t), f(p));
    let mut s = String::new();

    let _ = writeln!(
        s,
        "{} up {:.0}s, {}: nr_cgroups={}{}",
        m.sched,
        m.uptime_s,
        match prev {
            Some(_) => format!("last {secs:.1}s"),
            None => "since attach".into(),
        },
        m.nr_cgroups,
        match m.nr_cgroups_over {
            0 => String::new(),
            n => format!(" (+{n} past MAX_CGROUPS, counted in an ancestor)"),
        }
    );
    row(&mut s, "controls", &m.controls());
    row(
        &mut s,
        "tasks",
        &format!(
            "running {}  queued {}  cpu busy {}",
            t.nr_running,
            t.queued,
            busy_pct(prev, m)
        ),
    );
    let ins = dd(|g| g.ins_direct + g.ins_local + g.ins_llc + g.ins_swq);
    row(
        &mut s,
        "enqueue",
        &format!(
            "{}: idle cpu {}  cpu queue {}  llc queue {}  swq {}",
            rate(ins, secs),
            pct(dd(|g| g.ins_direct + g.ins_local), ins),
            pct(dd(|g| g.cpuq), ins),
            pct(dd(|g| g.ins_llc.saturating_sub(g.cpuq)), ins),
            pct(dd(|g| g.ins_swq), ins),
        ),
    );
    let ran =
        dd(|g| g.run_direct + g.run_local + g.llc_own + g.steal_node + g.steal_remote + g.run_swq);
    row(
        &mut s,
        "dispatch",
        &format!(
            "{}: own llc {}  stolen {}  kept running {}  went idle {}",
            rate(ran, secs),
            pct(dd(|g| g.llc_own), ran),
            // cpuq_steal is inside llc_own (same LLC) or steal_node already.
            pct(dd(|g| g.steal_node + g.steal_remote), ran),
            rate(dd(|g| g.keep_running), secs),
            rate(dd(|g| g.go_idle), secs),
        ),
    );
    row(
        &mut s,
        "move",
        &format!(
            "migrate {} (llc {}, node {})  balance {}  preempt {} (ahead {})",
            rate(dd(|g| g.migrate), secs),
            rate(dd(|g| g.migrate_llc), secs),
            rate(dd(|g| g.migrate_node), secs),
            rate(dd(|g| g.balance), secs),
            rate(dd(|g| g.preempt), secs),
            rate(dd(|g| g.preempt_ahead), secs),
        ),
    );
    row(
        &mut s,
        "wait",
        &format!(
            "p50 {}  p99 {} (since attach)",
            wait(t.waits, t.wait_p50_us),
            wait(t.waits, t.wait_p99_us)
        ),
    );
    if m.nodes.len() > 1 {
        let forks = dd(|g| g.fork_local + g.fork_remote);
        row(
            &mut s,
            "numa",
            &format!(
                "fork local {}  pull {}  push {}  refused {}  home {}",
                pct(dd(|g| g.fork_local), forks),
                rate(dd(|g| g.numa_pull), secs),
                rate(dd(|g| g.numa_push), secs),
                rate(dd(|g| g.numa_refused), secs),
                rate(dd(|g| g.home_return), secs),
            ),
        );
        row(
            &mut s,
            "memory",
            &format!(
                "local {}  moved to it {}  swaps {}  pages moved {}",
                pct(dd(|g| g.mem_local_ns), dd(|g| g.mem_known_ns)),
                rate(dd(|g| g.mem_move), secs),
                rate(dd(|g| g.mem_swap), secs),
                rate(
                    m.mem_pages_moved
                        .saturating_sub(prev.map_or(0, |p| p.mem_pages_moved)),
                    secs
                ),
            ),
        );
        for (id, g) in &m.nodes {
            let p = pg(&|p| p.nodes.get(id));
            row(
                &mut s,
                &format!("node {id}"),
                &format!(
                    "running {:<3} pull {:<7} push {:<7} refused {:<7} memory local {}",
                    g.nr_running,
                    rate(d(g.numa_pull, p.numa_pull), secs),
                    rate(d(g.numa_push, p.numa_push), secs),
                    rate(d(g.numa_refused, p.numa_refused), secs),
                    pct(
                        d(g.mem_local_ns, p.mem_local_ns),
                        d(g.mem_known_ns, p.mem_known_ns)
                    ),
                ),
            );
        }
    }
    if m.llcs.len() > 1 {
        for (id, g) in &m.llcs {
            let p = pg(&|p| p.llcs.get(id));
            row(
                &mut s,
                &format!("llc {id}"),
                &format!(
                    "running {:<3} queued {:<3} in {:<8} wait p50 {} p99 {}",
                    g.nr_running,
                    g.queued,
                    rate(d(g.llc_in, p.llc_in), secs),
                    wait(g.waits, g.wait_p50_us),
                    wait(g.waits, g.wait_p99_us)
                ),
            );
        }
    }
    if m.swq_mode != "off" {
        let enq = dd(|g| g.swq_wake_idle + g.swq_wake_busy + g.swq_other);
        row(
            &mut s,
            "swq",
            &format!(
                "enq {} (idle {}, busy {}, other {})  pull {} (other llc {})",
                rate(enq, secs),
                pct(dd(|g| g.swq_wake_idle), enq),
                pct(dd(|g| g.swq_wake_busy), enq),
                pct(dd(|g| g.swq_other), enq),
                rate(dd(|g| g.swq_pull), secs),
                pct(dd(|g| g.swq_pull_xllc), dd(|g| g.swq_pull)),
            ),
        );
        row(
            &mut s,
            "swq wait",
            &format!(
                "depth {}  p50 {}  p99 {} (since attach)",
                t.swq_depth,
                wait(t.swq_waits, t.swq_wait_p50_us),
                wait(t.swq_waits, t.swq_wait_p99_us)
            ),
        );
    }
    if let Some(prev) = prev {
        for (path, c, cpu) in super::cgroups::top_between(prev, m, None, super::TOP_CGROUPS) {
            row(
                &mut s,
                "cgroup",
                &format!(
                    "{path:<24} weight {:<5} share {:>5.1}%  cpu {cpu:>5.1}%",
                    c.weight, c.share_pct
                ),
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(jsonl: &str) -> Vec<Metrics> {
        jsonl
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Recorded `--monitor 1 --json` samples render as the saved text
    /// (src/stats/testdata/*.txt; NIMBLE_BLESS=1 rewrites them).
    fn check(name: &str, jsonl: &str) {
        let v = samples(jsonl);
        let mut out = human(None, &v[0]);
        for w in v.windows(2) {
            out += &human(Some(&w[0]), &w[1]);
        }
        let path = format!(
            "{}/src/stats/testdata/{name}.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        if std::env::var_os("NIMBLE_BLESS").is_some() {
            std::fs::write(&path, &out).unwrap();
            return;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(out, want, "{path} differs: NIMBLE_BLESS=1 rewrites it");
    }

    #[test]
    fn snapshot_n2l4() {
        check("human-n2l4", crate::tui::ui::tests::N2L4);
    }

    #[test]
    fn snapshot_l2() {
        check("human-l2", crate::tui::ui::tests::L2);
    }

    #[test]
    fn lines_only_for_what_runs() {
        let n2l4 = samples(crate::tui::ui::tests::N2L4);
        let l2 = samples(crate::tui::ui::tests::L2);
        let a = human(Some(&n2l4[0]), &n2l4[1]);
        let b = human(Some(&l2[0]), &l2[1]);
        let has =
            |out: &str, label: &str| out.lines().any(|l| l.starts_with(&format!("  {label} ")));
        // Two nodes, four LLCs, swq off: node and LLC lines, no swq line.
        assert!(
            has(&a, "node 1") && has(&a, "llc 3") && has(&a, "numa"),
            "{a}"
        );
        assert!(!has(&a, "swq"), "{a}");
        // One node, swq on: no NUMA lines, an swq line.
        assert!(!has(&b, "numa") && !has(&b, "node 0"), "{b}");
        assert!(has(&b, "swq"), "{b}");
        // Short: a header and a handful of lines, none over 110 columns.
        assert!(a.lines().count() <= 15, "{a}");
        assert!(a.lines().all(|l| l.len() <= 110), "{a}");
    }

    #[test]
    fn restarted_counters_count_from_the_new_attach() {
        let v = samples(crate::tui::ui::tests::N2L4);
        // The later sample as `prev`: as after a reload, uptime went back.
        let out = human(Some(&v[1]), &v[0]);
        assert!(
            out.lines().next().unwrap().contains("since attach"),
            "{out}"
        );
        assert!(out.contains("cpu busy -"), "{out}");
    }

    #[test]
    fn rates_are_per_second_over_the_interval() {
        let v = samples(crate::tui::ui::tests::N2L4);
        let (p, m) = (&v[0], &v[1]);
        let secs = m.uptime_s - p.uptime_s;
        let want = rate(m.total.migrate - p.total.migrate, secs);
        let out = human(Some(p), m);
        assert!(out.contains(&format!("migrate {want} ")), "{want} in {out}");
        assert_eq!(rate(250, 2.0), "125/s");
        assert_eq!(rate(5, 2.0), "2.5/s");
        assert_eq!(wait(1, 14680.1), "14.7ms");
        assert_eq!(wait(0, 14680.1), "-");
        assert_eq!(pct(1, 4), "25.0%");
    }
}
