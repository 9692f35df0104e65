#!/bin/sh
# Metrics over scx_stats. Under load (then every CPU full: no stall of 3 s
# either way, from /proc): `--monitor 1` prints at least three
# intervals with non-zero, growing counters; `--monitor 1 --json` lines go
# to the host test (prefixed "J ") which checks per-node and per-LLC sums
# against the totals; the socket is root's only; the TUI attaches in a pty,
# draws, quits on q, and exits by itself when the scheduler goes away.
. /tests/lib.sh

SOCK=/var/run/scx/root/stats
N=$(nr_cpus)

start_sched
stress-ng --cpu "$N" --cpu-load 60 --timeout 60s >/dev/null 2>&1 &
LOAD=$!
( while kill -0 $LOAD 2>/dev/null; do hackbench -g 2 -l 20 >/dev/null 2>&1; done ) &
BENCH=$!
wait_until 100 "no stats socket at $SOCK" test -S $SOCK
# From outside, while the stats are read: every CPU worker keeps running
# (at 60 % load with hackbench on top a fair wait is a slice or two).
cpu_workers $LOAD
stall_watch 15 $WORKERS

# Root only: no bits for group or others, and an unprivileged user is refused.
mode=$(stat -c %a $SOCK)
case $mode in *00) ;; *) fail "stats socket mode $mode: others may connect" ;; esac
if su -s /bin/sh nobody -c "scx_nimble --monitor 1" >/tmp/nobody.out 2>&1; then
	fail "an unprivileged --monitor was served: $(head -c 300 /tmp/nobody.out)"
fi
grep -q "root only" /tmp/nobody.out || fail "unclear refusal: $(cat /tmp/nobody.out)"
log "socket mode $mode; unprivileged monitor refused: $(tail -n 1 /tmp/nobody.out)"

# --monitor's default, human form: per interval a header and aligned rows
# (rates over the interval), per-node and per-LLC rows on this topology.
scx_nimble --monitor 1 >/tmp/human.out 2>/tmp/mon.err &
MON=$!
wait_until 150 "--monitor printed fewer than 3 headers in 15 s" \
	sh -c '[ "$(grep -c "^  controls  numa_rule=" /tmp/human.out)" -ge 3 ]'
kill -INT $MON
wait $MON || fail "--monitor exited $? after SIGINT: $(cat /tmp/mon.err)"
for row in tasks enqueue dispatch move wait numa "node 1" "llc 3"; do
	grep -q "^  $row " /tmp/human.out || fail "--monitor: no '$row' row in: $(head -n 20 /tmp/human.out)"
done
grep -q "^  enqueue   [0-9.]*/s: " /tmp/human.out || fail "--monitor: enqueue is not a rate: $(grep '^  enqueue' /tmp/human.out | head -n 2)"
! grep -q "^  swq " /tmp/human.out || fail "--monitor: an swq row with --swq off"
! grep -q "^stats:" /tmp/human.out || fail "--monitor: the one-line form without --stats-format line"
log "--monitor (human): $(grep -c '^scx_nimble ' /tmp/human.out) intervals; $(grep '^  enqueue' /tmp/human.out | tail -n 1)"

# --monitor --stats-format line: a client only, in its own process; Ctrl-C ends it with 0.
scx_nimble --monitor 1 --stats-format line >/tmp/mon.out 2>/tmp/mon.err &
MON=$!
wait_until 150 "--monitor printed fewer than 4 lines in 15 s" \
	sh -c '[ "$(grep -c "^stats:" /tmp/mon.out)" -ge 4 ]'
kill -INT $MON
wait $MON || fail "--monitor exited $? after SIGINT: $(cat /tmp/mon.err)"
first=$(grep '^stats:' /tmp/mon.out | head -n 1)
last=$(grep '^stats:' /tmp/mon.out | tail -n 1)
val() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
for c in ins_direct run_direct llc_own idle_prev migrate; do
	grep '^stats:' /tmp/mon.out | while read -r line; do
		[ "$(val "$line" $c)" -gt 0 ] || { echo "zero $c in: $line"; exit 1; }
	done || fail "--monitor line with $c=0"
