//! The loaded scheduler: fills the BPF tables from the topology, loads and
//! attaches the struct_ops, reads counters, and detaches.

use crate::bpf_intf::{nimble_limits_MAX_NUMA_LEVELS, numa_level};
use crate::bpf_skel::*;
use crate::counters::{self, Counters, NR_WAIT_QUEUES};
use crate::ctl::{self, Ctl};
use crate::opts::Opts;
use crate::stats::{self, Metrics, Setup};
use crate::topology::domains::{wakes_affine_across, RECLAIM_DISTANCE};
use crate::topology::sysfs::SysTopo;
use crate::topology::{self, thresholds, Layout};
use anyhow::{bail, Context, Result};
use crossbeam::channel::TryRecvError;
use libbpf_rs::skel::Skel as _;
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use log::{debug, info, warn};
use scx_nimble::memloc;
use scx_stats::prelude::StatsServer;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report, UserExitInfo};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const MAX_NUMA_LEVELS: usize = nimble_limits_MAX_NUMA_LEVELS as usize;
/// The main loop's period: how late it may see an exit, a `tune` or a stats
/// request (--stats/--monitor answers are a second apart) against how often
/// it wakes on a loaded machine (each wake waits for a CPU).
const POLL: Duration = Duration::from_millis(50);

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    link: Option<libbpf_rs::Link>,
    nr_nodes: usize,
    nr_llcs: usize,
    /// The controls last seen in nimble_ctl (`scx_nimble tune` changes them).
    ctl: Ctl,
    /// What the metrics report besides counters.
    setup: Setup,
    attached_at: Instant,
    /// Serves the metrics on /var/run/scx/root/stats while attached.
    stats_server: StatsServer<(), Metrics>,
    /// Names the cgroups BPF knows by id (stats only).
    cg_names: RefCell<stats::cgroups::Names>,
    /// The exit summary in the human form (--stats-format human, the
    /// default) rather than the one `final:` line (line, json).
    final_human: bool,
    /// Memory locality (src/memloc/): None with one node.
    memloc: Option<memloc::Scanner>,
    mem_period: Duration,
    mem_next: Instant,
    /// Time spent in memory-locality rounds, and their number.
    mem_cost: Duration,
    mem_rounds: u64,
    /// Where processes ran, and the pages moved to them (memloc::migrate).
    migrator: memloc::migrate::Tracker,
    /// Moves the pages on a thread of its own; None: --mem-migrate-mbps 0.
    mover: Option<memloc::migrate::Mover>,
    mem_migrate_pages: u64,
    mem_last: Instant,
    mem_moved: u64,
    /// Whether running out of cgroup slots was logged (once).
    cg_over_logged: bool,
    /// Whether ignored cpu.max limits were logged (once).
    bw_over_logged: bool,
}

/// The kernel's CPU hotplug sequence number (what scx_ops_open! reads too,
/// but only after the topology has been read).
fn read_hotplug_seq() -> Result<u64> {
    let path = "/sys/kernel/sched_ext/hotplug_seq";
    let s = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    s.trim()
        .parse()
        .with_context(|| format!("{path}: not a number: {}", s.trim()))
}

/// Computes the NUMA imbalance thresholds from the sysfs read and applies
/// the overrides: before anything is loaded or logged, so a bad override is one
/// line and nothing else.
fn thresholds_for(opts: &Opts, sys: &SysTopo) -> Result<thresholds::Thresholds> {
    let mut th = thresholds::numa_thresholds(sys, opts.imb_formula);
    thresholds::apply_overrides(&mut th, &opts.imb_numa_nr)?;
    Ok(th)
}

