//! nimble-lab: A/B experiments of schedulers, the way the seeds measured them.
//!
//! Lifecycle: parse → build and check the plan → run it (natively, or in the
//! VM where the guest runs the same plan) → tables, JSON, plots. Workloads run
//! one sample each in a child process (`__workload`); `__guest` is the VM side.

mod child;
mod plan;
mod plot;
mod progress;
mod report;
mod runner;
mod saved;
mod stats;
mod variant;
mod vm;
mod workloads;

use anyhow::{bail, Context, Result};
use clap::Parser;
use plan::{Experiment, Plan, Sched, Variant};
use scx_nimble::cli_line;
use std::path::{Path, PathBuf};

const AFTER_HELP: &str = "\
EXPERIMENTS (workloads, and presets that expand to workloads and variants):
  hackbench       groups of senders/receivers (Debian's hackbench, rt-tests): time, s
  schbench        the lab's own futex wakeup test, not Chris Mason's schbench: message
                  threads waking workers: wakeup latency p99 (and p50, p99.9), us
  tbench          the lab's own TCP ping-pong, not dbench's tbench (see dbench-tbench):
                  loopback request/response per client count: records/s
  stream          STREAM copy/scale/add/triad per thread count: MB/s
  shell8          fork+exec from N shells at once: execs/s, child on the parent's node/LLC %
  numa01          2 processes, threads sharing each one's buffer: time, s; local %
  numa02          threads with private buffers: time, s; local %
  dbench-tbench   the real tbench and tbench_srv (Debian's dbench) on loopback for --secs,
                  per client count: throughput, MB/sec (and max latency, ms)
  perf-messaging  the real perf bench sched messaging (linux-perf) -g GROUPS: time, s
  perf-pipe       the real perf bench sched pipe, PAIRS at once: usecs/op (and ops/s)
  mason-schbench  Chris Mason's schbench (third_party/schbench, built with the lab): 2 message
                  threads wake WORKERS: wakeup latency p99 (and p50, p99.9, request p99), us
  seed000         stream + dbench-tbench; eevdf, tip, v3, v4, v4.1, v4.2 (scx_nimble --numa-rule,
                  --imb-formula)
  seed002         hackbench + mason-schbench + dbench-tbench; eevdf, tip, david, ego-1, ego-2 (scx_nimble
                  --swq modes)
  Presets also add every peer found on PATH (scx_bpfland, scx_p2dq, scx_rusty, scx_cosmos,
  scx_lavd) unless --no-peers; --variants replaces a preset's variants.

VARIANTS (--variants, comma-separated, repeatable; LABEL=SPEC names one):
  eevdf                   no sched_ext scheduler: the kernel's own
  nimble[:FLAGS]          scx_nimble with FLAGS, e.g. 'david=nimble:--swq wakeups'
  scx_NAME[:FLAGS]        another sched_ext scheduler on PATH, e.g. scx_bpfland
  SCHED@CGROUP[:FLAGS]    any of those, the workloads run in /sys/fs/cgroup/CGROUP (made,
                          cpu controller on), e.g. 'd3=nimble@lab.slice/b.service/w'
  SCHED{SYSCTL=V,...}     any of those with sysctls set while it runs (the others run with
                          the values found at the start, restored after), e.g.
                          'eevdf-nb0=eevdf{kernel.numa_balancing=0}'

METHOD: --runs rounds; in each, every variant (order rotated each round, reversed in odd
rounds) attaches once and runs every workload at every point, then detaches; a sample
counts only if the scheduler stayed attached. Every sample is kept. Tables print
`value (pct vs baseline)`, positive = better, value = median (or --stat mean); the JSON
has mean, stddev, median, min, max and all samples.

REPORT: nimble-lab report FILE.json [--markdown] [--stat mean] [--plot-dir DIR] [--no-plots]
redraws a saved run's tables and plots. Progress: a bar on a terminal (samples done, round,
variant, workload, ETA), else a line per attach and sample.

EXAMPLES:
  nimble-lab hackbench --variants eevdf,nimble --runs 3 --vm n2l4 --json out.json
  nimble-lab dbench-tbench perf-messaging perf-pipe --variants eevdf --runs 2 --points 1,2
  sudo nimble-lab seed002 --runs 5 --json seed002.json
  nimble-lab tbench --points 1,4,8 --variants eevdf,tip=nimble,scx_bpfland --vm l2";

/// Scheduler A/B experiments: hackbench, schbench, tbench, STREAM, shell8,
/// numa01/02 and the real dbench tbench and perf bench sched under EEVDF,
/// scx_nimble's modes and other sched_ext schedulers, natively (root,
/// sched_ext kernel) or in the project's VM (--vm).
#[derive(Debug, Parser)]
#[command(name = "nimble-lab", version, after_help = AFTER_HELP)]
struct Cli {
    /// Workloads and presets to run (see EXPERIMENTS below).
    #[arg(required_unless_present = "list")]
    experiments: Vec<String>,
    /// Variants to compare, comma-separated (see VARIANTS below). Default:
    /// the preset's, else `eevdf,nimble`.
    #[arg(long, value_delimiter = ',')]
    variants: Vec<String>,
    /// The variant the pct columns compare with (default: the first).
    #[arg(long)]
    baseline: Option<String>,
    /// Rounds: samples per variant and point.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Points for every workload given (groups, workers, clients, threads…),
    /// comma-separated. Default: each workload's, scaled to the CPUs.
    #[arg(long, value_delimiter = ',')]
    points: Vec<u32>,
    /// Seconds per sample of the time-based workloads (schbench, tbench, shell8;
    /// dbench-tbench rounds up to whole seconds, at least 2).
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// hackbench -l, perf-messaging -l, perf-pipe -l, STREAM repetitions,
    /// numa01/02 passes (default: 100, 100, 20000, 10, 20).
    #[arg(long)]
    loops: Option<u32>,
    /// MiB in all for STREAM's arrays and numa01/02's buffers.
    #[arg(long, default_value_t = 128)]
    mem_mb: u32,
    /// Run in the VM with this topology (vm/nimble-vm topos), not natively.
    #[arg(long, value_name = "TOPOLOGY")]
    vm: Option<String>,
    /// With --vm: the kernel suite (trixie-backports or sid).
    #[arg(long, requires = "vm")]
    kernel: Option<String>,
    /// With --vm: limit for the whole VM run, s (default: from the plan).
    #[arg(long, requires = "vm")]
    vm_timeout: Option<u64>,
    /// Write the results (every sample and its statistics) as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Where the plots go (default: the JSON's directory, else .).
    #[arg(long, value_name = "DIR")]
    plot_dir: Option<PathBuf>,
    /// Draw no plots.
    #[arg(long)]
    no_plots: bool,
    /// Print the tables as Markdown.
    #[arg(long)]
    markdown: bool,
    /// Also tabulate the secondary metrics (p50, p99.9, locality…).
    #[arg(long)]
    all_metrics: bool,
    /// The statistic the tables show.
    #[arg(long, value_enum, default_value_t = stats::Stat::Median)]
    stat: stats::Stat,
    /// Presets do not add the peers found on PATH.
    #[arg(long)]
    no_peers: bool,
    /// Seconds a scheduler may take to attach.
    #[arg(long, default_value_t = 300)]
    attach_timeout: u64,
    /// Seconds one sample may take.
    #[arg(long, default_value_t = 600)]
    sample_timeout: u64,
    /// List workloads, presets and the peers on PATH, and exit.
    #[arg(long)]
    list: bool,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let r = match args.get(1).map(String::as_str) {
        Some("__workload") => workload_main(&args[2..]),
        Some("__guest") => guest_main(&args[2..]),
        Some("report") => report_main(),
        _ => lab_main(),
    };
    if let Err(e) = r {
        eprintln!("nimble-lab: {e:#}");
        std::process::exit(1);
    }
}

fn parse_cli() -> Cli {
    match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let line = cli_line::clap_error_line(&e);
            eprintln!(
                "nimble-lab: {} (see --help)",
                line.trim_start_matches("error: ")
            );
            std::process::exit(2);
        }
    }
}

