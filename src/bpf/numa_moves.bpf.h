/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The task moves across nodes, each decided by the NUMA gate
 * (numa_gate.bpf.h): fork placement, the push of a CPU-bound task to an idle
 * CPU of another node, and the pull by a CPU going idle from another node's
 * queue, locality first.
 */
#ifndef __NIMBLE_NUMA_MOVES_BPF_H
#define __NIMBLE_NUMA_MOVES_BPF_H

#include "nimble.bpf.h"
#include "stats.bpf.h"
#include "vtime.bpf.h"
#include "idle.bpf.h"
#include "numa_gate.bpf.h"
#include "mem_locality.bpf.h"
#include "numa_swap.bpf.h"

/*
 * Claim an idle CPU on another node than @from, nearest node first, where
 * the gate lets the task go (@overload_ok: see numa_pull_ok). With !@claim
 * only look: return the first node the task may go to, claiming nothing.
 */
static s32 pick_idle_remote(struct task_struct *p, struct task_ctx *tctx, u32 from,
			    bool overload_ok, bool claim)
{
	struct numa_snap *s;
	u32 i, n;
	s32 cpu;

	s = numa_snapshot(NULL, -1);
	if (!s)
		return -ENOENT;
	bpf_for(i, 1, nr_nodes) {
		n = node_by_distance(from, i);
		if (!s->idle[n & (MAX_NODES - 1)])
			continue;
		if (numa_pull_ok(s, n, from, overload_ok) == NUMA_KEEP)
			continue;
		if (!claim)
			return n;
		cpu = pick_idle_in(tctx, p->cpus_ptr, node_mask(n));
		if (cpu >= 0)
			return cpu;
	}
	return -ENOENT;
}

/*
 * select_cpu for a forked task: its memory node if known and the rule lets
 * it go there (mem_move_cpu()); else the node from fork_node(), given the
 * child's preferred node (the memory node, or for a new thread of a process
 * holding memory, its parent's: thread_pref_node()). Then the usual idle
 * pick near the parent if it stays, or any idle CPU of the chosen node.
 * Exec is not seen here: sched_ext does not call ops.select_cpu() for
 * WF_EXEC, so a task keeps the placement of its fork.
 */
static s32 place_forked(struct task_struct *p, s32 prev, struct task_ctx *tctx)
{
	u32 from, to;
	s32 cpu, pref;

	if (!valid_cpu(prev))
		return -EINVAL;
	from = node_of(prev);
	/* A new thread of a process whose memory node is known: there, if it may. */
	mem_refresh(p, tctx);
	cpu = mem_move_cpu(p, tctx, prev, false, true);
	if (cpu >= 0) {
		nstat_inc(from, NSTAT_FORK_REMOTE);
		return cpu;
	}
	pref = tctx->mem_node >= 0 ? tctx->mem_node : thread_pref_node(p, from);
	to = fork_node(p, tctx, from, pref);
	tctx->home = to;
	if (to == from) {
		nstat_inc(from, NSTAT_FORK_LOCAL);
		return pick_idle_near(p, prev, tctx);
	}
	nstat_inc(from, NSTAT_FORK_REMOTE);
	return pick_idle_in(tctx, p->cpus_ptr, node_mask(to));
}

/*
 * Tasks that use up their slices without sleeping are CPU-bound: only they
 * are pushed (a task that sleeps often may overrun one slice by chance, and
 * under a hypervisor a steal of host time looks like one).
 */
#define NUMA_PUSH_MIN_SLICES	2
/*
 * How many slice ends in a row the rule must let a task go before it is
 * pushed. The kernel moves a running task (active balancing) only after
 * cache_nice_tries + 2 failed balance attempts in a row (2 + 2 at NUMA
 * levels), so a shell or a kernel thread that briefly takes a CPU does not
 * split a pair the allowance keeps together; nothing brings it back later.
 * More votes: slower to spread a lasting imbalance (a slice each).
 */
#define NUMA_PUSH_VOTES		5

/*
 * Whether the rule would let a task leave @from if each node's idle CPUs
 * were read from its averaged load instead of the idle mask at this
 * instant (numa_snapshot_averaged()).
 */
static bool push_on_average(u32 from)
{
	struct numa_snap *s = numa_snapshot_averaged();
	u32 i, n;

	if (!s)
		return true;
	bpf_for(i, 1, nr_nodes) {
		n = node_by_distance(from, i) & (MAX_NODES - 1);
		if (s->idle[n] && numa_pull_ok(s, n, from, false) != NUMA_KEEP)
			return true;
	}
	return false;
}

/*
 * A CPU-bound task whose slice ended (@slice_end) goes straight to an idle
 * CPU of another node if the rule lets it go: the kernel's active
 * balancing, at slice granularity. Other re-queues (affinity or priority
 * changes, preemption) and wakeups stay. Returns whether it was pushed.
 */
