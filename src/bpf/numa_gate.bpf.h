/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The NUMA gate: the kernel's imbalance rule, applied the same way when a
 * forked task is placed and whenever a task would cross nodes at runtime.
 * This file gathers what the rule is asked about (a snapshot of every
 * node's load, summed into the groups of the NUMA level between two nodes);
 * the decisions themselves are the pure functions of rules.h, unit-tested
 * on the host. Thresholds (imb_numa_nr per node and NUMA level) come from
 * the numa_levels map, the active rule from nimble_ctl; both can change
 * while running. The moves are in numa_moves.bpf.h.
 *
 * Where tasks cross nodes:
 *   - fork: fork_node() picks the node, as find_idlest_cpu() does, unless
 *     the parent's node is the child's preferred one and has room;
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
#include "rules.h"

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
	u64 now = now_ns();
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
		s->load[k] = node_load_at(k, now);
		s->cpus[k] = node_cap(k);	/* CPUs held by RT/DL left out */
	}
	if (valid_cpu(self) && !bpf_cpumask_test_cpu(self, idle))
		s->idle[node_of(self) & (MAX_NODES - 1)]++;
	scx_bpf_put_idle_cpumask(idle);
	return s;
}

/*
 * Every node as its averaged load has it: runnable tasks the rounded
 * average, idle CPUs the rest of its capacity. No idle mask is read: a
 * kernel thread or an unanswered idle kick taking a CPU for a moment does
 * not show (the NUMA push's second opinion, numa_moves.bpf.h).
 */
static struct numa_snap *numa_snapshot_averaged(void)
{
	struct numa_snap *s;
	u32 zero = 0, n, k;
	u64 now = now_ns();
	s64 avg;

	s = bpf_map_lookup_elem(&numa_snaps, &zero);
	if (!s)
		return NULL;
	bpf_for(n, 0, nr_nodes) {
		k = n & (MAX_NODES - 1);
		s->load[k] = node_load_at(k, now);
		avg = (s->load[k] + (1 << (NODE_LOAD_SHIFT - 1))) >> NODE_LOAD_SHIFT;
		s->run[k] = avg > 0 ? avg : 0;
		s->cpus[k] = node_cap(k);
		s->allowed[k] = node_nr_cpus[k];
		s->idle[k] = s->cpus[k] > s->run[k] ? s->cpus[k] - s->run[k] : 0;
	}
	return s;
}

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
 * The level of @node's hierarchy that first spans @other, one lookup in the
 * table userspace computed (gate_level); *within is the distance its groups
 * (the child spans) reach.
 */
static __always_inline struct numa_level *level_between(u32 node, u32 other, u32 *within)
{
	u32 a, b, lv;

	/* As nimble.bpf.h's lookups: keep the masks the verifier relies on. */
	barrier_var(node);
	barrier_var(other);
	a = node & (MAX_NODES - 1);
	b = other & (MAX_NODES - 1);
	lv = gate_level[a][b];
	if (!lv)
		return NULL;
	*within = gate_within[a][b];
	return numa_level_of(node, lv - 1);
}

/*
 * May a CPU of node @dst take a task runnable on node @src? The verdict is
 * rules.h's numa_pull_verdict() over the two groups of the level between
 * them; @overload_ok as there.
 */
static enum numa_verdict numa_pull_ok(struct numa_snap *s, u32 dst, u32 src,
				      bool overload_ok)
{
	struct node_group d, g;
	struct numa_level *l;
	u32 rule = numa_rule(), within = 0;

	if (rule == NUMA_RULE_OFF)
		return NUMA_GO_ANY;
	l = level_between(dst, src, &within);
	if (!l)
		return NUMA_GO_ANY;	/* no thresholds (yet): no allowance */
	group_sum(s, dst, within, &d);
	group_sum(s, src, within, &g);
	return numa_pull_verdict(rule, l->imb_numa_nr, l->span_weight, &d, &g, overload_ok,
				 node_overloaded_long(src));
}

/*
 * Whether a forked task whose preferred node is its parent's, @local, stays
 * there (rules.h numa_fork_stays_preferred(): the node has room). Only
 * @local's counts are read, not a snapshot of every node: select_cpu's
 * verifier budget.
 */
static bool fork_stays_preferred(struct task_struct *p, struct task_ctx *tctx, u32 local)
{
	const struct cpumask *nm = node_mask(local);
	struct bpf_cpumask *tmp = tctx->tmp;
	struct node_group loc = {};
	s64 run;

	if (!tmp || !nm)
		return false;
	bpf_cpumask_and(tmp, p->cpus_ptr, nm);
	loc.allowed = bpf_cpumask_weight(cast_mask(tmp));
	loc.cpus = node_cap(local);
	run = node_ctx(local)->nr_running;
	loc.run = run > 0 ? run : 0;
	return numa_fork_stays_preferred(&loc);
}

/*
 * Fork placement, as the kernel's find_idlest_cpu() walks the NUMA levels
 * from the top: at each level compare the local group with the idlest other
 * group and move there only when the rule does not tolerate the imbalance;
 * but the child stays on @local while that is its preferred node (@pref,
 * -1: none) and has room. Returns the node to place the child on.
 */
static u32 fork_node(struct task_struct *p, struct task_ctx *tctx, u32 local, s32 pref)
{
	struct node_group loc, g;
	struct numa_level *l, *child;
	struct numa_snap *s;
	u32 rule = numa_rule(), cur = local, nlev = 0, i, lv, m, d, within;
	s32 best, best_idle, best_run;

	if (pref == (s32)local && fork_stays_preferred(p, tctx, local)) {
		nstat_inc(local, NSTAT_FORK_PREF);
		return local;
	}
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
		if (best >= 0 &&
		    numa_fork_moves(rule, l->imb_numa_nr, l->span_weight, &loc, best_idle))
			cur = best;
	}
	return cur;
}

#endif /* __NIMBLE_NUMA_GATE_BPF_H */
