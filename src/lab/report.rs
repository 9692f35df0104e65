//! Turns the events of a run into results: cells of samples with their
//! statistics, the seed-style tables and the JSON (hyperfine-like: every
//! sample kept next to its summary).

use crate::plan::Plan;
use crate::runner::{Env, Event, Sample};
use crate::stats::{pct_vs, Stat, Summary};
use crate::workloads;
use serde::Serialize;
use std::fmt::Write;

#[derive(Debug, Serialize)]
pub struct Report {
    pub tool: String,
    /// Where the samples came from: `native` or `vm:TOPOLOGY`.
    pub machine: String,
    pub env: Option<Env>,
    pub runs: u32,
    pub baseline: String,
    pub stat: Stat,
    pub variants: Vec<VariantInfo>,
    pub experiments: Vec<ExpResult>,
    /// Rounds in which a variant's scheduler fell off mid-sample (that
    /// variant's cells then hold fewer than `runs` samples).
    pub detached: Vec<Detach>,
    /// Set when the run stopped early; what was measured is still here.
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Detach {
    pub round: u32,
    pub variant: String,
    pub message: String,
}

#[derive(Debug, Serialize)]
pub struct VariantInfo {
    pub label: String,
    pub spec: String,
    /// root/ops as the kernel named the scheduler, per attach.
    pub ops: Vec<String>,
    pub attach_s: Vec<f64>,
}

#[derive(Debug, Serialize)]
pub struct ExpResult {
    pub workload: String,
    pub param: String,
    pub metric: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub primary: bool,
    pub points: Vec<u32>,
    pub results: Vec<Cell>,
}

#[derive(Debug, Serialize)]
pub struct Cell {
    pub variant: String,
    pub point: u32,
    #[serde(flatten)]
    pub summary: Option<Summary>,
    /// The table's statistic relative to the baseline's, positive = better.
    pub pct_vs_baseline: Option<f64>,
    /// Every sample, in round order.
    pub samples: Vec<f64>,
    pub rounds: Vec<u32>,
}

impl Report {
    pub fn build(plan: &Plan, machine: &str, stat: Stat, events: &[Event]) -> Report {
        let mut env = None;
        let mut error = None;
        let mut detached = vec![];
        let mut samples: Vec<&Sample> = vec![];
        let mut variants: Vec<VariantInfo> = plan
            .variants
            .iter()
            .map(|v| VariantInfo {
                label: v.label.clone(),
                spec: v.spec.clone(),
                ops: vec![],
                attach_s: vec![],
            })
            .collect();
        for e in events {
            match e {
                Event::Env(x) => env = Some(x.clone()),
                Event::Error { message } => error = Some(message.clone()),
                Event::Sample(s) => samples.push(s),
                Event::Detached {
                    round,
                    variant,
                    message,
                } => detached.push(Detach {
                    round: *round,
                    variant: variant.clone(),
                    message: message.clone(),
                }),
                Event::Attach {
                    variant,
                    ops,
                    attach_s,
                    ..
                } => {
                    if let Some(v) = variants.iter_mut().find(|v| &v.label == variant) {
                        v.ops.push(ops.clone());
                        v.attach_s.push(*attach_s);
                    }
                }
            }
        }
        let mut experiments = vec![];
        for e in &plan.experiments {
            let Some(spec) = workloads::spec(&e.workload) else {
                continue;
            };
            for (mi, m) in spec.metrics.iter().enumerate() {
                let mut results = vec![];
                for &point in &e.points {
                    let base = cell(&samples, &plan.baseline, &e.workload, point, m.name)
                        .map(|s| stat.pick(&s.0));
                    for v in &plan.variants {
                        let (summary, vals, rounds) =
                            match cell(&samples, &v.label, &e.workload, point, m.name) {
                                Some((s, vals, rounds)) => (Some(s), vals, rounds),
                                None => (None, vec![], vec![]),
                            };
                        let pct = match (base, summary) {
                            (Some(b), Some(s)) => pct_vs(b, stat.pick(&s), m.higher_is_better),
                            _ => None,
                        };
                        results.push(Cell {
                            variant: v.label.clone(),
                            point,
                            summary,
                            pct_vs_baseline: pct,
                            samples: vals,
                            rounds,
                        });
                    }
                }
                experiments.push(ExpResult {
                    workload: e.workload.clone(),
                    param: spec.param.to_string(),
                    metric: m.name.to_string(),
                    unit: m.unit.to_string(),
                    higher_is_better: m.higher_is_better,
                    primary: mi == 0,
                    points: e.points.clone(),
                    results,
                });
            }
        }
        Report {
            tool: format!("nimble-lab {}", env!("CARGO_PKG_VERSION")),
            machine: machine.to_string(),
            env,
            runs: plan.runs,
            baseline: plan.baseline.clone(),
            stat,
            variants,
            experiments,
            detached,
            error,
        }
    }

