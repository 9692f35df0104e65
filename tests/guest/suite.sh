#!/bin/sh
# Runs several guest scripts in one boot (tests/vm.rs boots each topology and
# kernel once): each between "@@CASE_BEGIN name@@" and "@@CASE_END name rc
# seconds@@" lines that the host splits the console on, each under its own
# time limit, and the guest put back as a fresh boot leaves it before the
# next one: no scheduler loaded, no process of the last script left, every
# CPU online, no test cgroup, an empty /tmp and kernel log. A script that
# fails does not stop the others.
#   usage: suite.sh [-t SECS] SCRIPT...   (SECS: limit per script, default 600)
limit=600
if [ "$1" = -t ]; then limit=$2; shift 2; fi

uptime_s() { cut -d' ' -f1 /proc/uptime; }

# ancestors: this shell and every process above it (init included).
ancestors() {
	p=$$
	while [ -n "$p" ] && [ "$p" -gt 0 ]; do
		echo "$p"
		[ "$p" = 1 ] && break
		p=$(sed 's/^.*) //' "/proc/$p/stat" | cut -d' ' -f2)
	done
}

reset_guest() {
	# A scheduler left running gets the clean stop first (SIGINT), so the
	# next script starts from `disabled`, as after a boot.
	for p in $(pidof scx_nimble); do kill -INT "$p" 2>/dev/null; done
	i=0
	while pidof scx_nimble >/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	# What a script left behind (a failed script's CPU loops above all) is
	# killed, or it would load every later script of the boot. Kernel
	# threads are kthreadd (pid 2) and its children. (Not "cmdline is
	# empty": procfs files stat as size 0, so `[ -s ]` is false for all.)
	# One awk over every stat file, not two forks per process: a reset
	# took ~3.5 s on n2l4 that way (19 of them a boot). The pipeline's own
	# processes are gone by the time the kill runs.
	keep=" $(ancestors | tr '\n' ' ') "
	left=
	for pid in $(cat /proc/[0-9]*/stat 2>/dev/null | awk -v keep="$keep" -v me=$$ '{
		pid = $1; line = $0; sub(/^.*\) /, "", line); split(line, f, " ")
		if (index(keep, " " pid " ") || pid == 2 || f[2] == "" || f[2] == 2 || f[2] == me) next
		print pid }'); do
		kill -KILL "$pid" 2>/dev/null && left="$left $pid"
	done
	[ -z "$left" ] || echo "suite.sh: killed what $s left running:$left"
	i=0
	until [ "$(cat /sys/kernel/sched_ext/state 2>/dev/null)" = disabled ] || [ $i -ge 100 ]; do
		sleep 0.1; i=$((i + 1))
	done
	[ $i -lt 100 ] || echo "suite.sh: WARNING: sched_ext still $(cat /sys/kernel/sched_ext/state) after reset"
	for c in /sys/devices/system/cpu/cpu[0-9]*/online; do
		[ "$(cat "$c")" = 1 ] || echo 1 >"$c"
	done
	# Every test cgroup, nested ones first (s2/c/x before s2/c before s2);
	# no fork per cgroup (cgroup_weights.sh makes 2 000).
	find /sys/fs/cgroup -mindepth 1 -type d | awk -F/ '{ print NF, $0 }' | sort -rn | cut -d' ' -f2- >/tmp/cgs
	while read -r g; do
		while read -r p; do echo "$p" >/sys/fs/cgroup/cgroup.procs; done <"$g/cgroup.procs" 2>/dev/null
	done </tmp/cgs
	xargs rmdir </tmp/cgs 2>/dev/null
	left=$(find /sys/fs/cgroup -mindepth 1 -type d | tr '\n' ' ')
	[ -z "$left" ] || echo "suite.sh: WARNING: cgroups left after reset: $left"
	rm -rf /tmp/* /var/run/scx
	dmesg -c >/dev/null
}

for s in "$@"; do
	echo "@@CASE_BEGIN $s@@"
	t0=$(uptime_s)
	timeout -s KILL "$limit" sh "/tests/$s"
	rc=$?
	[ $rc = 137 ] && echo "suite.sh: $s killed after its ${limit} s limit"
	echo "@@CASE_END $s $rc $(awk -v a="$t0" '{ printf "%d", $1 - a + 0.5 }' /proc/uptime)@@"
	reset_guest
done
