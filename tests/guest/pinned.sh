#!/bin/sh
# A task pinned to one CPU keeps running, on that CPU, while every CPU is
# busy with twice as many unpinned CPU hogs.
. /tests/lib.sh

N=$(nr_cpus)
CPU=$((N - 1))
start_sched
# 20 samples (10 s) in the full tier, 10 in CI: a starved pinned task gets
# no tick in any window, and each sample checks its CPU.
SAMPLES=$(by_tier 20 10)
stress-ng --cpu $((2 * N)) --timeout 300s >/dev/null 2>&1 &
STRESS=$!
sleep 2
loop_on $CPU
PINNED=$SPAWNED
# The sampling shell at nice -20, so it samples on time (the load keeps
# nice 0; the sampler sleeps nearly all the time).
renice -n -20 -p $$ >/dev/null || fail "renice of the sampling shell failed"
sleep 1

# Sample SAMPLES times: where it ran, and how much CPU time it got. The window is
# measured, not assumed: under TCG each sample takes a while.
HZ=100	# USER_HZ, the unit of /proc/PID/stat times
w0=$(cut -d' ' -f1 /proc/uptime)
t0=$(proc_field "$PINNED" 14)
for i in $(seq 1 "$SAMPLES"); do
	# Builtins only (no fork per sample): field 39 of its stat is its CPU.
	read -r line <"/proc/$PINNED/stat"
	# shellcheck disable=SC2086
	set -- $line
	[ "${39}" = "$CPU" ] || fail "pinned task seen on CPU ${39}, pinned to $CPU"
	sleep 0.5
done
t1=$(proc_field "$PINNED" 14)
w1=$(cut -d' ' -f1 /proc/uptime)
ticks=$((t1 - t0))
window=$(awk "BEGIN { print int(($w1 - $w0) * $HZ) }")
pct=$((100 * ticks / window))
log "pinned task got $ticks of $window ticks ($pct %) on CPU $CPU, 3 runnable per CPU"
# Its fair share is about a third of the CPU; starving would be near 0.
[ $pct -ge 10 ] || fail "pinned task starved: $pct % of CPU $CPU"
assert_attached "with a pinned task under full load"
kill "$PINNED" $STRESS
wait $STRESS
stop_and_check
pass "pinned task got $pct % of CPU $CPU under full load"
