/* SPDX-License-Identifier: GPL-2.0 */
/*
 * NUMA swaps: two CPU-bound tasks, each running on the node that holds the
 * other's memory, trade CPUs (the kernel's task_numa_compare() and
 * migrate_swap()). The other memory moves need an idle CPU on the memory
 * node; when both nodes are busy none opens, and nothing sorted numa01's
 * threads once its two buffers sat on two nodes: three of each process's
 * four threads at home and one away, 75 % local, for the whole run.
 *
 * Each CPU posts what its task wants (the node of its memory, if the task
 * is CPU-bound and away from it) when the task starts and at each slice it
 * keeps the CPU; per node and memory node, the CPU that posted last is
 * remembered. A task away from its memory whose slice ends looks up a CPU
 * of its memory node whose task wants this node, claims it (compare and
 * swap: one claim per partner), goes to that CPU's local DSQ and preempts
 * the partner, which sees the claim when it is queued again and goes to
 * the CPU the first one left. Both gain locality; the nodes' loads per CPU
 * must not end further apart than they were (rules.h numa_swap_fits(), the
 * kernel's load_too_imbalanced()).
 */
#ifndef __NIMBLE_NUMA_SWAP_BPF_H
#define __NIMBLE_NUMA_SWAP_BPF_H

#include "nimble.bpf.h"
#include "stats.bpf.h"
#include "vtime.bpf.h"
#include "numa.bpf.h"
#include "mem_locality.bpf.h"

/*
 * A claim the partner has not taken within this long is void: it slept or
 * left instead of being queued again (its CPU is then free for another
 * claim). Longer than a preemption takes under TCG, where 20 ms voided
 * claims of partners still on their way (a CPU going idle then pulled
 * them home instead, a round later); on hardware a void claim holds a
 * CPU for at most this long.
 */
#define SWAP_CLAIM_NS	(50ULL * 1000 * 1000)

/* One cache line per CPU, written by the CPU (post) and by one claimer. */
/* Nodes and CPUs are stored plus one: the zeroed map means none. */
struct swap_post {
	s32 want;	/* 1 + node of the running task's memory, away from it; 0: none */
	s32 by;		/* 1 + CPU whose task claimed this one's; 0: none */
	u32 pid;	/* the running task */
	u32 w;		/* its load (hog_w) */
	u64 at;		/* when claimed */
	u64 pad[5];
};
struct swap_post swap_posts[MAX_CPUS];

/* Per node and memory node: 1 + the CPU that posted last, 0: none. */
s32 swap_cpus[MAX_NODES][MAX_NODES];

static __always_inline struct swap_post *swap_post_of(s32 cpu)
{
	barrier_var(cpu);
	return &swap_posts[cpu & (MAX_CPUS - 1)];
}

/*
 * The memory node @p wants on @cpu: CPU-bound (a load in hog_load, which
 * only tasks past HOG_SLICES slices without a sleep carry), movable and
 * away from it.
 */
static __always_inline s32 swap_want(struct task_struct *p, struct task_ctx *tctx, s32 cpu)
{
	s32 mem = tctx->mem_node;

	if (mem < 0 || mem >= (s32)nr_nodes || (u32)mem == node_of(cpu) ||
	    p->nr_cpus_allowed == 1 || !tctx->hog_w)
		return -1;
	return mem;
}

/* @p starts, or runs another slice, on @cpu: post what it wants. */
static __always_inline void swap_post(struct task_struct *p, struct task_ctx *tctx, s32 cpu)
{
	struct swap_post *s;
	s32 want;
	u32 node;

	if (nr_nodes < 2)
		return;
	s = swap_post_of(cpu);
	want = swap_want(p, tctx, cpu);
	node = node_of(cpu);
	if (want < 0) {
		if (READ_ONCE(s->want))
			WRITE_ONCE(s->want, 0);
		return;
	}
	s->pid = p->pid;
	s->w = tctx->hog_w;
	WRITE_ONCE(s->want, want + 1);
	swap_cpus[node & (MAX_NODES - 1)][want & (MAX_NODES - 1)] = cpu + 1;
}

