#!/bin/sh
# Fork placement under the default (mainline) rule:
# - as many CPU-bound tasks as CPUs, forked by one parent on node 0, end
#   evenly spread over the nodes (max/min per node <= 1.25) within 5 s
#   (sampled every ~1 s on a busy TCG guest: the bound is loose on purpose);
# - on a topology with near and far nodes (n4: 10/20/40), load above node
#   0's threshold goes to the nearest node first.
. /tests/lib.sh

NN=$(nr_nodes)
[ "$NN" -gt 1 ] || fail "needs a NUMA topology"
N=$(nr_cpus)
N0=$(node_cpus 0)
# The sampling shell and the scheduler stay on the last CPU.
keep_off $((N - 1))
start_sched --stats 1

# balanced "c0 c1 ...": max/min <= 1.25 (min > 0).
balanced() {
	echo "$1" | awk '{ mn = $1; mx = $1
		for (i = 2; i <= NF; i++) { if ($i < mn) mn = $i; if ($i > mx) mx = $i }
		exit !(mn > 0 && mx * 4 <= mn * 5) }'
}

# 1. Spread: N busy loops forked one after another by a parent on node 0.
spawn_from "$N0" sh -c "for i in \$(seq 1 $N); do sh -c 'while :; do :; done' & done; wait"
PARENT=$SPAWNED
wait_until 100 "the $N loops did not start" sh -c "[ \$(echo \$(cat /proc/$PARENT/task/*/children) | wc -w) -ge $N ]"
LOOPS=$(children $PARENT)
t0=$(cut -d' ' -f1 /proc/uptime)
# 30 samples 0.2 s apart in one process ("uptime c0/c1/..."): when did it
# first balance, and did it hold for the last ten?
sample_nodes 30 0.2 $LOOPS >/tmp/spread
path=$(awk '{ printf "%s ", $2 }' /tmp/spread)
el=$(awk -v t0="$t0" '{ n = split($2, c, "/"); mn = c[1]; mx = c[1]
	for (i = 2; i <= n; i++) { if (c[i] < mn) mn = c[i]; if (c[i] > mx) mx = c[i] }
	if (mn > 0 && mx * 4 <= mn * 5) { printf "%.1f", $1 - t0; exit } }' /tmp/spread)
[ -n "$el" ] || fail "never spread in $(tail -n 1 /tmp/spread | awk -v t0="$t0" '{ printf "%.1f", $1 - t0 }') s: loops per node $path"
log "$N loops spread evenly ${el} s after they all started; samples: $path"
awk -v e="$el" 'BEGIN { exit !(e <= 5.0) }' || fail "spread took ${el} s, more than 5 s"
# It must stay spread: in the last 10 samples, balanced in at least half and
# never more than one task away from it (a task kept waiting by a kernel
# thread may be taken by the other node for a while).
held=$(tail -n 10 /tmp/spread | awk '{ printf "%s ", $2 }')
off=0
for h in $held; do
	echo "$h" | tr '/' ' ' | awk '{ mn = $1; mx = $1; for (i = 2; i <= NF; i++) { if ($i < mn) mn = $i; if ($i > mx) mx = $i }
		exit !(mn > 0 && mx * 4 <= mn * 5) }' && continue
	off=$((off + 1))
	echo "$h" | tr '/' ' ' | awk -v even=$((N / NN)) '{ d = 0; for (i = 1; i <= NF; i++) d += ($i > even ? $i - even : even - $i)
		exit !(d <= 2) }' || fail "spread fell apart: $h (last samples: $held)"
done
[ $off -le 5 ] || fail "spread did not hold: $off of 10 samples unbalanced (last samples: $held)"
log "last 10 samples: $held"
kill $LOOPS $PARENT 2>/dev/null
assert_attached "after the spread"
stop_and_check
assert_counter fork_remote -gt 0

