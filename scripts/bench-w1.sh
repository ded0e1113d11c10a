#!/usr/bin/env bash
# Workload W1 (../shared/WORKLOADS.md, docs/benchmarks.md): one map container (the map
# image, host network, pinned to CPU 0) against the fake orchestrator, driven by
# bin/mapbots in a separate process pinned to CPU 1, at every N of NS; the Colyseus peer
# runs right after each N on the same machine, pinned the same way. The bots start at
# uniformly random positions, as the peer's do (mapbots -spread saves them there before
# they connect; a new character would start at a spawn point). Then an idle player
# alone on the map, and the idle container's RSS. Writes one JSON per run and table.md
# into OUT and prints the table.
#
# PATHS says which paths each N runs, in order, before the peer:
#   direct  the map alone: the fake orchestrator, a map container run by this script,
#           the bots dialling the map's game port (the idle-player figures run after
#           the loop with this path only);
#   edge    the whole path: the kit as compose runs it (scripts/bench/kit.sh:
#           bin/orchestrator, bin/edge), W1's map created through the admin API as a
#           container with the default limits, and the bots saved on it (mapbots -into)
#           so that they join and play through the edge; the edge's CPU is measured
#           with the map's. With PIN=1 the edge and the map container share CPU 0, as
#           the peer's one process has it, and the bots run on CPU 1.
#
# Usage: scripts/bench-w1.sh          (make bench-w1 builds the binaries and image first)
# Env:   NS="100 250 500 1000" PATHS=direct ("direct", "edge" or "direct edge")
#        WARMUP=15 WINDOW=60 (seconds) PIN=1
#        IMAGE=mapyard/map:<version>  PEER=/tmp/peers/colyseus (empty: skip the peer)
#        BOTS_ARGS="-each-input" (more mapbots flags: this one sends one message an input,
#        as clients did before inputs were batched per snapshot)
#        IDLE_SEED=3 (where the idle player stands: mapbots -seed; 3 puts it among 22 entities)
#        OUT=bench-results/w1-<UTC time>
set -euo pipefail
cd "$(dirname "$0")/.."
NS="${NS:-100 250 500 1000}"
PATHS="${PATHS:-direct}"
WARMUP="${WARMUP:-15}"
WINDOW="${WINDOW:-60}"
PIN="${PIN:-1}"
IMAGE="${IMAGE:-mapyard/map:$(git describe --tags --always --dirty 2>/dev/null || echo latest)}"
PEER="${PEER-/tmp/peers/colyseus}"
IDLE_SEED="${IDLE_SEED:-3}"
OUT="${OUT:-bench-results/w1-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
echo "$IMAGE" >"$OUT/image"
for bin in bin/fakeorch bin/mapbots bin/orchestrator bin/edge; do
	[ -x "$bin" ] || { echo "$bin missing: run make build" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "jq is required" >&2; exit 1; }

. scripts/bench/kit.sh # free_port and the kit of the edge path
SECRET="bench-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PUB=$(free_port) CTL=$(free_port) GP=$(free_port) CP=$(free_port)
CONTAINER="mapyard-bench-w1-$$"
SERVER_CPUS=() BOT_CPUS=()
if [ "$PIN" = 1 ]; then SERVER_CPUS=(--cpuset-cpus 0); BOT_CPUS=(taskset -c 1); fi

FAKE_PID=""
stop_fake() {
	if [ -n "$FAKE_PID" ]; then kill "$FAKE_PID" 2>/dev/null || true; wait "$FAKE_PID" 2>/dev/null || true; fi
	FAKE_PID=""
}
cleanup() {
	docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
	stop_fake
	kit_stop
}
trap cleanup EXIT

