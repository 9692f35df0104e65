/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-node load, the input of the NUMA imbalance rules: how many runnable
 * tasks each node has (kept exact with per-node atomics, no global lock) and
 * how many of its CPUs are idle (read from the idle mask when needed, so it
 * can never drift).
 */
#ifndef __NIMBLE_NUMA_BPF_H
#define __NIMBLE_NUMA_BPF_H

#include "nimble.bpf.h"
#include "topo.bpf.h"

/* Runnable tasks (running or queued) per node, by the CPU they are on. */
u64 node_nr_running[MAX_NODES];

static __always_inline void node_running_add(s32 node, s64 delta)
{
	if (node >= 0 && node < MAX_NODES)
		__sync_fetch_and_add(&node_nr_running[node & (MAX_NODES - 1)], delta);
}

/* The task became runnable on @cpu: count it on that CPU's node. */
static __always_inline void node_runnable(struct task_ctx *tctx, s32 cpu)
{
	if (tctx->rq_node >= 0 || !valid_cpu(cpu))
		return;
	tctx->rq_node = node_of(cpu);
	node_running_add(tctx->rq_node, 1);
}

/* The task runs on @cpu: if that is another node, move its count. */
static __always_inline void node_moved(struct task_ctx *tctx, s32 cpu)
{
	s32 node;

	if (tctx->rq_node < 0 || !valid_cpu(cpu))
		return;
	node = node_of(cpu);
	if (node == tctx->rq_node)
		return;
	node_running_add(tctx->rq_node, -1);
	node_running_add(node, 1);
	tctx->rq_node = node;
}

/* The task stopped being runnable (slept, exited, left the scheduler). */
static __always_inline void node_quiescent(struct task_ctx *tctx)
{
	if (tctx->rq_node < 0)
		return;
	node_running_add(tctx->rq_node, -1);
	tctx->rq_node = -1;
}

#endif /* __NIMBLE_NUMA_BPF_H */
