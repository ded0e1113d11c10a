#!/usr/bin/env bash
# Checks the built images: small (a map image at most 20 MB; the orchestrator's, which
# also runs the edge with the page, its WASM module, the default asset set and HTTPS,
# at most 22 MB), a non-root user, a HEALTHCHECK that runs the binary's own
# healthcheck subcommand, OCI labels, and the orchestrator's /data volume.
set -euo pipefail
fail=0
for img in mapyard/orchestrator:latest mapyard/map:latest mapyard/tag:latest; do
	mb=20
	[ "$img" = mapyard/orchestrator:latest ] && mb=22
	max=$((mb * 1000 * 1000))
	size=$(docker image inspect -f '{{.Size}}' "$img")
	user=$(docker image inspect -f '{{.Config.User}}' "$img")
	hc=$(docker image inspect -f '{{join .Config.Healthcheck.Test " "}}' "$img")
	title=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.title"}}' "$img")
	echo "$img: $((size / 1000)) kB, user $user, healthcheck [$hc], title \"$title\""
	[ "$size" -le "$max" ] || { echo "  FAIL: larger than $mb MB"; fail=1; }
	case "$user" in ""|0|0:*|root|root:*) echo "  FAIL: runs as root"; fail=1 ;; esac
	case "$hc" in *healthcheck*) ;; *) echo "  FAIL: no healthcheck subcommand"; fail=1 ;; esac
	[ -n "$title" ] || { echo "  FAIL: no OCI title label"; fail=1; }
done
vol=$(docker image inspect -f '{{range $k, $v := .Config.Volumes}}{{$k}}{{end}}' mapyard/orchestrator:latest)
[ "$vol" = /data ] || { echo "FAIL: orchestrator image volume is '$vol', want /data"; fail=1; }
exit $fail