fn lab_main() -> Result<()> {
    let cli = parse_cli();
    if cli.list {
        return list();
    }
    let plan = build_plan(&cli)?;
    preflight(&plan, cli.vm.is_some())?;
    let machine = cli
        .vm
        .as_ref()
        .map_or("native".to_string(), |t| format!("vm:{t}"));
    let mut events = vec![];
    let mut progress = progress::Progress::new(&plan);
    let mut sink = |e: runner::Event| {
        progress.event(&e);
        events.push(e);
    };
    let ran = match &cli.vm {
        Some(topo) => {
            let t = cli.vm_timeout.unwrap_or_else(|| vm_timeout(&plan));
            vm::run(&plan, topo, cli.kernel.as_deref(), t, &mut sink)
        }
        None => runner::run(&plan, &mut sink),
    };
    progress.finish();
    let mut rep = report::Report::build(&plan, &machine, cli.stat, &events);
    if let (Err(e), None) = (&ran, &rep.error) {
        rep.error = Some(format!("{e:#}"));
    }
    if let Some(path) = &cli.json {
        std::fs::write(path, serde_json::to_string_pretty(&rep)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("nimble-lab: wrote {}", path.display());
    }
    let plots = !cli.no_plots && events.iter().any(|e| matches!(e, runner::Event::Sample(_)));
    let out = Output {
        markdown: cli.markdown,
        all_metrics: cli.all_metrics,
        plots: plots.then(|| plot_place(cli.plot_dir.as_deref(), cli.json.as_deref())),
    };
    show(&rep, &out);
    match (ran, rep.error) {
        (Ok(()), None) => Ok(()),
        (Err(e), _) => Err(e),
        (Ok(()), Some(e)) => bail!("{e}"),
    }
}

/// How a report is shown: tables (Markdown or text) and plots (dir, stem).
struct Output {
    markdown: bool,
    all_metrics: bool,
    plots: Option<(PathBuf, String)>,
}

/// Plots go to --plot-dir, else the JSON's directory (else .), named
/// after the JSON's stem (else nimble-lab).
fn plot_place(plot_dir: Option<&Path>, json: Option<&Path>) -> (PathBuf, String) {
    let dir = plot_dir.map(Path::to_path_buf).unwrap_or_else(|| {
        json.and_then(|p| p.parent())
            .filter(|d| !d.as_os_str().is_empty())
            .map_or(PathBuf::from("."), Path::to_path_buf)
    });
    let stem = json
        .and_then(|p| p.file_stem())
        .map_or("nimble-lab".into(), |s| s.to_string_lossy().into_owned());
    (dir, stem)
}

fn show(rep: &report::Report, out: &Output) {
    println!("{}", rep.header());
    print!("{}", rep.tables(out.markdown, out.all_metrics));
    if !out.markdown {
        print!("{}", rep.details());
    }
    if let Some((dir, stem)) = &out.plots {
        match plot::write_all(rep, dir, stem) {
            Ok(files) => {
                for f in files {
                    eprintln!("nimble-lab: wrote {}", f.display());
                }
            }
            Err(e) => eprintln!("nimble-lab: no plots: {e:#}"),
        }
    }
}

/// `nimble-lab report FILE.json`: redraw a saved run's tables and plots.
#[derive(Debug, Parser)]
#[command(name = "nimble-lab report")]
struct ReportCli {
    /// A JSON file written by --json.
    file: PathBuf,
    /// Print the tables as Markdown.
    #[arg(long)]
    markdown: bool,
    /// Also tabulate the secondary metrics.
    #[arg(long)]
    all_metrics: bool,
    /// The statistic the tables show (default: the saved run's).
    #[arg(long, value_enum)]
    stat: Option<stats::Stat>,
    /// Where the plots go (default: the JSON's directory).
    #[arg(long, value_name = "DIR")]
    plot_dir: Option<PathBuf>,
    /// Draw no plots.
    #[arg(long)]
    no_plots: bool,
}

fn report_main() -> Result<()> {
    let cli = match ReportCli::try_parse_from(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let line = cli_line::clap_error_line(&e);
            eprintln!(
                "nimble-lab: {} (see report --help)",
                line.trim_start_matches("error: ")
            );
            std::process::exit(2);
        }
    };
    let json = std::fs::read_to_string(&cli.file)
        .with_context(|| format!("reading {}", cli.file.display()))?;
    let (plan, machine, stat, events) =
        saved::load(&json).with_context(|| format!("{}", cli.file.display()))?;
    let rep = report::Report::build(&plan, &machine, cli.stat.unwrap_or(stat), &events);
    let out = Output {
        markdown: cli.markdown,
        all_metrics: cli.all_metrics,
        plots: (!cli.no_plots).then(|| plot_place(cli.plot_dir.as_deref(), Some(&cli.file))),
    };
    show(&rep, &out);
    Ok(())
}

