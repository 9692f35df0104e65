#!/bin/sh
# BPF cost per callback: for each scheduler binary given in BINS (default:
# scx_nimble), in rotated order over ROUNDS rounds in this boot, attach it,
# run the same load (hackbench and perf bench sched pipe pairs) with
# kernel.bpf_stats_enabled=1, and read every struct_ops program's
# run_time_ns / run_cnt from bpftool. Prints one line per binary, round and
# callback, then the median ns per call over the rounds. Not a test: a
# measurement (vm/nimble-vm run --add OLD_BINARY -- BINS="scx_nimble OLD" sh
# /tests/bpf_cost.sh).
. /tests/lib.sh

BINS=${BINS:-scx_nimble}
ROUNDS=${ROUNDS:-3}
CBS="select_cpu enqueue dispatch running stopping runnable quiescent tick"
: >/tmp/cost

# LOAD=tbench: the real tbench at 16 clients for 10 s instead (needs
# --add for tbench, tbench_srv and the loadfile, as the lab adds them).
load_tbench() {
	tbench_srv >/dev/null 2>&1 &
	srv=$!
	sleep 2
	tbench -t 10 -c /usr/share/dbench/client.txt 16 127.0.0.1 2>&1 | grep Throughput
	kill "$srv"
	wait "$srv"
}

# pipe_pairs N LOOPS [PIN...]: N perf bench sched pipe pairs at once,
# LOOPS round trips each, optionally under PIN (taskset ...).
pipe_pairs() {
	n=$1 loops=$2
	shift 2
	pids=
	for i in $(seq 2 "$n"); do
		"$@" perf bench sched pipe -l "$loops" >/dev/null 2>&1 &
		pids="$pids $!"
	done
	"$@" perf bench sched pipe -l "$loops" >/dev/null 2>&1
	# Not a bare wait: the scheduler is a background job of this shell too.
	wait $pids
}

load() {
	if [ "${LOAD:-}" = tbench ]; then
		load_tbench
		return
	fi
	# LOAD=pingpong: pingpong.sh's split placement (every wakeup of a
	# thread bound to an idle CPU), 5 s: the cost of a wakeup alone.
	if [ "${LOAD:-}" = pingpong ]; then
		nimble-pingpong --secs 5 --cpus-long 1-2 --cpus-short 0,3 --split >/dev/null
		return
	fi
	# LOAD=pipe: PAIRS (default 1) perf bench sched pipe pairs alone, the
	# lab's perf pipe (every wakeup finds its previous CPU idle).
	if [ "${LOAD:-}" = pipe ]; then
		pipe_pairs "${PAIRS:-1}" 5000
		return
	fi
	# The same load per CPU on every topology (issue 37: cost at 8 and 64
	# vCPUs): a hackbench group and a pipe pair per two CPUs (8 CPUs: 4).
	# LOAD=first8: 8 CPUs' load on CPUs 0-7 only, whatever the machine. Under
	# TCG every busy vCPU is a host thread on this host's 2 cores: 64 busy
	# vCPUs stretch each call's wall time (a lock holder descheduled by the
	# host, others spinning) where 8 do not, so only this load compares
	# the topologies' cost per call.
	half=$(($(nr_cpus) / 2))
	pin=
	if [ "${LOAD:-}" = first8 ]; then
		half=4
		pin="taskset -c 0-7"
	fi
	$pin hackbench -g "$half" -l 50 >/dev/null 2>&1
	# shellcheck disable=SC2086 # $pin: a command and its arguments, or nothing
	pipe_pairs "$half" 3000 $pin
}

sysctl -qw kernel.bpf_stats_enabled=1 || fail "cannot enable BPF run-time stats"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	# shellcheck disable=SC2086
	for bin in $(rotated "$r" $BINS); do
		$bin >"$SCHED_OUT" 2>"$SCHED_ERR" &
		SCHED_PID=$!
		wait_until 600 "$bin did not attach" alive_and_attached
		load
		log "$bin round $r: load done"
		# name run_cnt run_time_ns of every nimble_* program (names are cut at 15)
		bpftool -j prog show | tr '{' '\n' | grep '"name":"nimble_' |
			sed 's/.*"name":"nimble_\([a-z_]*\)".*"run_time_ns":\([0-9]*\),"run_cnt":\([0-9]*\).*/\1 \3 \2/' |
			grep -v '"' | while read -r name cnt ns; do
				echo "$bin $r $name $cnt $ns" >>/tmp/cost
			done
		kill -INT "$SCHED_PID"; wait "$SCHED_PID"
		wait_until 50 "sched_ext not disabled" state_disabled
	done
	r=$((r + 1))
done
sysctl -qw kernel.bpf_stats_enabled=0
awk '{ printf "%s round %s %s: %d calls, %.0f ns/call, %.0f ms in all\n", $1, $2, $3, $4, ($4 ? $5 / $4 : 0), $5 / 1e6 }' /tmp/cost
for bin in $BINS; do
	for cb in $CBS; do
		# names are cut at 15 characters: select_cpu appears as select_c
		awk -v b="$bin" -v c="$cb" '$1 == b && index(c, $3) == 1 && $4 > 0 { print $5 / $4 }' /tmp/cost |
			sort -n | awk -v b="$bin" -v c="$cb" '{ v[NR] = $1 } END { if (NR) printf "median %s %s %.0f ns/call (%d rounds)\n", b, c, v[int((NR + 1) / 2)], NR }'
	done
done
pass "bpf cost measured"
