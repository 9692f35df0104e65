/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The per-LLC shared wakequeue (swq), after David Vernet's SHARED_RUNQ series
 * and seed 002: FIFO queues, one set of shards per LLC, that a CPU looking
 * for work takes from before it steals from other LLCs. Whichever CPU of the
 * LLC is free first runs the task, instead of the one the wakeup picked.
 *
 * The mode (nimble_ctl.swq_mode, switchable while running) says who enters:
 *   wakeups:  a wakeup that stays on its previous CPU, even when that CPU is
 *             idle (it is claimed and kicked, but any CPU may take the task);
 *   sis-fail: only a wakeup for which select_cpu found no idle CPU;
 *   all:      every enqueue.
 * A task that may run on one CPU only never enters. Pullers take the head
 * of a shard (v1) or, with swq_affinity, the first of SWQ_SCAN tasks they may
 * run (ego-2, bounded rather than a walk of the whole list under its lock).
 * Tasks left in the queues after a switch to off are still consumed.
 */
#ifndef __NIMBLE_SWQ_BPF_H
#define __NIMBLE_SWQ_BPF_H

#include "nimble.bpf.h"
#include "stats.bpf.h"
#include "llc_dsq.bpf.h"

/* swq DSQ ids: above the LLC DSQs (0..MAX_LLCS). */
#define SWQ_DSQ_BASE	(1ULL << 16)
/*
 * With swq_affinity, how many queued tasks a puller looks at for one it may
 * run. More finds work for CPUs with many restricted tasks ahead of them;
 * fewer bounds the time a dispatch holds the queue.
 */
#define SWQ_SCAN	8
/*
 * ops.tick kicks an idle CPU for a shard head that waited this long (the
 * enqueue kicked one already; this catches a CPU that went busy meanwhile).
 */
#define SWQ_STUCK_NS	(1000ULL * 1000)

/* Why select_cpu routed a task to the swq (task_ctx.swq_why). */
enum swq_why {
	SWQ_WHY_NONE,
	SWQ_WHY_WAKE_IDLE,	/* wakeup; an idle CPU was claimed */
	SWQ_WHY_WAKE_BUSY,	/* wakeup; no idle CPU */
	SWQ_WHY_FORK_IDLE,	/* fork (mode all); an idle CPU was claimed */
};

static __always_inline u64 swq_dsq(u32 llc, u32 shard)
{
	return SWQ_DSQ_BASE + llc * MAX_SWQ_SHARDS + shard;
}

static __always_inline u32 swq_mode(void)
{
	struct nimble_ctl *c = ctl();

	return c ? c->swq_mode : SWQ_OFF;
}

static __always_inline bool swq_affinity(void)
{
	struct nimble_ctl *c = ctl();

	return c && c->swq_affinity;
}

static __always_inline bool swq_busy(u32 llc)
{
	return swq_depth[llc & (MAX_LLCS - 1)] > 0;
}

static __always_inline s32 create_swqs(void)
{
	u32 llc, shard;
	s32 err;

	bpf_for(llc, 0, nr_llcs) {
		bpf_for(shard, 0, shards_of(llc)) {
			if (shard >= MAX_SWQ_SHARDS)
				break;
			err = scx_bpf_create_dsq(swq_dsq(llc, shard), node_of_llc(llc));
			if (err) {
				scx_bpf_error("failed to create swq %u/%u: %d", llc, shard, err);
				return err;
			}
		}
	}
	return 0;
}

/*
 * select_cpu: does this wakeup go through the swq? @cpu is the idle CPU the
 * pick claimed, or negative. Records why in @tctx for enqueue.
 */
static __always_inline bool swq_route(struct task_struct *p, struct task_ctx *tctx,
				      s32 prev, s32 cpu, u64 wake_flags)
{
	bool fork = wake_flags & SCX_WAKE_FORK, route = false;
	u32 mode = swq_mode();

	tctx->swq_why = SWQ_WHY_NONE;
	if (p->nr_cpus_allowed == 1)
		return false;
	if (mode == SWQ_WAKEUPS)
		route = !fork && (cpu < 0 || cpu == prev);	/* not migrated */
	else if (mode == SWQ_SIS_FAIL)
		route = !fork && cpu < 0;
	else if (mode == SWQ_ALL)
		route = true;
	if (!route)
		return false;
	if (fork)
		tctx->swq_why = cpu >= 0 ? SWQ_WHY_FORK_IDLE : SWQ_WHY_NONE;
	else
		tctx->swq_why = cpu >= 0 ? SWQ_WHY_WAKE_IDLE : SWQ_WHY_WAKE_BUSY;
	return true;
}

/*
 * A weighted slice (nice and cgroup share): FIFO order ignores vtime, so weight acts through
 * the slice (nice 0: slice_ns), within 1/4x..4x so neither a nice -20 task
 * holds a CPU for long nor a nice 19 one thrashes.
 */
static __always_inline u64 swq_slice(const struct task_struct *p, const struct task_ctx *tctx)
{
	u64 s = slice_ns * tctx_weight(p, tctx) / NICE0_WEIGHT;

	if (s < slice_ns / 4)
		return slice_ns / 4;
	if (s > slice_ns * 4)
		return slice_ns * 4;
	return s;
}

/*
 * enqueue: queue @p on its LLC's swq if select_cpu routed it (@why) or the
 * mode is all.
 */
