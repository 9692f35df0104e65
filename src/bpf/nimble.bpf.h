/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Common declarations for the scx_nimble BPF scheduler: tunables set by
 * userspace before load, the topology tables, and per-task state.
 */
#ifndef __NIMBLE_BPF_H
#define __NIMBLE_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"
#include "rules.h"

/*
 * Every timestamp the policy keeps (deadlines, finish times, queue entry,
 * time on a node) comes from here: scx_bpf_now() reads the run queue's
 * clock, already up to date inside a callback, where bpf_ktime_get_ns()
 * reads the clocksource on every call (the dearer part of enqueue and
 * stopping in the VM: tests/guest/bpf_cost.sh). One clock for all of them,
 * never mixed with the other: sched_clock and the monotonic clock differ.
 */
static __always_inline u64 now_ns(void)
{
	return scx_bpf_now();
}

/*
 * Tunables. All are written by userspace into .rodata before the program is
 * loaded, so the verifier sees them as constants.
 */

/* Time slice. Longer slices cut context switches; shorter ones cut latency. */
const volatile u64 slice_ns = 5ULL * 1000 * 1000;

/*
 * The shortest slice: the slice a task gets shrinks as its LLC's queue grows
 * (slice_ns * CPUs / (CPUs + queued)), but not below this. Smaller turns a
 * long queue over faster (lower wait); larger keeps context switches (and,
 * in a VM, exits) rarer under load.
 */
const volatile u64 slice_min_ns = 5ULL * 1000 * 1000;

/*
 * The shortest request: a task's deadline lies its request past its start,
 * the CPU time it uses per wakeup (averaged), but no less than this. Lower
 * lets the shortest sleepers run ahead of more of the queue (latency);
 * higher orders more tasks by arrival instead (fewer switches among
 * alike short sleepers, as in hackbench). Userspace sets it
 * (--req-min-us, 1 ms: at 0.1 ms hackbench and perf messaging ran 1.2-1.4x
 * longer than the old core's in the lab).
 */
const volatile u64 req_min_ns = 1000ULL * 1000;

/*
 * Wakeup preemption (preempt.bpf.h, the rule in rules.h): a woken task
 * whose deadline is earlier than the running task's takes its CPU once
 * that task has run its protected part: the shorter of the two requests,
 * at least preempt_min_ns of CPU time. Lower preempt_min_ns cuts
 * the wakeup latency of the shortest sleepers; higher keeps the running
 * task longer (fewer switches, warmer caches). wake_preempt false
 * (--no-preempt) turns it off.
 */
const volatile bool wake_preempt = true;
const volatile u64 preempt_min_ns = 1000ULL * 1000;

/*
 * Whether the protected part holds even for a running task that used more
 * than its share of its CPU lately, against a wakee bound to that CPU
 * (running_ahead() in rules.h). False (the default, EEVDF's eligibility):
 * a loop beside a pinned 1 ms periodic task lets it in at each wakeup
 * (0.3 ms average wait, not 3 ms); the cost is a switch per such wakeup.
 * True (--protect-ahead) is the rule before it, kept to measure against.
 */
const volatile bool protect_ahead = false;

/*
 * The furthest ahead of now a task's deadline may be, in ns. A low-weight
 * task among many gets a deadline far ahead (nice 19 among nice-0 tasks:
 * ~100x its request); it is capped here so it is never starved into the
 * sched_ext watchdog. Larger keeps nice levels sharper under heavy load;
 * smaller bounds the latency of low-priority tasks.
 */
const volatile u64 max_wait_ns = 1000ULL * 1000 * 1000;

/*
 * SCHED_IDLE tasks' deadlines may lie this many times max_wait_ns ahead:
 * the kernel gives them a weight of 3 against nice 0's 1024, a slice every
 * few seconds among busy nice-0 tasks; within 1 s they got 10x their
 * kernel share (at 4 s, 1.9x EEVDF's in sched_idle.sh). 6 s is far inside
 * the sched_ext watchdog's 30 s.
 */
#define IDLE_WAIT_MULT	6

/*
 * How long a queued task must have waited before an idle CPU of another
 * node may take it (when the NUMA rule lets it go). Until then its cache is
 * warm and a CPU of its own node is likely to free up; short load spikes
 * then move nothing across nodes. Larger keeps locality through longer
 * spikes; smaller spreads sustained overload sooner.
 */
const volatile u64 numa_patience_ns = 10ULL * 1000 * 1000;

