#!/usr/bin/env bash
# A live map upgrade under load, beside a restart of the same map (docs/benchmarks.md,
# "Live map upgrade"): the kit's own binaries as compose runs them
# (scripts/bench/kit.sh), W1's map created through the admin API, N W1 bots saved all
# over it and playing through the edge, each coming back by itself when its socket
# closes (a resume, else a new join: mapbots -moves -rejoin), newcomers joining at
# JOIN_LOOP a second. Once the bots are warm the map is upgraded live to a second tag
# of its image (IMAGE retagged as IMAGE2, allowed by ORCH_MAP_IMAGES) and, once every
# bot is back, restarted through the admin API. Per phase the bots record whether their
# socket closed, the pause from the last snapshot before the break to the first after
# the next welcome, and how far their character moved back; the orchestrator's upgrade
# status gives the whole upgrade's time (start → old container gone). Targets: no socket
# closed and no character rolled back by the upgrade, pause p99 ≤ 250 ms at 200 players
# and ≤ 500 ms at 1,000, the whole upgrade ≤ 3 s at 200.
#
# Runs are interleaved (every N, then again, REPS times); the table shows each figure's
# median. Writes one JSON line a run into OUT/runs.jsonl, the logs beside it, and the
# table into OUT/table.md.
#
# Usage: scripts/bench-upgrade.sh      (make bench-upgrade builds the binaries and image first)
# Env:   NS="200 1000" REPS=3 JOIN_RATE=200 (bots a second before the window) JOIN_LOOP=10
#        WARMUP=10 SETTLE=3 (seconds every bot has to come back after the upgrade ended)
#        RESTART_SETTLE=8 (after the restarted map is ready) MODE=move|idle
#        IMAGE=mapyard/map:<version>  OUT=bench-results/upgrade-<UTC time>
set -euo pipefail
cd "$(dirname "$0")/.."
NS="${NS:-200 1000}"
REPS="${REPS:-3}"
JOIN_RATE="${JOIN_RATE:-200}"
JOIN_LOOP="${JOIN_LOOP:-10}"
WARMUP="${WARMUP:-10}"
SETTLE="${SETTLE:-3}"
RESTART_SETTLE="${RESTART_SETTLE:-8}"
MODE="${MODE:-move}"
IMAGE="${IMAGE:-mapyard/map:$(git describe --tags --always --dirty 2>/dev/null || echo latest)}"
OUT="${OUT:-bench-results/upgrade-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
for bin in bin/orchestrator bin/edge bin/mapbots; do
	[ -x "$bin" ] || { echo "$bin missing: run make build" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "jq is required" >&2; exit 1; }
docker image inspect "$IMAGE" >/dev/null || { echo "image $IMAGE missing: run make images" >&2; exit 1; }

# The image the map is upgraded to: the same build under a second tag of this run's
# own, as a new release would be.
IMAGE2="${IMAGE%:*}:bench-upgrade-$$"
docker tag "$IMAGE" "$IMAGE2"
export ORCH_MAP_IMAGES="$IMAGE,$IMAGE2"

. scripts/bench/kit.sh
BOTS_PID=""
cleanup() {
	if [ -n "$BOTS_PID" ]; then kill "$BOTS_PID" 2>/dev/null || true; fi
	kit_stop
	docker rmi "$IMAGE2" >/dev/null 2>&1 || true
}
trap cleanup EXIT

