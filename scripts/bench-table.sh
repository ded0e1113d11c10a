#!/usr/bin/env bash
# The benchmark table (docs/benchmarks.md): every figure of scripts/bench/figures.tsv,
# the micro-benchmarks measured now with `go test -bench`, the workloads that run in
# their own make targets (W1, W2, W3) as their latest recorded result. Prints
# `figure | target | measured | ratio | met` as markdown, with the date and the machine.
#
# Environment: FIGURES (default scripts/bench/figures.tsv), GO (default go),
# MAPYARD_TEST_MAP_IMAGE (the map image of the Docker benchmarks; without an engine they
# are "not run"), ONLY (a regular expression: measure only the live figures it matches).
set -euo pipefail
cd "$(dirname "$0")/.."
FIGURES=${FIGURES:-scripts/bench/figures.tsv}
GO=${GO:-go}
ONLY=${ONLY:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# run PKG BENCH BENCHTIME: the output of one go test -bench run, cached per arguments.
run() {
	local key
	key=$(printf '%s|%s|%s' "$1" "$2" "$3" | md5sum | cut -c1-16)
	if [ ! -f "$out/$key" ]; then
		# Each level of the name is matched exactly: BenchmarkA/b=1 runs A's sub-benchmark b=1 only.
		local re
		re=$(printf '%s' "$2" | awk -F/ '{ for (i = 1; i <= NF; i++) { gsub(/[][.*+?(){}|^$\\]/, "\\\\&", $i); printf "%s^%s$", (i > 1 ? "/" : ""), $i } }')
		echo "bench: $1 $2 ($3)" >&2
		$GO test -run '^$' -bench "$re" -benchtime "$3" -count 1 -timeout 15m "$1" >"$out/$key" 2>&1 || true
	fi
	cat "$out/$key"
}

# metric OUTPUT BENCH METRIC: the value of METRIC on BENCH's result line, or nothing.
metric() {
	awk -v name="$2" -v unit="$3" '
		{ n = $1; sub(/-[0-9]+$/, "", n) }
		n == name && $2 ~ /^[0-9]+$/ { for (i = 3; i < NF; i++) if ($(i + 1) == unit) { print $i; exit } }' <<<"$1"
}

echo "Benchmarks of $(git describe --tags --always --dirty 2>/dev/null || echo dev), $(date -u '+%Y-%m-%d %H:%M UTC')," \
	"$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| figure | target | measured | ratio | met |"
echo "|---|---|---|---|---|"
while IFS=$'\t' read -r kind figure op target unit a b c d; do
	case $kind in live | recorded) ;; *) continue ;; esac
	measured="" note=""
	if [ "$kind" = live ]; then
		if [ -n "$ONLY" ] && ! grep -Eq -- "$ONLY" <<<"$figure $b"; then continue; fi
		o=$(run "$a" "$b" "$c")
		measured=$(metric "$o" "$b" "$d")
		if [ -z "$measured" ]; then
			note="not run: $(grep -m1 -E 'SKIP|FAIL|panic|no test files|error' <<<"$o" | tr -s ' \t|' ' ' | cut -c1-80)"
		fi
	else
		measured=$a
		note="$b; $c"
	fi
	awk -v f="$figure" -v op="$op" -v t="$target" -v u="$unit" -v m="$measured" -v note="$note" -v kind="$kind" 'BEGIN {
		num = (m ~ /^[0-9.]+$/)
		sym = (op == "<=" ? "≤" : "≥")
		if (num) {
			r = m / t
			met = (op == "<=" ? m <= t : m >= t) ? "met" : "**missed**"
			ms = (m >= 100 ? sprintf("%.0f", m) : sprintf("%.3g", m)) " " u
			rs = sprintf("%.2f", r)
		} else { met = "–"; ms = "–"; rs = "–" }
		if (kind == "live" && !num) { met = "–" }
		if (note != "") ms = ms " (" note ")"
		printf "| %s | %s %s %s | %s | %s | %s |\n", f, sym, t, u, ms, rs, met
	}'
done <"$FIGURES"
