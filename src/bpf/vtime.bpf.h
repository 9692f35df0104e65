/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Deadlines: the key that orders an LLC DSQ and a CPU's own queue, the
 * request behind them, and the slice a task is given. Wakeup preemption
 * compares them in preempt.bpf.h.
 *
 * A task's deadline is a point in real time (now_ns(), sched_clock: the
 * same on every CPU). Every ns it runs moves its finish time by
 * load / (weight * CPUs) ns; queued, a CPU-bound task (HOG_SLICES) may
 * start at that finish time or now, whichever is later, any other now, and
 * its deadline is one request further:
 *
 *   finish  += ran * load / (weight * CPUs)
 *   deadline = start + request / weight              (nice 0: request)
 *
 * where load is the summed weight of the LLC's runnable tasks. A task with
 * weight w among load W on n CPUs is owed w/W of n CPUs, so each ns it
 * runs is worth W / (w * n) ns of real time: starting CPU-bound tasks at
 * their finish time shares the LLC by weight (Zhang's VirtualClock; EEVDF's
 * virtual deadline, vruntime + request / weight, in real time). The
 * request term is not stretched by the load: a task queued while the LLC
 * is crowded would otherwise wait behind every task queued for the next
 * ~100 ms, which cost hackbench more than the old core's arrival order.
 *
 * Where the ideas come from (README, "The core policy"):
 *   virtual deadline = start + request / share  EEVDF (kernel/sched/fair.c),
 *                                               VirtualClock
 *   request = recent burst, within              scx_cosmos's exec_runtime,
 *   [req_min_ns, slice]                         scx_bpfland's deadline
 *   start = max(now, finish), sleepers now      the lag clamp: EEVDF's
 *                                               place_entity() keeps no
 *                                               credit for sleeping; a hog
 *                                               cannot bank (1 s cap)
 *   slice shrinks with the queue                scx_lavd
 * The old core's vtime ordering kept one global clock that raced ahead, so
 * in practice it queued in arrival order (fast on hackbench, flat on nice
 * weights); an LLC clock in vtime units (tried first) kept weights but
 * cost hackbench 2-3x in the VM. Real time needs no clock of our own, no
 * lag carried between LLCs, and no shared write on the hot path.
 */
#ifndef __NIMBLE_VTIME_BPF_H
#define __NIMBLE_VTIME_BPF_H

#include "nimble.bpf.h"
#include "stats.bpf.h"
#include "rules.h"

/*
 * What the task asks for: the CPU time it uses per wakeup (its recent
 * average or, if longer, what it has used since it last woke), between
 * req_min_ns and the full slice. Short sleepers get early deadlines, CPU
 * hogs the full slice's.
 */
static __always_inline u64 task_request(const struct task_ctx *tctx)
{
	u64 r = tctx->burst > tctx->exec ? tctx->burst : tctx->exec;

	if (r < req_min_ns)
		return req_min_ns;
	return r < slice_ns ? r : slice_ns;
}

/* @ran ns since it last slept: count its slices' worth (HOG_SLICES). */
static __always_inline void count_slices(struct task_ctx *tctx, u64 ran)
{
	u64 n = slice_ns ? ran / slice_ns : 0;

	tctx->full_slices = n < HOG_SLICES ? n : HOG_SLICES;
}

/* How far past its start a task's deadline lies: its request at its weight. */
static __always_inline u64 request_span(const struct task_struct *p, const struct task_ctx *tctx)
{
	return task_request(tctx) * NICE0_WEIGHT / tctx_weight(p, tctx);
}

/*
 * The load the clock stretches by: llc.load averaged over LOAD_AVG_NS,
 * sampled from ops.tick. The load at the moment a slice ends is not what
 * the slice shared the LLC with: a nice -20 shell running for a ms is 87
 * nice-0 loops then, and loops whose slices ended meanwhile were charged
 * as if they had run among them; their finish times hit the max_wait_ns
 * cap, deadlines stopped ordering, and nice 0 got 1.2x nice 6's CPU in the
 * LLC where scx_nimble itself (nice -20 in the tests) ran, 4x in the
 * other. Averaged, a short sleeper weighs what it uses, as in the
 * kernel's PELT (32 ms half-life).
 */
#define LOAD_AVG_NS	(32ULL * 1000 * 1000)

static __always_inline void llc_load_tick(s32 cpu)
{
	struct llc_ctx *l = llc_ctx(llc_of(cpu));
	u64 now = now_ns(), dt = clock_since(now, l->avg_at);
	s64 cur = l->load, avg = l->load_avg;

	/* The LLC's CPUs all tick: one update a ms is enough. */
	if (dt < 1000 * 1000)
		return;
	l->avg_at = now;
	if (dt >= LOAD_AVG_NS)
		avg = cur;	/* idle (no ticks) or new: start over */
	else
		avg += (cur - avg) * (s64)dt / (s64)LOAD_AVG_NS;
	l->load_avg = avg;	/* racy between the LLC's CPUs: a lost update is harmless */
}

/*
 * @p's share of @llc as a stretch factor: @ns of its CPU time stands for
 * ns * load / (weight * CPUs) of real time, load averaged as above. Fewer
 * tasks than CPUs: each may have a whole CPU.
 */
static __always_inline u64 stretch(const struct task_struct *p, const struct task_ctx *tctx,
				   u32 llc, u64 ns)
{
	u64 n = llc_cap(llc), w = tctx_weight(p, tctx);
	s64 load = llc_ctx(llc)->load_avg;

	if (!n)
		n = 1;
	/*
	 * No more than a whole CPU: the floor is the task's own weight on
	 * every CPU. A nice-0 floor overstated the load of tasks lighter than
	 * nice 0 (a cgroup of weight 100 splits 100 among its tasks), finish
	 * times ran ahead to the 1 s cap and deadlines stopped ordering.
	 */
	if (load < (s64)(w * n))
		load = w * n;
	/* The result is capped at max_wait_ns anyway; keep ns * load in range. */
	if (ns > max_wait_ns)
		ns = max_wait_ns;
	return ns * load / (w * n);
}