admin() { curl -fsS -H "X-Mapyard-Secret: $ROOT" -H 'Content-Type: application/json' "$@"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# run_one N REP: one run, its JSON line appended to OUT/runs.jsonl.
run_one() {
	local N=$1 rep=$2 inst spreadCred status t0 t1 state="" restartMs idle=()
	kit_start "bench-upgrade-$$-$N-$rep"
	kit_map "$DEP-d"
	spreadCred=$MAP_CRED # the default map's: the bots' first join lands there
	inst="$DEP-w1"
	kit_create "$inst" w1 scripts/bench/w1-map.json
	if [ "$MODE" = idle ]; then idle=(-idle); fi
	MAP_CREDENTIAL="$spreadCred" bin/mapbots -json -join "http://127.0.0.1:$EP" -n "$N" -join-rate "$JOIN_RATE" "${idle[@]}" \
		-spread "$CTL_URL" -into "$inst" -into-map w1 -moves upgrade,restart -rejoin -join-loop "$JOIN_LOOP" \
		-warmup "${WARMUP}s" -window 600s >"$OUT/run-n$N-$rep.json" 2>>"$OUT/mapbots.log" &
	BOTS_PID=$!
	# The window begins when mapbots says so (the log is every run's).
	until [ "$(grep -c "mapbots: measuring" "$OUT/mapbots.log" 2>/dev/null || true)" -ge "$RUNS_DONE" ]; do
		kill -0 "$BOTS_PID" 2>/dev/null || { echo "mapbots ended before its window:" >&2; tail -5 "$OUT/mapbots.log" >&2; exit 1; }
		sleep 0.1
	done
	sleep 2

	# The upgrade, until the orchestrator says it ended; then every bot has SETTLE s to
	# come back before the phase ends.
	admin -X POST --data "{\"image\":\"$IMAGE2\"}" "$CTL_URL/admin/maps/$inst/upgrade" >/dev/null
	for _ in $(seq 1 1200); do
		status=$(admin "$CTL_URL/admin/maps/$inst" | jq -c '.upgrade // {}')
		case $(jq -r .phase <<<"$status") in done | failed) break ;; esac
		sleep 0.1
	done
	sleep "$SETTLE"
	kill -USR1 "$BOTS_PID"

	# The restart, until the map is ready again; then RESTART_SETTLE s for the bots.
	t0=$(now_ms)
	admin -X POST "$CTL_URL/admin/maps/$inst/restart" >/dev/null
	sleep 0.2
	for _ in $(seq 1 1200); do
		state=$(admin "$CTL_URL/admin/maps/$inst" | jq -r .state)
		[ "$state" = ready ] && break
		sleep 0.05
	done
	t1=$(now_ms)
	restartMs=$((t1 - t0))
	sleep "$RESTART_SETTLE"
	kill -USR1 "$BOTS_PID"
	wait "$BOTS_PID" || true
	BOTS_PID=""
	jq -c --argjson n "$N" --argjson rep "$rep" --argjson status "$status" --argjson restartMs "$restartMs" --arg state "$state" '
		def secs: capture("^(?<s>[^.Z+]+)(?<f>\\.[0-9]+)?") | ((.s + "Z") | fromdateiso8601) + ((.f // ".0") | tonumber);
		{n: $n, rep: $rep, upgradeStatus: $status,
		 upgradeSec: (if $status.endedAt then (($status.endedAt | secs) - ($status.startedAt | secs)) else null end),
		 restartReadyMs: $restartMs, restartState: $state,
		 upgrade: .phases[0], restart: .phases[1]}' "$OUT/run-n$N-$rep.json" >>"$OUT/runs.jsonl"
	jq -c 'select(.n == '"$N"' and .rep == '"$rep"') | {n, rep, phase: .upgradeStatus.phase, fallback: .upgradeStatus.fallback, moved: .upgradeStatus.moved, transferred: .upgradeStatus.transferred, upgradeSec,
		closed: .upgrade.socketsClosed, rolledBack: .upgrade.rolledBack, pauseP99: .upgrade.pauseP99Ms, restartClosed: .restart.socketsClosed, restartPauseP99: .restart.pauseP99Ms}' "$OUT/runs.jsonl" >&2
	kit_stop
}

RUNS_DONE=0
for rep in $(seq 1 "$REPS"); do
	for N in $NS; do
		RUNS_DONE=$((RUNS_DONE + 1))
		echo "run $rep of $REPS, N=$N" >&2
		run_one "$N" "$rep"
	done
done

# The table: every figure's median over the runs of one N.
jq -rs '
	def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
	def r(k): (. * k | round) / k;
	def m(f): [.[] | f | select(. != null)] | median;
	"| N | runs | upgrade: sockets closed | moved on the socket | transfer fallback | rolled back (of compared) | pause p50 / p99 / max ms | max rollback beyond a tick | whole upgrade s | newcomers refused | restart: sockets closed | rolled back (of compared) | pause p50 / p99 / max ms | lost | ready after s |",
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
	(group_by(.n)[] |
		"| \(.[0].n) | \(length) | \(m(.upgrade.socketsClosed)) | \(m(.upgrade.moved)) | \(m(.upgradeStatus.transferred)) | \(m(.upgrade.rolledBack)) (\(m(.upgrade.compared))) | \(m(.upgrade.pauseP50Ms) | r(10)) / \(m(.upgrade.pauseP99Ms) | r(10)) / \(m(.upgrade.pauseMaxMs) | r(10)) | \(m(.upgrade.rollbackMaxTickAdjusted) | r(100)) | \(m(.upgradeSec) | r(100)) | \(m(.upgrade.joinLoop.refused)) | \(m(.restart.socketsClosed)) | \(m(.restart.rolledBack)) (\(m(.restart.compared))) | \(m(.restart.pauseP50Ms) | r(10)) / \(m(.restart.pauseP99Ms) | r(10)) / \(m(.restart.pauseMaxMs) | r(10)) | \(m(.restart.lost)) | \(m(.restartReadyMs / 1000) | r(100)) |")
' "$OUT/runs.jsonl" | tee "$OUT/table.md"
echo "upgrade phases: $(jq -r '[.upgradeStatus | "\(.phase)\(if .fallback then " (fallback)" else "" end) moved \(.moved) transferred \(.transferred) remaining \(.remaining)"] | .[0]' "$OUT/runs.jsonl" | sort | uniq -c | tr '\n' ';')" | tee -a "$OUT/table.md"
