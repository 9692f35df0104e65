#!/bin/sh
# CPU hotplug: when CPUs go offline or online the kernel unloads the
# scheduler asking for a restart; scx_nimble must reload itself with the new
# topology and stay attached, under load. Two CPUs go offline together and
# come back together.
. /tests/lib.sh

N=$(nr_cpus)
A=$((N - 1)) B=$((N - 2))
start_sched
stress-ng --cpu "$N" --timeout 60s >/dev/null 2>&1 &
STRESS=$!
sleep 2

# running_on K: the latest (re)load saw K CPUs and the scheduler is attached.
running_on() {
	last=$(grep 'scx_nimble .*: [0-9]* CPUs' "$SCHED_ERR" | tail -n 1)
	case $last in *": $1 CPUs,"*) alive_and_attached ;; *) false ;; esac
}

echo 0 >/sys/devices/system/cpu/cpu$A/online || fail "could not offline CPU $A"
echo 0 >/sys/devices/system/cpu/cpu$B/online || fail "could not offline CPU $B"
wait_until 600 "not running on $((N - 2)) CPUs within 60 s of the offline" running_on $((N - 2))
log "reloaded with CPUs $B and $A offline ($(grep -c 'scheduler attached' "$SCHED_ERR") attaches)"
echo 1 >/sys/devices/system/cpu/cpu$A/online || fail "could not online CPU $A"
echo 1 >/sys/devices/system/cpu/cpu$B/online || fail "could not online CPU $B"
wait_until 600 "not running on $N CPUs within 60 s of the online" running_on "$N"
log "reloaded with CPUs $B and $A back online ($(grep -c 'scheduler attached' "$SCHED_ERR") attaches)"
assert_attached "after hotplug"
kill $STRESS 2>/dev/null
wait $STRESS
stop_and_check
pass "restarted on two CPUs going offline and online"
