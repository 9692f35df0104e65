/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where a CPU looking for work takes it from, in order:
 *   0. its own wake queue, if its head's deadline is no later than the LLC
 *      DSQ head's (cpu_dsq.bpf.h);
 *   1. its own LLC: the LLC DSQ and the shared wakequeue, whichever head has
 *      waited longer, so neither can starve the other; then the own queues
 *      of the LLC's other CPUs;
 *   2. the other LLCs of its node, in steal order, the same way;
 *   3. only if it is going idle: LLCs of other nodes nearest first (their
 *      LLC DSQ, swq, then their CPUs' own queues), each if the NUMA gate
 *      lets the task cross.
 * Plus the periodic help from ops.tick for tasks left waiting, on the LLC
 * DSQ or the CPU's own queue.
 */
#ifndef __NIMBLE_DISPATCH_BPF_H
#define __NIMBLE_DISPATCH_BPF_H

#include "nimble.bpf.h"
#include "stats.bpf.h"
#include "numa_moves.bpf.h"
#include "llc_dsq.bpf.h"
#include "swq.bpf.h"
#include "balance.bpf.h"
#include "vtime.bpf.h"

/* @cpu takes the older head of @llc's two queues (same node). */
__noinline bool take_from_llc(s32 cpu, u32 llc)
{
	u64 dsq = llc_dsq(llc);
	bool in_llc = llcq_waiting(llc);
	bool in_swq = swq_busy(llc);

	if (in_swq && (!in_llc || swq_head_since(cpu, llc) <= queue_head_since(dsq))) {
		if (swq_pull(cpu, llc))
			return true;
		in_swq = false;	/* tried */
	}
	/* move_to_local skips tasks whose affinity excludes this CPU. */
	if (in_llc && scx_bpf_dsq_move_to_local(dsq, 0))
		return true;
	return in_swq && swq_pull(cpu, llc);
}

/*
 * Cross-node pull from @victim's queues, for the NUMA gate's verdict: its
 * LLC DSQ, its swq shards, then its CPUs' own queues (where wakeups that
 * found no idle CPU on their node wait: without them an idle node never
 * saw a busy node's waiting wakees, tbench at 8 clients on n2l4).
 */
__noinline bool pull_remote_llc(s32 cpu, u32 victim, u32 node, bool cold_only)
{
	struct llc_bits *b;
	u32 s, i, n, at, d, last = 0;
	s32 c;

	if (llcq_waiting(victim) && pull_remote(llc_dsq(victim), cpu, node, cold_only))
		return true;
	if (swq_busy(victim)) {
		bpf_for(s, 0, shards_of(victim)) {
			if (pull_remote(swq_dsq(victim, s), cpu, node, cold_only))
				return true;
		}
	}
	if (!cpuq_waiting(victim))
		return false;
	/* The victim's CPUs with tasks on their own queue, by its bitmap. */
	victim &= MAX_LLCS - 1;
	b = &llc_cpuq[llc_idx(victim)];
	n = llc_nr_cpus[victim];
	at = n - 1;
	bpf_for(i, 0, n) {
		c = llc_bits_next(b, victim, at);
		if (c < 0)
			return false;
		at = cpu_pos[c & (MAX_CPUS - 1)];
		d = ring_after(n, n - 1, at);
		if (d <= last)
			return false;	/* went round */
		last = d;
		if (scx_bpf_dsq_nr_queued(cpu_dsq(c)) &&
		    pull_remote(cpu_dsq(c), cpu, node, cold_only))
			return true;
	}
	return false;
}

/*
 * Move a task this CPU may run to its local DSQ, in the order above. A CPU
 * whose task merely used up its slice (@going_idle false) keeps that task
 * rather than take one from another node.
 */
__noinline bool consume_llcs(s32 cpu, bool going_idle)
{
	struct numa_snap *snap = NULL;
	u32 i, own, victim, node, vnode;
	enum numa_verdict v;
	bool refused = false;

	if (!valid_cpu(cpu))
		return false;
	own = llc_of(cpu);
	node = node_of(cpu);
	if (own >= MAX_LLCS)
		return false;
	if (cpuq_take_own(cpu, llc_dsq(own)))
		return true;
	bpf_for(i, 0, nr_llcs) {
		if (i >= MAX_LLCS)
			break;
		victim = steal_victim(own, i);
		vnode = node_of_llc(victim);
		if (vnode == node) {
			if (take_from_llc(cpu, victim) || cpuq_steal_in(cpu, victim))
				return true;
			continue;
		}
		if (!llcq_waiting(victim) && !swq_busy(victim) && !cpuq_waiting(victim))
			continue;
		if (!going_idle)
			break;	/* steal order: only other nodes are left */
		if (!snap)
			snap = numa_snapshot(NULL, cpu);
		v = snap ? numa_pull_ok(snap, node, vnode, true) : NUMA_KEEP;
		if (v == NUMA_KEEP) {
			refused = true;
			continue;
		}
		if (pull_remote_llc(cpu, victim, node, v == NUMA_GO_COLD))
			return true;
	}
	if (refused)
		nstat_inc(node, NSTAT_REFUSED);
	return false;
}

/*
 * The CPU-bound @prev used up its slice on @cpu: whether it should run on
 * rather than go behind the queue. Dispatch runs before @prev is queued
 * again, so taking the LLC DSQ's head unasked would hand the CPU to a
 * waiter with a later deadline. @prev runs on if its next deadline is no
 * later than the heads of its LLC DSQ and of its CPU's own queue (or
 * nothing waits there), and neither the balance nor the NUMA rule would
 * move it. A busy CPU does not take another LLC's waiters: that swapped
 * tasks between LLCs by count, whatever their weight (1700 moves in 12 s,
 * nice 0 got 1.3x nice 6's CPU, EEVDF 3.4x, with 16 loops on l2); moving
 * load between LLCs is balance_llc's job, by weight, and idle CPUs steal.
 */
__noinline bool keep_first(s32 cpu, struct task_struct *prev __arg_trusted)
{
	struct task_ctx *tctx = lookup_task_ctx(prev);
	struct task_struct *head;
	u32 llc = llc_of(cpu);
	bool waits = false;
	u64 first = 0;

	if (!tctx || tctx->full_slices < HOG_SLICES || !tctx->run_start || swq_busy(llc))
		return false;
	head = __COMPAT_scx_bpf_dsq_peek(llc_dsq(llc));
	if (head) {
		first = head->scx.dsq_vtime;
		waits = true;
	}
	head = cpu_queues ? __COMPAT_scx_bpf_dsq_peek(cpu_dsq(cpu)) : NULL;
	if (head && (!waits || time_before(head->scx.dsq_vtime, first))) {
		first = head->scx.dsq_vtime;
		waits = true;
	}
	if (waits && time_after(deadline_if_requeued(prev, tctx, cpu, now_ns()), first))
		return false;
	return balance_llc(prev, llc, false) == llc && !push_candidate(prev);
}

/* kick_for_waiters() for the head of @dsq_id, if any. */
static __always_inline void kick_for_head(s32 cpu, u64 dsq_id, bool overloaded)
{
	struct task_struct *p;
	struct task_ctx *tctx;

	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		tctx = lookup_task_ctx(p);
		if (tctx && (overloaded ||
			     clock_since(now_ns(), tctx->queued_at) >= numa_patience_ns))
			kick_idle_cpu(p, cpu, tctx, true);
		break;	/* the head only: first in line */
	}
}

/*
 * From ops.tick on a busy CPU of a NUMA machine: if the first task of its
 * LLC DSQ, or of its own wake queue, has waited numa_patience_ns, or the
 * node has been overloaded that long, kick an idle CPU of another node that
 * may take it (it pulls in its dispatch). The periodic balancing of a
 * loaded node.
 */
static __always_inline void kick_for_waiters(s32 cpu)
{
	bool in_llc, in_own;
	u32 llc;

	if (nr_nodes < 2 || !valid_cpu(cpu))
		return;
	llc = llc_of(cpu);
	in_llc = llcq_waiting(llc);
	in_own = cpuq_mine(cpu);
	if (!in_llc && !in_own)
		return;
	if (in_llc)
		kick_for_head(cpu, llc_dsq(llc), node_overloaded_long(node_of(cpu)));
	else
		kick_for_head(cpu, cpu_dsq(cpu), node_overloaded_long(node_of(cpu)));
}

#endif /* __NIMBLE_DISPATCH_BPF_H */