fn build_plan(cli: &Cli) -> Result<Plan> {
    let mut workloads: Vec<String> = vec![];
    let mut variants: Vec<String> = vec![];
    let mut preset_used = false;
    for x in &cli.experiments {
        if let Some(p) = plan::preset(x) {
            preset_used = true;
            workloads.extend(p.workloads.iter().map(|s| s.to_string()));
            variants.extend(p.variants.iter().map(|s| s.to_string()));
        } else if workloads::spec(x).is_some() {
            workloads.push(x.clone());
        } else {
            bail!("unknown experiment '{x}' (see --list)");
        }
    }
    workloads.dedup();
    if !cli.variants.is_empty() {
        variants = cli.variants.clone();
    } else if preset_used {
        if !cli.no_peers {
            variants.extend(
                plan::PEERS
                    .iter()
                    .filter(|p| variant::which(p).is_some())
                    .map(|p| p.to_string()),
            );
        }
    } else {
        variants = vec!["eevdf".into(), "nimble".into()];
    }
    let mut seen = vec![];
    variants.retain(|v| {
        let keep = !seen.contains(v);
        seen.push(v.clone());
        keep
    });
    let variants = variants
        .iter()
        .map(|v| Variant::parse(v))
        .collect::<Result<Vec<_>>>()?;
    let nr_cpus = if let Some(t) = &cli.vm {
        vm_cpus(t)?
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
    };
    let experiments = workloads
        .iter()
        .map(|w| Experiment {
            workload: w.clone(),
            points: if cli.points.is_empty() {
                (workloads::spec(w).unwrap().default_points)(nr_cpus)
            } else {
                cli.points.clone()
            },
        })
        .collect();
    if !(cli.secs > 0.0 && cli.secs <= 3600.0) {
        bail!("--secs must be in (0, 3600]");
    }
    if cli.mem_mb == 0 || cli.loops == Some(0) {
        bail!("--mem-mb and --loops must be positive");
    }
    let plan = Plan {
        baseline: cli.baseline.clone().unwrap_or_else(|| {
            variants
                .first()
                .map(|v| v.label.clone())
                .unwrap_or_default()
        }),
        experiments,
        variants,
        runs: cli.runs,
        secs: cli.secs,
        loops: cli.loops,
        mem_mb: cli.mem_mb,
        attach_timeout_s: cli.attach_timeout,
        sample_timeout_s: cli.sample_timeout,
    };
    plan.check()?;
    Ok(plan)
}

