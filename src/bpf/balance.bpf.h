/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Weight-aware balancing between LLCs. Each LLC DSQ shares its CPUs by
 * weight, but only among its own tasks: a task gets w / (load per CPU) of
 * a CPU, so weights hold across LLCs only while every LLC carries the same
 * load per CPU. The load balanced is that of CPU-bound tasks
 * (llc_ctx.hog_load, see rq_hog_update()): the only ones it moves, and the
 * ones whose load lasts.
 *
 * A task whose slice ended (wakeups are placed by select_cpu) moves to the
 * least loaded LLC if that shrinks the gap in load per CPU: the move may
 * overshoot by at most half the gap, so every move makes the loads strictly
 * more even and a task is never handed back and forth.
 *
 * That rule alone gets stuck: three nice-0 loops on one LLC of two CPUs,
 * one nice-0 and four nice-6 on the other (1536 vs 1056 per CPU) cannot
 * move a nice-0 loop (512 per CPU, over 3/4 of the gap) and the nice-6
 * loops are on the lighter side: nice 0 got 2.9x nice 6's CPU, not 3.8x.
 * The kernel's balancer escapes by counting a task's load smaller after
 * failed attempts (detach_tasks, nr_balance_failed); here, once loads have
 * stayed uneven for BAL_STUCK_NS, one move may overshoot to 5/4 of the
 * gap: the heavy loop moves, then the light ones follow it back to even
 * loads. A task moved lately (BAL_COOL_NS) is left alone.
 *
 * Between nodes, when both are busy, the nodes' loads are compared, not
 * their LLCs' (balance_node()): a move that evens two nodes may leave the
 * target LLC heavier than the one left, and its siblings then even out.
 */
#ifndef __NIMBLE_BALANCE_BPF_H
#define __NIMBLE_BALANCE_BPF_H

#include "nimble.bpf.h"
#include "topo.bpf.h"
#include "stats.bpf.h"
#include "numa.bpf.h"
#include "mem_locality.bpf.h"

/*
 * How long loads stay uneven, with no move that narrows the gap, before
 * one move may widen it a little: about the kernel's balance interval
 * between LLCs times its busy factor. Shorter: heavy tasks swing between
 * LLCs; longer: weights off for longer after a change.
 */
#define BAL_STUCK_NS	(100ULL * 1000 * 1000)
/* A task that moved stays put this long (the kernel: cache-hot tasks). */
#define BAL_COOL_NS	(50ULL * 1000 * 1000)

/*
 * Moving @w from an LLC with load @A on @nA CPUs to one with @B on @nB
 * leaves a gap in load per CPU D' = (B + w)/nB - (A - w)/nA of at most
 * @p/@q of today's D = A/nA - B/nB (p/q = 1/2: the gap shrinks and
 * overshoots by at most half; 5/4: the escape). In integers:
 * (q + p) nA B + q w (nA + nB) <= (q + p) A nB.
 */
static __always_inline bool bal_fits(s64 A, s64 nA, s64 B, s64 nB, s64 w, s64 p, s64 q)
{
	return (q + p) * nA * B + q * w * (nA + nB) <= (q + p) * A * nB;
}

/*
 * A remote LLC for @p when its node carries more load per CPU than another
 * busy node (the kernel's balancer between NUMA nodes: it compares the
 * nodes' average loads, and moves a task whose load fits the imbalance).
 * LLC by LLC, a move between nodes could be refused where the nodes are
 * far apart: 8 loops weighing 800 on node 0's two LLCs with one of 3200
 * each, three of 3200 on each LLC of node 1, is 4800 vs 3200 per CPU per
 * LLC either way once a 3200 loop crosses, but 16000 vs 16000 per node,
 * after which node 0's siblings even out (cgroups of 100 and 400: 2.8x,
 * not 4x). The lightest busy remote node per CPU, nearest first on a tie,
 * and its lightest LLC that @p may run on; -1: a remote node @p may use
 * has a free CPU, no node lighter by 1/16 (as
 * between LLCs; 1/8 left 16800 vs 15200, the light loop that evens them
 * unmoved) or no move that narrows the gap. @from: where remote LLCs start in
 * @own's steal order.
 */
static __always_inline s32 balance_node(struct task_struct *p, s64 w, u32 own,
					u32 node, u32 from)
{
	s64 NA, nA, NB = 0, nB = 1, Nl, nl, lb = 0, ln = 1, load, n;
	s32 best = -1, best_node = -1;
	const struct cpumask *m;
	u32 i, l, lnode;

	if (!node_busy(node))
		return -1;
	NA = node_ctx(node)->hog_load;
	nA = node_cap(node);
	bpf_for(i, from, nr_llcs) {
		l = steal_victim(own, i);
		lnode = node_of_llc(l);
		if (lnode == node)
			continue;
		m = llc_mask(l);
		if (!m || !bpf_cpumask_intersects(m, p->cpus_ptr))
			continue;
		/*
		 * A node with a free CPU @p may use: crossing is the NUMA
		 * gate's call (its allowance, nearest first), not this one's.
		 * Counting it out instead sent a loop from an overloaded node
		 * to a far node that a shell made look busy, past an idle near
		 * one (n4's numa_spread.sh).
		 */
		if (!node_busy(lnode))
			return -1;
		nl = node_cap(lnode);
		Nl = node_ctx(lnode)->hog_load;
		n = llc_cap(l);
		load = llc_ctx(l)->hog_load;
		if (!n || !nl)
			continue;
		/* Another LLC of a node already beaten, or a heavier node. */
		if (best_node >= 0 && (s32)lnode != best_node && Nl * nB >= NB * nl)
			continue;
		if ((s32)lnode == best_node && load * ln >= lb * n)
			continue;
		best = l;
		best_node = lnode;
		NB = Nl;
		nB = nl;
		lb = load;
		ln = n;
	}
	/* A node with no usable CPU sheds load to any that has one. */
	if (best < 0 || (nA && NB * nA * 16 >= NA * nB * 15) ||
	    !bal_fits(NA, nA, NB, nB, w, 1, 2))
		return -1;
	return best;
}

