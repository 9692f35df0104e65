#!/bin/sh
# A nice-19 CPU hog among many nice-0 hogs must keep running (sched_ext's
# watchdog ejects a scheduler that leaves a runnable task waiting). Its
# vtime grows ~100x faster than theirs, so without a bound on how far ahead
# of the global clock a task may be queued, it would wait for seconds.
. /tests/lib.sh

N=$(nr_cpus)
start_sched
stress-ng --cpu $((16 * N)) --timeout 25s >/dev/null 2>&1 &
STRESS=$!
sleep 2
sh -c 'while :; do :; done' &
LOW=$!
renice -n 19 -p $LOW >/dev/null || fail "renice failed"
[ "$(proc_field $LOW 19)" = 19 ] || fail "nice of the hog is $(proc_field $LOW 19), not 19"
# Sample its schedstat (run ns, wait ns, timeslices) for 15 s; track the
# longest stretch in which it never got the CPU.
last=$(cut -d' ' -f3 /proc/$LOW/schedstat); t_last=$(cut -d' ' -f1 /proc/uptime)
gap=0; runs=0
for i in $(seq 1 60); do
	sleep 0.25
	now=$(cut -d' ' -f1 /proc/uptime); n=$(cut -d' ' -f3 /proc/$LOW/schedstat)
	if [ "$n" != "$last" ]; then
		runs=$((runs + n - last)); last=$n; t_last=$now
	fi
	gap=$(awk "BEGIN { g = $now - $t_last; print (g > $gap) ? g : $gap }")
done
assert_attached "with a nice-19 hog among $((16 * N)) nice-0 hogs"
log "nice-19 hog: $runs timeslices, longest wait $gap s, $(cut -d' ' -f1 /proc/$LOW/schedstat) ns run"
[ $runs -gt 0 ] || fail "the nice-19 hog never ran"
awk "BEGIN { exit !($gap < 3) }" || fail "the nice-19 hog waited $gap s for a CPU"
kill $LOW
wait $STRESS
stop_sched
assert_clean_dmesg
assert_counter imbalance = 0
pass "nice-19 hog ran $runs times, longest wait $gap s"
