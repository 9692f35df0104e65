/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Weight-aware balancing between the LLCs of a node. Each LLC DSQ shares
 * its CPUs by weight, but only among its own tasks: with sixteen nice-0 and
 * eight nice-10 loops spread unevenly, a crowded LLC's nice-0 loops got
 * less CPU than nice-10 loops alone in another (README, Known limits).
 *
 * A task whose slice ended (wakeups are placed by select_cpu) moves to the
 * sibling LLC with the lowest load per CPU if its own LLC would still be at
 * least as loaded per CPU after the move. A move never overshoots, so two
 * LLCs never hand the same task back and forth. Load is the summed weight
 * of runnable tasks (llc_ctx.load), not their count, so a nice-19 loop
 * alone in an LLC draws nice-0 loops to it. Crossing nodes stays the NUMA
 * gate's decision while the destination has idle CPUs (see balance_llc).
 */
#ifndef __NIMBLE_BALANCE_BPF_H
#define __NIMBLE_BALANCE_BPF_H

#include "nimble.bpf.h"
#include "topo.bpf.h"
#include "stats.bpf.h"
#include "numa.bpf.h"

/*
 * The LLC @p, whose slice ended on @own, should queue on. The node's LLCs
 * first; then, if both nodes are busy (more tasks than CPUs), LLCs of other
 * nodes nearest first with a 25 % margin, since crossing costs memory
 * locality: the kernel's balancer also moves load, by weight, between
 * overloaded nodes, while the NUMA gate's allowance (imb_numa_nr, counted in
 * tasks) governs a node with idle CPUs.
 */
static __always_inline u32 balance_llc(struct task_struct *p, struct task_ctx *tctx,
				       u32 own)
{
	s64 w = tctx->rq_weight, best_load, best_n, load, n;
	u32 i, l, node, lnode, best = own;
	const struct cpumask *m;
	bool remote;

	/* CPU-bound tasks only: short sleepers' load comes and goes. */
	if (p->scx.slice || tctx->full_slices < HOG_SLICES)
		return own;
	if (nr_llcs < 2 || p->nr_cpus_allowed == 1 || !w ||
	    tctx->rq_node < 0 || tctx->rq_llc != own || own >= MAX_LLCS)
		return own;
	/* To beat: the own LLC's load per CPU once @p has left it. */
	best_load = llc_ctx(own)->load - w;
	best_n = llc_nr_cpus[own & (MAX_LLCS - 1)];
	node = node_of_llc(own);
	bpf_for(i, 1, nr_llcs) {
		l = steal_victim(own, i);
		lnode = node_of_llc(l);
		remote = lnode != node;
		if (remote && (best != own || !node_busy(node) || !node_busy(lnode)))
			break;	/* steal order: the node's LLCs come first */
		n = llc_nr_cpus[l & (MAX_LLCS - 1)];
		load = llc_ctx(l)->load + w;
		if (load * best_n * (remote ? 5 : 4) > best_load * n * 4)
			continue;
		m = llc_mask(l);
		if (!m || !bpf_cpumask_intersects(m, p->cpus_ptr))
			continue;
		best = l;
		best_load = load;
		best_n = n;
	}
	if (best == own)
		return own;
	/* Count it there now, so the next task to leave sees the move. */
	rq_move(tctx, best);
	stat_inc(STAT_BALANCE);
	return best;
}

#endif /* __NIMBLE_BALANCE_BPF_H */
