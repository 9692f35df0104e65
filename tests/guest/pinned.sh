#!/bin/sh
# Issue 2, acceptance 3: a task pinned to one CPU keeps running, on that CPU,
# while every CPU is busy with twice as many unpinned CPU hogs.
. /tests/lib.sh

N=$(nr_cpus)
CPU=$((N - 1))
start_sched
stress-ng --cpu $((2 * N)) --timeout 25s >/dev/null 2>&1 &
STRESS=$!
sleep 2
taskset -c $CPU sh -c 'while :; do :; done' &
PINNED=$!
sleep 1

# Sample 20 times: where it ran, and how much CPU time it got. The window is
# measured, not assumed: under TCG each sample takes a while.
HZ=100	# USER_HZ, the unit of /proc/PID/stat times
w0=$(cut -d' ' -f1 /proc/uptime)
t0=$(proc_field $PINNED 14)
for i in $(seq 1 20); do
	cpu=$(proc_field $PINNED 39)
	[ "$cpu" = "$CPU" ] || fail "pinned task seen on CPU $cpu, pinned to $CPU"
	sleep 0.5
done
t1=$(proc_field $PINNED 14)
w1=$(cut -d' ' -f1 /proc/uptime)
ticks=$((t1 - t0))
window=$(awk "BEGIN { print int(($w1 - $w0) * $HZ) }")
pct=$((100 * ticks / window))
log "pinned task got $ticks of $window ticks ($pct %) on CPU $CPU, 3 runnable per CPU"
# Its fair share is about a third of the CPU; starving would be near 0.
[ $pct -ge 10 ] || fail "pinned task starved: $pct % of CPU $CPU"
assert_attached "with a pinned task under full load"
kill $PINNED
wait $STRESS
stop_sched
assert_clean_dmesg
assert_counter imbalance = 0
pass "pinned task got $pct % of CPU $CPU under full load"
