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

# wait_reload COUNT: the scheduler logged COUNT attaches and is attached again.
wait_reload() {
	i=0
	while [ "$(grep -c 'scheduler attached' "$SCHED_ERR")" -lt "$1" ] || ! attached; do
		kill -0 "$SCHED_PID" 2>/dev/null || fail "scx_nimble died on hotplug"
		i=$((i + 1))
		[ $i -gt 600 ] && fail "no reload within 60 s (attaches: $(grep -c 'scheduler attached' "$SCHED_ERR"))"
		sleep 0.1
	done
}

echo 0 >/sys/devices/system/cpu/cpu$CPU/online || fail "could not offline CPU $CPU"
wait_reload 2
grep -q "$((N - 1)) CPUs" "$SCHED_ERR" || fail "reload did not see $((N - 1)) CPUs"
log "reloaded with CPU $CPU offline"
echo 1 >/sys/devices/system/cpu/cpu$CPU/online || fail "could not online CPU $CPU"
wait_reload 3
log "reloaded with CPU $CPU back online"
assert_attached "after hotplug"
kill $STRESS 2>/dev/null
wait $STRESS
stop_sched
assert_clean_dmesg
pass "restarted on CPU offline and online"
