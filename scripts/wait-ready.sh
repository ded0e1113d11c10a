#!/usr/bin/env bash
# Waits until URL answers 200, up to SECONDS_MAX seconds, and says how long it took.
# Usage: wait-ready.sh URL [SECONDS_MAX]
set -euo pipefail
url=$1 max=${2:-60}
start=$(date +%s%N)
for _ in $(seq 1 $((max * 5))); do
	if curl -fsS -o /dev/null "$url" 2>/dev/null; then
		echo "ready: $url answered 200 after $(( ($(date +%s%N) - start) / 1000000 )) ms"
		exit 0
	fi
	sleep 0.2
done
echo "not ready: $url did not answer 200 within ${max}s" >&2
exit 1
