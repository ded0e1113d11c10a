#!/usr/bin/env bash
# Rolls a running `make up` kit onto the images just built, for `make upgrade`
# (docs/operations.md, "Upgrades"), one step at a time, players playing:
#   1. orchestrator: compose recreates the orchestrator alone; the edge keeps every
#      player's socket and the new orchestrator adopts the running maps;
#   2. edge: scripts/edge-up.sh, the new edge taking the port over through the
#      handover socket; the old one closes its players, who resume through the new one;
#   3. maps: every ready map whose container runs another image than its image name
#      resolves to now (the build just made moved mapyard/map:latest, say) is upgraded
#      live: POST /admin/upgrade {"from": name, "to": name, "parallel": PARALLEL} for each
#      such name, until every upgrade ended.
# Then it prints a report, a line a step: how long it took, the player sockets the edge
# saw end and open, what it refused, and, from WATCH watcher players joined through the
# edge for the whole roll (mapbots -moves: what a player lives through), how many of
# their sockets closed, the longest pause one saw, the farthest a character moved back
# and the newcomers refused; and a line a map upgraded, from its upgrade status (moved,
# transferred, remaining, fallback, duration).
#
# Usage: upgrade.sh COMPOSE-COMMAND... (e.g. docker compose -p mapyard -f compose/compose.yaml)
# Env:   ENV_FILE (compose/mapyard.env: the control, public and metrics addresses),
#        PARALLEL=2 (maps upgraded at once), WATCH=4 (watcher players; 0: none),
#        JOIN_LOOP=0 (newcomers a second among the watchers), UPGRADE_TIMEOUT=600 (s),
#        OUT=bench-results/upgrade-<UTC time> (the report and the logs)
set -euo pipefail
cd "$(dirname "$0")/.."
compose=("$@")
ENV_FILE=${ENV_FILE:-compose/mapyard.env}
PARALLEL=${PARALLEL:-2}
WATCH=${WATCH:-4}
JOIN_LOOP=${JOIN_LOOP:-0}
UPGRADE_TIMEOUT=${UPGRADE_TIMEOUT:-600}
OUT=${OUT:-bench-results/upgrade-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
command -v jq >/dev/null || { echo "jq is required" >&2; exit 1; }

setting() { sed -n "s/^$1=//p" "$ENV_FILE" 2>/dev/null | tail -1; }
hostport() { local a=${1:-$2}; case $a in :*) echo "127.0.0.1$a" ;; *) echo "$a" ;; esac; }
CTL="http://$(hostport "$(setting ORCH_CONTROL_ADDR)" 127.0.0.1:9000)"
PUB="http://$(hostport "$(setting EDGE_PUBLIC_ADDR)" :8080)"
OPUB="http://$(hostport "$(setting ORCH_PUBLIC_ADDR)" 127.0.0.1:8081)"
MET="http://$(hostport "$(setting EDGE_METRICS_ADDR)" 127.0.0.1:9101)/metrics"

orch=$("${compose[@]}" ps -q orchestrator)
[ -n "$orch" ] || { echo "upgrade: no orchestrator running: make up first" >&2; exit 1; }
S=$(docker cp "$orch:/data/internal-rpc-secret" - | tar -xO)
admin() { curl -fsS -H "X-Mapyard-Secret: $S" -H 'Content-Type: application/json' "$@"; }
now() { date +%s.%N; }
# edge_metric NAME prints a series of the edge's metrics (0 when absent).
edge_metrics() { curl -fsS "$MET" 2>/dev/null || true; }
metric() { awk -v n="$1" '$1==n {v=$2} END {print v+0}' <<<"$2"; }
refused() { awk '$1 ~ /^mapyard_edge_ws_refused_total/ || $1 ~ /^mapyard_edge_rate_limited_total/ {s+=$2} END {print s+0}' <<<"$1"; }

