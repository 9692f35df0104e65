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
