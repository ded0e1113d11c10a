#!/usr/bin/env bash
# Workload W3, a crowd in one spot (../shared/WORKLOADS.md, docs/benchmarks.md): the
# kit's own binaries as compose runs them — bin/orchestrator starting the default map
# as a Docker container of IMAGE (one-CPU and 512 MiB limits, the defaults), bin/edge in
# front — with bin/mapbots joining every bot through the edge. A probe player joins
# first at a spawn point of the default map and pings every 250 ms; the N bots are
# saved within GATHER units of it (mapbots -spread -gather: all in one 3×3 area of
# interest) and join, then stand still (idle) or walk (move, W1's walk); N = 0 is the
# probe alone on the empty map (mode "empty"), the baseline. Every N and
# mode gets a fresh orchestrator, edge and map, under a deployment name of its own (its
# own map network and containers, removed afterwards: nothing is shared with a running
# kit). Writes one JSON per run and table.md into OUT and prints the table.
#
# Usage: scripts/bench-w3.sh          (make bench-w3 builds the binaries and image first)
# Env:   NS="0 250 500 1000 2000" MODES="idle move" WARMUP=15 WINDOW=60 (seconds)
#        GATHER=60 (units; 0: all over the map)  JOIN_RATE=50 (joins a second)
#        IMAGE=mapyard/map:<version>  OUT=bench-results/w3-<UTC time>
#        PIN=1: the map container on CPU 0 (the one core its limit grants it), the edge,
#        the orchestrator and the bots on CPU 1, so that the load generator does not
#        take the map's core (as W1 pins its server and bots)
set -euo pipefail
cd "$(dirname "$0")/.."
NS="${NS:-0 250 500 1000 2000}"
MODES="${MODES:-idle move}"
WARMUP="${WARMUP:-15}"
WINDOW="${WINDOW:-60}"
GATHER="${GATHER:-60}"
JOIN_RATE="${JOIN_RATE:-50}"
IMAGE="${IMAGE:-mapyard/map:$(git describe --tags --always --dirty 2>/dev/null || echo latest)}"
OUT="${OUT:-bench-results/w3-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
echo "$IMAGE" >"$OUT/image"
for bin in bin/orchestrator bin/edge bin/mapbots; do
	[ -x "$bin" ] || { echo "$bin missing: run make build" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "jq is required" >&2; exit 1; }
docker image inspect "$IMAGE" >/dev/null || { echo "image $IMAGE missing: run make images" >&2; exit 1; }

. scripts/bench/kit.sh
trap kit_stop EXIT

for N in $NS; do
	modes=$MODES
	if [ "$N" = 0 ]; then modes=empty; fi
	for MODE in $modes; do
		kit_start "bench-w3-$$-$N-$MODE"
		kit_map "$DEP-d"
		bots_cpus=()
		if [ "${PIN:-0}" = 1 ]; then
			docker update --cpuset-cpus 0 "$(kit_name "$DEP-d")" >/dev/null
			taskset -a -p -c 1 "$EDGE_PID" >/dev/null
			taskset -a -p -c 1 "$ORCH_PID" >/dev/null
			bots_cpus=(taskset -c 1)
		fi
		idle=()
		if [ "$MODE" = idle ]; then idle=(-idle); fi
		echo "W3 N=$N $MODE: map container pid $MAP_PID, edge pid $EDGE_PID" >&2
		# A run that fails (the map restarted under it, say) is logged and skipped.
		if ! MAP_CREDENTIAL="$MAP_CRED" MAP_ORCH_CREDENTIAL="$ORCH_CRED" "${bots_cpus[@]}" bin/mapbots -json \
			-join "http://127.0.0.1:$EP" -n "$N" -join-rate "$JOIN_RATE" "${idle[@]}" -warmup "${WARMUP}s" -window "${WINDOW}s" \
			-probe 250ms -spread "$CTL_URL" -gather "$GATHER" \
			-server-pid "$MAP_PID" -metrics "http://$MAP_CTL/metrics" -edge-pid "$EDGE_PID" \
			>"$OUT/run.json" 2>>"$OUT/mapbots.log"; then
			echo "W3 N=$N $MODE failed (see $OUT/mapbots.log); its row stays empty" >&2
			kit_stop
			continue
		fi
		jq --arg mode "$MODE" '.mode = $mode' "$OUT/run.json" >"$OUT/w3-n$N-$MODE.json"
		rm -f "$OUT/run.json"
		jq -c '{n, mode, cpu: .server.cpuPercent, kbPerConn: .server.kbPerConnection, tickP99: .server.tickP99Ms, rttP99: .probe.rttP99Ms, probeSnaps: .probe.snapshotsPerSec, view: .bots.entitiesInView, drops: (.bots.dropped + .server.droppedClients), foreign: .server.foreignCpuPercent}' "$OUT/w3-n$N-$MODE.json" >&2
		kit_stop
	done
done

scripts/bench/w3-table.sh "$OUT" | tee "$OUT/table.md"
