#!/usr/bin/env bash
# Workload W2, the WebSocket proxy hop (../shared/WORKLOADS.md, docs/benchmarks.md):
# bin/edge with a fixed route to the echo server of the wsproxy peer harness, added as
# an extra target to that harness's interleaved run beside the direct connection,
# Go's httputil.ReverseProxy and Debian's nginx (worker_processes 1). Copies the
# harness's table, raw samples and environment into OUT and prints the table.
#
# Usage: scripts/bench-w2.sh          (make bench-w2 builds the binaries first)
# Env:   PEER=/tmp/peers/wsproxy (a writable copy of ../shared/peers/wsproxy, made
#        on first use: the harness builds its tools and writes its results there)
#        REPS=3 DUR=10 BCAST_DUR=15 TARGETS="direct goproxy nginx" IDLE_WAIT=15 RETRIES=1
#        (the harness's quiet gate: how long to wait for an idle machine before each
#        test, and how often to retry a disturbed one), EDGE_ENGINE (epoll or
#        goroutine; the edge's default, epoll, when empty),
#        OUT=bench-results/w2-<UTC time>
# The harness and the edge listen on fixed loopback ports 18081-18086; nothing else
# may listen there.
set -euo pipefail
cd "$(dirname "$0")/.."
PEER="${PEER:-/tmp/peers/wsproxy}"
OUT="${OUT:-bench-results/w2-$(date -u +%Y%m%dT%H%M%SZ)}"
[ -x bin/edge ] || { echo "bin/edge missing: run make build" >&2; exit 1; }
# The harness builds its tools and writes its results in its own directory: a writable
# copy of the shared one beside the checkout is made on first use.
if [ ! -x "$PEER/run.sh" ] && [ -x ../shared/peers/wsproxy/run.sh ]; then
	mkdir -p "$(dirname "$PEER")"
	cp -r ../shared/peers/wsproxy "$PEER"
fi
[ -x "$PEER/run.sh" ] || { echo "$PEER/run.sh missing: cp -r ../shared/peers/wsproxy $(dirname "$PEER")/" >&2; exit 1; }
command -v nginx >/dev/null || { echo "nginx is required (Debian: apt-get install nginx)" >&2; exit 1; }
command -v jq >/dev/null || { echo "jq is required" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

EDGE_PID=""
cleanup() {
	if [ -n "$EDGE_PID" ]; then kill "$EDGE_PID" 2>/dev/null || true; wait "$EDGE_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

# The edge routes instance "1" to the echo server; its per-address limits are off, or
# they would refuse the load generator's 100 and 500 connections from one address.
EDGE_STATIC_ROUTES=1=18081 EDGE_PUBLIC_ADDR=127.0.0.1:18085 EDGE_METRICS_ADDR=127.0.0.1:18086 \
	EDGE_CREDENTIAL=bench-only-unused-credential EDGE_WS_RATE_PER_MIN=0 EDGE_JOIN_RATE_PER_MIN=0 \
	EDGE_LOG_LEVEL=warn ${EDGE_ENGINE:+EDGE_ENGINE=$EDGE_ENGINE} bin/edge >>"$OUT/edge.log" 2>&1 &
EDGE_PID=$!
scripts/wait-ready.sh http://127.0.0.1:18085/healthz 30 >/dev/null
echo "edge pid $EDGE_PID (engine ${EDGE_ENGINE:-default}), commit $(git describe --tags --always --dirty)" | tee "$OUT/edge.txt"

(cd "$PEER" && REPS="${REPS:-3}" DUR="${DUR:-10}" BCAST_DUR="${BCAST_DUR:-15}" IDLE_WAIT="${IDLE_WAIT:-15}" \
	RETRIES="${RETRIES:-1}" TARGETS="${TARGETS:-direct goproxy nginx}" NGINX_WORKERS=1 \
	EXTRA_NAME=edge EXTRA_URL=ws://127.0.0.1:18085/maps/1/ws EXTRA_PID="$EDGE_PID" ./run.sh) >"$OUT/run.log" 2>&1 ||
	{ tail -n 20 "$OUT/run.log" >&2; exit 1; }
run=$(readlink -f "$PEER/results/latest")
cp "$run/table.md" "$run/raw.jsonl" "$run/attempts.jsonl" "$run/env.txt" "$OUT/"
cat "$OUT/table.md"
