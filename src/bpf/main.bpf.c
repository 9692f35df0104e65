/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_nimble: per-LLC dispatch queues with local-first dispatch and
 * topology-ordered stealing, a per-LLC shared wakequeue, and the kernel's
 * NUMA imbalance rule.
 *
 * This file wires the sched_ext callbacks to the mechanisms, one header each:
 *   idle.bpf.h     topology-ordered idle CPU pick, sync wakeups (select_cpu)
 *   vtime.bpf.h    deadlines in real time, requests, slices
 *   preempt.bpf.h  wakeup preemption (EEVDF's rule), CPUs running SCHED_IDLE
 *   classes.bpf.h  CPUs held by RT/deadline tasks: what waited there moves
 *   balance.bpf.h  weight-aware balancing between the LLCs of a node
 *   llc_dsq.bpf.h  per-LLC DSQs in deadline order and idle kicks
 *   cpu_dsq.bpf.h  per-CPU wake queues: wakeups with no idle CPU, no migration
 *   swq.bpf.h      per-LLC shared wakequeue (FIFO, sharded), its modes
 *   dispatch.bpf.h where a CPU takes work from: own LLC, node, other nodes
 *   topo.bpf.h     LLC/node cpumasks built from userspace's tables
 *   stats.bpf.h    per-CPU counters and exact queue-path accounting
 *   numa.bpf.h     per-node load and home nodes, the input of the NUMA rules
 *   numa_gate.bpf.h the NUMA imbalance rule at fork and for every node crossing
 *   mem_locality.bpf.h the node holding a task's memory, preferred within the rule
 *   numa_swap.bpf.h two tasks on each other's memory node trade CPUs
 *   cgroup.bpf.h   cgroup cpu.weight and cpu.idle, flattened into task weights
 *   cpu_max.bpf.h  cgroup cpu.max: budgets per period, throttled tasks parked
 */
#include "nimble.bpf.h"
#include "stats.bpf.h"
#include "topo.bpf.h"
#include "numa.bpf.h"
#include "idle.bpf.h"
#include "numa_gate.bpf.h"
#include "mem_locality.bpf.h"
#include "numa_moves.bpf.h"
#include "classes.bpf.h"
#include "preempt.bpf.h"
#include "llc_dsq.bpf.h"
#include "swq.bpf.h"
#include "dispatch.bpf.h"
#include "cgroup.bpf.h"
#include "cpu_max.bpf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

s32 BPF_STRUCT_OPS(nimble_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	struct task_ctx *tctx = lookup_task_ctx(p), *wctx;
	s32 cpu;

	if (!tctx)
		return prev_cpu;

	wctx = wake_affine ? record_wakee(p, wake_flags) : NULL;
	tctx->hint = HINT_NONE;
	tctx->waker = bpf_get_smp_processor_id() + 1;
	/* Out of cpu.max quota: enqueue parks it (no direct dispatch). */
	if (bw_throttled(tctx))
		return prev_cpu;
	/*
	 * Forks may cross nodes (the NUMA gate decides); wakeups stay near,
	 * unless they may go to the node holding their memory.
	 */
	if (nr_nodes > 1 && (wake_flags & SCX_WAKE_FORK))
		cpu = place_forked(p, prev_cpu, tctx);
	else if ((cpu = mem_move_cpu(p, tctx, prev_cpu, false, true)) < 0)
		cpu = pick_idle_wake(p, prev_cpu, tctx, wctx, wake_flags);
	/*
	 * No idle CPU: one that runs only SCHED_IDLE work is as good (the
	 * kernel's sched_idle_cpu()); its task yields at once.
	 */
	if (cpu < 0 && (cpu = pick_sidle_cpu(p, tctx, prev_cpu)) >= 0) {
		path_queue(tctx, PATH_DIRECT, 0, STAT_INS_DIRECT);
		stat_inc(STAT_SIDLE);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, SCX_ENQ_PREEMPT);
		return cpu;
	}
	/* Through the shared wakequeue: enqueue queues it, kicks the CPU. */
	if (swq_route(p, tctx, prev_cpu, cpu, wake_flags))
		return cpu >= 0 ? cpu : prev_cpu;
	/* No idle CPU: wait on the sync waker's CPU or the previous one. */
	if (cpu < 0)
		return cpuq_target(p, tctx, prev_cpu, wake_flags);

	/* An idle CPU was claimed: run there, no shared queue. */
	path_queue(tctx, PATH_DIRECT, 0, STAT_INS_DIRECT);
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
	return cpu;
}

