/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Virtual time: per-LLC clocks, each task's lag carried between LLCs, the
 * virtual deadline that orders an LLC DSQ, the slice a task is given, and
 * wakeup preemption read from a per-CPU record of the running deadline.
 *
 * Where the ideas come from (README, "The core policy"):
 *   deadline = vtime + request / weight        EEVDF (kernel/sched/fair.c)
 *   request = recent burst, within the slice   scx_cosmos's exec_runtime,
 *                                              scx_bpfland's deadline
 *   lag clamped when a task wakes              place_entity(); the sleep
 *                                              credit of scx_bpfland/cosmos
 *   one clock per LLC, lag carried over        scx_p2dq's per-LLC vtime
 *   clock rate = CPU time / runnable weight    CFS/EEVDF's V, without the
 *                                              weighted average
 *   slice shrinks with the queue               scx_lavd, scx_flash
 */
#ifndef __NIMBLE_VTIME_BPF_H
#define __NIMBLE_VTIME_BPF_H

#include "nimble.bpf.h"
#include "stats.bpf.h"

/*
 * The deadline of the task running on each CPU (0: none of ours yet), on
 * the clock of the CPU's LLC. Written by the CPU itself when a task starts,
 * read by wakeups that consider preempting it. A cache line per CPU.
 */
struct cpu_cur {
	u64 deadline;
	u64 pad[7];
};
struct cpu_cur cpu_cur[MAX_CPUS];

static __always_inline u64 task_weight(const struct task_struct *p)
{
	return p->scx.weight ? p->scx.weight : 1;
}

/* @ns of CPU time in virtual time at @p's weight (nice 0: the same). */
static __always_inline u64 vcharge(const struct task_struct *p, u64 ns)
{
	return ns * 100 / task_weight(p);
}

/*
 * Put the task's vtime on @llc's clock: same distance to the clock (lag) as
 * it had on the LLC it comes from, so moving neither gains nor loses it CPU.
 */
static __always_inline void carry_lag(struct task_ctx *tctx, u32 llc)
{
	s32 from = tctx->vllc;

	if (from == llc)
		return;
	if (from >= 0 && from < MAX_LLCS)
		tctx->vtime = tctx->vtime - llc_ctx(from)->vclock + llc_ctx(llc)->vclock;
	else
		tctx->vtime = llc_ctx(llc)->vclock;
	tctx->vllc = llc;
}

/*
 * What the task asks for: the CPU time it uses per wakeup (its recent
 * average or, if longer, what it has used since it last woke), between the
 * shortest and the full slice. Short sleepers get early deadlines, CPU
 * hogs the full slice's.
 */
static __always_inline u64 task_request(const struct task_ctx *tctx)
{
	u64 r = tctx->burst > tctx->exec ? tctx->burst : tctx->exec;

	if (r < slice_min_ns)
		return slice_min_ns;
	return r < slice_ns ? r : slice_ns;
}

static __always_inline u64 deadline_of(const struct task_struct *p,
				       const struct task_ctx *tctx)
{
	return tctx->vtime + vcharge(p, task_request(tctx));
}

/*
 * The key to queue @p with on @llc's DSQ (@queued tasks there now): its
 * virtual deadline, after moving its vtime onto the LLC's clock and
 * clamping it.
 *  - A task that woke keeps at most vtime_credit_ns of CPU time as credit
 *    (lag): long sleepers do not come back owed seconds, hogs bank nothing.
 *  - No task is queued further ahead of the clock than it moves in
 *    max_wait_ns at this queue length: the watchdog bound for nice 19.
 */
static __always_inline u64 task_deadline(struct task_struct *p, struct task_ctx *tctx,
					 u32 llc, u64 queued)
{
	u64 clock = llc_ctx(llc)->vclock, credit = vcharge(p, vtime_credit_ns);
	u64 lead = max_wait_ns * llc_nr_cpus[llc & (MAX_LLCS - 1)] / (queued + 1);

	carry_lag(tctx, llc);
	if (tctx->woke) {
		tctx->woke = 0;
		if (time_before(tctx->vtime, clock - credit)) {
			tctx->vtime = clock - credit;
			stat_inc(STAT_LAG_CLAMP);
		}
	}
	if (lead < vtime_credit_ns)
		lead = vtime_credit_ns;
	if (time_after(tctx->vtime, clock + lead))
		tctx->vtime = clock + lead;
	return deadline_of(p, tctx);
}

