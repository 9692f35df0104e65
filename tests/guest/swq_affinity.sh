#!/bin/sh
# With --swq-affinity a puller takes the first queued task it may run
# (scanning past others, at most 8), and only such tasks: every CPU sample
# of every restricted task is one of its allowed CPUs. Without it a puller
# looks at the head only. And the restricted tasks get CPU: each at least
# a quarter of its share under EEVDF in the same boot (/proc/PID/schedstat).
# On l2 (LLC 0 = CPUs 0-3).
. /tests/lib.sh

start_sched --stats 0.5 --swq all --swq-affinity --swq-shards 1
# Short sleepers restricted to two CPUs each, two tasks per pair, all in
# LLC 0's swq: heads a given CPU may not run are common.
PIDS= SLEEPERS=
for pair in 0,1 2,3 1,2 0,3; do
	for i in 1 2; do
		taskset -c "$pair" sh -c 'while :; do i=0; while [ $i -lt 300 ]; do i=$((i+1)); done; usleep 1000; done' &
		PIDS="$PIDS $!" SLEEPERS="$SLEEPERS $!"
		eval "ok_$!=$pair"
	done
done
# One more loop per CPU of LLC 0 keeps it busy so the queue holds tasks.
for i in 1 2 3 4; do
	loop_on 0-3
	PIDS="$PIDS $SPAWNED"
	eval "ok_$SPAWNED=0,1,2,3"
done

check_samples() { # SECONDS
	n=0
	end=$(( $(cut -d. -f1 /proc/uptime) + $1 ))
	while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
		task_cpus $PIDS >/tmp/samples
		while read -r pid cpu; do
			eval "ok=\$ok_$pid"
			case ",$ok," in *",$cpu,"*) ;; *) fail "task $pid ran on CPU $cpu, allowed $ok" ;; esac
			n=$((n + 1))
		done </tmp/samples
		sleep 0.1
	done
	log "  $n CPU samples, all on allowed CPUs"
	[ $n -ge $((6 * $1)) ] || fail "only $n CPU samples in $1 s"
}
# run_ns: "PID ns" for each restricted sleeper, its run time so far.
run_ns() { for p in $SLEEPERS; do echo "$p $(cut -d' ' -f1 /proc/$p/schedstat)"; done; }
# shares LABEL CMD...: runs CMD and appends "LABEL pid share" (fraction of
# one CPU while CMD ran) of each sleeper to /tmp/shares.res; logs the smallest.
shares() {
	l=$1
	shift
	run_ns >/tmp/run0
	t0=$(cut -d' ' -f1 /proc/uptime)
	"$@"
	run_ns >/tmp/run1
	awk -v l="$l" -v t0="$t0" 'NR == 1 { s = $1 - t0; next } NR == FNR + 1 { r0[$1] = $2; next }
		($1 in r0) { printf "%s %s %.4f\n", l, $1, ($2 - r0[$1]) / (s * 1e9) }' /proc/uptime /tmp/run0 /tmp/run1 >>/tmp/shares.res
	log "  $l: restricted sleepers' CPU share, smallest $(awk -v l="$l" '$1 == l { if (m == "" || $3 < m) m = $3 } END { print m }' /tmp/shares.res)"
}
: >/tmp/shares.res
WINDOW=$(by_tier 10 5)

# deltas NAME...: sets d_NAME to the change of each counter since the
# last call, all read from one stats line.
deltas() {
	stats_snapshot
	for c in "$@"; do
		eval "d_$c=\$(( \$(snap_value $c) - \${last_$c:-0} ))"
		eval "last_$c=\$(snap_value $c)"
	done
}
COUNTERS="swq_scanned swq_pull_tries swq_skip_affinity swq_pull swq_pull_ns swq_scan_ns"
measure() {
	next_stats
	deltas $COUNTERS
	shares "$2" check_samples "$WINDOW"
	next_stats
	deltas $COUNTERS
	scanned=$d_swq_scanned tries=$d_swq_pull_tries skipped=$d_swq_skip_affinity pulled=$d_swq_pull
	log "  $1: pulled $pulled, tries $tries, scanned $scanned, skipped for affinity $skipped," \
		"$((d_swq_pull_ns / (tries + 1))) ns/try of which choosing $((d_swq_scan_ns / (tries + 1))) ns"
	assert_attached "$1"
}

measure "affinity on" on
[ "$pulled" -gt 100 ] || fail "affinity on: only $pulled pulls"
[ "$skipped" -gt 0 ] || fail "affinity on: no task was passed over"
[ "$scanned" -gt "$tries" ] || fail "affinity on: pullers never looked past the head"

tune --swq-affinity off
measure "affinity off" off
# Head only: one task looked at per try (1 % slack: counters are read live).
[ $((scanned * 100)) -le $((tries * 101)) ] ||
	fail "affinity off: $scanned tasks scanned in $tries tries (head only: one each)"
[ "$skipped" -gt 0 ] || fail "affinity off: no head was skipped"

stop_and_check
# The same tasks under EEVDF, for the restricted sleepers' CPU share: the
# kernel enforces where they run, not that they get to run. Each gets at
# least a quarter of its EEVDF share with either setting: a task stranded
# in a queue gets none. (Not closer: with the head-only pull a restricted
# task waits behind heads it cannot run, and the smallest ratio measured
# was 0.49-0.53; a sleeper's demand is set by its loop's speed under TCG.)
shares eevdf sleep "$WINDOW"
kill $PIDS
wait $PIDS 2>/dev/null
# Line 1: the smallest ratio; then one line per sleeper and setting under 0.25.
awk '$1 == "eevdf" { e[$2] = $3; next } { s[$1 " " $2] = $3 }
	END { m = ""; for (k in s) { split(k, x, " "); r = s[k] / e[x[2]]; if (m == "" || r < m) m = r
		if (r < 0.25) bad = bad sprintf("%s pid %s %.3f vs eevdf %.3f; ", x[1], x[2], s[k], e[x[2]]) }
		printf "%.2f\n%s\n", m, bad }' /tmp/shares.res >/tmp/ratio
log "smallest ratio of a sleeper's share to its EEVDF share: $(head -n 1 /tmp/ratio) (bound 0.25)"
bad=$(sed -n 2p /tmp/ratio)
[ -z "$bad" ] || fail "a restricted sleeper got under a quarter of its EEVDF CPU share: $bad"
pass "swq-affinity pulls only allowed tasks, scanning past others; head-only without it; every restricted sleeper got at least a quarter of its EEVDF share"
