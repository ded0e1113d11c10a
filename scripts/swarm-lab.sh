#!/usr/bin/env bash
# A two-node Docker Swarm on one machine, for tests and benchmarks of the Swarm runtime.
# Node 1 is the host's Docker engine, the Swarm's manager. Node 2 is a second dockerd
# (with a containerd of its own) in a network namespace of its own (mapyard-node2),
# joined to the host by a veth pair (host 10.213.0.1/24, node 10.213.0.2/24) and to the
# Swarm as a worker: overlay traffic between the nodes crosses that veth and never
# leaves the machine. The nodes carry the labels mapyard.node=1 and mapyard.node=2, so
# a service is pinned with the constraint node.labels.mapyard.node==2.
#
#   swarm-lab.sh up              bring the lab up (or mend it); prints node 2's DOCKER_HOST
#   swarm-lab.sh status          the nodes, and whether the lab is up (exit 1 when not)
#   swarm-lab.sh load IMAGE...   copy images from node 1 to node 2 (docker save | docker load)
#   swarm-lab.sh kill            node lost: kill -9 node 2's engine, containerd, shims and containers
#   swarm-lab.sh down            node 2 leaves and is removed, everything the lab made with it
#   swarm-lab.sh deps            install what the lab needs (Debian, as root): iproute2, kmod
#
# Idempotent, and serialised by a lock (/run/mapyard-swarm-lab.lock), so that several
# test binaries may run `up` and `load` at once. `up` after `kill` starts node 2 again
# and waits until the Swarm reports it ready. The host engine is put in Swarm mode by
# `up` when it is in none (advertised on 10.213.0.1), and leaves it on `down` only then.
#
# Exit status: 0 done; 1 failed (the message says why); 3 this machine cannot host the
# lab (not root, or the kernel lacks network namespaces, veth pairs or VXLAN), so a
# test can tell "cannot here" from "broken".
set -euo pipefail

NS=mapyard-node2
HOST_IF=mapyard-node2 # the veth's host side; its other side is eth0 in the namespace
HOST_ADDR=10.213.0.1
NODE_ADDR=10.213.0.2
NET=10.213.0.0/24
RUN=/run/mapyard-node2
LIB=/var/lib/mapyard-node2
SOCK=$RUN/docker.sock
NODE2_HOST=unix://$SOCK
CONTAINERD_SOCK=$RUN/containerd/containerd.sock
LOG=/var/log/mapyard-node2-dockerd.log
CONTAINERD_LOG=/var/log/mapyard-node2-containerd.log
STATE=$LIB/state # lines key=value: swarm_initialised=1 when `up` initialised the host's Swarm
LOCK=/run/mapyard-swarm-lab.lock
# Node 2's processes live in two cgroups of their own: its engine (dockerd, containerd,
# the shims) and its containers (dockerd's --cgroup-parent). `kill` kills what is in them.
ENGINE_CGROUP=mapyard-node2-engine
CONTAINER_CGROUP=mapyard-node2
NODE2_HOSTNAME=mapyard-node2

say() { echo "swarm-lab: $*" >&2; }
die() {
	say "$*"
	exit 1
}
cannot() {
	say "this machine cannot host the lab: $*"
	exit 3
}
node2() { DOCKER_HOST=$NODE2_HOST docker "$@"; }

# The cgroup hierarchy the lab tracks node 2's processes in: the unified one (cgroup
# v2), or v1's pids hierarchy.
cgroup_root() {
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		echo /sys/fs/cgroup
	elif [ -d /sys/fs/cgroup/pids ]; then
		echo /sys/fs/cgroup/pids
	else
		cannot "no cgroup v2 hierarchy and no cgroup v1 pids hierarchy under /sys/fs/cgroup"
	fi
}

