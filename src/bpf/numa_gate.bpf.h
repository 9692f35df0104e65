/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The NUMA gate: the kernel's imbalance rule, applied the same way when a
 * forked task is placed and whenever a task would cross nodes at runtime.
 * The rules and their cases are in src/topology/rules.rs; this file follows
 * it line for line. Thresholds (imb_numa_nr per node and NUMA level) come
 * from the numa_levels map, the active rule from nimble_ctl; both can change
 * while running.
 *
 * Where tasks cross nodes:
 *   - fork: fork_node() picks the node, as find_idlest_cpu() does;
 *   - a CPU-bound task whose slice ended is pushed to an idle CPU of
 *     another node if the rule lets it go (the kernel's active balancing);
 *   - a CPU going idle pulls from another node's queue a task that has
 *     waited numa_patience_ns (any task, if that node has been overloaded
 *     that long), if the rule lets it go; ops.tick kicks such a CPU for
 *     tasks left waiting.
 * Wakeups look for idle CPUs on their node only: like the kernel's
 * select_idle_sibling() they stay near the previous CPU, so short load
 * spikes move nothing. A sync wakeup with no idle CPU there may join its
 * waker on a node within the reclaim distance, as wake_affine() lets it
 * (idle.bpf.h: sync_waker_cpu).
 */
#ifndef __NIMBLE_NUMA_GATE_BPF_H
#define __NIMBLE_NUMA_GATE_BPF_H

#include "nimble.bpf.h"
#include "topo.bpf.h"
#include "stats.bpf.h"
#include "numa.bpf.h"
#include "idle.bpf.h"

#define NUMA_IMBALANCE_MIN	2
/*
 * An overloaded node sheds load only to a node less loaded per CPU by this
 * margin, in percent (seed 003: the kernel's imbalance_pct), so two busy
 * nodes do not trade tasks back and forth.
 */
#define NUMA_IMBALANCE_PCT	112
/*
 * How many queued tasks a cross-node pull looks at to find one coming home
 * (or the one with the least time on its node). Bounds the dispatch cost.
 */
#define NUMA_PULL_SCAN		8

static __always_inline u32 numa_rule(void)
{
	struct nimble_ctl *c = ctl();

	return c ? c->numa_rule : NUMA_RULE_MAINLINE;
}

/* A per-CPU snapshot of every node's load, taken once per decision. */
struct numa_snap {
	struct bpf_cpumask __kptr *tmp;
	s32 idle[MAX_NODES];	/* idle CPUs (among the task's, at fork) */
	s32 run[MAX_NODES];	/* runnable tasks */
	s32 allowed[MAX_NODES];	/* CPUs the task may use (all, at runtime) */
	s64 load[MAX_NODES];	/* node_ctx.load_avg */
	/*
	 * Copied from node_nr_cpus: summing the read-only constants in a loop
	 * gives the verifier a new exact value each iteration, which it
	 * cannot prove converges; values read back from a map it can.
	 */
	s32 cpus[MAX_NODES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct numa_snap);
} numa_snaps SEC(".maps");

/* Give every CPU's snapshot its scratch cpumask (from ops.init). */
static s32 init_numa_snaps(void)
{
	struct bpf_cpumask *mask;
	struct numa_snap *s;
	u32 zero = 0;
	s32 cpu;

	bpf_for(cpu, 0, nr_cpu_ids) {
		s = bpf_map_lookup_percpu_elem(&numa_snaps, &zero, cpu);
		if (!s)
			return -ENOENT;
		mask = bpf_cpumask_create();
		if (!mask)
			return -ENOMEM;
		mask = bpf_kptr_xchg(&s->tmp, mask);
		if (mask)
			bpf_cpumask_release(mask);
	}
	return 0;
}

/*
 * Snapshot all nodes. @allowed restricts idle and allowed counts to a
 * task's CPUs (fork); @self is a CPU about to go idle (dispatch), counted
 * idle although the idle mask does not show it yet (-1: none).
 */
static struct numa_snap *numa_snapshot(const struct cpumask *allowed, s32 self)
{
	const struct cpumask *idle, *nm;
	struct bpf_cpumask *tmp;
	struct numa_snap *s;
	u32 zero = 0, n, k;
	s64 run;

	s = bpf_map_lookup_elem(&numa_snaps, &zero);
	if (!s)
		return NULL;
	tmp = s->tmp;
	if (!tmp)
		return NULL;
	idle = scx_bpf_get_idle_cpumask();
	bpf_for(n, 0, nr_nodes) {
		k = n & (MAX_NODES - 1);
		nm = node_mask(n);
		if (!nm) {
			s->idle[k] = s->allowed[k] = s->cpus[k] = 0;
			continue;
		}
		bpf_cpumask_and(tmp, idle, nm);
		if (allowed)
			bpf_cpumask_and(tmp, cast_mask(tmp), allowed);
		s->idle[k] = bpf_cpumask_weight(cast_mask(tmp));
		if (allowed) {
			bpf_cpumask_and(tmp, allowed, nm);
			s->allowed[k] = bpf_cpumask_weight(cast_mask(tmp));
		} else {
			s->allowed[k] = node_nr_cpus[k];
		}
		run = node_ctx(k)->nr_running;
		s->run[k] = run > 0 ? run : 0;
		s->load[k] = node_ctx(k)->load_avg;
		s->cpus[k] = node_nr_cpus[k];
	}
	if (valid_cpu(self) && !bpf_cpumask_test_cpu(self, idle))
		s->idle[node_of(self) & (MAX_NODES - 1)]++;
	scx_bpf_put_idle_cpumask(idle);
	return s;
}

/* One sched group of a NUMA level: the nodes within @within of a node. */
struct node_group {
	s32 idle, run, cpus, allowed;
	s64 load;
};

static __always_inline void group_sum(struct numa_snap *s, u32 center, u32 within,
				      struct node_group *g)
{
	u32 n, k;

	g->idle = g->run = g->cpus = g->allowed = 0;
	g->load = 0;
	bpf_for(n, 0, nr_nodes) {
		if (node_distance(center, n) > within)
			continue;
		k = n & (MAX_NODES - 1);
		g->idle += s->idle[k];
		g->run += s->run[k];
		g->cpus += s->cpus[k];
		g->allowed += s->allowed[k];
		g->load += s->load[k];
	}
}

/* Level @lv of @node's NUMA hierarchy (0: nearest remote tier), or NULL. */
static __always_inline struct numa_level *numa_level_of(u32 node, u32 lv)
{
	u32 key = (node & (MAX_NODES - 1)) * MAX_NUMA_LEVELS + (lv & (MAX_NUMA_LEVELS - 1));
	struct numa_level *l = bpf_map_lookup_elem(&numa_levels, &key);

	return l && l->span_weight ? l : NULL;
}

/*
 * The level of @node's hierarchy that first spans @other; *within is the
 * distance its groups (the child spans) reach.
 */
static struct numa_level *level_between(u32 node, u32 other, u32 *within)
{
	u32 d = node_distance(node, other), prev = node_distance(node, node), lv;
	struct numa_level *l;

	bpf_for(lv, 0, MAX_NUMA_LEVELS) {
		l = numa_level_of(node, lv);
		if (!l)
			return NULL;
		if (l->distance >= d) {
			*within = prev;
			return l;
		}
		prev = l->distance;
	}
	return NULL;
}

/* rules.rs: NumaRule::tolerates. @weight: CPUs of the source group. */
static __always_inline bool rule_tolerates(u32 rule, s32 imb, s32 span, s32 weight,
					   s32 imbalance, s32 dst_running, s32 src_running,
					   bool at_fork)
{
	switch (rule) {
	case NUMA_RULE_MAINLINE:
		return dst_running <= imb && imbalance <= NUMA_IMBALANCE_MIN;
	case NUMA_RULE_V3:
		return src_running < imb && (at_fork || imbalance <= NUMA_IMBALANCE_MIN);
	case NUMA_RULE_V4:
		return src_running <= span / 4 && imbalance <= imb;
	case NUMA_RULE_TIP:
		return src_running < weight / 4 && (at_fork || imbalance <= NUMA_IMBALANCE_MIN);
	default:
		return false;
	}
}

/* rules.rs: fork_moves. */
static __always_inline bool fork_moves(u32 rule, s32 imb, s32 span, struct node_group *local,
				       s32 idlest_idle)
{
	s32 diff;

	if (local->idle == 0)
		return idlest_idle > 0;
	if (imb > local->allowed)
		imb = local->allowed;
	diff = idlest_idle - local->idle;
	if (diff < 0)
		diff = -diff;
	if (rule_tolerates(rule, imb, span, local->cpus, diff, local->run + 1, local->run + 1,
			   true))
		return false;
	return idlest_idle > local->idle;
}

/* What numa_pull_ok() lets another node take. */
enum numa_verdict {
	NUMA_KEEP,	/* nothing: the rule keeps the load where it is */
	NUMA_GO_COLD,	/* tasks that have waited numa_patience_ns */
	NUMA_GO_ANY,	/* any task: overloaded for numa_patience_ns, or rule off */
};

/*
 * rules.rs: pull_allowed. May a CPU of node @dst take a task runnable on
 * node @src? @overload_ok: a waiting task may leave an overloaded @src
 * whatever the rule says; a running task (a push) is moved by the rule
 * only, since a waiting one is what relieves an overloaded node.
 */
static enum numa_verdict numa_pull_ok(struct numa_snap *s, u32 dst, u32 src,
				      bool overload_ok)
{
	struct node_group d, g;
	struct numa_level *l;
	u32 rule = numa_rule(), within = 0;
	s32 imbalance;

	if (rule == NUMA_RULE_OFF)
		return NUMA_GO_ANY;
	l = level_between(dst, src, &within);
	if (!l)
		return NUMA_GO_ANY;	/* no thresholds (yet): no allowance */
	group_sum(s, dst, within, &d);
	group_sum(s, src, within, &g);
	/*
	 * Overloaded (on average): no allowance applies, as long as @src stays
	 * at least as busy per CPU as @dst after one task moves (so two nodes
	 * do not trade the same task back and forth). If @dst has spare
	 * capacity it is filled (the kernel: busiest overloaded, local has
	 * spare); if it is busy too, @src must be busier per CPU by the margin
	 * on average.
	 */
	if (overload_ok && g.load > ((s64)g.cpus << NODE_LOAD_SHIFT)) {
		if ((s64)(g.run - 1) * d.cpus < (s64)(d.run + 1) * g.cpus)
			return NUMA_KEEP;
		if (d.run >= d.cpus &&
		    g.load * d.cpus * 100 <= d.load * g.cpus * NUMA_IMBALANCE_PCT)
			return NUMA_KEEP;
		return node_overloaded_long(src) ? NUMA_GO_ANY : NUMA_GO_COLD;
	}
	imbalance = d.idle - g.idle;
	if (rule_tolerates(rule, l->imb_numa_nr, l->span_weight, g.cpus, imbalance, d.run + 1,
			   g.run, false))
		return NUMA_KEEP;
	return imbalance >= 2 ? NUMA_GO_COLD : NUMA_KEEP;
}

/*
 * Fork placement, as the kernel's find_idlest_cpu() walks the NUMA levels
 * from the top: at each level compare the local group with the idlest other
 * group and move there only when the rule does not tolerate the imbalance.
 * Returns the node to place the child on.
 */
static u32 fork_node(struct task_struct *p, u32 local)
{
	struct node_group loc, g;
	struct numa_level *l, *child;
	struct numa_snap *s;
	u32 rule = numa_rule(), cur = local, nlev = 0, i, lv, m, d, within;
	s32 best, best_idle, best_run;

	s = numa_snapshot(p->cpus_ptr, -1);
	if (!s)
		return local;
	bpf_for(i, 0, MAX_NUMA_LEVELS) {
		if (!numa_level_of(local, i))
			break;
		nlev++;
	}
	bpf_for(i, 0, nlev) {
		lv = nlev - 1 - i;
		l = numa_level_of(cur, lv);
		if (!l)
			break;
		within = node_distance(cur, cur);
		if (lv > 0) {
			child = numa_level_of(cur, lv - 1);
			if (!child)
				break;
			within = child->distance;
		}
		group_sum(s, cur, within, &loc);
		best = -1;
		best_idle = best_run = 0;
		bpf_for(m, 0, nr_nodes) {
			d = node_distance(cur, m);
			if (d <= within || d > l->distance)
				continue;
			group_sum(s, m, within, &g);
			if (!g.allowed)
				continue;
			if (best < 0 || g.idle > best_idle ||
			    (g.idle == best_idle && g.run < best_run)) {
				best = m;
				best_idle = g.idle;
				best_run = g.run;
			}
		}
		if (best >= 0 && fork_moves(rule, l->imb_numa_nr, l->span_weight, &loc, best_idle))
			cur = best;
	}
	return cur;
}

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
 * select_cpu for a forked task: the node from fork_node(), then the usual
 * idle pick near the parent if it stays, or any idle CPU of the chosen node.
 * Exec is not seen here: sched_ext does not call ops.select_cpu() for
 * WF_EXEC, so a task keeps the placement of its fork.
 */
static s32 place_forked(struct task_struct *p, s32 prev, struct task_ctx *tctx)
{
	u32 from, to;

	if (!valid_cpu(prev))
		return -EINVAL;
	from = node_of(prev);
	to = fork_node(p, from);
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
 * A CPU-bound task whose slice ended goes straight to an idle CPU of
 * another node if the rule lets it go: the kernel's active balancing, at
 * slice granularity. Other re-queues (affinity or priority changes,
 * preemption) and wakeups stay. Returns whether it was pushed.
 */
static bool push_remote(struct task_struct *p, struct task_ctx *tctx, u64 enq_flags)
{
	s32 cpu, from = scx_bpf_task_cpu(p);
	u32 node;

	if ((enq_flags & SCX_ENQ_WAKEUP) || p->scx.slice)
		return false;
	if (tctx->full_slices < HOG_SLICES)
		tctx->full_slices++;
	if (nr_nodes < 2 || p->nr_cpus_allowed == 1 || !valid_cpu(from) ||
	    tctx->full_slices < NUMA_PUSH_MIN_SLICES)
		return false;
	/* Look first (claiming an idle CPU it then does not use would hide it). */
	if (pick_idle_remote(p, tctx, node_of(from), false, false) < 0) {
		tctx->push_votes = 0;
		return false;
	}
	/*
	 * An overloaded node (a task waiting for a CPU) sheds at once: the
	 * kernel moves a waiting task without active balancing, nearest
	 * level first.
	 */
	if (++tctx->push_votes < NUMA_PUSH_VOTES && !node_crowded(node_of(from)))
		return false;
	cpu = pick_idle_remote(p, tctx, node_of(from), false, true);
	if (cpu < 0)
		return false;
	tctx->push_votes = 0;
	node = node_of(cpu);
	tctx->home = node;	/* moved by the rule */
	nstat_inc(node, NSTAT_PUSH);
	path_queue(tctx, PATH_DIRECT, 0, STAT_INS_DIRECT);
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
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
static __always_inline bool push_candidate(struct task_struct *p, struct task_ctx *tctx)
{
	s32 from = scx_bpf_task_cpu(p);

	if (nr_nodes < 2 || p->nr_cpus_allowed == 1 || !valid_cpu(from) ||
	    tctx->full_slices + 1 < NUMA_PUSH_MIN_SLICES)
		return false;
	return pick_idle_remote(p, tctx, node_of(from), false, false) >= 0;
}

/*
 * Locality first (seed 003): from another node's queue, take a task whose
 * home is this node; failing that, the one with the least time on its
 * current node (least locality to lose). Scans at most NUMA_PULL_SCAN tasks
 * in queue order, and only tasks this CPU may run (@cold_only: that have
 * waited numa_patience_ns, cache-cold in the kernel's terms).
 */
static bool pull_remote(u64 dsq_id, s32 cpu, u32 node, bool cold_only)
{
	struct task_struct *p;
	struct task_ctx *tctx;
	u64 best_since = 0, now = now_ns();
	s32 best_pid = -1;
	u32 seen = 0;

	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		if (++seen > NUMA_PULL_SCAN)
			break;
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		tctx = lookup_task_ctx(p);
		if (!tctx || (cold_only && now - tctx->queued_at < numa_patience_ns))
			continue;
		if (tctx->home == node) {
			if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
				nstat_inc(node, NSTAT_HOME_RETURN);
				nstat_inc(node, NSTAT_PULL);
				return true;
			}
			continue;
		}
		if (best_pid < 0 || tctx->node_since > best_since) {
			best_pid = p->pid;
			best_since = tctx->node_since;
		}
	}
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

#endif /* __NIMBLE_NUMA_GATE_BPF_H */
