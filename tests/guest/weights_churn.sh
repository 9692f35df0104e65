#!/bin/sh
# Attribute changes are not sleeps (issue 35): weights.sh's first mix (16
# nice-0 loops beside 8 light loops) under scx_nimble, once left alone and
# once with the light loops reniced every 30 ms and moved between cgroups
# (nimble-churn). A renice or a cgroup move takes a task off its queue and
# puts it back (dequeue/enqueue with save/restore); read as a sleep, it
# reset the loop's CPU-bound history and the weights stopped holding. The
# ratio of CPU time (nice-0 loop / light loop, /proc/PID/stat) with churn
# must stay within 15 % of the one without.
#
# Each light loop lives alone in one of its own two cgroups, l<i>a and
# l<i>b, cpu.weight 10 each (nice 10's weight, 110, in cpu.weight units):
# alone in its cgroup a loop weighs its cgroup's weight whatever its nice,
# so moving it changes nothing but its place. (Moving loops that share a
# cgroup one by one leaves some alone for a while, with their cgroup's whole
# weight, under the kernel too.) The renices swap nice 10 and 11 between
# the two halves of the light loops. nimble-churn renices every loop each
# step (30 ms) and, from a second thread, moves one of them at a time, in
# turn, every 30 ms or as fast as the kernel lets it (a move waits for an
# RCU grace period, 30-60 ms here).
#
# nimble-churn runs at nice 0, as the scheduler does in these tests
# (start_sched). At nice -20, a task waking every 30 ms is 87 nice-0 loops
# while it runs, and that alone (churning a sleeping process) moved the
# ratio from 10.2 to 5.0-5.7 under scx_nimble and to 6.6-7.2 under EEVDF
# (docs/known-limits.md): a neighbour, not the attribute changes this test
# is about. EEVDF's ratios with the same churn are logged for the record
# (full tier).
. /tests/lib.sh

SECS=$(by_tier 20 10)
CG=/sys/fs/cgroup
grep -qw cpu $CG/cgroup.subtree_control || echo +cpu >$CG/cgroup.subtree_control ||
	fail "cannot enable the cpu controller"
for i in 0 1 2 3 4 5 6 7; do
	for s in a b; do
		mkdir -p $CG/l$i$s
		echo 10 >$CG/l$i$s/cpu.weight
	done
done