/*
 * @p starts on @cpu (from the LLC DSQ when @from_queue): record its
 * deadline for wakeup preemption, and keep the LLC's clock near the front
 * of its queue. The clock catches up with a queue head whose vtime is ahead
 * of it by at most a slice per pick (one far-ahead nice-19 task cannot drag
 * it), and is pulled back to within vtime_credit_ns of a head whose
 * deadline is behind it (the clock ran ahead of its tasks), so that woken
 * tasks, queued near the clock, are not put behind every hog. Deadlines,
 * not vtimes, for the latter: a low-weight task's vtime trails by its
 * longer request without the clock being ahead.
 */
static __always_inline void vtime_running(struct task_struct *p, struct task_ctx *tctx,
					  s32 cpu, bool from_queue)
{
	u32 llc = llc_of(cpu);
	struct llc_ctx *l = llc_ctx(llc);
	u64 clock = l->vclock, v, dl;

	carry_lag(tctx, llc);
	v = tctx->vtime;
	dl = deadline_of(p, tctx);
	if (from_queue) {
		if (time_before(clock, v))
			l->vclock = time_before(v, clock + slice_ns) ? v : clock + slice_ns;
		else if (time_after(clock, dl + vtime_credit_ns))
			l->vclock = dl + vtime_credit_ns;
	}
	cpu_cur[cpu & (MAX_CPUS - 1)].deadline = dl;
}

/*
 * @p ran @ran ns on @cpu: charge it at its weight, and move the LLC's clock
 * by the same time over the LLC's runnable weight (a racy add from the
 * LLC's CPUs: a lost update only slows the clock a little).
 */
static __always_inline void vtime_charge(struct task_struct *p, struct task_ctx *tctx,
					 s32 cpu, u64 ran)
{
	struct llc_ctx *l = llc_ctx(llc_of(cpu));
	s64 load = l->load;

	tctx->vtime += vcharge(p, ran);
	tctx->exec += ran;
	if (load < 100)
		load = 100;
	l->vclock += ran * 100 / load;
}

/* The task woke: fold what it ran since the last wakeup into its burst. */
static __always_inline void vtime_woke(struct task_ctx *tctx)
{
	tctx->burst = (tctx->burst * 3 + tctx->exec) / 4;
	tctx->exec = 0;
	tctx->woke = 1;
}

/*
 * The slice @p starts with on @cpu: what it was given, shrunk as its LLC's
 * queue (@queued) grows past the LLC's CPUs, so a long queue turns over
 * quickly; never below slice_min_ns.
 */
static __always_inline void scale_slice(struct task_struct *p, s32 cpu, u64 queued)
{
	u64 n = llc_nr_cpus[llc_of(cpu) & (MAX_LLCS - 1)], s = p->scx.slice;

	if (!n || s <= slice_min_ns || s == SCX_SLICE_INF)
		return;
	s = s * n / (n + queued);
	if (s < slice_min_ns)
		s = slice_min_ns;
	p->scx.slice = s;
	stat_add(STAT_SLICE_NS, s);
	stat_inc(STAT_SLICES);
}

/*
 * A woken @p (deadline @dl) was queued for @cpu's LLC with no idle CPU:
 * if @cpu runs a task whose deadline is later by more than preempt_gap_ns
 * (at @p's weight), kick that task off; its CPU then takes the queue's
 * earliest deadline, @p.
 */
static __always_inline void maybe_preempt(struct task_struct *p, s32 cpu, u64 dl)
{
	u64 cur;

	if (preempt_gap_ns == (u64)-1 || !valid_cpu(cpu))
		return;
	cur = cpu_cur[cpu & (MAX_CPUS - 1)].deadline;
	if (!cur || !time_before(dl + vcharge(p, preempt_gap_ns), cur))
		return;
	cpu_cur[cpu & (MAX_CPUS - 1)].deadline = 0;	/* one kick is enough */
	scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	stat_inc(STAT_PREEMPT);
}

#endif /* __NIMBLE_VTIME_BPF_H */
