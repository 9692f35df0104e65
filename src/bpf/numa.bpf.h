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

/* Runnable user tasks (running or queued) per node, by the CPU they are on. */
u64 node_nr_running[MAX_NODES];
/* The same per LLC (statistics only: the rules read nodes). */
u64 llc_nr_running[MAX_LLCS];

static __always_inline void node_running_add(s32 node, s64 delta)
{
	if (node >= 0 && node < MAX_NODES)
		__sync_fetch_and_add(&node_nr_running[node & (MAX_NODES - 1)], delta);
}

static __always_inline void llc_running_add(s32 llc, s64 delta)
{
	if (llc >= 0 && llc < MAX_LLCS)
		__sync_fetch_and_add(&llc_nr_running[llc & (MAX_LLCS - 1)], delta);
}

/*
 * Runnable tasks per node averaged over ticks (x1024; each tick of a busy
 * CPU moves its node's average 1/8 of the way to the current count). Short
 * spikes (a kernel thread, a shell pipeline) barely move it, so overload
 * decisions, which may move any task, follow sustained load only; the
 * kernel uses PELT averages for the same reason.
 */
#define NODE_LOAD_SHIFT	10
s64 node_load_avg[MAX_NODES];

/*
 * Since when each node's average has been above its CPU count (0: it is
 * not). An overload that lasts numa_patience_ns lets other nodes take any
 * of its waiting tasks, whatever the rule says.
 */
u64 node_overloaded_since[MAX_NODES];

static __always_inline bool node_load_over(u32 n)
{
	n &= MAX_NODES - 1;
	return node_load_avg[n] > ((s64)node_nr_cpus[n] << NODE_LOAD_SHIFT);
}

static __always_inline void node_tick(s32 cpu)
{
	u64 now = bpf_ktime_get_ns();
	s64 run, avg;
	u32 n;

	if (!valid_cpu(cpu))
		return;
	n = node_of(cpu) & (MAX_NODES - 1);
	run = node_nr_running[n];
	avg = node_load_avg[n];
	/* Racy read-modify-write from the node's CPUs: a lost update is harmless. */
	node_load_avg[n] = avg + (((run << NODE_LOAD_SHIFT) - avg) >> 3);
	if (!node_load_over(n))
		node_overloaded_since[n] = 0;
	else if (!node_overloaded_since[n])
		node_overloaded_since[n] = now;
}

static __always_inline bool node_overloaded_long(u32 node)
{
	u64 since = node_overloaded_since[node & (MAX_NODES - 1)];

	return since && bpf_ktime_get_ns() - since >= numa_patience_ns;
}

/* Note the node the task is on: restart its time there when it changed. */
static __always_inline void node_arrive(struct task_ctx *tctx, s32 node)
{
	if (tctx->home < 0)
		tctx->home = node;	/* not placed by fork: first node seen */
	if (tctx->last_node != node) {
		tctx->last_node = node;
		tctx->node_since = bpf_ktime_get_ns();
	}
}

/*
 * The task became runnable on @cpu: count it on that CPU's node. Kernel
 * threads are not counted: they run in short bursts and mostly cannot move,
 * so counting them would make every node look overloaded at random (the
 * kernel's PELT load hardly sees them either).
 */
static __always_inline void node_runnable(struct task_struct *p, struct task_ctx *tctx, s32 cpu)
{
	if (tctx->rq_node >= 0 || !valid_cpu(cpu) || (p->flags & PF_KTHREAD))
		return;
	tctx->rq_node = node_of(cpu);
	tctx->rq_llc = llc_of(cpu);
	node_running_add(tctx->rq_node, 1);
	llc_running_add(tctx->rq_llc, 1);
	node_arrive(tctx, tctx->rq_node);
}

/* The task runs on @cpu: if that is another LLC or node, move its count. */
static __always_inline void node_moved(struct task_ctx *tctx, s32 cpu)
{
	s32 node, llc;

	if (tctx->rq_node < 0 || !valid_cpu(cpu))
		return;
	llc = llc_of(cpu);
	if (llc != tctx->rq_llc) {
		llc_running_add(tctx->rq_llc, -1);
		llc_running_add(llc, 1);
		tctx->rq_llc = llc;
	}
	node = node_of(cpu);
	if (node == tctx->rq_node)
		return;
	node_running_add(tctx->rq_node, -1);
	node_running_add(node, 1);
	tctx->rq_node = node;
	node_arrive(tctx, node);
}

/* The task stopped being runnable (slept, exited, left the scheduler). */
static __always_inline void node_quiescent(struct task_ctx *tctx)
{
	if (tctx->rq_node < 0)
		return;
	node_running_add(tctx->rq_node, -1);
	llc_running_add(tctx->rq_llc, -1);
	tctx->rq_node = -1;
}

#endif /* __NIMBLE_NUMA_BPF_H */
