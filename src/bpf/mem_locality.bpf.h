/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Memory locality: prefer the node that holds most of a task's memory.
 *
 * The kernel learns that node from NUMA hinting faults driven by the fair
 * class's tick (task_tick_numa), which never runs under sched_ext. Here
 * userspace reads /proc/PID/numa_maps of the processes that run and hold
 * memory (src/memloc/) and writes the node per process into mem_nodes:
 * threads share their memory, as the kernel's numa groups say. Nothing is
 * written while kernel.numa_balancing is 0: then placement is the NUMA
 * gate's alone.
 *
 * The node is a preference, not a binding, as the kernel's
 * numa_preferred_nid: a task goes there (woken, forked as a thread, or
 * pushed when its slice ends) only onto an idle CPU and when the
 * destination may take it (rules.h numa_mem_moves(), the kernel's
 * task_numa_find_cpu()). Once there, the NUMA rule still spreads load
 * as it would, but takes other tasks first: a pull picks another task if
 * it can, a push needs twice the votes (the kernel's load balancer moves
 * a task off its preferred node only after cache_nice_tries failed
 * attempts, migrate_degrades_locality()). While the scan knows no node, a
 * thread gets the same on the node it has run on (mem_here()).
 */
#ifndef __NIMBLE_MEM_LOCALITY_BPF_H
#define __NIMBLE_MEM_LOCALITY_BPF_H

#include "nimble.bpf.h"
#include "stats.bpf.h"
#include "idle.bpf.h"
#include "numa_gate.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_MEM_PROCS);
	__type(key, u32);	/* tgid */
	__type(value, struct mem_proc);
} mem_nodes SEC(".maps");

/*
 * Processes in mem_nodes, kept by userspace: 0 skips the lookup (one hash
 * lookup per runnable otherwise, on NUMA machines only).
 */
volatile u32 mem_nr;
/*
 * 1 while memory locality is on and kernel.numa_balancing is set (userspace,
 * every scan round): the kernel's NUMA balancing would be learning
 * preferences then, so thread_pref_node() may stand in for one.
 */
volatile u32 mem_follow;

/* The node holding most of @p's process's memory, -1: not known. */
static __always_inline s32 mem_node_of(struct task_struct *p)
{
	struct nimble_ctl *k;
	u32 tgid = p->tgid;
	struct mem_proc *m;

	if (nr_nodes < 2 || !mem_nr)
		return -1;
	k = ctl();
	if (!k || !k->mem_locality)
		return -1;
	m = bpf_map_lookup_elem(&mem_nodes, &tgid);
	return m && m->node >= 0 && m->node < (s32)nr_nodes ? m->node : -1;
}

/*
 * Whether @p's process holds MEM_MIN_PAGES of anonymous memory or more while
 * the kernel's NUMA balancing would be learning where (mem_follow): its
 * threads touched that memory where they ran, whether or not the scan has
 * found a node for the whole process yet.
 */
static __always_inline bool mem_holder(struct task_struct *p)
{
	struct mm_struct *mm;
	struct nimble_ctl *k;

	if (!mem_follow)
		return false;
	k = ctl();
	if (!k || !k->mem_locality)
		return false;
	mm = p->mm;
	return mm && mm->rss_stat[MM_ANONPAGES].count >= MEM_MIN_PAGES;
}

/*
 * The node a new thread of @p's process should prefer when userspace has
 * not found its memory yet: its parent's (@from), for a process holding
 * memory (mem_holder()). The kernel's threads inherit the parent's
 * numa_preferred_nid (CLONE_VM), which NUMA balancing learns from hinting
 * faults after about a second; here the first touch is the evidence: a
 * young process's memory sits where its threads ran when they touched it,
 * mostly the parent's node. A new process gets none, as in the kernel (a
 * new address space resets the preference). -1: none.
 */
static __always_inline s32 thread_pref_node(struct task_struct *p, u32 from)
{
	/* Forks are placed by node only on NUMA machines (place_forked()). */
	if (p->pid == p->tgid || !mem_holder(p))
		return -1;
	return from;
}

/*
 * Look the node up again: when the task becomes runnable and once a slice
 * (a CPU-bound thread never wakes). It is its home from then on, so pulls
 * bring it back (pull_remote()).
 */
