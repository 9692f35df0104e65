/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Wakeup preemption, and CPUs that run only SCHED_IDLE work.
 *
 * Each CPU keeps a record of the task it runs (its deadline, start,
 * request, class, weight and recent CPU use), written by the CPU itself
 * when a task starts and cleared when it stops: a cache line per CPU, read by wakeups that found
 * no idle CPU. The decision is wakeup_preempts() in rules.h (EEVDF's
 * wakeup_preempt_fair(): eligible, earlier deadline, past the running
 * task's protected part or, against a pinned wakee, ahead of its share
 * of the CPU; SCHED_IDLE always loses to other classes), the
 * same function the host tests call. A wakeup refused while the running
 * task was protected is asked again at each of that CPU's ticks
 * (tick_preempt(), the head of its own queue), as EEVDF does.
 *
 * Why the first attempt (a fixed 1 ms deadline gap, no protection) made
 * hackbench 2-4x slower: under overload its tasks never sleep for 8
 * slices, so they count as CPU-bound and start at their finish time, up to
 * max_wait_ns ahead; a wakee starts now, so its deadline beat the running
 * task's on 65 % of the wakeups that found no idle CPU (1 350 of 1 361
 * preempted tasks were CPU-bound, deadline ~1 s ahead). The kernel keeps
 * the running task for its protected slice (RUN_TO_PARITY), and so does
 * this rule now.
 *
 * A CPU whose task is SCHED_IDLE and whose own queue is empty counts as
 * idle for a wakeup of any other class (the kernel's sched_idle_cpu() in
 * select_idle_sibling()): the wakee is put on it with SCX_ENQ_PREEMPT.
 */
#ifndef __NIMBLE_PREEMPT_BPF_H
#define __NIMBLE_PREEMPT_BPF_H

#include "nimble.bpf.h"
#include "topo.bpf.h"
#include "stats.bpf.h"
#include "vtime.bpf.h"
#include "cpu_dsq.bpf.h"

/* The task running on each CPU, as wakeup_preempts() sees it (deadline 0: none of ours). */
struct cpu_cur {
	struct preempt_view v;
	u64 pad[2];
};
_Static_assert(sizeof(struct cpu_cur) == 64, "one cache line per CPU's record");
struct cpu_cur cpu_cur[MAX_CPUS];

/* Per LLC: which of its CPUs run a SCHED_IDLE task now. */
struct llc_bits llc_sidle[MAX_LLCS];

static __always_inline struct cpu_cur *cur_of(s32 cpu)
{
	barrier_var(cpu);
	return &cpu_cur[cpu & (MAX_CPUS - 1)];
}

/*
 * Its recent CPU use (running_ahead() reads it): moved toward 0 for the
 * time since it last ran or was counted (@ran false), toward all of it for
 * the time it ran since (@ran true). Written by the task's own CPU only.
 */
static __always_inline void util_move(struct task_ctx *tctx, u64 now, bool ran)
{
	u64 dt = tctx->util_at ? clock_since(now, tctx->util_at) : UTIL_WINDOW_NS;

	tctx->util = util_toward(tctx->util, ran ? UTIL_ONE : 0, dt);
	tctx->util_at = now;
}

/* @p as a wakee whose deadline is @dl. */
static __always_inline void view_of(struct preempt_view *v, struct task_struct *p,
				    struct task_ctx *tctx, u64 dl)
{
	v->deadline = dl;
	v->start = tctx->vstart;
	v->req = task_request(tctx);
	v->span = request_span(p, tctx);
	v->class = task_class(p, tctx);
	v->util = 0;	/* a running task's only */
	v->weight = tctx_weight(p, tctx);
	v->one_cpu = p->nr_cpus_allowed == 1;
}

/*
 * @p starts on @cpu at @now: record it. A task that came through a
 * deadline queue keeps the deadline it was queued with; one put straight
 * on an idle CPU asks for one request from now.
 */
static __always_inline void cur_running(struct task_struct *p, struct task_ctx *tctx,
					s32 cpu, u64 now)
{
	struct cpu_cur *c = cur_of(cpu);
	u64 dl = tctx->path == PATH_LLC ? tctx->deadline : now + request_span(p, tctx);

	util_move(tctx, now, false);	/* the time it did not run */
	c->v.start = now;
	c->v.req = task_request(tctx);
	c->v.span = request_span(p, tctx);
	c->v.class = task_class(p, tctx);
	c->v.util = tctx->util;
	c->v.weight = tctx_weight(p, tctx);
	WRITE_ONCE(c->v.deadline, dl ? dl : 1);
	llc_bit_put(&llc_sidle[llc_idx(llc_of(cpu))], cpu, c->v.class == TASK_IDLE);
}