/// Logs the thresholds in one line, writes them into the numa_levels map
/// and returns them for the metrics.
fn write_thresholds(
    skel: &BpfSkel,
    opts: &Opts,
    th: &thresholds::Thresholds,
) -> Result<Vec<stats::Threshold>> {
    info!(
        "imb_numa_nr ({}): {}",
        topology::report::formula_name(opts.imb_formula),
        thresholds::summary(th)
    );
    let mut out = Vec::new();
    for (node, levels) in th {
        if *node >= topology::MAX_NODES || levels.len() > MAX_NUMA_LEVELS {
            bail!(
                "node {node} with {} NUMA levels exceeds the BPF tables",
                levels.len()
            );
        }
        for (i, l) in levels.iter().enumerate() {
            let key = (node * MAX_NUMA_LEVELS + i) as u32;
            let val = numa_level {
                distance: l.distance as u32,
                span_weight: l.span_weight as u32,
                imb_numa_nr: l.imb_numa_nr as u32,
                pad: 0,
            };
            // SAFETY: numa_level is a plain C struct generated from intf.h.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    &val as *const numa_level as *const u8,
                    std::mem::size_of::<numa_level>(),
                )
            };
            skel.maps
                .numa_levels
                .update(&key.to_ne_bytes(), bytes, MapFlags::ANY)
                .context("writing the numa_levels map")?;
            out.push(stats::Threshold {
                node: *node as u64,
                level: i as u64 + 1,
                distance: l.distance as u64,
                span_weight: l.span_weight as u64,
                imb_numa_nr: l.imb_numa_nr as u64,
            });
        }
    }
    Ok(out)
}

/// Runs `f` in this thread at nice -20, then back at its own nice. The
/// verifier works in the loading thread, and a reload after a CPU hotplug
/// runs while the kernel's fair class shares the CPUs with the machine's
/// load: under stress-ng on n2l4 (TCG) the reload's BPF load took 56.7 s at
/// nice 0 against 8.7 s idle. Without CAP_SYS_NICE the nice stays as it was.
fn at_top_nice<T>(f: impl FnOnce() -> T) -> T {
    // PRIO_PROCESS with who = 0 is the calling thread on Linux.
    // SAFETY: plain syscalls on this thread's own priority.
    let before = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    // SAFETY: as above.
    let raised = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -20) } == 0;
    let out = f();
    if raised {
        // SAFETY: as above.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, before) };
    }
    out
}

