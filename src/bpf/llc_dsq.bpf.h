/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-LLC dispatch queues ordered by virtual deadline (vtime.bpf.h; their
 * consumers are in dispatch.bpf.h), and the idle kick that keeps them
 * work-conserving.
 */
#ifndef __NIMBLE_LLC_DSQ_BPF_H
#define __NIMBLE_LLC_DSQ_BPF_H

#include "nimble.bpf.h"
#include "topo.bpf.h"
#include "stats.bpf.h"
#include "numa_moves.bpf.h"
#include "vtime.bpf.h"
#include "balance.bpf.h"
#include "cpu_dsq.bpf.h"
#include "preempt.bpf.h"

/* LLC DSQ ids are the LLC ids (user DSQ ids are free below 2^63). */
static __always_inline u64 llc_dsq(u32 llc)
{
	return llc;
}

/* Whether tasks wait in @llc's DSQ. */
static __always_inline bool llcq_waiting(u32 llc)
{
	return scx_bpf_dsq_nr_queued(llc_dsq(llc)) > 0;
}

static __always_inline s32 create_llc_dsqs(void)
{
	s32 llc, err;

	bpf_for(llc, 0, nr_llcs) {
		if (llc >= MAX_LLCS)
			break;
		err = scx_bpf_create_dsq(llc_dsq(llc), node_of_llc(llc));
		if (err) {
			scx_bpf_error("failed to create DSQ for LLC %d: %d", llc, err);
			return err;
		}
	}
	return 0;
}

/*
 * Wake an idle CPU the task may use to come and take it: its own LLC first,
 * then its node (@remote: then another node whose CPU the NUMA gate lets
 * pull it). Keeps the scheduler work-conserving for enqueues that did not go
 * through select_cpu (preemption, slice expiry); ops.tick looks again for
 * tasks left waiting.
 */
static __always_inline bool kick_idle_cpu(struct task_struct *p, s32 cpu,
					  struct task_ctx *tctx, bool remote)
{
	s32 idle;

	if (!valid_cpu(cpu))
		return false;
	idle = pick_idle_in(tctx, p->cpus_ptr, llc_mask(llc_of(cpu)));
	if (idle < 0 && nr_llcs > 1)
		idle = pick_idle_in(tctx, p->cpus_ptr, node_mask(node_of(cpu)));
	if (idle < 0 && remote && nr_nodes > 1)
		idle = pick_idle_remote(p, tctx, node_of(cpu), true, true);
	if (idle < 0)
		return false;
	scx_bpf_kick_cpu(idle, SCX_KICK_IDLE);
	stat_inc(STAT_KICK);
	return true;
}

/*
 * A wakeup of @p queued on busy @cpu with no idle CPU to take it, enqueued
 * on another CPU than its waker's (@waker: the kernel queued the wakeup on
 * @cpu, whose IPI runs this): kick the waker's CPU if @p may run there
 * (same node). The waker is about to sleep, and its CPU may already have
 * dispatched, before this insert landed, and be on its way to idle, where
 * no idle pick sees it yet (traced on the pinned ping-pong pairs: CPU 2
 * went idle while CPU 1 enqueued the wakee). SCX_KICK_IDLE reaches a CPU
 * inside its dispatch or idle; one still running its task dispatches
 * anyway.
 */
static __always_inline void kick_waker_cpu(struct task_struct *p, s32 cpu, s32 waker)
{
	if (waker < 0 || waker == cpu || waker == bpf_get_smp_processor_id() ||
	    !valid_cpu(waker) || node_of(waker) != node_of(cpu) ||
	    !bpf_cpumask_test_cpu(waker, p->cpus_ptr))
		return;
	scx_bpf_kick_cpu(waker, SCX_KICK_IDLE);
	stat_inc(STAT_KICK_WAKER);
}

