#!/usr/bin/env bash
# An edge replacement under load (docs/benchmarks.md, "Edge replacement"): the kit's own
# binaries as compose runs them (scripts/bench/kit.sh), N bots joined through the edge
# that resume at once when their connection drops (mapbots -resume, as the page does),
# and newcomers joining at JOIN_LOOP a second on new connections all through the
# window. AT seconds into the window a second edge starts, takes the first one's port
# over through the handover socket, and the first closes its players over
# EDGE_HANDOVER_SPREAD_MS and exits. The targets: no newcomer refused, every bot back
# (resumed) within 1 s of its drop, none dropped for good. Writes run.json and the
# logs into OUT and prints the figures.
#
# Usage: scripts/bench-handover.sh      (make bench-handover builds the binaries and image first)
# Env:   N=1000 JOIN_RATE=200 (bots joining a second before the window) JOIN_LOOP=20
#        WARMUP=5 WINDOW=20 AT=5 (seconds) MODE=idle|move
#        IMAGE=mapyard/map:<version>  OUT=bench-results/handover-<UTC time>
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-1000}"
JOIN_RATE="${JOIN_RATE:-200}"
JOIN_LOOP="${JOIN_LOOP:-20}"
WARMUP="${WARMUP:-5}"
WINDOW="${WINDOW:-20}"
AT="${AT:-5}"
MODE="${MODE:-idle}"
IMAGE="${IMAGE:-mapyard/map:$(git describe --tags --always --dirty 2>/dev/null || echo latest)}"
OUT="${OUT:-bench-results/handover-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
for bin in bin/orchestrator bin/edge bin/mapbots; do
	[ -x "$bin" ] || { echo "$bin missing: run make build" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "jq is required" >&2; exit 1; }
docker image inspect "$IMAGE" >/dev/null || { echo "image $IMAGE missing: run make images" >&2; exit 1; }

. scripts/bench/kit.sh
BOTS_PID=""
cleanup() {
	if [ -n "$BOTS_PID" ]; then kill "$BOTS_PID" 2>/dev/null || true; fi
	kit_stop
}
trap cleanup EXIT

kit_start "bench-handover-$$"
idle=()
if [ "$MODE" = idle ]; then idle=(-idle); fi
bin/mapbots -json -join "http://127.0.0.1:$EP" -n "$N" -join-rate "$JOIN_RATE" "${idle[@]}" -resume -join-loop "$JOIN_LOOP" \
	-warmup "${WARMUP}s" -window "${WINDOW}s" >"$OUT/run.json" 2>"$OUT/mapbots.log" &
BOTS_PID=$!
# The window begins when mapbots says so.
until grep -q "mapbots: measuring" "$OUT/mapbots.log"; do
	kill -0 "$BOTS_PID" 2>/dev/null || { echo "mapbots ended before its window:" >&2; cat "$OUT/mapbots.log" >&2; exit 1; }
	sleep 0.1
done
sleep "$AT"
old=$EDGE_PID
start=$(date +%s%N)
kit_replace_edge
echo "edge $old replaced by $EDGE_PID: the old one exited $(( ($(date +%s%N) - start) / 1000000 )) ms after the new one started" | tee "$OUT/replace.txt" >&2
wait "$BOTS_PID"
BOTS_PID=""
jq -r --arg n "$N" '"bots \(.bots.bots) of \($n) (dropped for good \(.bots.dropped)); resumed \(.bots.resumes): p50 \(.bots.resumeP50Ms) ms, p99 \(.bots.resumeP99Ms) ms, max \(.bots.resumeMaxMs) ms; newcomers \(.joinLoop.joins) joined, \(.joinLoop.refused) refused, \(.joinLoop.failed) failed\(if .joinLoop.firstError then " (first: " + .joinLoop.firstError + ")" else "" end)"' "$OUT/run.json" | tee "$OUT/summary.txt"