impl<'a> Scheduler<'a> {
    /// Loads and attaches. `controls`: the live controls of the instance
    /// this one replaces after a hotplug reload (`tune` changes survive);
    /// None on the first load (the flags').
    pub fn init(
        opts: &Opts,
        controls: Option<Ctl>,
        open_object: &'a mut MaybeUninit<OpenObject>,
    ) -> Result<Self> {
        // The hotplug sequence first, then the topology: a CPU that comes
        // online in between (the online mask is set before the sequence
        // moves) makes the kernel ask for a restart once attached, instead
        // of this load missing it. (A CPU going offline moves the sequence
        // first, so a load in that window may still see it: the kernel's
        // unload on hotplug covers what follows.)
        let t_start = Instant::now();
        let hotplug_seq = read_hotplug_seq()?;
        // One read of sysfs: the layout and the thresholds both derive from it.
        let sys = SysTopo::read(Path::new("/sys")).context("reading the CPU topology")?;
        let th = thresholds_for(opts, &sys)?;
        let layout = Layout::from_sys(&sys).context("unsupported CPU topology")?;
        let order = topology::steal_order(&layout);
        let swq = topology::swq::plan(&layout, opts.swq_shards.map(|n| n as usize));
        let node_order = topology::node_order(&layout);
        let node_levels = topology::node_levels(&layout);
        let gate = thresholds::gate_levels(&th, &layout.node_distance);
        info!(
            "scx_nimble {}: {} CPUs, {} LLCs, {} NUMA nodes, SMT {}, slice {} us",
            env!("CARGO_PKG_VERSION"),
            layout.cpu_llc.iter().flatten().count(),
            layout.nr_llcs(),
            layout.nr_nodes(),
            if layout.smt { "on" } else { "off" },
            opts.slice_us
        );
        for (llc, o) in order.iter().enumerate() {
            debug!(
                "LLC {llc} (node {}): CPUs {:?}, consumes {o:?}, {} swq shard(s)",
                layout.llc_node[llc],
                layout.llc_cpus(llc),
                swq.llc_shards[llc]
            );
        }

        let mut builder = BpfSkelBuilder::default();
        builder.obj_builder.debug(opts.verbose);
        let mut skel = scx_ops_open!(builder, open_object, nimble_ops, None)?;
        skel.struct_ops.nimble_ops_mut().exit_dump_len = opts.exit_dump_len;
        skel.struct_ops.nimble_ops_mut().hotplug_seq = hotplug_seq;
        // A task that cannot run at once on the local DSQ it was put on (a
        // higher class took the CPU), or that such a class preempts, comes
        // back to ops.enqueue (kernel 7.1; 0 before: the flag is left out).
        skel.struct_ops.nimble_ops_mut().flags |= *scx_utils::compat::SCX_OPS_ALWAYS_ENQ_IMMED;
        // A runnable task that dispatch did not keep (its slice not
        // refilled) and nothing else to run: the kernel hands it to
        // ops.enqueue (SCX_ENQ_LAST) instead of running it on. A task of a
        // cgroup out of cpu.max quota must stop there (cpu_max.bpf.h).
        skel.struct_ops.nimble_ops_mut().flags |= *scx_utils::compat::SCX_OPS_ENQ_LAST;
        // The kernel's ttwu wakelist, off for sched_ext tasks unless asked
        // for (--no-queued-wakeup): a wakee still switching out of its CPU
        // is queued there and enqueued by that CPU (select_cpu skipped)
        // instead of its waker spinning until it is off the CPU.
        if !opts.no_queued_wakeup {
            skel.struct_ops.nimble_ops_mut().flags |=
                *scx_utils::compat::SCX_OPS_ALLOW_QUEUED_WAKEUP;
        }
        if opts.test_stall_after_ms.is_some() {
            // The watchdog's verdict in seconds, not the usual 30.
            skel.struct_ops.nimble_ops_mut().timeout_ms = 3000;
        }

        let rodata = skel.maps.rodata_data.as_mut().unwrap();
        rodata.slice_ns = opts.slice_us * 1000;
        rodata.slice_min_ns = opts.slice_min_us.min(opts.slice_us) * 1000;
        rodata.wake_sync = opts.wake_sync;
        rodata.wake_affine = opts.wake_affine;
        rodata.cpu_queues = !opts.no_cpu_queues;
        rodata.wake_preempt = !opts.no_preempt;
        rodata.preempt_min_ns = opts.preempt_min_us * 1000;
        rodata.protect_ahead = opts.protect_ahead;
        rodata.req_min_ns = opts.req_min_us.min(opts.slice_us) * 1000;
        rodata.numa_patience_ns = opts.numa_patience_us * 1000;
        rodata.test_error_after_ns = opts.test_error_after_ms.map_or(0, |ms| ms * 1_000_000);
        rodata.test_stall_after_ns = opts.test_stall_after_ms.map_or(0, |ms| ms * 1_000_000);
        rodata.smt_enabled = layout.smt;
        rodata.nr_cpu_ids = layout.nr_cpu_ids as u32;
        rodata.nr_llcs = layout.nr_llcs() as u32;
        rodata.nr_nodes = layout.nr_nodes() as u32;
        for cpu in 0..layout.nr_cpu_ids {
            // Offline CPUs keep LLC 0: they run nothing until a hotplug
            // restart gives them their real place.
            let llc = layout.cpu_llc[cpu].unwrap_or(0);
            rodata.cpu_llc[cpu] = llc as u32;
            rodata.cpu_node[cpu] = layout.llc_node[llc] as u32;
        }
        for (llc, &node) in layout.llc_node.iter().enumerate() {
            rodata.llc_node[llc] = node as u32;
            rodata.llc_nr_cpus[llc] = layout.llc_cpus(llc).len() as u32;
            for (i, &victim) in order[llc].iter().enumerate() {
                rodata.steal_order[llc][i] = victim as u32;
            }
            rodata.node_nr_cpus[node] += layout.llc_cpus(llc).len() as u32;
            rodata.llc_nr_shards[llc] = swq.llc_shards[llc] as u32;
        }
        // Each LLC's CPUs in one list, and each CPU's place in its LLC
        // (the per-LLC bitmaps' bits): walks over an LLC cost its size.
        let mut first = 0;
        for llc in 0..layout.nr_llcs() {
            rodata.llc_first[llc] = first as u32;
            for (pos, &cpu) in layout.llc_cpus(llc).iter().enumerate() {
                rodata.llc_cpus[first + pos] = cpu as u32;
                rodata.cpu_pos[cpu] = pos as u32;
            }
            first += layout.llc_cpus(llc).len();
        }
        for (cpu, &shard) in swq.cpu_shard.iter().enumerate() {
            rodata.cpu_shard[cpu] = shard as u32;
        }
        for (node, dists) in layout.node_distance.iter().enumerate() {
            for (other, &d) in dists.iter().enumerate() {
                rodata.node_dist[node][other] = d as u32;
                rodata.node_affine[node][other] =
                    u8::from(wakes_affine_across(d, RECLAIM_DISTANCE));
            }
            for (i, &n) in node_order[node].iter().enumerate() {
                rodata.node_order[node][i] = n as u32;
            }
            for (other, &lv) in node_levels[node].iter().enumerate() {
                rodata.node_level[node][other] = lv as u32;
            }
            for (other, g) in gate[node].iter().enumerate() {
                if let Some((lv, within)) = *g {
                    rodata.gate_level[node][other] = lv as u8 + 1;
                    rodata.gate_within[node][other] = within as u32;
                }
            }
        }

        let t_open = Instant::now();
        let mut skel = at_top_nice(|| scx_ops_load!(skel, nimble_ops, uei))?;
        let t_load = Instant::now();
        let thresholds = write_thresholds(&skel, opts, &th)?;
        let ctl = controls.unwrap_or(Ctl {
            numa_rule: opts.numa_rule,
            swq_mode: opts.swq,
            swq_affinity: opts.swq_affinity,
            cgroup_weight: !opts.no_cgroup_weight,
            mem_locality: !opts.no_mem_locality,
        });
        ctl::write(&skel.maps.nimble_ctl, ctl)?;
        let t_attach = Instant::now();
        let link = scx_ops_attach!(skel, nimble_ops)?;
        // What a reload after hotplug costs, and where (the verifier's
        // share grows with the code, ops.init's with the CPU count).
        let init_ns = skel.maps.bss_data.as_ref().map_or(0, |b| b.init_ns);
        info!(
            "load times: topology and open {} ms, BPF load (verifier) {} ms, attach {} ms (ops.init {} ms)",
            (t_open - t_start).as_millis(),
            (t_load - t_open).as_millis(),
            t_attach.elapsed().as_millis(),
            init_ns / 1_000_000
        );
        let progs = crate::verifier::verified_insns(skel.object());
        info!("verifier: {}", crate::verifier::summary(&progs));
        for (name, n) in &progs {
            debug!("verified_insns {name} {n}");
        }
        info!("scheduler attached: {}", ctl.describe());
        // After attach: a refused second instance must not take the socket.
        let stats_server = stats::launch_server()?;

        Ok(Self {
            skel,
            link: Some(link),
            nr_nodes: layout.nr_nodes(),
            nr_llcs: layout.nr_llcs(),
            ctl,
            setup: Setup {
                imb_formula: topology::report::formula_name(opts.imb_formula).into(),
                slice_us: opts.slice_us,
                numa_patience_us: opts.numa_patience_us,
                swq_shards: swq.llc_shards.iter().copied().max().unwrap_or(1) as u64,
                cpu_llc: layout.cpu_llc.clone(),
                llc_node: layout.llc_node.clone(),
                thresholds,
            },
            attached_at: Instant::now(),
            stats_server,
            cg_names: RefCell::new(stats::cgroups::Names::new("/sys/fs/cgroup")),
            final_human: opts.stats_fmt() == stats::StatsFormat::Human,
            memloc: (layout.nr_nodes() > 1)
                .then(|| memloc::Scanner::new("/proc", layout.nr_nodes())),
            mem_period: Duration::from_millis(opts.mem_scan_ms),
            mem_next: Instant::now(),
            mem_cost: Duration::ZERO,
            mem_rounds: 0,
            migrator: memloc::migrate::Tracker::default(),
            mover: (layout.nr_nodes() > 1 && opts.mem_migrate_mbps > 0)
                .then(memloc::migrate::Mover::new),
            // MB/s in 4 KiB pages a second.
            mem_migrate_pages: opts.mem_migrate_mbps * 256,
            mem_last: Instant::now(),
            mem_moved: 0,
            cg_over_logged: false,
            bw_over_logged: false,
        })
    }

