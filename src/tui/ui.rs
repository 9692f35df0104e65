//! What the TUI draws, as a pure function of a [`History`] of metric
//! snapshots: no I/O here, so tests draw recorded snapshots on ratatui's
//! TestBackend and read the text back.

use crate::stats::{Group, Metrics, TOP_CGROUPS};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, RenderDirection, Row, Sparkline, Table};
use ratatui::Frame;
use std::collections::VecDeque;
use std::time::Duration;

/// Intervals kept for the sparklines (two minutes at the default 1 s).
pub const KEEP: usize = 120;

/// One interval's traffic, per second.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rates {
    pub steals: u64,
    pub migrations: u64,
    pub swq: u64,
}

impl Rates {
    /// Rates between two snapshots `secs` apart. Counters only grow while one
    /// scheduler runs; saturating_sub turns a restart's reset into zeros.
    pub fn between(prev: &Group, cur: &Group, secs: f64) -> Rates {
        let d = |f: fn(&Group) -> u64| f(cur).saturating_sub(f(prev));
        let per_s = |n: u64| (n as f64 / secs).round() as u64;
        Rates {
            steals: per_s(d(|g| g.steal_node) + d(|g| g.steal_remote)),
            migrations: per_s(d(|g| g.migrate)),
            swq: per_s(d(|g| g.swq_wake_idle) + d(|g| g.swq_wake_busy) + d(|g| g.swq_other)),
        }
    }
}

/// The last two snapshots (loads are their difference) and the rates of
/// the last [`KEEP`] intervals.
#[derive(Debug)]
pub struct History {
    pub interval: Duration,
    prev: Option<Metrics>,
    cur: Option<Metrics>,
    rates: VecDeque<Rates>,
}

impl History {
    pub fn new(interval: Duration) -> Self {
        History {
            interval,
            prev: None,
            cur: None,
            rates: VecDeque::with_capacity(KEEP),
        }
    }

    pub fn push(&mut self, m: Metrics) {
        if let Some(cur) = &self.cur {
            // The scheduler's clock says what the counters cover (a late
            // sample is not a spike); if it went back the scheduler restarted.
            let dt = m.uptime_s - cur.uptime_s;
            let secs = if dt > 0.0 {
                dt
            } else {
                self.interval.as_secs_f64()
            };
            if self.rates.len() == KEEP {
                self.rates.pop_front();
            }
            self.rates
                .push_back(Rates::between(&cur.total, &m.total, secs));
        }
        self.prev = self.cur.replace(m);
    }

    pub fn latest(&self) -> Option<&Metrics> {
        self.cur.as_ref()
    }

    pub fn rates(&self) -> &VecDeque<Rates> {
        &self.rates
    }

    /// Busy share of `cpu` over the last interval; None before two samples.
    pub fn cpu_load(&self, cpu: u64) -> Option<f64> {
        let p = self.prev.as_ref()?.cpus.get(&cpu)?;
        let c = self.cur.as_ref()?.cpus.get(&cpu)?;
        let total = c.total_ticks.saturating_sub(p.total_ticks);
        let busy = c.busy_ticks.saturating_sub(p.busy_ticks);
        (total > 0).then(|| (busy as f64 / total as f64).min(1.0))
    }

    /// The cgroups that got most CPU over the last interval (path, cgroup,
    /// % of the machine); empty before two samples.
    pub fn top_cgroups(&self, n: usize) -> Vec<(&str, &crate::stats::Cgroup, f64)> {
        let (Some(p), Some(c)) = (self.prev.as_ref(), self.cur.as_ref()) else {
            return vec![];
        };
        crate::stats::cgroups::top_between(p, c, Some(self.interval.as_secs_f64()), n)
    }

    /// Mean load of the CPUs `pick` selects.
    fn mean_load(&self, pick: impl Fn(&crate::stats::Cpu) -> bool) -> Option<f64> {
        let m = self.cur.as_ref()?;
        let cpus = m.cpus.iter().filter(|(_, c)| pick(c));
        let l: Vec<f64> = cpus.filter_map(|(id, _)| self.cpu_load(*id)).collect();
        (!l.is_empty()).then(|| l.iter().sum::<f64>() / l.len() as f64)
    }
}

