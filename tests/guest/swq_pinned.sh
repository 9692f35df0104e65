#!/bin/sh
# Under a full shared wakequeue, a task pinned to one CPU and tasks limited
# to the CPUs of the other (remote) LLC keep running, 30 s in every mode in
# the full tier, 10 s (two windows) in CI (switched live), pullers looking
# at queue heads only.
# On l2: LLC 0 = CPUs 0-3, LLC 1 = CPUs 4-7.
. /tests/lib.sh

SECS=${SECS:-$(by_tier 30 10)}
WINDOW=5
# Each watched task must get at least 5 % of a CPU in every window; a
# starved task gets none, its fair share here is 10-50 % (12 loops and
# hackbench on 8 CPUs).

start_sched --stats 1 --swq off --swq-shards 2
# The load: hackbench rounds back to back (wakeup storms that fill the
# swq) and a CPU loop per CPU that may go anywhere.
(while :; do hackbench -g 2 -l 100 >/dev/null 2>&1; done) &
LOAD=$!
HOGS=
for i in 1 2 3 4 5 6 7 8; do loop_on "$ALL_CPUS"; HOGS="$HOGS $SPAWNED"; done
loop_on 1; PINNED=$SPAWNED
loop_on 4-7; REMOTE1=$SPAWNED
loop_on 4-7; REMOTE2=$SPAWNED
loop_on 6-7; NARROW=$SPAWNED
WATCH="$PINNED $REMOTE1 $REMOTE2 $NARROW"
log "pinned $PINNED on 1; $REMOTE1 $REMOTE2 on 4-7; $NARROW on 6-7"

# ticks PID...: "pid ticks" for each, in one read (the shell gets little
# CPU under this load, so sampling must be cheap).
ticks() {
	for pid in "$@"; do echo "/proc/$pid/stat"; done | xargs cat |
		awk '{ pid = $1; sub(/^.*\) /, ""); split($0, f, " "); print pid, f[12] + f[13] }'
}
uptime_cs() { awk '{ printf "%d", $1 * 100 }' /proc/uptime; }

for mode in wakeups sis-fail all off; do
	tune --swq "$mode"
	before=$(grep -c '^stats:' "$SCHED_OUT")
	end=$(( $(uptime_cs) + SECS * 100 ))
	ticks $WATCH >/tmp/t0
	t0=$(uptime_cs)
	while [ "$t0" -lt $end ]; do
		sleep $WINDOW
		ticks $WATCH >/tmp/t1
		t1=$(uptime_cs)
		assert_attached "$mode"
		# 5 % of a CPU over the window as it really was (the shell runs late).
		min=$(( (t1 - t0) / 20 ))
		starved=$(awk -v min=$min 'NR == FNR { a[$1] = $2; next }
			$2 - a[$1] < min { printf "%s ran %d ticks; ", $1, $2 - a[$1] }' /tmp/t0 /tmp/t1)
		[ -z "$starved" ] || fail "$mode: under 5 % of a CPU in $(( (t1 - t0) / 100 )) s: $starved"
		mv /tmp/t1 /tmp/t0
		t0=$t1
	done
	# Full: the swq held tasks in most stats lines of the run.
	deep=$(grep '^stats:' "$SCHED_OUT" | tail -n +$((before + 1)) | tr ' ' '\n' |
		grep -c '^swq_depth=[1-9]')
	log "$mode: every watched task got >= 5 % of a CPU in every ${WINDOW} s; swq non-empty in $deep stats lines"
	[ "$mode" = off ] || [ "$deep" -ge $((SECS / 3)) ] ||
		fail "$mode: the swq was rarely full ($deep of ~$SECS lines)"
	# The restricted tasks ran only where allowed (the kernel would have
	# ejected us otherwise, but check the samples too).
	for pid in $REMOTE1 $REMOTE2 $NARROW; do
		cpu=$(proc_field "$pid" 39)
		[ "$cpu" -ge 4 ] || fail "task $pid limited to LLC 1 ran on CPU $cpu"
	done
	[ "$(proc_field "$PINNED" 39)" = 1 ] || fail "pinned task left CPU 1"
done
kill $LOAD
kill $(children $LOAD) $HOGS $WATCH 2>/dev/null
wait $LOAD $HOGS $WATCH 2>/dev/null
stop_and_check swq_depth
pass "pinned and LLC-limited tasks ran ${SECS} s in every swq mode"