/* @p stops on @cpu @now: clear the record. */
static __always_inline void cur_stopping(struct task_ctx *tctx, s32 cpu, u64 now)
{
	struct cpu_cur *c = cur_of(cpu);

	util_move(tctx, now, true);

	WRITE_ONCE(c->v.deadline, 0);
	if (c->v.class == TASK_IDLE)
		llc_bit_put(&llc_sidle[llc_idx(llc_of(cpu))], cpu, false);
}

/* @p, whose slice ended, runs another one on @cpu: its next request. */
static __always_inline void cur_extended(struct task_struct *p, struct task_ctx *tctx,
					 s32 cpu, u64 now)
{
	struct cpu_cur *c = cur_of(cpu);

	util_move(tctx, now, true);
	c->v.start = now;
	c->v.req = task_request(tctx);
	c->v.span = request_span(p, tctx);
	c->v.util = tctx->util;
	c->v.weight = tctx_weight(p, tctx);
	WRITE_ONCE(c->v.deadline, deadline_if_requeued(p, tctx, cpu, now) | 1);
}

/*
 * A wakeup of @p (deadline @dl, no idle CPU found) was queued for @cpu:
 * take @cpu from its task if the rule says so. The record is taken with a
 * compare-and-swap, so one victim is kicked once however many wake.
 */
static __always_inline bool maybe_preempt(struct task_struct *p, struct task_ctx *tctx,
					  s32 cpu, u64 dl)
{
	struct preempt_view w, c;
	struct cpu_cur *cc;
	u32 why;

	if (!wake_preempt || !valid_cpu(cpu))
		return false;
	cc = cur_of(cpu);
	c.deadline = READ_ONCE(cc->v.deadline);
	if (!c.deadline)
		return false;
	c.start = cc->v.start;
	c.req = cc->v.req;
	c.span = cc->v.span;
	c.class = cc->v.class;
	view_of(&w, p, tctx, dl);
	c.util = cc->v.util;
	c.weight = cc->v.weight;
	c.one_cpu = 0;
	why = wakeup_preempt_why(&w, &c, now_ns(), preempt_min_ns, !protect_ahead);
	if (why == PREEMPT_NO)
		return false;
	if (!__sync_bool_compare_and_swap(&cc->v.deadline, c.deadline, 0))
		return false;
	scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	stat_inc(STAT_PREEMPT);
	if (why == PREEMPT_AHEAD)
		stat_inc(STAT_PREEMPT_AHEAD);
	return true;
}

/*
 * From @cpu's tick: the first task waiting on @cpu's own queue takes the
 * CPU if the rule says so now. A wakeup that arrived while the running task
 * was inside its protected part was refused then, and nothing looked again
 * until the running task's slice ended: a futex wakee waited 5-9 ms behind
 * a 10 ms loop that had just started (pinned ping-pong pairs on two CPUs).
 * EEVDF looks again at every tick (update_curr()); so does this.
 */
static __always_inline void tick_preempt(s32 cpu)
{
	struct task_struct *head;
	struct task_ctx *htctx;

	if (!wake_preempt || !cpu_queues || !valid_cpu(cpu))
		return;
	head = __COMPAT_scx_bpf_dsq_peek(cpu_dsq(cpu));
	if (!head || !(htctx = lookup_task_ctx(head)))
		return;
	maybe_preempt(head, htctx, cpu, head->scx.dsq_vtime);
}

/* @cpu runs a SCHED_IDLE task and nothing waits on its own queue. */
static __always_inline bool sidle_cpu(struct task_struct *p, s32 cpu)
{
	return valid_cpu(cpu) && READ_ONCE(cur_of(cpu)->v.deadline) &&
	       cur_of(cpu)->v.class == TASK_IDLE &&
	       bpf_cpumask_test_cpu(cpu, p->cpus_ptr) &&
	       !cpuq_mine(cpu);
}

/*
 * select_cpu found no idle CPU for @p (not SCHED_IDLE itself): a CPU of
 * @prev's LLC that runs only SCHED_IDLE work, @prev first, or -1. The
 * caller puts @p on its local DSQ with SCX_ENQ_PREEMPT.
 */
static __always_inline s32 pick_sidle_cpu(struct task_struct *p, struct task_ctx *tctx, s32 prev)
{
	struct llc_bits *b;
	s32 cpu;
	u32 llc, i, at;

	if (!valid_cpu(prev) || task_class(p, tctx) == TASK_IDLE)
		return -1;
	if (sidle_cpu(p, prev))
		return prev;
	llc = llc_of(prev) & (MAX_LLCS - 1);
	b = &llc_sidle[llc_idx(llc)];
	at = cpu_pos[prev & (MAX_CPUS - 1)];
	/* A few candidates: the bits are a hint, each is checked. */
	bpf_for(i, 0, 4) {
		cpu = llc_bits_next(b, llc, at);
		if (cpu < 0 || cpu == prev)
			return -1;
		if (sidle_cpu(p, cpu))
			return cpu;
		at = cpu_pos[cpu & (MAX_CPUS - 1)];
	}
	return -1;
}

#endif /* __NIMBLE_PREEMPT_BPF_H */
