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
 * Per-CPU event counters; userspace sums them over CPUs.
 *
 * Every task placed in a queue is recorded once on the INS_* side. It then
 * leaves that queue exactly once: by running (RUN_* side) or by being dropped
 * (DROPPED: dequeued for a property change, re-enqueued, exited, or handed
 * back to the kernel at unload). So at any quiet point
 *   INS_DIRECT + INS_LOCAL + INS_LLC + INS_SWQ == RUN_* + DROPPED + nr_pending
 * and after unload nr_pending is 0.
 */
enum nimble_stat {
	STAT_INS_DIRECT,	/* select_cpu found an idle CPU: straight to its local DSQ */
	STAT_INS_LOCAL,		/* enqueue: single-CPU task whose CPU was idle, to its local DSQ */
	STAT_INS_LLC,		/* enqueue: into the LLC DSQ of the task's CPU */
	STAT_INS_SWQ,		/* enqueue: into the shared wakequeue of the task's LLC */

	STAT_RUN_DIRECT,	/* ran after INS_DIRECT */
	STAT_RUN_LOCAL,		/* ran after INS_LOCAL */
	STAT_RUN_LLC_OWN,	/* ran from the LLC DSQ of the CPU that ran it */
	STAT_RUN_LLC_NODE,	/* stolen from another LLC of the same node */
	STAT_RUN_LLC_REMOTE,	/* stolen from an LLC of another node */
	STAT_RUN_SWQ,		/* ran after INS_SWQ (per-LLC detail in llc_stats) */
	STAT_DROPPED,		/* left its queue without running */

	STAT_IDLE_PREV,		/* select_cpu: previous CPU (whole core) idle */
	STAT_IDLE_LLC,		/* select_cpu: idle CPU in the previous CPU's LLC */
	STAT_IDLE_NODE,		/* select_cpu: idle CPU in the previous CPU's node */
	STAT_IDLE_ANY,		/* select_cpu: idle CPU anywhere the task may run */
	STAT_KICK,		/* enqueue kicked an idle CPU to come and take the task */
	STAT_KEEP_RUNNING,	/* dispatch found nothing and extended the previous task */

	/* Where tasks ran compared with their last CPU (each a subset of the one before). */
	STAT_MIGRATE,		/* ran on another CPU than last time */
	STAT_MIGRATE_LLC,	/* ... in another LLC */
	STAT_MIGRATE_NODE,	/* ... on another node */

	/* RUN_LLC_REMOTE by how far the task travelled (node_level, NUMA tiers). */
	STAT_STEAL_L1,		/* from a node of the nearest remote tier */
	STAT_STEAL_L2,		/* from the second tier */
	STAT_STEAL_FAR,		/* from the third tier or beyond */

	/* The core policy (vtime.bpf.h, balance.bpf.h, idle.bpf.h). */
	STAT_WAKE_SYNC,		/* select_cpu: a sync wakeup queued on the waker's CPU */
	STAT_LAG_CLAMP,		/* queued over a slice past its last deadline: no credit kept */
	STAT_PREEMPT,		/* a wakeup kicked a later-deadline task off its CPU */
	STAT_BALANCE,		/* a task whose slice ended moved to a less loaded LLC */
	STAT_SLICES,		/* slices given by the scaling (see SLICE_NS) */
	STAT_SLICE_NS,		/* their sum in ns (average: SLICE_NS / SLICES) */
	STAT_CPUQ,		/* wakeups queued on one CPU's own queue (cpu_dsq.bpf.h) */
	STAT_CPUQ_WAKER,	/* ... on the sync waker's CPU (subset of CPUQ) */
	STAT_CPUQ_STEAL,	/* taken from another CPU's own queue */

	NR_NIMBLE_STATS,
};

struct nimble_stats {
	unsigned long long cnt[NR_NIMBLE_STATS];
};

/*
 * The NUMA imbalance rules (--numa-rule): when a node may keep more load
 * than another. Each is stated in src/topology/rules.rs, which the BPF
 * gate in numa.bpf.h follows line for line.
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
 * Runtime controls: one entry in the nimble_ctl map, written by userspace at
 * start and by `scx_nimble tune` while running (no reload).
 */
struct nimble_ctl {
	unsigned int numa_rule;		/* enum numa_rule */
	unsigned int swq_mode;		/* enum swq_mode */
	unsigned int swq_affinity;	/* 1: pullers scan past tasks they may not run */
	unsigned int pad;
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
 * Per-LLC shared wakequeue counters (per-CPU map indexed by LLC; userspace
 * sums CPUs). Charged to the LLC whose queue the task was in.
 */
enum llc_stat {
	LSTAT_ENQ_WAKE_IDLE,	/* a wakeup that had an idle CPU claimed, via the swq */
	LSTAT_ENQ_WAKE_BUSY,	/* a wakeup with no idle CPU found */
	LSTAT_ENQ_OTHER,	/* any other enqueue (fork, preemption, slice end): mode all */
	LSTAT_PULL,		/* ran after waiting in the swq */
	LSTAT_PULL_XLLC,	/* ... on a CPU of another LLC (subset of PULL) */
	LSTAT_SKIP_AFFINITY,	/* a puller passed over a task it may not run */
	LSTAT_SCANNED,		/* tasks a puller looked at */
	LSTAT_PULL_TRIES,	/* pull attempts on a non-empty shard */
	LSTAT_PULL_NS,		/* time spent in those attempts */
	LSTAT_SCAN_NS,		/* ... of which looking for a task (the rest: moving it) */
	LSTAT_LLC_IN,		/* tasks inserted into the LLC DSQ */
	LSTAT_LLC_OUT,		/* ... that left it (ran or dropped); IN - OUT: queued now */
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
enum node_stat {
	NSTAT_FORK_LOCAL,	/* fork/exec: child kept on the parent's node */
	NSTAT_FORK_REMOTE,	/* fork/exec: child placed on another node */
	NSTAT_PULL,		/* dispatch pulled a task queued on another node */
	NSTAT_PUSH,		/* a task whose slice ended went to an idle CPU here */
	NSTAT_REFUSED,		/* dispatch rounds the rule kept from pulling */
	NSTAT_HOME_RETURN,	/* a pulled task came back to its home node */
	NR_NODE_STATS,
};

struct node_stats {
	unsigned long long cnt[NR_NODE_STATS];
};

#endif /* __NIMBLE_INTF_H */
