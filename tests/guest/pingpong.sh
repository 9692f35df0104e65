#!/bin/sh
# Two pinned futex ping-pong pairs (issue 39): nimble-pingpong's two
# processes of two threads each, one pair's worker spinning 10 ms a round,
# the other's 0.1 ms then sleeping 9.9 ms. Three placements: all four
# threads on CPU 0, on two CPUs of one LLC, on two CPUs of two LLCs (the
# same node). EEVDF and scx_nimble in the same boot, rounds interleaved.
# A fourth, "split" (every thread bound to a CPU of its own, CPUs 0-3, so
# every post wakes a thread on another, mostly idle, CPU), is the kernel's
# queued wakeups' test: each pair must make at least 0.85x its EEVDF rounds
# there. Without them (--no-queued-wakeup, or main before 2026-12-06) the
# waker spins while its wakee is still leaving its CPU, and the short pair
# made 0.70-0.80x (p99 6-8 ms against 0.2-2.0; issue 35, docs/lab.md); with
# them 0.99-1.04x over three runs. Its wakeups' p99 and longest are logged,
# not bounded (scx_nimble's short-pair p99 0.5-4.4 ms against EEVDF's
# 0.6-4.0 over the runs of 2026-12-06); EEVDF's are the levels (below).
# Each placement must give, under scx_nimble, over the rounds:
#   - each pair at least 0.8x its rounds per second under EEVDF (the issue
#     asked for half; the old core made 0.64-0.66x on CPU 0, the fix 0.96-1.0x);
#   - each pair's 99th percentile wakeup (woken to running, as the woken
#     thread saw it; the worst round's) within twice EEVDF's worst plus
#     1 ms, the running task's protected minimum (--preempt-min-us). On two
#     CPUs EEVDF's worst is the larger of its p99 there and in split (either
#     pair): on 1-2 EEVDF keeps each pair on one CPU (its wakeup path does
#     not search the other LLC, which holds the idle CPU) and scx_nimble
#     wakes the other, idle, CPU, whose cost under TCG is the host's to run
#     a halted vCPU, which split measures. Over eight runs (2026-12-06, the
#     builds before and after the global BPF functions, a CI run among
#     them) scx_nimble's p99 on 1-2 was 1.1-5.4x EEVDF's there; the two
#     runs that failed the bound on EEVDF's 1-2 p99 alone were noisy boots
#     for both (EEVDF's split p99 1.4 and 5.4 ms);
#   - its second longest wakeup within twice EEVDF's longest in this boot
#     (over every placement and round, split included: the boot's level of
#     host noise), and its longest within four times. Under TCG the longest
#     wakeup is one sample of the host's scheduling of vCPU threads (EEVDF's
#     own ranged 3.8-18 ms between those eight boots). Traced (ftrace,
#     2026-12-06), scx_nimble's wakeups over 5 ms on 1-2 were vCPUs holding
#     the wakee with need_resched set that did not reach schedule() for 5.7
#     and 7 ms. With the longest bounded at twice, two of the eight runs
#     failed on one such sample (8.8-10.1 ms against 8.1-9.1), the CI run
#     among them. A stranding that recurs in a run (the cpuq race fixed on
#     2026-12-06: waits of 4-11 ms on 1-2) fails the second longest, a
#     seconds-long one both. The longest's bound is never below 20 ms
#     (LONGEST_FLOOR_US): a CI run (2026-12-07) failed on one 15.3 ms
#     wakeup of the long pair on CPU 0 (second longest 1.1 ms, every other
#     figure in bounds) in a boot whose EEVDF longest was 3.1 ms, 4.9x;
#     six runs of that build gave 1.0-2.4x otherwise, and EEVDF's own
#     longest reached 18 ms in one boot of eight (2026-12-06);
# and the scheduler must stay attached with a clean kernel log. Before the
# fix the short pair on one CPU waited behind the long worker's whole 5 ms
# slices: with the old core as /bin/scx_nimble this script fails there
# (0.66x the rounds, p99 9.1 ms against EEVDF's 2.9 ms); the fix's worst
# p99 ratio in that placement's run was 0.25-0.8x, elsewhere up to 1.4x
# (2026-12-04).
. /tests/lib.sh

SECS=$(by_tier 15 4)
# The longest wakeup's bound never goes below this (one host stall, above).
LONGEST_FLOOR_US=20000
# Two interleaved rounds even in CI: the bounds take each side's worst.
ROUNDS=2
# CPUs 0 and 1 share an LLC on n2l4, 1 and 2 do not (LLCs of 2 CPUs).
[ "$(cat /sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list)" = 0-1 ] ||
	fail "expects n2l4's LLCs of two CPUs: cpu0 shares its LLC with $(cat /sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list)"
