#!/usr/bin/env bash
# Workload W2, the WebSocket proxy hop (../shared/WORKLOADS.md, docs/benchmarks.md):
# the wsproxy peer harness (its echo/broadcast server on 127.0.0.1:18081, nginx, its
# load generator, CPU sampler and report) with bin/edge added as one more target, in
# one interleaved run. The edge runs with its defaults but for a fixed route to the echo
# server (EDGE_STATIC_ROUTES, for benchmarks only) and no per-address WebSocket limit
# (EDGE_WS_RATE_PER_MIN=0: the load generator opens 100 and 500 connections from one
# address). The harness is copied to a writable WORK directory; its results stay there
# (results/latest/table.md) and the table is printed.
#
# Usage: scripts/bench-w2.sh          (make bench-w2 builds the binaries first)
# Env:   PEER=<the wsproxy harness> (default ../shared/peers/wsproxy next to the checkout)
#        WORK=/tmp/peers/wsproxy  EDGE_PORT=18085  EDGE_METRICS_PORT=18086
#        and the harness's own knobs: REPS=3 DUR=10 TESTS=... TARGETS="direct nginx"
#        IDLE_WAIT RETRIES ... (see its run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
PEER="${PEER:-$root/../shared/peers/wsproxy}"
WORK="${WORK:-/tmp/peers/wsproxy}"
EDGE_PORT="${EDGE_PORT:-18085}"
EDGE_METRICS_PORT="${EDGE_METRICS_PORT:-18086}"
export TARGETS="${TARGETS:-direct nginx}"
[ -x bin/edge ] || { echo "bin/edge missing: run make build" >&2; exit 1; }
if [ ! -x "$WORK/run.sh" ]; then
	[ -x "$PEER/run.sh" ] || { echo "no wsproxy harness at $PEER: set PEER to its directory" >&2; exit 1; }
	mkdir -p "$(dirname "$WORK")"
	cp -r "$PEER" "$WORK"
fi

EDGE_STATIC_ROUTES=1=18081 EDGE_WS_RATE_PER_MIN=0 \
	EDGE_PUBLIC_ADDR=127.0.0.1:$EDGE_PORT EDGE_METRICS_ADDR=127.0.0.1:$EDGE_METRICS_PORT \
	EDGE_CREDENTIAL=bench-only-unused-credential bin/edge >"$WORK/edge.log" 2>&1 &
edge=$!
trap 'kill $edge 2>/dev/null || true; wait $edge 2>/dev/null || true' EXIT
for _ in $(seq 100); do
	curl -fsS "http://127.0.0.1:$EDGE_METRICS_PORT/healthz" >/dev/null 2>&1 && break
	kill -0 $edge 2>/dev/null || { cat "$WORK/edge.log" >&2; exit 1; }
	sleep 0.1
done
echo "edge (pid $edge) on 127.0.0.1:$EDGE_PORT, routing instance 1 to the echo server"
cd "$WORK"
EXTRA_NAME=edge EXTRA_URL="ws://127.0.0.1:$EDGE_PORT/maps/1/ws" EXTRA_PID=$edge ./run.sh
