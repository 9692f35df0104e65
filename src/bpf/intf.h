/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one header shared by the BPF scheduler and the Rust userspace (bindgen
 * turns it into bpf_intf.rs). Anything both sides must agree on lives here.
 */
#ifndef __NIMBLE_INTF_H
#define __NIMBLE_INTF_H

enum nimble_limits {
	/* Sizes of the topology tables userspace fills before load. */
	MAX_CPUS	= 512,
	MAX_LLCS	= 64,
	MAX_NODES	= 32,
	/* SD_NUMA levels per node (one per distinct remote SLIT distance). */
	MAX_NUMA_LEVELS	= 8,
	/* Shared wakequeue shards per LLC (the series used ~6 CPUs a shard). */
	MAX_SWQ_SHARDS	= 16,
	/* Buckets of a queue-wait histogram (see wait_hist_bucket). */
	WAIT_HIST_BUCKETS = 128,
	/* A task's recent CPU use when it used all of it (rules.h util_toward()). */
	UTIL_ONE	= 1 << 20,
	/*
	 * Non-root cgroups with a slot of their own (cgroup.bpf.h): 16x a dense
	 * container host's count (a hundred pods, their containers, systemd's
	 * units: about 1 000). Past it a cgroup's tasks count in its nearest
	 * ancestor that has a slot (nr_cgroups_over in the stats, logged).
	 */
	MAX_CGROUPS	= 16384,
	/* Task and cgroup weights are cpu.weight units << WEIGHT_SHIFT (precision). */
	WEIGHT_SHIFT	= 6,
	/* Processes whose memory node userspace tracks (mem_nodes, src/memloc/). */
	MAX_MEM_PROCS	= 4096,
	/*
	 * Resident pages (1 MiB) below which a process's memory is not worth
	 * following: userspace reads no numa_maps, and a new thread gets no
	 * preference for its parent's node (mem_locality.bpf.h).
	 */
	MEM_MIN_PAGES	= 256,
	/*
	 * Cgroups with a finite cpu.max at once (cpu_max.bpf.h). More get no
	 * limit (counted: bw_over, logged by userspace); a container host
	 * limits its pods and containers, some hundreds.
	 */
	MAX_BW		= 1024,
};

/*
 * A process's entry in mem_nodes: userspace writes the node holding most
 * of its memory (numa_maps); BPF adds its threads' run time per node, from
 * which userspace sees where they settled (src/memloc/migrate.rs).
 */
struct mem_proc {
	int node;		/* -1: none preferred */
	unsigned int pad;
	unsigned long long ran_ns[MAX_NODES];
};

/*
 * One SD_NUMA level of a node's domain hierarchy, as build_sched_domains()
 * sees it from that node's CPUs. Userspace computes these (src/topology/)
 * and writes them into the numa_levels map at key
 * node * MAX_NUMA_LEVELS + level, level 0 being the nearest remote tier.
 */
struct numa_level {
	unsigned int distance;		/* SLIT distance the level spans up to */
	unsigned int span_weight;	/* CPUs in the level's span */
	unsigned int imb_numa_nr;	/* running tasks it tolerates imbalanced */
	unsigned int pad;
};

/*
 * Every counter is declared once, in one of three lists below:
 * X(ID, name, description). The list is its group: NIMBLE_STATS per CPU
 * (broken down by the counting CPU's node and LLC), NODE_STATS by the node
 * a decision concerns, LLC_STATS by the LLC whose queue it was. The C enums
 * come from the lists here; build.rs turns the same lines into the Rust
 * side (the metrics' fields and their --help-stats descriptions, the
 * breakdowns, the order of the `stats:` line, docs/metrics.md's table).
 * Adding a counter: one line here, one increment in BPF.
 */
/*
 * Per-CPU event counters; userspace sums them over CPUs.
 *
 * Every task placed in a queue is recorded once on the INS_* side. It then
 * leaves that queue exactly once: by running (RUN_* side) or by being dropped
 * (DROPPED: dequeued for a property change, re-enqueued, exited, or handed
 * back to the kernel at unload). So at any quiet point
 *   INS_DIRECT + INS_LOCAL + INS_LLC + INS_SWQ == RUN_* + DROPPED + nr_pending
 * and after unload nr_pending is 0.
 */
