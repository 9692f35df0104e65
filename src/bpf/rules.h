/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The pure decisions of the policy: the NUMA imbalance rule, the fork
 * placement and runtime pull verdicts, and the wait-histogram bucket. No
 * BPF helpers, no maps: BPF includes this file (numa_gate.bpf.h,
 * stats.bpf.h), and build.rs compiles it for the host (rules_host.c) so the
 * Rust unit tests (src/topology/rules.rs, src/hist.rs) call these very
 * functions. Change a comparison here and those tests see it.
 *
 * The kernel's terms: at a NUMA level, the *local* group is the child span
 * holding the CPU that decides, the other group is the *idlest* (fork) or
 * *busiest* (runtime) one; `imbalance` is their difference in idle CPUs.
 */
#ifndef __NIMBLE_RULES_H
#define __NIMBLE_RULES_H

#ifndef RULE_FN
#define RULE_FN static __always_inline
#endif

/*
 * Below this difference in idle CPUs an imbalance may be tolerated at all
 * (kernel: NUMA_IMBALANCE_MIN, "a simple pair of communicating tasks").
 */
#define NUMA_IMBALANCE_MIN	2
/*
 * An overloaded node sheds load only to a node less loaded per CPU by this
 * margin, in percent (seed 003: the kernel's imbalance_pct), so two busy
 * nodes do not trade tasks back and forth.
 */
#define NUMA_IMBALANCE_PCT	112

/*
 * Whether @rule tolerates an imbalance, i.e. no task should move because of
 * it. @imb: the level's imb_numa_nr; @span: CPUs in the level's span;
 * @weight: CPUs of the source group (at fork: the local one); @imbalance:
 * idle CPUs of the destination minus the source's; @dst_running: tasks the
 * destination would run, counting the one that moves.
 */
RULE_FN bool numa_tolerates(u32 rule, s32 imb, s32 span, s32 weight, s32 imbalance,
			    s32 dst_running, s32 src_running, bool at_fork)
{
	switch (rule) {
	case NUMA_RULE_MAINLINE:
		/* adjust_numa_imbalance(), v5.19 on */
		return dst_running <= imb && imbalance <= NUMA_IMBALANCE_MIN;
	case NUMA_RULE_V3:
		return src_running < imb && (at_fork || imbalance <= NUMA_IMBALANCE_MIN);
	case NUMA_RULE_V4:
		return src_running <= span / 4 && imbalance <= imb;
	case NUMA_RULE_TIP:
		/* v5.16: a quarter of the group, no imb_numa_nr yet */
		return src_running < weight / 4 && (at_fork || imbalance <= NUMA_IMBALANCE_MIN);
	default:
		/* NUMA_RULE_OFF: nodes are crossed as freely as LLCs */
		return false;
	}
}

/*
 * Fork/exec (kernel: find_idlest_group() at an SD_NUMA level): does the
 * child leave @local for the idlest other group, which has @idlest_idle
 * idle CPUs? The threshold is clamped to the local CPUs the task may use.
 */
RULE_FN bool numa_fork_moves(u32 rule, s32 imb, s32 span, const struct node_group *local,
			     s32 idlest_idle)
{
	s32 diff;

	/* No spare capacity here: any spare capacity elsewhere wins. */
	if (local->idle == 0)
		return idlest_idle > 0;
	if (imb > local->allowed)
		imb = local->allowed;
	diff = idlest_idle - local->idle;
	if (diff < 0)
		diff = -diff;
	if (numa_tolerates(rule, imb, span, local->cpus, diff, local->run + 1, local->run + 1,
			   true))
		return false;
	return idlest_idle > local->idle;
}

/*
 * Fork when the local node is the child's preferred one (kernel:
 * find_idlest_group(), "if the local group is the preferred NUMA node,
 * stay", asked once the local group has spare capacity): stay while the
 * node has room for the child, idle at this instant or not (a kernel thread
 * or a shell passing through must not send the thread away for good). The
 * forking parent is counted in @local->run but not as keeping its CPU:
 * threads that share memory are mostly started by a parent that then waits
 * for them (fork-join, a pool's main thread), so a node of N CPUs keeps N
 * threads, not N - 1 and one sent over (hence run <= cpus, not <), away
 * from the memory the process touched (numa01 at 8 threads on n2l4:
 * 72 -> 96 % local in the lab). A
 * parent that keeps running leaves one task too many until the balance
 * evens the node. Then the imbalance rule decides as for any fork.
 */
