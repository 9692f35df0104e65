#!/bin/sh
# Where schbench's wakeups wait, traced (docs/lab.md, stop 57). Runs in the
# VM guest, EEVDF then scx_nimble (extra flags in NARGS; another scheduler
# added to the guest in SCHED, e.g. SCHED=scx_lavd) in the same boot:
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
#      many switches that CPU made meanwhile;
#   4. for waits of 1 ms or more, the idle CPU-time of the other CPUs by
#      their place (the target's LLC, node, the far node) and whether they
#      were idle already when the wakeup was queued (a kick's job) or went
#      idle during the wait (their dispatch's), and how long the wakeup took
#      to be queued (sched_waking to sched_wakeup: a remote wakeup waits for
#      its target CPU to take it from its wake list);
#   5. the measured wakeups' two parts (to be queued, then to run) as
#      medians, by whether the waker's CPU shares the target's LLC (the
#      kernel queues a wakeup for another LLC on the target's wake list,
#      to be taken by an IPI);
#   6. what the 8 CPUs ran when each measured wakeup was queued, with its
#      wait to run, and the machine's CPU-time by what ran;
#   7. what the wakee's previous CPU ran when it was woken (idle, a worker
#      or message thread and for how long, a worker that came after the
#      wakee went to sleep), with the waits;
#   8. the wakeups that waited 1 ms or more after being queued: what their
#      CPU ran then, who queued them, where and after what they ran.
# The n2l4 layout (2 CPUs an LLC, 4 a node, 8 CPUs) is assumed. The CPU and
# time are matched by pattern: busybox awk's gsub() with a bracket class
# left the CPU at 0 (every event on CPU 0) before stop 58.
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
  { match($0, / [0-9]+\.[0-9]+: /); ts = substr($0, RSTART+1, RLENGTH-3) + 0; match($0, /\[[0-9]+\]/); c = substr($0, RSTART+1, RLENGTH-2) + 0; curtask = $1 }
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
  { match($0, / [0-9]+\.[0-9]+: /); ts = substr($0, RSTART+1, RLENGTH-3) + 0; match($0, /\[[0-9]+\]/); c = substr($0, RSTART+1, RLENGTH-2) + 0; curtask = $1;
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
  { match($0, / [0-9]+\.[0-9]+: /); ts = substr($0, RSTART+1, RLENGTH-3) + 0; match($0, /\[[0-9]+\]/); c = substr($0, RSTART+1, RLENGTH-2) + 0; curtask = $1 }
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
	echo "--- 4. idle CPU-time during long measured waits, by the idle CPU's place and whether it was idle at the wakeup"
  awk '
  function cum(j) { return ic[j] + (isince[j] >= 0 ? ts - isince[j] : 0) }
  BEGIN { for (j = 0; j < 8; j++) isince[j] = -1 }
  { match($0, / [0-9]+\.[0-9]+: /); ts = substr($0, RSTART+1, RLENGTH-3) + 0; match($0, /\[[0-9]+\]/); c = substr($0, RSTART+1, RLENGTH-2) + 0; curtask = $1 }
  /sched_waking: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      if (!(p in w0)) { w0[p] = ts; kind[p] = (curtask ~ /^schbench-/ && curtask !~ /worker/) ? "bymsg" : "other"; tg[p] = -1 } }
  /sched_wakeup: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      match($0, /target_cpu=[0-9]+/); t = substr($0, RSTART+11, RLENGTH-11) + 0;
      if ((p in w0) && tg[p] < 0) { tg[p] = t; wu[p] = ts; for (j = 0; j < 8; j++) { i0[p, j] = cum(j); was[p, j] = isince[j] >= 0 } } }
  /sched_switch:/ { match($0, /next_pid=[0-9]+/); s = substr($0, RSTART+9, RLENGTH-9);
      if (s == "0" && isince[c] < 0) isince[c] = ts;
      else if (s != "0" && isince[c] >= 0) { ic[c] += ts - isince[c]; isince[c] = -1 }
      if ((s in w0) && kind[s] == "bymsg" && tg[s] >= 0) { d = (ts - w0[s]) * 1e6; t = tg[s];
          if (d >= 1000) { nl++; q = (wu[s] - w0[s]) * 1e6; sq += q; if (q >= 500) nq++;
              for (j = 0; j < 8; j++) {
                  x = (cum(j) - i0[s, j]) * 1e6; if (x <= 0) continue;
                  pl = (j == t) ? "target" : (int(j / 2) == int(t / 2)) ? "llc" : (int(j / 4) == int(t / 4) ? "node" : "far");
                  k = pl "/" (was[s, j] ? "idle_at_wakeup" : "went_idle");
                  it[k] += x; if (x >= 500) ni[k]++ } } }
      if (s in w0) delete w0[s] }
  END { for (k in it) printf "  %-22s idle %6d us per long wait, >=0.5 ms on a CPU in %4.1f%% of them (%d long waits)\n", k, it[k]/nl, 100*ni[k]/nl, nl;
        if (nl) printf "  waking->wakeup (queued on the target) %6d us mean per long wait, >=0.5 ms in %4.1f%%\n", sq/nl, 100*nq/nl }' /tmp/tr | sort
	echo "--- 5. measured wakeups split: waking->wakeup (to be queued) and wakeup->run, by whether the waker shares the target's LLC"
  awk '
  function pct(a, n, q,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } return a[int((n - 1) * q) + 1] }
  { match($0, / [0-9]+\.[0-9]+: /); ts = substr($0, RSTART+1, RLENGTH-3) + 0; match($0, /\[[0-9]+\]/); c = substr($0, RSTART+1, RLENGTH-2) + 0; curtask = $1 }
  /sched_waking: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      match($0, /target_cpu=[0-9]+/); t = substr($0, RSTART+11, RLENGTH-11) + 0;
      if (!(p in w0) && curtask ~ /^schbench-/ && curtask !~ /worker/) { w0[p] = ts; sh[p] = (int(c / 2) == int(t / 2)) ? "samellc" : "otherllc" } }
  /sched_wakeup: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      if ((p in w0) && !(p in wu)) wu[p] = ts }
  /sched_switch:/ { match($0, /next_pid=[0-9]+/); s = substr($0, RSTART+9, RLENGTH-9);
      if ((s in w0) && (s in wu)) { k = sh[s]; n[k]++; Q[k, n[k]] = (wu[s] - w0[s]) * 1e6; R[k, n[k]] = (ts - wu[s]) * 1e6; T[k, n[k]] = (ts - w0[s]) * 1e6 }
      if (s in w0) { delete w0[s]; delete wu[s] } }
  END { for (k in n) { m = n[k]; for (i = 1; i <= m; i++) { q[i] = Q[k, i]; r[i] = R[k, i]; t[i] = T[k, i] }
          printf "  %-8s %4d  waking->wakeup p50 %6d p90 %6d us | wakeup->run p50 %6d p90 %6d us | total p50 %6d p90 %6d us\n", k, m, pct(q, m, 0.5), pct(q, m, 0.9), pct(r, m, 0.5), pct(r, m, 0.9), pct(t, m, 0.5), pct(t, m, 0.9);
          delete q; delete r; delete t } }' /tmp/tr | sort
	echo "--- 6. what the CPUs ran when a measured wakeup was queued (idle / worker / message thread / other), and its wait to run"
  awk '
  { match($0, / [0-9]+\.[0-9]+: /); ts = substr($0, RSTART+1, RLENGTH-3) + 0; match($0, /\[[0-9]+\]/); c = substr($0, RSTART+1, RLENGTH-2) + 0; curtask = $1;
    if (last) { for (j = 0; j < 8; j++) if (j in st) busy[st[j]] += ts - last } last = ts; if (!t0) t0 = ts }
  /sched_waking: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      if (!(p in w0) && curtask ~ /^schbench-/ && curtask !~ /worker/) w0[p] = ts }
  /sched_wakeup: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      if ((p in w0) && !(p in wu)) { wu[p] = ts; ni = nw = 0; for (j = 0; j < 8; j++) { if (!(j in st)) continue; if (st[j] == "idle") ni++; else if (st[j] == "worker") nw++ } snap[p] = ni " idle " nw " workers" } }
  /sched_switch:/ { match($0, /next_pid=[0-9]+/); s = substr($0, RSTART+9, RLENGTH-9);
      match($0, /next_comm=[^ ]+/); nc = substr($0, RSTART+10, RLENGTH-10);
      st[c] = (s == "0") ? "idle" : (nc ~ /schbench-worker/ ? "worker" : (nc ~ /^schbench/ ? "msg" : "other"));
      if ((s in w0) && (s in wu)) { d = (ts - wu[s]) * 1e6; k = snap[s]; n[k]++; tot++; if (d >= 1000) nl[k]++; sd[k] += d }
      if (s in w0) { delete w0[s]; delete wu[s] } }
  END { for (k in n) printf "  at wakeup %-20s %5.1f%% of measured, wait to run mean %6d us, >=1 ms in %4.1f%%\n", k, 100*n[k]/tot, sd[k]/n[k], 100*nl[k]/n[k];
        T = last - t0; for (k in busy) printf "  CPU-time %-8s %5.1f%%\n", k, 100*busy[k]/(8*T) }' /tmp/tr | sort
	echo "--- 7. measured wakeups by what their previous CPU ran at the waking (and since when), and their wait"
  awk '
  { match($0, / [0-9]+\.[0-9]+: /); ts = substr($0, RSTART+1, RLENGTH-3) + 0; match($0, /\[[0-9]+\]/); c = substr($0, RSTART+1, RLENGTH-2) + 0; curtask = $1 }
  /sched_waking: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      match($0, /target_cpu=[0-9]+/); t = substr($0, RSTART+11, RLENGTH-11) + 0;
      if (!(p in w0) && curtask ~ /^schbench-/ && curtask !~ /worker/) { w0[p] = ts;
          x = (t in st) ? st[t] : "unknown";
          if (x == "worker" || x == "msg") { a = (ts - since[t]) * 1e6; x = x (a < 1000 ? "<1ms" : (a < 5000 ? "<5ms" : ">=5ms")) }
          if (x ~ /^worker/ && (t in slept) && since[t] > slept[p]) x = x ",came-after-wakee-slept"
          k0[p] = x } }
  /sched_switch:/ { match($0, /next_pid=[0-9]+/); s = substr($0, RSTART+9, RLENGTH-9);
      match($0, /next_comm=[^ ]+/); nc = substr($0, RSTART+10, RLENGTH-10);
      match($0, /prev_pid=[0-9]+/); pp = substr($0, RSTART+9, RLENGTH-9);
      match($0, /prev_state=[A-Z+]+/); ps = substr($0, RSTART+11, RLENGTH-11);
      if (ps !~ /^R/) slept[pp] = ts;
      st[c] = (s == "0") ? "idle" : (nc ~ /schbench-worker/ ? "worker" : (nc ~ /^schbench/ ? "msg" : "other")); since[c] = ts;
      if (s in w0) { d = (ts - w0[s]) * 1e6; k = k0[s]; n[k]++; tot++; sd[k] += d; if (d >= 1000) nl[k]++; delete w0[s] } }
  END { for (k in n) printf "  prev CPU ran %-40s %5.1f%%, wait mean %6d us, >=1 ms in %4.1f%%\n", k, 100*n[k]/tot, sd[k]/n[k], 100*nl[k]/n[k] }' /tmp/tr | sort
	echo "--- 8. measured wakeups queued 1 ms or more before they ran: what their CPU ran when queued, where and after what they ran"
  awk '
  { match($0, / [0-9]+\.[0-9]+: /); ts = substr($0, RSTART+1, RLENGTH-3) + 0; match($0, /\[[0-9]+\]/); c = substr($0, RSTART+1, RLENGTH-2) + 0; curtask = $1 }
  /sched_waking: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      if (!(p in w0) && curtask ~ /^schbench-/ && curtask !~ /worker/) w0[p] = ts }
  /sched_wakeup: comm=schbench-worker/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART+4, RLENGTH-4);
      match($0, /target_cpu=[0-9]+/); t = substr($0, RSTART+11, RLENGTH-11) + 0;
      if ((p in w0) && !(p in wu)) { wu[p] = ts; tg[p] = t; x = (t in st) ? st[t] : "unknown";
          if (x != "idle" && x != "unknown") x = x "(" ((ts - since[t]) * 1e6 < 5000 ? "<5ms" : ">=5ms") ")";
          k0[p] = "on " x (c == t ? ",queued-by-itself" : ",queued-by-cpu" c); nx[p] = "" } }
  /sched_switch:/ { match($0, /next_pid=[0-9]+/); s = substr($0, RSTART+9, RLENGTH-9);
      match($0, /next_comm=[^ ]+/); nc = substr($0, RSTART+10, RLENGTH-10);
      match($0, /prev_pid=[0-9]+/); pp = substr($0, RSTART+9, RLENGTH-9);
      match($0, /prev_state=[A-Z+]+/); ps = substr($0, RSTART+11, RLENGTH-11);
      if ((s in w0) && (s in wu)) { d = (ts - wu[s]) * 1e6; tot++;
          if (d >= 1000) { how = (pp == "0") ? "fromidle" : (ps ~ /^R/ ? "preempt" : "aftersleep");
              q = k0[s]; sub(/queued-by-cpu[0-9]+/, "queued-by-other", q);
              k = q " -> " (c == tg[s] ? "ran-there" : (int(c / 2) == int(tg[s] / 2) ? "ran-llc" : (int(c / 4) == int(tg[s] / 4) ? "ran-node" : "ran-far"))) "/" how " (its CPU ran " (nx[s] == "" ? "no other" : nx[s]) " first)";
              n[k]++; sd[k] += d } }
      st[c] = (s == "0") ? "idle" : (nc ~ /schbench-worker/ ? "worker" : (nc ~ /^schbench/ ? "msg" : "other")); since[c] = ts;
      if (s in w0) { delete w0[s]; delete wu[s] }
      for (q in wu) if (tg[q] == c && nx[q] == "" && q != s) nx[q] = st[c] }
  END { for (k in n) printf "  %-62s %4d (%4.1f%% of measured) mean %6d us\n", k, n[k], 100*n[k]/tot, sd[k]/n[k] }' /tmp/tr | sort -k2 -t'(' -rn
}
for r in $(seq "${ROUNDS:-1}"); do
	go eevdf
	# shellcheck disable=SC2086
	${SCHED:-scx_nimble} $NARGS >"$SCHED_OUT" 2>"$SCHED_ERR" &
	SCHED_PID=$!
	wait_until 600 "did not attach" enabled_any
	go "${SCHED:-nimble}"
	kill -INT $SCHED_PID
	wait $SCHED_PID
done
