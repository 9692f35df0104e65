#!/bin/sh
# A nice-19 CPU hog among many nice-0 hogs must keep running (sched_ext's
# watchdog ejects a scheduler that leaves a runnable task waiting). Its
# vtime grows ~100x faster than theirs, so without a bound on how far ahead
# of the global clock a task may be queued, it would wait for seconds.
. /tests/lib.sh

N=$(nr_cpus)
# 15 s of samples in the full tier, 6 s in CI: without the bound, the hog
# waits for seconds after each slice, so a 6 s window holds such a wait.
WINDOW_CS=$(by_tier 1500 600)
start_sched
# This shell samples at nice -20 (the load it starts is put back at nice 0):
# among 16 hogs per CPU a nice-0 shell forks so slowly that its own delays,
# not the hog's waits, would set the sampling interval.
renice -n -20 -p $$ >/dev/null || fail "renice of the sampling shell failed"
nice -n 20 stress-ng --cpu $((16 * N)) --timeout 300s >/dev/null 2>&1 &
STRESS=$!
sleep 2
# From this nice -20 shell, +39 is nice 19, set before exec: a renice of the
# forked child raced with its own nice(1) call (which could undo it).
spin nice -n 39
LOW=$SPAWNED
low_is_19() { [ "$(proc_field "$LOW" 19)" = 19 ]; }
wait_until 50 "the hog's nice did not become 19" low_is_19
log "sampling the nice-19 hog $LOW"
# Sample its schedstat (run ns, wait ns, timeslices) every 0.25 s; track the
# longest stretch in which it never got the CPU. Builtins only (read, shell
# arithmetic, times in centiseconds): no fork per sample, which would wait
# behind the hogs.
read -r _ _ last <"/proc/$LOW/schedstat"
read -r up _ </proc/uptime; t_last=${up%.*}${up#*.}
gap=0; runs=0 start=$t_last now=$t_last
while [ $((now - start)) -lt "$WINDOW_CS" ]; do
	sleep 0.25
	read -r up _ </proc/uptime; now=${up%.*}${up#*.}
	read -r _ _ n <"/proc/$LOW/schedstat"
	if [ "$n" != "$last" ]; then
		runs=$((runs + n - last)); last=$n; t_last=$now
	fi
	[ $((now - t_last)) -le $gap ] || gap=$((now - t_last))
done
gap=$(awk -v g=$gap 'BEGIN { printf "%.2f", g / 100 }')
assert_attached "with a nice-19 hog among $((16 * N)) nice-0 hogs"
[ "$(proc_field $STRESS 19)" = 0 ] || fail "the load runs at nice $(proc_field $STRESS 19), not 0"
log "nice-19 hog, sampled for $(((now - start) / 100)) s: $runs timeslices, longest wait $gap s, $(cut -d' ' -f1 "/proc/$LOW/schedstat") ns run"
[ $runs -gt 0 ] || fail "the nice-19 hog never ran"
awk "BEGIN { exit !($gap < 3) }" || fail "the nice-19 hog waited $gap s for a CPU"
kill "$LOW" $STRESS
wait $STRESS
stop_and_check
pass "nice-19 hog ran $runs times, longest wait $gap s"
