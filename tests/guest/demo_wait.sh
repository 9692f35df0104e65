#!/bin/sh
# The LLC queues' wait under the demo's load: for each scheduler binary in
# BINS (default: scx_nimble), ROUNDS rounds in rotated order in this boot,
# attach it, run the demo's load (stress-ng CPU hogs on half the CPUs with a
# fork loop, hackbench -g 2 in a loop) for SECS seconds, and print the final
# wait_p50_us / wait_p99_us it reports. Not a test: a measurement
# (vm/nimble-vm run --add OLD -- BINS="scx_nimble OLD" sh /tests/suite.sh
# demo_wait.sh).
. /tests/lib.sh

BINS=${BINS:-scx_nimble}
ROUNDS=${ROUNDS:-2}
SECS=${SECS:-20}
N=$(nproc)
r=1
while [ "$r" -le "$ROUNDS" ]; do
	# shellcheck disable=SC2086
	for bin in $(rotated "$r" $BINS); do
		$bin >"$SCHED_OUT" 2>"$SCHED_ERR" &
		SCHED_PID=$!
		wait_until 600 "$bin did not attach" alive_and_attached
		stress-ng --cpu $((N / 2)) --fork 1 --affinity 1 --timeout "$SECS" >/dev/null 2>&1 &
		S=$!
		(while :; do hackbench -g 2 -l 100 >/dev/null 2>&1; sleep 1; done) &
		H=$!
		sleep "$SECS"
		kill $H; wait $S 2>/dev/null
		kill -INT "$SCHED_PID"; wait "$SCHED_PID"
		wait_until 50 "sched_ext not disabled" state_disabled
		log "$bin round $r: $(grep '^final:' "$SCHED_OUT" | tr ' ' '\n' | grep -E '^(waits|wait_p50_us|wait_p99_us)=' | tr '\n' ' ')"
	done
	r=$((r + 1))
done
pass "demo waits measured"
