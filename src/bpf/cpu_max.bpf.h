/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cpu.max: a cgroup's CPU time per period, as the kernel's CFS bandwidth
 * control gives it (quota, period, burst), hierarchically.
 *
 *   - Each limited cgroup has an entry in bws[]: its budget for the
 *     period. What a task of it (or of a cgroup below it) runs is charged
 *     to every limited cgroup above it at each tick and when it stops
 *     (the kernel charges the cfs_rq at update_curr(), every tick too).
 *   - A budget that runs out throttles the cgroup: its running tasks end
 *     their slice at the tick and dispatch does not keep them (the
 *     scheduler loads with SCX_OPS_ENQ_LAST, so even a CPU's last task
 *     comes back to ops.enqueue), and each task of it that is queued goes to
 *     the cgroup's park DSQ instead of a CPU's or LLC's queue, out of the
 *     node and LLC counts the balance and the NUMA rule read, and out of
 *     its parent's cgroup weight (the kernel dequeues a throttled cfs_rq).
 *   - A timer adds the quota each period (debt first: run time past the
 *     budget, up to a tick per CPU, is paid from the next period, so over
 *     periods the limit is exact), up to quota + burst; the tasks parked
 *     on a cgroup back above zero go to an idle CPU, or their last one
 *     (bw_release()); one that a cgroup above or below still holds moves
 *     to that cgroup's park DSQ.
 *
 * Tasks of a cgroup without a limit of its own or above pay one flag test
 * per tick and enqueue. The timer runs only while some cgroup has a limit.
 */
#ifndef __NIMBLE_CPU_MAX_BPF_H
#define __NIMBLE_CPU_MAX_BPF_H

#include "nimble.bpf.h"
#include "stats.bpf.h"
#include "numa.bpf.h"
#include "cgroup.bpf.h"

/* Park DSQs: above the per-CPU queues (CPU_DSQ_BASE + cpu). */
#define PARK_DSQ_BASE	(1ULL << 24)

/*
 * How often the timer refills budgets. Periods are 100 ms by default
 * (1 ms at least): a refill is late by up to this much, which delays the
 * throttled tasks, not the sum (refill_at advances by whole periods).
 */
#define BW_TIMER_NS	(2ULL * 1000 * 1000)

struct bw {
	u64 quota;	/* ns a period; 0: entry free or limit removed */
	u64 period;	/* ns */
	u64 burst;	/* ns of unused quota it may keep */
	s64 budget;	/* ns left this period; negative: debt */
	u64 refill_at;	/* start of the next period */
	u32 owner;	/* cgroup slot + 1, 0: free */
	u32 throttled;	/* tasks are parked */
};

struct bw bws[MAX_BW];
u32 bw_nr;		/* entries in use */
u32 bw_hi;		/* highest entry in use + 1: the timer looks below it */
s64 bw_over;		/* cpu.max writes that found no free entry, since load */
u32 bw_timer_on;

struct bw_timer {
	struct bpf_timer t;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct bw_timer);
} bw_timers SEC(".maps");

static __always_inline u64 park_dsq(u32 b)
{
	return PARK_DSQ_BASE + b;
}

static __always_inline struct bw *bw_of(s32 b)
{
	if (b < 0 || b >= MAX_BW)
		return NULL;
	return &bws[b & (MAX_BW - 1)];
}

static __always_inline void bw_timer_kick(void)
{
	struct bw_timer *t;
	u32 zero = 0;

	if (__sync_lock_test_and_set(&bw_timer_on, 1))
		return;
	t = bpf_map_lookup_elem(&bw_timers, &zero);
	if (t)
		bpf_timer_start(&t->t, BW_TIMER_NS, 0);
}

/*
 * Charge what @p ran since the last charge to every limited cgroup above
 * it. Returns whether one of them ran out (its tasks then stop at the next
 * chance). What it ran is the kernel's own count, p->se.sum_exec_runtime
 * (brought up to date before ops.tick and ops.stopping), the one cpu.stat
 * sums: differences of scx_bpf_now() between ops.running and ops.stopping
 * came out 3-25 % short of it under TCG, and the limit that much over.
 */