# start_fake runs the fake orchestrator handing map config $1 (instance $2) to the map.
start_fake() {
	stop_fake
	ORCH_PUBLIC_ADDR="127.0.0.1:$PUB" ORCH_CONTROL_ADDR="127.0.0.1:$CTL" ORCH_INTERNAL_RPC_SECRET="$SECRET" \
		ORCH_DEFAULT_INSTANCE_ID="$2" ORCH_FAKE_MAP_CONFIG="$1" ORCH_LOG_LEVEL=warn \
		bin/fakeorch >>"$OUT/fakeorch.log" 2>&1 &
	FAKE_PID=$!
	scripts/wait-ready.sh "http://127.0.0.1:$PUB/healthz" 30 >/dev/null
	# The map's own credentials, as the fake orchestrator prints them for instance $2.
	for _ in $(seq 1 50); do
		line=$(grep -o "MAP_INSTANCE_ID=$2 MAP_CREDENTIAL=[^ ]* MAP_ORCH_CREDENTIAL=[^ ]*" "$OUT/fakeorch.log" | tail -n 1)
		[ -n "$line" ] && break
		sleep 0.1
	done
	MAP_CRED=$(sed -n 's/.*MAP_CREDENTIAL=\([^ ]*\).*/\1/p' <<<"$line")
	ORCH_CRED=$(sed -n 's/.*MAP_ORCH_CREDENTIAL=\([^ ]*\).*/\1/p' <<<"$line")
	if [ -z "$MAP_CRED" ] || [ -z "$ORCH_CRED" ]; then
		echo "fakeorch printed no credentials for $2" >&2
		return 1
	fi
}

# start_map runs a fresh map container of instance $1 (map $2, default W1's) and prints
# its host PID once its world is generated.
start_map() {
	docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
	docker run -d --rm --name "$CONTAINER" --network host "${SERVER_CPUS[@]}" \
		-e MAP_INSTANCE_ID="${1:-w1-1}" -e MAP_MAP_ID="${2:-w1}" -e MAP_ORCH_URL="http://127.0.0.1:$CTL" \
		-e MAP_CREDENTIAL="$MAP_CRED" -e MAP_ORCH_CREDENTIAL="$ORCH_CRED" -e MAP_LISTEN_HOST=127.0.0.1 -e MAP_GAME_PORT="$GP" \
		-e MAP_CONTROL_PORT_BASE="$CP" -e MAP_LOG_LEVEL=warn -e MAP_HEARTBEAT_MS=1000 "$IMAGE" >/dev/null
	for _ in $(seq 1 150); do
		if curl -fsS -H "X-Mapyard-Secret: $ORCH_CRED" "http://127.0.0.1:$CP/health" 2>/dev/null |
			grep -q '"worldHash":"[0-9a-f]'; then
			docker inspect -f '{{.State.Pid}}' "$CONTAINER"
			return 0
		fi
		sleep 0.2
	done
	echo "the map container did not start serving W1's map" >&2
	docker logs "$CONTAINER" >&2 || true
	return 1
}

rss_mb() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

bots() {
	MAP_ORCH_CREDENTIAL="$ORCH_CRED" MAP_CREDENTIAL="$MAP_CRED" "${BOT_CPUS[@]}" bin/mapbots -json \
		-join "http://127.0.0.1:$PUB" -map "ws://127.0.0.1:$GP/ws" \
		-metrics "http://127.0.0.1:$CP/metrics" "$@"
}

# run_direct measures N bots against a map container of this script's, straight at
# its game port.
run_direct() {
	local N=$1 pid idle
	[ -n "$FAKE_PID" ] || start_fake scripts/bench/w1-map.json w1-1
	pid=$(start_map)
	sleep 1
	idle=$(rss_mb "$pid")
	echo "mapyard N=$N: map container pid $pid, idle RSS ${idle} MB" >&2
	bots -n "$N" -warmup "${WARMUP}s" -window "${WINDOW}s" -server-pid "$pid" -spread "http://127.0.0.1:$CTL" ${BOTS_ARGS:-} 2>>"$OUT/mapbots.log" |
		jq --argjson idle "$idle" '.server.rssIdleMb = $idle' >"$OUT/mapyard-n$N.json"
	jq -c '{n, cpu: .server.cpuPercent, kbit: .bots.kbitDownPerClient, view: .bots.entitiesInView, snaps: .bots.snapshotsPerSec, tickP99: .server.tickP99Ms, drops: (.bots.dropped + .server.droppedClients), foreign: .server.foreignCpuPercent}' "$OUT/mapyard-n$N.json" >&2
	docker stop -t 5 "$CONTAINER" >/dev/null
}