RULE_FN bool numa_fork_stays_preferred(const struct node_group *local)
{
	s32 cpus = local->allowed < local->cpus ? local->allowed : local->cpus;

	return local->run <= cpus;
}

/*
 * Runtime (kernel: calculate_imbalance() with spare capacity): may a CPU of
 * group @d take a task runnable in group @g? @overload_ok: a waiting task
 * may leave an overloaded @g whatever the rule says (a running one, a push,
 * moves by the rule only); @overloaded_long: @g has been overloaded for
 * numa_patience_ns.
 */
RULE_FN enum numa_verdict numa_pull_verdict(u32 rule, s32 imb, s32 span,
					    const struct node_group *d,
					    const struct node_group *g,
					    bool overload_ok, bool overloaded_long)
{
	s32 imbalance;

	if (rule == NUMA_RULE_OFF)
		return NUMA_GO_ANY;
	/*
	 * Overloaded (on average): no allowance applies, as long as @g stays
	 * at least as busy per CPU as @d after one task moves (so two nodes
	 * do not trade the same task back and forth). If @d has spare
	 * capacity it is filled (the kernel: busiest overloaded, local has
	 * spare); if it is busy too, @g must be busier per CPU by the margin
	 * on average.
	 */
	if (overload_ok && g->load > ((s64)g->cpus << NODE_LOAD_SHIFT)) {
		if ((s64)(g->run - 1) * d->cpus < (s64)(d->run + 1) * g->cpus)
			return NUMA_KEEP;
		if (d->run >= d->cpus &&
		    g->load * d->cpus * 100 <= d->load * g->cpus * NUMA_IMBALANCE_PCT)
			return NUMA_KEEP;
		return overloaded_long ? NUMA_GO_ANY : NUMA_GO_COLD;
	}
	imbalance = d->idle - g->idle;
	if (numa_tolerates(rule, imb, span, g->cpus, imbalance, d->run + 1, g->run, false))
		return NUMA_KEEP;
	/*
	 * The kernel halves the imbalance into tasks to move: one task moves
	 * only for a difference of at least two idle CPUs.
	 */
	return imbalance >= 2 ? NUMA_GO_COLD : NUMA_KEEP;
}

/*
 * Memory locality (mem_locality.bpf.h): may a task go to group @d, which
 * holds most of its memory and has an idle CPU, from group @g? The
 * kernel's task_numa_find_cpu() with an idle destination: yes if @d then
 * runs no more tasks than @g, or within the allowance (at most @imb tasks
 * there, at most NUMA_IMBALANCE_MIN more than @g). @counted: the task is
 * in @g's count (runnable there), not when it is waking. Off, the rule
 * allows no imbalance at all.
 */
RULE_FN bool numa_mem_moves(u32 rule, s32 imb, const struct node_group *d,
			    const struct node_group *g, bool counted)
{
	s32 dst = d->run + 1, src = counted ? g->run - 1 : g->run;

	if (dst <= src)
		return true;
	if (rule == NUMA_RULE_OFF)
		return false;
	return dst <= imb && dst - src <= NUMA_IMBALANCE_MIN;
}

/*
 * NUMA swap (numa_swap.bpf.h): may a task of load @wt on a node carrying
 * @A over @nA CPUs trade CPUs with one of load @wu on a node carrying @B
 * over @nB? Only if the two nodes' loads per CPU end no further apart than
 * they are (the kernel's load_too_imbalanced() for a swap: the slope of
 * the imbalance, whichever way it points). Equal loads always may.
 */
RULE_FN bool numa_swap_fits(s64 A, s64 nA, s64 B, s64 nB, s64 wt, s64 wu)
{
	s64 before = A * nB - B * nA;
	s64 after = (A - wt + wu) * nB - (B - wu + wt) * nA;

	if (before < 0)
		before = -before;
	if (after < 0)
		after = -after;
	return after <= before;
}

/*
 * ns from @then to @now, 0 if @then is later. Every difference of two
 * timestamps goes through here: scx_bpf_now() reads each CPU's run queue
 * clock, which may lag another CPU's (and a cached one lags its own CPU's
 * sched_clock), so a time stamped on one CPU can be "after" a now read on
 * another. Unsigned subtraction would then wrap to ~584 years: a load
 * average reset, a phantom multi-second wait, a timer taken as expired.
 */