/* One request (at its weight) past @start, no further than its max wait past @now. */
static __always_inline u64 deadline_from(struct task_struct *p, struct task_ctx *tctx,
					 u64 start, u64 now)
{
	u64 dl = start + request_span(p, tctx), cap = now + task_max_wait(p, tctx);

	return time_after(dl, cap) ? cap : dl;
}

/*
 * The key to queue @p with on its LLC's DSQ: a CPU-bound task may start at
 * its finish time (the CPU time it used, stretched) or now, whichever is
 * later, any other now (ordering frequent sleepers by what they used made
 * hackbench 2-3x slower in the VM); its deadline is one request (at its
 * weight) further, no further ahead than max_wait_ns, so a nice-19 task
 * among many is never starved into the sched_ext watchdog.
 */
static __always_inline u64 task_deadline(struct task_struct *p, struct task_ctx *tctx,
					 bool requeue)
{
	u64 now = now_ns(), start = now, dl;

	/*
	 * Queued again before it ran (a renice, a cgroup or affinity change
	 * while it waited): it keeps its place, at its new weight. Started
	 * anew, a loop reniced every 30 ms lost its wait each time and got
	 * 13 % less CPU (weights_churn.sh); EEVDF keeps the lag too.
	 */
	if (requeue && tctx->vstart)
		start = tctx->vstart;
	else if (tctx->full_slices >= HOG_SLICES && time_after(tctx->vfin, now))
		start = tctx->vfin;
	else if (tctx->vfin && clock_since(now, tctx->vfin) > slice_ns)
		stat_inc(STAT_LAG_CLAMP);	/* came back long after: no credit */
	dl = deadline_from(p, tctx, start, now);
	tctx->vstart = start;
	tctx->deadline = dl;
	return dl;
}

/*
 * @p's finish time if it stopped on @cpu @now: moved by the time it ran
 * since run_start, stretched by its share of the LLC (charged for what it
 * used, not what it asked), at most max_wait_ns ahead of now.
 */
static __always_inline u64 finish_after(struct task_struct *p, struct task_ctx *tctx,
					s32 cpu, u64 now)
{
	u64 fin = tctx->vfin, cap = now + task_max_wait(p, tctx);

	if (time_before(fin, tctx->vstart))
		fin = tctx->vstart;
	fin += stretch(p, tctx, llc_of(cpu), clock_since(now, tctx->run_start));
	return time_after(fin, cap) ? cap : fin;
}

/*
 * The deadline the running CPU-bound @p would queue with if its slice ended
 * @now: deadline_charge() then task_deadline(), computed without writing.
 * Dispatch compares it with the heads of the queues (keep_first()).
 */
static __always_inline u64 deadline_if_requeued(struct task_struct *p, struct task_ctx *tctx,
					       s32 cpu, u64 now)
{
	u64 fin = finish_after(p, tctx, cpu, now);

	return deadline_from(p, tctx, time_after(fin, now) ? fin : now, now);
}

/* @p stopped on @cpu at @now: its finish time moves (finish_after()). */
static __always_inline void deadline_charge(struct task_struct *p, struct task_ctx *tctx,
					    s32 cpu, u64 now)
{
	tctx->vfin = finish_after(p, tctx, cpu, now);
	tctx->exec += clock_since(now, tctx->run_start);
	count_slices(tctx, tctx->exec);
}

/* The task woke: fold what it ran since the last wakeup into its burst. */
static __always_inline void deadline_woke(struct task_ctx *tctx)
{
	tctx->burst = (tctx->burst * 3 + tctx->exec) / 4;
	tctx->exec = 0;
}

/*
 * The slice @p is queued with: a full one, except after an attribute change
 * (a renice, a cgroup or affinity change: neither a wakeup nor a hand-back,
 * and some slice left), which keeps what is left: refilled, a running task
 * reniced every few ms would never reach the end of its slice.
 */
static __always_inline u64 enq_slice(const struct task_struct *p, u64 enq_flags)
{
	u64 s = p->scx.slice;

	if (enq_flags & (SCX_ENQ_WAKEUP | SCX_ENQ_REENQ) || !s || s > slice_ns)
		return slice_ns;
	return s;
}

/*
 * The slice @p starts with on @cpu: what it was given, shrunk as its LLC's
 * queue grows past the LLC's CPUs, so a long queue turns over
 * quickly; never below slice_min_ns.
 */
static __always_inline void scale_slice(struct task_struct *p, s32 cpu)
{
	u32 llc = llc_of(cpu);
	u64 n = llc_nr_cpus[llc & (MAX_LLCS - 1)], s = p->scx.slice;
	s64 q;

	/* Off (the default: --slice-min-us = the slice): no queue lookup. */
	if (!n || s <= slice_min_ns || s == SCX_SLICE_INF)
		return;
	/*
	 * What waits in the LLC: its DSQ (id = LLC id) and its CPUs' own
	 * queues, where wakeups that found no idle CPU wait (the DSQ alone
	 * missed most of the queue since those came in).
	 */
	q = scx_bpf_dsq_nr_queued(llc) + READ_ONCE(llc_ctx(llc)->cpuq_nr);
	s = s * n / (n + (q > 0 ? q : 0));
	if (s < slice_min_ns)
		s = slice_min_ns;
	p->scx.slice = s;
	stat_add(STAT_SLICE_NS, s);
	stat_inc(STAT_SLICES);
}

#endif /* __NIMBLE_VTIME_BPF_H */
