#!/usr/bin/env bash
# Puts the kit's images on every node of this engine's Swarm, so that a map service
# starts wherever Swarm places it (on a node without its image, a map is image_missing).
# Two ways (docs/scale-out.md, "Images on every node"):
#
#   NODES="ssh://root@node2 ssh://root@node3" swarm-images.sh IMAGE...
#       NODES lists the engines of the other nodes, as `docker -H` reaches them
#       (ssh://user@host, or tcp://host:2376 with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH
#       set); each must be a node of this Swarm. On each, the images it lacks (or holds
#       under another id) are streamed from this engine: docker save | docker -H NODE
#       load. Run it again after every `make images` whose images the maps run.
#
#   swarm-images.sh --registry HOST:PORT IMAGE...
#       tags each image HOST:PORT/IMAGE, pushes it to that registry (one every node can
#       pull from: 127.0.0.1:5000 for a registry service published on the Swarm), and
#       prints the settings that make maps run those names.
#
# Example: NODES=ssh://root@node2 scripts/swarm-images.sh mapyard/map:latest mapyard/tag:latest
set -euo pipefail

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

registry=""
while [ $# -gt 0 ]; do
	case $1 in
	--registry) [ $# -ge 2 ] || usage; registry=$2; shift 2 ;;
	--registry=*) registry=${1#--registry=}; shift ;;
	-h | --help) usage ;;
	--) shift; break ;;
	-*) echo "swarm-images: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || usage
images=("$@")

for img in "${images[@]}"; do
	docker image inspect "$img" >/dev/null 2>&1 || { echo "swarm-images: no image $img on this engine (make images builds the kit's)" >&2; exit 1; }
done

if [ -n "$registry" ]; then
	case $registry in
	*/* | "") echo "swarm-images: --registry takes HOST:PORT, not $registry" >&2; exit 2 ;;
	esac
	maps=()
	for img in "${images[@]}"; do
		target=$registry/${img#"$registry"/}
		docker tag "$img" "$target"
		docker push -q "$target" >/dev/null
		echo "pushed $img as $target"
		case $img in mapyard/orchestrator:* | "$registry"/mapyard/orchestrator:*) ;; *) maps+=("$target" "${img#"$registry"/}") ;; esac
	done
	if [ ${#maps[@]} -gt 0 ]; then
		default=${maps[0]}
		for m in "${maps[@]}"; do case $m in "$registry"/mapyard/map:*) default=$m; break ;; esac; done
		echo
		echo "Maps run the images they name: put these in compose/mapyard.env, then make up-swarm"
		echo "(ORCH_MAP_IMAGES keeps the images' own names allowed, which map templates name):"
		echo "  ORCH_MAP_IMAGE=$default"
		echo "  ORCH_MAP_IMAGES=$(IFS=,; echo "${maps[*]}")"
		echo "and name the registry's images in admin creates (\"image\"). A map whose template names"
		echo "an image by its own name (the tag game's: mapyard/tag:latest) runs that name: load it on"
		echo "the nodes too (NODES=... $0 IMAGE...)."
	fi
	exit 0
fi

if [ -z "${NODES:-}" ]; then
	echo "swarm-images: set NODES to the engines of the Swarm's other nodes, as docker -H reaches them, e.g." >&2
	self=$(docker info --format '{{.Swarm.NodeID}}' 2>/dev/null || true)
	others=$(docker node ls -q 2>/dev/null | grep -vx "${self:-none}" | xargs -r docker node inspect --format '{{.Status.Addr}} {{.Description.Hostname}}' || true)
	if [ -n "$others" ]; then
		echo "  NODES=\"$(awk '{printf "%sssh://root@%s", NR>1?" ":"", $1}' <<<"$others")\"   # $(awk '{printf "%s%s", NR>1?", ":"", $2}' <<<"$others")" >&2
	else
		echo "  NODES=\"ssh://root@node2 ssh://root@node3\"" >&2
	fi
	echo "or use --registry HOST:PORT (docs/scale-out.md, \"Images on every node\")" >&2
	exit 2
fi

if ! swarm_nodes=$(docker node ls -q 2>/dev/null); then
	echo "swarm-images: this engine is not a Swarm manager: run it on the orchestrator's node" >&2; exit 2
fi
self=$(docker info --format '{{.Swarm.NodeID}}')
declare -A id
for img in "${images[@]}"; do id[$img]=$(docker image inspect -f '{{.Id}}' "$img"); done
fail=0
for node in $NODES; do
	if ! node_id=$(docker -H "$node" info --format '{{.Swarm.NodeID}}' 2>&1); then
		echo "$node: no engine answers: $(tr -s '\n' ' ' <<<"$node_id" | sed 's/^ //; s/ $//')" >&2; fail=1; continue
	fi
	if [ -z "$node_id" ] || ! grep -qx "$node_id" <<<"$swarm_nodes"; then
		echo "$node: not a node of this Swarm (node id '${node_id}'); skipped" >&2; fail=1; continue
	fi
	if [ "$node_id" = "$self" ]; then echo "$node: this node; skipped"; continue; fi
	missing=()
	for img in "${images[@]}"; do
		[ "$(docker -H "$node" image inspect -f '{{.Id}}' "$img" 2>/dev/null)" = "${id[$img]}" ] || missing+=("$img")
	done
	if [ ${#missing[@]} = 0 ]; then echo "$node: has them all"; continue; fi
	echo "$node: loading ${missing[*]}"
	if ! docker save "${missing[@]}" | docker -H "$node" load -q >/dev/null; then
		echo "$node: the load failed" >&2; fail=1; continue
	fi
	for img in "${missing[@]}"; do
		[ "$(docker -H "$node" image inspect -f '{{.Id}}' "$img" 2>/dev/null)" = "${id[$img]}" ] ||
			{ echo "$node: $img is not there after the load" >&2; fail=1; }
	done
done
exit $fail
