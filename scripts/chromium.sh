#!/usr/bin/env bash
# Makes sure Chromium is installed for the page's browser test (chromedp drives it
# headless). Idempotent: does nothing when `chromium` (or MAPYARD_CHROMIUM) is there.
# Otherwise, on Debian as root, installs Debian's chromium.
set -euo pipefail

if [ -n "${MAPYARD_CHROMIUM:-}" ] && [ -x "$MAPYARD_CHROMIUM" ]; then
	exit 0
fi
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "chromium: Chromium is not installed; install it (the page test needs it) or set MAPYARD_CHROMIUM" >&2
	exit 1
fi
echo "chromium: installing Debian's chromium" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
chromium --version
