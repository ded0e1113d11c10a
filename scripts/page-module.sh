#!/usr/bin/env bash
# Builds the browser client's WebAssembly module (mapserver/cmd/client-wasm) into DIR
# and compresses it for the edge, which serves DIR/mapyard.wasm.gz as it lies.
#
#   scripts/page-module.sh DIR [LDFLAGS]
#
# Size matters more than speed outside mapyard's own packages: the Go runtime, fmt and
# encoding/json are built without inlining (-l), which makes the module about 5 % smaller
# once compressed, while mapyard's generator, movement and decoder keep theirs. The
# compression is zopfli's (gzip-compatible, about 5 % smaller than gzip -9; see
# scripts/zopfli.sh), or gzip -9 without it; it is skipped when the module did not change.
# `make page` and the page's browser test build the module this one way.
set -euo pipefail

dir=${1:?usage: scripts/page-module.sh DIR [LDFLAGS]}
ldflags=${2:--s -w}
cd "$(dirname "$0")/.."
mkdir -p "$dir"
GOOS=js GOARCH=wasm CGO_ENABLED=0 ${GO:-go} build -trimpath -ldflags "$ldflags" \
	-gcflags=all=-l -gcflags='github.com/mapyard/mapyard/...=' \
	-o "$dir/mapyard.wasm" ./mapserver/cmd/client-wasm
sum=$(sha256sum "$dir/mapyard.wasm" | cut -c1-64)
if [ -f "$dir/mapyard.wasm.gz" ] && [ "$(cat "$dir/mapyard.wasm.sum" 2>/dev/null)" = "$sum" ]; then
	exit 0
fi
if command -v zopfli >/dev/null 2>&1; then
	zopfli -c "$dir/mapyard.wasm" >"$dir/mapyard.wasm.gz.tmp"
else
	echo "page: zopfli is not installed (scripts/zopfli.sh): gzip -9 leaves the module about 5 % larger" >&2
	gzip -9 -n -c "$dir/mapyard.wasm" >"$dir/mapyard.wasm.gz.tmp"
fi
mv "$dir/mapyard.wasm.gz.tmp" "$dir/mapyard.wasm.gz"
echo "$sum" >"$dir/mapyard.wasm.sum"
