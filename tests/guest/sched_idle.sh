#!/bin/sh
# SCHED_IDLE as the kernel treats it (issue 35), against EEVDF in the same
# boot, rounds interleaved:
#   1. share: 8 SCHED_IDLE loops beside 8 nice-0 and 8 SCHED_BATCH loops get
#      at most 2x the CPU time EEVDF gives them, or the weights imply if
#      EEVDF's sample fell below that (the kernel: weight 3 against
#      1024, 0.1-0.2 % of the machine; scx_nimble used to give them nice 19's
#      weight and a 1 s deadline cap, 10x that);
#   2. wakeups: 4 periodic normal sleepers (nimble-sleepers) beside 2
#      SCHED_IDLE loops, all on CPUs 0-1, wake at most 2x as late as under
#      EEVDF (worst p99 of the rounds), as a CPU that runs only SCHED_IDLE
#      work counts as idle for a wakeup and its task yields at once
#      (scx_nimble used to queue the sleepers behind the loops' slices);
#   3. cpu.idle (issue 37): 8 loops in a cgroup with cpu.idle 1 beside 8
#      normal loops get at most 2x the CPU time EEVDF gives them (the
#      kernel: the cgroup weighs 3 against 8 x 1024; scx_nimble, before
#      it read cpu.idle, gave them 49.7 % of the machine against 0.4 %).
# CPU time from /proc/PID/schedstat (ns), wakeup latency as the sleepers saw
# it: both from outside the scheduler.
. /tests/lib.sh

# SCHED_IDLE deadlines reach up to 6 s ahead: a window holds one or two
# slices of each idle loop depending on its phase, and under TCG a slice
# lasts 5-15 ms of wall time (the tick that ends it comes late when the
# host deschedules the vCPU), so the share of a 12 s window ranged
# 0.18-0.34 % under scx_nimble and 0.13-0.30 % under EEVDF: the share
# windows are 20 s in CI (2 of 10 runs at 12 s went past the bound below). The sleepers' p99
# needs less: 6 s (600 wakeups each); the cpu.idle share, far inside its
# bound (0.14-0.22 % against EEVDF's 0.27-0.40 %), 12 s.
SECS=$(by_tier 30 20)
WAKE_SECS=$(by_tier 20 6)
CG_SECS=$(by_tier 20 12)
# Interleaved rounds; CI runs one of each to keep the suite under 30 min.
ROUNDS=$(by_tier 2 1)
N=$(nr_cpus)

sched_idle_task() { [ "$(proc_field "$1" 41)" = 5 ]; }

# idle_share LABEL FILE WHAT SECS: the CPU time (schedstat) over SECS s of the
# loops in IDLE and of all of them (IDLE and OTHER), appended to FILE as
# "LABEL idle_ns all_ns"; then the loops are killed.
idle_share() {
	# shellcheck disable=SC2086
	r0=$(cat $(for p in $IDLE $OTHER; do echo /proc/$p/schedstat; done) | awk '{ print $1 }' | tr '\n' ' ')
	sleep "$4"
	# shellcheck disable=SC2086
	r1=$(cat $(for p in $IDLE $OTHER; do echo /proc/$p/schedstat; done) | awk '{ print $1 }' | tr '\n' ' ')
	# shellcheck disable=SC2086
	kill $IDLE $OTHER
	# shellcheck disable=SC2086
	wait $IDLE $OTHER 2>/dev/null
	# shellcheck disable=SC2086
	echo "$1 $(echo $IDLE | wc -w) $(echo $IDLE $OTHER | wc -w) $r0 | $r1" |
		awk '{ n = $2; k = $3; for (i = 1; i <= k; i++) { d = $(4 + k + i) - $(3 + i); if (i <= n) idle += d; all += d }
			printf "%s %.0f %.0f\n", $1, idle, all }' >>"$2"
	log "$1: $3 $(tail -n 1 "$2" | awk '{ printf "%.3f %% of the loops CPU time", 100 * $2 / $3 }')"
}

# share LABEL: appends "LABEL idle_ns all_ns" to /tmp/share.res.
share() {
	IDLE= OTHER=
	for i in $(seq $N); do
		spin chrt -i 0; IDLE="$IDLE $SPAWNED"
		spin; OTHER="$OTHER $SPAWNED"
		spin chrt -b 0; OTHER="$OTHER $SPAWNED"
	done
	sleep 1
	# chrt sets the policy when its forked child first runs: on a loaded
	# TCG host that took over a second once (CI), so wait up to 10 s.
	for p in $IDLE; do
		wait_until 100 "loop $p is not SCHED_IDLE after 10 s: policy $(proc_field "$p" 41)" sched_idle_task "$p"
	done
	idle_share "$1" /tmp/share.res "SCHED_IDLE loops" "$SECS"
}