    /// The metrics now (counters, controls, CPU ticks).
    pub fn metrics(&self) -> Result<Metrics> {
        let c = self.counters()?;
        let ticks = std::fs::read_to_string("/proc/stat")
            .map(|s| stats::cpu_ticks(&s))
            .unwrap_or_else(|_| BTreeMap::new());
        let up = self.attached_at.elapsed().as_secs_f64();
        let mut m = Metrics::new(&self.setup, &self.ctl, &c, &ticks, up);
        // The cgroup slots, read through the .bss mmap (no syscalls).
        let bss = self.skel.maps.bss_data.as_ref().unwrap();
        let slots: Vec<_> = bss
            .cgs
            .iter()
            .map(|c| stats::cgroups::Slot {
                used: c.used != 0,
                cgid: c.cgid,
                parent: c.parent,
                weight: c.set_w as u64,
                idle: c.idle != 0,
                lent: c.lent,
                total: c.total,
            })
            .collect();
        m.nr_cgroups = slots.iter().filter(|s| s.used).count() as u64;
        m.nr_cgroups_over = bss.cg_over.max(0) as u64;
        m.mem_pages_moved = self.mem_moved;
        m.cgroups = stats::cgroups::collect(&slots, &mut self.cg_names.borrow_mut());
        Ok(m)
    }