static __always_inline bool swq_enqueue(struct task_struct *p, u64 enq_flags,
					struct task_ctx *tctx, u32 why)
{
	s32 cpu = scx_bpf_task_cpu(p);
	u32 llc, stat;

	if (p->nr_cpus_allowed == 1 || !valid_cpu(cpu))
		return false;
	if (why == SWQ_WHY_NONE && swq_mode() != SWQ_ALL)
		return false;

	llc = llc_of(cpu);
	if (why == SWQ_WHY_WAKE_IDLE)
		stat = LSTAT_ENQ_WAKE_IDLE;
	else if (why == SWQ_WHY_WAKE_BUSY)
		stat = LSTAT_ENQ_WAKE_BUSY;
	else
		stat = LSTAT_ENQ_OTHER;
	path_queue(tctx, PATH_SWQ, llc, STAT_INS_SWQ);
	tctx->queued_at = now_ns();
	scx_bpf_dsq_insert(p, swq_dsq(llc, shard_of(cpu)), swq_slice(p, tctx), enq_flags);
	lstat_add(llc, stat, 1);

	if (why == SWQ_WHY_WAKE_IDLE || why == SWQ_WHY_FORK_IDLE) {
		/* select_cpu claimed this idle CPU: wake it (another may be first). */
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		stat_inc(STAT_KICK);
	} else {
		kick_idle_cpu(p, cpu, tctx, false);
	}
	return true;
}

/* When the head of a queue was queued (U64_MAX: empty). */
static u64 queue_head_since(u64 dsq_id)
{
	struct task_struct *p;
	struct task_ctx *tctx;

	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		tctx = lookup_task_ctx(p);
		return tctx ? tctx->queued_at : 0;
	}
	return (u64)-1;
}

/* The first non-empty shard of @llc in @cpu's pull order, or -1. */
static __always_inline s32 first_shard(s32 cpu, u32 llc)
{
	u32 i, n = shards_of(llc), start = shard_of(cpu), s;

	bpf_for(i, 0, n) {
		s = (start + i) % n;
		if (scx_bpf_dsq_nr_queued(swq_dsq(llc, s)) > 0)
			return s;
	}
	return -1;
}

/*
 * Take a task for @cpu from one shard: the head, or the first of SWQ_SCAN it
 * may run. The time until the choice is made is the scan cost (the seed's
 * concern); moving the task to this CPU is charged to the pull.
 */
static bool swq_pull_shard(s32 cpu, u32 llc, u32 shard, bool affinity)
{
	struct task_struct *p;
	u32 seen = 0, skipped = 0;
	u64 t0 = bpf_ktime_get_ns(), scan = 0;
	bool got = false, chosen = false;

	bpf_for_each(scx_dsq, p, swq_dsq(llc, shard), 0) {
		seen++;
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
			skipped++;
		} else {
			scan = bpf_ktime_get_ns() - t0;
			chosen = true;
			if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
				got = true;
				break;
			}
		}
		if (!affinity || seen >= SWQ_SCAN)
			break;
	}
	if (!chosen)
		scan = bpf_ktime_get_ns() - t0;
	lstat_add(llc, LSTAT_SCANNED, seen);
	lstat_add(llc, LSTAT_SKIP_AFFINITY, skipped);
	lstat_add(llc, LSTAT_SCAN_NS, scan);
	return got;
}

/*
 * Take a task for @cpu from @llc's swq, shards in the CPU's order (its own
 * first). The time spent is recorded: the cost the seed measured.
 */
__noinline bool swq_pull(s32 cpu, u32 llc)
{
	u32 i, n = shards_of(llc), start = shard_of(cpu), s;
	bool affinity = swq_affinity(), got = false;
	u64 t0;

	bpf_for(i, 0, n) {
		s = (start + i) % n;
		if (scx_bpf_dsq_nr_queued(swq_dsq(llc, s)) <= 0)
			continue;
		t0 = bpf_ktime_get_ns();
		got = swq_pull_shard(cpu, llc, s, affinity);
		lstat_add(llc, LSTAT_PULL_TRIES, 1);
		lstat_add(llc, LSTAT_PULL_NS, bpf_ktime_get_ns() - t0);
		if (got)
			break;
	}
	return got;
}

/* When the head @cpu would reach first in @llc's swq was queued (U64_MAX: none). */
static __always_inline u64 swq_head_since(s32 cpu, u32 llc)
{
	s32 s = first_shard(cpu, llc);

	return s < 0 ? (u64)-1 : queue_head_since(swq_dsq(llc, s));
}

/* From ops.tick: kick an idle CPU for this CPU's shard head if it is stuck. */
static __always_inline void swq_kick_waiters(s32 cpu)
{
	struct task_struct *p;
	struct task_ctx *tctx;
	u64 waited, now = now_ns();
	u32 llc;

	if (!valid_cpu(cpu))
		return;
	llc = llc_of(cpu);
	if (!swq_busy(llc))
		return;
	bpf_for_each(scx_dsq, p, swq_dsq(llc, shard_of(cpu)), 0) {
		tctx = lookup_task_ctx(p);
		if (!tctx)
			break;
		waited = clock_since(now, tctx->queued_at);
		if (waited >= SWQ_STUCK_NS)
			kick_idle_cpu(p, cpu, tctx,
				      nr_nodes > 1 && waited >= numa_patience_ns);
		break;	/* the head only */
	}
}

#endif /* __NIMBLE_SWQ_BPF_H */
