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

# Sample for 10 s: where it ran, and how much CPU time it got.
HZ=100
t0=$(proc_field $PINNED 14)
for i in $(seq 1 20); do
	cpu=$(proc_field $PINNED 39)
	[ "$cpu" = "$CPU" ] || fail "pinned task seen on CPU $cpu, pinned to $CPU"
	sleep 0.5
done
t1=$(proc_field $PINNED 14)
ticks=$((t1 - t0))
log "pinned task got $ticks ticks of 10 s on CPU $CPU (3 runnable per CPU)"
# Fair share is ~1/3 of the CPU (~330 ticks); demand at least a tenth of the window.
[ $ticks -ge $((HZ)) ] || fail "pinned task starved: $ticks ticks in 10 s"
assert_attached "with a pinned task under full load"
kill $PINNED
wait $STRESS
stop_sched
assert_clean_dmesg
assert_counter imbalance = 0
pass "pinned task ran $ticks ticks in 10 s on CPU $CPU"
