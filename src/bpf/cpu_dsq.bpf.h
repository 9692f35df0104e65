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
 *
 * A CPU that another class holds (RT, deadline) serves none of these:
 * wakeups skip it and what waited there is handed back (classes.bpf.h,
 * rescue_taken()). Which CPUs of an LLC have tasks here is kept as a
 * bitmap per LLC (llc_cpuq), so those walks cost the LLC's size at most.
 */
#ifndef __NIMBLE_CPU_DSQ_BPF_H
#define __NIMBLE_CPU_DSQ_BPF_H

#include "nimble.bpf.h"
#include "stats.bpf.h"
#include "vtime.bpf.h"
#include "idle.bpf.h"
#include "topo.bpf.h"
#include "classes.bpf.h"

/* Above the LLC DSQs (ids 0..MAX_LLCS) and the swq's (SWQ_DSQ_BASE + ...). */
#define CPU_DSQ_BASE	(1ULL << 20)

static __always_inline u64 cpu_dsq(s32 cpu)
{
	return CPU_DSQ_BASE + (u32)cpu;
}

/* Whether tasks wait on @cpu's own queue (none while the queues are off). */
static __always_inline bool cpuq_mine(s32 cpu)
{
	return cpu_queues && scx_bpf_dsq_nr_queued(cpu_dsq(cpu)) > 0;
}

/* Per LLC: which of its CPUs may have tasks on their own queue (a hint). */
struct llc_bits llc_cpuq[MAX_LLCS];

/*
 * Per CPU: the tasks counted on its own queue, from cpuq_insert() until
 * they run or leave (cpuq_left()); one cache line each. A bit is cleared
 * only while this is 0, not by the queue's length: an insert from
 * ops.enqueue lands in the DSQ after enqueue returns, so a thief that saw
 * the queue empty in between cleared the bit of a task then queued, and
 * no other CPU looked there again. The pinned ping-pong pairs on CPUs 1-2
 * waited 4-11 ms that way, the other CPU idle (bpf_printk: its dispatch
 * went idle with the queue holding 1 task, bit 0).
 */
struct cpuq_count {
	s64 n;
	u64 pad[7];
};
struct cpuq_count cpuq_count[MAX_CPUS];

static __always_inline s64 *cpuq_nr_of(s32 cpu)
{
	barrier_var(cpu);
	return &cpuq_count[cpu & (MAX_CPUS - 1)].n;
}

/*
 * @cpu's queue was seen empty: clear its bit, then look at its count (both
 * sides use atomics, so an insert counted before the clear keeps its bit).
 */
