#!/bin/sh
# 60 s of mixed load under each NUMA rule, switched at runtime in one
# scheduler run: stress-ng CPU + fork + affinity churn, two ping-pong pairs.
# After each minute: still attached, no sched_ext complaint (watchdog,
# error), node counts sane; at the end every counter balances. 60 s per rule
# in the full tier, 8 s in CI (a stall is ejected by the watchdog within
# the sched_ext timeout set, and a rule that breaks the books or the counts
# does it within a few seconds of mixed load). SECS overrides both.
. /tests/lib.sh

N=$(nr_cpus)
SECS=${SECS:-$(by_tier 60 8)}
# Two stats lines at least per rule.
start_sched --stats $((SECS >= 30 ? 5 : 2))
TOTAL=$((10 * SECS + 60))	# outlives the test; stopped at the end
stress-ng --cpu "$N" --fork 2 --affinity 2 --affinity-rand --timeout "${TOTAL}s" \
	>/tmp/stress.out 2>&1 &
STRESS=$!
for i in 1 2; do
	perf bench sched pipe -l 1000000000 >/dev/null 2>&1 &
	PAIRS="$PAIRS $!"
done

# From outside, over all five rules: every CPU busy (N CPU hogs and two
# pairs), and no CPU worker or pair task waits 5 s for a CPU (fair: a
# fraction of a second; stranded: until the 30 s watchdog).
sleep 1
cpu_workers $STRESS
WATCH=$WORKERS
for p in $PAIRS; do WATCH="$WATCH $p $(children $p)"; done
stall_watch $((5 * SECS)) $WATCH
cpu_busy_begin
summary=
for rule in mainline v3 v4 off tip; do
	tune --numa-rule $rule
	sleep "$SECS"
	assert_attached "after $SECS s under $rule"
	assert_clean_dmesg
	kill -0 $STRESS || fail "stress-ng died under $rule"
	line=$(grep '^stats:' "$SCHED_OUT" | tail -n 1)
	echo "$line" | grep -q "numa_rule=$rule " || fail "stats do not show numa_rule=$rule: $line"
	nr=$(counter node_running stats:)
	echo "$nr" | tr ',' '\n' | grep -q '^-' && fail "negative node_running under $rule: $nr"
	moves="pull=$(counter numa_pull stats:) push=$(counter numa_push stats:) fork_remote=$(counter fork_remote stats:)"
	log "$rule: attached, clean; node_running=$nr $moves"
	summary="$summary $rule[$moves]"
done
cpu_busy_check 60 "mixed load under five rules"
stall_check 5 "CPU workers and pipe pairs under five rules"
kill $PAIRS $STRESS 2>/dev/null
wait $STRESS
stop_and_check pending
final=$(counter node_running)
echo "$final" | tr ',' '\n' | grep -qv '^0$' && fail "node_running after unload: $final"
pass "5 rules x $SECS s of mixed load, attached throughout:$summary"