/* Wake an idle CPU of @llc (which @p may use) to take @p. */
static __always_inline void kick_idle_cpu_in(struct task_struct *p, struct task_ctx *tctx,
					     u32 llc)
{
	s32 idle = pick_idle_in(tctx, p->cpus_ptr, llc_mask(llc));

	if (idle >= 0) {
		scx_bpf_kick_cpu(idle, SCX_KICK_IDLE);
		stat_inc(STAT_KICK);
	}
}

/*
 * @p (deadline @dl) was queued on @cpu's own queue or its LLC's: wake an
 * idle CPU for it, else (a wakeup) its waker's CPU, and let a wakeup
 * preempt @cpu's task if it is due first.
 */
static __always_inline void after_queued(struct task_struct *p, struct task_ctx *tctx, s32 cpu,
					 u64 dl, s32 waker, bool wakeup)
{
	if (!kick_idle_cpu(p, cpu, tctx, false) && wakeup)
		kick_waker_cpu(p, cpu, waker);
	if (wakeup)
		maybe_preempt(p, tctx, cpu, dl);
}

/*
 * Queue @p on the DSQ of the LLC of the CPU it is on (which it may use) or,
 * when its slice ended there (@slice_end), of a less loaded LLC of the
 * node; a wakeup waits on its CPU's own queue instead (cpu_dsq.bpf.h),
 * unless another class holds that CPU or select_cpu said so (HINT_SHARED).
 * A wakeup may preempt the task running on its CPU (preempt.bpf.h).
 */
__noinline int enqueue_llc(struct task_struct *p __arg_trusted, u64 enq_flags, bool slice_end,
			   s32 waker)
{
	struct task_ctx *tctx = lookup_task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	bool wakeup = enq_flags & SCX_ENQ_WAKEUP;
	u32 hint, llc;
	u64 dl;

	if (!tctx)
		return 0;
	hint = tctx->hint;
	tctx->hint = HINT_NONE;
	/* Queued again before it ran (dequeued behind our back): uncount it. */
	cpuq_left(tctx);
	if (!valid_cpu(cpu)) {
		scx_bpf_error("task %d on invalid CPU %d", p->pid, cpu);
		return 0;
	}
	llc = requeue_llc(p, tctx, enq_flags);
	if (slice_end)
		llc = balance_llc(p, llc, true);
	dl = task_deadline(p, tctx, !wakeup && tctx->waiting);
	tctx->waiting = 1;
	path_queue(tctx, PATH_LLC, llc, STAT_INS_LLC);
	tctx->queued_at = now_ns();
	/*
	 * Wakeups, and re-queues of tasks that sleep often (a slice that ran
	 * out, a preemption), wait on their CPU's own queue; CPU-bound tasks
	 * share the LLC DSQ, whose CPUs divide them by weight. select_cpu
	 * already looked at a wakeup's CPU (HINT_WAKER / HINT_SHARED); for
	 * anything else, look here whether another class holds it. A task
	 * bound to its CPU waits there whatever holds it: on the LLC queue it
	 * would only stand in the way of its siblings (cpuq_take_own()).
	 */
	if (p->nr_cpus_allowed == 1)
		hint = HINT_NONE;
	if (hint != HINT_SHARED && (wakeup || p->nr_cpus_allowed == 1 ||
	    (llc == llc_of(cpu) && tctx->full_slices < HOG_SLICES))) {
		if (hint == HINT_NONE && p->nr_cpus_allowed > 1 && cpu_taken(cpu)) {
			stat_inc(STAT_TAKEN_SKIP);
		} else if (cpuq_insert(p, tctx, cpu, dl, enq_flags, hint == HINT_WAKER)) {
			after_queued(p, tctx, cpu, dl, waker, wakeup);
			return 0;
		}
	}
	scx_bpf_dsq_insert_vtime(p, llc_dsq(llc), enq_slice(p, enq_flags), dl, enq_flags);
	if (llc != llc_of(cpu)) {
		kick_idle_cpu_in(p, tctx, llc);
		return 0;
	}
	after_queued(p, tctx, cpu, dl, waker, wakeup);
	return 0;
}

#endif /* __NIMBLE_LLC_DSQ_BPF_H */
