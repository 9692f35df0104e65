//! scx_nimble: a sched_ext scheduler with per-LLC dispatch queues, local-first
//! dispatch and topology-ordered stealing.
//!
//! Lifecycle, top to bottom: parse flags → preflight checks → load and attach
//! (scheduler.rs) → serve metrics (stats/) and run until Ctrl-C/SIGTERM or
//! the kernel unloads us → report → reload when the kernel asks (CPU
//! hotplug). `--monitor` and `tui` only read a running scheduler's metrics.

mod bpf_skel;
mod counters;
mod ctl;
mod opts;
mod preflight;
mod scheduler;
mod stats;
mod tui;
mod verifier;

// The machine model, the thresholds and the shared helpers (src/lib.rs).
use scx_nimble::{bpf_intf, cli_line, hist, topology};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use ctl::{OnOff, SwqMode};
use log::info;
use opts::{parse_interval, Opts};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use topology::imb::ImbFormula;
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
    /// (prints the controls; with no flag, only prints them). Changes last
    /// until the scheduler exits: they survive the reload after CPU hotplug,
    /// not a restart of scx_nimble (which starts from its flags again).
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
    /// Turn cgroup cpu.weight on or off (off: every task weighs by its
    /// nice alone, as under the other scx schedulers; for A/B runs).
    #[arg(long, value_enum)]
    cgroup_weight: Option<OnOff>,
    /// Turn memory locality on or off (off: the node holding a process's
    /// memory is neither learnt nor preferred; placement is the NUMA rule's).
    #[arg(long, value_enum)]
    mem_locality: Option<OnOff>,
}

#[derive(Debug, clap::Args)]
struct TopologyArgs {
    /// Root of the sysfs tree to read (a snapshot laid out like /sys works).
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    sysfs_root: std::path::PathBuf,
    /// Formula for imb_numa_nr.
    #[arg(long, value_enum, default_value_t = ImbFormula::Mainline)]
    imb_formula: ImbFormula,
    /// The CPU whose domains to show.
    #[arg(long, default_value_t = 0)]
    cpu: usize,
    /// Print one JSON object instead of the tree.
    #[arg(long)]
    json: bool,
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
            cgroup_weight: args.cgroup_weight,
            mem_locality: args.mem_locality,
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
    preflight::check(&preflight::sched_ext_sysfs(), euid)?;

    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C/SIGTERM handler")?;

    let mut open_object = MaybeUninit::uninit();
    let mut stats_client = opts.stats;
    let mut controls = None;
    loop {
        let mut sched = scheduler::Scheduler::init(opts, controls, &mut open_object)?;
        // --stats: a client of our own stats socket, as --monitor is of
        // another process's (as scx_rusty does); started once the server
        // is up, it reconnects across reloads.
        if let Some(secs) = stats_client.take() {
            let (fmt, stop) = (opts.stats_fmt(), shutdown.clone());
            std::thread::spawn(move || {
                if let Err(e) = stats::monitor(secs, fmt, stop) {
                    log::warn!("--stats: {e:#}");
                }
            });
        }
        let exit = sched.run(&shutdown)?;
        // `tune` changes survive the reload the kernel asks for.
        controls = Some(sched.controls());
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
    stats::monitor(secs, opts.stats_fmt(), shutdown)
        .context("reading /var/run/scx/root/stats (root only)")
}

fn show_topology(a: &TopologyArgs) -> Result<()> {
    let f = a.imb_formula;
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
