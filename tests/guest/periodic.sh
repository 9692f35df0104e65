#!/bin/sh
# A 1 ms-periodic task beside a CPU loop on one CPU (issue 35):
# cyclictest's one SCHED_OTHER thread (-p 0 --policy=other -i 1000) and a
# shell loop, both bound to CPU 3, under EEVDF and scx_nimble in the same
# boot, rounds interleaved. Passes when, in every scx_nimble round:
#   - cyclictest's average latency is within twice EEVDF's median round
#     + 200 us (TCG's noise: EEVDF's own rounds ranged 0.23-0.46 ms in
#     stops 62-63; the median, so one noisy EEVDF round cannot lift the
#     bound to the 2.6-3.2 ms the old rule gives);
#   - the loop's CPU time (schedstat) is at least 0.8x its EEVDF rounds'
#     least (the periodic task takes its wakeups, not the loop's CPU).
# The running loop used to keep a protected millisecond (--preempt-min-us)
# that started again at each resumption: the wakee's own preemption is one,
# its next timer a little under 1 ms later was refused and waited for the
# tick (2.2-3.1 ms average against EEVDF's 0.24-0.32). A running task
# ahead of its share of its CPU keeps no protection now (running_ahead()
# in rules.h, EEVDF's eligibility); --protect-ahead brings the old rule
# back, and this test fails with it.
. /tests/lib.sh

SECS=${SECS:-4}
ROUNDS=${ROUNDS:-3}
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
# PERIODIC_ARGS: scx_nimble's flags (--protect-ahead breaks the mechanism).
# shellcheck disable=SC2086
interleaved "$ROUNDS" one "after the periodic task" $PERIODIC_ARGS

em=$(awk '$1 == "eevdf" { print $2 }' /tmp/per.res | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
v=$(awk -v em="$em" '$1 == "eevdf" { if (!el || $4 < el) el = $4 }
	$1 == "nimble" { if ($2 > na) na = $2; if (!nl || $4 < nl) nl = $4 }
	END { bound = 2 * em + 200
		printf "%s average %d us (bound %d: EEVDF median %d), loop %.0f ms vs EEVDF least %.0f ms\n",
			(em != "" && na <= bound && nl >= 0.8 * el) ? "ok" : "BAD", na, bound, em, nl / 1e6, el / 1e6 }' /tmp/per.res)
log "scx_nimble's worst round: $v"
case $v in
ok*) pass "a 1 ms-periodic task beside a loop on one CPU waits as under EEVDF: $v" ;;
*) fail "a 1 ms-periodic task beside a loop on one CPU: $v" ;;
esac