/*
 * Sync wakeups (--wake-sync): a wakee that found no idle CPU waits on the
 * sync waker's own queue even when it holds more tasks than its previous
 * CPU's (cpu_dsq.bpf.h). The pair shares a cache and takes turns on one
 * CPU (tbench gains), but a waker that does not sleep at once delays its
 * wakee (hackbench loses).
 */
const volatile bool wake_sync;

/*
 * Wake-affine (--wake-affine, experimental, off by default): a sync wakeup
 * (pipes, sockets) whose waker runs alone in another LLC than the wakee's
 * previous CPU takes an idle CPU of the waker's LLC, so the pair comes to
 * share a cache (the kernel's wake_affine()); not when either side switches
 * between many partners (wake_wide()). On: pipe pairs started in two LLCs
 * share one (tests/guest/wake_affine.sh), but three lab runs on n2l4 gave
 * perf pipe 0.89-1.24x main's time and hackbench 0.68-1.56x, no gain
 * beyond TCG's noise, so it is not the default. Off: a wakee stays near its
 * previous CPU.
 */
const volatile bool wake_affine;

/*
 * Per-CPU wake queues (cpu_dsq.bpf.h, --no-cpu-queues turns them off): a
 * wakeup that found no idle CPU waits on one CPU's own queue, not its LLC's.
 * On: no migration and no shared queue lock per wakeup under overload (the
 * kernel's per-CPU run queues); off: the first CPU of the LLC to free up
 * takes it (lower wait behind a CPU that holds a long slice).
 */
const volatile bool cpu_queues = true;

/* Whether cores have SMT siblings: only then is "whole idle core" distinct. */
const volatile bool smt_enabled;

/*
 * Tests only (--test-error-after-ms): ops.tick calls scx_bpf_error() this
 * long after ops.init, so the tests can watch the error-exit path end to
 * end. 0 (always, in use): the check is compiled out by the verifier.
 */
const volatile u64 test_error_after_ns;
/*
 * Tests only (--test-stall-after-ms): ops.dispatch stops serving the queues
 * this long after ops.init, so queued tasks starve and the kernel's watchdog
 * ejects the scheduler (userspace lowers its timeout to seconds).
 */
const volatile u64 test_stall_after_ns;
u64 loaded_at_ns;
/* How long ops.init took (userspace logs it beside the attach time). */
u64 init_ns;

/* A test fault set to @after_ns (0: none) is due: that long since ops.init. */
static __always_inline bool test_fault_due(u64 after_ns)
{
	return after_ns && bpf_ktime_get_ns() - loaded_at_ns > after_ns;
}

/*
 * Topology, computed in Rust (src/topology/) and pushed here. LLC ids are
 * dense 0..nr_llcs and double as the ids of the LLC DSQs.
 */
const volatile u32 nr_cpu_ids = 1;
const volatile u32 nr_llcs = 1;
const volatile u32 nr_nodes = 1;
const volatile u32 cpu_llc[MAX_CPUS];
const volatile u32 cpu_node[MAX_CPUS];
const volatile u32 llc_node[MAX_LLCS];
const volatile u32 llc_nr_cpus[MAX_LLCS];
/*
 * steal_order[l][0..nr_llcs]: the LLC DSQs a CPU of LLC l consumes, in order:
 * l itself, the other LLCs of its node, then the LLCs of other nodes by
 * increasing NUMA distance.
 */
const volatile u32 steal_order[MAX_LLCS][MAX_LLCS];
/*
 * Each LLC's CPUs, LLC after LLC: those of LLC l are
 * llc_cpus[llc_first[l] .. llc_first[l] + llc_nr_cpus[l]], and cpu_pos[c]
 * is CPU c's place among its LLC's (the bit of the per-LLC bitmaps,
 * topo.bpf.h). Walks over an LLC's CPUs cost its size, not nr_cpu_ids.
 */
const volatile u32 llc_first[MAX_LLCS];
const volatile u32 llc_cpus[MAX_CPUS];
const volatile u32 cpu_pos[MAX_CPUS];
/* SLIT distances between nodes, and each node's CPU count. */
const volatile u32 node_dist[MAX_NODES][MAX_NODES];
const volatile u32 node_nr_cpus[MAX_NODES];
/* NUMA tier of node b seen from node a: 0 same node, 1 nearest remote, ... */
const volatile u32 node_level[MAX_NODES][MAX_NODES];
/*
 * node_affine[a][b]: a sync wakeup may go from a CPU of node a to its waker
 * on node b (the kernel's SD_WAKE_AFFINE, kept within the reclaim distance).
 */
