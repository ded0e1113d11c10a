#!/usr/bin/env bash
# Checks compose/stack.yaml (the kit on Docker Swarm) as `docker stack deploy` reads it,
# with `docker stack config` where the docker CLI has that command (it loads the file
# with the same code), and as the given compose command reads it (v1.29 or v2, which
# take the 3.9 format too), on a scratch copy so that the host's compose/mapyard.env is
# neither read nor touched:
#   - it is valid with an empty env file, and refused without DOCKER_GID;
#   - it uses no service key the stack deploy of Docker 20.10 ignores or refuses
#     (group_add, mem_limit, restart, security_opt, tmpfs, network_mode, build), so no
#     hardening is only pretended;
#   - the orchestrator runs the Swarm runtime locked down (read-only root fs, every
#     capability dropped, non-root in the socket's group, a memory limit), on the
#     labelled manager, with the Docker socket, and publishes no port;
#   - the edge runs on the same node, dials maps on the overlay, reaches the
#     orchestrator by its service name, publishes MAPYARD_PORT in host mode, and mounts
#     neither the data volume (the root secret) nor the Docker socket;
#   - both are on the attachable overlay network mapyard-maps.
# Usage: check-stack.sh ["docker compose" | docker-compose | ""]
# Prints what checked it; exits 0 with a note when no tool here can read the file.
set -euo pipefail
compose=${1:-}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/compose"
cp "$root/compose/stack.yaml" "$tmp/compose/"
: > "$tmp/compose/mapyard.env"
file=$tmp/compose/stack.yaml

fail=0
# Keys a service of the file must not use: Swarm ignores or refuses them.
if bad=$(grep -nE '^    (group_add|mem_limit|restart|security_opt|tmpfs|network_mode|build|container_name):' "$file"); then
	echo "FAIL: compose/stack.yaml uses keys docker stack deploy ignores or refuses:"; echo "$bad"; fail=1
fi

tools=()
if docker stack config --help >/dev/null 2>&1; then tools+=("docker stack config"); fi
if [ -n "$compose" ]; then tools+=("$compose"); fi
if [ ${#tools[@]} = 0 ]; then
	echo "neither docker stack config nor compose here: stack file not checked"
	exit $fail
fi

render() { # tool [VAR=value...]
	local tool=$1; shift
	if [ "$tool" = "docker stack config" ]; then
		env "$@" docker stack config -c "$file"
	else
		env "$@" $tool -p mapyard-check -f "$file" config
	fi
}

for tool in "${tools[@]}"; do
	if out=$(render "$tool" -u DOCKER_GID 2>&1); then
		echo "FAIL: $tool: the file is valid without DOCKER_GID"; fail=1
	elif ! grep -q DOCKER_GID <<<"$out"; then
		echo "FAIL: $tool: without DOCKER_GID it fails without naming it: $out"; fail=1
	fi
	printf 'ORCH_LOG_LEVEL=debug\n' > "$tmp/compose/mapyard.env"
	out=$(render "$tool" DOCKER_GID=998 MAPYARD_PORT=8089 MAPYARD_VERSION=v9) || { echo "FAIL: $tool: invalid"; exit 1; }
	: > "$tmp/compose/mapyard.env"
	render "$tool" DOCKER_GID=998 > /dev/null || { echo "FAIL: $tool: invalid with an empty env file"; exit 1; }

	# A service's block: from its name to the next key at its level or above.
	service() { awk -v s="  $1:" '$0==s{on=1;next} /^(  )?[^ ]/{on=0} on' <<<"$out"; }
	orch=$(service orchestrator) edge=$(service edge)
	nets=$(awk '/^networks:/{on=1;next} /^[^ ]/{on=0} on' <<<"$out")
	node=("node.role == manager" "node.labels.mapyard.orchestrator == true")
	# Patterns allow for both formats (short or long volume syntax, quoting); the env
	# file shows as merged variables (compose) or as the env_file it names (stack config).
	for want in "ORCH_RUNTIME: .?swarm" "ORCH_SWARM_NETWORK: .?mapyard-maps" "ORCH_LOG_LEVEL: .?debug|mapyard.env" \
		"image: .?mapyard/orchestrator:v9" "read_only: true" "- ALL" "user: .?10001:998" "memory: .?(512m|536870912)" \
		"/var/run/docker.sock" "mapyard-data" "/tmp" "condition: .?on-failure" "order: .?stop-first" "${node[@]}"; do
		grep -qE -- "$want" <<<"$orch" || { echo "FAIL: $tool: orchestrator service lacks '$want'"; fail=1; }
	done
	for want in "EDGE_MAP_DIAL: .?overlay" "EDGE_ORCH_URL: .?http://mapyard_orchestrator:9000" "EDGE_HANDOVER_SOCKET: .?(''|\"\")" \
		"ORCH_LOG_LEVEL: .?debug|mapyard.env" "image: .?mapyard/orchestrator:v9" "- edge" "read_only: true" "- ALL" \
		"mode: .?host" "published: .?8089" "target: .?8080" "/edge" "condition: .?on-failure" "${node[@]}"; do
		grep -qE -- "$want" <<<"$edge" || { echo "FAIL: $tool: edge service lacks '$want'"; fail=1; }
	done
	for want in "name: .?mapyard-maps" "driver: .?overlay" "attachable: true"; do
		grep -qE -- "$want" <<<"$nets" || { echo "FAIL: $tool: the maps network lacks '$want'"; fail=1; }
	done
	if grep -qE "published|ports:" <<<"$orch"; then echo "FAIL: $tool: the orchestrator publishes a port"; fail=1; fi
	if grep -qE "/data|docker.sock" <<<"$edge"; then echo "FAIL: $tool: the edge mounts the data volume or the Docker socket"; fail=1; fi
	[ $fail = 0 ] || { echo "$out"; exit 1; }
done
echo "stack file valid ($(IFS=,; echo "${tools[*]}" | sed 's/,/, /g'))"
