#!/bin/sh
# Issue 2, acceptance 4 (guest part): not root, a scheduler already loaded, and
# bad flags each give one clear line and a non-zero exit, and leave the state
# as it was; SIGTERM stops it cleanly. (No sched_ext at all is tested on the
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
	grep -q "$pat" /tmp/err.err || fail "$name: '$(cat /tmp/err.err)' does not match '$pat'"
	[ ! -s /tmp/err.out ] || fail "$name: unexpected stdout: $(cat /tmp/err.out)"
	echo "  ok: $name -> rc=$rc: $(cat /tmp/err.err)"
}

grep -q '^nobody:' /etc/passwd 2>/dev/null || echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >>/etc/passwd
expect_error "not root" "must run as root" su -s /bin/sh nobody -c scx_nimble
[ "$(sched_state)" = disabled ] || fail "state $(sched_state) after the non-root attempt"

expect_error "bad slice" "slice-us" scx_nimble --slice-us 0
expect_error "bad stats" "stats" scx_nimble --stats nope
expect_error "unknown flag" "unexpected argument" scx_nimble --no-such-flag
[ "$(sched_state)" = disabled ] || fail "state $(sched_state) after bad flags"

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
assert_clean_dmesg
pass "error cases"