const volatile u8 node_affine[MAX_NODES][MAX_NODES];
/*
 * The NUMA level between two nodes, computed by userspace from the same
 * thresholds as the numa_levels map: gate_level[a][b] is 1 + the level of
 * a's hierarchy that first spans b (0: none, e.g. a == b), gate_within[a][b]
 * the distance the groups of that level reach (its child level's).
 */
const volatile u8 gate_level[MAX_NODES][MAX_NODES];
const volatile u32 gate_within[MAX_NODES][MAX_NODES];
/* node_order[n][0..nr_nodes]: n itself, then the other nodes nearest first. */
const volatile u32 node_order[MAX_NODES][MAX_NODES];
/*
 * Shared wakequeue shards: how many each LLC has, and which one a CPU's
 * tasks are queued on and it pulls from first (src/topology/swq.rs).
 */
const volatile u32 llc_nr_shards[MAX_LLCS];
const volatile u32 cpu_shard[MAX_CPUS];

/*
 * Table lookups. The masks keep every index provably in bounds for the
 * verifier (the limits are powers of two); callers still check validity.
 * barrier_var() stops clang from dropping a mask it thinks is redundant
 * after that check, which the verifier cannot follow.
 */
_Static_assert(!(MAX_CPUS & (MAX_CPUS - 1)) && !(MAX_LLCS & (MAX_LLCS - 1)) &&
	       !(MAX_NODES & (MAX_NODES - 1)) &&
	       !(MAX_NUMA_LEVELS & (MAX_NUMA_LEVELS - 1)),
	       "table sizes must be powers of two");

static __always_inline u32 llc_of(s32 cpu)
{
	barrier_var(cpu);
	return cpu_llc[cpu & (MAX_CPUS - 1)];
}

static __always_inline u32 node_of(s32 cpu)
{
	barrier_var(cpu);
	return cpu_node[cpu & (MAX_CPUS - 1)];
}

static __always_inline u32 node_of_llc(u32 llc)
{
	barrier_var(llc);
	return llc_node[llc & (MAX_LLCS - 1)];
}

static __always_inline u32 steal_victim(u32 llc, u32 i)
{
	barrier_var(llc);
	barrier_var(i);
	return steal_order[llc & (MAX_LLCS - 1)][i & (MAX_LLCS - 1)];
}

static __always_inline u32 shards_of(u32 llc)
{
	barrier_var(llc);
	return llc_nr_shards[llc & (MAX_LLCS - 1)];
}

static __always_inline u32 shard_of(s32 cpu)
{
	barrier_var(cpu);
	return cpu_shard[cpu & (MAX_CPUS - 1)];
}

static __always_inline u32 node_distance(u32 a, u32 b)
{
	barrier_var(a);
	barrier_var(b);
	return node_dist[a & (MAX_NODES - 1)][b & (MAX_NODES - 1)];
}

static __always_inline bool nodes_affine(u32 a, u32 b)
{
	barrier_var(a);
	barrier_var(b);
	return node_affine[a & (MAX_NODES - 1)][b & (MAX_NODES - 1)];
}

static __always_inline u32 node_by_distance(u32 node, u32 i)
{
	barrier_var(node);
	barrier_var(i);
	return node_order[node & (MAX_NODES - 1)][i & (MAX_NODES - 1)];
}

/*
 * Runtime controls (struct nimble_ctl): written by userspace at start and by
 * `scx_nimble tune` while running, read on every decision they govern.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct nimble_ctl);
} nimble_ctl SEC(".maps");

static __always_inline struct nimble_ctl *ctl(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&nimble_ctl, &zero);
}

/*
 * Per-LLC state, padded to a cache line of its own so LLCs do not share one:
 * written by tasks becoming runnable there or leaving (atomics), read by
 * deadlines (vtime.bpf.h) and balancing (balance.bpf.h).
 */
struct llc_ctx {
	s64 load;		/* summed weights of its runnable tasks (NICE0_WEIGHT each at nice 0) */
	s64 nr_running;		/* and their number (statistics; the NUMA rule counts nodes) */
	s64 cpuq_nr;		/* tasks waiting in its CPUs' own queues (cpu_dsq.bpf.h) */
	u64 stuck_since;	/* uneven with no move since (balance.bpf.h), 0: not */
	s64 hog_load;		/* the part of load that CPU-bound tasks carry */
	s64 load_avg;		/* load averaged over time (vtime.bpf.h) */
	u64 avg_at;		/* when load_avg was last updated */
	s64 taken_nr;		/* its CPUs another class holds (classes.bpf.h) */
};
struct llc_ctx llcs[MAX_LLCS];

