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
assert_clean_dmesg
pass "error cases"
