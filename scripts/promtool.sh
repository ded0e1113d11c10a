#!/usr/bin/env bash
# Makes sure `promtool` (Prometheus' checker) is on PATH: the tests check every binary's
# metrics and docs/prometheus.yml with it. Idempotent: does nothing when promtool is
# already there. Otherwise, on Debian as root, installs Debian's `prometheus` package
# (which ships promtool) without starting its service.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "promtool: not installed; install Prometheus' promtool (Debian: apt-get install prometheus)" >&2
	exit 1
fi

echo "promtool: installing Debian's prometheus package" >&2
export DEBIAN_FRONTEND=noninteractive
# The package's service is of no use here: a policy-rc.d that refuses every start keeps
# the install from launching a Prometheus server, and is removed afterwards unless the
# machine had one of its own.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod +x "$policy"
	own_policy=1
fi
cleanup() { if [ "$own_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends prometheus >/dev/null
command -v promtool >/dev/null 2>&1 || { echo "promtool: the prometheus package did not install promtool" >&2; exit 1; }
echo "promtool: $(promtool --version 2>&1 | head -n 1)" >&2
