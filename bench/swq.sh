#!/bin/sh
# Shared wakequeue benchmark (issue 5), run in the VM:
#   vm/nimble-vm run --topo l2 --add bench/swq.sh:/bin/bench-swq -- bench-swq [RUNS]
# hackbench (seconds, lower is better) and a pipe ping-pong (perf bench
# sched pipe, usecs per round trip) under EEVDF and scx_nimble in each swq
# mode, RUNS rounds (default 5) with the variants interleaved in every
# round; prints every sample, then median/min/max and the median's ratio to
# EEVDF's from the same run. Timings under TCG are noisy (~20 %): read the
# distributions, not single numbers.
. /tests/lib.sh

RUNS=${1:-5}
MODES="off wakeups sis-fail all"
OUT=/tmp/bench.samples
: >"$OUT"

hackbench_s() {
	hackbench -g 4 -l 50 2>/dev/null | awk '/^Time:/ { print $2 }'
}
pingpong_us() {
	perf bench sched pipe -l 20000 2>/dev/null | awk '/usecs\/op/ { print $1 }'
}
sample() { # VARIANT
	echo "hackbench $1 $(hackbench_s)" >>"$OUT"
	echo "pingpong $1 $(pingpong_us)" >>"$OUT"
	tail -n 2 "$OUT" | tr '\n' ' '; echo
}

log "$(uname -r), $(nr_cpus) CPUs, $(nr_llcs) LLCs, $(nr_nodes) nodes; $RUNS rounds"
for r in $(seq "$RUNS"); do
	log "round $r"
	sample eevdf
	start_sched --swq off
	for m in $MODES; do
		tune --swq "$m" >/dev/null
		sleep 0.5
		sample "swq-$m"
	done
	stop_sched
done

echo "--- samples"
cat "$OUT"
echo "--- summary (median [min, max] over $RUNS runs; ratio = median / EEVDF median)"
for bench in hackbench pingpong; do
	unit=s; [ $bench = pingpong ] && unit=us/op
	echo "$bench ($unit, lower is better)"
	for v in eevdf $(for m in $MODES; do echo "swq-$m"; done); do
		awk -v b=$bench -v v="$v" '$1 == b && $2 == v { print $3 }' "$OUT" | sort -n |
			awk -v v="$v" '{ x[NR] = $1 } END {
				if (NR == 0) { printf "  %-13s no samples\n", v; exit }
				m = (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
				printf "  %-13s %10.3f [%.3f, %.3f] n=%d\n", v, m, x[1], x[NR], NR }'
	done | awk 'NR == 1 { base = $2 } { printf "%s  x%.2f\n", $0, $2 / base }'
done
