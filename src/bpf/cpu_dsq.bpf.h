/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-CPU wake queues. A woken task that found no idle CPU waits on one
 * CPU's own DSQ (deadline order, as the LLC DSQs) instead of its LLC's:
 *   - the waker's CPU, for a synchronous wakeup (pipes, sockets, futex
 *     hand-offs) when nothing waits on its local DSQ and its own queue is
 *     no longer than the previous CPU's: the waker is about to sleep and
 *     the pair then takes turns on one CPU (the kernel's wake_affine());
 *   - else the CPU it last ran on.
 * Under overload a shared LLC queue handed nearly every wakee to whichever
 * CPU freed up first: a migration and the queue's lock, shared by all the
 * LLC's CPUs, on every wakeup (tbench at 16 clients: 0.86x EEVDF). The
 * kernel keeps a run queue per CPU for the same reason.
 *
 * Ordering still holds across the two queues: a CPU runs the earlier
 * deadline of its own queue's head and its LLC queue's head, so CPU-bound
 * tasks queued on the LLC at slice end are not passed over. And work is
 * conserved: a CPU whose own and LLC queues are empty takes the earliest
 * task waiting on another CPU of its LLC, then of its node, before it keeps
 * its previous task or idles (an enqueue also kicks an idle CPU, as for
 * the LLC queue), so a task waits on a busy CPU only while every CPU near
 * it is busy.
 */
#ifndef __NIMBLE_CPU_DSQ_BPF_H
#define __NIMBLE_CPU_DSQ_BPF_H

#include "nimble.bpf.h"
#include "stats.bpf.h"
#include "idle.bpf.h"

/* Above the LLC DSQs (ids 0..MAX_LLCS) and the swq's (SWQ_DSQ_BASE + ...). */
#define CPU_DSQ_BASE	(1ULL << 20)

static __always_inline u64 cpu_dsq(s32 cpu)
{
	return CPU_DSQ_BASE + (u32)cpu;
}

static __always_inline s32 create_cpu_dsqs(void)
{
	s32 cpu, err;

	if (!cpu_queues)
		return 0;
	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu >= MAX_CPUS)
			break;
		err = scx_bpf_create_dsq(cpu_dsq(cpu), node_of(cpu));
		if (err) {
			scx_bpf_error("failed to create DSQ for CPU %d: %d", cpu, err);
			return err;
		}
	}
	return 0;
}

/*
 * select_cpu found no idle CPU for @p: the CPU whose own queue it should
 * wait on. The sync waker's CPU (sync_waker_cpu(): a node within the
 * reclaim distance, nothing on its local DSQ) if its own queue holds no more
 * tasks than @prev's, so a pair takes turns on one CPU without piling onto a
 * busier one; else @prev. Either way the wakee counts as the waker's.
 */
static __always_inline s32 cpuq_target(struct task_struct *p, struct task_ctx *tctx,
				       s32 prev, u64 wake_flags)
{
	s32 cpu;

	if (!cpu_queues)
		return prev;
	cpu = sync_waker_cpu(p, prev, wake_flags);
	if (cpu < 0 || (cpu != prev &&
	    scx_bpf_dsq_nr_queued(cpu_dsq(cpu)) > scx_bpf_dsq_nr_queued(cpu_dsq(prev))))
		return prev;
	tctx->cpuq = -1;	/* enqueue: count it as the waker's */
	return cpu;
}

/* @p left its CPU queue (ran, was dequeued, exited): stop counting it there. */
static __always_inline void cpuq_left(struct task_ctx *tctx)
{
	s32 cpu = tctx->cpuq - 1;

	tctx->cpuq = 0;
	if (cpu >= 0 && valid_cpu(cpu))
		__sync_fetch_and_add(&llc_ctx(llc_of(cpu))->cpuq_nr, -1);
}

/*
 * A wakeup of @p (deadline @dl, no idle CPU found) waits on @cpu's own
 * queue (@waker: cpuq_target chose the waker's CPU). Returns false if the
 * queues are off (the LLC queue takes it).
 */
static __always_inline bool cpuq_insert(struct task_struct *p, struct task_ctx *tctx,
					s32 cpu, u64 dl, u64 enq_flags, bool waker)
{
	if (!cpu_queues || !valid_cpu(cpu))
		return false;
	scx_bpf_dsq_insert_vtime(p, cpu_dsq(cpu), slice_ns, dl, enq_flags);
	tctx->cpuq = cpu + 1;
	__sync_fetch_and_add(&llc_ctx(llc_of(cpu))->cpuq_nr, 1);
	stat_inc(STAT_CPUQ);
	if (waker)
		stat_inc(STAT_CPUQ_WAKER);
	return true;
}

/* Whether any CPU of @llc has a task waiting on its own queue. */
static __always_inline bool cpuq_waiting(u32 llc)
{
	return cpu_queues && llc < MAX_LLCS && llc_ctx(llc)->cpuq_nr > 0;
}

/*
 * @cpu looks for work: its own queue's head if its deadline is no later
 * than @llc_dsq's head's. Returns whether a task was moved to its local DSQ.
 */
static __always_inline bool cpuq_take_own(s32 cpu, u64 llc_dsq_id)
{
	struct task_struct *mine, *shared;

	if (!cpu_queues)
		return false;
	mine = __COMPAT_scx_bpf_dsq_peek(cpu_dsq(cpu));
	if (!mine)
		return false;
	shared = __COMPAT_scx_bpf_dsq_peek(llc_dsq_id);
	if (shared && time_before(shared->scx.dsq_vtime, mine->scx.dsq_vtime))
		return false;
	return scx_bpf_dsq_move_to_local(cpu_dsq(cpu), 0);
}

/*
 * @cpu found nothing it may run in @llc's DSQ (or swq): take the head of a
 * CPU queue in @llc, its own first (whose head may have lost to an LLC
 * head this CPU may not run), then the next CPUs' (so thieves spread).
 * Only tasks that may run on @cpu move.
 */
static __always_inline bool cpuq_steal_in(s32 cpu, u32 llc)
{
	s32 i, c;

	if (!cpu_queues || llc >= MAX_LLCS || llc_ctx(llc)->cpuq_nr <= 0)
		return false;
	bpf_for(i, 0, nr_cpu_ids) {
		c = (cpu + i) % nr_cpu_ids;
		if (llc_of(c) != llc || !scx_bpf_dsq_nr_queued(cpu_dsq(c)))
			continue;
		if (scx_bpf_dsq_move_to_local(cpu_dsq(c), 0)) {
			if (c != cpu)
				stat_inc(STAT_CPUQ_STEAL);
			return true;
		}
	}
	return false;
}

#endif /* __NIMBLE_CPU_DSQ_BPF_H */
