/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-node load, the input of the NUMA imbalance rules: how many runnable
 * tasks each node has (kept exact with per-node atomics, no global lock;
 * idle CPUs are read from the idle mask when needed, so they cannot drift),
 * and each task's home node and time on its current node.
 */
#ifndef __NIMBLE_NUMA_BPF_H
#define __NIMBLE_NUMA_BPF_H

#include "nimble.bpf.h"
#include "topo.bpf.h"
#include "vtime.bpf.h"

/*
 * Per node, a cache line each: runnable user tasks (running or queued) by
 * the CPU they are on, and their average and overload time (below).
 */
struct node_ctx {
	s64 nr_running;
	s64 load_avg;
	u64 overloaded_since;
	s64 hog_load;		/* its LLCs' hog_load summed (balance.bpf.h) */
	s64 taken_nr;		/* its CPUs another class holds (classes.bpf.h) */
	u64 avg_at;		/* when a tick last moved load_avg */
	u64 pad[2];
};
struct node_ctx nodes[MAX_NODES];

static __always_inline struct node_ctx *node_ctx(u32 node)
{
	barrier_var(node);
	return &nodes[node & (MAX_NODES - 1)];
}

/* The CPUs of @node that can run our tasks (llc_cap(), per node). */
static __always_inline s64 node_cap(u32 node)
{
	s64 n = node_nr_cpus[node & (MAX_NODES - 1)] - READ_ONCE(node_ctx(node)->taken_nr);

	return n > 0 ? n : 0;
}

static __always_inline void node_running_add(s32 node, s64 delta)
{
	if (node >= 0 && node < MAX_NODES)
		__sync_fetch_and_add(&node_ctx(node)->nr_running, delta);
}

/*
 * The same per LLC, with the tasks' summed weight: the load that the LLC's
 * clock and the balancing between LLCs (balance.bpf.h) read.
 */
static __always_inline void llc_running_add(s32 llc, s64 delta, s64 weight)
{
	struct llc_ctx *l;

	if (llc < 0 || llc >= MAX_LLCS)
		return;
	l = llc_ctx(llc);
	__sync_fetch_and_add(&l->nr_running, delta);
	__sync_fetch_and_add(&l->load, delta * weight);
}

static __always_inline void hog_load_add(s32 llc, s64 weight)
{
	if (llc < 0 || llc >= MAX_LLCS)
		return;
	__sync_fetch_and_add(&llc_ctx(llc)->hog_load, weight);
	__sync_fetch_and_add(&node_ctx(node_of_llc(llc))->hog_load, weight);
}

/* As many runnable tasks on @node as it has usable CPUs: none of them idle. */
static __always_inline bool node_busy(u32 node)
{
	return node_ctx(node)->nr_running >= node_cap(node);
}

/* More runnable tasks than CPUs on @node: some wait for one. */
static __always_inline bool node_crowded(u32 node)
{
	return node_ctx(node)->nr_running > node_cap(node);
}

/*
 * node_ctx.load_avg: runnable tasks per node averaged over ticks (x1024;
 * each tick of a busy CPU moves its node's average 1/8 of the way to the
 * current count). Short spikes (a kernel thread, a shell pipeline) barely
 * move it, so overload decisions, which may move any task, follow
 * sustained load only; the kernel uses PELT averages for the same reason.
 *
 * node_ctx.overloaded_since: since when the node's average has been above
 * its CPU count (0: it is not). An overload that lasts numa_patience_ns
 * lets other nodes take any of its waiting tasks, whatever the rule says.
 */

/*
 * Only ticks of the node's busy CPUs move load_avg: a node whose CPUs all
 * idle kept its last average (1.3 tasks on an empty node). After
 * NODE_AVG_STALE_NS without a tick its load is its runnable count now.
 */
#define NODE_AVG_STALE_NS	(32ULL * 1000 * 1000)

static __always_inline s64 node_load_at(u32 n, u64 now)
{
	struct node_ctx *nc = node_ctx(n);

	if (clock_since(now, READ_ONCE(nc->avg_at)) >= NODE_AVG_STALE_NS)
		return READ_ONCE(nc->nr_running) << NODE_LOAD_SHIFT;
	return nc->load_avg;
}

static __always_inline void node_tick(s32 cpu)
{
	u64 now = now_ns();
	struct node_ctx *nc;
	s64 run, avg;
	u32 n;

	if (!valid_cpu(cpu))
		return;
	n = node_of(cpu);
	nc = node_ctx(n);
	run = nc->nr_running;
	avg = node_load_at(n, now);
	/* Racy read-modify-write from the node's CPUs: a lost update is harmless. */
	avg += ((run << NODE_LOAD_SHIFT) - avg) >> 3;
	nc->load_avg = avg;
	WRITE_ONCE(nc->avg_at, now);
	if (avg <= (node_cap(n) << NODE_LOAD_SHIFT))
		nc->overloaded_since = 0;
	else if (!nc->overloaded_since)
		nc->overloaded_since = now;
}

static __always_inline bool node_overloaded_long(u32 node)
{
	u64 since = node_ctx(node)->overloaded_since;

	return since && clock_since(now_ns(), since) >= numa_patience_ns;
}

