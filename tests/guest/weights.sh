#!/bin/sh
# Nice weights across LLCs: CPU loops at several nice levels, more loops
# than CPUs, spread by the scheduler over every LLC. Each loop's CPU time
# over the window is read from /proc/PID/stat; the mean per loop of each
# level, divided by another level's, should track the ratio of their weights
# (the kernel's sched_prio_to_weight). Each mix runs first under EEVDF (no
# scheduler) and then under scx_nimble, in this boot. Fails unless, under
# scx_nimble, every ratio is within 1.2x of its weight ratio (nice 0 /
# nice 10: 7.8-11.2, weights 9.31) and every loop ran. Three runs
# (2026-12-07): scx_nimble 0.97-1.02x the weights, EEVDF 0.94-1.11x (its
# nice 0 / nice 10 9.42-10.33); the bound was a factor 2 before (issue 38).
#   WEIGHTS_ASSERT=0: report only (to look at another policy's numbers).
#   WEIGHTS_BREAK10=S: only to break the test on purpose, scx_nimble's
#   nice-10 loops run at nice 0 for the window's first S s (2: as if the
#   scheduler ignored nice for 2 s of 20; about 5.8 instead of 9.3).
. /tests/lib.sh

# The first mix runs 20 s in both tiers (the window its bounds are set
# for); the three-level mix is shorter in CI.
SECS1=20
SECS2=$(by_tier 20 10)
# nice -> weight, as in the kernel's sched_prio_to_weight table.
weight() {
	case $1 in
	-5) echo 3121 ;; 0) echo 1024 ;; 3) echo 526 ;; 5) echo 335 ;;
	6) echo 272 ;; 10) echo 110 ;; *) fail "no weight for nice $1" ;;
	esac
}

# run_mix SECS LABEL "NICE:COUNT ...": start the loops, take each loop's
# ticks over SECS (after a 1 s start), print the mean per level to /tmp/mix.
run_mix() {
	SECS=$1
	shift
	: >/tmp/loops
	for spec in $2; do
		n=${spec%%:*} c=${spec#*:}
		for i in $(seq 1 "$c"); do
			if [ "$n" = 10 ] && [ -n "$BREAK10" ]; then
				spin nice -n 0
				# busybox renice -n adds: 0 + 10
				(sleep $((1 + BREAK10)); renice -n 10 -p "$SPAWNED" >/dev/null) &
			else
				spin nice -n "$n"
			fi
			echo "$SPAWNED $n" >>/tmp/loops
		done
	done
	sleep 1
	files=$(awk '{ printf "/proc/%s/stat ", $1 }' /tmp/loops)
	# shellcheck disable=SC2086
	cat $files | awk '{ pid = $1; sub(/^.*\) /, ""); split($0, f, " "); print pid, f[12] + f[13] }' >/tmp/t0
	sleep "$SECS"
	# shellcheck disable=SC2086
	cat $files | awk '{ pid = $1; sub(/^.*\) /, ""); split($0, f, " "); print pid, f[12] + f[13], f[17] }' >/tmp/t1
	pids=$(awk '{ print $1 }' /tmp/loops)
	# shellcheck disable=SC2086
	kill $pids
	# shellcheck disable=SC2086
	wait $pids 2>/dev/null
	# level mean min: from the per-loop deltas
	awk 'FILENAME == "/tmp/t0" { a[$1] = $2; next } { d = $2 - a[$1]; n = $3
		s[n] += d; k[n]++; if (!(n in m) || d < m[n]) m[n] = d }
		END { for (n in s) printf "%d %.1f %d %d\n", n, s[n] / k[n], m[n], k[n] }' /tmp/t0 /tmp/t1 |
		sort -n >/tmp/mix
	log "$1: $(awk '{ printf "nice %d: %d loops, mean %.0f ticks (min %d); ", $1, $4, $2, $3 }' /tmp/mix)"
	[ "$(awk '$3 <= 0' /tmp/mix)" = "" ] || fail "$1: a loop never ran: $(cat /tmp/mix)"
}

# ratios LABEL: every pair of levels, measured vs weight ratio; sets BAD.
ratios() {
	BAD=
	out=
	levels=$(awk '{ print $1 }' /tmp/mix)
	for a in $levels; do
		for b in $levels; do
			[ "$a" -lt "$b" ] || continue
			ma=$(awk -v n="$a" '$1 == n { print $2 }' /tmp/mix)
			mb=$(awk -v n="$b" '$1 == n { print $2 }' /tmp/mix)
			r=$(awk -v x="$ma" -v y="$mb" 'BEGIN { printf "%.2f", (y > 0 ? x / y : 999) }')
			w=$(awk -v x="$(weight "$a")" -v y="$(weight "$b")" 'BEGIN { printf "%.2f", x / y }')
			out="$out nice$a/nice$b=$r (weights $w);"
			awk -v r="$r" -v w="$w" 'BEGIN { exit !(r >= w / 1.2 && r <= w * 1.2) }' ||
				BAD="$BAD nice$a/nice$b=$r vs $w;"
		done
	done
	log "$1:$out"
}

MIX1="0:16 10:8"
MIX2="0:8 3:8 6:8"
run_mix "$SECS1" "eevdf, 16 nice-0 + 8 nice-10" "$MIX1"; ratios eevdf
run_mix "$SECS2" "eevdf, 8 each of nice 0/3/6" "$MIX2"; ratios eevdf
start_sched --stats 1
BREAK10=${WEIGHTS_BREAK10:-}
run_mix "$SECS1" "nimble, 16 nice-0 + 8 nice-10" "$MIX1"; ratios nimble
BREAK10=
r010=$(awk '$1 == 0 { a = $2 } $1 == 10 { b = $2 } END { printf "%.2f", (b > 0 ? a / b : 999) }' /tmp/mix)
bad1=$BAD
run_mix "$SECS2" "nimble, 8 each of nice 0/3/6" "$MIX2"; ratios nimble
bad2=$BAD
assert_attached "after the weight mixes"
stop_and_check
log "$(grep '^final:' "$SCHED_OUT" | tr ' ' '\n' | grep -E '^(balance|preempt|lag_clamp|wake_sync|slices|slice_ns|migrate_llc)=' | tr '\n' ' ')"
if [ "${WEIGHTS_ASSERT:-1}" = 1 ]; then
	[ -z "$bad1$bad2" ] || fail "ratios off by more than 1.2x from the weights:$bad1$bad2"
fi
pass "nimble: every ratio within 1.2x of the weights' (nice 0 / nice 10 = $r010, weights 9.31)"
