#!/bin/sh
# Runs in the VM for `nimble-vm demo`: scx_nimble with stats every second
# under a mixed load, until Ctrl-C (or for $1 seconds when given).
N=$(nproc)
stress-ng --cpu $((N / 2)) --fork 1 --affinity 1 --timeout 0 >/dev/null 2>&1 &
(while :; do hackbench -g 2 -l 100 >/dev/null 2>&1; sleep 1; done) &
echo "== scx_nimble on $N CPUs under stress-ng + hackbench; Ctrl-C stops it =="
if [ -n "$1" ]; then
	timeout -s INT "$1" scx_nimble --stats 1
else
	scx_nimble --stats 1
fi
rc=$?
kill %1 %2 2>/dev/null
echo "== scx_nimble exited $rc; sched_ext state: $(cat /sys/kernel/sched_ext/state)"
exit $rc
