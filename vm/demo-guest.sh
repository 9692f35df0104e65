#!/bin/sh
# Runs in the VM for `nimble-vm demo`: scx_nimble with stats every second
# under a mixed load, until Ctrl-C (or for $1 seconds when given). The load
# starts once the scheduler is attached: loading and verifying the BPF
# program under TCG takes seconds, much longer with every CPU already busy.
N=$(nproc)
PIDS=/tmp/demo.pids
: >"$PIDS"
(
	while [ "$(cat /sys/kernel/sched_ext/state 2>/dev/null)" != enabled ]; do sleep 0.2; done
	stress-ng --cpu $((N / 2)) --fork 1 --affinity 1 --timeout 0 >/dev/null 2>&1 &
	echo $! >>"$PIDS"
	(while :; do hackbench -g 2 -l 100 >/dev/null 2>&1; sleep 1; done) &
	echo $! >>"$PIDS"
	if [ -n "$1" ]; then
		sleep "$1"
		kill -INT "$(cat /tmp/demo.sched)" 2>/dev/null
	fi
) &
echo "== scx_nimble on $N CPUs; stress-ng + hackbench start once it is attached; Ctrl-C stops it =="
scx_nimble --stats 1 &
echo $! >/tmp/demo.sched
# Ctrl-C reaches the whole foreground group; the scheduler handles SIGINT.
trap '' INT
wait "$(cat /tmp/demo.sched)"
rc=$?
kill $(cat "$PIDS") 2>/dev/null
echo "== scx_nimble exited $rc; sched_ext state: $(cat /sys/kernel/sched_ext/state)"
exit $rc
