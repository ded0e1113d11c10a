#!/usr/bin/env bash
# Checks compose/compose.yaml as the given compose command reads it (v1.29 or v2), on a
# scratch copy so that the host's compose/mapyard.env is neither read nor touched:
#   - it is valid with an empty env file, as `make up` creates it;
#   - a variable of the env file reaches the service it is meant for (both read it);
#   - the orchestrator is locked down like the maps (read-only root fs, every
#     capability dropped, no-new-privileges, a memory limit);
#   - the edge mounts no data volume, so it cannot read the root secret;
#   - the edge shares the handover volume and says it can hand over (the label
#     scripts/edge-up.sh reads), so that `make up` replaces it with no connection refused.
# Usage: check-compose.sh "docker compose" | docker-compose
set -euo pipefail
compose=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/compose"
cp "$root/compose/compose.yaml" "$tmp/compose/"
cfg() { DOCKER_GID=999 $compose -p mapyard-check -f "$tmp/compose/compose.yaml" config; }

: > "$tmp/compose/mapyard.env"
cfg > /dev/null

printf 'ORCH_LOG_LEVEL=debug\nEDGE_WS_RATE_PER_MIN=0\nMAP_TICK_HZ=20\n' > "$tmp/compose/mapyard.env"
out=$(cfg)
fail=0
service() { awk -v s="  $1:" '$0==s{on=1;next} /^  [a-z]/{on=0} on' <<<"$out"; }
orch=$(service orchestrator) edge=$(service edge)
# Patterns allow for both versions' quoting ('20' in v1.29, "20" in v2).
for want in "ORCH_LOG_LEVEL: .?debug" "MAP_TICK_HZ: .?20" "read_only: true" "- ALL" "no-new-privileges:true" "mem_limit:"; do
	grep -qE -- "$want" <<<"$orch" || { echo "FAIL: orchestrator service lacks '$want'"; fail=1; }
done
for want in "EDGE_WS_RATE_PER_MIN: .?0" "read_only: true" "- ALL" "/edge" ":/handover" "io.mapyard.edge.handover: .?1"; do
	grep -qE -- "$want" <<<"$edge" || { echo "FAIL: edge service lacks '$want'"; fail=1; }
done
if grep -q "/data" <<<"$edge"; then echo "FAIL: the edge mounts the data volume (the root secret)"; fail=1; fi
[ $fail = 0 ] || { echo "$out"; exit 1; }