#define NIMBLE_STATS(X) \
	X(INS_DIRECT, ins_direct, "Wakeups sent straight to an idle CPU's local DSQ (by select_cpu, or by enqueue: wake_queued)") \
	X(INS_LOCAL, ins_local, "Single-CPU tasks enqueued on their idle CPU's local DSQ") \
	X(INS_LLC, ins_llc, "Tasks queued on an LLC dispatch queue or a CPU's own wake queue (deadline ordered)") \
	X(INS_SWQ, ins_swq, "Tasks queued on an LLC's shared wakequeue") \
	X(RUN_DIRECT, run_direct, "Tasks that ran after ins_direct") \
	X(RUN_LOCAL, run_local, "Tasks that ran after ins_local") \
	X(RUN_LLC_OWN, llc_own, "Tasks run from the running CPU's own LLC queue") \
	X(RUN_LLC_NODE, steal_node, "Tasks stolen from another LLC of the same node") \
	X(RUN_LLC_REMOTE, steal_remote, "Tasks stolen from an LLC of another node (= steal_l1 + steal_l2 + steal_far)") \
	X(RUN_SWQ, run_swq, "Tasks that ran after waiting in a shared wakequeue") \
	X(DROPPED, dropped, "Tasks that left a queue without running (dequeued, exited, unload)") \
	X(IDLE_PREV, idle_prev, "select_cpu: the previous CPU (whole core) was idle") \
	X(IDLE_LLC, idle_llc, "select_cpu: an idle CPU in the previous CPU's LLC") \
	X(IDLE_NODE, idle_node, "select_cpu: an idle CPU on the previous CPU's node") \
	X(IDLE_ANY, idle_any, "select_cpu: an idle CPU anywhere the task may run") \
	X(KICK, kick, "Idle CPUs kicked to come and take a queued task") \
	X(KEEP_RUNNING, keep_running, "Dispatch found nothing and let the previous task run on") \
	X(MIGRATE, migrate, "Tasks that ran on another CPU than last time") \
	X(MIGRATE_LLC, migrate_llc, "Migrations to a CPU of another LLC (subset of migrate)") \
	X(MIGRATE_NODE, migrate_node, "Migrations to another node (subset of migrate_llc)") \
	X(STEAL_L1, steal_l1, "Remote steals from the nearest remote NUMA tier") \
	X(STEAL_L2, steal_l2, "Remote steals from the second NUMA tier") \
	X(STEAL_FAR, steal_far, "Remote steals from the third NUMA tier or farther") \
	X(WAKE_SYNC, wake_sync, "Sync wakeups queued on the waker's CPU (the waker is about to sleep)") \
	X(WAKE_AFFINE, wake_affine, "Sync wakeups sent to an idle CPU of the waker's LLC, another than the wakee's previous one (wake-affine)") \
	X(LAG_CLAMP, lag_clamp, "Tasks queued over a slice after their last deadline (no credit kept: lag clamp)") \
	X(PREEMPT, preempt, "Wakeups that preempted the task on their CPU (earlier deadline, past its protected part or ahead of its share)") \
	X(PREEMPT_AHEAD, preempt_ahead, "Of those, of a task ahead of its share of its CPU, inside its protected part (running_ahead())") \
	X(SIDLE, sidle, "Wakeups put on a CPU that ran only SCHED_IDLE work (which yields at once)") \
	X(BW_PARK, bw_park, "Tasks queued while their cgroup (or one above) was out of its cpu.max quota: they waited for its next period") \
	X(BALANCE, balance, "Tasks whose slice ended moved to a less loaded LLC (summed weights)") \
	X(SLICES, slices, "Slices given, shrunk with the LLC queue (see slice_ns)") \
	X(SLICE_NS, slice_ns, "Sum of those slices in ns (average slice: slice_ns / slices)") \
	X(CPUQ, cpuq, "Wakeups with no idle CPU queued on one CPU's own queue (not the LLC's)") \
	X(CPUQ_WAKER, cpuq_waker, "Of those, on the sync waker's CPU (the waker runs there alone)") \
	X(CPUQ_SPREAD, cpuq_spread, "Of those, on a sibling of the previous CPU whose queue was shorter (two choices)") \
	X(CPUQ_STEAL, cpuq_steal, "Tasks taken from another CPU's own queue by a CPU with nothing else to run") \
	X(GO_IDLE, go_idle, "Dispatch rounds that found nothing to run and no task to extend: the CPU went idle") \
	X(TAKEN_SKIP, taken_skip, "Wakeups and re-queues kept off the own queue of a CPU an RT or deadline task holds") \
	X(REENQ, reenq, "Tasks the kernel handed back (SCX_ENQ_REENQ): their CPU was taken or could not run them at once") \
	X(RESCUE, rescue, "Tasks handed back from the own queue of a CPU an RT or deadline task holds (by a sibling's tick)") \
	X(KICK_WAKER, kick_waker, "Queued wakeups with no idle CPU for them that kicked their waker's CPU (it may be going idle unseen)") \
	X(WAKE_QUEUED, wake_queued, "Wakeups the kernel queued on the CPU the task was leaving (no select_cpu) that enqueue sent to an idle CPU")

