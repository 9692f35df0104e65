#!/bin/sh
# A 1 ms-periodic task beside a CPU loop on one CPU (issue 35; docs/lab.md,
# stop 62): cyclictest's one SCHED_OTHER thread (-p 0 --policy=other
# -i 1000) and a shell loop, both bound to CPU 3, under EEVDF and
# scx_nimble in the same boot, rounds interleaved. Runs in the VM guest:
#   vm/nimble-vm run --add bench/periodic_beside_loop.sh:/bin/pbl --topo n2l4 -- "sh /bin/pbl"
# Prints each round and a verdict (ok / BAD) on the bar a CI test would set:
#   - cyclictest's average latency within twice EEVDF's worst round + 200 us;
#   - the loop's CPU time (schedstat) at least 0.8x its EEVDF rounds' least.
# Not in the suite: scx_nimble fails it today (2.2-3.0 ms average against
# EEVDF's 0.24-0.32 ms). The running loop keeps a protected millisecond
# (--preempt-min-us) that starts again at each resumption; the wakee's own
# preemption is one, and its next timer, a little less than 1 ms later, is
# refused and waits for the tick. Carrying the protection across the
# preemption passed this (0.25-0.29 ms) and made hackbench 1.4-3x slower.
. /tests/lib.sh

SECS=${SECS:-4}
ROUNDS=${ROUNDS:-2}
CPU=3
[ "$(nr_cpus)" -gt $CPU ] || fail "needs CPU $CPU: $(nr_cpus) CPUs"

# one LABEL: appends "LABEL avg_us max_us loop_ns" to /tmp/per.res.
one() {
	loop_on $CPU
	loop=$SPAWNED
	sleep 0.5
	r0=$(awk '{ print $1 }' "/proc/$loop/schedstat")
	out=$(cyclictest -t 1 -a $CPU -p 0 --policy=other -i 1000 -D "$SECS" -q 2>&1) ||
		fail "$1: cyclictest failed: $out"
	r1=$(awk '{ print $1 }' "/proc/$loop/schedstat")
	kill "$loop"
	wait "$loop" 2>/dev/null
	avg=$(echo "$out" | sed -n 's/.* Avg: *\([0-9]*\).*/\1/p')
	max=$(echo "$out" | sed -n 's/.* Max: *\([0-9]*\).*/\1/p')
	[ -n "$avg" ] && [ -n "$max" ] || fail "$1: no Avg/Max in cyclictest's output: $out"
	echo "$1 $avg $max $((r1 - r0))" >>/tmp/per.res
	log "$1: average latency $avg us, longest $max us, the loop ran $(((r1 - r0) / 1000000)) ms of ${SECS} s"
}

: >/tmp/per.res
interleaved "$ROUNDS" one "after the periodic task"

v=$(awk '$1 == "eevdf" { if ($2 > ea) ea = $2; if (!el || $4 < el) el = $4 }
	$1 == "nimble" { if ($2 > na) na = $2; if (!nl || $4 < nl) nl = $4 }
	END { bound = 2 * ea + 200
		printf "%s average %d us (bound %d: EEVDF worst %d), loop %.0f ms vs EEVDF least %.0f ms\n",
			(na <= bound && nl >= 0.8 * el) ? "ok" : "BAD", na, bound, ea, nl / 1e6, el / 1e6 }' /tmp/per.res)
log "scx_nimble's worst round: $v"
