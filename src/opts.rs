//! The scheduler's options: the flags `scx_nimble` parses and the
//! configuration `Scheduler::init` loads with (beside the scheduler, so the
//! scheduler does not reach into main.rs).

use crate::ctl::SwqMode;
use crate::topology;
use crate::topology::imb::ImbFormula;
use crate::topology::rules::NumaRule;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("interval").args(["stats", "monitor"])))]
pub struct Opts {
    /// Time slice in microseconds. Longer slices mean fewer context switches;
    /// shorter ones lower latency under contention.
    #[arg(short = 's', long, default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(100..=100_000))]
    pub slice_us: u64,

    /// Shortest slice in microseconds: a task's slice shrinks as its LLC's
    /// queues grow (slice * CPUs / (CPUs + queued), counting the LLC DSQ
    /// and its CPUs' own queues), but not below this.
    /// Smaller turns a long queue over faster; larger switches less. The
    /// default (the slice) keeps slices whole: shrinking them cost hackbench
    /// in the VM.
    #[arg(long, default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(50..=100_000))]
    pub slice_min_us: u64,

    /// When a synchronous wakeup (pipes, sockets) finds no idle CPU, queue
    /// the wakee on the waker's CPU even if more tasks wait there than on
    /// its previous CPU (by default only if no more do). The pair shares a
    /// cache; a waker that does not sleep at once delays its wakee.
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

    /// Turn wakeup preemption off: a woken task then waits for the running
    /// task's slice to end. On (the default), a woken task with the earlier
    /// deadline takes the CPU once the running task has run its protected
    /// part (EEVDF's rule; see --preempt-min-us).
    #[arg(long)]
    pub no_preempt: bool,

    /// Keep the kernel's queued wakeups off (SCX_OPS_ALLOW_QUEUED_WAKEUP):
    /// every wakeup then goes through select_cpu in the waker's context,
    /// and a waker whose wakee is still switching out of its CPU spins until
    /// it has. On (the default), the kernel queues such a wakeup on the
    /// wakee's CPU, as it does for the fair class, and enqueue picks an
    /// idle CPU near it in select_cpu's stead (the ping-pong of pipes and
    /// futexes: schbench's wakeup p90 1.6-2.0 ms without it on n2l4,
    /// EEVDF's 0.1-0.2).
    #[arg(long)]
    pub no_queued_wakeup: bool,

    /// Experimental (off by default): a sync wakeup (pipes, sockets) whose
    /// waker runs alone in another LLC than the wakee's previous CPU takes
    /// an idle CPU of the waker's LLC, so a pair split by fork placement
    /// may come to share a cache (the kernel's wake_affine()); wakers and
    /// wakees that switch between many partners are left where they are.
    /// No gain shown in the lab yet (docs/known-limits.md).
    #[arg(long)]
    pub wake_affine: bool,

    /// The least a running task keeps of its slice before a wakeup with an
    /// earlier deadline takes its CPU, in microseconds; it keeps the
    /// shorter of its own request and the wakee's if longer. Lower cuts
    /// the wakeup latency of short sleepers; higher switches less.
    #[arg(long, value_name = "US", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub preempt_min_us: u64,

    /// Keep the running task's protected part (--preempt-min-us) even when
    /// it has used more than its share of its CPU lately and the wakee may
    /// run on that CPU only. Off (the default), such a task is not
    /// protected, as EEVDF protects only an eligible task: a pinned
    /// periodic task sharing a CPU with a loop then starts at its wakeup
    /// instead of the next tick. On trades that latency for fewer switches.
    #[arg(long)]
    pub protect_ahead: bool,

    /// The shortest request, in microseconds: a task's deadline lies its
    /// CPU time per wakeup (averaged) past its start, but no less than
    /// this. Lower puts the shortest sleepers ahead of more of the queue;
    /// higher orders alike short sleepers by arrival.
    #[arg(long, value_name = "US", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..=100_000))]
    pub req_min_us: u64,

    /// Formula for the NUMA imbalance thresholds (imb_numa_nr): the kernel's
    /// since v6.0, its first merged version, or the LKML v4 patch's.
    #[arg(long, value_enum, default_value_t = ImbFormula::Mainline)]
    pub imb_formula: ImbFormula,

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

