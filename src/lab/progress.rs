//! Progress of a run, from its events: on a terminal a bar (samples done
//! of the plan's, the round, variant, workload and point, ETA); otherwise
//! one plain line per event, so logs of long runs (seed002: 30 minutes)
//! show where they are.

use crate::plan::Plan;
use crate::runner::Event;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

pub struct Progress {
    total: u64,
    done: u64,
    runs: u32,
    /// Samples per variant and round, and those done in the current one
    /// (a detach skips the rest of that variant's round).
    per_round: u64,
    in_round: u64,
    t0: Instant,
    bar: Option<ProgressBar>,
}

/// "1h02m", "4m10s", "12s".
pub fn hms(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

impl Progress {
    /// A bar when stderr is a terminal, plain lines otherwise.
    pub fn new(plan: &Plan) -> Progress {
        Progress::with_terminal(plan, std::io::stderr().is_terminal())
    }

    pub fn with_terminal(plan: &Plan, terminal: bool) -> Progress {
        let points: u64 = plan.experiments.iter().map(|e| e.points.len() as u64).sum();
        let total = points * plan.variants.len() as u64 * plan.runs as u64;
        let bar = terminal.then(|| {
            let b = ProgressBar::new(total);
            b.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {pos}/{len} samples, ETA {eta}  {msg}",
                )
                .unwrap()
                .progress_chars("=> "),
            );
            b.enable_steady_tick(Duration::from_secs(1));
            b
        });
        Progress {
            total,
            done: 0,
            runs: plan.runs,
            per_round: points,
            in_round: 0,
            t0: Instant::now(),
            bar,
        }
    }

    /// The estimated time left, from the mean time per sample so far.
    pub fn eta(&self) -> Option<Duration> {
        (self.done > 0).then(|| {
            let per = self.t0.elapsed().as_secs_f64() / self.done as f64;
            Duration::from_secs_f64(per * (self.total - self.done.min(self.total)) as f64)
        })
    }

    /// The line for an event (None: nothing to say), after counting it.
    pub fn line(&mut self, e: &Event) -> Option<String> {
        let round = |r: u32| format!("round {}/{}", r + 1, self.runs);
        match e {
            Event::Env(env) => Some(format!(
                "running {} samples on {} ({} CPUs)",
                self.total, env.kernel, env.cpus
            )),
            Event::Attach {
                round: r,
                variant,
                attach_s,
                ..
            } => {
                self.in_round = 0;
                Some(format!(
                    "{}: {variant} attached in {attach_s:.1} s",
                    round(*r)
                ))
            }
            Event::Sample(s) => {
                self.done += 1;
                self.in_round += 1;
                let value = s
                    .metrics
                    .first()
                    .map_or(String::new(), |(k, v)| format!(": {k} {v:.4}"));
                Some(format!(
                    "[{}/{}] {}: {} {} {}{value} (elapsed {}, ETA {})",
                    self.done,
                    self.total,
                    round(s.round),
                    s.variant,
                    s.workload,
                    s.point,
                    hms(self.t0.elapsed()),
                    self.eta().map_or("-".into(), hms)
                ))
            }
            Event::Detached {
                round: r,
                variant,
                message,
            } => {
                // The round's other samples of this variant will not come.
                let skipped = self.per_round.saturating_sub(self.in_round);
                self.done += skipped;
                self.in_round = self.per_round;
                Some(format!(
                    "{}: {variant} DETACHED, {skipped} samples skipped: {message}",
                    round(*r)
                ))
            }
            Event::Error { message } => Some(format!("error: {message}")),
        }
    }

    pub fn event(&mut self, e: &Event) {
        let Some(line) = self.line(e) else { return };
        match &self.bar {
            Some(b) => {
                b.set_position(self.done);
                match e {
                    Event::Sample(s) => b.set_message(format!(
                        "round {}/{} {} {} {}",
                        s.round + 1,
                        self.runs,
                        s.variant,
                        s.workload,
                        s.point
                    )),
                    _ => b.println(format!("nimble-lab: {line}")),
                }
            }
            None => eprintln!("nimble-lab: {line}"),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        eprintln!(
            "nimble-lab: {} of {} samples done or skipped in {}",
            self.done.min(self.total),
            self.total,
            hms(self.t0.elapsed())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{fake_events, fake_plan};

    #[test]
    fn counts_samples_and_says_where_it_is() {
        let plan = fake_plan();
        let mut p = Progress::with_terminal(&plan, false);
        // 2 variants x 2 points x runs.
        assert_eq!(p.total, 4 * plan.runs as u64);
        let ev = fake_events();
        let first = p.line(&ev[0]).unwrap();
        assert!(
            first.starts_with(&format!(
                "[1/{}] round 1/{}: eevdf hackbench 1: time 4.0000",
                p.total, plan.runs
            )),
            "{first}"
        );
        assert!(first.contains("ETA "), "{first}");
        for e in &ev[1..] {
            p.line(e);
        }
        assert_eq!(p.done, ev.len() as u64);
        // A detach right after an attach skips that variant's 2 points.
        p.line(&Event::Attach {
            round: 1,
            variant: "tip".into(),
            ops: String::new(),
            attach_s: 1.0,
        });
        let d = p.line(&Event::Detached {
            round: 1,
            variant: "tip".into(),
            message: "stall".into(),
        });
        assert_eq!(
            d.unwrap(),
            format!(
                "round 2/{}: tip DETACHED, 2 samples skipped: stall",
                plan.runs
            )
        );
        assert_eq!(p.done, ev.len() as u64 + 2);
    }

    #[test]
    fn durations() {
        assert_eq!(hms(Duration::from_secs(12)), "12s");
        assert_eq!(hms(Duration::from_secs(250)), "4m10s");
        assert_eq!(hms(Duration::from_secs(3720)), "1h02m");
    }
}