# run_mix LABEL CHURN(0/1): the mix for SECS; leaves "ratio heavy light
# zero" in /tmp/ratio.
run_mix() {
	label=$1 churn_on=$2
	HEAVY= LIGHT=
	for i in $(seq 16); do spin; HEAVY="$HEAVY $SPAWNED"; done
	i=0
	for n in 10 10 10 10 11 11 11 11; do
		spin nice -n $n
		LIGHT="$LIGHT $SPAWNED"
		echo "$SPAWNED" >$CG/l${i}a/cgroup.procs
		i=$((i + 1))
	done
	sleep 1
	files=$(for p in $HEAVY $LIGHT; do printf "/proc/%s/stat " "$p"; done)
	# shellcheck disable=SC2086
	cat $files | awk '{ pid = $1; sub(/^.*\) /, ""); split($0, f, " "); print pid, f[12] + f[13] }' >/tmp/t0
	if [ "$churn_on" = 1 ]; then
		# shellcheck disable=SC2086
		nimble-churn --period-ms 30 --secs "$SECS" --nice 10,11 \
			--cgroups "$CG/l%db,$CG/l%da" $LIGHT >/tmp/churn.out 2>&1 &
		CHURN=$!
		# From outside the churn: the first light loop's cgroup and nice,
		# sampled every 0.1 s with builtins only (a fork costs a tenth of a
		# second here), must keep changing.
		first=${LIGHT# }
		first=${first%% *}
		last= SEEN=0 SAMPLES=0
		read -r up _ </proc/uptime
		t_end=$((${up%.*} + SECS))
		while [ "${up%.*}" -lt $t_end ]; do
			read -r cg <"/proc/$first/cgroup"
			read -r line <"/proc/$first/stat"
			# shellcheck disable=SC2086
			set -- ${line#*) }
			now="$cg ${17}"	# its cgroup, and field 19 of its stat: the nice
			[ "$now" != "$last" ] && SEEN=$((SEEN + 1))
			last=$now SAMPLES=$((SAMPLES + 1))
			sleep 0.1
			read -r up _ </proc/uptime
		done
		wait $CHURN || fail "nimble-churn failed: $(cat /tmp/churn.out)"
	else
		sleep "$SECS"
	fi
	# shellcheck disable=SC2086
	cat $files | awk '{ pid = $1; sub(/^.*\) /, ""); split($0, f, " "); print pid, f[12] + f[13] }' >/tmp/t1
	# shellcheck disable=SC2086
	kill $HEAVY $LIGHT
	# shellcheck disable=SC2086
	wait $HEAVY $LIGHT 2>/dev/null
	awk -v light="$LIGHT" 'BEGIN { n = split(light, l, " "); for (i = 1; i <= n; i++) is_l[l[i]] = 1 }
		FILENAME == "/tmp/t0" { a[$1] = $2; next }
		{ d = $2 - a[$1]; if (is_l[$1]) { sl += d; kl++; ls = ls (kl > 1 ? "," : "") d; if (d <= 0) zero++ } else { sh += d; kh++ } }
		END { printf "%.2f %d %d %d %s\n", (sl > 0 ? (sh / kh) / (sl / kl) : 999), sh / kh, sl / kl, zero, ls }' /tmp/t0 /tmp/t1 >/tmp/ratio
	read -r ratio heavy light zero each </tmp/ratio
	log "$label: nice-0 loop / light loop = $ratio (mean ticks $heavy / $light; light loops $each)$([ "$churn_on" = 1 ] && echo ", $(cat /tmp/churn.out)")"
	[ "$zero" = 0 ] || fail "$label: $zero light loops never ran"
}

# EEVDF's ratios are for the record only (not bounded): the full tier.
if [ "$TIER" = full ]; then
	run_mix "EEVDF, left alone" 0
	run_mix "EEVDF, reniced every 30 ms and moved" 1
fi
start_sched
run_mix "nimble, left alone" 0
base=$(cut -d' ' -f1 /tmp/ratio)
run_mix "nimble, reniced every 30 ms and moved" 1
churn=$(cut -d' ' -f1 /tmp/ratio)
assert_attached "after the churn"
stop_and_check
steps=$(sed -n 's/^CHURN steps=\([0-9]*\).*/\1/p' /tmp/churn.out)
moves=$(sed -n 's/^CHURN.* moves=\([0-9]*\).*/\1/p' /tmp/churn.out)
# Renices: one step per 30 ms plus its own cost; moves: every loop at
# least once a second.
[ "${steps:-0}" -ge $((SECS * 20)) ] || fail "only ${steps:-0} renice steps in $SECS s (want one per 30 ms)"
[ "${moves:-0}" -ge $((SECS * 8)) ] || fail "only ${moves:-0} cgroup moves in $SECS s"
[ "$SEEN" -ge $((SAMPLES / 2)) ] && [ "$SAMPLES" -ge "$SECS" ] ||
	fail "a light loop's cgroup and nice changed in $SEEN of $SAMPLES samples 0.1 s apart"
log "a light loop's cgroup and nice changed in $SEEN of $SAMPLES samples 0.1 s apart"
verdict=$(awk -v b="$base" -v c="$churn" 'BEGIN { d = c / b - 1; if (d < 0) d = -d
	printf "%s: ratio %.2f left alone, %.2f with churn: %+.0f %% (within 15 %%)\n", d < 0.15 ? "ok" : "BAD", b, c, 100 * (c / b - 1) }')
log "$verdict"
case $verdict in ok*) ;; *) fail "$verdict" ;; esac
pass "weights hold through renices every 30 ms and cgroup moves"
