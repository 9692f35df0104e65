#!/bin/sh
# Hackbench completes in every shared wakequeue mode, and each mode's
# counters move as the mode says; the mode is switched with `scx_nimble
# tune` on one running scheduler (off -> wakeups -> sis-fail -> all -> off),
# so a switch takes effect without a restart.
. /tests/lib.sh

# swq enqueues by reason, and pulls, since the last call (from stats lines).
snap() {
	next_stats
	stats_snapshot
	for c in swq_wake_idle swq_wake_busy swq_other swq_pull; do
		eval "d_$c=\$(( \$(snap_value $c) - \${s_$c:-0} ))"
		eval "s_$c=\$(snap_value $c)"
	done
	log "  $1: wake_idle +$d_swq_wake_idle wake_busy +$d_swq_wake_busy other +$d_swq_other pull +$d_swq_pull"
}
want() { # DESCRIPTION TEST...
	what=$1
	shift
	[ "$@" ] || fail "$mode: $what ($(grep '^stats:' "$SCHED_OUT" | tail -n 1))"
}

# Round trips and hackbench loops: the full tier's, or CI's (each still
# makes thousands of wakeups, far over the counts asserted).
PIPE_LOOPS=$(by_tier 20000 8000) HB_LOOPS=$(by_tier 50 20)
start_sched --stats 0.5 --swq off --swq-shards 2
snap start
for mode in off wakeups sis-fail all off; do
	tune --swq "$mode"
	snap switched
	# Light load: a pipe ping-pong pair, 6 of 8 CPUs idle.
	perf bench sched pipe -l "$PIPE_LOOPS" >/dev/null 2>&1 || fail "$mode: perf bench sched pipe failed"
	snap "ping-pong (idle CPUs remain)"
	case $mode in
	off)	  want "off enqueued" $((d_swq_wake_idle + d_swq_wake_busy + d_swq_other)) -eq 0 ;;
	wakeups)  want "no idle-CPU wakeups went through the swq" "$d_swq_wake_idle" -gt 1000
		  want "non-wakeups entered" "$d_swq_other" -eq 0 ;;
	sis-fail) want "enqueued while idle CPUs remained" \
		       $((d_swq_wake_idle + d_swq_wake_busy + d_swq_other)) -eq 0 ;;
	all)	  want "idle-CPU wakeups missing" "$d_swq_wake_idle" -gt 1000 ;;
	esac
	# Overload: hackbench (160 tasks on 8 CPUs) runs to completion.
	# From outside: no CPU sits idle while 160 tasks want one (a swq no
	# CPU pulls from would leave its tasks waiting and CPUs idle). 30 %:
	# CI's 1-2 s run under TCG measured 38-92 % per CPU, once 38 % on two
	# CPUs in mode all (2026-12-05), where 40 % was the bound.
	cpu_busy_begin
	hackbench -g 4 -l "$HB_LOOPS" >/dev/null 2>&1 || fail "$mode: hackbench failed"
	cpu_busy_check 30 "$mode: hackbench"
	assert_attached "$mode: after hackbench"
	snap hackbench
	case $mode in
	off)	  want "off enqueued" $((d_swq_wake_idle + d_swq_wake_busy + d_swq_other)) -eq 0 ;;
	wakeups)  want "no busy wakeups" "$d_swq_wake_busy" -gt 0
		  want "non-wakeups entered" "$d_swq_other" -eq 0 ;;
	sis-fail) want "no wakeups that found no idle CPU" "$d_swq_wake_busy" -gt 0
		  want "a wakeup with an idle CPU entered" "$d_swq_wake_idle" -eq 0
		  want "non-wakeups entered" "$d_swq_other" -eq 0 ;;
	all)	  want "forks/preemptions missing" "$d_swq_other" -gt 0
		  want "busy wakeups missing" "$d_swq_wake_busy" -gt 0 ;;
	esac
	[ "$mode" = off ] || want "nothing pulled" "$d_swq_pull" -gt 0
done
grep -q 'controls changed: numa_rule=mainline swq=all' "$SCHED_ERR" ||
	fail "the scheduler did not log the switch to all"
stop_and_check pending swq_depth
# Every task that entered a swq ran (or was dropped) exactly once.
[ "$(counter ins_swq)" -gt 0 ] || fail "no task entered a swq"
assert_counter swq_pull = "$(counter run_swq)"
pass "hackbench in every swq mode; counters follow the mode; switched live"