/*
 * Whether a move between busy nodes that takes @p off the node holding its
 * memory (@node) waits: for BAL_STUCK_NS from the first time it was put
 * off, so the balance takes the node's other tasks first (the kernel's
 * migrate_degrades_locality() refuses such a move until cache_nice_tries
 * balance attempts at the NUMA level failed, some hundred ms when busy).
 * A put-off older than twice that starts over. @commit: the enqueue path
 * (remembers); dispatch only asks.
 */
static __always_inline bool mem_keeps(struct task_ctx *tctx, u32 node, u64 now, bool commit)
{
	u64 since = tctx->mem_bal_since;

	if (!mem_home(tctx, node))
		return false;
	if (since && clock_since(now, since) >= BAL_STUCK_NS &&
	    clock_since(now, since) < 2 * BAL_STUCK_NS) {
		if (commit)
			tctx->mem_bal_since = 0;
		return false;
	}
	if (commit) {
		if (!since || clock_since(now, since) >= 2 * BAL_STUCK_NS)
			tctx->mem_bal_since = now;
		nstat_inc(node, NSTAT_MEM_STAY);
	}
	return true;
}

/*
 * The LLC @p, whose slice ended on @own, should queue on, first of: the
 * least loaded LLC of its node if that narrows the gap; when both nodes
 * are busy (no idle CPU: more tasks than CPUs), an LLC of the lightest
 * remote node if that narrows the gap between nodes; once stuck for
 * BAL_STUCK_NS, the escape above.
 * The NUMA gate's allowance (imb_numa_nr, counted in tasks) governs a node
 * with idle CPUs.
 */
__noinline u32 balance_llc(struct task_struct *p __arg_trusted, u32 own, bool commit)
{
	struct task_ctx *tctx = lookup_task_ctx(p);
	s64 w, A, nA, best_B, best_n, load, n;
	u32 i, l, node, best = own, from = 0;
	struct llc_ctx *oc;
	const struct cpumask *m;
	bool even;
	s32 far;
	u64 now;

	/* CPU-bound tasks only (callers: at slice end); sleepers' load comes and goes. */
	if (!tctx || tctx->full_slices < HOG_SLICES)
		return own;
	w = tctx->hog_w;
	if (nr_llcs < 2 || p->nr_cpus_allowed == 1 || !w ||
	    tctx->rq_node < 0 || tctx->rq_llc != own || own >= MAX_LLCS)
		return own;
	oc = llc_ctx(own);
	A = oc->hog_load;
	nA = llc_cap(own);
	/*
	 * Leaving would idle one of the LLC's CPUs, which would then steal a
	 * task back by count, whatever its weight: the two moves undid each
	 * other (2000 moves in 12 s, 16 loops on l2).
	 */
	if (oc->nr_running <= nA)
		return own;
	now = now_ns();
	node = node_of_llc(own);
	/*
	 * The least loaded sibling per CPU that @p may run on, lighter than
	 * its own LLC. The steal order has the node's LLCs first.
	 */
	best_B = A;
	best_n = nA;
	bpf_for(i, 1, nr_llcs) {
		l = steal_victim(own, i);
		if (node_of_llc(l) != node) {
			from = i;
			break;
		}
		n = llc_cap(l);
		load = llc_ctx(l)->hog_load;
		if (!n || (best_n && load * best_n >= best_B * n))
			continue;
		m = llc_mask(l);
		if (!m || !bpf_cpumask_intersects(m, p->cpus_ptr))
			continue;
		best = l;
		best_B = load;
		best_n = n;
	}
	/* Even within 1/16 (or no lighter sibling): nothing to escape from. */
	even = best == own || (nA && best_B * nA * 16 >= A * best_n * 15);
	if (even && oc->stuck_since)
		WRITE_ONCE(oc->stuck_since, 0);
	if (tctx->bal_at && clock_since(now, tctx->bal_at) < BAL_COOL_NS)
		return own;
	if (!even && bal_fits(A, nA, best_B, best_n, w, 1, 2))
		goto move;
	if (from) {
		far = balance_node(p, w, own, node, from);
		if (far >= 0 && !mem_keeps(tctx, node, now, commit)) {
			best = far;
			goto move;
		}
	}
	if (even)
		return own;
	if (!oc->stuck_since) {
		WRITE_ONCE(oc->stuck_since, now);
		return own;
	}
	if (clock_since(now, oc->stuck_since) < BAL_STUCK_NS ||
	    !bal_fits(A, nA, best_B, best_n, w, 5, 4))
		return own;
move:
	if (!commit)
		return best;	/* dispatch asking (keep_first): enqueue moves it */
	WRITE_ONCE(oc->stuck_since, 0);
	tctx->bal_at = now;
	/* Count it there now, so the next task to leave sees the move. */
	rq_move(tctx, best);
	stat_inc(STAT_BALANCE);
	return best;
}

#endif /* __NIMBLE_BALANCE_BPF_H */