need_tools() {
	[ "$(id -u)" = 0 ] || cannot "it must run as root (network namespaces, a second dockerd)"
	local missing=()
	for t in ip nsenter unshare flock setsid dockerd containerd docker; do
		command -v "$t" >/dev/null 2>&1 || missing+=("$t")
	done
	[ ${#missing[@]} = 0 ] || die "missing commands: ${missing[*]} (scripts/swarm-lab.sh deps installs iproute2; scripts/docker-engine.sh the engine)"
}

# check_kernel tries, in a scratch namespace, what the lab needs of the kernel.
check_kernel() {
	local ns=mapyard-labcheck-$$ out why=""
	if ! out=$(ip netns add "$ns" 2>&1); then
		cannot "the kernel lacks network namespaces (ip netns add: $out)"
	fi
	if ! out=$(ip -n "$ns" link add labcheck0 type veth peer name labcheck1 2>&1); then
		why="veth pairs (ip link add type veth: $out)"
	elif ! out=$(ip -n "$ns" link add labcheck2 type vxlan id 42 dstport 4789 2>&1); then
		why="VXLAN, which overlay networks need (ip link add type vxlan: $out)"
	fi
	ip netns del "$ns" 2>/dev/null || true
	[ -z "$why" ] || cannot "the kernel lacks $why"
}

lock() {
	exec 9>"$LOCK"
	flock -w 600 9 || die "another swarm-lab.sh held $LOCK for 10 minutes"
}

state_get() { sed -n "s/^$1=//p" "$STATE" 2>/dev/null | tail -1; }
state_set() {
	mkdir -p "$LIB"
	{ grep -v "^$1=" "$STATE" 2>/dev/null || true; echo "$1=$2"; } >"$STATE.new"
	mv "$STATE.new" "$STATE"
}

node2_answers() { node2 version -f '{{.Server.Version}}' >/dev/null 2>&1; }

# wait_until SECONDS WHAT CMD...: runs CMD every 0.2 s until it succeeds.
wait_until() {
	local max=$1 what=$2
	shift 2
	local i
	for ((i = 0; i < max * 5; i++)); do
		if "$@"; then return 0; fi
		sleep 0.2
	done
	die "$what: not within ${max}s"
}

# --- the network: the namespace and the veth pair ---------------------------------

up_network() {
	if [ ! -e "/run/netns/$NS" ]; then
		ip netns add "$NS"
	fi
	if ! ip link show "$HOST_IF" >/dev/null 2>&1; then
		local other
		other=$(ip -4 -o addr show to "$NET" | awk '{print $2}' | head -1)
		[ -z "$other" ] || die "$NET is already on interface $other: the lab needs it"
		ip link add "$HOST_IF" type veth peer name eth0 netns "$NS"
	fi
	ip addr replace "$HOST_ADDR/24" dev "$HOST_IF"
	ip link set "$HOST_IF" up
	ip -n "$NS" addr replace "$NODE_ADDR/24" dev eth0
	ip -n "$NS" link set eth0 up
	ip -n "$NS" link set lo up
}

# --- node 2's engine ---------------------------------------------------------------

# cgroup_pids lists the processes of node 2's engine and containers.
cgroup_pids() {
	local root d
	root=$(cgroup_root)
	for d in "$root/$ENGINE_CGROUP" "$root/$CONTAINER_CGROUP"; do
		[ -d "$d" ] || continue
		find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true
	done
}

# kill_node2 kills -9 every process of node 2 (engine and containers) until none is
# left: a node lost at once, as by a power cut.
kill_node2() {
	local pids i
	for ((i = 0; i < 100; i++)); do
		pids=$(cgroup_pids)
		if [ -z "$pids" ]; then
			rm -f "$RUN/docker.pid"
			return 0
		fi
		# shellcheck disable=SC2086 # one pid a word
		kill -9 $pids 2>/dev/null || true
		sleep 0.1
	done
	die "node 2's processes survived kill -9 for 10 s: $(cgroup_pids | tr '\n' ' ')"
}

write_configs() {
	mkdir -p "$LIB/docker" "$LIB/containerd" "$RUN/exec" "$RUN/containerd"
	# A configuration of its own, so the host's /etc/docker/daemon.json does not apply.
	[ -f "$LIB/daemon.json" ] || echo '{}' >"$LIB/daemon.json"
	# A containerd of its own: dockerd would use the system's when /run/containerd has
	# its socket, and node 2's tasks must die with node 2.
	cat >"$LIB/containerd.toml" <<EOF
version = 2
root = "$LIB/containerd"
state = "$RUN/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$CONTAINERD_SOCK"

[debug]
  address = "$RUN/containerd/debug.sock"
EOF
}

start_node2() {
	if node2_answers; then
		return 0
	fi
	# An engine of node 2 that runs but does not answer may be starting: wait for it a
	# while, else replace it.
	if [ -n "$(cgroup_pids)" ]; then
		local i
		for ((i = 0; i < 150; i++)); do
			if node2_answers; then return 0; fi
			sleep 0.2
		done
		say "node 2's engine runs but does not answer; killing it to start it again"
		kill_node2
	fi
	write_configs
	local root iptables_flags=()
	root=$(cgroup_root)
	mkdir -p "$root/$ENGINE_CGROUP"
	# Node 2 has iptables of its own in its namespace; only where they do not work is it
	# started without them (as scripts/docker-engine.sh does for the host).
	if ! ip netns exec "$NS" iptables -S >/dev/null 2>&1; then
		say "iptables unavailable in node 2's namespace; starting its dockerd without them"
		iptables_flags=(--iptables=false --ip6tables=false)
	fi
	rm -f "$RUN/docker.pid"
	echo "--- $(date -u +%FT%TZ) swarm-lab: starting node 2" >>"$LOG"
	say "starting node 2's engine (log: $LOG)"
	# In node 2's cgroup, network namespace, a mount namespace of its own (its mounts die
	# with it) and a UTS namespace (its hostname names it in `docker node ls`). The lock's
	# descriptor is closed so the engine never holds it.
	(
		echo "$BASHPID" >"$root/$ENGINE_CGROUP/cgroup.procs"
		exec setsid nsenter --net="/run/netns/$NS" unshare --mount --propagation slave --uts \
			bash -c '
				hostname "$1"
				containerd --config "$2" >>"$3" 2>&1 &
				for _ in $(seq 1 100); do [ -S "$4" ] && break; sleep 0.1; done
				shift 4
				# Swarm tasks run the image the node holds, as the kit expects, instead
				# of asking Docker Hub for it first (docs/scale-out.md).
				DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1 exec dockerd "$@"
			' node2 "$NODE2_HOSTNAME" "$LIB/containerd.toml" "$CONTAINERD_LOG" "$CONTAINERD_SOCK" \
			--config-file "$LIB/daemon.json" --data-root "$LIB/docker" --exec-root "$RUN/exec" \
			--pidfile "$RUN/docker.pid" -H "$NODE2_HOST" --containerd "$CONTAINERD_SOCK" \
			--cgroup-parent "/$CONTAINER_CGROUP" "${iptables_flags[@]}"
	) >>"$LOG" 2>&1 </dev/null 9>&- &
	local i
	for ((i = 0; i < 300; i++)); do
		if node2_answers; then return 0; fi
		if [ -z "$(cgroup_pids)" ]; then break; fi
		sleep 0.2
	done
	tail -n 30 "$LOG" >&2 || true
	die "node 2's engine did not answer on $NODE2_HOST within 60 s; see $LOG"
}

# --- the Swarm ---------------------------------------------------------------------

# host_swarm makes the host's engine the Swarm's manager on HOST_ADDR.
host_swarm() {
	local st ctl addr nodes
	read -r st ctl addr < <(docker info -f '{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}} {{.Swarm.NodeAddr}}')
	case "$st/$ctl" in
	inactive/*)
		init_swarm
		return
		;;
	active/true) ;;
	*) die "the host's engine is in a Swarm as a worker or in state $st (node address $addr): leave it first (docker swarm leave) or run the lab elsewhere" ;;
	esac
	if [ "$addr" = "$HOST_ADDR" ]; then
		return 0
	fi
	nodes=$(docker node ls -q | wc -l)
	if [ "$nodes" -gt 1 ]; then
		die "the host's engine manages a Swarm of $nodes nodes advertised on $addr, not $HOST_ADDR: the lab will not break it (docker swarm leave --force, then up)"
	fi
	say "the host's engine is alone in a Swarm advertised on $addr: leaving it and initialising the lab's on $HOST_ADDR (its services are lost)"
	docker swarm leave --force >/dev/null
	init_swarm
}

init_swarm() {
	say "initialising a Swarm on the host's engine, advertised on $HOST_ADDR"
	docker swarm init --advertise-addr "$HOST_ADDR" --listen-addr "$HOST_ADDR:2377" >/dev/null
	state_set swarm_initialised 1
}

node2_id() { node2 info -f '{{.Swarm.NodeID}}' 2>/dev/null; }

# join_node2 makes node 2 a worker of the host's Swarm.
join_node2() {
	local st id i
	for ((i = 0; i < 100; i++)); do
		st=$(node2 info -f '{{.Swarm.LocalNodeState}}')
		[ "$st" = pending ] || break # pending: reconnecting after a restart
		sleep 0.2
	done
	id=$(node2_id)
	if [ "$st" = active ] && docker node inspect "$id" >/dev/null 2>&1; then
		return 0
	fi
	if [ "$st" != inactive ]; then
		say "node 2 is in another Swarm or in state $st: it leaves it to join the host's"
		node2 swarm leave --force >/dev/null
	fi
	say "node 2 joins the Swarm as a worker"
	node2 swarm join --token "$(docker swarm join-token -q worker)" \
		--advertise-addr "$NODE_ADDR" --listen-addr "$NODE_ADDR:2377" "$HOST_ADDR:2377" >/dev/null
}

# forget_stale_nodes removes from the Swarm the nodes an earlier node 2 left behind.
forget_stale_nodes() {
	local keep=$1 id host
	while read -r id host; do
		if [ "$id" != "$keep" ] && [ "$host" = "$NODE2_HOSTNAME" ]; then
			docker node rm --force "$id" >/dev/null 2>&1 || true
		fi
	done < <(docker node ls --format '{{.ID}} {{.Hostname}}' 2>/dev/null)
}

label_node() {
	local id=$1 value=$2
	if [ "$(docker node inspect -f '{{index .Spec.Labels "mapyard.node"}}' "$id")" != "$value" ]; then
		docker node update --label-add "mapyard.node=$value" "$id" >/dev/null
	fi
}

node_ready() { [ "$(docker node inspect -f '{{.Status.State}}' "$1" 2>/dev/null)" = ready ]; }

# --- commands ----------------------------------------------------------------------

cmd_up() {
	need_tools
	check_kernel
	docker info >/dev/null 2>&1 || die "the host's Docker engine does not answer (scripts/docker-engine.sh starts one)"
	lock
	up_network
	start_node2
	host_swarm
	join_node2
	local id1 id2
	id1=$(docker info -f '{{.Swarm.NodeID}}')
	id2=$(node2_id)
	forget_stale_nodes "$id2"
	wait_until 60 "node 2 ($id2) ready in the Swarm" node_ready "$id2"
	label_node "$id1" 1
	label_node "$id2" 2
	echo "$NODE2_HOST"
}

# lab_state prints whether the lab is up, and if not, why; it fails when not.
lab_state() {
	local why=""
	if [ ! -e "/run/netns/$NS" ]; then
		why="no network namespace $NS"
	elif ! node2_answers; then
		why="node 2's engine does not answer on $NODE2_HOST"
	elif [ "$(docker info -f '{{.Swarm.ControlAvailable}} {{.Swarm.NodeAddr}}' 2>/dev/null)" != "true $HOST_ADDR" ]; then
		why="the host's engine is not the Swarm's manager on $HOST_ADDR"
	elif ! node_ready "$(node2_id)"; then
		why="node 2 is not ready in the Swarm"
	fi
	if [ -n "$why" ]; then
		echo "lab: down ($why)"
		return 1
	fi
	echo "lab: up (node 2: DOCKER_HOST=$NODE2_HOST)"
}

cmd_status() {
	need_tools
	lock
	if [ "$(docker info -f '{{.Swarm.ControlAvailable}}' 2>/dev/null)" = true ]; then
		docker node ls
	fi
	lab_state
}

cmd_load() {
	[ $# -gt 0 ] || die "usage: swarm-lab.sh load IMAGE..."
	need_tools
	lock
	node2_answers || die "node 2 does not answer on $NODE2_HOST: run scripts/swarm-lab.sh up"
	local img id
	for img in "$@"; do
		id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null) || die "node 1 has no image $img"
		if node2 image inspect "$id" >/dev/null 2>&1; then
			if [ "$(node2 image inspect -f '{{.Id}}' "$img" 2>/dev/null)" != "$id" ] && [[ $id != *"$img"* ]]; then
				node2 tag "$id" "$img"
			fi
			say "node 2 has $img"
			continue
		fi
		say "loading $img on node 2"
		docker save "$img" | node2 load -q >&2
	done
}

cmd_kill() {
	need_tools
	lock
	[ -n "$(cgroup_pids)" ] || die "node 2 is not running"
	kill_node2
	say "node 2 killed (engine, containerd, shims and containers)"
}

cmd_down() {
	need_tools
	lock
	local id2=""
	if node2_answers; then
		id2=$(node2_id)
		node2 swarm leave --force >/dev/null 2>&1 || true
		say "stopping node 2's engine"
		local pid
		pid=$(cat "$RUN/docker.pid" 2>/dev/null || true)
		if [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; then
			local i
			for ((i = 0; i < 100; i++)); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.2
			done
		fi
	fi
	kill_node2
	if [ "$(docker info -f '{{.Swarm.ControlAvailable}}' 2>/dev/null)" = true ]; then
		if [ -n "$id2" ]; then
			docker node rm --force "$id2" >/dev/null 2>&1 || true
		fi
		forget_stale_nodes ""
	fi
	if [ "$(state_get swarm_initialised)" = 1 ] &&
		[ "$(docker info -f '{{.Swarm.NodeAddr}}' 2>/dev/null)" = "$HOST_ADDR" ]; then
		say "the host's engine leaves the Swarm the lab initialised"
		docker swarm leave --force >/dev/null
	fi
	if [ -e "/run/netns/$NS" ]; then
		ip netns del "$NS" # removes the veth pair with it
	fi
	ip link del "$HOST_IF" 2>/dev/null || true
	# The cgroups, in every hierarchy (cgroup v1 has one per controller).
	local d
	for d in /sys/fs/cgroup/{,*/}{"$CONTAINER_CGROUP","$ENGINE_CGROUP"}; do
		if [ -d "$d" ]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
	done
	# Node 2's mounts lived in its own mount namespace; any that reached the host's are
	# unmounted before its directories go.
	awk -v lib="$LIB/" -v run="$RUN/" 'index($5, lib) == 1 || index($5, run) == 1 {print $5}' /proc/self/mountinfo |
		sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf "$LIB" "$RUN"
	say "down"
}

cmd_deps() {
	local want=()
	command -v ip >/dev/null 2>&1 || want+=(iproute2)
	command -v modprobe >/dev/null 2>&1 || want+=(kmod)
	[ ${#want[@]} -gt 0 ] || exit 0
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		die "missing ${want[*]}: install them (Debian: apt-get install ${want[*]})"
	fi
	say "installing ${want[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get -o DPkg::Lock::Timeout=300 update -qq
	apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${want[@]}" >/dev/null
}

case "${1:-}" in
up) cmd_up ;;
status) cmd_status ;;
load)
	shift
	cmd_load "$@"
	;;
kill) cmd_kill ;;
down) cmd_down ;;
deps) cmd_deps ;;
*) die "usage: swarm-lab.sh up|status|load IMAGE...|kill|down|deps" ;;
esac
