#!/bin/sh
# Load cases on one scheduler run: a fork storm of >= 10 000 tasks,
# 1 000 tasks waking in bursts, nice -20..19 with SCHED_BATCH and SCHED_IDLE
# mixed, and tasks moved between cgroups while they run. After each case the
# scheduler is attached and dmesg is clean; after all, the books balance.
# Prints "CASE name seconds" for the reliability table.
. /tests/lib.sh

N=$(nr_cpus)
start_sched --stats 1
case_begin
case_done() { # NAME
	assert_attached "after $1"
	assert_clean_dmesg
	case_end "$1"
}

# 1. Fork storm: short-lived children, counted by the kernel's fork counter.
# Mostly vfork: under TCG a vfork costs ~3 ms against ~14 ms for a fork of
# stress-ng's address space, and both reach the scheduler the same way
# (init_task, enable, a fork wakeup); 1 000 plain forks keep that path too.
forks() { awk '/^processes/ { print $2 }' /proc/stat; }
before=$(forks)
stress-ng --vfork 4 --vfork-ops 10500 --timeout 240s >/dev/null 2>&1 ||
	fail "stress-ng --vfork failed"
stress-ng --fork 4 --fork-ops 1000 --timeout 120s >/dev/null 2>&1 ||
	fail "stress-ng --fork failed"
made=$(($(forks) - before))
[ "$made" -ge 10000 ] || fail "fork storm made only $made tasks"
log "fork storm: $made tasks"
case_done fork_storm

# 2. 1 000 tasks waking in bursts: 25 groups of 20 senders and 20 receivers.
perf bench sched messaging -g 25 -l 20 >/tmp/msg.out 2>&1 ||
	fail "perf bench sched messaging: $(tail -n 3 /tmp/msg.out)"
log "messaging, 1000 tasks: $(grep -i 'total time' /tmp/msg.out)"
case_done wake_bursts

# 3. Every nice level, SCHED_BATCH and SCHED_IDLE at once, two CPU loops of
# each plus one that re-nices itself at random (15 loops on 8 CPUs:
# oversubscribed). Each loop is the PID we start (nice/chrt exec sh), so its
# ticks and its policy are read straight from /proc/PID/stat; each must run
# with the policy and nice it was given.
W=
for k in 1 2; do
	for n in -20 -10 0 10 19; do
		spin nice -n $n
		W="$W $SPAWNED:0:$n"
	done
	spin chrt -b 0
	W="$W $SPAWNED:3:0"
	spin chrt -i 0
	W="$W $SPAWNED:5:0"
done
sh -c 'i=0; while :; do i=$((i + 1)); [ $((i % 5000)) -ne 0 ] ||
	renice -n $((RANDOM % 40 - 20)) -p $$ >/dev/null; done' &
RENICE=$!
# 20 s in the full tier, 8 s in CI: every loop gets ticks within a second
# unless starved, and the policy check is instant.
sleep "$(by_tier 20 8)"
# One cat and one awk for all loops: a fork per field costs seconds here.
files=
for w in $W; do files="$files /proc/${w%%:*}/stat"; done
# shellcheck disable=SC2086
cat $files /proc/$RENICE/stat | awk '{ pid = $1; sub(/^.*\) /, ""); split($0, f, " ")
	print pid, f[39] ":" f[17], f[12] + f[13] }' >/tmp/loops
t20=0 t19=0
for w in $W; do
	pid=${w%%:*} want=${w#*:}
	# shellcheck disable=SC2046
	set -- $(grep "^$pid " /tmp/loops)
	log "  loop $pid: policy:nice $2 (want $want): $3 ticks"
	[ "$2" = "$want" ] || fail "loop $pid runs as policy:nice $2, expected $want"
	[ "$3" -gt 0 ] || fail "loop $pid (policy:nice $2) never ran"
	[ "$want" = 0:-20 ] && t20=$((t20 + $3))
	[ "$want" = 0:19 ] && t19=$((t19 + $3))
done
# shellcheck disable=SC2046
set -- $(grep "^$RENICE " /tmp/loops)
log "  re-nicing loop: $3 ticks, now policy:nice $2"
[ "$3" -gt 0 ] || fail "the re-nicing loop never ran"
# Weights hold across LLCs (balance.bpf.h): the nice -20 pair (weight 88761
# each) gets more than the nice 19 pair (15), wherever they were placed.
log "  nice -20 loops: $t20 ticks, nice 19 loops: $t19 ticks"
[ "$t20" -gt "$t19" ] || fail "nice -20 loops got $t20 ticks, nice 19 loops $t19: weights not honoured"
P=$RENICE
for w in $W; do P="$P ${w%%:*}"; done
# shellcheck disable=SC2086
kill $P 2>/dev/null
# shellcheck disable=SC2086
wait $P 2>/dev/null
case_done nice_batch_idle

# 4. Tasks moved between two cgroups while they run.
CG=/sys/fs/cgroup
mkdir -p $CG/nimble_a $CG/nimble_b
# 20 s of moves in the full tier, 8 s in CI, 5 moves a second.
MOVE_S=$(by_tier 20 8)
stress-ng --cpu "$N" --timeout $((MOVE_S + 5))s >/dev/null 2>&1 &
HOGS=$!
# Every hackbench run beside the moves is counted, and a failed one named.
rm -f /tmp/hb.runs /tmp/hb.fail
(while kill -0 $HOGS 2>/dev/null; do
	echo >>/tmp/hb.runs
	hackbench -g 1 -l 20 >/tmp/hb.out 2>&1 || { echo "exit $?: $(tail -n 1 /tmp/hb.out)" >>/tmp/hb.fail; }
done) &
BENCH=$!
# A move counts when the kernel shows the task in its new cgroup
# (/proc/PID/cgroup), not when the write succeeded.
moves=0 writes=0 round=0
end=$(($(cut -d. -f1 /proc/uptime) + MOVE_S))
while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
	round=$((round + 1))
	[ $((round % 2)) -eq 0 ] && g=nimble_a || g=nimble_b
	for p in $HOGS $(children $HOGS); do
		echo "$p" >$CG/$g/cgroup.procs 2>/dev/null || continue
		writes=$((writes + 1))
		read -r now 2>/dev/null </proc/"$p"/cgroup && [ "$now" = "0::/$g" ] && moves=$((moves + 1))
	done
	sleep 0.2
done
kill $HOGS
wait $HOGS $BENCH
[ "$moves" -ge $((MOVE_S * 5 / 2)) ] || fail "only $moves cgroup moves seen in /proc/PID/cgroup in $MOVE_S s"
[ ! -s /tmp/hb.fail ] || fail "hackbench failed beside the cgroup moves: $(head -n 3 /tmp/hb.fail)"
runs=$(wc -l </tmp/hb.runs)
[ "$runs" -ge 1 ] || fail "no hackbench ran beside the cgroup moves"
log "cgroups: $moves moves seen of $writes writes, $runs hackbench runs beside them, all exited 0"
for p in $(cat $CG/nimble_a/cgroup.procs $CG/nimble_b/cgroup.procs); do
	echo "$p" >$CG/cgroup.procs
done
rmdir $CG/nimble_a $CG/nimble_b
case_done cgroup_moves

stop_and_check pending
pass "fork storm, wake bursts, nice/batch/idle mix, cgroup moves"
