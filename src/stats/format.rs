//! How the metrics print: the human form (human.rs, the default), the
//! one-line form (`stats:` and `final:` lines, for grep and the tests), JSON, and the counter table of docs/metrics.md.
//! Names and order come from intf.h's counter lists.

use super::{Group, Metrics};
use crate::counters::{CPU_COUNTERS, LLC_COUNTERS, NODE_COUNTERS};
use anyhow::Result;
use std::fmt::Write as _;

impl Metrics {
    /// "numa_rule=X swq=Y swq_affinity=Z cgroup_weight=W mem_locality=M": the
    /// controls, as logs show them.
    pub fn controls(&self) -> String {
        format!(
            "numa_rule={} swq={} swq_affinity={} cgroup_weight={} mem_locality={}",
            self.numa_rule, self.swq_mode, self.swq_affinity, self.cgroup_weight, self.mem_locality
        )
    }

    /// The one-line form: controls, the cgroup slot count, then counters
    /// (`stats:` lines), and the pages memory locality moved.
    pub fn line(&self) -> String {
        format!(
            "{} nr_cgroups={} {} mem_pages_moved={} nr_cgroups_over={}",
            self.controls(),
            self.nr_cgroups,
            self.counters_line(),
            self.mem_pages_moved,
            self.nr_cgroups_over
        )
    }

    /// Counters as `name=total` and, where a breakdown exists,
    /// `node_name=a,b` / `llc_name=a,b,c,d`.
    pub fn counters_line(&self) -> String {
        let t = &self.total;
        let nodes: Vec<&Group> = self.nodes.values().collect();
        let llcs: Vec<&Group> = self.llcs.values().collect();
        let join = |v: Vec<String>| v.join(",");
        let per = |groups: &[&Group], f: &dyn Fn(&Group) -> String| {
            join(groups.iter().map(|g| f(g)).collect())
        };
        let mut s = String::new();
        for (c, v) in CPU_COUNTERS.iter().zip(t.cpu_counters()) {
            let _ = write!(s, "{}={v} ", c.name);
        }
        let _ = write!(
            s,
            "pending={} node_running={}",
            self.pending,
            per(&nodes, &|g| g.nr_running.to_string())
        );
        if nodes.len() > 1 {
            let each: Vec<_> = nodes.iter().map(|g| g.node_counters()).collect();
            for (c, v) in NODE_COUNTERS.iter().zip(t.node_counters()) {
                let by: Vec<String> = each.iter().map(|e| e[c.idx].to_string()).collect();
                let _ = write!(s, " {0}={v} node_{0}={1}", c.name, join(by));
            }
        }
        let enq = |g: &Group| g.swq_wake_idle + g.swq_wake_busy + g.swq_other;
        let _ = write!(
            s,
            " swq_enq={} llc_swq_enq={}",
            enq(t),
            per(&llcs, &|g| enq(g).to_string())
        );
        let each: Vec<_> = llcs.iter().map(|g| g.llc_counters()).collect();
        for (c, v) in LLC_COUNTERS.iter().zip(t.llc_counters()) {
            let by: Vec<String> = each.iter().map(|e| e[c.idx].to_string()).collect();
            let _ = write!(s, " {0}={v} llc_{0}={1}", c.name, join(by));
        }
        let per_try = |ns: u64| ns.checked_div(t.swq_pull_tries).unwrap_or(0);
        let _ = write!(
            s,
            " swq_pull_cost_ns={} swq_scan_cost_ns={}",
            per_try(t.swq_pull_ns),
            per_try(t.swq_scan_ns)
        );
        let _ = write!(
            s,
            " swq_depth={} llc_swq_depth={} queued={} llc_queued={} llc_running={}",
            t.swq_depth,
            per(&llcs, &|g| g.swq_depth.to_string()),
            t.queued,
            per(&llcs, &|g| g.queued.to_string()),
            per(&llcs, &|g| g.nr_running.to_string())
        );
        // A percentile of no samples prints as "-".
        let pct = |n: u64, us: f64| match n {
            0 => "-".to_string(),
            _ => format!("{us:.1}"),
        };
        type Wait = fn(&Group) -> (u64, f64);
        let waits: [(&str, Wait); 4] = [
            ("swq_wait_p50_us", |g| (g.swq_waits, g.swq_wait_p50_us)),
            ("swq_wait_p99_us", |g| (g.swq_waits, g.swq_wait_p99_us)),
            ("wait_p50_us", |g| (g.waits, g.wait_p50_us)),
            ("wait_p99_us", |g| (g.waits, g.wait_p99_us)),
        ];
        for (key, get) in waits {
            let show = |g: &Group| {
                let (n, us) = get(g);
                pct(n, us)
            };
            let _ = write!(s, " {key}={} llc_{key}={}", show(t), per(&llcs, &show));
        }
        s
    }
}

