# The kit as compose runs it, for the benchmark scripts that join through the edge
# (scripts/bench-w1.sh PATHS=edge, scripts/bench-w3.sh): bin/orchestrator starting the
# default map as a Docker container of IMAGE with the default one-CPU and 512 MiB
# limits, bin/edge in front. Every start gets a deployment name of its own (its own map
# network, containers, database and ports: nothing is shared with a running kit) and
# kit_stop removes all of it. Sourced, not run; the caller sets IMAGE and OUT (logs).
#
#   kit_start DEP       start, wait until the default map is ready through the edge; sets
#                       EP (edge port), EDGE_PID, ORCH_PID, CTL_URL, ROOT (root secret)
#   kit_replace_edge    start a second edge, which takes the first one's port over
#                       through the handover socket, and wait until the first has
#                       closed its players and exited; sets EDGE_PID
#   kit_map INSTANCE    the container of a map instance: sets MAP_PID (host PID),
#                       MAP_CTL (host:port of its control listener), MAP_CRED and
#                       ORCH_CRED (the credentials the orchestrator gave it)
#   kit_create ID MAP CONFIG_FILE
#                       create a map instance through the admin API from a MapConfig
#                       file (its instanceId and mapId are set to ID and MAP) and wait
#                       until it is ready
#   kit_stop            stop the edge and the orchestrator, remove the deployment

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

ORCH_PID="" EDGE_PID="" DEP="" DATA="" EM=""

kit_stop() {
	for pid in "$EDGE_PID" "$ORCH_PID"; do
		if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	done
	EDGE_PID="" ORCH_PID=""
	if [ -n "$DEP" ]; then
		local ids
		ids=$(docker ps -aq --filter "label=io.mapyard.deployment=$DEP")
		# The map containers' logs are kept with the results, for what went wrong.
		for id in $ids; do docker logs "$id" >>"$OUT/map-$DEP.log" 2>&1 || true; done
		if [ -n "$ids" ]; then docker rm -f $ids >/dev/null || true; fi
		docker network rm "$DEP" >/dev/null 2>&1 || true
	fi
	if [ -n "$DATA" ]; then rm -rf "$DATA"; fi
	DEP="" DATA=""
}

kit_start() {
	DEP=$1
	DATA=$(mktemp -d)
	local pub ctl
	ROOT="bench-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	pub=$(free_port) ctl=$(free_port) EP=$(free_port) EM=$(free_port)
	CTL_URL="http://127.0.0.1:$ctl"
	ORCH_PUBLIC_ADDR="127.0.0.1:$pub" ORCH_CONTROL_ADDR="127.0.0.1:$ctl" ORCH_DB_PATH="$DATA/mapyard.db" \
		ORCH_INTERNAL_RPC_SECRET="$ROOT" ORCH_MAP_IMAGE="$IMAGE" ORCH_DEPLOYMENT="$DEP" ORCH_MAP_NETWORK="$DEP" \
		ORCH_DEFAULT_INSTANCE_ID="$DEP-d" ORCH_WARM_POOL_SIZE=0 ORCH_LOG_LEVEL=warn MAP_LOG_LEVEL=warn \
		bin/orchestrator >>"$OUT/orchestrator.log" 2>&1 &
	ORCH_PID=$!
	kit_edge
	EDGE_PID=$!
	scripts/wait-ready.sh "http://127.0.0.1:$EP/readyz" 120 >/dev/null
}

# kit_edge starts an edge in the background, as compose runs it: with a handover
# socket, so that a second one takes the first one's port over.
kit_edge() {
	EDGE_PUBLIC_ADDR="127.0.0.1:$EP" EDGE_METRICS_ADDR="127.0.0.1:$EM" EDGE_ORCH_URL="$CTL_URL" \
		EDGE_CREDENTIAL="$ROOT" EDGE_WS_RATE_PER_MIN=0 EDGE_JOIN_RATE_PER_MIN=0 EDGE_LOG_LEVEL=warn \
		EDGE_HANDOVER_SOCKET="$DATA/edge.sock" bin/edge >>"$OUT/edge.log" 2>&1 &
}

kit_replace_edge() {
	local old=$EDGE_PID
	kit_edge
	EDGE_PID=$!
	wait "$old" || true
}

# kit_name prints the container name of the kit's instance $1: mapyard-map-<id>, with
# ".<deployment>" after it for any deployment but the default one (docs/operations.md).
kit_name() {
	if [ "$DEP" = mapyard ]; then echo "mapyard-map-$1"; else echo "mapyard-map-$1.$DEP"; fi
}

kit_map() {
	local name env
	name=$(kit_name "$1")
	MAP_PID=$(docker inspect -f '{{.State.Pid}}' "$name")
	MAP_CTL=$(docker port "$name" 9100/tcp | head -n 1)
	env=$(docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$name")
	MAP_CRED=$(sed -n 's/^MAP_CREDENTIAL=//p' <<<"$env")
	ORCH_CRED=$(sed -n 's/^MAP_ORCH_CREDENTIAL=//p' <<<"$env")
	if [ -z "$MAP_PID" ] || [ "$MAP_PID" = 0 ] || [ -z "$MAP_CTL" ] || [ -z "$MAP_CRED" ] || [ -z "$ORCH_CRED" ]; then
		echo "the map container $name is not what the script expects" >&2
		return 1
	fi
}

kit_create() {
	local id=$1 map=$2 file=$3 state=""
	jq -c --arg id "$id" --arg map "$map" '{instanceId: $id, mapId: $map, config: (.instanceId = $id | .mapId = $map)}' "$file" |
		curl -fsS -H "X-Mapyard-Secret: $ROOT" -H 'Content-Type: application/json' --data-binary @- \
			"$CTL_URL/admin/maps" >/dev/null
	for _ in $(seq 1 300); do
		state=$(curl -fsS -H "X-Mapyard-Secret: $ROOT" "$CTL_URL/admin/maps/$id" | jq -r .state)
		[ "$state" = ready ] && return 0
		sleep 0.2
	done
	echo "map instance $id is $state, not ready, 60 s after its create" >&2
	return 1
}