    pub fn counters(&self) -> Result<Counters> {
        let per_cpu = self
            .skel
            .maps
            .stats
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .context("reading the stats map")?
            .unwrap_or_default();
        let bss = self.skel.maps.bss_data.as_ref().unwrap();
        let nodes = bss.nodes[..self.nr_nodes]
            .iter()
            .map(|n| n.nr_running)
            .collect();
        let pending = self
            .skel
            .maps
            .pending
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .context("reading the pending map")?
            .unwrap_or_default();
        let [pending] = counters::sum_percpu::<1>(&pending);
        let mut c = Counters::from_percpu(&per_cpu, pending, nodes);
        for node in 0..self.nr_nodes as u32 {
            let per_cpu = self
                .skel
                .maps
                .node_stats
                .lookup_percpu(&node.to_ne_bytes(), MapFlags::ANY)
                .context("reading the node_stats map")?
                .unwrap_or_default();
            c.push_node(&per_cpu);
        }
        for llc in 0..self.nr_llcs {
            let key = (llc as u32).to_ne_bytes();
            let per_cpu = self
                .skel
                .maps
                .llc_stats
                .lookup_percpu(&key, MapFlags::ANY)
                .context("reading the llc_stats map")?
                .unwrap_or_default();
            let mut hists: [Vec<u8>; NR_WAIT_QUEUES] = Default::default();
            for (q, h) in hists.iter_mut().enumerate() {
                let key = ((llc * NR_WAIT_QUEUES + q) as u32).to_ne_bytes();
                *h = counters::sum_hist_percpu(
                    &self
                        .skel
                        .maps
                        .wait_hist
                        .lookup_percpu(&key, MapFlags::ANY)
                        .context("reading the wait_hist map")?
                        .unwrap_or_default(),
                );
            }
            c.push_llc(
                &per_cpu,
                [&hists[0], &hists[1]],
                bss.swq_depth[llc],
                bss.llcs[llc].nr_running,
            );
        }
        Ok(c)
    }

    /// The controls in force (the flags', or `tune`'s since).
    pub fn controls(&self) -> Ctl {
        self.ctl
    }

    /// Logs a control change made by `scx_nimble tune`.
    /// A value that names no rule or mode (written by something other than
    /// `tune`) is refused: the last good controls go back into the map, one
    /// line is logged, and the scheduler keeps running.
    fn watch_ctl(&mut self) -> Result<()> {
        let now = match ctl::read(&self.skel.maps.nimble_ctl) {
            Ok(now) => now,
            Err(e) => {
                ctl::write(&self.skel.maps.nimble_ctl, self.ctl)?;
                warn!(
                    "refused nimble_ctl: {e:#}; restored {}",
                    self.ctl.describe()
                );
                return Ok(());
            }
        };
        if now != self.ctl {
            info!(
                "controls changed: {} (was {})",
                now.describe(),
                self.ctl.describe()
            );
            self.ctl = now;
        }
        Ok(())
    }