/// Draws the whole screen.
pub fn draw(f: &mut Frame, h: &History) {
    let title = h
        .latest()
        .map_or(vec![Line::from("waiting for the first sample…")], title);
    // The status on one line if it fits, else on two.
    let one: usize = title.iter().map(Line::width).sum::<usize>() + 2;
    let title = if one <= f.area().width as usize {
        vec![Line::from_iter(
            title
                .into_iter()
                .flat_map(|l| l.spans.into_iter().chain([Span::raw("  ")])),
        )]
    } else {
        title
    };
    let [top, body, help] = Layout::vertical([
        Constraint::Length(title.len() as u16),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(Paragraph::new(title), top);
    let every = format!("{:.1}s", h.interval.as_secs_f64());
    let help_text = format!("q quit · refreshed every {every} · data: {}", super::SOCKET);
    f.render_widget(
        Paragraph::new(help_text).style(Style::new().fg(Color::DarkGray)),
        help,
    );
    let Some(m) = h.latest() else {
        return;
    };
    let thr_h = if m.thresholds.is_empty() {
        3
    } else {
        m.thresholds.len() as u16 + 3
    };
    // The tree beside a column of sparklines and thresholds when there is
    // room for both, stacked on narrow terminals.
    let (tree, side) = if body.width >= 72 {
        let side_w = (body.width * 2 / 5).max(34);
        let [a, b] =
            Layout::horizontal([Constraint::Min(0), Constraint::Length(side_w)]).areas(body);
        (a, b)
    } else {
        let [a, b] =
            Layout::vertical([Constraint::Min(4), Constraint::Length(9 + thr_h)]).areas(body);
        (a, b)
    };
    let [sparks, thr] =
        Layout::vertical([Constraint::Min(9), Constraint::Length(thr_h)]).areas(side);
    // The busiest cgroups under the tree, when any has runnable tasks.
    let top = h.top_cgroups(TOP_CGROUPS);
    let tree = if top.is_empty() {
        tree
    } else {
        let [t, c] =
            Layout::vertical([Constraint::Min(6), Constraint::Length(top.len() as u16 + 3)])
                .areas(tree);
        cgroups(f, c, &top);
        t
    };
    topology(f, tree, h, m);
    sparklines(f, sparks, h);
    thresholds(f, thr, m);
}

/// Status: who runs and for how long, then the controls in force.
fn title(m: &Metrics) -> Vec<Line<'static>> {
    let who = Line::from(vec![
        Span::styled(m.sched.clone(), Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!(
            "  up {}  pending {}",
            fmt_uptime(m.uptime_s),
            m.pending
        )),
    ]);
    let how = format!(
        "{}  imb={}  slice {}us",
        m.controls(),
        m.imb_formula,
        m.slice_us
    );
    vec![who, Line::from(how)]
}

/// Nodes, their LLCs, and the LLCs' CPUs (CPU rows go first when the
/// tree does not fit: every node and LLC stays visible).
fn topology(f: &mut Frame, area: Rect, h: &History, m: &Metrics) {
    let block = Block::bordered().title(" topology ");
    let inner = block.inner(area);
    f.render_widget(block, area);
    // An LLC's node is its CPUs'; one without online CPUs (or of a node
    // not reported) goes last.
    let llc_node = |llc: u64| {
        let node = m.cpus.values().find(|c| c.llc == llc).map(|c| c.node);
        node.filter(|n| m.nodes.contains_key(n))
    };
    let cpus_of = |llc: u64| {
        m.cpus
            .iter()
            .filter(move |(_, c)| c.llc == llc)
            .map(|(id, _)| *id)
    };
    let id_w = m.cpus.keys().last().map_or(1, |id| id.to_string().len());
    let cell_w = 1 + 3 + id_w + 5; // " cpu12  87%"
    let per_row = ((inner.width as usize).saturating_sub(3) / cell_w).max(1);
    let cpu_rows: usize = m
        .llcs
        .keys()
        .map(|l| cpus_of(*l).count().div_ceil(per_row))
        .sum();
    let orphans = m.llcs.keys().any(|l| llc_node(*l).is_none());
    let heads = m.nodes.len() + m.llcs.len() + orphans as usize;
    let with_cpus = heads + cpu_rows <= inner.height as usize;

    let mut lines = Vec::new();
    let llc_lines = |lines: &mut Vec<Line>, node: Option<u64>| {
        for (&llc, g) in m.llcs.iter().filter(|(l, _)| llc_node(**l) == node) {
            let load = h.mean_load(|c| c.llc == llc);
            lines.push(group_line(format!("  LLC {llc}"), load, g, true));
            if !with_cpus {
                continue;
            }
            let ids: Vec<u64> = cpus_of(llc).collect();
            for row in ids.chunks(per_row) {
                let mut spans = vec![Span::raw("   ")];
                for &cpu in row {
                    let l = h.cpu_load(cpu);
                    let cell = format!(" cpu{cpu:<id_w$}{:>5}", fmt_pct(l));
                    spans.push(Span::styled(cell, load_style(l)));
                }
                lines.push(Line::from(spans));
            }
        }
    };
    for (&node, g) in &m.nodes {
        let load = h.mean_load(|c| c.node == node);
        let mut line = group_line(format!("node {node}"), load, g, false);
        // Memory locality since attach: run time of the tasks whose memory
        // is here, on this node (src/memloc/).
        if g.mem_known_ns > 0 {
            let local = 100.0 * g.mem_local_ns as f64 / g.mem_known_ns as f64;
            line.spans.push(Span::raw(format!("  mem {local:.0}%")));
        }
        // Tasks that came here by a NUMA swap (src/bpf/numa_swap.bpf.h).
        if g.mem_swap > 0 {
            line.spans.push(Span::raw(format!(" swaps {}", g.mem_swap)));
        }
        lines.push(line.style(Style::new().add_modifier(Modifier::BOLD)));
        llc_lines(&mut lines, Some(node));
    }
    if orphans {
        lines.push(Line::from("LLCs without online CPUs"));
        llc_lines(&mut lines, None);
    }
    f.render_widget(Paragraph::new(lines), inner);
}

fn group_line(name: String, load: Option<f64>, g: &Group, wait: bool) -> Line<'static> {
    let mut spans = vec![
        Span::raw(format!("{name}  ")),
        Span::styled(format!("{:>4}", fmt_pct(load)), load_style(load)),
        Span::raw(format!(
            " run {} q {} swq {}",
            g.nr_running, g.queued, g.swq_depth
        )),
    ];
    if wait {
        // 99th percentile wait: the LLC DSQ's, then the swq's when it is used.
        let mut p99 = if g.waits > 0 {
            fmt_us(g.wait_p99_us)
        } else {
            "-".into()
        };
        if g.swq_waits > 0 {
            p99 = format!("{p99}/{}", fmt_us(g.swq_wait_p99_us));
        }
        spans.push(Span::raw(format!("  p99 {p99}")));
    }
    Line::from(spans)
}