static __always_inline bool bw_charge(struct task_struct *p, struct task_ctx *tctx)
{
	u64 exec = p->se.sum_exec_runtime;
	s64 ran = (s64)(exec - tctx->bw_exec);
	bool out = false;
	struct cg_ctx *c;
	struct bw *b;
	s32 slot = tctx->cg;
	u32 i;

	if (!tctx->cg_bw || !bw_nr || ran <= 0)
		return false;
	tctx->bw_exec = exec;
	bpf_for(i, 0, MAX_CG_DEPTH) {
		c = cg_ctx(slot);
		if (!c)
			break;
		b = bw_of(c->bw);
		if (b && b->quota && __sync_sub_and_fetch(&b->budget, ran) <= 0) {
			WRITE_ONCE(b->throttled, 1);
			out = true;
		}
		slot = c->parent;
	}
	return out;
}

/* The nearest throttled cgroup above @slot: its bws[] entry, or -1. */
static __always_inline s32 bw_throttled_above(s32 slot)
{
	struct cg_ctx *c;
	struct bw *b;
	u32 i;

	bpf_for(i, 0, MAX_CG_DEPTH) {
		c = cg_ctx(slot);
		if (!c)
			break;
		b = bw_of(c->bw);
		if (b && b->quota && READ_ONCE(b->budget) <= 0)
			return c->bw;
		slot = c->parent;
	}
	return -1;
}

/* A parked task leaves its park DSQ: back in the counts. */
static __always_inline void bw_unpark(struct task_struct *p, struct task_ctx *tctx)
{
	if (!tctx->bw_parked)
		return;
	tctx->bw_parked = 0;
	cg_runnable(p, tctx);
	tctx->eff_w = cg_task_weight(p, tctx);
	node_runnable(p, tctx, llc_of(scx_bpf_task_cpu(p)));
}

/*
 * ops.enqueue: park @p if a cgroup above it is throttled (true), else put
 * a task that was parked back in the counts (false: enqueue goes on).
 */
static __always_inline bool bw_park(struct task_struct *p, struct task_ctx *tctx)
{
	s32 b = -1;

	if (bw_nr && (tctx->cg_bw || tctx->bw_parked))
		b = bw_throttled_above(tctx->cg);
	if (b < 0) {
		bw_unpark(p, tctx);
		return false;
	}
	if (!tctx->bw_parked) {
		tctx->bw_parked = 1;
		node_quiescent(tctx);
		cg_quiescent(tctx);
	}
	path_drop(tctx);
	stat_inc(STAT_BW_PARK);
	scx_bpf_dsq_insert(p, park_dsq(b), slice_ns, 0);
	return true;
}

/* Whether a cgroup above the task is out of quota (its slice must end). */
static __always_inline bool bw_throttled(const struct task_ctx *tctx)
{
	return bw_nr && tctx->cg_bw && bw_throttled_above(tctx->cg) >= 0;
}

/* ops.tick: a task whose cgroup ran out stops now. */
static __always_inline void bw_tick(struct task_struct *p)
{
	struct task_ctx *tctx;

	if (!bw_nr)
		return;
	tctx = lookup_task_ctx(p);
	if (tctx && bw_charge(p, tctx))
		p->scx.slice = 0;
}

/*
 * The tasks parked on entry @i whose cgroups all have quota again go to an
 * idle CPU they may use (else their last one, whose next dispatch runs
 * them, or, with SCX_OPS_ALWAYS_ENQ_IMMED, ops.enqueue re-queues them);
 * one that another cgroup above or below still holds moves to that one's
 * park DSQ, whose refill releases it. From the timer:
 * scx_bpf_dsq_move() may be called where no rq is locked.
 */
static __always_inline void bw_release(u32 i)
{
	struct task_struct *p;
	struct task_ctx *tctx;
	s32 cpu, j;

	bpf_rcu_read_lock();	/* the iterator needs it (cgroup_init/exit paths) */
	bpf_for_each(scx_dsq, p, park_dsq(i), 0) {
		tctx = lookup_task_ctx(p);
		if (!tctx)
			continue;
		j = bw_throttled_above(tctx->cg);
		if (j >= 0) {
			if (j != (s32)i)
				scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, park_dsq(j), 0);
			continue;
		}
		cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
		if (cpu < 0)
			cpu = scx_bpf_task_cpu(p);
		bw_unpark(p, tctx);
		path_queue(tctx, PATH_DIRECT, 0, STAT_INS_DIRECT);
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL_ON | cpu, 0))
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	}
	bpf_rcu_read_unlock();
}