    /// Logs once, when it first happens, that cgroups were made with every
    /// slot taken (cg_over, src/bpf/cgroup.bpf.h), or that a cpu.max found
    /// no free entry (bw_over, src/bpf/cpu_max.bpf.h).
    fn watch_cgroup_slots(&mut self) {
        let bss = self.skel.maps.bss_data.as_ref().unwrap();
        let (over, bw_over) = (bss.cg_over, bss.bw_over);
        if over > 0 && !self.cg_over_logged {
            self.cg_over_logged = true;
            warn!(
                "{over} cgroup(s) beyond MAX_CGROUPS ({}): their tasks count in their nearest ancestor with a slot, their own cpu.weight and cpu.idle are not applied (nr_cgroups_over in the stats)",
                crate::bpf_intf::nimble_limits_MAX_CGROUPS
            );
        }
        if bw_over > 0 && !self.bw_over_logged {
            self.bw_over_logged = true;
            warn!(
                "{bw_over} cgroup cpu.max limit(s) ignored: all {} entries are taken",
                crate::bpf_intf::nimble_limits_MAX_BW
            );
        }
    }

    /// A memory-locality round when one is due: the nodes that changed go
    /// into mem_nodes (src/bpf/mem_locality.bpf.h), all are cleared while
    /// kernel.numa_balancing is 0 or the mem_locality control is off. A
    /// failed write is logged, not fatal: a task without a node is placed
    /// as before.
    fn scan_memory(&mut self) {
        let Some(scanner) = self.memloc.as_mut() else {
            return;
        };
        let start = Instant::now();
        if start < self.mem_next {
            return;
        }
        self.mem_next = start + self.mem_period;
        let on = self.ctl.mem_locality
            && std::fs::read_to_string("/proc/sys/kernel/numa_balancing")
                .is_ok_and(|s| memloc::balancing_on(&s));
        let changes = match on {
            true => scanner.scan(std::process::id()).0,
            false => scanner.clear(),
        };
        let map = &self.skel.maps.mem_nodes;
        for c in changes {
            let res = match c {
                memloc::Change::Set(pid, node) => {
                    debug!("memory locality: process {pid} on node {node}");
                    // Keep the run time counted so far (memloc::migrate).
                    let key = pid.to_ne_bytes();
                    let mut v = map
                        .lookup(&key, MapFlags::ANY)
                        .ok()
                        .flatten()
                        .unwrap_or_else(|| vec![0; size_of::<crate::bpf_intf::mem_proc>()]);
                    v[..4].copy_from_slice(&(node as i32).to_ne_bytes());
                    map.update(&key, &v, MapFlags::ANY)
                }
                memloc::Change::Clear(pid) => map.delete(&pid.to_ne_bytes()),
            };
            if let Err(e) = res {
                debug!("memory locality: {c:?}: {e}");
            }
        }
        let n = scanner.with_node() as u32;
        let bss = self.skel.maps.bss_data.as_mut().unwrap();
        bss.mem_nr = n;
        bss.mem_follow = on as u32;
        let period = start.duration_since(self.mem_last);
        self.mem_last = start;
        if on {
            self.migrate_memory(period);
        }
        self.mem_cost += start.elapsed();
        self.mem_rounds += 1;
    }

