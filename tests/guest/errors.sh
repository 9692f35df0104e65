#!/bin/sh
# Refusals, the guest's part: not root, a scheduler already loaded, and bad
# flags each give one clear line and a non-zero exit, and leave the state as
# it was; SIGTERM stops it cleanly. (No sched_ext at all is tested on the
# host: tests/cli.rs.)
. /tests/lib.sh

# expect_error NAME PATTERN CMD...: exit != 0, exactly one stderr line matching.
expect_error() {
	name=$1 pat=$2; shift 2
	"$@" >/tmp/err.out 2>/tmp/err.err
	rc=$?
	[ $rc -ne 0 ] || fail "$name: exit 0"
	lines=$(wc -l </tmp/err.err)
	[ "$lines" -eq 1 ] || { cat /tmp/err.err; fail "$name: $lines stderr lines, expected 1"; }
	grep -qF -e "$pat" /tmp/err.err || fail "$name: '$(cat /tmp/err.err)' does not match '$pat'"
	[ ! -s /tmp/err.out ] || fail "$name: unexpected stdout: $(cat /tmp/err.out)"
	echo "  ok: $name -> rc=$rc: $(cat /tmp/err.err)"
}

grep -q '^nobody:' /etc/passwd 2>/dev/null || echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >>/etc/passwd
expect_error "not root" "must run as root" su -s /bin/sh nobody -c scx_nimble
[ "$(sched_state)" = disabled ] || fail "state $(sched_state) after the non-root attempt"

# Every flag with a malformed or out-of-range value, and unknown names: one
# line naming the flag (or what is wrong), exit != 0, nothing loaded.
bad() { # PATTERN ARGS...
	pat=$1; shift
	expect_error "$*" "$pat" scx_nimble "$@"
	[ "$(sched_state)" = disabled ] || fail "state $(sched_state) after: scx_nimble $*"
}
bad slice-us --slice-us abc
bad 100..=100000 --slice-us 99
bad 100..=100000 --slice-us 100001
bad slice-us --slice-us -5
bad stats --stats nope
bad "between 0.1 and 3600" --stats 0
bad "between 0.1 and 3600" --stats 99999
bad "between 0.1 and 3600" --monitor 0
bad stats --monitor 1 --stats 1
bad numa-rule --numa-rule v5
bad numa-rule --numa-rule ""
bad numa-patience-us --numa-patience-us 2000000
bad numa-patience-us --numa-patience-us x
bad swq --swq sometimes
bad 1..=16 --swq-shards 0
bad 1..=16 --swq-shards 17
bad swq-affinity --swq-affinity=yes
bad imb-formula --imb-formula v9
bad LEVEL=VALUE --imb-numa-nr x
bad imb-numa-nr --imb-numa-nr 0=1
bad imb-numa-nr --imb-numa-nr 1=-1
bad "has 0 NUMA level" --imb-numa-nr 2=1
bad exit-dump-len --exit-dump-len -1
bad 0..=1048576 --exit-dump-len 2000000
bad "unexpected argument" --no-such-flag
bad "--stats <SECS>|--monitor <SECS>" --json
bad swq tune --swq david
bad numa-rule tune --numa-rule eevdf
bad interval tui --interval x
bad cpu topology --cpu x

start_sched
first=$SCHED_PID
expect_error "second instance" "another sched_ext scheduler is already loaded (nimble" scx_nimble
sleep 1
kill -0 $first || fail "first instance died"
assert_attached "after the second instance was refused"
stop_sched

# SIGTERM (what systemd and kill send) is a clean stop too.
start_sched
kill -TERM "$SCHED_PID"
wait "$SCHED_PID"
rc=$?
SCHED_PID=
[ $rc -eq 0 ] || fail "scx_nimble exited $rc after SIGTERM"
wait_until 50 "sched_ext not disabled 5 s after SIGTERM" state_disabled
echo "  ok: SIGTERM -> rc=0, state disabled"

# stdout closed under --stats (`| head -1`): the printing ends quietly and
# the scheduler keeps running; SIGINT still stops it with 0, no panic.
( scx_nimble --stats 0.5 --stats-format line; echo "rc=$?" >/tmp/pipe.rc ) 2>/tmp/pipe.err | head -n 1 >/tmp/pipe.out &
wait_until 600 "--stats | head: not attached" attached
sleep 2
grep -q '^stats: ' /tmp/pipe.out || fail "--stats | head printed: $(cat /tmp/pipe.out)"
assert_attached "after --stats lost its reader"
kill -INT "$(pidof scx_nimble)"
wait_until 100 "--stats | head: no exit 5 s after SIGINT" test -s /tmp/pipe.rc
wait_until 50 "sched_ext not disabled after SIGINT" state_disabled
[ "$(cat /tmp/pipe.rc)" = rc=0 ] || fail "--stats | head: $(cat /tmp/pipe.rc): $(tail -n 3 /tmp/pipe.err)"
! grep -q panicked /tmp/pipe.err || fail "--stats | head panicked: $(grep panicked /tmp/pipe.err)"
echo "  ok: --stats | head -1 -> printing stopped, scheduler ran on, rc=0"