# The placements on two CPUs, where the schedulers may choose an idle one.
TWO="0-1 1-2"
PLACES="0 $TWO"

# place_args PLACE: nimble-pingpong's CPU arguments for PLACE.
place_args() {
	case $1 in
	split) echo "--cpus-long 1-2 --cpus-short 0,3 --split" ;;
	*) echo "--cpus $1" ;;
	esac
}

# one LABEL PLACE: appends "LABEL PLACE pair rate wake_p99_us wake_max_us wake_2nd_us" to /tmp/pp.res.
one() {
	# shellcheck disable=SC2046 # place_args's words are separate arguments
	nimble-pingpong --secs "$SECS" $(place_args "$2") >/tmp/pp.out || fail "$1 on $2: nimble-pingpong failed: $(cat /tmp/pp.out)"
	n=$(grep -c '^PAIR' /tmp/pp.out)
	[ "$n" = 2 ] || fail "$1 on $2: $n PAIR lines"
	awk -v l="$1" -v c="$2" '/^PAIR/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print l, c, v["name"], v["rate"], v["wake_p99_us"], v["wake_max_us"], v["wake_2nd_us"] }' /tmp/pp.out >>/tmp/pp.res
	log "$1 on CPUs $2: $(awk '/^PAIR/ { print $2, $4, $8, $9 }' /tmp/pp.out | tr '\n' ' ')"
}

: >/tmp/pp.res
# every_place LABEL: one round of every placement.
every_place() { for c in $PLACES split; do one "$1" "$c"; done; }
interleaved $ROUNDS every_place "after the ping-pong pairs"

# The host's level of noise in this boot: EEVDF's longest wakeup over
# every placement and round, split included.
emax=$(awk '$1 == "eevdf" && $6 > m { m = $6 } END { print m + 0 }' /tmp/pp.res)
# What waking an idle vCPU costs in this boot: EEVDF's worst p99 in split.
esp=$(awk '$1 == "eevdf" && $2 == "split" && $5 > m { m = $5 } END { print m + 0 }' /tmp/pp.res)
bad=
# Each placement's verdict; split's bounds its rounds alone (0.85x).
for c in $PLACES split; do
	v=$(awk -v c="$c" -v two=" $TWO " -v emax="$emax" -v esp="$esp" -v floor="$LONGEST_FLOOR_US" '$2 == c {
			k = $1 SUBSEP $3; rate[k] += $4; nr[k]++
			if ($5 > p99[k]) p99[k] = $5
			# the two longest over the rounds
			for (j = 6; j <= 7; j++)
				if ($j > wmax[k]) { w2[k] = wmax[k]; wmax[k] = $j } else if ($j > w2[k]) w2[k] = $j }
		END {
			ok = 1; out = ""
			lmax = 4 * emax > floor ? 4 * emax : floor
			split("long short", pairs, " ")
			for (i = 1; i <= 2; i++) {
				e = "eevdf" SUBSEP pairs[i]; n = "nimble" SUBSEP pairs[i]
				er = rate[e] / nr[e]; nr_ = rate[n] / nr[n]
				ep = p99[e]
				if (index(two, " " c " ") && esp > ep) ep = esp
				out = out sprintf("%s %.1f/s vs %.1f/s (%.2fx), p99 wakeup %d us vs %d us (bound on %d), longest %d/%d vs %d/%d (boot %d); ",
					pairs[i], nr_, er, nr_ / er, p99[n], p99[e], ep, wmax[n], w2[n], wmax[e], w2[e], emax)
				if (c == "split") {
					if (nr_ < 0.85 * er) ok = 0
				} else if (nr_ < 0.8 * er || p99[n] > 2 * ep + 1000 || w2[n] > 2 * emax ||
					   wmax[n] > lmax)
					ok = 0
			}
			printf "%s %s\n", ok ? "ok" : "BAD", out }' /tmp/pp.res)
	log "CPUs $c: $v"
	case $v in ok*) ;; *) bad="$bad CPUs $c: $v" ;; esac
done
log "split, each round: $(awk '$2 == "split" { printf "%s %s %.1f/s p99 %d us longest %d us; ", $1, $3, $4, $5, $6 }' /tmp/pp.res)"
[ -z "$bad" ] || fail "ping-pong pairs under scx_nimble against EEVDF:$bad"
pass "pinned ping-pong pairs: rounds at least 0.8x EEVDF's (0.85x split over CPUs), p99 wakeups within 2x its worst + 1 ms (on 2 CPUs: or its split p99), the second longest within 2x its longest in this boot, the longest within 4x (at least $((LONGEST_FLOOR_US / 1000)) ms)"