static __always_inline struct llc_ctx *llc_ctx(u32 llc)
{
	barrier_var(llc);
	return &llcs[llc & (MAX_LLCS - 1)];
}

/*
 * The CPUs of @llc that can run our tasks: those an RT or deadline task
 * holds are left out, as the kernel's balancer scales a CPU's capacity by
 * the time RT and DL take (scale_rt_capacity()). Counting them, the LLC
 * balance kept two CPU loops in an LLC with one usable CPU, and every
 * sleeper queued there waited behind both.
 */
static __always_inline s64 llc_cap(u32 llc)
{
	s64 n = llc_nr_cpus[llc & (MAX_LLCS - 1)] - READ_ONCE(llc_ctx(llc)->taken_nr);

	return n > 0 ? n : 0;
}

/*
 * A task that ran this many slices' worth of CPU time since it last slept
 * (40 ms at the default slice) is CPU-bound: only such tasks keep the CPU
 * time they used against them (vtime.bpf.h) and move between LLCs by load
 * (balance.bpf.h). At 2, hackbench's senders counted: 2-3x slower in the
 * VM; at 8, hackbench matches the old core and weights still hold. CPU
 * time, not slices that ran out: a loop that wakeup preemption cuts short
 * every few ms is CPU-bound all the same (counted by slice ends, such loops
 * stayed "sleepers" with deadlines a slice from their re-queue, and queued
 * ahead of the sleepers that preempted them: 0.2 s waits).
 */
#define HOG_SLICES	8

/* Per-task state, in task-local storage. */
struct task_ctx {
	/* Scratch mask for "allowed CPUs within this LLC/node". */
	struct bpf_cpumask __kptr *tmp;
	u64 run_start;		/* when the task last started running */
	u32 path;		/* enum queue_path: how it was last queued */
	u32 queued_llc;		/* LLC DSQ it was queued on, for PATH_LLC */
	s32 rq_node;		/* node whose nr_running counts it, -1: none */
	s32 rq_llc;		/* LLC whose nr_running counts it (valid with rq_node) */
	s32 last_cpu;		/* CPU it last ran on, -1: none yet */
	/*
	 * Home node: where fork placed the task (or where it first ran), moved
	 * only when the NUMA rule migrates it. Cross-node pulls prefer tasks
	 * coming home (numa_gate.bpf.h).
	 */
	s32 home;
	s32 mem_node;		/* node holding most of its memory, -1: unknown (mem_locality.bpf.h) */
	s32 last_node;		/* node it last ran on */
	u64 node_since;		/* when it arrived on last_node */
	u64 queued_at;		/* when it was last queued (LLC DSQ or swq) */
	u64 bal_at;		/* when balance_llc last moved it */
	u64 mem_bal_since;	/* when a move between busy nodes off its memory node was first put off */
	u32 full_slices;	/* slices' worth run since it last slept, up to HOG_SLICES */
	u32 push_votes;		/* of those, ending with the NUMA rule saying go */
	u32 rq_weight;		/* weight counted in llcs[rq_llc].load */
	u32 hog_w;		/* and in its hog_load (CPU-bound), 0: not */
	u32 eff_w;		/* its weight, cgroup share included (cgroup.bpf.h) */
	u32 cg_idle;		/* in a cpu.idle cgroup (or below one): as SCHED_IDLE */
	u32 cg_bw;		/* a cpu.max applies (its cgroup or above): cpu_max.bpf.h */
	u32 bw_parked;		/* waiting for its cgroup's next period, out of the counts */
	u64 bw_exec;		/* its sum_exec_runtime charged to cpu.max so far */
	s32 cg;			/* its cgroup's slot, -1: the root's */
	u32 cg_w;		/* weight counted in its cgroup's total, 0: none */
	u32 cg_seq;		/* its cgroup slot's seq when cg_w was counted */
	u64 deadline;		/* its last deadline (vtime.bpf.h), real time */
	u64 vstart;		/* when it was last eligible to start */
	u64 vfin;		/* its finish time: CPU time used, stretched */
	u64 exec;		/* ns run since it last woke */
	u64 burst;		/* ns run per wakeup, averaged (1/4 new) */
	u64 util_at;		/* when util was last moved */
	u32 util;		/* recent CPU use, of UTIL_ONE (rules.h util_toward()) */
	/*
	 * Set by select_cpu when the wakeup is to go through the shared
	 * wakequeue (enum swq_why); enqueue consumes it.
	 */
	u32 swq_why;
	/* 1 + the CPU whose own queue holds it (cpu_dsq.bpf.h), 0: none. */
	s32 cpuq;
	/* Where select_cpu wants enqueue to queue a wakeup (enum enq_hint). */
	u32 hint;
	/*
	 * 1 + the CPU select_cpu ran on for the wakeup enqueue queues next
	 * (the waker's); 0 once enqueue or running read it, so 0 at a
	 * wakeup's enqueue means select_cpu was skipped (a queued wakeup).
	 */
	s32 waker;
	/* Queued by enqueue_llc() and not run since (task_deadline()). */
	u32 waiting;
	/*
	 * As the kernel's record_wakee(): the pid it last woke, and how often
	 * it woke another than last time (halved each second from
	 * flips_at). wake_wide() reads them.
	 */
	u32 last_wakee;
	u32 wakee_flips;
	u64 flips_at;
};