# A control value that names no rule (not written by tune) is refused: the
# scheduler logs one line, restores the last good controls and runs on.
start_sched --numa-rule v3
id=$(newest_map_id nimble_ctl)
[ -n "$id" ] || fail "no nimble_ctl map: $(bpftool map show | grep -c nimble) nimble maps"
bpftool map update id "$id" key 0 0 0 0 value 99 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 ||
	fail "bpftool could not write nimble_ctl (map $id)"
wait_until 50 "no refusal logged for numa_rule 99" grep -q "refused nimble_ctl" "$SCHED_ERR"
assert_attached "after a malformed control value"
now=$(scx_nimble tune 2>&1) || fail "tune after the refusal: $now"
case $now in *numa_rule=v3*) ;; *) fail "controls not restored: $now" ;; esac
echo "  ok: numa_rule=99 refused: $(grep "refused nimble_ctl" "$SCHED_ERR"), now $now"
stop_sched

# Exits the kernel decides. expect_exit WHAT PATTERN [THEN]: the scheduler started
# by the caller exits by itself with status != 0 and the UEI report (one
# EXIT: line naming PATTERN; its stderr is kept in /tmp/exit.err), sched_ext
# is disabled, and (after THEN, a command, if given) a restart attaches
# cleanly and stops with 0.
expect_exit() {
	ex_what=$1 ex_pat=$2 ex_then=$3
	wait_until 300 "$ex_what: still running 30 s later" sh -c "! kill -0 $SCHED_PID 2>/dev/null"
	wait "$SCHED_PID"
	rc=$?
	SCHED_PID=
	cp "$SCHED_ERR" /tmp/exit.err
	[ $rc -ne 0 ] || fail "$ex_what: exit status 0"
	grep -q "^scx_nimble: error: EXIT: .*$ex_pat" /tmp/exit.err ||
		fail "$ex_what: no EXIT report matching '$ex_pat': $(tail -n 3 /tmp/exit.err)"
	wait_until 50 "$ex_what: sched_ext not disabled" state_disabled
	echo "  ok: $ex_what -> rc=$rc: $(grep '^scx_nimble: error: EXIT' /tmp/exit.err)"
	$ex_then
	start_sched
	assert_attached "restart after $ex_what"
	stop_sched
}

# Up to here the kernel must not have complained; the exits below make it
# log their reasons, checked and then cleared for the scripts that follow.
assert_clean_dmesg

# A BPF-side error (scx_bpf_error from ops.tick, test-only flag), with the
# debug dump asked for: the dump comes with the report.
start_sched --test-error-after-ms 5000 --exit-dump-len 32768
expect_exit "scx_bpf_error" "injected by --test-error-after-ms"
grep -q "^DEBUG DUMP" /tmp/exit.err || fail "no debug dump with --exit-dump-len: $(head -c 300 /tmp/exit.err)"
# The kernel ejecting the scheduler (sysrq-S, as its watchdog would).
echo 1 >/proc/sys/kernel/sysrq
start_sched
echo S >/proc/sysrq-trigger
expect_exit "sysrq-S" "sysrq"
# The kernel's watchdog ejecting the scheduler: a hidden test flag stops
# dispatch 3 s after the load (and lowers the watchdog's timeout to 3 s);
# with more CPU loops than CPUs some wait in the queues, never to run.
start_sched --test-stall-after-ms 3000
LOOPS=
for i in $(seq $(($(nr_cpus) + 4))); do spin; LOOPS="$LOOPS $SPAWNED"; done
stop_loops() { kill $LOOPS; }
expect_exit "watchdog" "runnable task stall" stop_loops
dmesg -c >/tmp/exits.dmesg
grep -q "disabled (scx_bpf_error)" /tmp/exits.dmesg || fail "no scx_bpf_error exit in dmesg: $(grep sched_ext /tmp/exits.dmesg)"
grep -qi "sysrq" /tmp/exits.dmesg || fail "no sysrq exit in dmesg: $(grep sched_ext /tmp/exits.dmesg)"
grep -q "disabled (runnable task stall)" /tmp/exits.dmesg ||
	fail "no watchdog exit in dmesg: $(grep sched_ext /tmp/exits.dmesg)"

assert_clean_dmesg
pass "error cases"
