#!/bin/sh
# What a load costs on this topology: the scheduler logs its load times
# (topology, BPF load = verification, attach = ops.init) and each BPF
# program's verified-instruction count (bpf_prog_info.verified_insns, the
# kernel's own count); every program must stay within its budget in
# verifier_budget, and every program needs one. Then it runs briefly under
# load and exits cleanly.
. /tests/lib.sh

BUDGET=/tests/verifier_budget
[ -r "$BUDGET" ] || fail "no $BUDGET"
start_sched -v
times=$(last_load_times)
[ -n "$times" ] || fail "no load times logged"
log "$(nr_cpus) CPUs, $(nr_nodes) nodes, $(nr_llcs) LLCs: $times"
grep -h "verified_insns " "$SCHED_ERR" "$SCHED_OUT" | awk '{ print $(NF - 1), $NF }' >/tmp/verified
[ -s /tmp/verified ] || fail "no verified_insns lines logged"
log "verified instructions: $(awk '{ printf "%s %s, ", $1, $2 }' /tmp/verified)"
over=$(awk 'NR == FNR { if ($1 !~ /^#/ && NF >= 2) b[$1] = $2; next }
	!($1 in b) { printf "%s %s has no budget; ", $1, $2; next }
	$2 > b[$1] { printf "%s %s over its budget %s; ", $1, $2, b[$1] }' "$BUDGET" /tmp/verified)
[ -z "$over" ] || fail "$over"
# It schedules: a loop per CPU, at most 16, for 3 s, then a clean exit.
# (128 loops on the limits topology's 128 vCPUs over 2 host cores slowed
# the guest some 50-fold: 3 s took 150 s and the kernel's sched_ext
# watchdog work, queued like any task, missed its 30 s.) Up to 16 CPUs,
# every CPU is busy; past that, every loop ran at least a third of the time.
N=$(nr_cpus)
L=$N
[ "$L" -le 16 ] || L=16
pids=
for _ in $(seq 1 "$L"); do
	spin
	pids="$pids $SPAWNED"
done
cpu_busy_begin
sleep 3
if [ "$N" -le 16 ]; then
	cpu_busy_check 60 "one loop per CPU"
else
	for p in $pids; do
		t=$(cpu_ticks "$p")
		[ "$t" -ge 100 ] || fail "loop $p ran $t ticks in 3 s"
	done
	# shellcheck disable=SC2086
	on=$(task_cpus $pids | awk '{ printf "%s ", $2 }')
	log "$L loops ran on $(echo "$on" | tr ' ' '\n' | sort -u | grep -c .) CPUs: $on"
fi
# shellcheck disable=SC2086
kill $pids
assert_attached "under load"
stop_and_check
pass "$(wc -l </tmp/verified) programs within their budgets; $times"
