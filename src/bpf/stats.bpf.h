/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Event counters (per CPU, summed by userspace) and the queue-path accounting
 * that makes every queued task count exactly once when it leaves its queue.
 */
#ifndef __NIMBLE_STATS_BPF_H
#define __NIMBLE_STATS_BPF_H

#include "nimble.bpf.h"
#include "rules.h"

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

/* Queue-wait histograms, two per LLC (enum wait_queue), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_LLCS * NR_WAIT_QUEUES);
	__type(key, u32);
	__type(value, struct wait_hist);
} wait_hist SEC(".maps");

/*
 * Tasks in each LLC's swq now (exact: +1 on insert, -1 on run or drop); read
 * by every dispatch, so kept where it is read. The LLC DSQs' depth is in
 * llc_stats (LSTAT_LLC_IN - LSTAT_LLC_OUT), per CPU.
 */
s64 swq_depth[MAX_LLCS];

static __always_inline void lstat_add(u32 llc, enum llc_stat idx, u64 v)
{
	struct llc_stats *s = bpf_map_lookup_elem(&llc_stats, &llc);

	if (s && idx < NR_LLC_STATS)
		s->cnt[idx] += v;
}

static __always_inline void record_wait(u32 llc, enum wait_queue q, u64 ns)
{
	u32 key = llc * NR_WAIT_QUEUES + q;
	struct wait_hist *h = bpf_map_lookup_elem(&wait_hist, &key);
	u32 b = wait_hist_bucket(ns);

	if (h && b < WAIT_HIST_BUCKETS)
		h->bucket[b]++;
}

/*
 * Tasks queued by us that have neither run nor been dropped yet: +1 and -1
 * on whichever CPU queues or runs them; userspace sums the CPUs.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, s64);
} pending SEC(".maps");

static __always_inline void pending_add(s64 v)
{
	u32 zero = 0;
	s64 *n = bpf_map_lookup_elem(&pending, &zero);

	if (n)
		*n += v;
}

/* A task entered (+1) or left (-1) the queue behind @path at @llc. */
static __always_inline void queue_depth_add(u32 path, u32 llc, s64 v)
{
	llc &= MAX_LLCS - 1;
	if (path == PATH_SWQ)
		__sync_fetch_and_add(&swq_depth[llc], v);
	else if (path == PATH_LLC)
		lstat_add(llc, v > 0 ? LSTAT_LLC_IN : LSTAT_LLC_OUT, 1);
}

static __always_inline void stat_add(enum nimble_stat idx, u64 v)
{
	u32 zero = 0;
	struct nimble_stats *s = bpf_map_lookup_elem(&stats, &zero);

	if (s && idx < NR_NIMBLE_STATS)
		s->cnt[idx] += v;
}

static __always_inline void stat_inc(enum nimble_stat idx)
{
	stat_add(idx, 1);
}

/* A remote steal, by the NUMA tier between the two nodes. */
static __always_inline void count_steal_distance(u32 to, u32 from)
{
	u32 level = node_level[to & (MAX_NODES - 1)][from & (MAX_NODES - 1)];

	if (level <= 1)
		stat_inc(STAT_STEAL_L1);
	else if (level == 2)
		stat_inc(STAT_STEAL_L2);
	else
		stat_inc(STAT_STEAL_FAR);
}

/* The task starts running on @cpu: count it if it moved since last time. */
static __always_inline void count_migration(struct task_ctx *tctx, s32 cpu)
{
	s32 last = tctx->last_cpu;

	tctx->last_cpu = cpu;
	if (last < 0 || last == cpu || !valid_cpu(cpu) || !valid_cpu(last))
		return;
	stat_inc(STAT_MIGRATE);
	if (llc_of(last) == llc_of(cpu))
		return;
	stat_inc(STAT_MIGRATE_LLC);
	if (node_of(last) != node_of(cpu))
		stat_inc(STAT_MIGRATE_NODE);
}

/* The task left its queue without running (or is about to be re-queued). */
static __always_inline void path_drop(struct task_ctx *tctx)
{
	if (tctx->path == PATH_NONE)
		return;
	queue_depth_add(tctx->path, tctx->queued_llc, -1);
	tctx->path = PATH_NONE;
	stat_inc(STAT_DROPPED);
	pending_add(-1);
}

/* Record that the task was just inserted into a queue via @path. */
static __always_inline void path_queue(struct task_ctx *tctx, u32 path, u32 llc,
				       enum nimble_stat ins)
{
	/* A task queued again before it ran was dequeued behind our back. */
	path_drop(tctx);
	tctx->path = path;
	tctx->queued_llc = llc;
	queue_depth_add(path, llc, 1);
	stat_inc(ins);
	pending_add(1);
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
		queue_depth_add(PATH_SWQ, llc, -1);
		record_wait(llc, WAIT_SWQ, clock_since(now_ns(), tctx->queued_at));
		lstat_add(llc, LSTAT_PULL, 1);
		if (!valid_cpu(cpu) || llc_of(cpu) != llc)
			lstat_add(llc, LSTAT_PULL_XLLC, 1);
		idx = STAT_RUN_SWQ;
	} else if (tctx->path == PATH_DIRECT)
		idx = STAT_RUN_DIRECT;
	else if (tctx->path == PATH_LOCAL)
		idx = STAT_RUN_LOCAL;
	else {
		/* PATH_LLC: own LLC, a sibling LLC of the node, or another node */
		queue_depth_add(PATH_LLC, llc, -1);
		if (!valid_cpu(cpu) || llc >= MAX_LLCS) {
			idx = STAT_DROPPED;	/* cannot happen; keeps the sum exact */
		} else {
			record_wait(llc, WAIT_LLC, clock_since(now_ns(), tctx->queued_at));
			if (llc_of(cpu) == llc) {
				idx = STAT_RUN_LLC_OWN;
			} else if (node_of(cpu) == node_of_llc(llc)) {
				idx = STAT_RUN_LLC_NODE;
			} else {
				idx = STAT_RUN_LLC_REMOTE;
				count_steal_distance(node_of(cpu), node_of_llc(llc));
			}
		}
	}

	stat_inc(idx);
	tctx->path = PATH_NONE;
	pending_add(-1);
}

#endif /* __NIMBLE_STATS_BPF_H */
