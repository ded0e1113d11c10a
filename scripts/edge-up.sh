#!/usr/bin/env bash
# Starts the compose service `edge`, or replaces it without refusing a connection, for
# `make up` (docs/operations.md, "Upgrades"):
#   - no edge running (a fresh machine, after `make down`): compose starts one;
#   - the running edge has the image and configuration compose would give it: nothing;
#   - else, and the running edge can hand over (label io.mapyard.edge.handover): a
#     second container of the service starts beside it (compose --scale 2
#     --no-recreate), takes the public port over through the handover socket, and the
#     old edge closes its players' connections (they resume through the new one) and
#     exits by itself; its restart policy is lifted first, so that Docker does not
#     start it again. The old container is then removed and the new one takes its name.
#     If the new edge fails, it is removed and the old one keeps serving, restart
#     policy restored;
#   - an edge from before the handover: compose replaces it, stop then start, once.
# Usage: edge-up.sh COMPOSE-COMMAND... (e.g. docker-compose -p mapyard -f compose/compose.yaml)
# Env:   EDGE_UP_TIMEOUT (seconds the old edge has to hand over and exit, default 60)
set -euo pipefail
compose=("$@")
timeout=${EDGE_UP_TIMEOUT:-60}
took="took the listeners over from the old edge" # the new edge's log line

state() { docker inspect -f "$1" "$2" 2>/dev/null || true; }

running=()
for id in $("${compose[@]}" ps -q edge 2>/dev/null); do
	if [ "$(state '{{.State.Running}}' "$id")" = true ]; then running+=("$id"); fi
done
if [ ${#running[@]} -ne 1 ]; then
	# None (or, after an interrupted replacement, two): compose makes it one.
	exec "${compose[@]}" up -d --no-deps edge
fi
old=${running[0]}
name=$(state '{{.Name}}' "$old")
name=${name#/}

image=$("${compose[@]}" config | awk '$0=="  edge:"{on=1;next} /^  [a-z]/{on=0} on && $1=="image:"{print $2; exit}')
want_image=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
want_hash=$("${compose[@]}" config --hash edge | awk '{print $2}')
if [ "$(state '{{.Image}}' "$old")" = "$want_image" ] &&
	[ "$(state '{{index .Config.Labels "com.docker.compose.config-hash"}}' "$old")" = "$want_hash" ]; then
	echo "edge: $name is up to date"
	exit 0
fi
if [ "$(state '{{index .Config.Labels "io.mapyard.edge.handover"}}' "$old")" != 1 ]; then
	echo "edge: $name cannot hand its port over (an edge from before the handover); compose replaces it"
	exec "${compose[@]}" up -d --no-deps edge
fi

echo "edge: replacing $name through the handover socket"
docker update --restart=no "$old" >/dev/null
"${compose[@]}" up -d --no-deps --no-recreate --scale edge=2 edge
new=""
for id in $("${compose[@]}" ps -q edge); do
	if [ "$id" != "$old" ]; then new=$id; fi
done

# fail removes the new edge and leaves the old one serving, as it was.
fail() {
	echo "edge: $1; the new edge is removed, $name keeps serving" >&2
	if [ -n "$new" ]; then
		docker logs --tail 20 "$new" >&2 || true
		docker rm -f "$new" >/dev/null || true
	fi
	docker update --restart=unless-stopped "$old" >/dev/null || true
	exit 1
}
[ -n "$new" ] || fail "compose started no second edge container"

deadline=$((SECONDS + timeout))
while [ "$(state '{{.State.Running}}' "$old")" = true ]; do
	if [ "$(state '{{.State.Running}}' "$new")" != true ] || [ "$(state '{{.RestartCount}}' "$new")" != 0 ]; then
		fail "the new edge stopped"
	fi
	if [ $SECONDS -ge $deadline ]; then
		if docker logs "$new" 2>&1 | grep -q "$took"; then
			echo "edge: $name took more than ${timeout}s to close its players; stopping it" >&2
			docker stop "$old" >/dev/null
			break
		fi
		fail "the new edge did not take the port over within ${timeout}s"
	fi
	sleep 0.2
done
if ! docker logs "$new" 2>&1 | grep -q "$took"; then
	echo "edge: $name exited ($(state '{{.State.ExitCode}}' "$old")) before it handed over; the new edge bound the port itself" >&2
fi
docker rm "$old" >/dev/null
docker rename "$new" "$name"
echo "edge: replaced; $name runs $image ($(state '{{.Image}}' "$new" | cut -c8-19))"
