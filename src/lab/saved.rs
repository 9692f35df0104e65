//! `nimble-lab report FILE.json`: a saved run back into the plan and the
//! events it came from, so the tables and plots are redrawn by the same
//! code (Report::build) that drew them the first time, with another
//! statistic if asked.

use crate::plan::{Experiment, Plan, Variant};
use crate::runner::{Env, Event, Sample};
use crate::stats::Stat;
use anyhow::{Context, Result};
use serde::Deserialize;

/// The parts of the saved JSON (report.rs's Report) that carry the run.
#[derive(Deserialize)]
struct Saved {
    machine: String,
    env: Option<Env>,
    runs: u32,
    baseline: String,
    stat: Stat,
    variants: Vec<SavedVariant>,
    experiments: Vec<SavedExp>,
    #[serde(default)]
    detached: Vec<SavedDetach>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct SavedVariant {
    label: String,
    spec: String,
    ops: Vec<String>,
    attach_s: Vec<f64>,
}

#[derive(Deserialize)]
struct SavedExp {
    workload: String,
    metric: String,
    points: Vec<u32>,
    results: Vec<SavedCell>,
}

#[derive(Deserialize)]
struct SavedCell {
    variant: String,
    point: u32,
    samples: Vec<f64>,
    rounds: Vec<u32>,
}

#[derive(Deserialize)]
struct SavedDetach {
    round: u32,
    variant: String,
    message: String,
}

/// A saved run: (plan, machine, the statistic it was tabulated with, events).
pub fn load(json: &str) -> Result<(Plan, String, Stat, Vec<Event>)> {
    let s: Saved = serde_json::from_str(json).context("not a nimble-lab JSON report")?;
    let variants = s
        .variants
        .iter()
        .map(|v| match v.label == v.spec {
            true => Variant::parse(&v.spec),
            false => Variant::parse(&format!("{}={}", v.label, v.spec)),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut experiments: Vec<Experiment> = vec![];
    for e in &s.experiments {
        if !experiments.iter().any(|x| x.workload == e.workload) {
            experiments.push(Experiment {
                workload: e.workload.clone(),
                points: e.points.clone(),
            });
        }
    }
    let mut events = vec![];
    events.extend(s.env.map(Event::Env));
    for v in &s.variants {
        for (round, (ops, attach_s)) in v.ops.iter().zip(&v.attach_s).enumerate() {
            events.push(Event::Attach {
                round: round as u32,
                variant: v.label.clone(),
                ops: ops.clone(),
                attach_s: *attach_s,
            });
        }
    }
    // One Sample per (round, variant, workload, point), its metrics in the
    // saved order (the workload's, primary first).
    let mut samples: Vec<Sample> = vec![];
    for e in &s.experiments {
        for c in &e.results {
            for (&value, &round) in c.samples.iter().zip(&c.rounds) {
                let at = samples.iter().position(|x| {
                    (x.round, x.point) == (round, c.point)
                        && x.variant == c.variant
                        && x.workload == e.workload
                });
                let i = at.unwrap_or_else(|| {
                    samples.push(Sample {
                        round,
                        variant: c.variant.clone(),
                        workload: e.workload.clone(),
                        point: c.point,
                        metrics: vec![],
                        wall_s: 0.0,
                    });
                    samples.len() - 1
                });
                samples[i].metrics.push((e.metric.clone(), value));
            }
        }
    }
    events.extend(samples.into_iter().map(Event::Sample));
    events.extend(s.detached.into_iter().map(|d| Event::Detached {
        round: d.round,
        variant: d.variant,
        message: d.message,
    }));
    events.extend(s.error.map(|message| Event::Error { message }));
    let plan = Plan {
        experiments,
        variants,
        baseline: s.baseline,
        runs: s.runs,
        secs: 0.0,
        loops: None,
        mem_mb: 0,
        attach_timeout_s: 0,
        sample_timeout_s: 0,
    };
    Ok((plan, s.machine, s.stat, events))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{fake_events, fake_plan};
    use crate::report::Report;

    /// Saved and loaded, a run gives the same JSON and tables again.
    #[test]
    fn round_trip() {
        let mut ev = fake_events();
        ev.push(Event::Attach {
            round: 0,
            variant: "tip".into(),
            ops: "nimble_1.0".into(),
            attach_s: 2.5,
        });
        ev.push(Event::Detached {
            round: 2,
            variant: "tip".into(),
            message: "stall".into(),
        });
        let rep = Report::build(&fake_plan(), "vm:n2l4", Stat::Median, &ev);
        let json = serde_json::to_string_pretty(&rep).unwrap();
        let (plan, machine, stat, events) = load(&json).unwrap();
        let again = Report::build(&plan, &machine, stat, &events);
        assert_eq!(serde_json::to_string_pretty(&again).unwrap(), json);
        assert_eq!(again.tables(true, true), rep.tables(true, true));
        // Another statistic redraws the percentages from the same samples.
        let mean = Report::build(&plan, &machine, Stat::Mean, &events);
        assert_eq!(mean.experiments[0].results[3].samples, [6.0, 6.0, 8.0]);
        assert!(load("{\"tool\": 1}").is_err());
    }
}
