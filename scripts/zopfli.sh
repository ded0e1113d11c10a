#!/usr/bin/env bash
# Makes sure `zopfli` is on PATH: `make page` compresses the browser client's module with
# it (gzip-compatible, about 5 % smaller than gzip -9, which keeps the page under 1 MB).
# Idempotent: does nothing when zopfli is there. Otherwise, on Debian as root, installs
# Debian's zopfli.
set -euo pipefail

if command -v zopfli >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "zopfli: not installed; install it (Debian: apt-get install zopfli), or make page falls back to gzip -9" >&2
	exit 1
fi
echo "zopfli: installing Debian's zopfli" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq zopfli >/dev/null
