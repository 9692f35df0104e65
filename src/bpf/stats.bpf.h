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

/* Shared wakequeue counters per LLC (enum llc_stat), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_LLCS);
	__type(key, u32);
	__type(value, struct llc_stats);
} llc_stats SEC(".maps");

/* swq wait-time histograms per LLC; shared, updated atomically. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_LLCS);
	__type(key, u32);
	__type(value, struct swq_hist);
} swq_hist SEC(".maps");

/* Tasks in each LLC's swq now (exact: +1 on insert, -1 on run or drop). */
s64 swq_depth[MAX_LLCS];

static __always_inline void lstat_add(u32 llc, enum llc_stat idx, u64 v)
{
	struct llc_stats *s = bpf_map_lookup_elem(&llc_stats, &llc);

	if (s && idx < NR_LLC_STATS)
		s->cnt[idx] += v;
}

/* Histogram bucket of a wait of @ns (layout in intf.h, struct swq_hist). */
static __always_inline u32 swq_hist_bucket(u64 ns)
{
	u32 m, b;

	if (ns < 4)
		return ns;
	m = 63 - __builtin_clzll(ns);
	b = 4 * (m - 1) + ((ns >> (m - 2)) & 3);
	return b < SWQ_HIST_BUCKETS ? b : SWQ_HIST_BUCKETS - 1;
}

static __always_inline void swq_record_wait(u32 llc, u64 ns)
{
	struct swq_hist *h = bpf_map_lookup_elem(&swq_hist, &llc);
	u32 b = swq_hist_bucket(ns);

	if (h && b < SWQ_HIST_BUCKETS)
		__sync_fetch_and_add(&h->bucket[b], 1);
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
	if (tctx->path == PATH_SWQ)
		__sync_fetch_and_sub(&swq_depth[tctx->queued_llc & (MAX_LLCS - 1)], 1);
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
	if (path == PATH_SWQ)
		__sync_fetch_and_add(&swq_depth[llc & (MAX_LLCS - 1)], 1);
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

	if (tctx->path == PATH_SWQ) {
		llc &= MAX_LLCS - 1;
		__sync_fetch_and_sub(&swq_depth[llc], 1);
		swq_record_wait(llc, bpf_ktime_get_ns() - tctx->queued_at);
		lstat_add(llc, LSTAT_PULL, 1);
		if (!valid_cpu(cpu) || llc_of(cpu) != llc)
			lstat_add(llc, LSTAT_PULL_XLLC, 1);
		idx = STAT_RUN_SWQ;
	} else if (tctx->path == PATH_DIRECT)
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
