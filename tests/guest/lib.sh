# Shared helpers for the guest-side tests (busybox sh). Sourced by each test;
# every assertion failure prints "FAIL: why" with the scheduler's logs and
# exits non-zero, which the host-side test (tests/vm.rs) turns into a failure.

SCHED_OUT=/tmp/sched.out
SCHED_ERR=/tmp/sched.err
SCHED_PID=

# NIMBLE_TIER, from tests/vm.rs: "ci" (the README's test command) or
# "full" (vm/nimble-vm test --full, for releases).
TIER=${NIMBLE_TIER:-ci}
# by_tier FULL CI: a duration (or count) for this tier. The CI value is the
# shortest that still shows the behaviour; the full one soaks.
by_tier() { if [ "$TIER" = full ]; then echo "$1"; else echo "$2"; fi; }

log() { echo "[$(cut -d' ' -f1 /proc/uptime)s] $*"; }

fail() {
	echo "FAIL: $*"
	if [ -n "$SCHED_PID" ]; then
		# The kernel's exit dump (when there is one) names the stuck task.
		echo "--- scheduler stderr"; tail -n 300 "$SCHED_ERR"
		echo "--- scheduler stdout"; tail -n 5 "$SCHED_OUT"
		kill -INT "$SCHED_PID" 2>/dev/null
	fi
	echo "--- dmesg (sched_ext)"; dmesg | grep -i sched_ext | tail -n 20
	exit 1
}

pass() { echo "PASS: $*"; }

sched_state() { cat /sys/kernel/sched_ext/state 2>/dev/null; }
sched_ops() { cat /sys/kernel/sched_ext/root/ops 2>/dev/null; }

attached() {
	[ "$(sched_state)" = enabled ] && case "$(sched_ops)" in nimble*) true ;; *) false ;; esac
}

assert_attached() {
	attached || fail "scheduler not attached ($1): state=$(sched_state) ops=$(sched_ops)"
}

# wait_until TENTHS WHAT CMD...: poll CMD every 0.1 s; fail with WHAT after
# TENTHS tries.
wait_until() {
	tries=$1 what=$2
	shift 2
	i=0
	until "$@"; do
		i=$((i + 1))
		[ $i -gt "$tries" ] && fail "$what"
		sleep 0.1
	done
}

# The scheduler process is alive (fails the test if not) and attached.
alive_and_attached() {
	kill -0 "$SCHED_PID" 2>/dev/null || { wait "$SCHED_PID"; fail "scx_nimble exited (rc=$?)"; }
	attached
}

state_disabled() { [ "$(sched_state)" = disabled ]; }

# start_sched [scx_nimble flags]: start in the background, wait for attach.
# Once attached, the scheduler runs at nice 0, as systemd starts it,
# whatever the nice of the test shell (-20 where it observes; loading at
# nice 0 among 24 loops took minutes under TCG): its main thread is
# runnable much of the time (crossbeam's channel yields while it waits),
# and at nice -20 that weight, 87 nice-0 loops, crowded its LLC's clock.
start_sched() {
	scx_nimble --stats-format line "$@" >"$SCHED_OUT" 2>"$SCHED_ERR" &
	SCHED_PID=$!
	# 60 s, and 2 s more per CPU: under TCG the load of the limits
	# topology (128 vCPUs) takes about 100 s.
	wait_until $((600 + 20 * $(nr_cpus))) "scx_nimble did not attach within $((60 + 2 * $(nr_cpus))) s" alive_and_attached
	for t in /proc/"$SCHED_PID"/task/*; do renice 0 -p "${t##*/}" >/dev/null; done
	log "attached: $(sched_ops)"
}

# last_load_times: the latest (re)load's "load times:" line, without its
# prefix ("topology and open X ms, BPF load (verifier) Y ms, ...").
last_load_times() { grep -h 'load times:' "$SCHED_ERR" | tail -n 1 | sed 's/.*load times: //'; }

# stop_sched: Ctrl-C, expect exit 0 and sched_ext disabled.
stop_sched() {
	kill -INT "$SCHED_PID"
	wait "$SCHED_PID"
	rc=$?
	pid=$SCHED_PID
	[ $rc -eq 0 ] || fail "scx_nimble exited with $rc after SIGINT"
	SCHED_PID=
	wait_until 50 "sched_ext not disabled 5 s after exit" state_disabled
	log "scx_nimble $pid exited 0, state disabled"
}

