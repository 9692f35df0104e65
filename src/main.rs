//! scx_nimble: a sched_ext scheduler with per-LLC dispatch queues, local-first
//! dispatch and topology-ordered stealing.
//!
//! Lifecycle, top to bottom: parse flags → preflight checks → load and attach
//! (scheduler.rs) → serve metrics (stats.rs) and run until Ctrl-C/SIGTERM or
//! the kernel unloads us → report → reload when the kernel asks (CPU
//! hotplug). `--monitor` and `tui` only read a running scheduler's metrics.

mod bpf_skel;
mod counters;
mod ctl;
mod preflight;
mod scheduler;
mod stats;
mod tui;

// The machine model, the thresholds and the shared helpers (src/lib.rs).
use scx_nimble::{bpf_intf, cli_line, hist, topology};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use ctl::{OnOff, SwqMode};
use log::info;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use topology::rules::NumaRule;

/// scx_nimble: per-LLC dispatch queues with local-first dispatch and
/// topology-ordered stealing, for sched_ext kernels.
#[derive(Debug, Parser)]
#[command(
    name = "scx_nimble",
    disable_version_flag = true,
    args_conflicts_with_subcommands = true,
    // `--slice-us -5` must name --slice-us, not call -5 an unknown flag.
    allow_negative_numbers = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    opts: Opts,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Show the scheduling domains the kernel builds for a CPU, with the
    /// imb_numa_nr of each level; reads the live /sys or a snapshot of it.
    Topology(TopologyArgs),
    /// Change the policy of the running scx_nimble without reloading it
    /// (prints the controls; with no flag, only prints them).
    Tune(TuneArgs),
    /// Terminal UI over the running scheduler's metrics: topology with load
    /// and queues, steal/migration/swq sparklines, NUMA thresholds (q quits).
    Tui(TuiCmd),
}

#[derive(Debug, clap::Args)]
struct TuiCmd {
    /// Seconds between samples (a sample costs the scheduler one counter read).
    #[arg(long, value_name = "SECS", default_value_t = 1.0, value_parser = parse_interval)]
    interval: f64,
}

#[derive(Debug, clap::Args)]
struct TuneArgs {
    /// Switch the NUMA imbalance rule.
    #[arg(long, value_enum)]
    numa_rule: Option<NumaRule>,
    /// Switch the shared wakequeue mode (tasks already queued still run).
    #[arg(long, value_enum)]
    swq: Option<SwqMode>,
    /// Turn the affinity-aware swq pull on or off.
    #[arg(long, value_enum)]
    swq_affinity: Option<OnOff>,
}

#[derive(Debug, clap::Args)]
struct TopologyArgs {
    /// Root of the sysfs tree to read (a snapshot laid out like /sys works).
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    sysfs_root: std::path::PathBuf,
    /// Formula for imb_numa_nr.
    #[arg(long, value_enum, default_value_t = Formula::Mainline)]
    imb_formula: Formula,
    /// The CPU whose domains to show.
    #[arg(long, default_value_t = 0)]
    cpu: usize,
    /// Print one JSON object instead of the tree.
    #[arg(long)]
    json: bool,
}

/// The imb_numa_nr formulas (see src/topology/imb.rs).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Formula {
    Mainline,
    #[value(name = "v5.18")]
    V5_18,
    V4,
}

impl From<Formula> for topology::imb::ImbFormula {
    fn from(f: Formula) -> Self {
        match f {
            Formula::Mainline => Self::Mainline,
            Formula::V5_18 => Self::V5_18,
            Formula::V4 => Self::V4,
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("interval").args(["stats", "monitor"])))]
pub struct Opts {
    /// Time slice in microseconds. Longer slices mean fewer context switches;
    /// shorter ones lower latency under contention.
    #[arg(short = 's', long, default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(100..=100_000))]
    pub slice_us: u64,