    /// Pages of processes whose threads settled away from their memory move
    /// to them, `--mem-migrate-mbps` for the `period` since the last round,
    /// on the mover's thread (memloc::migrate). Errors are logged, not
    /// fatal: the memory stays where it is.
    fn migrate_memory(&mut self, period: Duration) {
        let (Some(scanner), Some(mover)) = (self.memloc.as_mut(), self.mover.as_ref()) else {
            return;
        };
        for (pid, m) in mover.finished() {
            if m.moved > 0 {
                debug!("memory locality: {} pages of process {pid} moved", m.moved);
                scanner.recheck(pid);
            }
            if let Some(e) = m.errno {
                debug!(
                    "memory locality: moving process {pid}'s pages: {}",
                    std::io::Error::from_raw_os_error(e)
                );
            }
            self.mem_moved += m.moved;
        }
        let map = &self.skel.maps.mem_nodes;
        let period_ns = period.as_nanos() as u64;
        // Nodes with as many runnable tasks as CPUs (BPF's node_busy()).
        let bss = self.skel.maps.bss_data.as_ref().unwrap();
        let busy: Vec<bool> = (0..self.nr_nodes)
            .map(|n| {
                let cpus = self
                    .setup
                    .cpu_llc
                    .iter()
                    .filter(|l| l.is_some_and(|l| self.setup.llc_node.get(l) == Some(&n)));
                bss.nodes[n].nr_running.max(0) as usize >= cpus.count().max(1)
            })
            .collect();
        let mut moves = Vec::new();
        for (pid, node) in scanner.nodes() {
            let Ok(Some(v)) = map.lookup(&pid.to_ne_bytes(), MapFlags::ANY) else {
                continue;
            };
            let ran: Vec<u64> = v[8..]
                .chunks_exact(8)
                .take(self.nr_nodes)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
                .collect();
            let full = busy.get(node).copied().unwrap_or(false);
            if let Some(m) = self.migrator.observe(pid, &ran, node, full, period_ns) {
                moves.push((pid, node, m));
            }
        }
        let todo = self.migrator.pick(moves);
        let live: std::collections::HashSet<u32> = scanner.nodes().map(|(p, _)| p).collect();
        self.migrator.retain(|pid| live.contains(&pid));
        if todo.is_empty() {
            return;
        }
        // The round's budget, shared evenly.
        let budget = self.mem_migrate_pages * period.as_millis().max(1) as u64 / 1000;
        let each = (budget / todo.len() as u64).max(1);
        let jobs = todo.into_iter().map(|(pid, to)| (pid, to, each)).collect();
        if !mover.submit(jobs) {
            debug!("memory locality: the last round's moves still run; this round's dropped");
        }
    }

    /// Runs until a shutdown request or the kernel unloads us; detaches, prints
    /// the final counters and says why the scheduler exited.
    pub fn run(&mut self, shutdown: &AtomicBool) -> Result<UserExitInfo> {
        let (res_ch, req_ch) = self.stats_server.channels();
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            // --stats is a client of this server, like --monitor (main.rs).
            // Poll and sleep rather than block in recv_timeout: crossbeam
            // spins and calls sched_yield about eight times before it parks,
            // and under load each yield queues this thread behind a full
            // slice, so it sat runnable ~70 % of the time and its weight
            // counted in its LLC's load (docs/known-limits.md).
            match req_ch.try_recv() {
                Ok(()) => {
                    res_ch.send(self.metrics()?)?;
                    continue;
                }
                Err(TryRecvError::Empty) => {}
                Err(e) => Err(e).context("stats server channel")?,
            }
            std::thread::sleep(POLL);
            self.watch_ctl()?;
            self.scan_memory();
            self.watch_cgroup_slots();
        }
        if let Some(m) = &self.mover {
            self.mem_moved += m.finished().iter().map(|(_, x)| x.moved).sum::<u64>();
        }
        if self.mem_rounds > 0 {
            info!(
                "memory locality: {} rounds, {} us each on average, {} pages moved",
                self.mem_rounds,
                self.mem_cost.as_micros() / self.mem_rounds as u128,
                self.mem_moved
            );
        }

        // A `tune` in the last 100 ms must survive a reload too.
        let _ = self.watch_ctl();
        // Detaching is synchronous: once the link is gone BPF writes no more
        // counters and every task has been handed back, so the books must balance.
        self.link.take();
        let fin = self.counters()?;
        let m = self.metrics()?;
        let summary = match self.final_human {
            // Rates and shares since attach, as an interval of --stats shows them.
            true => format!("final, {}", stats::human::human(None, &m)),
            false => format!(
                "final: {} imbalance={}\n",
                m.counters_line(),
                fin.imbalance()
            ),
        };
        // Not println!: with stdout closed (`--stats 1 | head -1`) the exit
        // path goes on, it does not panic.
        let mut out = std::io::stdout();
        if let Err(e) = write!(out, "{summary}") {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                warn!("printing the final counters: {e}");
            }
        }
        if fin.imbalance() != 0
            || fin.pending != 0
            || fin.node_running.iter().any(|&n| n != 0)
            || fin.swq_depth.iter().any(|&n| n != 0)
            || fin.llc_queued.iter().any(|&n| n != 0)
            || fin.llc_running.iter().any(|&n| n != 0)
        {
            warn!(
                "counters do not balance: {} inserted, {} unaccounted",
                fin.inserted(),
                fin.imbalance()
            );
        }
        uei_report!(&self.skel, uei)
    }
}
