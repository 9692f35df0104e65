#!/bin/sh
# Soak (full tier only): 10 minutes of mixed churn under one scheduler
# process: a fork storm, CPU and affinity churn (stress-ng), hackbench
# rounds, CPU loops re-niced every 5 s, `tune` switching rule and swq mode
# every 20 s, a CPU going offline or back every minute (each a reload), and
# a stats reader attached throughout. Asserted: the process never exits
# and never reports an error exit, every reload attaches, the loops and
# CPU workers keep running (longest wait under 10 s by their schedstat: a
# nice-19 loop among ~10 tasks a CPU waits seconds, by weight; a stranded
# one until the watchdog's 30 s),
# and the daemon's memory stays bounded (RSS sampled every 5 s: the largest
# in the second half at most 8 MiB over the first sample after warm-up).
# SOAK_S overrides the length (CI value: 60 s, for trying it by hand).
. /tests/lib.sh

SOAK_S=${SOAK_S:-$(by_tier 600 60)}
N=$(nr_cpus)
OFF=$((N - 1))
start_sched --stats 5
stress-ng --fork 2 --cpu $((N / 2)) --affinity 2 --timeout $((SOAK_S + 60))s \
	>/tmp/stress.out 2>&1 &
STRESS=$!
(while :; do hackbench -g 2 -l 50 >/dev/null 2>&1; sleep 1; done) &
BENCH=$!
(while :; do scx_nimble --monitor 1 >/dev/null 2>&1; sleep 1; done) &
READER=$!
# This shell drives the churn at nice -20, so that it keeps its pace; the
# loops start at nice 0 (+20 from here).
renice -n -20 -p $$ >/dev/null || fail "renice of the driving shell failed"
LOOPS=
for i in 1 2 3 4; do spin nice -n 20; LOOPS="$LOOPS $SPAWNED"; done
sleep 2
cpu_workers $STRESS
WATCH="$LOOPS $WORKERS"
stall_watch "$SOAK_S" $WATCH

rules="mainline v3 v4 off tip"
modes="off wakeups sis-fail all"
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$SCHED_PID/status"; }
: >/tmp/rss
t0=$(cut -d. -f1 /proc/uptime)
round=0 offline=0 reloads=0
while [ $(($(cut -d. -f1 /proc/uptime) - t0)) -lt "$SOAK_S" ]; do
	kill -0 "$SCHED_PID" || { wait "$SCHED_PID"; fail "scx_nimble exited (rc=$?) after $round rounds"; }
	echo "$(($(cut -d. -f1 /proc/uptime) - t0)) $(rss)" >>/tmp/rss
	# Nice changes: each loop gets a new nice in 0..19 (this shell is -20).
	for p in $LOOPS; do renice "$(awk -v s="$p$round" 'BEGIN { srand(s); print int(rand() * 20) }')" -p "$p" >/dev/null; done
	if [ $((round % 4)) = 3 ]; then
		set -- $rules; r=$(eval echo \${$((round / 4 % 5 + 1))})
		set -- $modes; m=$(eval echo \${$((round / 4 % 4 + 1))})
		# After a hotplug the reload takes a while under this load.
		wait_until 600 "not attached again 60 s after a hotplug" alive_and_attached
		tune --numa-rule "$r" --swq "$m"
	fi
	if [ $((round % 12)) = 11 ]; then
		offline=$((1 - offline))
		echo $((1 - offline)) >/sys/devices/system/cpu/cpu$OFF/online ||
			fail "could not set CPU $OFF online=$((1 - offline))"
		reloads=$((reloads + 1))
	fi
	sleep 5
	round=$((round + 1))
done
[ $offline = 0 ] || echo 1 >/sys/devices/system/cpu/cpu$OFF/online
wait_until 600 "not attached again 60 s after the last hotplug" alive_and_attached
stall_check 10 "loops re-niced every 5 s and CPU workers, $SOAK_S s of churn"
kill $BENCH $READER $LOOPS $STRESS 2>/dev/null
kill $(children $BENCH) $(children $READER) 2>/dev/null
wait $STRESS 2>/dev/null

attaches=$(grep -c 'scheduler attached' "$SCHED_ERR")
log "$round rounds, $reloads hotplug events, $attaches attaches"
[ "$attaches" -gt "$reloads" ] || fail "$reloads hotplug events but only $attaches attaches"
restarts=$(grep -c 'asked for a restart' "$SCHED_ERR")
[ "$restarts" -ge "$reloads" ] || fail "$reloads hotplug events, $restarts restarts logged"
# The only exits are the hotplug ones; no error reached the user.
bad=$(grep 'EXIT:' "$SCHED_ERR" | grep -v 'cpu [0-9]* going o[nf]*line'; grep '^scx_nimble: error' "$SCHED_ERR")
[ -z "$bad" ] || fail "an error: $bad"
# Memory: the first sample after a minute against the second half's largest.
base=$(awk -v w=$((SOAK_S / 10)) '$1 >= w { print $2; exit }' /tmp/rss)
peak=$(awk -v h=$((SOAK_S / 2)) '$1 >= h && $2 > m { m = $2 } END { print m + 0 }' /tmp/rss)
log "RSS (kB) every 5 s: $(awk '{ printf "%s ", $2 }' /tmp/rss)"
log "RSS after warm-up $base kB, largest in the second half $peak kB"
[ -n "$base" ] && [ "$peak" -gt 0 ] || fail "no RSS samples: $(cat /tmp/rss)"
[ "$peak" -le $((base + 8192)) ] || fail "RSS grew from $base kB to $peak kB"
stop_and_check pending
pass "$SOAK_S s of churn: $round rounds, $reloads reloads, RSS $base -> $peak kB"