    /// Memory locality: how often (ms) to find the node holding most of
    /// each busy process's memory (/proc/PID/numa_maps, processes of 1 MiB
    /// or more that ran, 64 at most a round), which placement then prefers
    /// within the NUMA rule, as the kernel's NUMA balancing does under
    /// EEVDF; nothing while kernel.numa_balancing is 0. Shorter follows
    /// memory sooner for more CPU.
    #[arg(long, value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub mem_scan_ms: u64,

    /// Memory locality: how fast (MB/s, all processes together) the pages
    /// of a process whose threads settled on another node than its memory
    /// (its node full, say) move to them, as the kernel's NUMA balancing
    /// migrates pages on hinting faults. 0: memory never moves. Higher
    /// gets remote tasks local sooner for more copying (and TLB flushes in
    /// the moved process).
    #[arg(long, value_name = "MBPS", default_value_t = 128,
          value_parser = clap::value_parser!(u64).range(0..=65_536))]
    pub mem_migrate_mbps: u64,

    /// Start with memory locality off (`tune --mem-locality` switches it
    /// live): placement is then the NUMA rule's alone, as before.
    #[arg(long)]
    pub no_mem_locality: bool,

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

    /// Ignore cgroup cpu.weight: every task weighs by its nice alone (the
    /// default honours it, as the kernel does: a cgroup's share is divided
    /// among its tasks). For A/B runs; `tune --cgroup-weight` switches it live.
    #[arg(long)]
    pub no_cgroup_weight: bool,

    /// Shards per LLC shared wakequeue (default: one per 6 CPUs). More
    /// shards contend less on large LLCs; fewer keep the order FIFO.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=topology::swq::MAX_SHARDS as u64))]
    pub swq_shards: Option<u64>,

    /// Print the metrics every SECS seconds while scheduling, in
    /// --stats-format (default: a few aligned lines of rates per interval).
    #[arg(long, value_name = "SECS", value_parser = parse_interval)]
    pub stats: Option<f64>,

    /// Do not schedule: print the running scx_nimble's metrics every SECS
    /// seconds, read from its stats socket (root only), until Ctrl-C.
    #[arg(long, value_name = "SECS", value_parser = parse_interval,
          conflicts_with = "stats")]
    pub monitor: Option<f64>,

    /// How --stats and --monitor print: `human` (aligned lines, rates per
    /// second over the interval), `line` (one `stats:` line of counters
    /// cumulative since attach, for grep) or `json` (one object per interval).
    /// It also sets the exit summary's form: human, or the one `final:` line
    /// of counters (line and json).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t)]
    pub stats_format: crate::stats::StatsFormat,

    /// With --stats or --monitor: the same as --stats-format json.
    #[arg(long, requires = "interval")]
    pub json: bool,

    /// List every metric with its description and exit.
    #[arg(long)]
    pub help_stats: bool,

    /// Exit debug dump buffer length in bytes (0: kernel default; at most
    /// 1 MiB, the kernel allocates it when the scheduler loads).
    #[arg(long, default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=1 << 20))]
    pub exit_dump_len: u32,

    /// Tests only: make the BPF side exit with an error (scx_bpf_error) MS
    /// milliseconds after it loads, to exercise the error-exit report.
    #[arg(long, value_name = "MS", hide = true,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub test_error_after_ms: Option<u64>,

    /// Tests only: stop dispatching queued tasks MS milliseconds after
    /// loading, with the kernel's watchdog timeout lowered to 3 s, so the
    /// watchdog ejects the scheduler: the stall-exit report end to end.
    #[arg(long, value_name = "MS", hide = true,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub test_stall_after_ms: Option<u64>,

    /// Verbose output, including libbpf's and the steal order of every LLC.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Print the version and exit.
    #[arg(short = 'V', long)]
    pub version: bool,
}

impl Opts {
    /// The --stats/--monitor format: --json wins over --stats-format.
    pub fn stats_fmt(&self) -> crate::stats::StatsFormat {
        match self.json {
            true => crate::stats::StatsFormat::Json,
            false => self.stats_format,
        }
    }
}

pub fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.1..=3600.0).contains(&v) => Ok(v),
        Ok(_) => Err("must be between 0.1 and 3600 seconds".into()),
        Err(e) => Err(e.to_string()),
    }
}