RULE_FN u64 clock_since(u64 now, u64 then)
{
	return (s64)(now - then) > 0 ? now - then : 0;
}

/*
 * Below this many partner switches a second, a waker and its wakee count
 * as a pair whatever the LLC's size (n2l4's LLCs hold 2 CPUs; a pipe
 * pair's threads showed up to 11 switches a second from stray wakeups).
 */
#define WAKE_WIDE_MIN	16

/*
 * Whether a waker and its wakee switch between too many partners to be
 * pulled into one LLC: @waker_flips and @wakee_flips count how often each
 * woke another task than the one it woke before, halved every second
 * (the kernel's record_wakee()); @llc_cpus is the waker's LLC size. Wide
 * when either side switches an LLC's worth of partners or more (at least
 * WAKE_WIDE_MIN). The kernel's wake_wide() is wide only when one side also
 * switches an LLC's worth times more than the other; that pulled
 * hackbench's and perf messaging's receivers (woken by 20 senders, waking
 * few themselves) to each sender's LLC in turn: 1.14-1.56x the time on
 * n2l4 (lab, 5 runs). A 1:1 pair (pipes, a client and its server thread)
 * stays narrow.
 */
RULE_FN bool wake_wide(u32 waker_flips, u32 wakee_flips, u32 llc_cpus)
{
	u32 factor = llc_cpus > WAKE_WIDE_MIN ? llc_cpus : WAKE_WIDE_MIN;

	return waker_flips >= factor || wakee_flips >= factor;
}

/*
 * A task's recent CPU use, of UTIL_ONE: an average that moves toward
 * UTIL_ONE while the task runs and toward 0 while it does not, over
 * UTIL_WINDOW_NS (the kernel's PELT, 32 ms half-life, as a linear step).
 * Fine-grained (UTIL_ONE, intf.h) so that a step of a few us is not lost
 * to rounding.
 */
#define UTIL_WINDOW_NS	(32ULL * 1000 * 1000)

/* @util after @dt ns spent running (@target UTIL_ONE) or not (0). */
RULE_FN u32 util_toward(u32 util, u32 target, u64 dt)
{
	s64 d = (s64)target - (s64)util;

	if (dt >= UTIL_WINDOW_NS)
		return target;
	return util + d * (s64)dt / (s64)UTIL_WINDOW_NS;
}

/*
 * Whether the running @c, @ran ns into its run, has used more of its CPU
 * lately than its share beside the wakee @w (weight against weight), for
 * a wakee that may run on this CPU only: EEVDF's running task that is not
 * eligible, whose protection (RUN_TO_PARITY) then does not hold. A loop
 * sharing its CPU with a 1 ms periodic task runs ~99 % of the time and is
 * ahead of its half; with protection restarting at each resumption it
 * refused every wakeup of the periodic task, which waited for the tick
 * (3 ms against EEVDF's 0.26, tests/guest/periodic.sh). The share is its
 * and the wakee's: beside two loops on one CPU a loop's use sits near a
 * half and passes it only after ~1.5 ms of its run, past the protection,
 * so the rule helps a periodic task beside one loop, not beside several.
 * A pinned wakee (a per-CPU kthread, a task bound with taskset) has no
 * other CPU to go to; any other competes for its LLC and is left to the
 * protection. Asked for every wakee, hackbench and perf messaging at 1-2
 * groups took 1.4-1.6x main's time (lab, n2l4; hackbench slower in 5 of
 * 5 rounds: their senders, ahead of their half, were preempted at each
 * message); asked also whenever the running task was CPU-bound
 * (HOG_SLICES without a sleep), it decided 43 % of hackbench's
 * preemptions (3 501 of 8 111; pinned wakees only: 8 of 5 630), so
 * neither is the rule.
 */
RULE_FN bool running_ahead(const struct preempt_view *w, const struct preempt_view *c, u64 ran)
{
	u64 both = (u64)c->weight + w->weight;
	u64 share, use = util_toward(c->util, UTIL_ONE, ran);

	if (!w->one_cpu || !both)
		return false;
	share = (u64)UTIL_ONE * c->weight / both;
	return use > share;
}

