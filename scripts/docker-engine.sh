#!/usr/bin/env bash
# Makes sure a Docker engine answers on this machine. Idempotent: does nothing when
# `docker info` already works. Otherwise, on Debian as root, installs Debian's docker.io
# (and docker-compose) if dockerd is missing, starts dockerd in its own session with its
# log in /var/log/mapyard-dockerd.log, and waits until it answers.
set -euo pipefail

if docker info >/dev/null 2>&1; then
	exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "docker-engine: no Docker engine answers and dockerd is not installed; install Docker and start it" >&2
		exit 1
	fi
	echo "docker-engine: installing docker.io and docker-compose" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq docker.io docker-compose >/dev/null
fi

if [ "$(id -u)" != 0 ]; then
	echo "docker-engine: dockerd is installed but not answering; start it (e.g. systemctl start docker)" >&2
	exit 1
fi

# dockerd keeps maps from reaching each other (the map network's enable_icc=false) with
# iptables rules it manages, so it runs with iptables wherever the kernel has them. Only
# where it has none (some sandboxes) is it started without; published ports on
# 127.0.0.1 still work there through docker-proxy, but maps are not isolated from each
# other (docs/security.md).
iptables_flags=()
if ! iptables -S >/dev/null 2>&1; then
	echo "docker-engine: iptables unavailable; starting dockerd without it (maps will not be isolated from each other)" >&2
	iptables_flags=(--iptables=false --ip6tables=false)
fi
echo "docker-engine: starting dockerd" >&2
# Swarm tasks (ORCH_RUNTIME=swarm, the lab) run the image the engine holds, as the kit
# builds them here, instead of asking Docker Hub for its name first.
DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1 setsid dockerd "${iptables_flags[@]}" >/var/log/mapyard-dockerd.log 2>&1 < /dev/null &

for _ in $(seq 1 60); do
	if docker info >/dev/null 2>&1; then
		echo "docker-engine: ready" >&2
		exit 0
	fi
	sleep 1
done
echo "docker-engine: dockerd did not answer within 60 s; see /var/log/mapyard-dockerd.log" >&2
tail -n 30 /var/log/mapyard-dockerd.log >&2 || true
exit 1
