/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cgroup cpu.weight, flattened into one weight per task.
 *
 * The kernel's group scheduling gives each cgroup a share of its parent's
 * and divides it among what runs inside (tasks and child cgroups, by
 * weight). Here that tree is folded into the weight a task's deadline and
 * its LLC's load use (vtime.bpf.h), so the hot path never walks it:
 *
 *   eff(p)  = G(c) * w(p) / total(c)        p a task of cgroup c
 *   G(c)    = weight(c)                     c a child of the root
 *           = G(parent) * weight(c) / total(parent)   deeper
 *   total(c) = sum of w(p) of c's runnable tasks + weight of each child
 *              with runnable tasks below it (an "active" child)
 *
 * Tasks of the root cgroup keep their own weight: at the top level a task
 * competes with a whole child cgroup, as in the kernel. total(c) moves when
 * tasks become runnable or stop (one atomic add on the task's own cgroup);
 * it crosses zero only when a cgroup becomes active or idle, and only then
 * does the change climb to the parents. G(c) is cached per cgroup against
 * a generation number those climbs and weight changes bump; a task reads
 * its weight from its own context (eff_w), refreshed when it becomes
 * runnable and each time it stops (once a slice).
 *
 * Weights are in the units of p->scx.weight (100 = nice 0 = cpu.weight
 * 100) shifted left by WEIGHT_SHIFT, so a cgroup's share divided among
 * many tasks keeps its precision.
 *
 * cpu.idle, as the kernel's sched_group_set_idle(): the cgroup weighs
 * IDLE_WEIGHT (WEIGHT_IDLEPRIO) among its siblings whatever its cpu.weight,
 * and its tasks, and those of cgroups below it, are idle work
 * (idle_work()): they never preempt, and a CPU running only them counts
 * as idle for a wakeup.
 *
 * Slots: MAX_CGROUPS (intf.h). A cgroup made when all are taken borrows
 * its nearest ancestor's slot (CG_BORROWED): its tasks count there with
 * their own weight, its children find that ancestor as their parent, so
 * the tree above stays right; its own cpu.weight and cpu.idle are not
 * applied. cg_over counts such cgroups (nr_cgroups_over in the stats).
 */
#ifndef __NIMBLE_CGROUP_BPF_H
#define __NIMBLE_CGROUP_BPF_H

#include "nimble.bpf.h"

/* Levels walked up to compute G(c); the factors of deeper ones are left out. */
#define MAX_CG_DEPTH	16

struct cg_ctx {
	s64 total;	/* see above; <= 0: idle */
	u64 weight;	/* cpu.weight << WEIGHT_SHIFT */
	u64 lent;	/* weight added to the parent's total while active */
	u64 g;		/* cached G(c) */
	u64 g_gen;	/* cg_gen when g was computed */
	u64 cgid;	/* the cgroup's id (its inode in cgroupfs), for the stats */
	s32 parent;	/* parent's slot, -1: the root */
	u32 used;
	u32 seq;	/* bumped when the slot is freed: a task still counted there
			 * (one exiting after its cgroup went) no longer touches it */
	u32 set_w;	/* cpu.weight as set (weight is IDLE_WEIGHT while idle) */
	u32 idle;	/* cpu.idle */
	u32 idle_h;	/* idle, or an ancestor is: cached with g */
	s32 bw;		/* its cpu.max entry in bws[] (cpu_max.bpf.h), -1: none */
	u32 bw_h;	/* it or an ancestor has a cpu.max: cached with g */
	u32 pad;
};

/*
 * In .bss, not a map: the hot path reaches its cgroup by index without a
 * lookup, and the stats read every slot through the mmap (stats/cgroups.rs).
 */
struct cg_ctx cgs[MAX_CGROUPS];

/*
 * Each cgroup's slot + 1 (0: the root's, or out of slots under a child of
 * the root); CG_BORROWED: its nearest ancestor's, borrowed.
 */
#define CG_BORROWED	(1U << 31)

struct {
	__uint(type, BPF_MAP_TYPE_CGRP_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, u32);
} cg_slots SEC(".maps");

/* Bumped when any cgroup turns active or idle or changes weight. */
u64 cg_gen = 1;

/* Where cg_created() starts looking for a free slot: after the last one taken. */
u32 cg_hint;

/* Cgroups without a slot of their own (out of slots), now. */
s64 cg_over;

static __always_inline struct cg_ctx *cg_ctx(s32 slot)
{
	if (slot < 0 || slot >= MAX_CGROUPS)
		return NULL;
	return &cgs[slot & (MAX_CGROUPS - 1)];
}

/* @cgrp's cg_slots value: slot + 1 (| CG_BORROWED), 0: none. */
static __always_inline u32 cg_slot_raw(struct cgroup *cgrp)
{
	u32 *s;

	if (!cgrp || !cgrp->level)
		return 0;
	s = bpf_cgrp_storage_get(&cg_slots, cgrp, 0, 0);
	return s ? *s : 0;
}

/* The slot @cgrp's tasks count in (its own or a borrowed one), -1: the root's. */
static __always_inline s32 cg_slot_of(struct cgroup *cgrp)
{
	u32 s = cg_slot_raw(cgrp) & ~CG_BORROWED;

	return s ? (s32)s - 1 : -1;
}

/* @cgrp's own slot, -1: the root or one that borrows. */
static __always_inline s32 cg_own_slot(struct cgroup *cgrp)
{
	u32 s = cg_slot_raw(cgrp);

	return s && !(s & CG_BORROWED) ? (s32)s - 1 : -1;
}

/*
 * Add @delta to @slot's total; when that makes it active or idle, lend its
 * weight to (or take it back from) the parent's total, and so on up. lent
 * changes by exchange only, so a live weight change (cg_weight_set) and a
 * cgroup going idle never both hand the parent the same difference. The
 * generation is bumped once the climb is done: a G(c) cached mid-climb is
 * not kept.
 */
static __always_inline void cg_add(s32 slot, s64 delta)
{
	struct cg_ctx *c;
	bool crossed = false;
	s64 old;
	u64 w;
	u32 i;

	bpf_for(i, 0, MAX_CG_DEPTH) {
		c = cg_ctx(slot);
		if (!c || !delta)
			break;
		old = __sync_fetch_and_add(&c->total, delta);
		if (old <= 0 && old + delta > 0) {
			w = c->weight;
			delta = (s64)w - (s64)__sync_lock_test_and_set(&c->lent, w);
		} else if (old > 0 && old + delta <= 0) {
			delta = -(s64)__sync_lock_test_and_set(&c->lent, 0);
		} else {
			break;
		}
		crossed = true;
		slot = c->parent;
	}
	if (crossed)
		__sync_fetch_and_add(&cg_gen, 1);
}

/* G(@slot): the weight its entities share among themselves. */
static __always_inline u64 cg_group_weight(s32 slot)
{
	struct cg_ctx *c = cg_ctx(slot), *a;
	u64 gen = cg_gen, g;
	s64 t;
	s32 up;
	u32 i, idle, bw;

	if (!c)
		return NICE0_WEIGHT;
	if (c->g_gen == gen)
		return c->g;
	g = c->weight;
	idle = c->idle;
	bw = c->bw >= 0;
	up = c->parent;
	bpf_for(i, 0, MAX_CG_DEPTH) {
		a = cg_ctx(up);
		if (!a)
			break;
		t = READ_ONCE(a->total);	/* once: it may cross 0 meanwhile */
		if (t > 0)
			g = g * a->weight / t;
		idle |= a->idle;
		bw |= a->bw >= 0;
		up = a->parent;
	}
	c->g = g ? g : 1;
	c->idle_h = idle;
	c->bw_h = bw;
	c->g_gen = gen;
	return c->g;
}

/*
 * @p's weight for deadlines and load: its own, scaled by its cgroup's
 * share when cgroup weights are on (struct nimble_ctl). Also notes whether
 * a cpu.max applies to it (whatever that switch says: a limit is not a
 * share) and whether it is idle work.
 */
static __always_inline u64 cg_task_weight(struct task_struct *p, struct task_ctx *tctx)
{
	struct nimble_ctl *k;
	struct cg_ctx *c;
	u64 w = task_weight(p), eff, g;
	s64 t;

	tctx->cg_idle = 0;
	if (tctx->cg < 0 || !tctx->cg_w)
		return w;
	c = cg_ctx(tctx->cg);
	if (!c || c->seq != tctx->cg_seq)
		return w;
	g = cg_group_weight(tctx->cg);
	/* A limit that applies from now on charges from now on (cpu_max.bpf.h). */
	if (c->bw_h && !tctx->cg_bw)
		tctx->bw_exec = p->se.sum_exec_runtime;
	tctx->cg_bw = c->bw_h;
	k = ctl();
	if (!k || !k->cgroup_weight)
		return w;
	t = READ_ONCE(c->total);
	if (t <= 0)
		return w;
	eff = g * tctx->cg_w / t;
	tctx->cg_idle = c->idle_h;
	return eff ? eff : 1;
}

/* @p became runnable: count it in its cgroup. */
static __always_inline void cg_runnable(struct task_struct *p, struct task_ctx *tctx)
{
	struct cg_ctx *c = cg_ctx(tctx->cg);

	if (!c || tctx->cg_w || !c->used)
		return;
	tctx->cg_w = task_weight(p);
	tctx->cg_seq = c->seq;
	cg_add(tctx->cg, tctx->cg_w);
}

/*
 * @p is no longer runnable (or leaves its cgroup): take its count out,
 * unless that slot was freed since.
 */
static __always_inline void cg_quiescent(struct task_ctx *tctx)
{
	struct cg_ctx *c = cg_ctx(tctx->cg);

	if (tctx->cg_w && c && c->seq == tctx->cg_seq)
		cg_add(tctx->cg, -(s64)tctx->cg_w);
	tctx->cg_w = 0;
}

/* @p moved to @to: carry its count along if it is runnable. */
static __always_inline void cg_task_moved(struct task_ctx *tctx, struct cgroup *to)
{
	s32 slot = cg_slot_of(to);
	struct cg_ctx *c = cg_ctx(slot);
	u64 w = tctx->cg_w;

	cg_quiescent(tctx);
	tctx->cg = slot;
	if (w && c && c->used) {
		tctx->cg_w = w;
		tctx->cg_seq = c->seq;
		cg_add(slot, w);
	}
}

/* @c's weight among its siblings: cpu.weight, or IDLE_WEIGHT while idle. */
static __always_inline u64 cg_weight_of(const struct cg_ctx *c)
{
	return c->idle ? IDLE_WEIGHT : (u64)c->set_w << WEIGHT_SHIFT;
}

/*
 * A new cgroup (or one that existed at load): give it a slot, looking from
 * the one after the last taken (cgroup_init may sleep; the scan is bounded
 * by MAX_CGROUPS and short until the slots run low).
 */
static __always_inline s32 cg_created(struct cgroup *cgrp, u32 weight, bool idle)
{
	struct cgroup *parent;
	struct cg_ctx *c;
	s32 up = -1;
	u32 *s, i, at, start = cg_hint;

	if (!cgrp->level)
		return 0;
	s = bpf_cgrp_storage_get(&cg_slots, cgrp, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return -ENOMEM;
	if (cgrp->level > 1) {
		parent = bpf_cgroup_ancestor(cgrp, cgrp->level - 1);
		if (parent) {
			up = cg_slot_of(parent);
			bpf_cgroup_release(parent);
		}
	}
	bpf_for(i, 0, MAX_CGROUPS) {
		at = (start + i) & (MAX_CGROUPS - 1);
		c = cg_ctx(at);
		if (!c || !__sync_bool_compare_and_swap(&c->used, 0, 1))
			continue;
		c->total = 0;
		c->lent = 0;
		c->set_w = weight;
		c->idle = idle;
		c->idle_h = 0;
		c->bw = -1;
		c->bw_h = 0;
		c->weight = cg_weight_of(c);
		c->g_gen = 0;
		c->parent = up;
		c->cgid = cgrp->kn->id;
		cg_hint = at + 1;
		*s = at + 1;
		if (idle)
			__sync_fetch_and_add(&cg_gen, 1);	/* children cache idle_h */
		return 0;
	}
	/* Out of slots: its tasks count in its parent's (the root's: none). */
	*s = up >= 0 ? (u32)(up + 1) | CG_BORROWED : 0;
	__sync_fetch_and_add(&cg_over, 1);
	return 0;
}

/*
 * The cgroup is gone: free its slot. It has no live tasks, but one that is
 * exiting may still be runnable and counted here: its weight leaves with
 * the slot (the seq bump makes its later uncount a no-op).
 */
static __always_inline void cg_removed(struct cgroup *cgrp)
{
	u32 raw = cg_slot_raw(cgrp);
	struct cg_ctx *c;
	s64 old;

	if (cgrp->level && (!raw || (raw & CG_BORROWED))) {
		/* It had none of its own (cg_created() ran out). */
		__sync_fetch_and_add(&cg_over, -1);
		return;
	}
	c = cg_ctx(cg_own_slot(cgrp));
	if (!c)
		return;
	__sync_fetch_and_add(&c->seq, 1);
	old = __sync_lock_test_and_set(&c->total, 0);
	if (old > 0)
		cg_add(c->parent, -(s64)__sync_lock_test_and_set(&c->lent, 0));
	c->used = 0;
	__sync_fetch_and_add(&cg_gen, 1);
}

/* @c's cpu.weight or cpu.idle changed: apply its weight among its siblings. */
static __always_inline void cg_reweigh(struct cg_ctx *c)
{
	u64 w = cg_weight_of(c), old;

	c->weight = w;
	/* Active: the parent sees the new weight at once (lent: see cg_add). */
	old = c->lent;
	if (old && old != w && __sync_bool_compare_and_swap(&c->lent, old, w))
		cg_add(c->parent, (s64)w - (s64)old);
	__sync_fetch_and_add(&cg_gen, 1);
}

static __always_inline void cg_weight_set(struct cgroup *cgrp, u32 weight)
{
	struct cg_ctx *c = cg_ctx(cg_own_slot(cgrp));

	if (!c)
		return;
	c->set_w = weight;
	cg_reweigh(c);
}

/* cpu.idle written (ops.cgroup_set_idle). */
static __always_inline void cg_idle_set(struct cgroup *cgrp, bool idle)
{
	struct cg_ctx *c = cg_ctx(cg_own_slot(cgrp));

	if (!c)
		return;
	c->idle = idle;
	cg_reweigh(c);	/* the generation bump makes every task below re-read idle_h */
}

#endif /* __NIMBLE_CGROUP_BPF_H */
