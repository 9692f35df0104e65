#!/bin/sh
# The per-node runnable counts follow where tasks run. Busy loops pinned to
# the last node show up there and not on node 0, leave when killed, and
# after unload every count is back to exactly 0.
. /tests/lib.sh

[ "$(nr_nodes)" -gt 1 ] || fail "needs a NUMA topology"
LAST=$(($(nr_nodes) - 1))
CPUS=$(cat /sys/devices/system/node/node$LAST/cpulist)
K=$(awk -v l="$CPUS" 'BEGIN { n = split(l, p, ","); c = 0; for (i = 1; i <= n; i++) { if (split(p[i], r, "-") == 2) c += r[2] - r[1] + 1; else c++ } print c }')
NLOOPS=$((2 * K))

# node_running of node N in the last stats line.
node_count() { counter node_running stats: | cut -d, -f$(($1 + 1)); }

start_sched --stats 0.5
pids=
for i in $(seq 1 $NLOOPS); do
	loop_on "$CPUS"
	pids="$pids $SPAWNED"
done
# From outside: each loop keeps running (two per CPU: a fair wait is a
# slice or two; 3 s is far beyond that and far below the watchdog's 30 s),
# watched for 3x that bound so a stall that starts late is caught too.
stall_watch 9 $pids
# Polled: the counts follow within a stats line or two.
loaded() { [ "$(node_count $LAST)" -ge "$NLOOPS" ]; }
wait_until 100 "node $LAST never counted $NLOOPS runnable in 10 s ($(node_count $LAST))" loaded
busy=$(node_count $LAST); home=$(node_count 0)
log "with $NLOOPS loops on node $LAST ($CPUS): node_running node$LAST=$busy node0=$home"
[ "$busy" -ge "$NLOOPS" ] || fail "node $LAST counts $busy runnable, expected >= $NLOOPS"
[ "$home" -lt "$NLOOPS" ] || fail "node 0 counts $home runnable with the load on node $LAST"
stall_check 3 "loops on node $LAST"
for n in $(task_nodes $pids); do [ "$n" = "$LAST" ] || fail "a loop limited to node $LAST ran on node $n"; done
kill $pids
drained() { [ "$(node_count $LAST)" -lt "$NLOOPS" ]; }
wait_until 100 "node $LAST still counts $(node_count $LAST) runnable 10 s after the kill" drained
after=$(node_count $LAST)
log "after killing them: node$LAST=$after"
[ "$after" -lt "$NLOOPS" ] || fail "node $LAST still counts $after runnable"
stop_and_check
final=$(counter node_running)
echo "$final" | tr ',' '\n' | grep -qv '^0$' && fail "node_running after unload: $final"
pass "per-node runnable counts: $busy on the loaded node, $home on node 0, $final after unload"