/* The task on @cpu stops: it wants nothing there any more. */
static __always_inline void swap_unpost(s32 cpu)
{
	struct swap_post *s = swap_post_of(cpu);

	if (nr_nodes > 1 && READ_ONCE(s->want))
		WRITE_ONCE(s->want, 0);
}

/* A CPU whose task would trade places with @p (on @from), or -1. */
static __always_inline s32 swap_partner(struct task_struct *p, struct task_ctx *tctx, s32 from)
{
	s32 want = swap_want(p, tctx, from), c;
	u32 here = node_of(from);
	struct swap_post *s;

	if (want < 0)
		return -1;
	c = swap_cpus[want & (MAX_NODES - 1)][here & (MAX_NODES - 1)] - 1;
	if (!valid_cpu(c) || node_of(c) != (u32)want)
		return -1;
	s = swap_post_of(c);
	if (READ_ONCE(s->want) != (s32)here + 1 || !bpf_cpumask_test_cpu(c, p->cpus_ptr))
		return -1;
	if (s->by && clock_since(now_ns(), s->at) < SWAP_CLAIM_NS)
		return -1;
	if (!numa_swap_fits(node_ctx(here)->hog_load, node_cap(here),
			    node_ctx(want)->hog_load, node_cap(want), tctx->hog_w, s->w))
		return -1;
	return c;
}

/* Queue @p on @cpu's local DSQ, counted there; @preempt its task. */
static __always_inline void swap_go(struct task_struct *p, struct task_ctx *tctx, s32 cpu,
				    u64 enq_flags, bool preempt)
{
	u32 node = node_of(cpu);

	rq_move(tctx, llc_of(cpu));
	tctx->home = node;
	nstat_inc(node, NSTAT_SWAP);
	path_queue(tctx, PATH_DIRECT, 0, STAT_INS_DIRECT);
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, enq_slice(p, enq_flags),
			   enq_flags | (preempt ? SCX_ENQ_PREEMPT : 0));
	if (!preempt)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

/*
 * @p, whose slice ended on @from: trade places with a partner if there is
 * one. True: @p is queued on the partner's CPU.
 */
static bool swap_start(struct task_struct *p, struct task_ctx *tctx, s32 from, u64 enq_flags)
{
	s32 c = swap_partner(p, tctx, from), by;
	struct swap_post *s;

	if (c < 0)
		return false;
	s = swap_post_of(c);
	by = s->by;
	if (by && clock_since(now_ns(), s->at) < SWAP_CLAIM_NS)
		return false;
	if (__sync_val_compare_and_swap(&s->by, by, from + 1) != by)
		return false;	/* another task claimed it first */
	s->at = now_ns();
	swap_go(p, tctx, c, enq_flags, true);
	return true;
}

/*
 * @p is queued again on @cpu, whose task a swap claimed: if @p is that
 * task, it goes to the CPU the claimer left. True: queued there.
 */
static bool swap_finish(struct task_struct *p, struct task_ctx *tctx, s32 cpu, u64 enq_flags)
{
	struct swap_post *s;
	s32 to;

	if (nr_nodes < 2 || !valid_cpu(cpu))
		return false;
	s = swap_post_of(cpu);
	to = READ_ONCE(s->by) - 1;
	if (to < 0 || s->pid != p->pid)
		return false;
	WRITE_ONCE(s->by, 0);
	if (!valid_cpu(to) || clock_since(now_ns(), s->at) >= SWAP_CLAIM_NS ||
	    tctx->mem_node != (s32)node_of(to) || !bpf_cpumask_test_cpu(to, p->cpus_ptr))
		return false;
	swap_go(p, tctx, to, enq_flags, false);
	return true;
}

#endif /* __NIMBLE_NUMA_SWAP_BPF_H */