# counter NAME [LINE-PREFIX]: value of NAME= in the last line starting with
# LINE-PREFIX (default "final:") that the scheduler printed.
counter() {
	grep "^${2:-final:}" "$SCHED_OUT" | tail -n 1 | tr ' ' '\n' | sed -n "s/^$1=//p"
}

assert_counter() { # NAME OP VALUE
	v=$(counter "$1")
	[ -n "$v" ] || fail "counter $1 missing from: $(grep '^final:' "$SCHED_OUT")"
	[ "$v" "$2" "$3" ] || fail "counter $1=$v, expected $2 $3"
	echo "  ok: $1=$v $2 $3"
}

# The kernel must not have complained about the scheduler.
assert_clean_dmesg() {
	bad=$(dmesg | grep -iE 'sched_ext.*(error|stall|watchdog|disabled due)|runnable task stall' | grep -v 'sched_ext: BPF scheduler "nimble.*disabled (unregistered from user space)')
	[ -z "$bad" ] || fail "kernel complained: $bad"
}

# newest_map_id NAME: the id of the newest BPF map called NAME, the running
# scheduler's: a stopped instance's maps linger until an RCU grace period
# ends, so `bpftool ... name NAME` may match several.
newest_map_id() {
	bpftool map show | sed -n "s/^\([0-9]*\): .* name $1 .*/\1/p" | sort -n | tail -n 1
}

# stop_and_check [COUNTER...]: the closing checks of a test that ran the
# scheduler. Stop it (exit 0 on Ctrl-C, sched_ext disabled), print its final
# line (what the checks read, for the log), check that the kernel did not
# complain about it, and that its books balance: imbalance=0 (every task
# queued was run or dropped) and each COUNTER=0 too (e.g. pending,
# swq_depth: nothing left queued at unload). A test's own checks follow.
stop_and_check() {
	stop_sched
	grep '^final:' "$SCHED_OUT"
	assert_clean_dmesg
	assert_counter imbalance = 0
	for zero in "$@"; do assert_counter "$zero" = 0; done
}

# case_begin / case_end NAME: "CASE NAME seconds" for the reliability table
# (tests/vm.rs collects these lines); case_end also starts the next case.
case_begin() { CASE_T0=$(cut -d' ' -f1 /proc/uptime); }
case_end() {
	echo "CASE $1 $(awk -v a="$CASE_T0" '{ printf "%d", $1 - a }' /proc/uptime)"
	case_begin
}

nr_cpus() { grep -c ^processor /proc/cpuinfo; }
nr_nodes() { ls -d /sys/devices/system/node/node[0-9]* | wc -l; }
nr_llcs() { cat /sys/devices/system/cpu/cpu[0-9]*/cache/index3/shared_cpu_list | sort -u | wc -l; }

# proc_field PID FIELD: a field of /proc/PID/stat (1-based, after the comm).
proc_field() {
	sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f$(($2 - 2))
}

# --- NUMA placement helpers -------------------------------------------------

ALL_CPUS=$(cat /sys/devices/system/cpu/online)
node_cpus() { cat "/sys/devices/system/node/node$1/cpulist"; }

# CPU_NODES: the node of every CPU, as "n0 n1 ..." indexed by CPU id.
CPU_NODES=$(for n in /sys/devices/system/node/node[0-9]*; do
	echo "${n##*node} $(cat "$n/cpulist")"
done | awk '{ k = split($2, p, ",")
	for (i = 1; i <= k; i++) {
		if (split(p[i], r, "-") == 2) { for (c = r[1]; c <= r[2]; c++) node[c] = $1 }
		else node[p[i]] = $1
	} }
	END { for (c = 0; c in node; c++) printf "%s ", node[c] }')

# task_nodes PID...: the node each thread of each PID last ran on, one a
# line. One cat and one awk, whatever the count: sampling must stay cheap
# next to what it measures (the sampling shell's node counts its load).
task_nodes() {
	files=
	# The globs expand where $files is used: no subshell per pid (a fork
	# costs ~0.1 s of a busy TCG guest).
	for pid in "$@"; do files="$files /proc/$pid/task/*/stat"; done
	# shellcheck disable=SC2086
	cat $files 2>/dev/null | awk -v map="$CPU_NODES" 'BEGIN { split(map, m, " ") }
		{ sub(/^.*\) /, ""); split($0, f, " "); print m[f[37] + 1] }'
}