/* Note the node the task is on: restart its time there when it changed. */
static __always_inline void node_arrive(struct task_ctx *tctx, s32 node)
{
	if (tctx->home < 0)
		tctx->home = node;	/* not placed by fork: first node seen */
	if (tctx->last_node != node) {
		tctx->last_node = node;
		tctx->node_since = now_ns();
	}
}

/*
 * The LLC @p is counted on and queued to when it becomes runnable: its
 * CPU's, except when it is queued again while it waited on another LLC's
 * DSQ (the balance put it there; it has not run there yet, so its CPU is
 * still the old one): it stays where it waited, if it still may run there.
 * Sent back to its CPU's LLC, a loop reniced every 30 ms undid nearly
 * every balance move, light loops stayed where fork put them, in the LLC
 * the balance had to leave heaviest, and the nice-0 / light loop ratio
 * went from 10 to 13 (weights_churn.sh).
 */
static __always_inline u32 requeue_llc(struct task_struct *p, struct task_ctx *tctx,
				       u64 enq_flags)
{
	u32 own = llc_of(scx_bpf_task_cpu(p)), q = tctx->queued_llc;
	const struct cpumask *m;

	if ((enq_flags & SCX_ENQ_WAKEUP) || !tctx->waiting || tctx->path != PATH_LLC ||
	    q == own || q >= nr_llcs)
		return own;
	m = llc_mask(q);
	return m && bpf_cpumask_intersects(m, p->cpus_ptr) ? q : own;
}

/*
 * The task became runnable on @llc: count it there and on its node. Kernel
 * threads are not counted: they run in short bursts and mostly cannot move,
 * so counting them would make every node look overloaded at random (the
 * kernel's PELT load hardly sees them either).
 */
static __always_inline void node_runnable(struct task_struct *p, struct task_ctx *tctx, u32 llc)
{
	if (tctx->rq_node >= 0 || llc >= nr_llcs || (p->flags & PF_KTHREAD))
		return;
	tctx->rq_node = node_of_llc(llc);
	tctx->rq_llc = llc;
	tctx->rq_weight = tctx_weight(p, tctx);
	node_running_add(tctx->rq_node, 1);
	llc_running_add(tctx->rq_llc, 1, tctx->rq_weight);
	node_arrive(tctx, tctx->rq_node);
}

/* Count the (runnable) task on @llc from now on, and on its node. */
static __always_inline void rq_move(struct task_ctx *tctx, u32 llc)
{
	s32 node;

	if (tctx->rq_node < 0 || llc == tctx->rq_llc)
		return;
	llc_running_add(tctx->rq_llc, -1, tctx->rq_weight);
	llc_running_add(llc, 1, tctx->rq_weight);
	if (tctx->hog_w) {
		hog_load_add(tctx->rq_llc, -(s64)tctx->hog_w);
		hog_load_add(llc, tctx->hog_w);
	}
	tctx->rq_llc = llc;
	node = node_of_llc(llc);
	if (node == tctx->rq_node)
		return;
	node_running_add(tctx->rq_node, -1);
	node_running_add(node, 1);
	tctx->rq_node = node;
	node_arrive(tctx, node);
}

/* The task runs on @cpu: if that is another LLC or node, move its count. */
static __always_inline void node_moved(struct task_ctx *tctx, s32 cpu)
{
	if (valid_cpu(cpu))
		rq_move(tctx, llc_of(cpu));
}

/* Its weight changed while runnable (nice, cgroup share): move its load. */
static __always_inline void rq_reweight(struct task_ctx *tctx, u32 w)
{
	if (tctx->rq_node < 0 || w == tctx->rq_weight)
		return;
	__sync_fetch_and_add(&llc_ctx(tctx->rq_llc)->load, (s64)w - (s64)tctx->rq_weight);
	tctx->rq_weight = w;
}

/*
 * Once a slice (ops.stopping): count the task in its LLC's hog_load while
 * it is CPU-bound. The balance between LLCs evens that load only: a short
 * sleeper's weight (a nice -20 shell running sed) is in llc.load for a few
 * ms, and balancing on it moved loops away and back (135 moves a second
 * with 16 loops on l2). The kernel's PELT averages keep such tasks small.
 */
static __always_inline void rq_hog_update(struct task_ctx *tctx)
{
	u32 want = tctx->full_slices >= HOG_SLICES ? tctx->rq_weight : 0;

	if (tctx->rq_node < 0 || want == tctx->hog_w)
		return;
	hog_load_add(tctx->rq_llc, (s64)want - (s64)tctx->hog_w);
	tctx->hog_w = want;
}

/* The task stopped being runnable (slept, exited, left the scheduler). */
static __always_inline void node_quiescent(struct task_ctx *tctx)
{
	if (tctx->rq_node < 0)
		return;
	node_running_add(tctx->rq_node, -1);
	llc_running_add(tctx->rq_llc, -1, tctx->rq_weight);
	if (tctx->hog_w)
		hog_load_add(tctx->rq_llc, -(s64)tctx->hog_w);
	tctx->hog_w = 0;
	tctx->rq_node = -1;
}

#endif /* __NIMBLE_NUMA_BPF_H */
