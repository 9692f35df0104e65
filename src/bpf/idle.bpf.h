/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Topology-ordered idle CPU pick for ops.select_cpu(): stay as close to the
 * task's previous CPU as an idle CPU allows, so its cache stays warm.
 */
#ifndef __NIMBLE_IDLE_BPF_H
#define __NIMBLE_IDLE_BPF_H

#include "nimble.bpf.h"
#include "topo.bpf.h"
#include "stats.bpf.h"

/*
 * Pick an idle CPU among @allowed & @within, whole idle cores first if SMT.
 * The task's scratch mask is loaded and checked here, once per use: the
 * verifier treats every load of a kptr as possibly NULL.
 */
static __always_inline s32 pick_idle_in(struct task_ctx *tctx,
					const struct cpumask *allowed,
					const struct cpumask *within)
{
	struct bpf_cpumask *tmp = tctx->tmp;
	s32 cpu;

	if (!tmp || !within)
		return -ENOENT;
	bpf_cpumask_and(tmp, allowed, within);
	if (smt_enabled) {
		cpu = scx_bpf_pick_idle_cpu(cast_mask(tmp), SCX_PICK_IDLE_CORE);
		if (cpu >= 0)
			return cpu;
	}
	return scx_bpf_pick_idle_cpu(cast_mask(tmp), 0);
}

/* Is @prev idle, and with SMT, is its whole core idle? Claims it if so. */
static __always_inline bool claim_prev_cpu(const struct task_struct *p, s32 prev)
{
	const struct cpumask *smt_idle;
	bool core_idle = true;

	if (!bpf_cpumask_test_cpu(prev, p->cpus_ptr))
		return false;
	if (smt_enabled) {
		smt_idle = scx_bpf_get_idle_smtmask();
		core_idle = bpf_cpumask_test_cpu(prev, smt_idle);
		scx_bpf_put_idle_cpumask(smt_idle);
	}
	return core_idle && scx_bpf_test_and_clear_cpu_idle(prev);
}

/*
 * Previous CPU if its whole core is idle, then an idle core / CPU in the
 * previous CPU's LLC, then an idle CPU of its node. Crossing nodes is the
 * NUMA gate's decision (numa_gate.bpf.h). Returns the claimed CPU or a
 * negative errno.
 */
static s32 pick_idle_near(struct task_struct *p, s32 prev, struct task_ctx *tctx)
{
	s32 cpu;

	if (!valid_cpu(prev))
		return -EINVAL;

	if (claim_prev_cpu(p, prev)) {
		stat_inc(STAT_IDLE_PREV);
		return prev;
	}

	cpu = pick_idle_in(tctx, p->cpus_ptr, llc_mask(llc_of(prev)));
	if (cpu >= 0) {
		stat_inc(STAT_IDLE_LLC);
		return cpu;
	}

	/* Skipped where LLCs span whole nodes: the same mask again. */
	if (nr_llcs <= nr_nodes)
		return -ENOENT;
	cpu = pick_idle_in(tctx, p->cpus_ptr, node_mask(node_of(prev)));
	if (cpu >= 0)
		stat_inc(STAT_IDLE_NODE);
	return cpu;
}

/*
 * The waker's CPU for a sync wakeup of @p (the waker is about to sleep:
 * pipes, sockets, futex hand-offs) if the wakee may run there, the waker
 * is not exiting and nothing waits on its local DSQ; else -ENOENT. Across
 * nodes only within the reclaim distance (node_affine), as the kernel's
 * wake_affine(): a pair split over two nodes by fork placement otherwise
 * stayed split, every wakeup an IPI (tbench 16 clients on n2l4: 13-36 %
 * remote wakeups vs EEVDF's 2-5 %, throughput 0.8x). Shared by --wake-sync
 * (llc_dsq.bpf.h) and the CPU queues (cpu_dsq.bpf.h).
 */
static __always_inline s32 sync_waker_cpu(struct task_struct *p, s32 prev, u64 wake_flags)
{
	struct task_struct *waker = (void *)bpf_get_current_task_btf();
	s32 cpu = bpf_get_smp_processor_id();

	if (!(wake_flags & SCX_WAKE_SYNC) || (wake_flags & SCX_WAKE_FORK))
		return -ENOENT;
	if (!valid_cpu(cpu) || !valid_cpu(prev) || !nodes_affine(node_of(prev), node_of(cpu)))
		return -ENOENT;
	if ((waker->flags & PF_EXITING) || !bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
		return -ENOENT;
	if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL))
		return -ENOENT;
	return cpu;
}