    /// Shortest slice in microseconds: a task's slice shrinks as its LLC's
    /// queue grows (slice * CPUs / (CPUs + queued)), but not below this.
    /// Smaller turns a long queue over faster; larger switches less. The
    /// default (the slice) keeps slices whole: shrinking them cost hackbench
    /// in the VM.
    #[arg(long, default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(50..=100_000))]
    pub slice_min_us: u64,

    /// When a synchronous wakeup (pipes, sockets) finds no idle CPU, run the
    /// wakee next on the waker's CPU if it would head its LLC queue anyway.
    /// In the VM: perf messaging 30-44 % faster, hackbench faster at 1 and
    /// 16 groups but slower at 4, tbench level (README), so off by default.
    #[arg(long)]
    pub wake_sync: bool,

    /// Queue a wakeup that finds no idle CPU on the LLC's shared queue (the
    /// first CPU to free up takes it) instead of on one CPU's own queue (the
    /// sync waker's if its queue is no longer, else the task's previous CPU). Own
    /// queues save a migration and the shared queue's lock per wakeup under
    /// overload; the shared queue can start a wakee sooner behind a CPU that
    /// holds a long slice.
    #[arg(long)]
    pub no_cpu_queues: bool,

    /// Wakeup preemption: a woken task preempts the one running on its CPU
    /// when its deadline is earlier by more than US microseconds. Off by
    /// default: in the VM it cost hackbench more than it gained tbench.
    #[arg(long, value_name = "US",
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub preempt_gap_us: Option<u64>,

    /// Formula for the NUMA imbalance thresholds (imb_numa_nr): the kernel's
    /// since v6.0, its first merged version, or the LKML v4 patch's.
    #[arg(long, value_enum, default_value_t = Formula::Mainline)]
    pub imb_formula: Formula,

    /// Override the threshold of NUMA level LEVEL (1 = nearest remote tier)
    /// on every node, e.g. `--imb-numa-nr 1=4`. Repeatable.
    #[arg(long, value_name = "LEVEL=VALUE", value_parser = topology::thresholds::parse_override)]
    pub imb_numa_nr: Vec<topology::thresholds::Override>,

    /// NUMA imbalance rule at fork and for every node crossing: the kernel's
    /// (mainline), seed 000's v3, v4 or tip (v5.16) variants, or off
    /// (spread greedily).
    /// `scx_nimble tune --numa-rule` switches it while running.
    #[arg(long, value_enum, default_value_t = NumaRule::Mainline)]
    pub numa_rule: NumaRule,

    /// How long (µs) a queued task waits, or a node stays overloaded, before
    /// another node may take its tasks. Larger keeps locality through longer
    /// load spikes; smaller spreads sustained overload sooner.
    #[arg(long, default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub numa_patience_us: u64,

    /// Per-LLC shared wakequeue: which tasks go through it (a FIFO any CPU
    /// of the LLC takes from before stealing from other LLCs). `wakeups`
    /// spreads wakeups to the first free CPU at the cost of some locality;
    /// `sis-fail` only when no idle CPU was found; `all` queues everything.
    /// `scx_nimble tune --swq` switches it while running.
    #[arg(long, value_enum, default_value_t = SwqMode::Off)]
    pub swq: SwqMode,

    /// swq pullers scan up to 8 queued tasks for one they may run, instead
    /// of looking at the head only: more work found for CPUs behind
    /// restricted tasks, at a longer time holding the queue.
    #[arg(long)]
    pub swq_affinity: bool,

    /// Shards per LLC shared wakequeue (default: one per 6 CPUs). More
    /// shards contend less on large LLCs; fewer keep the order FIFO.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=topology::swq::MAX_SHARDS as u64))]
    pub swq_shards: Option<u64>,

    /// Print the metrics every SECS seconds while scheduling: one `stats:`
    /// line of counters (cumulative since attach), or JSON with --json.
    #[arg(long, value_name = "SECS", value_parser = parse_interval)]
    pub stats: Option<f64>,

