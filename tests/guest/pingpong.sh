#!/bin/sh
# Two pinned futex ping-pong pairs (issue 39): nimble-pingpong's two
# processes of two threads each, one pair's worker spinning 10 ms a round,
# the other's 0.1 ms then sleeping 9.9 ms. Three placements: all four
# threads on CPU 0, on two CPUs of one LLC, on two CPUs of two LLCs (the
# same node). EEVDF and scx_nimble in the same boot, rounds interleaved.
# Each placement must give, under scx_nimble:
#   - each pair at least half of its rounds per second under EEVDF;
#   - no wakeup waiting longer (woken to running, as the woken thread saw
#     it) than twice the longest under EEVDF, the worst of the rounds of
#     each;
# and the scheduler must stay attached with a clean kernel log. Before the
# fix, the short pair on one CPU waited behind the long worker's whole 5 ms
# slices: 0.64-0.65x EEVDF's rounds, wakeups up to 10 ms. Those bounds (the
# issue's) let the old core through (0.64x; 10.2 ms against an EEVDF worst
# of 7.8 ms in one boot): tighter ones are open in issue 39.
. /tests/lib.sh

SECS=$(by_tier 15 5)
# Two interleaved rounds even in CI: with one, the two-LLC placement's
# longest wakeup (9.4 ms against EEVDF's 3.3 ms in one boot) failed the
# bound that the worst of two rounds met.
ROUNDS=2
# CPUs 0 and 1 share an LLC on n2l4, 1 and 2 do not (LLCs of 2 CPUs).
[ "$(cat /sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list)" = 0-1 ] ||
	fail "expects n2l4's LLCs of two CPUs: cpu0 shares its LLC with $(cat /sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list)"
PLACES="0 0-1 1-2"

# one LABEL CPUS: appends "LABEL CPUS pair rate wake_max_us" to /tmp/pp.res.
one() {
	nimble-pingpong --secs "$SECS" --cpus "$2" >/tmp/pp.out || fail "$1 on $2: nimble-pingpong failed: $(cat /tmp/pp.out)"
	n=$(grep -c '^PAIR' /tmp/pp.out)
	[ "$n" = 2 ] || fail "$1 on $2: $n PAIR lines"
	awk -v l="$1" -v c="$2" '/^PAIR/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print l, c, v["name"], v["rate"], v["wake_max_us"] }' /tmp/pp.out >>/tmp/pp.res
	log "$1 on CPUs $2: $(grep '^PAIR' /tmp/pp.out | cut -d' ' -f2,4,8 | tr '\n' ' ')"
}

: >/tmp/pp.res
for r in $(seq $ROUNDS); do
	for who in $(rotated "$r" eevdf nimble); do
		[ $who = nimble ] && start_sched
		for c in $PLACES; do one $who "$c"; done
		if [ $who = nimble ]; then
			assert_attached "after the ping-pong pairs"
			stop_and_check
		fi
	done
done

bad=
for c in $PLACES; do
	v=$(awk -v c="$c" '$2 == c {
			k = $1 SUBSEP $3; rate[k] += $4; nr[k]++
			if ($5 > wmax[$1]) wmax[$1] = $5 }
		END {
			ok = 1; out = ""
			split("long short", pairs, " ")
			for (i = 1; i <= 2; i++) {
				e = rate["eevdf" SUBSEP pairs[i]] / nr["eevdf" SUBSEP pairs[i]]
				s = rate["nimble" SUBSEP pairs[i]] / nr["nimble" SUBSEP pairs[i]]
				out = out sprintf("%s %.1f/s vs %.1f/s; ", pairs[i], s, e)
				if (s < e / 2) ok = 0
			}
			out = out sprintf("longest wakeup %d us vs %d us", wmax["nimble"], wmax["eevdf"])
			if (wmax["nimble"] > 2 * wmax["eevdf"]) ok = 0
			printf "%s %s\n", ok ? "ok" : "BAD", out }' /tmp/pp.res)
	log "CPUs $c: $v"
	case $v in ok*) ;; *) bad="$bad CPUs $c: $v;" ;; esac
done
[ -z "$bad" ] || fail "ping-pong pairs under scx_nimble against EEVDF:$bad"
pass "pinned ping-pong pairs: rounds at least half of EEVDF's, wakeups within 2x its longest"