/*
 * The waker's side of wake_wide(), as the kernel's record_wakee(): count a
 * switch of partner, halving the count once a second has passed since the
 * last halving. Sync wakeups only, unlike the kernel: a wakeup from
 * interrupt context (a timer's, a kthread's) is charged to whichever task
 * it interrupted, and a pipe pair's thread that spins was charged 11
 * switches a second that way (n2l4, bpf_printk), enough to call the pair
 * wide. Returns the waker's context; NULL for any other wakeup (only a
 * sync one may be pulled: no lookup for the rest) or a waker without one
 * (not a sched_ext task).
 */
static __always_inline struct task_ctx *record_wakee(struct task_struct *p, u64 wake_flags)
{
	struct task_ctx *wctx;
	u64 now;

	if (!(wake_flags & SCX_WAKE_SYNC) ||
	    !(wctx = lookup_task_ctx(bpf_get_current_task_btf())))
		return NULL;
	now = scx_bpf_now();
	if (clock_since(now, wctx->flips_at) > 1000000000ULL) {
		wctx->wakee_flips >>= 1;
		wctx->flips_at = now;
	}
	if (wctx->last_wakee != p->pid) {
		wctx->last_wakee = p->pid;
		wctx->wakee_flips++;
	}
	return wctx;
}

/*
 * Idle CPU for a wakeup of @p (select_cpu), wake-affine first: a sync
 * wakeup whose waker runs alone (sync_waker_cpu()) in another LLC than
 * @prev, both keeping to one partner (wake_wide()), takes an idle CPU of
 * the waker's LLC, even if @prev is idle, as the kernel's wake_affine()
 * and select_idle_sibling() around the waker's CPU do: a pair that fork
 * placement split over two LLCs comes together and its wakeups stop
 * crossing LLCs. Everything else, and a waker's LLC with no idle CPU:
 * pick_idle_near() (the kernel would queue on the waker's CPU there: in
 * the lab that made perf pipe at 2 and 4 pairs 1.2x slower).
 */
static s32 pick_idle_wake(struct task_struct *p, s32 prev, struct task_ctx *tctx,
			  struct task_ctx *wctx, u64 wake_flags)
{
	s32 waker, cpu;
	u32 llc;

	if (!wake_affine || !wctx || (waker = sync_waker_cpu(p, prev, wake_flags)) < 0 ||
	    (llc = llc_of(waker)) == llc_of(prev) ||
	    wake_wide(wctx->wakee_flips, tctx->wakee_flips, llc_nr_cpus[llc_idx(llc)]))
		return pick_idle_near(p, prev, tctx);
	cpu = pick_idle_in(tctx, p->cpus_ptr, llc_mask(llc));
	if (cpu < 0)
		return pick_idle_near(p, prev, tctx);
	stat_inc(STAT_WAKE_AFFINE);
	return cpu;
}

/*
 * A wakeup the kernel queued on @cpu, the CPU @p was still switching out
 * of (SCX_OPS_ALLOW_QUEUED_WAKEUP, the fair class's ttwu wakelist: the
 * waker does not spin until @p is off), reaches ops.enqueue on @cpu with
 * no select_cpu before it (@selected false). Send it to an idle CPU near
 * @cpu, as select_cpu would have; returns whether it did. With none idle
 * it queues like any wakeup that found none (enqueue_llc()).
 */
static __always_inline bool wake_unselected(struct task_struct *p, struct task_ctx *tctx,
					    s32 cpu, u64 enq_flags, bool selected)
{
	s32 idle;

	if (selected || !(enq_flags & SCX_ENQ_WAKEUP) || p->nr_cpus_allowed == 1)
		return false;
	idle = pick_idle_near(p, cpu, tctx);
	if (idle < 0)
		return false;
	path_queue(tctx, PATH_DIRECT, 0, STAT_INS_DIRECT);
	stat_inc(STAT_WAKE_QUEUED);
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | idle, slice_ns, enq_flags);
	if (idle != cpu)
		scx_bpf_kick_cpu(idle, SCX_KICK_IDLE);
	return true;
}

#endif /* __NIMBLE_IDLE_BPF_H */
