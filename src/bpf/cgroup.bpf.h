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
	u32 pad;
};

/*
 * In .bss, not a map: the hot path reaches its cgroup by index without a
 * lookup, and the stats read every slot through the mmap (stats/cgroups.rs).
 */
struct cg_ctx cgs[MAX_CGROUPS];

/* Each cgroup's slot + 1 (0: none, the root or out of slots). */
struct {
	__uint(type, BPF_MAP_TYPE_CGRP_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, u32);
} cg_slots SEC(".maps");

/* Bumped when any cgroup turns active or idle or changes weight. */
u64 cg_gen = 1;

static __always_inline struct cg_ctx *cg_ctx(s32 slot)
{
	if (slot < 0 || slot >= MAX_CGROUPS)
		return NULL;
	return &cgs[slot & (MAX_CGROUPS - 1)];
}

/* The slot of @cgrp, -1 for the root or a cgroup without one. */
static __always_inline s32 cg_slot_of(struct cgroup *cgrp)
{
	u32 *s;

	if (!cgrp || !cgrp->level)
		return -1;
	s = bpf_cgrp_storage_get(&cg_slots, cgrp, 0, 0);
	return s && *s ? (s32)*s - 1 : -1;
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
	u32 i;

	if (!c)
		return NICE0_WEIGHT;
	if (c->g_gen == gen)
		return c->g;
	g = c->weight;
	up = c->parent;
	bpf_for(i, 0, MAX_CG_DEPTH) {
		a = cg_ctx(up);
		if (!a)
			break;
		t = READ_ONCE(a->total);	/* once: it may cross 0 meanwhile */
		if (t > 0)
			g = g * a->weight / t;
		up = a->parent;
	}
	c->g = g ? g : 1;
	c->g_gen = gen;
	return c->g;
}

/*
 * @p's weight for deadlines and load: its own, scaled by its cgroup's
 * share when cgroup weights are on (struct nimble_ctl).
 */
static __always_inline u64 cg_task_weight(struct task_struct *p, struct task_ctx *tctx)
{
	struct nimble_ctl *k;
	struct cg_ctx *c;
	u64 w = task_weight(p), eff;
	s64 t;

	if (tctx->cg < 0 || !tctx->cg_w)
		return w;
	k = ctl();
	if (!k || !k->cgroup_weight)
		return w;
	c = cg_ctx(tctx->cg);
	if (!c || c->seq != tctx->cg_seq)
		return w;
	t = READ_ONCE(c->total);
	if (t <= 0)
		return w;
	eff = cg_group_weight(tctx->cg) * tctx->cg_w / t;
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

/* A new cgroup (or one that existed at load): give it a slot. */
static __always_inline s32 cg_created(struct cgroup *cgrp, u32 weight)
{
	struct cgroup *parent;
	struct cg_ctx *c;
	s32 up = -1;
	u32 *s, i;

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
		c = cg_ctx(i);
		if (!c || !__sync_bool_compare_and_swap(&c->used, 0, 1))
			continue;
		c->total = 0;
		c->lent = 0;
		c->weight = (u64)weight << WEIGHT_SHIFT;
		c->g_gen = 0;
		c->parent = up;
		c->cgid = cgrp->kn->id;
		*s = i + 1;
		return 0;
	}
	/* Out of slots: its tasks count as the root's (their own weight). */
	*s = 0;
	return 0;
}

/*
 * The cgroup is gone: free its slot. It has no live tasks, but one that is
 * exiting may still be runnable and counted here: its weight leaves with
 * the slot (the seq bump makes its later uncount a no-op).
 */
static __always_inline void cg_removed(struct cgroup *cgrp)
{
	s32 slot = cg_slot_of(cgrp);
	struct cg_ctx *c = cg_ctx(slot);
	s64 old;

	if (!c)
		return;
	__sync_fetch_and_add(&c->seq, 1);
	old = __sync_lock_test_and_set(&c->total, 0);
	if (old > 0)
		cg_add(c->parent, -(s64)__sync_lock_test_and_set(&c->lent, 0));
	c->used = 0;
	__sync_fetch_and_add(&cg_gen, 1);
}

static __always_inline void cg_weight_set(struct cgroup *cgrp, u32 weight)
{
	struct cg_ctx *c = cg_ctx(cg_slot_of(cgrp));
	u64 w = (u64)weight << WEIGHT_SHIFT, old;

	if (!c)
		return;
	c->weight = w;
	/* Active: the parent sees the new weight at once (lent: see cg_add). */
	old = c->lent;
	if (old && old != w && __sync_bool_compare_and_swap(&c->lent, old, w))
		cg_add(c->parent, (s64)w - (s64)old);
	__sync_fetch_and_add(&cg_gen, 1);
}

#endif /* __NIMBLE_CGROUP_BPF_H */