    pub fn header(&self) -> String {
        let env = self
            .env
            .as_ref()
            .map_or("unknown machine".to_string(), |e| {
                format!(
                    "{}, kernel {}, {} CPUs / {} nodes / {} LLCs",
                    e.date, e.kernel, e.cpus, e.nodes, e.llcs
                )
            });
        format!(
            "{} on {}: {}; {} of {} runs per cell, variants interleaved",
            self.tool,
            self.machine,
            env,
            self.stat_name(),
            self.runs
        )
    }

    fn stat_name(&self) -> &'static str {
        match self.stat {
            Stat::Median => "median",
            Stat::Mean => "mean",
        }
    }

    /// Seed-style tables: `value (pct vs baseline)`; `markdown` for the README.
    pub fn tables(&self, markdown: bool, all_metrics: bool) -> String {
        let mut out = String::new();
        let labels: Vec<&str> = self.variants.iter().map(|v| v.label.as_str()).collect();
        for x in self.experiments.iter().filter(|x| x.primary || all_metrics) {
            let dir = if x.higher_is_better {
                "higher"
            } else {
                "lower"
            };
            let title = format!(
                "{} (Measure: {}, {}; {} is better; pct vs {}, positive = better)",
                x.workload, x.metric, x.unit, dir, self.baseline
            );
            let _ = match markdown {
                true => writeln!(out, "\n**{title}**\n"),
                false => writeln!(out, "\n{title}"),
            };
            let mut rows: Vec<Vec<String>> = vec![];
            let mut head = vec![x.param.clone()];
            head.extend(labels.iter().map(|l| l.to_string()));
            rows.push(head);
            for &p in &x.points {
                let mut row = vec![p.to_string()];
                for l in &labels {
                    let c = x.results.iter().find(|c| c.point == p && c.variant == *l);
                    row.push(
                        match c.and_then(|c| c.summary.map(|s| (s, c.pct_vs_baseline))) {
                            Some((s, pct)) => format!(
                                "{} ({} pct){}",
                                fmt_val(self.stat.pick(&s)),
                                pct.map_or("-".into(), |p| format!("{p:.2}")),
                                // Fewer samples than runs: the cell says so.
                                if s.n < self.runs as usize {
                                    format!(" [n={}]", s.n)
                                } else {
                                    String::new()
                                }
                            ),
                            None => "-".to_string(),
                        },
                    );
                }
                rows.push(row);
            }
            out.push_str(&layout(&rows, markdown));
        }
        for d in &self.detached {
            let _ = writeln!(
                out,
                "\n{} detached in round {}: {}{}",
                d.variant,
                d.round + 1,
                d.message,
                if markdown { "  " } else { "" }
            );
        }
        out
    }

    /// Per cell: mean ± stddev [min, max] (n), for the spread behind the table.
    pub fn details(&self) -> String {
        let mut out = String::new();
        for x in self.experiments.iter().filter(|x| x.primary) {
            let _ = writeln!(out, "\n{} {} ({}), per cell:", x.workload, x.metric, x.unit);
            let mut rows = vec![vec![
                "variant".to_string(),
                x.param.clone(),
                "mean ± stddev [min, max] n".into(),
            ]];
            for c in &x.results {
                if let Some(s) = c.summary {
                    rows.push(vec![
                        c.variant.clone(),
                        c.point.to_string(),
                        format!(
                            "{} ± {} [{}, {}] {}",
                            fmt_val(s.mean),
                            fmt_val(s.stddev),
                            fmt_val(s.min),
                            fmt_val(s.max),
                            s.n
                        ),
                    ]);
                }
            }
            out.push_str(&layout(&rows, false));
        }
        out
    }
}

fn cell(
    samples: &[&Sample],
    variant: &str,
    workload: &str,
    point: u32,
    metric: &str,
) -> Option<(Summary, Vec<f64>, Vec<u32>)> {
    let mut vals = vec![];
    let mut rounds = vec![];
    for s in samples
        .iter()
        .filter(|s| s.variant == variant && s.workload == workload && s.point == point)
    {
        if let Some((_, v)) = s.metrics.iter().find(|(k, _)| k == metric) {
            vals.push(*v);
            rounds.push(s.round);
        }
    }
    Summary::of(&vals).map(|s| (s, vals, rounds))
}