fn sparklines(f: &mut Frame, area: Rect, h: &History) {
    type Series = (&'static str, fn(&Rates) -> u64, Color);
    let series: [Series; 3] = [
        ("steals", |r| r.steals, Color::Cyan),
        ("migrations", |r| r.migrations, Color::Magenta),
        ("swq enqueues", |r| r.swq, Color::Yellow),
    ];
    let rows = Layout::vertical([Constraint::Ratio(1, 3); 3]).split(area);
    for ((name, get, color), row) in series.into_iter().zip(rows.iter()) {
        let last = h
            .rates()
            .back()
            .map_or("-".into(), |r| format!("{}/s", fmt_count(get(r))));
        let block = Block::new()
            .borders(Borders::TOP)
            .title(format!(" {name} {last} "));
        // Newest at the right edge, older ones scrolling off to the left.
        let data: Vec<u64> = h
            .rates
            .iter()
            .rev()
            .take(row.width as usize)
            .map(get)
            .collect();
        let spark = Sparkline::default()
            .block(block)
            .data(data)
            .direction(RenderDirection::RightToLeft)
            .style(Style::new().fg(color));
        f.render_widget(spark, *row);
    }
}

fn thresholds(f: &mut Frame, area: Rect, m: &Metrics) {
    let block = Block::bordered().title(" NUMA thresholds ");
    if m.thresholds.is_empty() {
        let note = if m.nodes.len() <= 1 {
            "single node: no NUMA levels"
        } else {
            "no NUMA levels"
        };
        f.render_widget(Paragraph::new(note).block(block), area);
        return;
    }
    let header = Row::new(["node", "lvl", "dist", "span", "imb_numa_nr"])
        .style(Style::new().add_modifier(Modifier::BOLD));
    let rows = m.thresholds.iter().map(|t| {
        let cells = [t.node, t.level, t.distance, t.span_weight, t.imb_numa_nr];
        Row::new(cells.map(|v| v.to_string()))
    });
    let widths = [4, 3, 4, 5, 11].map(Constraint::Length);
    f.render_widget(Table::new(rows, widths).header(header).block(block), area);
}

/// cgroup cpu.weight: the busiest cgroups, what their weights entitle them
/// to and what they got, both in % of the machine.
fn cgroups(f: &mut Frame, area: Rect, top: &[(&str, &crate::stats::Cgroup, f64)]) {
    let block = Block::bordered().title(" cgroups (top by CPU) ");
    let header = Row::new(["cgroup", "weight", "share", "cpu"])
        .style(Style::new().add_modifier(Modifier::BOLD));
    let rows = top.iter().map(|(path, c, cpu)| {
        Row::new([
            path.to_string(),
            c.weight.to_string(),
            format!("{:.1}%", c.share_pct),
            format!("{cpu:.1}%"),
        ])
    });
    let widths = [
        Constraint::Min(10),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
    ];
    f.render_widget(Table::new(rows, widths).header(header).block(block), area);
}

fn load_style(load: Option<f64>) -> Style {
    Style::new().fg(match load {
        None => Color::DarkGray,
        Some(l) if l >= 0.85 => Color::Red,
        Some(l) if l >= 0.5 => Color::Yellow,
        Some(_) => Color::Green,
    })
}

fn fmt_pct(load: Option<f64>) -> String {
    load.map_or("-".into(), |l| format!("{:.0}%", l * 100.0))
}

/// 9876, 12k, 45M: at most five characters, for sparkline titles.
pub fn fmt_count(n: u64) -> String {
    match n {
        0..10_000 => n.to_string(),
        10_000..10_000_000 => format!("{}k", n / 1000),
        _ => format!("{}M", n / 1_000_000),
    }
}

fn fmt_us(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.1}us")
    } else if us < 1000.0 {
        format!("{us:.0}us")
    } else if us < 100_000.0 {
        format!("{:.1}ms", us / 1000.0)
    } else {
        format!("{:.0}ms", us / 1000.0)
    }
}