/// CPUs of a VM topology, for the default points (from `nimble-vm topos`'s table).
fn vm_cpus(topo: &str) -> Result<u32> {
    match topo {
        "flat" => Ok(4),
        "n2l4" | "n4" | "smt" | "l2" => Ok(8),
        _ => bail!("unknown --vm topology '{topo}' (flat, n2l4, n4, smt, l2)"),
    }
}

/// Everything a run needs, checked before anything loads.
fn preflight(plan: &Plan, in_vm: bool) -> Result<()> {
    for v in &plan.variants {
        if in_vm {
            if let Sched::Peer { bin, .. } = &v.sched {
                variant::which(bin)
                    .with_context(|| format!("variant {}: {bin} not found on PATH", v.label))?;
            }
        } else {
            variant::binary(&v.sched).with_context(|| format!("variant {}", v.label))?;
        }
    }
    if !in_vm && plan.variants.iter().any(|v| v.sched != Sched::Eevdf) {
        if !Path::new("/sys/kernel/sched_ext").exists() {
            bail!("this kernel has no sched_ext: use --vm TOPOLOGY");
        }
        if unsafe { libc::geteuid() } != 0 {
            bail!("loading a scheduler needs root");
        }
    }
    Ok(())
}

/// A generous bound on a VM run: boot, attaches under load, TCG-slow samples.
fn vm_timeout(plan: &Plan) -> u64 {
    let points: u64 = plan.experiments.iter().map(|e| e.points.len() as u64).sum();
    let per_sample = 60 + (plan.secs as u64) * 4;
    120 + plan.runs as u64
        * plan.variants.len() as u64
        * (plan.attach_timeout_s.min(180) + points * per_sample)
}