enum nimble_stat {
#define NIMBLE_STAT_ID(id, name, desc) STAT_##id,
	NIMBLE_STATS(NIMBLE_STAT_ID)
#undef NIMBLE_STAT_ID
	NR_NIMBLE_STATS,
};

struct nimble_stats {
	unsigned long long cnt[NR_NIMBLE_STATS];
};

/*
 * The NUMA imbalance rules (--numa-rule): when a node may keep more load
 * than another. Each is decided by numa_tolerates() in rules.h (the
 * function the host unit tests call, src/topology/rules.rs).
 */
enum numa_rule {
	NUMA_RULE_MAINLINE,	/* adjust_numa_imbalance() since v5.19 */
	NUMA_RULE_V3,		/* seed 000's v3: allow while busiest < imb_numa_nr */
	NUMA_RULE_V4,		/* seed 000's v4: busiest <= 25 % of span, diff <= imb_numa_nr */
	NUMA_RULE_OFF,		/* no allowance: nodes are crossed like LLCs */
	NUMA_RULE_TIP,		/* seed 000's tip-core (v5.16): busiest < 25 % of its group */
	NR_NUMA_RULES,
};

/*
 * One sched group of a NUMA level, as the rule (rules.h) sees it: the nodes
 * within the level's child distance of a node, summed.
 */
struct node_group {
	int idle;		/* idle CPUs (at fork: among the task's) */
	int run;		/* runnable tasks */
	int cpus;		/* CPUs */
	int allowed;		/* CPUs the task may use (at fork) */
	long long load;		/* tick-averaged runnable tasks << NODE_LOAD_SHIFT */
};

/* Load averages are fixed point: one runnable task is 1 << NODE_LOAD_SHIFT. */
enum { NODE_LOAD_SHIFT = 10 };

/* What the rule lets another node take (numa_pull_verdict in rules.h). */
enum numa_verdict {
	NUMA_KEEP,	/* nothing: the rule keeps the load where it is */
	NUMA_GO_COLD,	/* tasks that have waited numa_patience_ns */
	NUMA_GO_ANY,	/* any task: overloaded for numa_patience_ns, or rule off */
};

/*
 * Scheduling classes of tasks as wakeup preemption sees them (the kernel's
 * normal_policy() and task_has_idle_policy()): SCHED_NORMAL, SCHED_BATCH,
 * SCHED_IDLE.
 */
enum task_class {
	TASK_NORMAL,
	TASK_BATCH,
	TASK_IDLE,
};

/*
 * What wakeup preemption (wakeup_preempts() in rules.h) knows of a task:
 * the one waking, or the one running on the CPU it would take. Times are
 * the run queue clock (scx_bpf_now()), in ns.
 */
struct preempt_view {
	unsigned long long deadline;	/* its deadline */
	unsigned long long start;	/* waking: when it may start (eligible once
					 * reached); running: when it started */
	unsigned long long req;		/* its request: CPU time it asks for */
	unsigned long long span;	/* the request at its weight (deadline - start) */
	unsigned int class;		/* enum task_class */
	unsigned int util;		/* running: its recent CPU use when it started
					 * or renewed its slice, of UTIL_ONE (rules.h) */
	unsigned int weight;		/* its weight */
	unsigned int one_cpu;		/* waking: it may run on one CPU only */
};

/*
 * Runtime controls: one entry in the nimble_ctl map, written by userspace at
 * start and by `scx_nimble tune` while running (no reload).
 */
struct nimble_ctl {
	unsigned int numa_rule;		/* enum numa_rule */
	unsigned int swq_mode;		/* enum swq_mode */
	unsigned int swq_affinity;	/* 1: pullers scan past tasks they may not run */
	unsigned int cgroup_weight;	/* 1: cgroup cpu.weight scales task weights */
	unsigned int mem_locality;	/* 1: prefer the node holding a task's memory */
};

/*
 * Which tasks go through the per-LLC shared wakequeue (--swq), after seed
 * 002. Only tasks that may run on more than one CPU ever enter it.
 */
enum swq_mode {
	SWQ_OFF,	/* no task enters it */
	SWQ_WAKEUPS,	/* David's v1: wakeups that stay on their previous CPU */
	SWQ_SIS_FAIL,	/* ego-1: wakeups for which select_cpu found no idle CPU */
	SWQ_ALL,	/* v2/v3: every queued task */
	NR_SWQ_MODES,
};

/*
 * Per-LLC queue counters (per-CPU map indexed by LLC; userspace sums CPUs).
 * Charged to the LLC whose queue the task was in.
 */