    /// Do not schedule: print the running scx_nimble's metrics every SECS
    /// seconds, read from its stats socket (root only), until Ctrl-C.
    #[arg(long, value_name = "SECS", value_parser = parse_interval,
          conflicts_with = "stats")]
    pub monitor: Option<f64>,

    /// With --stats or --monitor: one JSON object per interval (the
    /// metrics `--help-stats` describes) instead of the `stats:` line.
    #[arg(long, requires = "interval")]
    pub json: bool,

    /// List every metric with its description and exit.
    #[arg(long)]
    pub help_stats: bool,

    /// Exit debug dump buffer length (0: kernel default).
    #[arg(long, default_value_t = 0)]
    pub exit_dump_len: u32,

    /// Verbose output, including libbpf's and the steal order of every LLC.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Print the version and exit.
    #[arg(short = 'V', long)]
    pub version: bool,
}

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.1..=3600.0).contains(&v) => Ok(v),
        Ok(_) => Err("must be between 0.1 and 3600 seconds".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => e.exit(), // --help
        Err(e) => {
            eprintln!("scx_nimble: {} (see --help)", cli_line::clap_error_line(&e));
            std::process::exit(2);
        }
    };
    let res = match &cli.cmd {
        Some(Cmd::Topology(args)) => show_topology(args),
        Some(Cmd::Tune(args)) => ctl::tune(ctl::Changes {
            numa_rule: args.numa_rule,
            swq_mode: args.swq,
            swq_affinity: args.swq_affinity,
        }),
        Some(Cmd::Tui(args)) => tui::run(&tui::TuiArgs {
            interval: std::time::Duration::from_secs_f64(args.interval),
        }),
        None if cli.opts.help_stats => stats::help(),
        None if cli.opts.monitor.is_some() => monitor(&cli.opts),
        None => run(&cli.opts),
    };
    if let Err(e) = res {
        eprintln!("scx_nimble: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(opts: &Opts) -> Result<()> {
    if opts.version {
        println!("scx_nimble {}", env!("CARGO_PKG_VERSION"));
        return Ok(());
    }
    init_logging(opts.verbose)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    preflight::check(Path::new(preflight::SCHED_EXT_SYSFS), euid)?;

    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C/SIGTERM handler")?;

    let mut open_object = MaybeUninit::uninit();
    loop {
        let mut sched = scheduler::Scheduler::init(opts, &mut open_object)?;
        let exit = sched.run(&shutdown)?;
        if !exit.should_restart() {
            break;
        }
        if shutdown.load(Ordering::Relaxed) {
            bail!("asked to restart while shutting down");
        }
        info!("the kernel asked for a restart (CPU hotplug?): reloading");
    }
    Ok(())
}

/// `--monitor`: a client of the running scheduler's stats socket.
fn monitor(opts: &Opts) -> Result<()> {
    init_logging(opts.verbose)?;
    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C/SIGTERM handler")?;
    let secs = opts.monitor.unwrap_or(1.0);
    stats::monitor(secs, opts.json, shutdown).context("reading /var/run/scx/root/stats (root only)")
}

fn show_topology(a: &TopologyArgs) -> Result<()> {
    let f = a.imb_formula.into();
    let ds = topology::report::cpu_domains(&a.sysfs_root, a.cpu, f)?;
    if a.json {
        println!("{}", topology::report::json(a.cpu, f, &ds));
    } else {
        print!("{}", topology::report::human(a.cpu, f, &ds));
    }
    Ok(())
}

fn init_logging(verbose: bool) -> Result<()> {
    let level = if verbose {
        simplelog::LevelFilter::Debug
    } else {
        simplelog::LevelFilter::Info
    };
    let cfg = simplelog::ConfigBuilder::new()
        .set_time_level(simplelog::LevelFilter::Off)
        .set_target_level(simplelog::LevelFilter::Off)
        .set_thread_level(simplelog::LevelFilter::Off)
        .set_location_level(simplelog::LevelFilter::Off)
        .build();
    simplelog::TermLogger::init(
        level,
        cfg,
        simplelog::TerminalMode::Stderr,
        simplelog::ColorChoice::Never,
    )
    .context("initialising logging")
}
