#!/bin/sh
# CPU hotplug: when CPUs go offline or online the kernel unloads the
# scheduler asking for a restart; scx_nimble must reload itself with the new
# topology and stay attached, under load. Two CPUs go offline together and
# come back together. Controls set by `tune` before survive the reloads.
# The full tier also onlines a CPU while the scheduler loads (about 40 s).
. /tests/lib.sh

N=$(nr_cpus)
A=$((N - 1)) B=$((N - 2))
start_sched
# Controls changed by tune must survive the reloads hotplug causes.
tune --numa-rule v3 --swq sis-fail
stress-ng --cpu "$N" --timeout 60s >/dev/null 2>&1 &
STRESS=$!
sleep 2

# busy_everywhere WHAT: N CPU loops keep every CPU at least 50 % busy (by
# /proc/stat) unless the reloaded scheduler left a CPU out (our own loops:
# stress-ng's 60 s may be over by then).
busy_everywhere() {
	LOOPS=
	for i in $(seq "$N"); do spin; LOOPS="$LOOPS $SPAWNED"; done
	sleep 1
	cpu_busy_begin
	sleep 2
	cpu_busy_check 50 "$1"
	kill $LOOPS
}

# running_on K: the latest (re)load saw K CPUs and the scheduler is attached.
running_on() {
	last=$(grep 'scx_nimble .*: [0-9]* CPUs' "$SCHED_ERR" | tail -n 1)
	case $last in *": $1 CPUs,"*) alive_and_attached ;; *) false ;; esac
}

echo 0 >/sys/devices/system/cpu/cpu$A/online || fail "could not offline CPU $A"
echo 0 >/sys/devices/system/cpu/cpu$B/online || fail "could not offline CPU $B"
wait_until 600 "not running on $((N - 2)) CPUs within 60 s of the offline" running_on $((N - 2))
log "reloaded with CPUs $B and $A offline ($(grep -c 'scheduler attached' "$SCHED_ERR") attaches; $(last_load_times))"
echo 1 >/sys/devices/system/cpu/cpu$A/online || fail "could not online CPU $A"
echo 1 >/sys/devices/system/cpu/cpu$B/online || fail "could not online CPU $B"
wait_until 600 "not running on $N CPUs within 60 s of the online" running_on "$N"
log "reloaded with CPUs $B and $A back online ($(grep -c 'scheduler attached' "$SCHED_ERR") attaches; $(last_load_times))"
assert_attached "after hotplug"
# From outside: the CPUs that came back run tasks again.
busy_everywhere "after CPUs $B and $A came back"
last=$(grep 'scheduler attached' "$SCHED_ERR" | tail -n 1)
case $last in *"numa_rule=v3 swq=sis-fail"*) ;; *) fail "tune lost over the reloads: $last" ;; esac
kill $STRESS 2>/dev/null
wait $STRESS
stop_and_check
if [ "$TIER" != full ]; then
	pass "restarted on two CPUs going offline and online (the CPU onlined during the load: full tier)"
	exit 0
fi

# A CPU that comes online while the scheduler loads (reading the topology
# and loading take seconds under TCG): it must end up scheduling on every
# CPU, by a restart if the load read the topology before the CPU came.
echo 0 >/sys/devices/system/cpu/cpu$A/online || fail "could not offline CPU $A"
scx_nimble >"$SCHED_OUT" 2>"$SCHED_ERR" &
SCHED_PID=$!
sleep 1
echo 1 >/sys/devices/system/cpu/cpu$A/online || fail "could not online CPU $A"
wait_until 600 "not running on $N CPUs after CPU $A came online during the load" running_on "$N"
log "CPU $A onlined during the load: $(grep -c 'scheduler attached' "$SCHED_ERR") attach(es), running on $N CPUs"
busy_everywhere "with CPU $A onlined during the load"
stop_and_check
pass "restarted on two CPUs going offline and online, and on a CPU onlined during the load"
