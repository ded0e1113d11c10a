#!/usr/bin/env bash
# Prints the markdown table of a W3 run directory written by scripts/bench-w3.sh: one
# row per N and mode, the map's and the edge's costs beside what the probe lived through
# (memory per connection is left out at N = 0, where the probe is the one connection).
set -euo pipefail
dir=${1:?usage: w3-table.sh DIR}
echo "| N | bots | map CPU % (1-CPU limit) | map RSS MB (KB per conn) | tick + snapshot p50 / p99 ms | probe RTT p50 / p99 / max ms | probe snapshots/s | bots snapshots/s mean (min) | kbit/s down per client | entities in view | drops | edge CPU % (KB per conn) | bots CPU % | foreign load % |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
jq -s -r 'sort_by(.n, .mode)[] | "| \(.n) | \(.mode) | \(.server.cpuPercent*10|round/10) | \(.server.rssMb*10|round/10) (\(if .n > 0 then .server.kbPerConnection*10|round/10 else "–" end)) | \(.server.tickP50Ms*100|round/100) / \(.server.tickP99Ms*100|round/100) | \(.probe.rttP50Ms*100|round/100) / \(.probe.rttP99Ms*100|round/100) / \(.probe.rttMaxMs*100|round/100) | \(.probe.snapshotsPerSec*100|round/100) | \(.bots.snapshotsPerSec*100|round/100) (\(.bots.minSnapshotsPerSec*100|round/100)) | \(.bots.kbitDownPerClient*10|round/10) | \(.bots.entitiesInView*10|round/10) | \(.bots.dropped + .server.droppedClients + .probe.dropped) (joins failed \(.bots.joinFailures)) | \(.edge.cpuPercent*10|round/10) (\(if .n > 0 then .edge.kbPerConnection*10|round/10 else "–" end)) | \(.bots.botsCpuPercent*10|round/10) | \(.server.foreignCpuPercent*10|round/10) |"' "$dir"/w3-n*.json
