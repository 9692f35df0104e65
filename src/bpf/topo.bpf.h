/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-LLC and per-node cpumasks, built once in ops.init() from the tables
 * userspace filled, so the idle pick can intersect them with a task's
 * allowed CPUs.
 */
#ifndef __NIMBLE_TOPO_BPF_H
#define __NIMBLE_TOPO_BPF_H

#include "nimble.bpf.h"

struct mask_slot {
	struct bpf_cpumask __kptr *mask;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_LLCS);
	__type(key, u32);
	__type(value, struct mask_slot);
} llc_masks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NODES);
	__type(key, u32);
	__type(value, struct mask_slot);
} node_masks SEC(".maps");

/*
 * NUMA imbalance thresholds per (node, SD_NUMA level), written by userspace
 * after load and updatable while running. Read by the NUMA gate.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NODES * MAX_NUMA_LEVELS);
	__type(key, u32);
	__type(value, struct numa_level);
} numa_levels SEC(".maps");

static __always_inline const struct cpumask *slot_mask(void *map, u32 id)
{
	struct mask_slot *slot = bpf_map_lookup_elem(map, &id);

	return slot ? cast_mask(slot->mask) : NULL;
}

static __always_inline const struct cpumask *llc_mask(u32 llc)
{
	return slot_mask(&llc_masks, llc);
}

static __always_inline const struct cpumask *node_mask(u32 node)
{
	return slot_mask(&node_masks, node);
}

/*
 * A set of CPUs of one LLC, by their place in it (cpu_pos): one bit each,
 * a cache line per LLC. A hint for walks that would otherwise look at
 * every CPU of the LLC (which CPUs have tasks on their own queue, which run
 * SCHED_IDLE tasks): whoever reads a bit checks the CPU itself.
 */
#define LLC_WORDS	(MAX_CPUS / 64)
struct llc_bits {
	u64 w[LLC_WORDS];
};

/* An LLC id as an index the verifier sees in bounds. */
static __always_inline u32 llc_idx(u32 llc)
{
	barrier_var(llc);
	return llc & (MAX_LLCS - 1);
}

static __always_inline u64 *llc_word(struct llc_bits *b, s32 cpu, u64 *bit)
{
	u32 pos;

	barrier_var(cpu);
	pos = cpu_pos[cpu & (MAX_CPUS - 1)];
	*bit = 1ULL << (pos & 63);
	pos = (pos / 64) & (LLC_WORDS - 1);
	barrier_var(pos);
	return &b->w[pos & (LLC_WORDS - 1)];
}

/* Set (@on) or clear @cpu's bit, writing the line only if it changes. */
static __always_inline void llc_bit_put(struct llc_bits *b, s32 cpu, bool on)
{
	u64 bit, *w = llc_word(b, cpu, &bit);

	if (on && !(READ_ONCE(*w) & bit))
		__sync_fetch_and_or(w, bit);
	else if (!on && (READ_ONCE(*w) & bit))
		__sync_fetch_and_and(w, ~bit);
}

/* The CPU at place @pos of @llc (-1 past its end). */
static __always_inline s32 llc_cpu_at(u32 llc, u32 pos)
{
	u32 i;

	barrier_var(llc);
	llc &= MAX_LLCS - 1;
	if (pos >= llc_nr_cpus[llc])
		return -1;
	i = llc_first[llc] + pos;
	barrier_var(i);
	return llc_cpus[i & (MAX_CPUS - 1)];
}

/*
 * The next CPU of @llc whose bit is set in @b, after place @after in
 * ring order (so callers starting at their own place spread out), or -1.
 * Bounded by the LLC's words, not by nr_cpu_ids.
 */
static __always_inline s32 llc_bits_next(struct llc_bits *b, u32 llc, u32 after)
{
	u32 n = llc_nr_cpus[llc & (MAX_LLCS - 1)], words = (n + 63) / 64, i, wi, start;
	u64 w;

	if (!n)
		return -1;
	start = (after + 1) % n;
	bpf_for(i, 0, words + 1) {
		wi = (start / 64 + i) % words;
		barrier_var(wi);
		w = READ_ONCE(b->w[wi & (LLC_WORDS - 1)]);
		if (i == 0)
			w &= ~0ULL << (start & 63);	/* places before start: last */
		else if (i == words)
			w &= (start & 63) ? ~(~0ULL << (start & 63)) : 0;
		if (w)
			return llc_cpu_at(llc, wi * 64 + ctzll(w));
	}
	return -1;
}

/*
 * How far place @pos lies after place @start in a ring of @n (1..n; @start
 * itself is n): a walk by llc_bits_next() from @start has gone round once
 * when this stops growing.
 */
static __always_inline u32 ring_after(u32 n, u32 start, u32 pos)
{
	return n ? (pos + n - start - 1) % n + 1 : 0;
}

/* Build the mask of every CPU whose table entry equals @id. */
static s32 build_mask(void *map, u32 id, const volatile u32 *table)
{
	struct bpf_cpumask *mask, *old;
	struct mask_slot *slot;
	s32 cpu;

	slot = bpf_map_lookup_elem(map, &id);
	if (!slot)
		return -ENOENT;
	mask = bpf_cpumask_create();
	if (!mask)
		return -ENOMEM;
	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu >= MAX_CPUS)
			break;
		barrier_var(cpu);
		if (table[cpu & (MAX_CPUS - 1)] == id)
			bpf_cpumask_set_cpu(cpu, mask);
	}
	old = bpf_kptr_xchg(&slot->mask, mask);
	if (old)
		bpf_cpumask_release(old);
	return 0;
}

static s32 init_topology_masks(void)
{
	s32 i, err;

	bpf_for(i, 0, nr_llcs) {
		err = build_mask(&llc_masks, i, cpu_llc);
		if (err)
			return err;
	}
	bpf_for(i, 0, nr_nodes) {
		err = build_mask(&node_masks, i, cpu_node);
		if (err)
			return err;
	}
	return 0;
}

#endif /* __NIMBLE_TOPO_BPF_H */