# task_cpus PID...: "pid cpu" for each (single-threaded) PID, the CPU it
# last ran on; one cat and one awk.
task_cpus() {
	files=
	for pid in "$@"; do files="$files /proc/$pid/stat"; done
	# shellcheck disable=SC2086
	cat $files 2>/dev/null | awk '{ pid = $1; sub(/^.*\) /, ""); split($0, f, " "); print pid, f[37] }'
}

# sample_nodes COUNT GAP PID...: COUNT lines "c0/c1/..." (threads per node,
# every node), GAP seconds apart, from ONE awk process: a sampling pipeline
# forks several processes at once on its node, which the NUMA gate then
# sees as that node's load (on a slow TCG guest, often).
sample_nodes() {
	count=$1 gap=$2
	shift 2
	files=
	for pid in "$@"; do files="$files /proc/$pid/task/*/stat"; done
	# shellcheck disable=SC2086
	sample_stat_files "$count" "$gap" $files
}

# sample_stat_files COUNT GAP FILE...: sample_nodes over the threads whose
# /proc/PID/task/TID/stat files are given.
sample_stat_files() {
	count=$1 gap=$2
	shift 2
	awk -v map="$CPU_NODES" -v nn="$(nr_nodes)" -v count="$count" -v gap="$gap" \
		-v files="$*" 'BEGIN {
		split(map, m, " "); nf = split(files, f, " ")
		for (s = 0; s < count; s++) {
			if (s) system("usleep " int(gap * 1000000))
			for (i = 0; i < nn; i++) c[i] = 0
			for (j = 1; j <= nf; j++) if ((getline line < f[j]) > 0) {
				close(f[j]); sub(/^.*\) /, "", line); split(line, x, " "); c[m[x[37] + 1]]++
			}
			out = ""
			for (i = 0; i < nn; i++) out = out (i ? "/" : "") c[i]
			getline up < "/proc/uptime"; close("/proc/uptime"); split(up, u, " ")
			print u[1], out; fflush()
		} }'
}

# migrations_begin PID...: record every migration of these tasks from now
# on, from the kernel's sched_migrate_task tracepoint (exact where sampling
# /proc/PID/stat every 0.1 s can miss a task that moved twice between two
# samples). migrations_end prints them, "pid from_node to_node" a line, in
# order, and stops recording.
TRACE=/sys/kernel/tracing
migrations_begin() {
	[ -w "$TRACE/events/sched/sched_migrate_task/enable" ] || fail "no tracefs at $TRACE"
	filter=
	for pid in "$@"; do filter="${filter:+$filter || }pid == $pid"; done
	echo 0 >"$TRACE/tracing_on"
	echo >"$TRACE/trace"
	echo "$filter" >"$TRACE/events/sched/sched_migrate_task/filter"
	echo 1 >"$TRACE/events/sched/sched_migrate_task/enable"
	echo 1 >"$TRACE/tracing_on"
}
migrations_end() {
	echo 0 >"$TRACE/events/sched/sched_migrate_task/enable"
	echo 0 >"$TRACE/events/sched/sched_migrate_task/filter"
	grep -o 'pid=[0-9]* .*orig_cpu=[0-9]* dest_cpu=[0-9]*' "$TRACE/trace" |
		awk -v map="$CPU_NODES" 'BEGIN { split(map, m, " ") }
		{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		  print v["pid"], m[v["orig_cpu"] + 1], m[v["dest_cpu"] + 1] }'
	echo >"$TRACE/trace"
}

# node_histogram PID...: "c0 c1 ..." threads per node, every node listed.
node_histogram() {
	task_nodes "$@" | awk -v n="$(nr_nodes)" '{ c[$1]++ }
		END { for (i = 0; i < n; i++) printf "%d ", c[i] + 0 }'
}

# spawn_from CPUS CMD...: run CMD from a process started on CPUS that may
# then use every CPU, so where its children go is the fork placement's
# decision. Sets SPAWNED to its pid.
spawn_from() {
	cpus=$1
	shift
	taskset -c "$cpus" sh -c 'taskset -p -c "$0" $$ >/dev/null; exec "$@"' "$ALL_CPUS" "$@" \
		>/dev/null 2>&1 &
	SPAWNED=$!
}

# keep_off CPU: move this shell (and so everything it starts later, the
# scheduler included) onto one CPU, out of the way of what is measured.
keep_off() { taskset -p -c "$1" $$ >/dev/null; }
# node1_watcher: for tests that watch tasks on node 0 of a two-node guest.
# Sets N0 (node 0's CPUs); this shell, and what it starts (the scheduler,
# the sampling awk), stays on the last CPU, on node 1, so node 0 stays quiet.
node1_watcher() {
	[ "$(nr_nodes)" -eq 2 ] || fail "needs two NUMA nodes"
	N0=$(node_cpus 0)
	keep_off $(($(nr_cpus) - 1))
}