void BPF_STRUCT_OPS(nimble_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = lookup_task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	bool slice_end;
	s32 waker;
	u32 why;

	if (!tctx) {
		scx_bpf_error("task %d has no context", p->pid);
		return;
	}
	/* select_cpu's swq routing applies to this enqueue only. */
	why = tctx->swq_why;
	tctx->swq_why = SWQ_WHY_NONE;
	waker = tctx->waker - 1;
	tctx->waker = 0;
	/* Its cgroup (or one above) is out of cpu.max quota: wait for the next period. */
	if (bw_park(p, tctx))
		return;
	/*
	 * Its slice ran out or was taken (a wakeup preemption zeroes it), not
	 * a wakeup, a hand-back or an attribute change (which keep it): only
	 * then may the balance and the NUMA push move it.
	 */
	slice_end = !(enq_flags & (SCX_ENQ_WAKEUP | SCX_ENQ_REENQ)) && !p->scx.slice;

	/* Handed back by the kernel: another class took its CPU (classes.bpf.h). */
	if ((enq_flags & SCX_ENQ_REENQ) && reenq_place(p, tctx))
		return;

	/*
	 * A task that can run on one CPU only skips select_cpu. If that CPU is
	 * idle, go straight to it; otherwise it waits in its CPU's queue (or
	 * its LLC DSQ) in deadline order like everyone else. The kick is for
	 * an enqueue from another CPU: on @cpu itself (a wakeup the kernel
	 * queued there) the idle loop reschedules anyway, and a self-kick is
	 * an irq_work interrupt for nothing.
	 */
	if (p->nr_cpus_allowed == 1 && scx_bpf_test_and_clear_cpu_idle(cpu)) {
		path_queue(tctx, PATH_LOCAL, 0, STAT_INS_LOCAL);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, enq_slice(p, enq_flags), enq_flags);
		if (cpu != bpf_get_smp_processor_id())
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		return;
	}

	/*
	 * A wakeup the kernel queued on the CPU the task was still leaving
	 * (SCX_OPS_ALLOW_QUEUED_WAKEUP) comes here without select_cpu: take
	 * an idle CPU near it now, as select_cpu would have, rather than wait
	 * on that CPU's queue behind whatever runs there next.
	 */
	if (wake_unselected(p, tctx, cpu, enq_flags, waker >= 0))
		return;

	/* A CPU-bound task may go to an idle CPU of another node (NUMA rule). */
	if (why == SWQ_WHY_NONE && push_remote(p, enq_flags, slice_end))
		return;
	/*
	 * The last runnable task of its CPU, which dispatch let go (a NUMA
	 * push candidate the push did not take): it runs on there, as the
	 * kernel would have kept it without SCX_OPS_ENQ_LAST.
	 */
	if (enq_flags & SCX_ENQ_LAST) {
		path_queue(tctx, PATH_LOCAL, 0, STAT_INS_LOCAL);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, enq_flags);
		return;
	}

	if (swq_enqueue(p, enq_flags, tctx, why))
		return;
	enqueue_llc(p, enq_flags, slice_end, waker);
}

/*
 * @prev, whose slice ended on @cpu, runs another one. It did not stop, so
 * count here what it ran (count_slices(), which ops.stopping does too).
 */
