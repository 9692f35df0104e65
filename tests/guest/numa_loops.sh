#!/bin/sh
# The NUMA rule at runtime, for running tasks. Two independent CPU loops
# start on node 0 (pinned there, then let go on every CPU), the other node
# idle. The kernel (EEVDF) keeps them there: two tasks are within imb_numa_nr
# (2 on n2l4), and its balancer moves a running task only after several
# failed attempts in a row, so a shell that briefly takes a CPU does not
# split them. scx_nimble under mainline must keep them together about as
# often as EEVDF in the same boot; v3 and off must still spread them.
# (Forked by a running parent they split at fork, under EEVDF and mainline
# alike: the parent counts on its node. That is the fork rule, tested in
# numa_spread.sh; here the placement at start is fixed to test the rest.)
# Rounds interleave EEVDF and scx_nimble.
. /tests/lib.sh

node1_watcher
ROUNDS=$(by_tier 5 3)
SAMPLES=16

# trial: start the pair on node 0 and let it go; TOGETHER = samples (of
# SAMPLES, 0.25 s apart, after 1 s) with both loops on the same node.
trial() {
	loop_on "$N0"; a=$SPAWNED
	loop_on "$N0"; b=$SPAWNED
	sleep 0.2
	taskset -p -c "$ALL_CPUS" $a >/dev/null && taskset -p -c "$ALL_CPUS" $b >/dev/null ||
		fail "cannot widen the loops' affinity"
	sleep 1
	sample_nodes "$SAMPLES" 0.25 $a $b >/tmp/loops
	TOGETHER=$(awk '$2 ~ /^(2\/0|0\/2)$/ { n++ } END { print n + 0 }' /tmp/loops)
	kill $a $b
	wait $a $b 2>/dev/null
}

eevdf=0 main=0 v3=0 off=0 v3_spread=0 p_eevdf= p_main= p_v3= p_off=
for r in $(seq "$ROUNDS"); do
	trial; eevdf=$((eevdf + TOGETHER)); p_eevdf="$p_eevdf$TOGETHER "
	start_sched --numa-rule mainline
	trial; main=$((main + TOGETHER)); p_main="$p_main$TOGETHER "
	tune --numa-rule v3
	trial; v3=$((v3 + TOGETHER)); p_v3="$p_v3$TOGETHER "
	[ "$TOGETHER" -le $((SAMPLES / 2)) ] && v3_spread=$((v3_spread + 1))
	tune --numa-rule off
	trial; off=$((off + TOGETHER)); p_off="$p_off$TOGETHER "
	stop_sched
	log "round $r: samples of $SAMPLES with the pair on one node: EEVDF $p_eevdf| mainline $p_main| v3 $p_v3| off $p_off"
done
total=$((ROUNDS * SAMPLES))
log "pair on one node, samples of $total: EEVDF $eevdf, mainline $main, v3 $v3, off $off"
# "About as often": within 10 % of all samples of EEVDF (TCG noise); and
# most of the time in any case, so the test fails if mainline splits the pair.
[ "$main" -ge $((eevdf - total / 10)) ] ||
	fail "mainline kept the pair on one node in $main of $total samples, EEVDF in $eevdf"
[ "$main" -ge $((total * 3 / 4)) ] ||
	fail "mainline kept the pair on one node in only $main of $total samples"
[ "$v3_spread" -gt $((ROUNDS / 2)) ] || fail "v3 spread the pair in only $v3_spread of $ROUNDS trials: $p_v3"
# off moves a running task whenever another node has an idle CPU, so the
# pair bounces between the nodes (measured: 7, 9, 9 samples of 16 together)
# rather than staying split as under v3: judged over all samples, it must
# split the pair clearly more often than mainline does.
[ "$off" -le $((total * 3 / 4)) ] && [ "$off" -lt "$main" ] ||
	fail "off kept the pair on one node in $off of $total samples (mainline $main): $p_off"
assert_clean_dmesg
pass "pair on one node (samples of $total): EEVDF $eevdf, mainline $main, v3 $v3, off $off"
