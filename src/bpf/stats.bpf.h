/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Event counters (per CPU, summed by userspace) and the queue-path accounting
 * that makes every queued task count exactly once when it leaves its queue.
 */
#ifndef __NIMBLE_STATS_BPF_H
#define __NIMBLE_STATS_BPF_H

#include "nimble.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct nimble_stats);
} stats SEC(".maps");

/* NUMA counters per node (enum node_stat), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_NODES);
	__type(key, u32);
	__type(value, struct node_stats);
} node_stats SEC(".maps");

static __always_inline void nstat_inc(u32 node, enum node_stat idx)
{
	struct node_stats *s = bpf_map_lookup_elem(&node_stats, &node);

	if (s && idx < NR_NODE_STATS)
		s->cnt[idx]++;
}

/* Tasks queued by us that have neither run nor been dropped yet. */
u64 nr_pending;

static __always_inline void stat_inc(enum nimble_stat idx)
{
	u32 zero = 0;
	struct nimble_stats *s = bpf_map_lookup_elem(&stats, &zero);

	if (s && idx < NR_NIMBLE_STATS)
		s->cnt[idx]++;
}

/* The task left its queue without running (or is about to be re-queued). */
static __always_inline void path_drop(struct task_ctx *tctx)
{
	if (tctx->path == PATH_NONE)
		return;
	tctx->path = PATH_NONE;
	stat_inc(STAT_DROPPED);
	__sync_fetch_and_sub(&nr_pending, 1);
}

/* Record that the task was just inserted into a queue via @path. */
static __always_inline void path_queue(struct task_ctx *tctx, u32 path, u32 llc,
				       enum nimble_stat ins)
{
	/* A task queued again before it ran was dequeued behind our back. */
	path_drop(tctx);
	tctx->path = path;
	tctx->queued_llc = llc;
	stat_inc(ins);
	__sync_fetch_and_add(&nr_pending, 1);
}

/* The task starts running on @cpu: attribute it to the path that got it there. */
static __always_inline void path_run(struct task_ctx *tctx, s32 cpu)
{
	enum nimble_stat idx;
	u32 llc = tctx->queued_llc;

	if (tctx->path == PATH_NONE)
		return;	/* kept running, or queued by the kernel itself */

	if (tctx->path == PATH_DIRECT)
		idx = STAT_RUN_DIRECT;
	else if (tctx->path == PATH_LOCAL)
		idx = STAT_RUN_LOCAL;
	else if (!valid_cpu(cpu) || llc >= MAX_LLCS)
		idx = STAT_DROPPED;	/* cannot happen; keeps the sum exact */
	else if (llc_of(cpu) == llc)
		idx = STAT_RUN_LLC_OWN;
	else if (node_of(cpu) == node_of_llc(llc))
		idx = STAT_RUN_LLC_NODE;
	else
		idx = STAT_RUN_LLC_REMOTE;

	stat_inc(idx);
	tctx->path = PATH_NONE;
	__sync_fetch_and_sub(&nr_pending, 1);
}

#endif /* __NIMBLE_STATS_BPF_H */