# cg_share LABEL: appends "LABEL idle_ns all_ns" to /tmp/cgshare.res: N loops
# in the cgroup idlecg (cpu.idle 1), N in the root.
cg_share() {
	IDLE= OTHER=
	for i in $(seq $N); do
		spin; IDLE="$IDLE $SPAWNED"
		echo "$SPAWNED" >$CG/idlecg/cgroup.procs || fail "moving $SPAWNED into idlecg"
		spin; OTHER="$OTHER $SPAWNED"
	done
	sleep 1
	idle_share "$1" /tmp/cgshare.res "cpu.idle cgroup's loops" "$CG_SECS"
}

# wakeups LABEL: appends "LABEL p99_us max_us" of each sleeper to /tmp/wake.res.
# Two SCHED_IDLE loops and the sleepers on CPUs 0-1 only: the other CPUs
# stay idle, so the guest's 8 vCPUs do not queue for the host's cores and
# the latency measured is the scheduler's, not TCG's (with every vCPU busy,
# EEVDF's p99 here was 30-40 ms).
wakeups() {
	IDLE=
	for i in 0 1; do spin chrt -i 0 taskset -c 0,1; IDLE="$IDLE $SPAWNED"; done
	sleep 1
	taskset -c 0,1 nimble-sleepers --threads 4 --period-us 10000 --work-us 200 --secs "$WAKE_SECS" >/tmp/sl.out ||
		fail "$1: nimble-sleepers failed"
	# shellcheck disable=SC2086
	kill $IDLE
	wait $IDLE 2>/dev/null
	awk -v l="$1" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print l, v["lat_p99_us"], v["lat_max_us"] }' /tmp/sl.out >>/tmp/wake.res
	log "$1: sleepers beside SCHED_IDLE loops, p99/max us: $(awk -v l="$1" '$1 == l { printf "%s/%s ", $2, $3 }' /tmp/wake.res)"
}

CG=/sys/fs/cgroup
echo +cpu >$CG/cgroup.subtree_control || fail "cannot enable the cpu controller"
mkdir -p $CG/idlecg && echo 1 >$CG/idlecg/cpu.idle || fail "cannot make a cpu.idle cgroup"
: >/tmp/share.res
: >/tmp/wake.res
: >/tmp/cgshare.res
# measure LABEL: the three measurements; under scx_nimble, its --stats
# must list idlecg as idle.
measure() {
	share "$1"
	wakeups "$1"
	cg_share "$1"
	[ "$1" = eevdf ] ||
		grep -q '^cgroup: idlecg weight=100 share=[0-9.]*% cpu=[0-9.]*% idle$' "$SCHED_OUT" ||
		fail "--stats never listed idlecg as idle: $(grep '^cgroup: idlecg' "$SCHED_OUT" | tail -n 1)"
}
interleaved "$ROUNDS" measure "after the SCHED_IDLE loops" --stats 1

# The reference is EEVDF's share in this boot, or the weights' (3 per idle
# loop against 1024 per other loop: 0.146 %) if EEVDF's sample fell below
# it: a window catches a varying part of the idle loops' slices (12 s:
# EEVDF 0.13-0.30 %, scx_nimble 0.18-0.34 %; a CI-tier run failed 0.279 %
# against an EEVDF 0.133 %). The old treatment as nice 19 gave 1.68 %.
verdict=$(awk '{ idle[$1] += $2; all[$1] += $3 }
	END { e = idle["eevdf"] / all["eevdf"]; s = idle["nimble"] / all["nimble"]
		w = 3 / (3 + 2 * 1024); r = e > w ? e : w
		printf "%s share nimble=%.3f%% eevdf=%.3f%% weights=%.3f%% (<= 2x the larger)\n",
			s <= 2 * r ? "ok" : "BAD", 100 * s, 100 * e, 100 * w }' /tmp/share.res)
log "$verdict"
case $verdict in ok*) ;; *) fail "SCHED_IDLE share: $verdict" ;; esac
verdict=$(awk '{ if ($2 > p[$1]) p[$1] = $2 }
	END { printf "%s worst p99 nimble=%d us eevdf=%d us (<= 2x)\n", p["nimble"] <= 2 * p["eevdf"] ? "ok" : "BAD", p["nimble"], p["eevdf"] }' /tmp/wake.res)
log "$verdict"
case $verdict in ok*) ;; *) fail "wakeups beside SCHED_IDLE: $verdict" ;; esac
verdict=$(awk '{ idle[$1] += $2; all[$1] += $3 }
	END { e = idle["eevdf"] / all["eevdf"]; s = idle["nimble"] / all["nimble"]
		printf "%s cpu.idle cgroup share nimble=%.3f%% eevdf=%.3f%% (<= 2x)\n", s <= 2 * e ? "ok" : "BAD", 100 * s, 100 * e }' /tmp/cgshare.res)
log "$verdict"
case $verdict in ok*) ;; *) fail "cpu.idle cgroup: $verdict" ;; esac
pass "SCHED_IDLE and cpu.idle: the kernel's share, and normal wakeups take their CPUs at once"