/// Two decimals like the seeds, fewer digits only for very small values.
pub fn fmt_val(v: f64) -> String {
    if v != 0.0 && v.abs() < 0.01 {
        format!("{v:.4}")
    } else {
        format!("{v:.2}")
    }
}

fn layout(rows: &[Vec<String>], markdown: bool) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| format!("{s:<w$}", w = width[c]))
            .collect();
        if markdown {
            let _ = writeln!(out, "| {} |", cells.join(" | "));
            if i == 0 {
                let dashes: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
                let _ = writeln!(out, "| {} |", dashes.join(" | "));
            }
        } else {
            let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        }
    }
    out
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::plan::Experiment;
    use crate::runner::Event;

    pub fn fake_plan() -> Plan {
        let hackbench = Experiment {
            workload: "hackbench".into(),
            points: vec![1, 2],
        };
        crate::plan::test_plan(&["eevdf", "tip=nimble:--swq off"], vec![hackbench])
    }

    /// hackbench times: eevdf 4,5,6 s and tip 3,3,4 s at both points.
    pub fn fake_events() -> Vec<Event> {
        let mut ev = vec![];
        for (round, (e, t)) in [(4.0, 3.0), (6.0, 3.0), (5.0, 4.0)].into_iter().enumerate() {
            for point in [1, 2] {
                for (variant, v) in [("eevdf", e), ("tip", t)] {
                    ev.push(Event::Sample(Sample {
                        round: round as u32,
                        variant: variant.into(),
                        workload: "hackbench".into(),
                        point,
                        metrics: vec![("time".into(), v * point as f64)],
                        wall_s: v,
                    }));
                }
            }
        }
        ev
    }

    #[test]
    fn cells_tables_and_json() {
        let rep = Report::build(&fake_plan(), "vm:n2l4", Stat::Median, &fake_events());
        let x = &rep.experiments[0];
        assert_eq!(
            (x.metric.as_str(), x.primary, x.higher_is_better),
            ("time", true, false)
        );
        let tip2 = x
            .results
            .iter()
            .find(|c| c.variant == "tip" && c.point == 2)
            .unwrap();
        assert_eq!(tip2.samples, [6.0, 6.0, 8.0]);
        assert_eq!(tip2.rounds, [0, 1, 2]);
        let s = tip2.summary.unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (3, 6.0, 6.0, 8.0));
        // eevdf's median at 2 groups is 10 s, tip's 6 s: 40 pct better.
        assert!((tip2.pct_vs_baseline.unwrap() - 40.0).abs() < 1e-9);
        let t = rep.tables(false, false);
        assert!(t.contains("groups  eevdf"), "{t}");
        assert!(t.contains("10.00 (0.00 pct)  6.00 (40.00 pct)"), "{t}");
        let md = rep.tables(true, false);
        assert!(
            md.contains("| 2      | 10.00 (0.00 pct) | 6.00 (40.00 pct) |")
                && md.contains("\n**hackbench (Measure: time, s; lower is better; pct vs eevdf, positive = better)**\n\n|"),
            "{md}"
        );
        let j: serde_json::Value = serde_json::to_value(&rep).unwrap();
        let cell = &j["experiments"][0]["results"][3];
        assert_eq!(cell["variant"], "tip");
        assert_eq!(cell["median"], 6.0);
        assert_eq!(cell["samples"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn missing_cells_and_errors() {
        let mut ev = fake_events();
        ev.retain(|e| !matches!(e, Event::Sample(s) if s.variant == "tip" && s.point == 1));
        ev.push(Event::Error {
            message: "tip: not attached".into(),
        });
        // tip fell off in round 1 at 2 groups: two samples left there.
        ev.retain(|e| !matches!(e, Event::Sample(s) if s.variant == "tip" && s.point == 2 && s.round == 1));
        ev.push(Event::Detached {
            round: 1,
            variant: "tip".into(),
            message: "runnable task stall".into(),
        });
        let rep = Report::build(&fake_plan(), "native", Stat::Mean, &ev);
        assert_eq!(rep.error.as_deref(), Some("tip: not attached"));
        let c = &rep.experiments[0].results[1];
        assert!(c.summary.is_none() && c.pct_vs_baseline.is_none());
        let t = rep.tables(false, false);
        assert!(t.contains("[n=2]"), "{t}");
        assert!(
            t.contains("tip detached in round 2: runnable task stall"),
            "{t}"
        );
        assert_eq!(rep.detached.len(), 1);
    }
}