static __always_inline void run_on(struct task_struct *prev, struct task_ctx *tctx, s32 cpu)
{
	u64 now = now_ns();

	scx_bpf_task_set_slice(prev, slice_ns);
	if (tctx) {
		count_slices(tctx, tctx->exec + clock_since(now, tctx->run_start));
		/*
		 * As ops.stopping would: its cgroup's share, and whether a
		 * cpu.max set since applies (a loop kept running never stops).
		 */
		tctx->eff_w = cg_task_weight(prev, tctx);
		rq_reweight(tctx, tctx->eff_w);
		cur_extended(prev, tctx, cpu, now);
		/* It never stops: look its memory node up and post it here. */
		if (nr_nodes > 1) {
			mem_refresh(prev, tctx);
			swap_post(prev, tctx, cpu);
		}
	}
	stat_inc(STAT_KEEP_RUNNING);
}

void BPF_STRUCT_OPS(nimble_dispatch, s32 cpu, struct task_struct *prev)
{
	bool prev_runnable = prev && (prev->scx.flags & SCX_TASK_QUEUED);
	struct task_ctx *ptctx = prev_runnable ? lookup_task_ctx(prev) : NULL;

	/* Out of cpu.max quota: its slice ends, enqueue parks it. */
	if (ptctx && bw_throttled(ptctx))
		prev_runnable = false, ptctx = NULL;

	if (test_fault_due(test_stall_after_ns))
		return;
	if (ptctx && keep_first(cpu, prev)) {
		run_on(prev, ptctx, cpu);
		return;
	}
	if (consume_llcs(cpu, !prev_runnable))
		return;

	/*
	 * Nothing waits that this CPU may run: let the previous task go on (it
	 * used a full slice: CPU-bound so far), unless the NUMA rule may move
	 * it to another node; then its slice ends and enqueue decides.
	 */
	if (prev_runnable) {
		if (ptctx && push_candidate(prev))
			return;
		run_on(prev, ptctx, cpu);
		return;
	}
	cpu_going_idle(cpu, prev);
	stat_inc(STAT_GO_IDLE);
}

/*
 * Help for waiters (the swq's, the own queue's first if the running task's
 * protected part is over, those behind a CPU another class holds);
 * NUMA: node load averages and cross-node help.
 */
void BPF_STRUCT_OPS(nimble_tick, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);

	if (test_fault_due(test_error_after_ns))
		scx_bpf_error("test error injected by --test-error-after-ms");
	bw_tick(p);
	swq_kick_waiters(cpu);
	tick_preempt(cpu);
	rescue_taken(cpu);
	if (valid_cpu(cpu))
		llc_load_tick(cpu);
	if (nr_nodes < 2)
		return;
	node_tick(cpu);
	kick_for_waiters(cpu);
}

void BPF_STRUCT_OPS(nimble_running, struct task_struct *p)
{
	struct task_ctx *tctx = lookup_task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);

	if (!tctx || !valid_cpu(cpu))
		return;
	tctx->run_start = now_ns();
	/* cpu.max charges the kernel's run time from here (cpu_max.bpf.h). */
	tctx->bw_exec = p->se.sum_exec_runtime;
	tctx->waiting = 0;
	tctx->waker = 0;	/* a wakeup select_cpu placed itself never reaches enqueue */
	note_taken(cpu, false);	/* ours again, if another class held it */
	cpuq_left(tctx);
	cur_running(p, tctx, cpu, tctx->run_start);	/* before path_run: reads the path */
	swap_post(p, tctx, cpu);
	scale_slice(p, cpu);
	path_run(tctx, cpu);
	count_migration(tctx, cpu);
	node_moved(tctx, cpu);
}

/*
 * Runnable: a wakeup (SCX_ENQ_WAKEUP), a new task, or the restore half of
 * an attribute change (nice, affinity, cgroup, policy: the kernel takes the
 * task off and puts it back). Only a wakeup ends a CPU-bound run and folds
 * the run into the burst; a renice or a cgroup move keeps its history.
 */
