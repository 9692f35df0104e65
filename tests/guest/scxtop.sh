#!/bin/sh
# scxtop (sched-ext/scx's observability tool) reads scx_nimble's stats
# socket: its MCP server, one-shot, answers resources/read of
# stats://scheduler/raw with what scx_nimble serves on
# /var/run/scx/root/stats (the same request "stats" the TUI makes).
. /tests/lib.sh

command -v scxtop >/dev/null || fail "scxtop is not in the guest (vm/nimble-vm setup --peers installs it)"
start_sched
cat >/tmp/mcp.in <<'JSON'
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"nimble-test","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"stats://scheduler/raw"}}
JSON
timeout 60 scxtop mcp </tmp/mcp.in >/tmp/mcp.out 2>/tmp/mcp.err || log "scxtop mcp exited $?: $(tail -n 3 /tmp/mcp.err)"
log "scxtop answered $(wc -c </tmp/mcp.out) bytes"
grep -q '"id":2' /tmp/mcp.out || fail "no answer to resources/read: $(head -c 600 /tmp/mcp.out) $(tail -n 3 /tmp/mcp.err)"
# The answer carries scx_nimble's own metrics (escaped JSON inside JSON).
for k in 'scx_nimble' 'numa_rule' 'swq_mode' 'llc_own' 'nr_cgroups'; do
	grep -q "$k" /tmp/mcp.out || fail "scxtop's stats lack $k: $(head -c 600 /tmp/mcp.out)"
done
stop_and_check
pass "scxtop reads scx_nimble's stats socket (stats://scheduler/raw: sched, numa_rule, swq_mode, counters)"
