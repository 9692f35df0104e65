#!/bin/sh
# For every CPU, print the kernel's domains (/proc/schedstat names and
# masks, debugfs flags) and `scx_nimble topology --json`, for tests/vm.rs to
# compare; and check that a snapshot of the sysfs files gives the same output
# as the live tree.
. /tests/lib.sh

# Snapshot exactly the files the topology reader uses.
SNAP=/tmp/snap
snap() { for f in "$@"; do [ -e "$f" ] && mkdir -p "$SNAP$(dirname "$f")" && cat "$f" >"$SNAP$f"; done; }
snap /sys/devices/system/cpu/online
for c in /sys/devices/system/cpu/cpu[0-9]*; do
	for f in thread_siblings_list cluster_cpus_list physical_package_id; do snap "$c/topology/$f"; done
	for i in "$c"/cache/index*; do
		for f in level type shared_cpu_list; do snap "$i/$f"; done
	done
done
for n in /sys/devices/system/node/node[0-9]*; do snap "$n/cpulist" "$n/distance"; done

for c in $(seq 0 $(($(nr_cpus) - 1))); do
	kernel_domains "$c"
	for f in mainline v5.18 v4; do
		live=$(scx_nimble topology --cpu "$c" --imb-formula $f --json) || fail "topology --cpu $c failed"
		snapped=$(scx_nimble topology --sysfs-root $SNAP/sys --cpu "$c" --imb-formula $f --json) ||
			fail "topology --sysfs-root failed"
		[ "$live" = "$snapped" ] || fail "snapshot differs for CPU $c ($f): $snapped vs $live"
		echo "J $live"
	done
done
scx_nimble topology --cpu 0
rm "$SNAP/sys/devices/system/node/node0/distance"
out=$(scx_nimble topology --sysfs-root $SNAP/sys 2>&1) && fail "a broken snapshot was accepted"
echo "broken snapshot: $out"
[ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "node0/distance" || fail "unclear error: $out"
pass "snapshot == live for every CPU and formula"