#define LLC_STATS(X) \
	X(ENQ_WAKE_IDLE, swq_wake_idle, "swq enqueues of wakeups that had an idle CPU (mode wakeups/all)") \
	X(ENQ_WAKE_BUSY, swq_wake_busy, "swq enqueues of wakeups that found no idle CPU") \
	X(ENQ_OTHER, swq_other, "swq enqueues of forks, preemptions and slice ends (mode all)") \
	X(PULL, swq_pull, "Tasks that ran from the swq") \
	X(PULL_XLLC, swq_pull_xllc, "swq tasks run by a CPU of another LLC (subset of swq_pull)") \
	X(SKIP_AFFINITY, swq_skip_affinity, "Queued tasks a swq puller passed over (not allowed on its CPU)") \
	X(SCANNED, swq_scanned, "Queued tasks swq pullers looked at") \
	X(PULL_TRIES, swq_pull_tries, "Pull attempts on a non-empty swq shard") \
	X(PULL_NS, swq_pull_ns, "Time spent in swq pull attempts (ns; per try: swq_pull_cost_ns)") \
	X(SCAN_NS, swq_scan_ns, "Part of swq_pull_ns spent choosing a task (ns)") \
	X(LLC_IN, llc_in, "Tasks inserted into the LLC dispatch queues") \
	X(LLC_OUT, llc_out, "Tasks that left the LLC dispatch queues (queued = llc_in - llc_out)")

enum llc_stat {
#define LLC_STAT_ID(id, name, desc) LSTAT_##id,
	LLC_STATS(LLC_STAT_ID)
#undef LLC_STAT_ID
	NR_LLC_STATS,
};

struct llc_stats {
	unsigned long long cnt[NR_LLC_STATS];
};

/*
 * Time tasks waited in an LLC's queue (its DSQ or its swq), from insert to
 * running. Bucket b < 4
 * holds waits of b ns; above, each power of two is split in 4: a wait w with
 * highest set bit m (m >= 2) goes to 4 * (m - 1) + ((w >> (m - 2)) & 3),
 * waits of 2^33 ns (~8.6 s) and more land in the last. src/hist.rs decodes it.
 */
struct wait_hist {
	unsigned long long bucket[WAIT_HIST_BUCKETS];
};

/* The wait_hist map holds two histograms per LLC, at llc * 2 + enum wait_queue. */
enum wait_queue {
	WAIT_LLC,	/* the LLC's deadline-ordered DSQ */
	WAIT_SWQ,	/* the LLC's shared wakequeue */
	NR_WAIT_QUEUES,
};

/*
 * Per-node NUMA counters (per-CPU map indexed by node; userspace sums CPUs).
 * Fork counters are charged to the parent's node, the others to the node
 * that receives (or would have received) the task.
 */
#define NODE_STATS(X) \
	X(FORK_LOCAL, fork_local, "fork/exec: child kept on the parent's node") \
	X(FORK_REMOTE, fork_remote, "fork/exec: child placed on another node") \
	X(FORK_PREF, fork_pref, "Of fork_local: children kept there because it is their preferred node (its memory's, or its parent's for a new thread of a process holding memory) and has room") \
	X(PULL, numa_pull, "Tasks pulled from another node by the NUMA gate") \
	X(PUSH, numa_push, "Tasks whose slice ended pushed to an idle CPU on another node") \
	X(REFUSED, numa_refused, "Dispatch rounds the NUMA rule kept from pulling across nodes") \
	X(HOME_RETURN, home_return, "Pulled tasks that came back to their home node") \
	X(MEM_MOVE, mem_move, "Tasks moved to the node holding most of their memory (woken, forked or pushed there)") \
	X(SWAP, mem_swap, "Tasks that traded CPUs with a task on the node holding their memory, whose memory is on theirs (each swap moves two)") \
	X(MEM_STAY, mem_stay, "Moves off the node holding a task's memory put off: a push made to wait for twice the votes, a pull that took another task, a balance move between busy nodes made to wait") \
	X(MEM_KNOWN_NS, mem_known_ns, "Run time (ns) of tasks whose memory is on this node (known from numa_maps), wherever they ran") \
	X(MEM_LOCAL_NS, mem_local_ns, "Of that, run time on this node: memory locality is mem_local_ns / mem_known_ns")

enum node_stat {
#define NODE_STAT_ID(id, name, desc) NSTAT_##id,
	NODE_STATS(NODE_STAT_ID)
#undef NODE_STAT_ID
	NR_NODE_STATS,
};

struct node_stats {
	unsigned long long cnt[NR_NODE_STATS];
};

#endif /* __NIMBLE_INTF_H */