static __always_inline void mem_refresh(struct task_struct *p, struct task_ctx *tctx)
{
	tctx->mem_node = mem_node_of(p);
	if (tctx->mem_node >= 0)
		tctx->home = tctx->mem_node;
}

/*
 * An idle CPU of @p's memory node to move it to from @from's node, claimed,
 * if the rule lets that node take it (@counted: @p is runnable on @from's
 * node already); -1 otherwise, or when it is there already. With !@claim
 * only look: the node, claiming nothing.
 */
static s32 mem_move_cpu(struct task_struct *p, struct task_ctx *tctx, s32 from,
			bool counted, bool claim)
{
	struct node_group d, g;
	struct numa_level *l;
	struct numa_snap *s;
	u32 src, dst, within = 0;
	s32 cpu;

	if (tctx->mem_node < 0 || !valid_cpu(from) || p->nr_cpus_allowed == 1)
		return -1;
	dst = tctx->mem_node;
	src = node_of(from);
	if (dst == src || dst >= nr_nodes)
		return -1;
	s = numa_snapshot(NULL, -1);
	if (!s || !s->idle[dst & (MAX_NODES - 1)])
		return -1;
	l = level_between(dst, src, &within);
	if (l) {
		group_sum(s, dst, within, &d);
		group_sum(s, src, within, &g);
		if (!numa_mem_moves(numa_rule(), l->imb_numa_nr, &d, &g, counted))
			return -1;
	}
	if (!claim)
		return dst;
	cpu = pick_idle_in(tctx, p->cpus_ptr, node_mask(dst));
	if (cpu >= 0) {
		tctx->home = dst;
		nstat_inc(dst, NSTAT_MEM_MOVE);
	}
	return cpu;
}

/*
 * @ran ns on @cpu by @p, whose memory node is known: counted for that node,
 * and as local if @cpu is on it (the locality --stats shows), and in its
 * process's entry by the node it ran on: userspace moves the memory of a
 * process whose threads settled on another node (src/memloc/migrate.rs).
 */
static __always_inline void mem_account(struct task_struct *p, const struct task_ctx *tctx,
					s32 cpu, u64 ran)
{
	u32 node = tctx->mem_node, tgid = p->tgid, on;
	struct node_stats *s;
	struct mem_proc *m;

	if (tctx->mem_node < 0 || !valid_cpu(cpu))
		return;
	on = node_of(cpu);
	s = bpf_map_lookup_elem(&node_stats, &node);
	if (s) {
		s->cnt[NSTAT_MEM_KNOWN_NS] += ran;
		if (on == node)
			s->cnt[NSTAT_MEM_LOCAL_NS] += ran;
	}
	m = bpf_map_lookup_elem(&mem_nodes, &tgid);
	if (m && on < MAX_NODES)
		__sync_fetch_and_add(&m->ran_ns[on], ran);
}

/* Whether @node holds most of the task's memory. */
static __always_inline bool mem_home(const struct task_ctx *tctx, s32 node)
{
	return tctx->mem_node >= 0 && tctx->mem_node == node;
}

/*
 * Whether @node holds @p's memory as far as the scheduler can tell: the
 * scan's node (mem_home()) or, while the scan knows none for @p's process
 * (young, or memory spread per thread as numa02's private buffers, which
 * numa_maps cannot attribute to a thread), the node a thread of a process
 * holding memory has run on since it was placed (its home): it touched
 * its share there. A single-threaded process waits for the scan, which
 * finds its node in a round or two. The kernel learns the same from a
 * task's own hinting faults (task_numa_placement()), after a second or so.
 * The cheap tests first: pull_remote() asks this of every task it scans.
 */
static __always_inline bool mem_here(struct task_struct *p, const struct task_ctx *tctx,
				     s32 node)
{
	if (tctx->mem_node >= 0)
		return mem_home(tctx, node);
	return mem_follow && tctx->home == node && p->se.sum_exec_runtime &&
	       p->signal->nr_threads > 1 && mem_holder(p);
}

#endif /* __NIMBLE_MEM_LOCALITY_BPF_H */