fn list() -> Result<()> {
    println!("workloads:");
    for s in workloads::ALL {
        let pts = (s.default_points)(8);
        println!(
            "  {:<14} {} (point: {}; default on 8 CPUs: {pts:?})",
            s.name, s.about, s.param
        );
    }
    println!("presets:");
    for p in plan::PRESETS {
        println!("  {:<14} {}", p.name, p.about);
        println!("  {:<14} variants: {}", "", p.variants.join(", "));
    }
    println!("peers on PATH:");
    for p in plan::PEERS {
        match variant::which(p) {
            Some(path) => println!("  {p:<12} {}", path.display()),
            None => println!("  {p:<12} (not found)"),
        }
    }
    Ok(())
}

/// `__workload NAME POINT [--secs S] [--loops N] [--mem-mb M]`: one sample,
/// printed as JSON `[[metric, value], …]`.
fn workload_main(args: &[String]) -> Result<()> {
    let (name, point) = match args {
        [n, p, ..] => (
            n.as_str(),
            p.parse::<u32>().context("POINT must be a number")?,
        ),
        _ => bail!("usage: nimble-lab __workload NAME POINT [--secs S] [--loops N] [--mem-mb M]"),
    };
    let spec = workloads::spec(name).with_context(|| format!("unknown workload '{name}'"))?;
    let mut o = plan::opts_for(spec.name, 3.0, None, 128);
    let mut it = args[2..].iter();
    while let Some(k) = it.next() {
        let v = it.next().with_context(|| format!("{k} needs a value"))?;
        match k.as_str() {
            "--secs" => o.secs = v.parse()?,
            "--loops" => o.loops = v.parse()?,
            "--mem-mb" => o.mem_mb = v.parse()?,
            _ => bail!("unknown option {k}"),
        }
    }
    let m = workloads::run(name, point, &o)?;
    println!("{}", serde_json::to_string(&m)?);
    Ok(())
}

/// `__guest PLAN.json`: the VM side of --vm; events go to stdout after the marker.
fn guest_main(args: &[String]) -> Result<()> {
    let path = args
        .first()
        .context("usage: nimble-lab __guest PLAN.json")?;
    let plan: Plan = serde_json::from_slice(&std::fs::read(path)?).context("reading the plan")?;
    let mut sink = |e: runner::Event| {
        if let Ok(s) = serde_json::to_string(&e) {
            println!("{}{s}", runner::MARK);
        }
    };
    runner::run(&plan, &mut sink)
}
