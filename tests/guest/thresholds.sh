#!/bin/sh
# The numa_levels map inside the running scheduler holds the kernel's
# imb_numa_nr (mainline formula) or the override. Prints, per
# configuration, the map (bpftool JSON), `scx_nimble topology` and the
# kernel's own domains of each node's first CPU, for tests/vm.rs: it derives
# the thresholds from the kernel's domains itself.
. /tests/lib.sh

run_config() { # FORMULA [OVERRIDE]
	f=$1 ovr=$2
	start_sched --imb-formula "$f" ${ovr:+--imb-numa-nr "$ovr"}
	grep "imb_numa_nr ($f)" "$SCHED_ERR" || fail "no threshold line at startup"
	echo "F $f ${ovr:-none}"
	id=$(newest_map_id numa_levels)
	[ -n "$id" ] || fail "no numa_levels map"
	echo "B $(bpftool -j map dump id "$id")"
	for n in /sys/devices/system/node/node[0-9]*; do
		node=${n##*node}
		cpu=$(cut -d, -f1 "$n/cpulist" | cut -d- -f1)
		echo "T $node $(scx_nimble topology --cpu "$cpu" --imb-formula "$f" --json)"
		kernel_domains "$cpu"
	done
	stop_sched
}

run_config mainline
run_config v4 1=5
expect_fail=$(scx_nimble --imb-numa-nr 9=1 2>&1) && fail "a level the machine lacks was accepted"
echo "bad level: $expect_fail"
[ "$(sched_state)" = disabled ] || fail "state $(sched_state) after a refused override"
pass "thresholds printed"
