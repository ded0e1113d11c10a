#!/usr/bin/env bash
# Waits until URL answers 200, up to SECONDS_MAX seconds, and says how long it took.
# With CONTAINERs (ids or names) it also watches them: when one stops or restarts while
# it waits (an orchestrator that refuses its configuration, say, which compose restarts
# over and over), it fails at once with that container's last lines, instead of
# waiting out SECONDS_MAX and saying nothing of why; at the end of SECONDS_MAX it shows
# their last lines too (the orchestrator's say why its default map is not ready).
# Usage: wait-ready.sh URL [SECONDS_MAX [CONTAINER...]]
set -euo pipefail
url=$1 max=${2:-60}
shift $(($# < 2 ? $# : 2))
containers=("$@")
inspect() { docker inspect -f "$1" "$2" 2>/dev/null || echo gone; }
# last_lines N C prints container C's last N log lines, indented, repeats once.
last_lines() { docker logs --tail "$1" "$2" 2>&1 | uniq | sed 's/^/  /' >&2 || true; }
declare -A base
for c in "${containers[@]}"; do base[$c]=$(inspect '{{.RestartCount}}' "$c"); done
start=$(date +%s%N)
for i in $(seq 1 $((max * 5))); do
	if curl -fsS -o /dev/null "$url" 2>/dev/null; then
		echo "ready: $url answered 200 after $(( ($(date +%s%N) - start) / 1000000 )) ms"
		exit 0
	fi
	if ((i % 5 == 0)); then
		for c in "${containers[@]}"; do
			read -r status restarts < <(inspect '{{.State.Status}} {{.RestartCount}}' "$c")
			if [ "$status" != running ] || [ "$restarts" != "${base[$c]}" ]; then
				name=$(inspect '{{.Name}}' "$c")
				what="is $status"
				if [ "$status" = running ]; then what="restarted while waiting"; fi
				echo "not ready: container ${name#/} $what; its last lines (repeats shown once):" >&2
				last_lines 15 "$c"
				exit 1
			fi
		done
	fi
	sleep 0.2
done
echo "not ready: $url did not answer 200 within ${max}s" >&2
for c in "${containers[@]}"; do
	name=$(inspect '{{.Name}}' "$c")
	echo "the last lines of ${name#/}:" >&2
	last_lines 10 "$c"
done
exit 1