void BPF_STRUCT_OPS(nimble_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = lookup_task_ctx(p);

	if (!tctx)
		return;
	cg_runnable(p, tctx);
	tctx->eff_w = cg_task_weight(p, tctx);
	mem_refresh(p, tctx);
	if (enq_flags & SCX_ENQ_WAKEUP) {
		tctx->full_slices = 0;	/* it slept: not CPU-bound */
		tctx->push_votes = 0;
		deadline_woke(tctx);
	}
	node_runnable(p, tctx, requeue_llc(p, tctx, enq_flags));
	/*
	 * Still CPU-bound (an attribute change): back in its LLC's hog_load
	 * now, not at its next stopping. A loop reniced every 30 ms while it
	 * waited was out of the load the balance evens most of the time, and
	 * its LLC looked lighter than it was.
	 */
	rq_hog_update(tctx);
}

/*
 * Not runnable: a sleep (SCX_DEQ_SLEEP) or the save half of an attribute
 * change (SCX_DEQ_SCHED_CHANGE), maybe out of sched_ext altogether (to RT
 * or deadline: ops.disable follows). Either way it leaves the counts and
 * any CPU queue it waited on.
 */
void BPF_STRUCT_OPS(nimble_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx *tctx = lookup_task_ctx(p);

	if (tctx) {
		cpuq_left(tctx);
		node_quiescent(tctx);
		cg_quiescent(tctx);
		tctx->bw_parked = 0;	/* out of the counts already */
	}
}

void BPF_STRUCT_OPS(nimble_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *tctx = lookup_task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	u64 now;

	if (!tctx || !tctx->run_start || !valid_cpu(cpu))
		return;
	now = now_ns();
	cur_stopping(tctx, cpu, now);
	swap_unpost(cpu);
	mem_account(p, tctx, cpu, clock_since(now, tctx->run_start));
	bw_charge(p, tctx);
	deadline_charge(p, tctx, cpu, now);
	/* Once a slice: follow its cgroup's share and its nice. */
	tctx->eff_w = cg_task_weight(p, tctx);
	/* Its memory node too, if it stays runnable: a sleeper's wakeup looks. */
	if (runnable)
		mem_refresh(p, tctx);
	rq_reweight(tctx, tctx->eff_w);
	rq_hog_update(tctx);
}

s32 BPF_STRUCT_OPS(nimble_init_task, struct task_struct *p,
		   struct scx_init_task_args *args)
{
	struct bpf_cpumask *mask;
	struct task_ctx *tctx;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	mask = bpf_cpumask_create();
	if (!mask)
		return -ENOMEM;
	tctx->rq_node = -1;
	tctx->last_cpu = -1;
	tctx->home = -1;
	tctx->mem_node = -1;
	tctx->last_node = -1;
	tctx->cg = cg_slot_of(args->cgroup);
	tctx->cg_w = 0;
	tctx->eff_w = 0;
	tctx->hint = HINT_NONE;
	mask = bpf_kptr_xchg(&tctx->tmp, mask);
	if (mask)
		bpf_cpumask_release(mask);
	return 0;
}

/* @p's books close: what it waited on, its counts. */
static __always_inline void close_books(struct task_struct *p)
{
	struct task_ctx *tctx = lookup_task_ctx(p);

	if (tctx) {
		path_drop(tctx);
		cpuq_left(tctx);
		node_quiescent(tctx);
		cg_quiescent(tctx);
	}
}

/* Exiting, or handed back to the kernel at unload. */
void BPF_STRUCT_OPS(nimble_exit_task, struct task_struct *p,
		    struct scx_exit_task_args *args)
{
	close_books(p);
}

/* It leaves sched_ext (to RT or deadline, or at unload), maybe while queued. */
void BPF_STRUCT_OPS(nimble_disable, struct task_struct *p)
{
	close_books(p);
}

