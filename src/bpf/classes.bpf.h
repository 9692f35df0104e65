/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Life beside the kernel's higher scheduling classes: a CPU that an RT or
 * deadline task (or the stop class) holds runs none of our tasks until it
 * is given back, apart from the 5 % the kernel's ext dl_server grants (50
 * ms a second, after the rest of the second). Nothing of ours may wait
 * behind it:
 *
 *   - the local DSQ and the running task: the scheduler loads with
 *     SCX_OPS_ALWAYS_ENQ_IMMED (kernel 7.1), so a task on a local DSQ that
 *     cannot run at once, or a running task a higher class preempts with
 *     slice left, comes back to ops.enqueue with SCX_ENQ_REENQ instead of
 *     waiting there; enqueue then queues it where its siblings run it
 *     (reenq_place());
 *   - a CPU's own wake queue (cpu_dsq.bpf.h), which only that CPU serves
 *     while it is busy: new wakeups and re-queues skip a taken CPU
 *     (cpu_taken()); tasks that were waiting when it was taken are handed
 *     back by the next tick of a sibling (rescue_taken() in cpu_dsq.bpf.h:
 *     two siblings looked at per tick, from the LLC's bitmap of CPUs with
 *     queued tasks, so the cost does not grow with the LLC).
 *
 * ops.cpu_release, the old way to hear of it, is deprecated since 6.19;
 * scx_lavd moved to a sched_switch tracepoint, which costs a program run
 * on every context switch of every CPU; scx_bpfland tried SCX_ENQ_IMMED.
 * A CPU going offline unloads the scheduler (the kernel asks for a
 * restart), which hands every queued task back to the kernel.
 */
#ifndef __NIMBLE_CLASSES_BPF_H
#define __NIMBLE_CLASSES_BPF_H

#include "nimble.bpf.h"
#include "topo.bpf.h"
#include "stats.bpf.h"
#include "idle.bpf.h"
#include "numa.bpf.h"

/* The kernel's MAX_RT_PRIO: RT tasks have prio 0-99, deadline ones -1. */
#define NIMBLE_MAX_RT_PRIO	100

/*
 * The stop class (migration/N, stop_machine) outranks RT but holds a CPU
 * for microseconds (moving a running task, a CPU going down): not a
 * taker. Seen as one, a CPU that then went idle stayed "taken" and its
 * node lost a CPU for the NUMA rule (a pair of loops v3 spreads stayed).
 * Each CPU's stop task is its runqueue's rq->stop, read without the rq
 * lock: it is set when the CPU's stopper thread is created and never
 * changed (hotplug parks and unparks that thread). The per-CPU runqueues
 * (common.bpf.h) have a type in the kernel's BTF, so libbpf resolves them
 * from it; the stop_sched_class symbol this compared with before has none
 * (only per-CPU variables do), and a typeless ksym makes libbpf read all
 * of /proc/kallsyms at every load: 7-12 s of each 9-18 s load under TCG.
 */

/* Whether @p, running on @cpu, holds it for a class above sched_ext. */
static __always_inline bool holds_cpu(const struct task_struct *p, s32 cpu)
{
	struct rq *rq;

	if (p->prio >= NIMBLE_MAX_RT_PRIO)
		return false;
	rq = bpf_per_cpu_ptr(&runqueues, cpu);
	return !rq || (void *)rq->stop != (void *)p;
}

/* Per LLC: which of its CPUs another class was last seen holding. */
struct llc_bits llc_taken[MAX_LLCS];

/*
 * Record whether another class holds @cpu; on a change, its LLC's and
 * node's usable CPUs (llc_cap(), node_cap()) change by one. The bit flips
 * with an atomic whose old value says who changed it, so the counts stay
 * exact however many CPUs look at once.
 */
static __always_inline void note_taken(s32 cpu, bool taken)
{
	u32 llc = llc_of(cpu);
	u64 bit, *w = llc_word(&llc_taken[llc_idx(llc)], cpu, &bit);
	s64 d;

	if (!!(READ_ONCE(*w) & bit) == taken)
		return;
	if (taken) {
		if (__sync_fetch_and_or(w, bit) & bit)
			return;
		d = 1;
	} else {
		if (!(__sync_fetch_and_and(w, ~bit) & bit))
			return;
		d = -1;
	}
	__sync_fetch_and_add(&llc_ctx(llc)->taken_nr, d);
	__sync_fetch_and_add(&node_ctx(node_of(cpu))->taken_nr, d);
}

/*
 * Whether @cpu runs an RT or deadline task, as seen now; recorded for the
 * capacity counts. A CPU is also given back when one of our tasks runs on
 * it (ops.running) or it goes idle (ops.dispatch, cpu_given_back()).
 */
static __always_inline bool cpu_taken(s32 cpu)
{
	struct task_struct *curr;
	bool taken = false;

	if (!valid_cpu(cpu))
		return false;
	bpf_rcu_read_lock();
	curr = scx_bpf_cpu_curr(cpu);
	if (curr)
		taken = holds_cpu(curr, cpu);
	bpf_rcu_read_unlock();
	note_taken(cpu, taken);
	return taken;
}

/*
 * @cpu's dispatch found nothing to run after @prev: it goes idle, unless
 * @prev is an RT or deadline task still runnable (the kernel's ext dl_server
 * asked on its CPU). Looking at the CPU's current task here would see @prev
 * itself, whatever it does next.
 */
static __always_inline void cpu_going_idle(s32 cpu, struct task_struct *prev)
{
	note_taken(cpu, prev && prev->on_rq && holds_cpu(prev, cpu));
}

/*
 * ops.enqueue with SCX_ENQ_REENQ: the kernel took @p off a CPU it could
 * not run on at once (a higher class arrived, its local DSQ was busy) or
 * a sibling's tick handed it back (rescue_taken()). An idle CPU of its LLC
 * or node takes it now; else enqueue queues it on its LLC's queue, which
 * every CPU of the LLC serves (HINT_SHARED), never on the CPU it left.
 * Returns whether it was placed.
 */
static __always_inline bool reenq_place(struct task_struct *p, struct task_ctx *tctx)
{
	s32 cpu = scx_bpf_task_cpu(p), idle;

	stat_inc(STAT_REENQ);
	tctx->hint = HINT_SHARED;
	if (!valid_cpu(cpu) || p->nr_cpus_allowed == 1)
		return false;
	idle = pick_idle_in(tctx, p->cpus_ptr, llc_mask(llc_of(cpu)));
	if (idle < 0 && nr_llcs > nr_nodes)
		idle = pick_idle_in(tctx, p->cpus_ptr, node_mask(node_of(cpu)));
	if (idle < 0)
		return false;
	path_queue(tctx, PATH_DIRECT, 0, STAT_INS_DIRECT);
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | idle, slice_ns, 0);
	scx_bpf_kick_cpu(idle, SCX_KICK_IDLE);
	return true;
}

#endif /* __NIMBLE_CLASSES_BPF_H */