done
# Work done under load shows in every interval (wakeups may all find busy CPUs).
for c in llc_own migrate; do
	[ "$(val "$last" $c)" -gt "$(val "$first" $c)" ] ||
		fail "$c did not grow over the monitored intervals: $first / $last"
done
log "--monitor: $(grep -c '^stats:' /tmp/mon.out) lines, run_direct $(val "$first" run_direct) -> $(val "$last" run_direct)"

stall_check 3 "stress-ng CPU workers while --monitor read the stats"

# Then every CPU full (a CPU loop each on top of the 60 % workers and
# hackbench) while --monitor --json and the TUI read the stats: no worker
# or loop waits 3 s, watched for 3x that. (Not from the start: the counters
# above need some wakeups to find an idle CPU.)
HOGS=
for i in $(seq "$N"); do spin; HOGS="$HOGS $SPAWNED"; done
stall_watch 9 $HOGS $WORKERS

# --monitor --json: one object per interval, checked on the host.
scx_nimble --monitor 1 --json >/tmp/mon.json 2>/tmp/mon.err &
MON=$!
wait_until 150 "--monitor --json printed fewer than 3 lines in 15 s" \
	sh -c '[ "$(grep -c "^{" /tmp/mon.json)" -ge 3 ]'
kill -INT $MON
wait $MON || fail "--monitor --json exited $?: $(cat /tmp/mon.err)"
grep '^{' /tmp/mon.json | sed 's/^/J /'

# The TUI in a pseudo-terminal: draws the topology, quits on q.
tui() { # SECONDS-BEFORE-q LOG
	( sleep "$1"; printf q ) | timeout 60 script -q -e \
		-c "stty rows 30 cols 100; TERM=xterm scx_nimble tui" "$2" >/dev/null 2>&1
}
tui 8 /tmp/tui.log || fail "tui exited $? (log: $(tail -c 400 /tmp/tui.log))"
assert_attached "after the TUI quit"
# The screen as text: ratatui moves the cursor over blank cells instead of
# writing spaces, so each escape sequence becomes one space.
tr '\033' '~' </tmp/tui.log | sed 's/~\[[0-9;?]*[a-zA-Z]/ /g' | tr -s ' ' >/tmp/tui.txt
for want in "node 0" "node 1" "LLC 0" "LLC 3" "cpu7" "imb_numa_nr" "steals" "q quit"; do
	grep -q "$want" /tmp/tui.txt ||
		fail "TUI did not draw '$want': $(head -c 4000 /tmp/tui.txt)"
done
# Loads and rates need two samples: a later redraw wrote them.
grep -Eq '[0-9]+%' /tmp/tui.txt || fail "TUI never drew a CPU load"
grep -Eq '[0-9][kM]?/s' /tmp/tui.txt || fail "TUI never drew a rate"

log "TUI drew nodes, LLCs, thresholds and sparklines, quit on q"
stall_check 3 "CPU loops and stress-ng workers with every CPU full, while --json and the TUI read the stats"
kill $HOGS

# ... and leaves by itself when the scheduler goes away.
( timeout 60 script -q -e -c "stty rows 30 cols 100; TERM=xterm scx_nimble tui" \
	/tmp/tui2.log </dev/null >/dev/null 2>&1; echo $? >/tmp/tui2.rc ) &
# Stop the scheduler once this TUI has drawn (it then has a connection).
wait_until 300 "the second TUI never drew" grep -q quit /tmp/tui2.log
kill $LOAD $BENCH 2>/dev/null
stop_sched
wait_until 150 "the TUI did not exit within 15 s of the scheduler leaving" test -s /tmp/tui2.rc
[ "$(cat /tmp/tui2.rc)" = 0 ] || fail "TUI exit status $(cat /tmp/tui2.rc) after the scheduler left"
grep -q "went away" /tmp/tui2.log || fail "TUI did not say why it left: $(tail -c 300 /tmp/tui2.log)"
wait
assert_clean_dmesg
pass "monitor, JSON and TUI over the stats socket"
