#!/usr/bin/env bash
# Prints the markdown table of a W1 run directory written by scripts/bench-w1.sh:
# mapyard and Colyseus side by side per N, with the ratios the targets are stated in;
# the whole path (map + edge, PATHS=edge) in a table of its own.
set -euo pipefail
dir=${1:?usage: w1-table.sh DIR}
f1() { jq -r "$1" "$2"; }
if ls "$dir"/mapyard-n*.json >/dev/null 2>&1; then
echo "| N | system | server CPU % (1 core) | RSS MB | tick p50 / p99 ms | patch p99 ms | interval p99 ms | kbit/s down per client | snapshots/s per client | entities in view | drops | bots CPU % | foreign load % |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
fi
ratios=""
for n in $(cat "$dir"/mapyard-n*.json 2>/dev/null | jq -r .n | sort -n); do
	m="$dir/mapyard-n$n.json"
	jq -r '"| \(.n) | mapyard | \(.server.cpuPercent*10|round/10) | \(.server.rssMb*10|round/10) (idle \(.server.rssIdleMb)) | \(.server.tickP50Ms*100|round/100) / \(.server.tickP99Ms*100|round/100) (tick + snapshots) | in tick | \(.server.intervalP99Ms*10|round/10) | \(.bots.kbitDownPerClient*10|round/10) | \(.bots.snapshotsPerSec*100|round/100) | \(.bots.entitiesInView*10|round/10) | \(.bots.dropped + .server.droppedClients) (joins failed \(.bots.joinFailures)) | \(.bots.botsCpuPercent*10|round/10) | \(.server.foreignCpuPercent*10|round/10) |"' "$m"
	c="$dir/colyseus-n$n.json"
	if [ -f "$c" ]; then
		jq -r '"| \(.config.N) | Colyseus | \(.server.cpu_pct*10|round/10) | \(.server.rss_end_mb*10|round/10) (idle \(.server.rss_idle_mb|round)) | \(.server.tick.p50*100|round/100) / \(.server.tick.p99*100|round/100) (tick only) | \(.server.patch.p99*10|round/10) | \(.server.interval.p99*10|round/10) | \(.bots.down_payload_Bps_per_client*8/100|round/10) | \(.bots.patches_per_s_per_client*100|round/100) | \(.server.meanVisible*10|round/10) | \(.bots.drops_total) (joined \(.joined)/\(.config.N)) | \(.bots.cpu_pct*10|round/10) | \(.machine.other_cpu_pct*10|round/10) |"' "$c"
		ratios+=$(jq -rn --slurpfile m "$m" --slurpfile c "$c" '
			($m[0]) as $a | ($c[0]) as $b |
			($b.bots.down_payload_Bps_per_client*8/1000) as $ck |
			"| \($a.n) | \(($a.server.cpuPercent/$b.server.cpu_pct)*100|round/100) | \(($a.bots.kbitDownPerClient/$ck)*100|round/100) | \((($a.bots.kbitDownPerClient/$a.bots.entitiesInView)/($ck/$b.server.meanVisible))*100|round/100) | \(($a.server.tickP99Ms/($b.server.tick.p99+$b.server.patch.p99))*100|round/100) |"')
		ratios+=$'\n'
	fi
done
if [ -n "$ratios" ]; then
	echo
	echo "| N | server CPU per player, mapyard ÷ Colyseus (target ≤ 0.5) | kbit/s per client, mapyard ÷ Colyseus (target ≤ 0.5) | kbit/s per entity in view, mapyard ÷ Colyseus | tick + snapshot p99, mapyard ÷ Colyseus (tick + patch) |"
	echo "|---|---|---|---|---|"
	printf '%s' "$ratios"
fi
if [ -f "$dir/mapyard-idle.json" ]; then
	echo
	jq -r '"Idle player (one bot standing still on W1'"'"'s map): \(.bots.kbitDownPerClient*100|round/100) kbit/s down (target ≤ 2), \(.bots.entitiesInView*10|round/10) entities in view."' "$dir/mapyard-idle.json"
fi
if [ -f "$dir/mapyard-idle-quiet.json" ]; then
	jq -r '"Idle player alone on the same map without NPCs (nothing in view moves): \(.bots.kbitDownPerClient*100|round/100) kbit/s down (target ≤ 2)."' "$dir/mapyard-idle-quiet.json"
fi
if [ -f "$dir/mapyard-idle-rss.json" ]; then
	jq -r '"Idle map container (W1'"'"'s map, 200 NPCs, no player): RSS \(.rssMb) MB (target ≤ 20)."' "$dir/mapyard-idle-rss.json"
fi
# The whole path (PATHS=edge): the map and the edge that every message crosses, their
# sum per player against Colyseus', which serves its clients itself.
edge_rows=$(ls "$dir"/mapyard-edge-n*.json 2>/dev/null | sort -V || true)
if [ -n "$edge_rows" ]; then
	echo
	echo "Whole path (bots through the edge; map + edge against Colyseus alone, same run):"
	echo
	echo "| N | map CPU % | edge CPU % | map + edge CPU % | Colyseus CPU % | CPU per player, (map + edge) ÷ Colyseus (target ≤ 0.5) | map alone ÷ Colyseus | kbit/s per client mapyard / Colyseus (ratio, target ≤ 0.5) | snapshots/s per client mapyard / Colyseus | entities in view mapyard / Colyseus | tick + snapshot p50 / p99 ms | drops mapyard / Colyseus | map / edge RSS MB (edge KB per conn) | bots CPU % mapyard / Colyseus | foreign load % mapyard / Colyseus |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for m in $edge_rows; do
		n=$(jq -r .n "$m")
		c="$dir/colyseus-n$n.json"
		if [ -f "$c" ]; then
			jq -rn --slurpfile m "$m" --slurpfile c "$c" '
				def r(x; d): (x * d | round) / d;
				($m[0]) as $a | ($c[0]) as $b |
				($a.server.cpuPercent + $a.edge.cpuPercent) as $sum |
				($b.bots.down_payload_Bps_per_client*8/1000) as $ck |
				(if $b.joined > 0 then $b.server.cpu_pct / $b.joined else null end) as $cpp |
				"| \($a.n) | \(r($a.server.cpuPercent; 10)) | \(r($a.edge.cpuPercent; 10)) | \(r($sum; 10)) | \(r($b.server.cpu_pct; 10)) | \(if $cpp then r(($sum / $a.bots.bots) / $cpp; 100) else "–" end) | \(if $cpp then r(($a.server.cpuPercent / $a.bots.bots) / $cpp; 100) else "–" end) | \(r($a.bots.kbitDownPerClient; 10)) / \(r($ck; 10)) (\(r($a.bots.kbitDownPerClient / $ck; 100))) | \(r($a.bots.snapshotsPerSec; 100)) / \(r($b.bots.patches_per_s_per_client; 100)) | \(r($a.bots.entitiesInView; 10)) / \(r($b.server.meanVisible; 10)) | \(r($a.server.tickP50Ms; 100)) / \(r($a.server.tickP99Ms; 100)) | \($a.bots.dropped + $a.server.droppedClients) (joins failed \($a.bots.joinFailures)) / \($b.bots.drops_total) (joined \($b.joined)/\($b.config.N)) | \(r($a.server.rssMb; 10)) / \(r($a.edge.rssMb; 10)) (\(r($a.edge.kbPerConnection; 10))) | \(r($a.bots.botsCpuPercent; 10)) / \(r($b.bots.cpu_pct; 10)) | \(r($a.server.foreignCpuPercent; 10)) / \(r($b.machine.other_cpu_pct; 10)) |"'
		else
			jq -r 'def r(x; d): (x * d | round) / d;
				"| \(.n) | \(r(.server.cpuPercent; 10)) | \(r(.edge.cpuPercent; 10)) | \(r(.server.cpuPercent + .edge.cpuPercent; 10)) | – | – | – | \(r(.bots.kbitDownPerClient; 10)) / – | \(r(.bots.snapshotsPerSec; 100)) / – | \(r(.bots.entitiesInView; 10)) / – | \(r(.server.tickP50Ms; 100)) / \(r(.server.tickP99Ms; 100)) | \(.bots.dropped + .server.droppedClients) (joins failed \(.bots.joinFailures)) / – | \(r(.server.rssMb; 10)) / \(r(.edge.rssMb; 10)) (\(r(.edge.kbPerConnection; 10))) | \(r(.bots.botsCpuPercent; 10)) / – | \(r(.server.foreignCpuPercent; 10)) / – |"' "$m"
		fi
	done
fi