#[cfg(test)]
/// docs/metrics.md's counter table: every counter of intf.h's lists with
/// its breakdown and description, then the other fields of a group.
pub fn counters_markdown() -> String {
    let mut s = String::from("| field | per node / per LLC | meaning |\n| --- | --- | --- |\n");
    let lists = [
        (&CPU_COUNTERS[..], "by the counting CPU's node and LLC"),
        (
            &NODE_COUNTERS[..],
            "by the node it concerns; per LLC by the deciding CPU",
        ),
        (&LLC_COUNTERS[..], "by the LLC whose queue it was"),
    ];
    let mut counted = std::collections::BTreeSet::new();
    for (list, by) in lists {
        for c in list {
            let _ = writeln!(s, "| `{}` | {by} | {} |", c.name, c.desc);
            counted.insert(c.name);
        }
    }
    let meta = <Group as scx_stats::prelude::Meta>::meta();
    for (name, field) in &meta.fields {
        if !counted.contains(name.as_str()) {
            let desc = field.attrs.desc.as_deref().unwrap_or("");
            let _ = writeln!(
                s,
                "| `{name}` | gauge or wait: per LLC; per node from its LLCs' histograms, or its own count (`nr_running`) | {desc} |"
            );
        }
    }
    s
}

/// How many cgroups `--stats` lists per interval (those that got most CPU),
/// and the rows of the TUI's cgroups table.
pub const TOP_CGROUPS: usize = 5;

/// `cgroup:` lines, one per cgroup among the [`TOP_CGROUPS`] that got most
/// CPU since `prev`: its path, cpu.weight, entitled share and CPU received,
/// both in % of the machine. None before two samples.
pub fn cgroup_lines(prev: Option<&Metrics>, m: &Metrics) -> Vec<String> {
    let Some(prev) = prev else { return vec![] };
    super::cgroups::top_between(prev, m, None, TOP_CGROUPS)
        .into_iter()
        .map(|(path, c, cpu)| {
            format!(
                "cgroup: {path} weight={} share={:.1}% cpu={cpu:.1}%{}",
                c.weight,
                c.share_pct,
                if c.idle != 0 { " idle" } else { "" }
            )
        })
        .collect()
}

/// How `--stats` and `--monitor` print an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum StatsFormat {
    /// A few aligned lines: rates per second over the interval, shares in %.
    #[default]
    Human,
    /// One `stats:` line of cumulative counters (and `cgroup:` lines), for grep.
    Line,
    /// One JSON object (the metrics `--help-stats` describes).
    Json,
}

/// One interval's output in `fmt`. A closed stdout is an error
/// (io::ErrorKind::BrokenPipe), not a panic as with println!.
pub fn print_metrics(m: &Metrics, prev: Option<&Metrics>, fmt: StatsFormat) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match fmt {
        StatsFormat::Json => writeln!(out, "{}", serde_json::to_string(m)?)?,
        StatsFormat::Human => write!(out, "{}", super::human::human(prev, m))?,
        StatsFormat::Line => {
            writeln!(out, "stats: {}", m.line())?;
            for l in cgroup_lines(prev, m) {
                writeln!(out, "{l}")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- counters: generated from src/bpf/intf.h; NIMBLE_BLESS=1 cargo test --release --bin scx_nimble docs_table rewrites it -->\n";
    const END: &str = "<!-- end of generated counters -->";

    /// docs/metrics.md holds the table generated from the counter lists;
    /// NIMBLE_BLESS=1 rewrites it.
    #[test]
    fn docs_table_matches_the_counter_lists() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (a, b) = (
            doc.find(BEGIN).expect("begin marker"),
            doc.find(END).expect("end marker"),
        );
        let want = format!("{BEGIN}{}{END}", counters_markdown());
        let have = &doc[a..b + END.len()];
        if std::env::var_os("NIMBLE_BLESS").is_some() && have != want {
            std::fs::write(path, doc.replace(have, &want)).unwrap();
            return;
        }
        assert_eq!(
            have, want,
            "docs/metrics.md's counter table is stale: run with NIMBLE_BLESS=1"
        );
    }
}