static __always_inline void cpuq_bit_clear(s32 cpu)
{
	struct llc_bits *b = &llc_cpuq[llc_idx(llc_of(cpu))];

	llc_bit_put(b, cpu, false);
	if (READ_ONCE(*cpuq_nr_of(cpu)) > 0)
		llc_bit_put(b, cpu, true);
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
 * How many more tasks may wait on @prev's own queue than on another CPU of
 * its LLC before a wakeup goes to that one instead. Wakeups with no idle
 * CPU wait where they last ran, so tasks that start together (threads made
 * on a busy machine all start on their parent's CPU) stayed together for
 * good: six 10 ms sleepers on one CPU's queue behind a CPU loop woke 10-30
 * ms late and ran 0.6x the rounds they did under EEVDF, whose balancer
 * spreads them. Higher keeps more wakeups where their cache is.
 */
#define CPUQ_SPREAD_GAP	2

/*
 * The own queue a wakeup of @p (no idle CPU, last on @prev) waits on:
 * @prev's, unless a CPU of @prev's LLC picked at random (two choices, as
 * the kernel's wake_wide() spreads wakee fan-out) has CPUQ_SPREAD_GAP
 * fewer tasks waiting and may run @p.
 */
static __always_inline s32 cpuq_spread(struct task_struct *p, s32 prev)
{
	u32 llc = llc_of(prev), n = llc_nr_cpus[llc_idx(llc)], pos;
	s64 mine = scx_bpf_dsq_nr_queued(cpu_dsq(prev));
	s32 alt;

	if (mine < CPUQ_SPREAD_GAP || n < 2)
		return prev;
	pos = (cpu_pos[prev & (MAX_CPUS - 1)] + 1 + bpf_get_prandom_u32() % (n - 1)) % n;
	alt = llc_cpu_at(llc, pos);
	if (alt < 0 || alt == prev || !bpf_cpumask_test_cpu(alt, p->cpus_ptr) ||
	    scx_bpf_dsq_nr_queued(cpu_dsq(alt)) + CPUQ_SPREAD_GAP > mine)
		return prev;
	stat_inc(STAT_CPUQ_SPREAD);
	return alt;
}

/*
 * select_cpu found no idle CPU for @p: the CPU whose own queue it should
 * wait on. The sync waker's CPU (sync_waker_cpu(): a node within the
 * reclaim distance, nothing on its local DSQ) if its own queue holds no
 * more tasks than @prev's (or always, with --wake-sync), so a pair takes
 * turns on one CPU without piling onto a busier one; else @prev (or a
 * sibling with a shorter queue, cpuq_spread()). The wakee counts as the
 * waker's. If another class holds the CPU
 * chosen, the wakee waits on the LLC's queue instead (HINT_SHARED).
 */
static __always_inline s32 cpuq_target(struct task_struct *p, struct task_ctx *tctx,
				       s32 prev, u64 wake_flags)
{
	s32 cpu;

	if (!cpu_queues)
		return prev;
	cpu = sync_waker_cpu(p, prev, wake_flags);
	if (cpu >= 0 && cpu != prev &&
	    scx_bpf_dsq_nr_queued(cpu_dsq(cpu)) > scx_bpf_dsq_nr_queued(cpu_dsq(prev))) {
		if (wake_sync)
			stat_inc(STAT_WAKE_SYNC);
		else
			cpu = -1;
	}
	if (cpu < 0)
		cpu = cpuq_spread(p, prev);
	else
		tctx->hint = HINT_WAKER;	/* enqueue: count it as the waker's */
	if (cpu_taken(cpu)) {
		tctx->hint = HINT_SHARED;
		stat_inc(STAT_TAKEN_SKIP);
	}
	return cpu;
}

/* @p left its CPU queue (ran, was dequeued, exited): stop counting it there. */
static __always_inline void cpuq_left(struct task_ctx *tctx)
{
	s32 cpu = tctx->cpuq - 1;

	tctx->cpuq = 0;
	if (cpu >= 0 && valid_cpu(cpu)) {
		__sync_fetch_and_add(&llc_ctx(llc_of(cpu))->cpuq_nr, -1);
		__sync_fetch_and_add(cpuq_nr_of(cpu), -1);
	}
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
	scx_bpf_dsq_insert_vtime(p, cpu_dsq(cpu), enq_slice(p, enq_flags), dl, enq_flags);
	tctx->cpuq = cpu + 1;
	__sync_fetch_and_add(&llc_ctx(llc_of(cpu))->cpuq_nr, 1);
	__sync_fetch_and_add(cpuq_nr_of(cpu), 1);	/* before the bit: cpuq_bit_clear() */
	llc_bit_put(&llc_cpuq[llc_idx(llc_of(cpu))], cpu, true);
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
 * How many tasks of the LLC queue a CPU looks at for the first it may run,
 * to weigh against its own queue's head. A head it may not run (a task
 * bound to a CPU another class holds) hid the own queue behind it: sleepers
 * waited 0.5-0.9 s, until the kernel's ext dl_server ran that head.
 */
#define LLC_HEAD_SCAN	4

/* The deadline of the first of @dsq_id's tasks @cpu may run (within the scan), if any. */
static __always_inline bool first_runnable_dl(u64 dsq_id, s32 cpu, u64 *dl)
{
	struct task_struct *p;
	u32 seen = 0;

	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		if (bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
			*dl = p->scx.dsq_vtime;
			return true;
		}
		if (++seen >= LLC_HEAD_SCAN)
			break;
	}
	return false;
}

/*
 * @cpu looks for work: its own queue's head if its deadline is no later
 * than that of the first task of @llc_dsq_id that @cpu may run. Returns
 * whether a task was moved to its local DSQ.
 */
__noinline bool cpuq_take_own(s32 cpu, u64 llc_dsq_id)
{
	struct task_struct *mine;
	u64 dl;

	if (!cpu_queues)
		return false;
	mine = __COMPAT_scx_bpf_dsq_peek(cpu_dsq(cpu));
	if (!mine) {
		cpuq_bit_clear(cpu);
		return false;
	}
	if (first_runnable_dl(llc_dsq_id, cpu, &dl) && time_before(dl, mine->scx.dsq_vtime))
		return false;
	return scx_bpf_dsq_move_to_local(cpu_dsq(cpu), 0);
}

/*
 * Move the first task of @c's own queue that @cpu may run to @cpu's local
 * DSQ. A queue found empty loses its bit.
 */
static __always_inline bool cpuq_take(s32 cpu, s32 c)
{
	if (scx_bpf_dsq_nr_queued(cpu_dsq(c)) <= 0) {
		cpuq_bit_clear(c);
		return false;
	}
	if (!scx_bpf_dsq_move_to_local(cpu_dsq(c), 0))
		return false;
	if (c != cpu)
		stat_inc(STAT_CPUQ_STEAL);
	return true;
}

/*
 * @cpu found nothing it may run in @llc's DSQ (or swq): take the head of a
 * CPU queue in @llc, its own first (whose head may have lost to an LLC
 * head this CPU may not run), then the next CPUs' in ring order from its
 * own place (so thieves spread), by the LLC's bitmap: at most the LLC's
 * CPUs are looked at. Only tasks that may run on @cpu move.
 */
__noinline bool cpuq_steal_in(s32 cpu, u32 llc)
{
	struct llc_bits *b;
	u32 start, at, i, n, d, last = 0;
	s32 c;

	if (!cpu_queues || llc >= MAX_LLCS || llc_ctx(llc)->cpuq_nr <= 0)
		return false;
	if (llc_of(cpu) == llc && cpuq_take(cpu, cpu))
		return true;
	b = &llc_cpuq[llc_idx(llc)];
	n = llc_nr_cpus[llc];
	start = at = llc_of(cpu) == llc ? cpu_pos[cpu & (MAX_CPUS - 1)] : n - 1;
	bpf_for(i, 0, n) {
		c = llc_bits_next(b, llc, at);
		if (c < 0 || c == cpu)
			return false;
		at = cpu_pos[c & (MAX_CPUS - 1)];
		d = ring_after(n, start, at);
		if (d <= last)
			return false;	/* went round */
		last = d;
		if (cpuq_take(cpu, c))
			return true;
	}
	return false;
}

/*
 * If another class holds @c, hand what waits on its own queue back to
 * enqueue. A lone task bound to @c stays (it can run nowhere else).
 */
static __always_inline void rescue_from(s32 c)
{
	s64 n = scx_bpf_dsq_nr_queued(cpu_dsq(c));
	struct task_struct *head;

	if (!cpu_taken(c))
		return;
	if (n <= 0) {
		cpuq_bit_clear(c);
		return;
	}
	head = __COMPAT_scx_bpf_dsq_peek(cpu_dsq(c));
	if (n == 1 && head && head->nr_cpus_allowed == 1)
		return;
	scx_bpf_dsq_reenq(cpu_dsq(c), 0);
	stat_add(STAT_RESCUE, n);
}

/*
 * From @cpu's tick: look at one sibling of its LLC, a different one each
 * tick (so another class taking a CPU, or giving it back, is seen within
 * a few ticks: llc_cap()), and at the next two CPUs with tasks on their own
 * queue. If another class holds one of those, hand its queue back to
 * enqueue (scx_bpf_dsq_reenq(), kernel 7.1), which queues them for the
 * whole LLC (reenq_place()): a task waits there a tick of a sibling at
 * most, not the taker's whole run. Three CPUs a tick, whatever the LLC.
 */
static __always_inline void rescue_taken(s32 cpu)
{
	struct llc_bits *b;
	u32 llc, at, i, n;
	s32 c;

	if (!valid_cpu(cpu))
		return;
	llc = llc_idx(llc_of(cpu));
	n = llc_nr_cpus[llc];
	at = cpu_pos[cpu & (MAX_CPUS - 1)];
	if (n > 1) {
		c = llc_cpu_at(llc, (at + 1 + (u32)(now_ns() >> 22) % (n - 1)) % n);
		if (c >= 0 && c != cpu) {
			if (cpu_queues)
				rescue_from(c);	/* notes whether it is taken */
			else
				cpu_taken(c);
		}
	}
	if (!cpu_queues || llc_ctx(llc)->cpuq_nr <= 0)
		return;
	b = &llc_cpuq[llc];
	bpf_for(i, 0, 2) {
		c = llc_bits_next(b, llc, at);
		if (c < 0 || c == cpu)
			return;
		at = cpu_pos[c & (MAX_CPUS - 1)];
		rescue_from(c);
	}
}

#endif /* __NIMBLE_CPU_DSQ_BPF_H */