/* select_cpu's word to enqueue about a wakeup that found no idle CPU. */
enum enq_hint {
	HINT_NONE,
	HINT_WAKER,	/* the sync waker's CPU queue (cpu_dsq.bpf.h) */
	HINT_SHARED,	/* the LLC's queue: its CPU is held by another class */
};

/* How a task reached the CPU it runs on next (accounting in stats.bpf.h). */
enum queue_path {
	PATH_NONE,	/* not queued by us since it last ran */
	PATH_DIRECT,
	PATH_LOCAL,
	PATH_LLC,
	PATH_SWQ,
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

static __always_inline struct task_ctx *lookup_task_ctx(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, p, 0, 0);
}

/*
 * Load time: the big steps of dispatch and enqueue (consume_llcs(),
 * keep_first(), balance_llc(), enqueue_llc(), push_remote(), ...) are global
 * functions (__noinline, not static), which the verifier checks once on
 * their own instead of again on every path of every caller. That took
 * dispatch from 175 726 verified instructions to 30 214 and a load in the
 * TCG guest from 21 s to 9 s. A global function cannot take a task_ctx
 * (it holds a kptr): it takes the task (__arg_trusted) and looks it up.
 */

/* Weights: p->scx.weight (100 = nice 0, the scale of cpu.weight) << WEIGHT_SHIFT. */
#define NICE0_WEIGHT	(100 << WEIGHT_SHIFT)

/* The kernel's scheduling policies (uapi; not in BTF). */
#define NIMBLE_SCHED_BATCH	3
#define NIMBLE_SCHED_IDLE	5

/*
 * Whether @p is idle work: SCHED_IDLE, or a task of a cgroup with cpu.idle
 * set (itself or an ancestor), which the kernel treats alike for wakeups
 * (sched_idle_cpu() counts h_nr_idle) and preemption.
 */
static __always_inline bool idle_work(const struct task_struct *p, const struct task_ctx *tctx)
{
	return p->policy == NIMBLE_SCHED_IDLE || (tctx && tctx->cg_idle);
}

/* Wakeup preemption's class of @p (enum task_class). */
static __always_inline u32 task_class(const struct task_struct *p, const struct task_ctx *tctx)
{
	if (idle_work(p, tctx))
		return TASK_IDLE;
	return p->policy == NIMBLE_SCHED_BATCH ? TASK_BATCH : TASK_NORMAL;
}

/*
 * A SCHED_IDLE task's weight: the kernel's WEIGHT_IDLEPRIO, 3 against
 * nice 0's 1024. sched_ext hands such a task p->scx.weight 1, the same as
 * nice 19 (15), five times too much.
 */
#define IDLE_WEIGHT	(NICE0_WEIGHT * 3 / 1024)

/* @p's own weight (nice, or SCHED_IDLE), without its cgroup's share. */
static __always_inline u64 task_weight(const struct task_struct *p)
{
	if (p->policy == NIMBLE_SCHED_IDLE)
		return IDLE_WEIGHT;
	return (u64)(p->scx.weight ? p->scx.weight : 1) << WEIGHT_SHIFT;
}

/* How far ahead of now @p's deadline may lie (see IDLE_WAIT_MULT). */
static __always_inline u64 task_max_wait(const struct task_struct *p, const struct task_ctx *tctx)
{
	return idle_work(p, tctx) ? max_wait_ns * IDLE_WAIT_MULT : max_wait_ns;
}

/* The weight deadlines and loads use: cgroup share included, if known. */
static __always_inline u64 tctx_weight(const struct task_struct *p, const struct task_ctx *tctx)
{
	return tctx->eff_w ? tctx->eff_w : task_weight(p);
}

static __always_inline bool valid_cpu(s32 cpu)
{
	return cpu >= 0 && cpu < nr_cpu_ids && cpu < MAX_CPUS;
}

#endif /* __NIMBLE_BPF_H */
