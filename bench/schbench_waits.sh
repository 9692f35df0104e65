#!/bin/sh
# Where schbench's wakeups wait, traced (docs/lab.md, stop 57). Runs in the
# VM guest, EEVDF then scx_nimble (extra flags in NARGS) in the same boot:
#   vm/nimble-vm run --add bench/schbench_waits.sh:/bin/sbw \
#     --add target/release/build/scx_nimble-*/out/schbench:/bin/schbench \
#     --topo n2l4 -- "W=4 sh /bin/sbw"
# W workers per message thread (2 message threads); ROUNDS pairs of runs.
# From ftrace's sched_waking, sched_wakeup and sched_switch, for each run:
#   1. workers' run intervals by how they ended (R: switched out runnable,
#      S: slept) and their waits by waker (bymsg: the message thread, the
#      wakeups schbench measures);
#   2. the measured wakeups by wait (< or >= 1 ms), where they ran (the
#      CPU they woke on, its node, the far node) and what they replaced
#      (idle, a preempted task, a task that slept), with the idle CPU-time
#      elsewhere during the wait;
#   3. the same by whether they ran on the CPU they were queued on and how
#      many switches that CPU made meanwhile.
# The n2l4 layout (2 CPUs an LLC, 4 a node, 8 CPUs) is assumed.
. /tests/lib.sh
enabled_any() { kill -0 "$SCHED_PID" || fail "exited"; [ "$(sched_state)" = enabled ]; }
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T
W=${W:-4}
go() {
	echo >$T/trace
	echo 30000 >$T/buffer_size_kb
	for e in sched_waking sched_wakeup sched_switch; do echo 1 >$T/events/sched/$e/enable; done
	echo 1 >$T/tracing_on
	schbench -m 2 -t "$W" -r 5 >/tmp/sb.out 2>&1
	echo 0 >$T/tracing_on
	echo "=== $1: $(grep -A1 -i 'wakeup latencies' /tmp/sb.out | tail -1) $(grep -A2 -i 'wakeup latencies' /tmp/sb.out | tail -1)"
	grep -v "^#" $T/trace >/tmp/tr
	echo "--- 1. run intervals and waits by waker"
  awk '
  { ts = $4; sub(":", "", ts); c = $2; gsub(/[\[\]]/, "", c); c += 0; curtask = $1 }
  /sched_waking: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      if (!(p in w0)) { w0[p] = ts; kind[p] = (curtask ~ /^schbench-/ && curtask !~ /worker/) ? "bymsg" : (curtask ~ /worker/ ? "byworker" : "other") } }
  /sched_switch:/ { match($0, /next_pid=[0-9]+/); s = substr($0, RSTART+9, RLENGTH-9);
      match($0, /prev_pid=[0-9]+/); pp = substr($0, RSTART+9, RLENGTH-9);
      match($0, /prev_state=[A-Z+]+/); ps = substr($0, RSTART+11, RLENGTH-11);
      match($0, /next_comm=[^ ]+/); nc = substr($0, RSTART+10, RLENGTH-10);
      match($0, /prev_comm=[^ ]+/); pc = substr($0, RSTART+10, RLENGTH-10);
      # run interval of the task leaving
      if (pc ~ /schbench-worker/ && (pp in r0)) { d = (ts - r0[pp]) * 1e6; e = (ps ~ /^R/) ? "R" : "S";
          b = d < 100 ? "a<100us" : (d < 1000 ? "b<1ms" : (d < 3000 ? "c<3ms" : (d < 6000 ? "d<6ms" : "e>=6ms")));
          rc[e "/" b]++; rs[e "/" b] += d; rt += d; rn++ }
      delete r0[pp];
      if (nc ~ /schbench-worker/) r0[s] = ts;
      if (s in w0) { d = (ts - w0[s]) * 1e6; k = kind[s];
          wn[k]++; ws[k] += d; if (d >= 1000) wl[k]++;
          delete w0[s] } }
  END { for (k in rc) printf "  run %-12s %5d mean %6d us (%4.1f%% of worker run time)\n", k, rc[k], rs[k]/rc[k], 100*rs[k]/rt;
        for (k in wn) printf "  wait %-10s %5d mean %6d us, >=1ms %4.1f%%\n", k, wn[k], ws[k]/wn[k], 100*wl[k]/wn[k] }' /tmp/tr | sort
	echo "--- 2. measured wakeups: wait, where, after what; idle CPU-time meanwhile"
  awk '
  BEGIN { for (i = 0; i < 8; i++) idle[i] = 0 }
  { ts = $4; sub(":", "", ts); ts += 0; c = $2; gsub(/[\[\]]/, "", c); c += 0; curtask = $1;
    if (last) I += nid * (ts - last); last = ts }
  /sched_waking: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      match($0, /target_cpu=[0-9]+/); t = substr($0, RSTART+11, RLENGTH-11) + 0;
      if (!(p in w0)) { w0[p] = ts; i0[p] = I; wt[p] = t; kind[p] = (curtask ~ /^schbench-/ && curtask !~ /worker/) ? "bymsg" : "other" } }
  /sched_switch:/ { match($0, /next_pid=[0-9]+/); s = substr($0, RSTART+9, RLENGTH-9);
      match($0, /prev_pid=[0-9]+/); pp = substr($0, RSTART+9, RLENGTH-9);
      match($0, /prev_state=[A-Z+]+/); ps = substr($0, RSTART+11, RLENGTH-11);
      if (s == "0" && !idle[c]) { idle[c] = 1; nid++ } else if (s != "0" && idle[c]) { idle[c] = 0; nid-- }
      if ((s in w0) && kind[s] == "bymsg") { d = (ts - w0[s]) * 1e6; iw = (I - i0[s]) * 1e6;
          how = (pp == "0") ? "fromidle" : (ps ~ /^R/ ? "preempt" : "aftersleep");
          where = (c == wt[s]) ? "target" : (int(c / 4) == int(wt[s] / 4) ? "node" : "far");
          k = (d < 1000 ? "lt1ms" : "ge1ms") "/" where "/" how;
          n[k]++; sd[k] += d; si[k] += iw; if (iw >= 500) hi[k]++; tot++ }
      if (s in w0) delete w0[s] }
  END { for (k in n) printf "  %-28s %4d (%4.1f%%) wait %6d us, idle CPU-time during it %6d us, >=0.5ms idle in %4.1f%%\n", k, n[k], 100*n[k]/tot, sd[k]/n[k], si[k]/n[k], 100*hi[k]/n[k] }' /tmp/tr | sort
	echo "--- 3. measured wakeups: on the CPU they were queued on or not"
  awk '
  { ts = $4; sub(":", "", ts); ts += 0; c = $2; gsub(/[\[\]]/, "", c); c += 0; curtask = $1 }
  /sched_waking: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      if (!(p in w0)) { w0[p] = ts; kind[p] = (curtask ~ /^schbench-/ && curtask !~ /worker/) ? "bymsg" : "other"; tg[p] = -1 } }
  /sched_wakeup: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      match($0, /target_cpu=[0-9]+/); t = substr($0, RSTART+11, RLENGTH-11) + 0;
      if (p in w0) { tg[p] = t; sw0[p] = nsw[t] } }
  /sched_switch:/ { match($0, /next_pid=[0-9]+/); s = substr($0, RSTART+9, RLENGTH-9);
      match($0, /next_comm=[^ ]+/); nc = substr($0, RSTART+10, RLENGTH-10);
      nsw[c]++; if (s == "0") nidle[c]++;
      if ((s in w0) && kind[s] == "bymsg" && tg[s] >= 0) { d = (ts - w0[s]) * 1e6; t = tg[s];
          k = (d < 1000 ? "lt1ms" : "ge1ms") "/" (c == t ? "ran_on_target" : "ran_elsewhere");
          n[k]++; sd[k] += d; sws[k] += nsw[t] - sw0[s] - (c == t ? 1 : 0); tot++ }
      if (s in w0) delete w0[s] }
  END { for (k in n) printf "  %-24s %4d (%4.1f%%) wait %6d us, other switches on the target CPU during it %.2f\n", k, n[k], 100*n[k]/tot, sd[k]/n[k], sws[k]/n[k] }' /tmp/tr | sort
}
for r in $(seq "${ROUNDS:-1}"); do
	go eevdf
	# shellcheck disable=SC2086
	scx_nimble $NARGS >"$SCHED_OUT" 2>"$SCHED_ERR" &
	SCHED_PID=$!
	wait_until 600 "did not attach" enabled_any
	go nimble
	kill -INT $SCHED_PID
	wait $SCHED_PID
done