/* wakeup_preempt_why()'s answers. */
#define PREEMPT_NO	0
#define PREEMPT_YES	1	/* past the protected part (or a SCHED_IDLE task) */
#define PREEMPT_AHEAD	2	/* inside it, the running task ahead of its share */

/*
 * Wakeup preemption, in the form EEVDF uses (wakeup_preempt_fair() in
 * kernel/sched/fair.c): does the woken @w take the CPU from the running
 * @c at @now, and why (PREEMPT_*)?
 *   - a task of any other class takes a CPU from a SCHED_IDLE task at once
 *     (the kernel: a CPU running only SCHED_IDLE tasks is idle for wakeups);
 *   - SCHED_BATCH and SCHED_IDLE wakees never preempt (normal_policy());
 *   - the wakee must be eligible (its start reached: it is not running
 *     ahead of its share) and its deadline strictly earlier than the
 *     running task's. A running task that ran its request and goes on asks
 *     for what it has run so far (task_request()'s exec), from now (EEVDF's
 *     update_deadline(), in real time): a task whose short bursts made it
 *     look like a sleeper loses to a wakee once it has run longer than the
 *     wakee asks for (with its old 0.1 ms request renewed instead, it held
 *     a CPU for 10 ms against a queue of 0.3 ms wakees);
 *   - the running task keeps a protected part of its slice (RUN_TO_PARITY):
 *     the shorter of its request and the wakee's, but never less than
 *     @protect_min, and (@ahead_unprotected) only while it is not ahead
 *     of its share (running_ahead()). A wakee asking for much less than
 *     the running task gets the CPU soon (PREEMPT_SHORT); two tasks asking alike take turns
 *     no faster than their requests. Capped by the running task's own
 *     request instead, a task that runs in 0.1 ms bursts was protected for
 *     0.1 ms: hackbench and perf messaging's tasks preempted each other on
 *     most wakeups and ran 1.3-1.8x longer than the old core in the lab. Protection counts CPU time run,
 *     whatever the weights (EEVDF's vprot is the request in the running
 *     task's own virtual time, the same thing).
 */
RULE_FN u32 wakeup_preempt_why(const struct preempt_view *w, const struct preempt_view *c,
			       u64 now, u64 protect_min, bool ahead_unprotected)
{
	u64 ran, protect, cdl;

	if (c->class == TASK_IDLE)
		return w->class != TASK_IDLE ? PREEMPT_YES : PREEMPT_NO;
	if (w->class != TASK_NORMAL)
		return PREEMPT_NO;
	if ((s64)(w->start - now) > 0)
		return PREEMPT_NO;
	ran = clock_since(now, c->start);
	cdl = c->deadline;
	if (ran >= c->req) {
		/* Its span scaled to @ran (capped: no overflow, nothing banked). */
		u64 r = ran < (1ULL << 30) ? ran : (1ULL << 30);
		u64 span = c->req ? c->span * r / c->req : r;

		if (span < c->span)
			span = c->span;
		if ((s64)(now + span - cdl) > 0)
			cdl = now + span;
	}
	if ((s64)(w->deadline - cdl) >= 0)
		return PREEMPT_NO;
	protect = w->req < c->req ? w->req : c->req;
	if (protect < protect_min)
		protect = protect_min;
	if (ran >= protect)
		return PREEMPT_YES;
	if (ahead_unprotected && running_ahead(w, c, ran))
		return PREEMPT_AHEAD;
	return PREEMPT_NO;
}

/* Whether wakeup_preempt_why() says yes, either way. */
RULE_FN bool wakeup_preempts(const struct preempt_view *w, const struct preempt_view *c,
			     u64 now, u64 protect_min, bool ahead_unprotected)
{
	return wakeup_preempt_why(w, c, now, protect_min, ahead_unprotected) != PREEMPT_NO;
}

/*
 * Bucket of a queue wait of @ns (struct wait_hist in intf.h): log2 buckets
 * split in four, so a percentile read from them is within 25 %.
 */
RULE_FN u32 wait_hist_bucket(u64 ns)
{
	u32 m, b;

	if (ns < 4)
		return ns;
	m = 63 - __builtin_clzll(ns);
	b = 4 * (m - 1) + ((ns >> (m - 2)) & 3);
	return b < WAIT_HIST_BUCKETS ? b : WAIT_HIST_BUCKETS - 1;
}

#endif /* __NIMBLE_RULES_H */