# 2. Nearest first (only where nodes sit at different distances): three
# loops pinned to node 0 (2 CPUs on n4), then all released at once. Node 0
# is overloaded: the first task to leave must go to the nearest node (the
# far level may then take one as well, as the kernel's rule also does).
# Then again with a loop pinned to one CPU of node 1 (a shell that happens
# to run there): node 1 still has a free CPU, which an overloaded node
# fills before a far one (the kernel's "busiest overloaded, local has
# spare"). EEVDF runs that case once, logged for reference (its first move
# went to a far node in 11 of 23 runs here). Judged from outside: the
# kernel's sched_migrate_task tracepoint names the node of the first
# loop's move off node 0. (Sampling /proc/PID/stat every 0.1 s missed it
# one run in four: under TCG a loop can move to node 1 and on to node 2
# within 0.1 s, the second move the far level's, which the kernel's rule
# also makes.) The samples and the scheduler's counters are logged.
moved_to() { # stats line -> "p1+q1 p2+q2 ..." tasks received per node
	echo "$1" | tr ' ' '\n' | awk -F= '$1 == "node_numa_pull" { p = $2 } $1 == "node_numa_push" { q = $2 }
		END { n = split(p, a, ","); split(q, b, ","); for (i = 1; i <= n; i++) printf "%d ", a[i] + b[i] }'
}
# release_three WHO [BUSY_CPU]: sets FIRST (node of the first move off
# node 0) and AFTER (loops per node 4 s later); fails if none left.
release_three() {
	who=$1
	busy=
	if [ -n "$2" ]; then
		loop_on "$2"
		busy=$SPAWNED
	fi
	pids=
	for i in 1 2 3; do
		loop_on "$N0"
		pids="$pids $SPAWNED"
	done
	sleep 1
	sched=
	if [ "$who" != EEVDF ]; then
		sched=1
		stats_snapshot
		before_snap=$SNAP
		before=$(moved_to "$SNAP")
		mark=$(grep -c '^stats:' "$SCHED_OUT")
	fi
	# shellcheck disable=SC2086
	migrations_begin $pids
	for p in $pids; do taskset -p -c "$ALL_CPUS" "$p" >/dev/null; done
	# shellcheck disable=SC2086
	sample_nodes 40 0.1 $pids >/tmp/release
	AFTER=$(node_histogram $pids)
	migrations_end >/tmp/moves
	# shellcheck disable=SC2086
	kill $pids $busy
	FIRST=$(awk '$2 == 0 && $3 != 0 { print $3; exit }' /tmp/moves)
	log "$who${busy:+, CPU $2 busy}: moves across nodes (from>to, in order): $(awk '$2 != $3 { printf "%s>%s ", $2, $3 }' /tmp/moves)"
	counted=
	[ -z "$sched" ] || counted=$(tail -n +$((mark + 1)) "$SCHED_OUT" | grep '^stats:' | while read -r line; do
		now=$(moved_to "$line")
		gained=$(echo "$before|$now" | awk -F'|' '{ n = split($1, a, " "); split($2, b, " ")
			for (i = 2; i <= n; i++) if (b[i] > a[i]) printf "%d ", i - 1 }')
		[ -n "$gained" ] && { echo "$gained"; break; }
	done)
	if [ -n "$sched" ]; then
		stats_snapshot
		after_snap=$SNAP
		log "$who${busy:+, CPU $2 busy}: counters before/after: $(for c in node_numa_pull node_numa_push node_mem_move node_mem_swap steal_remote; do
			SNAP=$before_snap; b=$(snap_value $c); SNAP=$after_snap; printf '%s=%s/%s ' $c "$b" "$(snap_value $c)"; done)"
	fi
	log "$who${busy:+, CPU $2 busy}: 3 loops released from node 0: first move off it to node ${FIRST:-none}${counted:+ (counters: $counted)}; after 4 s: $AFTER; samples: $(awk '{ printf "%s ", $2 }' /tmp/release)"
	[ -n "$FIRST" ] || fail "$who${busy:+, CPU $2 busy}: no task left overloaded node 0 in 4 s: $AFTER"
}
if [ "$NN" -ge 4 ]; then
	BUSY1=$(node_cpus 1 | cut -d, -f1 | cut -d- -f1)
	start_sched --stats 0.1
	release_three scx_nimble
	[ "$FIRST" = 1 ] || fail "the first task to leave node 0 went to far node $FIRST, not node 1"
	[ "$(echo "$AFTER" | awk '{ print $1 }')" -lt 3 ] || fail "all 3 loops back on node 0 after 4 s: $AFTER"
	first_plain=$FIRST
	# Up to five releases: node 1's free CPU is a target only while it is
	# idle, and both CPUs of node 0 may push in the same tick (the second
	# then sees node 1 full and goes far) or a kernel thread may hold it:
	# 7 of 30 releases went far first in the VM (EEVDF: 11 of 23). The rule
	# without the overload case went far in 3 of 4 releases (the idle CPU's
	# pull reached node 1 in the fourth), so this catches a rule that never
	# fills node 1, not one that fills it less often.
	far=
	for try in 1 2 3 4 5; do
		release_three scx_nimble "$BUSY1"
		[ "$FIRST" = 1 ] && break
		far="$far$FIRST "
	done
	[ "$FIRST" = 1 ] || fail "with CPU $BUSY1 of node 1 busy, the first task to leave node 0 went to a far node in $try releases ($far), never to node 1 (its free CPU)"
	assert_attached "after the releases"
	stop_and_check
	release_three EEVDF "$BUSY1"
	first="$first_plain (node 1 with a busy CPU: node 1${far:+ after far moves to $far}; EEVDF there: node $FIRST)"
fi
pass "spread evenly in ${el} s${first:+; first task off node 0 went to node $first}"