# run_edge measures N bots through the whole path: a fresh kit, W1's map created in it
# through the admin API, the bots saved on that map and joining through the edge.
run_edge() {
	# The kit's map variables are this function's: the direct path keeps its own.
	local N=$1 spreadCred inst MAP_PID MAP_CTL MAP_CRED ORCH_CRED
	kit_start "bench-w1-$$-$N"
	kit_map "$DEP-d"
	spreadCred=$MAP_CRED # the default map's: the bots' first join lands there
	inst="$DEP-w1"
	kit_create "$inst" w1 scripts/bench/w1-map.json
	kit_map "$inst"
	if [ "$PIN" = 1 ]; then
		taskset -a -p -c 0 "$EDGE_PID" >/dev/null
		docker update --cpuset-cpus 0 "$(kit_name "$inst")" >/dev/null
	fi
	echo "mapyard through the edge N=$N: map container pid $MAP_PID, edge pid $EDGE_PID" >&2
	if MAP_CREDENTIAL="$spreadCred" MAP_ORCH_CREDENTIAL="$ORCH_CRED" "${BOT_CPUS[@]}" bin/mapbots -json \
		-join "http://127.0.0.1:$EP" -n "$N" -warmup "${WARMUP}s" -window "${WINDOW}s" \
		-spread "$CTL_URL" -into "$inst" -into-map w1 \
		-server-pid "$MAP_PID" -metrics "http://$MAP_CTL/metrics" -edge-pid "$EDGE_PID" ${BOTS_ARGS:-} \
		>"$OUT/run.json" 2>>"$OUT/mapbots.log"; then
		mv "$OUT/run.json" "$OUT/mapyard-edge-n$N.json"
		jq -c '{n, path: "edge", map: .server.cpuPercent, edge: .edge.cpuPercent, kbit: .bots.kbitDownPerClient, view: .bots.entitiesInView, snaps: .bots.snapshotsPerSec, tickP99: .server.tickP99Ms, drops: (.bots.dropped + .server.droppedClients), foreign: .server.foreignCpuPercent}' "$OUT/mapyard-edge-n$N.json" >&2
	else
		echo "mapyard through the edge N=$N failed (see $OUT/mapbots.log); its row stays empty" >&2
	fi
	kit_stop
}

for N in $NS; do
	for path in $PATHS; do
		case $path in
		direct) run_direct "$N" ;;
		edge) run_edge "$N" ;;
		*) echo "unknown path $path in PATHS (direct, edge)" >&2; exit 2 ;;
		esac
	done
	if [ -n "$PEER" ]; then
		if (cd "$PEER" && WARMUP="$WARMUP" WINDOW="$WINDOW" PIN="$PIN" ./run.sh "$N") >&2; then
			cp "$(ls -t "$PEER"/results/n"$N"-*.json | head -1)" "$OUT/colyseus-n$N.json"
		else
			echo "colyseus N=$N failed; its row stays empty" >&2
		fi
	fi
done

# An idle player alone on W1's map (its NPCs still wander around it), the idle RSS, and
# an idle player on the same map without NPCs (nothing in view moves): direct path only.
# The first stands where -spread's draw with IDLE_SEED puts it, the same place on every
# run, so runs of different builds compare with the same NPCs around it.
if [[ " $PATHS " != *" direct "* ]]; then
	scripts/bench/w1-table.sh "$OUT" | tee "$OUT/table.md"
	exit 0
fi
[ -n "$FAKE_PID" ] || start_fake scripts/bench/w1-map.json w1-1
IDLE_WINDOW=$(( WINDOW < 20 ? WINDOW : 20 ))
pid=$(start_map)
sleep 1
echo "{\"rssMb\": $(rss_mb "$pid")}" >"$OUT/mapyard-idle-rss.json"
bots -n 1 -idle -warmup 5s -window "${IDLE_WINDOW}s" -server-pid "$pid" -spread "http://127.0.0.1:$CTL" -seed "$IDLE_SEED" 2>>"$OUT/mapbots.log" >"$OUT/mapyard-idle.json"
docker stop -t 5 "$CONTAINER" >/dev/null
start_fake scripts/bench/w1-quiet-map.json w1-quiet-1
pid=$(start_map w1-quiet-1 w1-quiet)
sleep 1
bots -n 1 -idle -warmup 5s -window "${IDLE_WINDOW}s" -server-pid "$pid" 2>>"$OUT/mapbots.log" >"$OUT/mapyard-idle-quiet.json"
docker stop -t 5 "$CONTAINER" >/dev/null

scripts/bench/w1-table.sh "$OUT" | tee "$OUT/table.md"