__noinline bool push_remote(struct task_struct *p __arg_trusted, u64 enq_flags, bool slice_end)
{
	struct task_ctx *tctx = lookup_task_ctx(p);
	s32 cpu, from = scx_bpf_task_cpu(p);
	bool crowded, here;
	u32 node;

	if (!slice_end || !tctx)
		return false;
	/* The partner of a swap, preempted by the task that took its CPU. */
	if (swap_finish(p, tctx, from, enq_flags))
		return true;
	if (nr_nodes < 2 || p->nr_cpus_allowed == 1 || !valid_cpu(from) ||
	    tctx->full_slices < NUMA_PUSH_MIN_SLICES)
		return false;
	/* To the node holding its memory, if that node may take it. */
	cpu = mem_move_cpu(p, tctx, from, true, true);
	if (cpu >= 0)
		goto push;
	/* No idle CPU there: trade with a task that wants this node. */
	if (swap_start(p, tctx, from, enq_flags)) {
		tctx->push_votes = 0;
		return true;
	}
	/*
	 * A crowded node (a task waiting for a CPU) is judged as overloaded
	 * (the kernel: busiest group overloaded, local group with spare
	 * capacity moves a task whatever the idle counts): with the idle-count
	 * rule alone, one shell on the nearest node sent the task to a far one.
	 */
	here = mem_here(p, tctx, node_of(from));
	/*
	 * A crowded node sheds its task whose slice ended at once, unless
	 * that task's memory node is only guessed to be this one (mem_here()
	 * with no node from the scan): nothing would bring it back (no move
	 * back when it wakes or at a slice end, no swap, and userspace moves
	 * a process's memory only once its threads settle on one node). A
	 * waiting task goes instead, pulled once it has waited
	 * numa_patience_ns (kick_for_waiters()), as the kernel's balancer
	 * detaches a queued, cache-cold task rather than the one that just
	 * ran. Traced (numa02, 8 threads on n2l4): every thread that lost its
	 * memory was pushed at a slice end while its process started, one
	 * node crowded for a moment.
	 */
	crowded = node_crowded(node_of(from)) && !(here && tctx->mem_node < 0);
	/* Look first (claiming an idle CPU it then does not use would hide it). */
	if (pick_idle_remote(p, tctx, node_of(from), crowded, false) < 0 ||
	    (!crowded && !push_on_average(node_of(from)))) {
		tctx->push_votes = 0;
		return false;
	}
	/*
	 * An overloaded node (a task waiting for a CPU) sheds at once: the
	 * kernel moves a waiting task without active balancing, nearest
	 * level first.
	 */
	if (++tctx->push_votes < NUMA_PUSH_VOTES && !crowded)
		return false;
	/* Off the node holding its memory: twice the votes, if not crowded. */
	if (here && tctx->push_votes < 2 * NUMA_PUSH_VOTES && !crowded) {
		if (tctx->push_votes == NUMA_PUSH_VOTES)
			nstat_inc(node_of(from), NSTAT_MEM_STAY);
		return false;
	}
	cpu = pick_idle_remote(p, tctx, node_of(from), crowded, true);
	if (cpu < 0)
		return false;
push:
	tctx->push_votes = 0;
	node = node_of(cpu);
	tctx->home = node;	/* moved by the rule */
	nstat_inc(node, NSTAT_PUSH);
	path_queue(tctx, PATH_DIRECT, 0, STAT_INS_DIRECT);
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, enq_slice(p, enq_flags), enq_flags);
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	return true;
}

/*
 * Dispatch found nothing else for the CPU-bound @p's CPU: whether the rule
 * may push it now (an idle CPU of another node it may take). If so its
 * slice is left to end, so enqueue's push_remote() casts the vote; a task
 * kept running never reached enqueue, and a pair the rule lets go stayed
 * together until some other task happened to need the CPU.
 */
__noinline bool push_candidate(struct task_struct *p __arg_trusted)
{
	struct task_ctx *tctx = lookup_task_ctx(p);
	s32 from = scx_bpf_task_cpu(p);

	if (!tctx || nr_nodes < 2 || p->nr_cpus_allowed == 1 || !valid_cpu(from) ||
	    tctx->full_slices + 1 < NUMA_PUSH_MIN_SLICES)
		return false;
	if (mem_move_cpu(p, tctx, from, true, false) >= 0 || swap_partner(p, tctx, from) >= 0)
		return true;
	return pick_idle_remote(p, tctx, node_of(from), node_crowded(node_of(from)), false) >= 0;
}

/*
 * Locality first (seed 003): from another node's queue, take a task whose
 * home is this node; failing that, the one with the least time on its
 * current node (least locality to lose). Scans at most NUMA_PULL_SCAN tasks
 * in queue order, and only tasks this CPU may run (@cold_only: that have
 * waited numa_patience_ns, cache-cold in the kernel's terms).
 */
__noinline bool pull_remote(u64 dsq_id, s32 cpu, u32 node, bool cold_only)
{
	struct task_struct *p;
	struct task_ctx *tctx;
	u64 best_since = 0, mem_since = 0, now = now_ns();
	s32 best_pid = -1, mem_pid = -1;
	u32 seen = 0;

	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		if (++seen > NUMA_PULL_SCAN)
			break;
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		tctx = lookup_task_ctx(p);
		if (!tctx || (cold_only && clock_since(now, tctx->queued_at) < numa_patience_ns))
			continue;
		if (tctx->home == node) {
			if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
				nstat_inc(node, NSTAT_HOME_RETURN);
				nstat_inc(node, NSTAT_PULL);
				return true;
			}
			continue;
		}
		/* Off the node holding its memory only if no other task can go. */
		if (mem_here(p, tctx, tctx->rq_node)) {
			if (mem_pid < 0 || tctx->node_since > mem_since) {
				mem_pid = p->pid;
				mem_since = tctx->node_since;
			}
			continue;
		}
		if (best_pid < 0 || tctx->node_since > best_since) {
			best_pid = p->pid;
			best_since = tctx->node_since;
		}
	}
	if (best_pid < 0)
		best_pid = mem_pid;
	else if (mem_pid >= 0)
		nstat_inc(node, NSTAT_MEM_STAY);
	if (best_pid < 0)
		return false;
	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		if (p->pid != best_pid)
			continue;
		if (!scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0))
			return false;
		/* Migrated by the rule: this is its home now. */
		tctx = lookup_task_ctx(p);
		if (tctx)
			tctx->home = node;
		nstat_inc(node, NSTAT_PULL);
		return true;
	}
	return false;
}

#endif /* __NIMBLE_NUMA_MOVES_BPF_H */
