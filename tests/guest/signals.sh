#!/bin/sh
# Faults: SIGINT, SIGTERM and SIGKILL of the userspace process under load.
# INT and TERM stop it cleanly (exit 0, books balanced); after KILL the
# kernel unloads the BPF scheduler by itself (the struct_ops link dies with
# the process) and the state returns to disabled within seconds; a new
# instance then attaches and serves stats as usual. Prints "CASE name secs".
. /tests/lib.sh

N=$(nr_cpus)
# The load starts once the scheduler is attached: loading BPF under a full
# TCG guest takes minutes, and the signal, not the load, is the case.
load() {
	stress-ng --cpu "$N" --fork 2 --timeout 60s >/dev/null 2>&1 &
	LOAD=$!
	sleep "$(by_tier 4 2)"
}
unload() { kill $LOAD 2>/dev/null; wait $LOAD; }

for sig in INT TERM; do
	case_begin
	start_sched --stats 1
	load
	kill -$sig "$SCHED_PID"
	wait "$SCHED_PID"
	rc=$?
	SCHED_PID=
	unload
	[ $rc -eq 0 ] || fail "scx_nimble exited $rc after SIG$sig"
	wait_until 50 "not disabled 5 s after SIG$sig" state_disabled
	assert_counter imbalance = 0
	assert_clean_dmesg
	case_end "sig$sig"
done

case_begin
start_sched --stats 1
load
kill -KILL "$SCHED_PID"
wait "$SCHED_PID" 2>/dev/null
SCHED_PID=
k=$(cut -d' ' -f1 /proc/uptime)
wait_until 100 "sched_ext not disabled 10 s after SIGKILL" state_disabled
log "disabled $(awk -v a="$k" '{ printf "%.1f", $1 - a }' /proc/uptime) s after SIGKILL"
dmesg | grep -q 'sched_ext: BPF scheduler "nimble.*disabled' ||
	fail "no unload message after SIGKILL: $(dmesg | grep sched_ext | tail -n 3)"
# The unload after SIGKILL is "unregistered from user space": not an error.
assert_clean_dmesg
unload
case_end sigKILL

# A new instance attaches over the dead one's leftovers (its stats socket).
start_sched --stats 1
wait_until 100 "no stats line after the restart" stats_lines_at_least 1
out=$(scx_nimble --monitor 1 --stats-format line 2>&1 & p=$!; sleep 4; kill -INT $p; wait $p)
echo "$out" | grep -q '^stats:' || fail "--monitor after a SIGKILL restart: $out"
stop_sched
assert_clean_dmesg
pass "SIGINT/SIGTERM clean, SIGKILL unloads by itself, restart serves stats"
