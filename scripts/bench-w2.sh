#!/usr/bin/env bash
# Workload W2, the WebSocket proxy hop (../shared/WORKLOADS.md, docs/benchmarks.md):
# bin/edge with a fixed route to the echo server of the wsproxy peer harness, added as
# an extra target to that harness's interleaved run beside the direct connection,
# Go's httputil.ReverseProxy and Debian's nginx (worker_processes 1). Copies the
# harness's table, raw samples and environment into OUT and prints the table.
#
# Usage: scripts/bench-w2.sh          (make bench-w2 builds the binaries first)
# Env:   PEER=/tmp/peers/wsproxy (a writable copy of ../shared/peers/wsproxy, made
#        on first use: the harness builds its tools and writes its results there)
#        REPS=3 DUR=10 BCAST_DUR=15 TARGETS="direct goproxy nginx" IDLE_WAIT=15 RETRIES=1
#        (the harness's quiet gate: how long to wait for an idle machine before each
#        test, and how often to retry a disturbed one), EDGE_ENGINE (epoll or
#        goroutine; the edge's default, epoll, when empty),
#        OUT=bench-results/w2-<UTC time>,
#        TLS=1: W2 over TLS. One certificate (ECDSA P-256, self-signed for 127.0.0.1,
#        which the load generator trusts through SSL_CERT_FILE) for the edge and for
#        nginx (TLS 1.2 and 1.3, as the edge), both dialled with wss:// (TARGETS
#        defaults to "direct nginx"; direct stays plain, the floor), from a copy of the
#        harness at PEER-tls whose nginx.conf and nginx URL are changed. Then full TLS
#        handshakes (scripts/bench/tls-handshakes.go, HS_CONNS=4 clients for HS_DUR=10
#        seconds, HS_REPS=REPS times (0: none), the targets' order alternating), offering Go's default
#        key exchanges (X25519MLKEM768 first: the edge takes it, nginx 1.22 takes
#        X25519) and X25519 alone, against the edge and a fresh nginx of the same
#        configuration on port 18087: handshakes per second and per second of the
#        server's CPU, in handshakes.md.
# The harness and the edge listen on fixed loopback ports 18081-18086 (and 18087 with
# TLS=1); nothing else may listen there.
set -euo pipefail
cd "$(dirname "$0")/.."
PEER="${PEER:-/tmp/peers/wsproxy}"
OUT="${OUT:-bench-results/w2-$(date -u +%Y%m%dT%H%M%SZ)}"
[ -x bin/edge ] || { echo "bin/edge missing: run make build" >&2; exit 1; }
# The harness builds its tools and writes its results in its own directory: a writable
# copy of the shared one beside the checkout is made on first use.
if [ ! -x "$PEER/run.sh" ] && [ -x ../shared/peers/wsproxy/run.sh ]; then
	mkdir -p "$(dirname "$PEER")"
	cp -r ../shared/peers/wsproxy "$PEER"