# The watchers: players joined through the edge for the whole roll, whose moves are
# the report's pauses and rollbacks. A phase a step; SIGUSR1 ends one.
BOTS_PID=""
cleanup() { if [ -n "$BOTS_PID" ]; then kill "$BOTS_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT
if [ "$WATCH" -gt 0 ]; then
	[ -x bin/mapbots ] || { echo "bin/mapbots missing: run make build" >&2; exit 1; }
	loop=()
	if [ "$JOIN_LOOP" -gt 0 ]; then loop=(-join-loop "$JOIN_LOOP"); fi
	bin/mapbots -json -join "$PUB" -n "$WATCH" -join-rate 1 -warmup 2s -window 3600s -moves orchestrator,edge,maps -rejoin "${loop[@]}" \
		>"$OUT/watchers.json" 2>"$OUT/watchers.log" &
	BOTS_PID=$!
	until grep -q "mapbots: measuring" "$OUT/watchers.log"; do
		kill -0 "$BOTS_PID" 2>/dev/null || { echo "upgrade: the watchers could not join:" >&2; cat "$OUT/watchers.log" >&2; exit 1; }
		sleep 0.2
	done
fi
phase_end() { if [ -n "$BOTS_PID" ]; then kill -USR1 "$BOTS_PID"; fi; }

STEPS="$OUT/steps.jsonl"
: >"$STEPS"
# step NAME T0 BEFORE AFTER [CLOSED]: one line of the report's table, from the edge's
# metrics before and after (CLOSED overrides the sockets ended, for the edge's step).
step() {
	local name=$1 t0=$2 b=$3 a=$4 closed=${5:-}
	local ended opened
	ended=$(( $(metric mapyard_edge_ws_ended_total "$a") - $(metric mapyard_edge_ws_ended_total "$b") ))
	opened=$(( $(metric mapyard_edge_ws_connections_total "$a") - $(metric mapyard_edge_ws_connections_total "$b") ))
	if [ -n "$closed" ]; then ended=$closed opened=$(metric mapyard_edge_ws_connections_total "$a"); fi
	jq -nc --arg name "$name" --argjson took "$(echo "$(now) - $t0" | bc)" --argjson ended "$ended" --argjson opened "$opened" \
		--argjson before "$(metric mapyard_edge_ws_connections "$b")" --argjson after "$(metric mapyard_edge_ws_connections "$a")" \
		--argjson refused "$(( $(refused "$a") - $(if [ -n "$closed" ]; then echo 0; else refused "$b"; fi) ))" \
		'{step: $name, tookSec: $took, openBefore: $before, openAfter: $after, ended: $ended, opened: $opened, refused: $refused}' >>"$STEPS"
}

# 1. The orchestrator.
echo "upgrade: 1/3 orchestrator" >&2
t0=$(now) b=$(edge_metrics)
DOCKER_GID=${DOCKER_GID:-$(stat -c %g /var/run/docker.sock)} "${compose[@]}" up -d --no-deps orchestrator
orch=$("${compose[@]}" ps -q orchestrator)
# The new orchestrator's own /readyz, its container watched: a setting it refuses ends
# the upgrade here with its words, instead of a wait on the edge, which keeps serving.
scripts/wait-ready.sh "$OPUB/readyz" 120 "$orch" >/dev/null || {
	echo "upgrade: the new orchestrator did not start; the maps and the edge go on, joins wait for it: mend $ENV_FILE, then make up" >&2
	exit 1
}
scripts/wait-ready.sh "$PUB/readyz" 120 >/dev/null
S=$(docker cp "$orch:/data/internal-rpc-secret" - | tar -xO)
until admin "$CTL/admin/maps" >/dev/null 2>&1; do sleep 0.2; done
sleep 1
step orchestrator "$t0" "$b" "$(edge_metrics)"
phase_end

# 2. The edge, through its handover socket. Its counters start again with the new edge:
# every socket the old one held was closed.
echo "upgrade: 2/3 edge" >&2
t0=$(now) b=$(edge_metrics) edge0=$("${compose[@]}" ps -q edge)
DOCKER_GID=${DOCKER_GID:-$(stat -c %g /var/run/docker.sock)} scripts/edge-up.sh "${compose[@]}"
scripts/wait-ready.sh "$PUB/readyz" 120 >/dev/null
sleep 2
a=$(edge_metrics)
if [ "$("${compose[@]}" ps -q edge)" != "$edge0" ]; then
	step edge "$t0" "$b" "$a" "$(metric mapyard_edge_ws_connections "$b")" # replaced
else
	step edge "$t0" "$b" "$a" # up to date: the same edge
fi
phase_end

# 3. The maps whose containers run another image than their image name now names.
echo "upgrade: 3/3 maps" >&2
t0=$(now) b=$(edge_metrics)
maps=$(admin "$CTL/admin/maps")
declare -A stale=()
while read -r id image cid; do
	[ -n "$cid" ] || continue
	want=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
	have=$(docker inspect -f '{{.Image}}' "$cid" 2>/dev/null || true)
	if [ -n "$want" ] && [ -n "$have" ] && [ "$want" != "$have" ]; then
		echo "upgrade: $id runs ${have:7:12}, $image is ${want:7:12} now" >&2
		stale[$image]=1
	fi
done < <(jq -r '.instances[] | select(.state == "ready") | "\(.instanceId) \(.image) \(.containerId // "")"' <<<"$maps")
ids=()
for image in "${!stale[@]}"; do
	mapfile -t got < <(admin -X POST --data "$(jq -nc --arg i "$image" --argjson p "$PARALLEL" '{from: $i, to: $i, parallel: $p}')" \
		"$CTL/admin/upgrade" | jq -r '.instances[]')
	ids+=("${got[@]}")
done
secs='def secs: capture("^(?<s>[^.Z+]+)(?<f>\\.[0-9]+)?") | ((.s + "Z") | fromdateiso8601) + ((.f // ".0") | tonumber);'
: >"$OUT/maps.jsonl"
deadline=$(( $(date +%s) + UPGRADE_TIMEOUT ))
for id in "${ids[@]}"; do
	while :; do
		st=$(admin "$CTL/admin/maps/$id" | jq -c --argjson t0 "$t0" "$secs"'
			.upgrade as $u | if $u == null or ($u.startedAt | secs) < ($t0 - 1) then null
			else {map: .instanceId, image: .image, phase: $u.phase, moved: $u.moved, transferred: $u.transferred,
				remaining: $u.remaining, fallback: ($u.fallback // false), error: ($u.error // ""),
				tookSec: (if $u.endedAt then (($u.endedAt | secs) - ($u.startedAt | secs)) else null end)} end')
		case $(jq -r '.phase // ""' <<<"$st") in done | failed) echo "$st" >>"$OUT/maps.jsonl"; break ;; esac
		if [ "$(date +%s)" -ge "$deadline" ]; then
			echo "{\"map\":\"$id\",\"phase\":\"timed out\"}" >>"$OUT/maps.jsonl"
			break
		fi
		sleep 0.2
	done
done
sleep 2
step maps "$t0" "$b" "$(edge_metrics)"
phase_end

if [ -n "$BOTS_PID" ]; then
	wait "$BOTS_PID" || true
	BOTS_PID=""
	jq -c '.phases[] | {step: .name, watchers: .bots, closed: .socketsClosed, moved, transferred, resumed, rejoined, lost,
		pauseMaxMs, pauseP99Ms, rollbackMax: .rollbackMaxRaw, rolledBack, joinsRefused: (.joinLoop.refused // null)}' \
		"$OUT/watchers.json" >"$OUT/watchers.jsonl" 2>/dev/null || : >"$OUT/watchers.jsonl"
else
	: >"$OUT/watchers.jsonl"
fi

{
	echo "| step | took s | edge sockets open before → after | sockets ended | sockets opened | refused by the edge | watchers' sockets closed | longest pause ms | rollback (units) | newcomers refused |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	jq -rs --slurpfile w "$OUT/watchers.jsonl" '
		.[] as $s | ($w | map(select(.step == $s.step)) | .[0]) as $x |
		"| \($s.step) | \($s.tookSec * 10 | round / 10) | \($s.openBefore) → \($s.openAfter) | \($s.ended) | \($s.opened) | \($s.refused) | " +
		(if $x then "\($x.closed) of \($x.watchers) | \($x.pauseMaxMs * 10 | round / 10) | \($x.rollbackMax * 100 | round / 100) | \($x.joinsRefused // "–")" else "– | – | – | –" end) + " |"' "$STEPS"
	echo
	if [ -s "$OUT/maps.jsonl" ]; then
		echo "| map | image | phase | moved | transferred | remaining | fallback | took s |"
		echo "|---|---|---|---|---|---|---|---|"
		jq -r '"| \(.map) | \(.image // "") | \(.phase)\(if (.error // "") != "" then " (" + .error + ")" else "" end) | \(.moved // "") | \(.transferred // "") | \(.remaining // "") | \(.fallback // "" | tostring) | \(if .tookSec then (.tookSec * 100 | round / 100) else "" end) |"' "$OUT/maps.jsonl"
	else
		echo "maps: every map already runs the image its name names; none upgraded"
	fi
} | tee "$OUT/report.md"
if grep -q '"phase":"\(failed\|timed out\)"' "$OUT/maps.jsonl" 2>/dev/null; then exit 1; fi
