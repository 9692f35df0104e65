#!/bin/sh
# Issue 2, userspace: when a CPU goes offline or online the kernel unloads the
# scheduler asking for a restart; scx_nimble must reload itself with the new
# topology and stay attached, under load.
. /tests/lib.sh

N=$(nr_cpus)
CPU=$((N - 1))
start_sched
stress-ng --cpu "$N" --timeout 40s >/dev/null 2>&1 &
STRESS=$!
sleep 2

# reloaded COUNT: the scheduler has logged COUNT attaches and is attached.
reloaded() {
	[ "$(grep -c 'scheduler attached' "$SCHED_ERR")" -ge "$1" ] && alive_and_attached
}

echo 0 >/sys/devices/system/cpu/cpu$CPU/online || fail "could not offline CPU $CPU"
wait_until 600 "no reload within 60 s of the offline" reloaded 2
grep -q "$((N - 1)) CPUs" "$SCHED_ERR" || fail "reload did not see $((N - 1)) CPUs"
log "reloaded with CPU $CPU offline"
echo 1 >/sys/devices/system/cpu/cpu$CPU/online || fail "could not online CPU $CPU"
wait_until 600 "no reload within 60 s of the online" reloaded 3
log "reloaded with CPU $CPU back online"
assert_attached "after hotplug"
kill $STRESS 2>/dev/null
wait $STRESS
stop_sched
assert_clean_dmesg
pass "restarted on CPU offline and online"