fn fmt_uptime(s: f64) -> String {
    let s = s.max(0.0) as u64;
    let (d, h, m, s) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, _) => format!("{h}h{m:02}m{s:02}s"),
        _ => format!("{d}d{h:02}h{m:02}m"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    /// Fixtures: `scx_nimble --monitor 1 --json` output, one Metrics per line.
    pub const N2L4: &str = include_str!("testdata/n2l4.jsonl");
    pub const L2: &str = include_str!("testdata/l2.jsonl");

    pub fn snapshots(jsonl: &str) -> Vec<Metrics> {
        let lines = jsonl.lines().filter(|l| l.trim_start().starts_with('{'));
        lines
            .map(|l| serde_json::from_str(l).expect("fixture line is Metrics"))
            .collect()
    }

    /// The snapshots fed in order, as the TUI would have received them.
    pub fn history(jsonl: &str) -> History {
        let mut h = History::new(Duration::from_secs(1));
        snapshots(jsonl).into_iter().for_each(|m| h.push(m));
        h
    }

    /// Draws `h` on a w×h test terminal; the screen's text, one row a line.
    pub fn screen(h: &History, w: u16, rows: u16) -> String {
        let mut term = Terminal::new(TestBackend::new(w, rows)).unwrap();
        term.draw(|f| draw(f, h)).unwrap();
        let buf = term.backend().buffer();
        let area = buf.area;
        let row = |y| {
            (0..area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        };
        (0..area.height).map(row).collect::<Vec<_>>().join("\n")
    }

    fn words(line: &str) -> Vec<String> {
        let clean: String = line
            .chars()
            .map(|c| {
                if c.is_alphanumeric() || c == '_' {
                    c
                } else {
                    ' '
                }
            })
            .collect();
        clean.split_whitespace().map(String::from).collect()
    }

    /// Some row of `s` has `seq` as consecutive words (box drawing ignored).
    fn has_words(s: &str, seq: &[String]) -> bool {
        s.lines()
            .any(|l| words(l).windows(seq.len()).any(|w| w == seq))
    }

    fn assert_topology(s: &str, m: &Metrics) {
        for n in m.nodes.keys() {
            assert!(
                has_words(s, &["node".to_string(), n.to_string()]),
                "node {n} missing:\n{s}"
            );
        }
        for l in m.llcs.keys() {
            assert!(
                has_words(s, &["LLC".to_string(), l.to_string()]),
                "LLC {l} missing:\n{s}"
            );
        }
    }

    fn assert_thresholds(s: &str, m: &Metrics) {
        for t in &m.thresholds {
            let row =
                [t.node, t.level, t.distance, t.span_weight, t.imb_numa_nr].map(|v| v.to_string());
            assert!(has_words(s, &row), "threshold {t:?} missing:\n{s}");
        }
        if m.thresholds.is_empty() {
            assert!(s.contains("no NUMA levels"), "{s}");
        }
    }

    /// The latest interval's rates, computed here from the raw snapshots.
    fn expected_rates(jsonl: &str) -> Rates {
        let v = snapshots(jsonl);
        let (p, c) = (&v[v.len() - 2], &v[v.len() - 1]);
        let secs = c.uptime_s - p.uptime_s;
        let r = |n: u64| (n as f64 / secs).round() as u64;
        let (a, b) = (&p.total, &c.total);
        Rates {
            steals: r(b.steal_node + b.steal_remote - a.steal_node - a.steal_remote),
            migrations: r(b.migrate - a.migrate),
            swq: r(b.swq_wake_idle + b.swq_wake_busy + b.swq_other
                - a.swq_wake_idle
                - a.swq_wake_busy
                - a.swq_other),
        }
    }

    #[test]
    fn fixtures_load() {
        for f in [N2L4, L2] {
            let v = snapshots(f);
            assert!(v.len() >= 2, "a fixture needs two snapshots for deltas");
            assert!(v.windows(2).all(|w| w[1].uptime_s > w[0].uptime_s));
        }
        let m = &snapshots(N2L4)[0];
        assert_eq!((m.nodes.len(), m.llcs.len(), m.cpus.len()), (2, 4, 8));
        assert_eq!(snapshots(L2)[0].nodes.len(), 1);
    }

    #[test]
    fn two_nodes_shows_tree_sparklines_thresholds() {
        let h = history(N2L4);
        let m = h.latest().unwrap();
        let want = expected_rates(N2L4);
        assert_eq!(h.rates().back(), Some(&want));
        for (w, rows) in [(80, 24), (100, 30), (160, 50)] {
            let s = screen(&h, w, rows);
            assert_topology(&s, m);
            assert_thresholds(&s, m);
            assert!(
                s.contains(&format!("steals {}/s", fmt_count(want.steals))),
                "{s}"
            );
            assert!(
                s.contains(&format!("migrations {}/s", fmt_count(want.migrations))),
                "{s}"
            );
            assert!(
                s.contains(&format!("swq enqueues {}/s", fmt_count(want.swq))),
                "{s}"
            );
            assert!(s.contains(&m.controls()), "{s}");
            assert!(s.contains("q quit · refreshed every 1.0s · data: /var/run/scx/root/stats"));
        }
    }

    #[test]
    fn cpu_cells_show_interval_load() {
        let h = history(N2L4);
        let s = screen(&h, 160, 50);
        let v = snapshots(N2L4);
        let (p, c) = (&v[v.len() - 2], &v[v.len() - 1]);
        for (id, cpu) in &c.cpus {
            let busy = cpu.busy_ticks - p.cpus[id].busy_ticks;
            let total = cpu.total_ticks - p.cpus[id].total_ticks;
            let pct = format!("{:.0}%", busy as f64 * 100.0 / total as f64);
            assert_eq!(h.cpu_load(*id).map(|l| fmt_pct(Some(l))), Some(pct.clone()));
            let cell = [format!("cpu{id}"), pct.trim_end_matches('%').to_string()];
            assert!(has_words(&s, &cell), "cpu{id} {pct} missing:\n{s}");
        }
    }

    #[test]
    fn cgroups_panel_shows_the_busiest_over_the_interval() {
        let mut v = snapshots(N2L4);
        let n = v.len();
        let cg = |weight, share_pct, usage_us| crate::stats::Cgroup {
            weight,
            idle: 0,
            share_pct,
            usage_us,
        };
        let secs = v[n - 1].uptime_s - v[n - 2].uptime_s;
        let cpu_us = |pct: f64| (pct / 100.0 * secs * 1e6 * 8.0) as u64;
        v[n - 2].cgroups = [("wA", cg(100, 20.0, 0)), ("wB", cg(400, 80.0, 0))]
            .map(|(p, c)| (p.to_string(), c))
            .into();
        v[n - 1].cgroups = [
            ("wA", cg(100, 20.0, cpu_us(21.0))),
            ("wB", cg(400, 80.0, cpu_us(78.0))),
        ]
        .map(|(p, c)| (p.to_string(), c))
        .into();
        let mut h = History::new(Duration::from_secs(1));
        v.into_iter().for_each(|m| h.push(m));
        let s = screen(&h, 120, 40);
        assert!(s.contains("cgroups (top by CPU)"), "{s}");
        // Words: "80.0%" reads as 80 0.
        let row = |w: [&str; 6]| w.map(String::from);
        assert!(
            has_words(&s, &row(["wB", "400", "80", "0", "78", "0"])),
            "{s}"
        );
        assert!(
            has_words(&s, &row(["wA", "100", "20", "0", "21", "0"])),
            "{s}"
        );
        // wB got more, so it comes first; the tree stays whole beside it.
        assert!(s.find("wB").unwrap() < s.find("wA").unwrap(), "{s}");
        assert_topology(&s, h.latest().unwrap());
        // No cgroups with runnable tasks: no panel.
        assert!(!screen(&history(N2L4), 120, 40).contains("cgroups"));
    }

    #[test]
    fn single_node_has_no_numa_levels() {
        let h = history(L2);
        let m = h.latest().unwrap();
        for (w, rows) in [(80, 24), (120, 40)] {
            let s = screen(&h, w, rows);
            assert_topology(&s, m);
            assert!(s.contains("single node: no NUMA levels"), "{s}");
        }
    }

    #[test]
    fn tree_keeps_every_llc_when_cpus_do_not_fit() {
        // 80x12 leaves the tree 8 rows: 6 node/LLC rows fit, CPU rows not.
        let h = history(N2L4);
        let s = screen(&h, 80, 12);
        assert_topology(&s, h.latest().unwrap());
        assert!(!s.contains("cpu0"), "{s}");
    }

    #[test]
    fn big_machine_keeps_every_node_and_llc() {
        // 8 nodes × 4 LLCs × 8 CPUs, 3 NUMA levels: CPU rows give way.
        let mut m = snapshots(N2L4).remove(0);
        m.nodes = (0..8).map(|n| (n, Group::default())).collect();
        m.llcs = (0..32).map(|l| (l, Group::default())).collect();
        m.cpus = (0..256u64)
            .map(|c| {
                (
                    c,
                    crate::stats::Cpu {
                        llc: c / 8,
                        node: c / 32,
                        ..Default::default()
                    },
                )
            })
            .collect();
        m.thresholds = (0..24)
            .map(|i| crate::stats::Threshold {
                node: i / 3,
                level: i % 3 + 1,
                ..Default::default()
            })
            .collect();
        let mut h = History::new(Duration::from_secs(1));
        h.push(m.clone());
        h.push(m.clone());
        let s = screen(&h, 120, 50);
        assert_topology(&s, &m);
        assert!(!s.contains("cpu0 "), "{s}");
        for (w, rows) in [(80, 24), (300, 100)] {
            screen(&h, w, rows);
        }
    }

    #[test]
    fn tiny_and_empty_screens_do_not_panic() {
        let empty = History::new(Duration::from_secs(1));
        let mut one = History::new(Duration::from_millis(500));
        one.push(snapshots(N2L4).remove(0));
        let s = screen(&one, 80, 24);
        assert!(s.contains("steals -") && s.contains("every 0.5s"), "{s}");
        assert!(screen(&empty, 80, 24).contains("waiting for the first sample"));
        for h in [&empty, &one, &history(N2L4), &history(L2)] {
            for (w, rows) in [(40, 10), (20, 5), (1, 1), (71, 24), (200, 3)] {
                screen(h, w, rows);
            }
        }
    }

    #[test]
    fn history_is_bounded_and_survives_counter_reset() {
        let v = snapshots(N2L4);
        let mut h = History::new(Duration::from_secs(1));
        for i in 0..KEEP + 10 {
            let mut m = v[i % 2].clone();
            m.uptime_s = i as f64;
            h.push(m);
        }
        assert_eq!(h.rates().len(), KEEP);
        // Counters going back (a restarted scheduler): zero rates, no panic.
        let mut h = history(N2L4);
        let mut reset = v[0].clone();
        reset.uptime_s = 0.5;
        h.push(reset);
        assert_eq!(h.rates().back(), Some(&Rates::default()));
        // This reset also took /proc/stat ticks back: no load, not a bogus one.
        assert_eq!(h.cpu_load(0), None);
        assert!(!screen(&h, 80, 24).contains('%'));
    }

    /// The usual terminal sizes show every panel, LLC and CPU of both
    /// fixtures; a 40x10 terminal still gets the header. Run with
    /// `--nocapture` to see the screens.
    #[test]
    fn common_sizes_show_every_panel_llc_and_cpu() {
        for (f, llcs, w, rows) in [(N2L4, 4, 80, 24), (L2, 2, 80, 24), (N2L4, 4, 120, 30)] {
            let s = screen(&history(f), w, rows);
            println!("{s}\n");
            for want in [
                "topology",
                "NUMA thresholds",
                "steals",
                "migrations",
                "q quit",
            ] {
                assert!(s.contains(want), "{w}x{rows}: no {want:?} in\n{s}");
            }
            for l in 0..llcs {
                assert!(
                    s.contains(&format!("LLC {l} ")),
                    "{w}x{rows}: no LLC {l} in\n{s}"
                );
            }
            for c in 0..8 {
                assert!(
                    s.contains(&format!("cpu{c} ")),
                    "{w}x{rows}: no cpu{c} in\n{s}"
                );
            }
        }
        let s = screen(&history(N2L4), 40, 10);
        println!("{s}");
        assert!(s.starts_with("scx_nimble"), "40x10: no header in\n{s}");
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_count(9876), "9876");
        assert_eq!(fmt_count(12_345), "12k");
        assert_eq!(fmt_count(9_999_999), "9999k");
        assert_eq!(fmt_count(45_600_000), "45M");
        assert_eq!(fmt_uptime(59.9), "59s");
        assert_eq!(fmt_uptime(3723.0), "1h02m03s");
        assert_eq!(fmt_uptime(90061.0), "1d01h01m");
        assert_eq!(fmt_us(4.25), "4.2us");
        assert_eq!(fmt_us(49.0), "49us");
        assert_eq!(fmt_us(1500.0), "1.5ms");
        assert_eq!(fmt_us(134_217.7), "134ms");
    }
}
