#!/bin/sh
# A communicating pair (perf bench sched pipe: two processes in ping-pong)
# started on node 0 with the rest of the machine idle stays on node 0 under
# the mainline rule, and spreads under v3 and off. The rule is switched at
# runtime with `scx_nimble tune`, in one scheduler run: placement changes
# with no restart.
. /tests/lib.sh

# Two nodes: on n4 the pair would fill a 2-CPU node, where any extra task
# overloads it (numa_spread.sh covers n4).
node1_watcher
SAMPLES=$(by_tier 30 20)
start_sched --stats 1
SCHED_PID_0=$SCHED_PID

# pair_local_pct: start a pair from node 0, sample where both processes are
# SAMPLES times (30 in the full tier, 20 in CI); PCT = the percentage of
# samples with both on node 0.
pair_local_pct() {
	spawn_from "$N0" perf bench sched pipe -l 1000000000
	sleep 1
	child=$(children "$SPAWNED")
	[ -n "$child" ] || fail "perf bench sched pipe did not fork its partner"
	# One awk process takes every sample (a fork per sample costs more
	# than the 0.1 s between them): "uptime c0/c1", tasks per node.
	sample_nodes "$SAMPLES" 0.1 "$SPAWNED" $child >/tmp/pair
	local_n=$(awk '$2 ~ /^2\// { n++ } END { print n + 0 }' /tmp/pair)
	seen=$(awk '{ printf "%s ", $2 }' /tmp/pair)
	c=$(grep '^stats:' "$SCHED_OUT" | tail -n 1 | tr ' ' '\n' |
		grep -E '^(fork_local|fork_remote|numa_push|numa_pull|numa_refused|home_return)=' | tr '\n' ' ')
	log "  counters so far: $c"
	# Tasks per node at each sample, counted: "30x2/0" = both on node 0.
	log "  samples (tasks on node 0/1/...): $(echo $seen | tr ' ' '\n' | uniq -c | awk '{ printf "%sx%s ", $1, $2 }')"
	kill "$SPAWNED" $child 2>/dev/null
	wait "$SPAWNED" 2>/dev/null
	PCT=$((100 * local_n / SAMPLES))
}


# A fork decision sees the load of that instant: a kernel worker thread
# waking on node 0 as the pair forks makes mainline spread it, as it would
# under EEVDF. So each rule gets three trials and the majority verdict.
# trials RULE: run 3 pairs; LOCAL = how many kept the pair on node 0 in
# >= 90 % of samples, SPREAD = how many did in <= 50 %; PCTS = the values.
trials() {
	LOCAL=0 SPREAD=0 PCTS=
	for t in 1 2 3; do
		pair_local_pct
		[ "$PCT" -ge 90 ] && LOCAL=$((LOCAL + 1))
		[ "$PCT" -le 50 ] && SPREAD=$((SPREAD + 1))
		PCTS="$PCTS$PCT "
	done
	log "$1: pair on node 0 in $PCTS% of samples (3 trials)"
}

# Warm-up, not measured: the first run makes the kernel create worker
# threads on node 0.
pair_local_pct
trials mainline; main1=$LOCAL p_main1=$PCTS
tune --numa-rule v3
trials v3; v3=$SPREAD p_v3=$PCTS
tune --numa-rule off
trials off; off=$SPREAD p_off=$PCTS
tune --numa-rule mainline
trials "mainline again"; main2=$LOCAL p_main2=$PCTS

[ "$SCHED_PID" = "$SCHED_PID_0" ] && kill -0 "$SCHED_PID" || fail "scheduler restarted"
assert_attached "after three rule switches"
grep -q "controls changed: numa_rule=v3 .*(was numa_rule=mainline" "$SCHED_ERR" ||
	fail "the scheduler did not see the switch to v3"
[ "$main1" -ge 2 ] || fail "mainline kept the pair on node 0 (>= 90 %) in $main1 of 3 trials: $p_main1"
[ "$main2" -ge 2 ] || fail "mainline, switched back, kept the pair local in $main2 of 3 trials: $p_main2"
[ "$v3" -ge 2 ] || fail "v3 spread the pair (<= 50 % on node 0) in only $v3 of 3 trials: $p_v3"
[ "$off" -ge 2 ] || fail "off spread the pair (<= 50 % on node 0) in only $off of 3 trials: $p_off"
stop_and_check
assert_counter fork_local -gt 0
assert_counter fork_remote -gt 0
pass "% of samples with the pair on node 0: mainline $p_main1| v3 $p_v3| off $p_off| mainline again $p_main2"