/* Refill each budget whose period ended; release what waited for it. */
static int bw_refill(void *map, int *key, struct bpf_timer *timer)
{
	u64 now = bpf_ktime_get_ns(), n, add;
	u32 i, hi = bw_hi;
	struct bw *b;
	s64 cap, cur;

	bpf_for(i, 0, MAX_BW) {
		if (i >= hi)
			break;
		b = bw_of(i);
		if (!b || !b->owner || !b->quota || !b->period || now < b->refill_at)
			continue;
		n = (now - b->refill_at) / b->period + 1;
		b->refill_at += n * b->period;
		cap = (s64)(b->quota + b->burst);
		cur = READ_ONCE(b->budget);
		add = n * b->quota;
		if (cur + (s64)add > cap)
			add = cap > cur ? cap - cur : 0;
		cur = __sync_add_and_fetch(&b->budget, add);
		if (cur > 0 && READ_ONCE(b->throttled)) {
			WRITE_ONCE(b->throttled, 0);
			bw_release(i);
		}
	}
	if (READ_ONCE(bw_nr))
		bpf_timer_start(timer, BW_TIMER_NS, 0);
	else
		WRITE_ONCE(bw_timer_on, 0);
	return 0;
}

/* ops.init: the park DSQs and the timer (started when a limit is set). */
static __always_inline s32 bw_init(void)
{
	struct bw_timer *t;
	u32 zero = 0, i;
	s32 err;

	bpf_for(i, 0, MAX_BW) {
		err = scx_bpf_create_dsq(park_dsq(i), -1);
		if (err) {
			scx_bpf_error("failed to create park DSQ %u: %d", i, err);
			return err;
		}
	}
	t = bpf_map_lookup_elem(&bw_timers, &zero);
	if (!t)
		return -ENOENT;
	bpf_timer_init(&t->t, &bw_timers, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&t->t, bw_refill);
	return 0;
}

/* Drop @c's limit: its parked tasks go back through ops.enqueue. */
static __always_inline void bw_drop(struct cg_ctx *c)
{
	struct bw *b = bw_of(c->bw);
	s32 i = c->bw;

	if (!b)
		return;
	c->bw = -1;
	b->quota = 0;
	b->throttled = 0;
	b->owner = 0;
	__sync_fetch_and_add(&bw_nr, -1);
	__sync_fetch_and_add(&cg_gen, 1);	/* tasks below re-read bw_h */
	bw_release(i);
}

/*
 * cpu.max written (ops.cgroup_set_bandwidth), or found at cgroup_init: a
 * quota of RUNTIME_INF (all ones) removes the limit.
 */
static __always_inline void bw_set(struct cgroup *cgrp, u64 period_us, u64 quota_us, u64 burst_us)
{
	s32 slot = cg_own_slot(cgrp), at = -1;
	struct cg_ctx *c = cg_ctx(slot);
	struct bw *b;
	u32 i;

	if (!c)
		return;
	if (quota_us == (u64)-1 || !quota_us || !period_us) {
		bw_drop(c);
		return;
	}
	b = bw_of(c->bw);
	if (!b) {
		bpf_for(i, 0, MAX_BW) {
			b = bw_of(i);
			if (b && __sync_bool_compare_and_swap(&b->owner, 0, (u32)slot + 1)) {
				at = i;
				break;
			}
		}
		b = bw_of(at);
		if (!b) {
			__sync_fetch_and_add(&bw_over, 1);
			return;
		}
		b->budget = (s64)(quota_us * 1000);
		b->refill_at = bpf_ktime_get_ns() + period_us * 1000;
		b->throttled = 0;
		c->bw = at;
		if (at + 1 > (s32)bw_hi)
			bw_hi = at + 1;
		__sync_fetch_and_add(&bw_nr, 1);
		__sync_fetch_and_add(&cg_gen, 1);	/* tasks below learn bw_h */
	}
	b->period = period_us * 1000;
	b->burst = burst_us == (u64)-1 ? 0 : burst_us * 1000;
	b->quota = quota_us * 1000;
	if (b->budget > (s64)(b->quota + b->burst))
		b->budget = b->quota + b->burst;
	bw_timer_kick();
}

/* The cgroup is gone: its limit too. */
static __always_inline void bw_removed(struct cgroup *cgrp)
{
	struct cg_ctx *c = cg_ctx(cg_own_slot(cgrp));

	if (c)
		bw_drop(c);
}

#endif /* __NIMBLE_CPU_MAX_BPF_H */