# tune ARGS: scx_nimble tune, failing the test if it fails.
tune() {
	out=$(scx_nimble tune "$@" 2>&1) || fail "scx_nimble tune $*: $out"
	log "tune $*: $out"
}

# children PID: the pids of PID's child processes.
children() { echo $(cat /proc/"$1"/task/*/children 2>/dev/null); }

# --- stats-line helpers -----------------------------------------------------

# stat_now NAME: NAME= in the latest stats line.
stat_now() { counter "$1" "stats:"; }

# stats_snapshot: keep the latest stats line in SNAP, so that several
# counters are read from one instant (the next line may come between reads).
stats_snapshot() { SNAP=$(grep '^stats:' "$SCHED_OUT" | tail -n 1); }
# snap_value NAME: NAME= in SNAP.
snap_value() { echo "$SNAP" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

stats_lines_at_least() { [ "$(grep -c '^stats:' "$SCHED_OUT")" -ge "$1" ]; }

# next_stats: wait for a stats line that counts everything done before this
# call (the second new line: the first may have been read just before).
next_stats() {
	n=$(grep -c '^stats:' "$SCHED_OUT")
	wait_until 100 "no stats line within 10 s" stats_lines_at_least $((n + 2))
}

# cpu_ticks PID: CPU time (utime + stime, in clock ticks) of a process.
cpu_ticks() {
	sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# spin [WRAPPER...]: start a CPU loop in the background, through WRAPPER
# when given (nice -n 10, chrt -b 0, taskset -c 0-3: each execs the loop,
# so the pid is the loop's own, to read or signal); sets SPAWNED to its pid.
spin() {
	"$@" sh -c 'while :; do :; done' &
	SPAWNED=$!
}

# loop_on CPUS: start a CPU loop limited to CPUS; sets SPAWNED to its pid.
loop_on() { spin taskset -c "$1"; }

# rotated ROUND WORD...: the words rotated left ROUND-1 times (round 1: as
# given), so each round of an interleaved measurement starts elsewhere.
rotated() {
	k=$1
	shift
	while [ "$k" -gt 1 ]; do first=$1; shift; set -- "$@" "$first"; k=$((k - 1)); done
	echo "$@"
}

# interleaved ROUNDS FN WHAT [FLAGS...]: ROUNDS rounds of "FN eevdf" (no
# sched_ext scheduler) and "FN nimble" (scx_nimble started with FLAGS
# before it, then checked still attached, WHAT naming the moment, and
# stopped cleanly), the order rotated each round.
interleaved() {
	il_rounds=$1 il_fn=$2 il_what=$3
	shift 3
	for round in $(seq "$il_rounds"); do
		for who in $(rotated "$round" eevdf nimble); do
			if [ "$who" = nimble ]; then
				start_sched "$@"
				"$il_fn" nimble
				assert_attached "$il_what"
				stop_and_check
			else
				"$il_fn" eevdf
			fi
		done
	done
}

# --- observed from outside the scheduler ------------------------------------
# The kernel's own accounting, which the scheduler's counters cannot vouch
# for: a scheduler that strands a task, forgets a CPU or starves a task
# still balances its books, but fails these.

# cpu_busy_begin / cpu_busy_check MIN_PCT WHAT: between the two calls every
# online CPU was busy (not idle, not iowait) at least MIN_PCT % of the time,
# by /proc/stat. Work conservation: a CPU left out of the queues it should
# serve sits idle while tasks wait.
cpu_busy_begin() { grep '^cpu[0-9]' /proc/stat >/tmp/busy0; }
cpu_busy_check() {
	grep '^cpu[0-9]' /proc/stat >/tmp/busy1
	# Fields 2-9: user nice system idle iowait irq softirq steal (guest
	# time is counted in user already).
	busy=$(awk 'NR == FNR { for (i = 2; i <= 9; i++) t0[$1] += $i; i0[$1] = $5 + $6; next }
		{ t = 0; for (i = 2; i <= 9; i++) t += $i; dt = t - t0[$1]; di = $5 + $6 - i0[$1]
		  printf "%s=%d ", $1, (dt > 0 ? 100 * (dt - di) / dt : 0) }' /tmp/busy0 /tmp/busy1)
	log "$2: busy % per CPU: $busy"
	low=$(echo "$busy" | tr ' ' '\n' | awk -F= -v min="$1" '$2 != "" && $2 < min')
	[ -z "$low" ] || fail "$2: CPU(s) busy under $1 %: $(echo $low)"
}

# stall_watch SECS PID...: in the background, for SECS s, sample every
# 0.2 s each PID's run time (/proc/PID/schedstat) and state (/proc/PID/stat),
# from one awk at nice -20 (so it samples on time under load; a late sample
# can only hide a wait in which the task did run). stall_check MAX_S WHAT
# then asserts that every PID still alive ran, and that none stayed
# runnable without running for MAX_S s or more: the longest wait, measured
# by the kernel's accounting, not the scheduler's.
stall_watch() {
	sw_secs=$1
	shift
	nice -n -20 awk -v secs="$sw_secs" -v pids="$*" 'function now() {
			getline up < "/proc/uptime"; close("/proc/uptime"); split(up, u, " "); return u[1]
		}
		BEGIN {
		n = split(pids, p, " "); t0 = now(); t = t0
		while (t - t0 < secs) {
			for (i = 1; i <= n; i++) {
				f = "/proc/" p[i] "/stat"
				if ((getline line < f) <= 0) { close(f); gone[i] = 1; continue }
				close(f); sub(/^.*\) /, "", line); st = substr(line, 1, 1)
				f = "/proc/" p[i] "/schedstat"; getline ss < f; close(f); split(ss, x, " ")
				if (!(i in last)) { run0[i] = x[1]; last[i] = x[1]; since[i] = t }
				else if (x[1] != last[i] || st != "R") { last[i] = x[1]; since[i] = t }
				else if (t - since[i] > worst[i]) worst[i] = t - since[i]
			}
			system("usleep 200000"); t = now()
		}
		for (i = 1; i <= n; i++)
			printf "STALL %s %.2f %d %s\n", p[i], worst[i] + 0, (last[i] - run0[i]) / 1000000, gone[i] ? "gone" : "alive"
	}' >/tmp/stall.out 2>&1 &
	STALL_WATCHER=$!
}
stall_check() {
	wait "$STALL_WATCHER"
	n=$(grep -c '^STALL' /tmp/stall.out)
	[ "$n" -gt 0 ] || fail "$2: the stall watcher printed nothing: $(head -c 300 /tmp/stall.out)"
	worst=$(awk 'BEGIN { w = -1 } $1 == "STALL" && $3 > w { w = $3; p = $2 } END { printf "%.2f s (pid %s)", w, p }' /tmp/stall.out)
	log "$2: $n tasks watched, longest runnable wait $worst"
	bad=$(awk -v max="$1" '$1 == "STALL" && ($3 >= max || ($4 == 0 && $5 == "alive")) {
		printf "pid %s waited %s s, ran %s ms; ", $2, $3, $4 }' /tmp/stall.out)
	[ -z "$bad" ] || fail "$2: a task waited $1 s or more, or never ran: $bad"
}

# kernel_domains CPU: the kernel's scheduling domains of CPU, a line each:
# "S cpuN domainK NAME MASK" from /proc/schedstat and "K cpuN domainK NAME
# FLAGS..." from debugfs (sched_verbose), for tests/vm.rs to compare with.
kernel_domains() {
	awk -v c="cpu$1" '$1 == c { p = 1; next } /^cpu/ { p = 0 } p && /^domain/ { print "S", c, $1, $2, $3 }' /proc/schedstat
	for d in /sys/kernel/debug/sched/domains/cpu$1/domain*; do
		echo "K cpu$1 $(basename "$d") $(cat "$d/name") $(cat "$d/flags")"
	done
}

# named_children PID NAME: PID's children whose command is NAME.
named_children() {
	for c in $(children "$1"); do
		[ "$(cat "/proc/$c/comm" 2>/dev/null)" = "$2" ] && echo "$c"
	done
}

# cpu_workers PID: sets WORKERS to the stress-ng-cpu workers of the
# stress-ng run PID, once it has forked them (polled for up to 5 s; the test
# fails without any).
cpu_workers() {
	for i in $(seq 50); do
		WORKERS=$(named_children "$1" stress-ng-cpu)
		[ -n "$WORKERS" ] && return
		sleep 0.1
	done
	fail "no stress-ng-cpu workers under $1 after 5 s: $(children "$1")"
}
