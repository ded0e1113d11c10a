#!/usr/bin/env bash
# Builds the Node.js example map (mapserver/examples/node) into a FROM scratch image,
# with no registry: this host's node binary, every shared library `ldd` lists for it
# and the dynamic loader, /etc/passwd and /etc/group for the user 10001, an
# nsswitch.conf that reads /etc/hosts first (host.docker.internal), the example's .js
# files, and the page's WebAssembly module (the world generator) with the wasm_exec.js
# of the Go that built it. The legacy builder builds it (DOCKER_BUILDKIT=0).
#
#   scripts/node-map-image.sh TAG...     e.g. mapyard/node-map:v1 mapyard/node-map:latest
#
# NODE is the node binary (default: node on PATH); WASM_DIR the directory holding the
# module, mapyard.wasm.gz or mapyard.wasm (default bin/, which `make page` fills; built
# there when absent); VERSION the image's version (its label, and the version the map
# reports).
set -euo pipefail

[ $# -gt 0 ] || { echo "usage: scripts/node-map-image.sh TAG..." >&2; exit 2; }
cd "$(dirname "$0")/.."
node=$(command -v "${NODE:-node}") || { echo "node-map-image: no node binary (set NODE)" >&2; exit 1; }
node=$(readlink -f "$node")
wasm=${WASM_DIR:-bin}
go=${GO:-go}
module=$wasm/mapyard.wasm.gz
[ -f "$module" ] || [ ! -f "$wasm/mapyard.wasm" ] || module=$wasm/mapyard.wasm
[ -f "$module" ] || GO=$go scripts/page-module.sh "$wasm"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
root=$ctx/rootfs
mkdir -p "$root/usr/bin" "$root/etc" "$root/map"
cp "$node" "$root/usr/bin/node"
# "name => /path (addr)" for each library, "/path (addr)" for the loader.
ldd "$node" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | while read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done
cp images/rootfs/etc/passwd images/rootfs/etc/group "$root/etc/"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
for f in mapserver/examples/node/*.js; do
	case $f in *selftest.js) ;; *) cp "$f" "$root/map/" ;; esac
done
cp "$module" "$root/map/"
cp "$("$go" env GOROOT)/lib/wasm/wasm_exec.js" "$root/map/"
cp mapserver/examples/node/Dockerfile "$ctx/Dockerfile"

args=()
for tag in "$@"; do args+=(-t "$tag"); done
if ! out=$(DOCKER_BUILDKIT=0 docker build -q --build-arg VERSION="${VERSION:-dev}" "${args[@]}" "$ctx" 2>&1); then
	echo "$out" >&2
	exit 1
fi
echo "node-map-image: $* ($(docker image inspect -f '{{.Size}}' "$1" | awk '{ printf "%.1f MB", $1 / 1e6 }'), node $("$node" --version))"