/* cgroup cpu.weight and cpu.idle (cgroup.bpf.h): the tree, kept as it changes. */
s32 BPF_STRUCT_OPS_SLEEPABLE(nimble_cgroup_init, struct cgroup *cgrp,
			     struct scx_cgroup_init_args *args)
{
	bool idle = bpf_core_field_exists(args->sched_idle) && args->sched_idle;
	s32 err = cg_created(cgrp, args->weight, idle);

	if (!err)
		bw_set(cgrp, args->bw_period_us, args->bw_quota_us, args->bw_burst_us);
	return err;
}

void BPF_STRUCT_OPS(nimble_cgroup_exit, struct cgroup *cgrp)
{
	bw_removed(cgrp);
	cg_removed(cgrp);
}

void BPF_STRUCT_OPS(nimble_cgroup_move, struct task_struct *p,
		    struct cgroup *from, struct cgroup *to)
{
	struct task_ctx *tctx = lookup_task_ctx(p);

	if (tctx)
		cg_task_moved(tctx, to);
}

void BPF_STRUCT_OPS(nimble_cgroup_set_weight, struct cgroup *cgrp, u32 weight)
{
	cg_weight_set(cgrp, weight);
}

void BPF_STRUCT_OPS(nimble_cgroup_set_idle, struct cgroup *cgrp, bool idle)
{
	cg_idle_set(cgrp, idle);
}

void BPF_STRUCT_OPS(nimble_cgroup_set_bandwidth, struct cgroup *cgrp, u64 period_us,
		    u64 quota_us, u64 burst_us)
{
	bw_set(cgrp, period_us, quota_us, burst_us);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(nimble_init)
{
	s32 err;

	loaded_at_ns = bpf_ktime_get_ns();
	err = init_topology_masks();
	if (err) {
		scx_bpf_error("failed to build topology cpumasks: %d", err);
		return err;
	}
	err = init_numa_snaps();
	if (err) {
		scx_bpf_error("failed to set up NUMA snapshots: %d", err);
		return err;
	}
	err = create_llc_dsqs();
	if (err)
		return err;
	err = create_cpu_dsqs();
	if (err)
		return err;
	err = bw_init();
	if (err)
		return err;
	err = create_swqs();
	init_ns = bpf_ktime_get_ns() - loaded_at_ns;
	return err;
}

void BPF_STRUCT_OPS(nimble_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

/*
 * No cpu_online/cpu_offline callbacks: on CPU hotplug the kernel unloads the
 * scheduler asking for a restart, and userspace reloads it with the new
 * topology.
 */
SCX_OPS_DEFINE(nimble_ops,
	       .select_cpu	= (void *)nimble_select_cpu,
	       .enqueue		= (void *)nimble_enqueue,
	       .dispatch	= (void *)nimble_dispatch,
	       .tick		= (void *)nimble_tick,
	       .runnable	= (void *)nimble_runnable,
	       .running		= (void *)nimble_running,
	       .stopping	= (void *)nimble_stopping,
	       .quiescent	= (void *)nimble_quiescent,
	       .init_task	= (void *)nimble_init_task,
	       .exit_task	= (void *)nimble_exit_task,
	       .disable		= (void *)nimble_disable,
	       .cgroup_init	= (void *)nimble_cgroup_init,
	       .cgroup_exit	= (void *)nimble_cgroup_exit,
	       .cgroup_move	= (void *)nimble_cgroup_move,
	       .cgroup_set_weight = (void *)nimble_cgroup_set_weight,
	       .cgroup_set_idle	= (void *)nimble_cgroup_set_idle,
	       .cgroup_set_bandwidth = (void *)nimble_cgroup_set_bandwidth,
	       .init		= (void *)nimble_init,
	       .exit		= (void *)nimble_exit,
	       /*
		* The kernel's maximum: generous, since TCG test VMs run
		* eight vCPUs on two host cores.
		*/
	       .timeout_ms	= 30000,
	       .name		= "nimble");