fi
[ -x "$PEER/run.sh" ] || { echo "$PEER/run.sh missing: cp -r ../shared/peers/wsproxy $(dirname "$PEER")/" >&2; exit 1; }
command -v nginx >/dev/null || { echo "nginx is required (Debian: apt-get install nginx)" >&2; exit 1; }
command -v jq >/dev/null || { echo "jq is required" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

EDGE_PID="" NGINX_PID=""
cleanup() {
	for p in $EDGE_PID $NGINX_PID; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

HARNESS=$PEER SCHEME=ws DEFAULT_TARGETS="direct goproxy nginx" EDGE_TLS=()
if [ "${TLS:-0}" = 1 ]; then
	command -v openssl >/dev/null || { echo "openssl is required with TLS=1" >&2; exit 1; }
	mkdir -p "$OUT/tls"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
		-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$OUT/tls/key.pem" -out "$OUT/tls/cert.pem" 2>/dev/null
	export SSL_CERT_FILE="$OUT/tls/cert.pem"
	HARNESS="$PEER-tls" SCHEME=wss DEFAULT_TARGETS="direct nginx"
	rm -rf "$HARNESS" && cp -r "$PEER" "$HARNESS" && rm -rf "$HARNESS/results"
	sed -i "s|listen 127.0.0.1:18083;|listen 127.0.0.1:18083 ssl;\\n        ssl_certificate $OUT/tls/cert.pem;\\n        ssl_certificate_key $OUT/tls/key.pem;\\n        ssl_protocols TLSv1.2 TLSv1.3;|" "$HARNESS/nginx.conf"
	sed -i 's|^URL\[nginx\]=ws://|URL[nginx]=wss://|' "$HARNESS/run.sh"
	grep -q "ssl_certificate_key $OUT/tls/key.pem" "$HARNESS/nginx.conf" && grep -q '^URL\[nginx\]=wss://' "$HARNESS/run.sh" ||
		{ echo "the harness's nginx.conf or run.sh is not as this script expects" >&2; exit 1; }
	EDGE_TLS=(EDGE_TLS_CERT_FILE="$OUT/tls/cert.pem" EDGE_TLS_KEY_FILE="$OUT/tls/key.pem")
fi
TARGETS="${TARGETS:-$DEFAULT_TARGETS}"

# The edge routes instance "1" to the echo server; its per-address limits are off, or
# they would refuse the load generator's 100 and 500 connections from one address.
env "${EDGE_TLS[@]}" EDGE_STATIC_ROUTES=1=18081 EDGE_PUBLIC_ADDR=127.0.0.1:18085 EDGE_METRICS_ADDR=127.0.0.1:18086 \
	EDGE_CREDENTIAL=bench-only-unused-credential EDGE_WS_RATE_PER_MIN=0 EDGE_JOIN_RATE_PER_MIN=0 \
	EDGE_LOG_LEVEL=warn ${EDGE_ENGINE:+EDGE_ENGINE=$EDGE_ENGINE} bin/edge >>"$OUT/edge.log" 2>&1 &
EDGE_PID=$!
scripts/wait-ready.sh http://127.0.0.1:18086/healthz 30 >/dev/null
echo "edge pid $EDGE_PID (engine ${EDGE_ENGINE:-default}, ${SCHEME}), commit $(git describe --tags --always --dirty)" | tee "$OUT/edge.txt"

(cd "$HARNESS" && REPS="${REPS:-3}" DUR="${DUR:-10}" BCAST_DUR="${BCAST_DUR:-15}" IDLE_WAIT="${IDLE_WAIT:-15}" \
	RETRIES="${RETRIES:-1}" TARGETS="$TARGETS" NGINX_WORKERS=1 \
	EXTRA_NAME=edge EXTRA_URL=$SCHEME://127.0.0.1:18085/maps/1/ws EXTRA_PID="$EDGE_PID" ./run.sh) >"$OUT/run.log" 2>&1 ||
	{ tail -n 20 "$OUT/run.log" >&2; exit 1; }
run=$(readlink -f "$HARNESS/results/latest")
cp "$run/table.md" "$run/raw.jsonl" "$run/attempts.jsonl" "$run/env.txt" "$OUT/"
cat "$OUT/table.md"
[ "${TLS:-0}" = 1 ] && [ "${HS_REPS:-${REPS:-3}}" != 0 ] || exit 0

# Full handshakes, against the edge and an nginx of the same configuration (the
# harness stopped its own), each REPS times, the order alternating, after the quiet gate.
go build -o "$OUT/tls-handshakes" scripts/bench/tls-handshakes.go
mkdir -p "$OUT/nginx-hs/tmp"
sed 's|127.0.0.1:18083|127.0.0.1:18087|' "$HARNESS/nginx.conf" >"$OUT/nginx-hs/nginx.conf"
timeout 3600 nginx -p "$OUT/nginx-hs/" -c "$OUT/nginx-hs/nginx.conf" -e "$OUT/nginx-hs/error.log" -g 'worker_processes 1;' \
	>"$OUT/nginx-hs/out.log" 2>&1 &
NGINX_PID=$!
for _ in $(seq 1 50); do [ -s "$OUT/nginx-hs/nginx.pid" ] && break; sleep 0.1; done
declare -A HS_ADDR=([edge]=127.0.0.1:18085 [nginx]=127.0.0.1:18087) HS_PIDS=([edge]=$EDGE_PID [nginx]=$(cat "$OUT/nginx-hs/nginx.pid"))
for rep in $(seq 1 "${HS_REPS:-${REPS:-3}}"); do
	order="edge nginx"
	[ $((rep % 2)) = 0 ] && order="nginx edge"
	for target in $order; do
		for curves in "" x25519; do
			"$HARNESS/bin/load" -mode idle -idle-max 15 -max "${IDLE_WAIT:-15}s" >>"$OUT/idle.log" 2>&1 || true
			"$OUT/tls-handshakes" -addr "${HS_ADDR[$target]}" -ca "$OUT/tls/cert.pem" -pids "${HS_PIDS[$target]}" \
				-c "${HS_CONNS:-4}" -d "${HS_DUR:-10}s" -curves "$curves" -target "$target" -rep "$rep" >>"$OUT/handshakes.jsonl"
		done
	done
done
jq -rs 'def med: sort | .[length / 2 | floor];
	"| key exchanges offered | target | negotiated | handshakes/s | server CPU, % of a core | handshakes per core-second |",
	"|---|---|---|---|---|---|",
	(group_by([.curves, .target])[] | "| \(.[0].curves) | \(.[0].target) | \(.[0].version) \(.[0].group) | \(map(.handshakes_per_s) | med | floor) | \(map(.server_cpu_pct) | med * 10 | round / 10) | \(map(.per_server_core_s) | med | floor) |"),
	"",
	(group_by(.curves)[] | "edge ÷ nginx, handshakes per core-second, \(.[0].curves): \(((map(select(.target == "edge") | .per_server_core_s) | med) / (map(select(.target == "nginx") | .per_server_core_s) | med)) * 100 | round / 100)")' \
	"$OUT/handshakes.jsonl" | tee "$OUT/handshakes.md"
