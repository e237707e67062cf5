#!/usr/bin/env bash
# hosts.sh: many hosts on one machine. Builds N network namespaces, each
# with a veth link to a bridge (in a namespace of its own) and an address
# 10.200.0.(i+1)/24 that exists only there, runs cmd/goverbs-hosts in each,
# and tears everything down on exit. Nothing is added to the caller's
# namespace: veths are created directly inside the new namespaces, so all
# traffic stays inside them.
#
#   scripts/hosts.sh [-n HOSTS] [-d DURATION] [-p all|incast|both] [-t "iwarp roce tcp"] [-s SIZE] [-b BIN]
#
# all: every host streams to every other (N×(N-1) connections); incast:
# hosts 2..N stream to host 1. Per transport and pattern it prints one
# summary line: connections, aggregate MB/s, per-connection min/mean/max
# MB/s and Jain's fairness index (Σx)²/(n·Σx²) over the connections, and
# the errors (which make it exit 1). Needs root and iproute2 (ip).
set -euo pipefail

N=16 DUR=2s PATTERN=both TRANSPORTS="iwarp roce tcp" SIZE=65536 BIN=""
while getopts "n:d:p:t:s:b:" o; do
	case $o in
	n) N=$OPTARG ;; d) DUR=$OPTARG ;; p) PATTERN=$OPTARG ;; t) TRANSPORTS=$OPTARG ;;
	s) SIZE=$OPTARG ;; b) BIN=$OPTARG ;; *) exit 2 ;;
	esac
done
if ((N < 2 || N > 64)); then echo "hosts.sh: -n runs from 2 to 64" >&2; exit 2; fi
[ "$(id -u)" = 0 ] || { echo "hosts.sh: needs root (network namespaces)" >&2; exit 77; }
command -v ip >/dev/null || { echo "hosts.sh: needs iproute2 (ip)" >&2; exit 77; }

P="gv$$" # prefix of every name this run creates
WORK=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for ((i = 0; i < N; i++)); do ip netns del "${P}h$i" 2>/dev/null || true; done
	ip netns del "${P}br" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

if [ -z "$BIN" ]; then
	BIN=$WORK/goverbs-hosts
	(cd "$(dirname "$0")/.." && go build -o "$BIN" ./cmd/goverbs-hosts)
fi

ip netns add "${P}br" || { echo "hosts.sh: cannot create network namespaces here" >&2; exit 77; }
ip -n "${P}br" link add br0 type bridge
ip -n "${P}br" link set br0 up
addr() { echo "10.200.0.$(($1 + 1))"; }
for ((i = 0; i < N; i++)); do
	ip netns add "${P}h$i"
	ip link add "${P}h$i" netns "${P}h$i" type veth peer "${P}b$i" netns "${P}br"
	ip -n "${P}br" link set "${P}b$i" master br0 up
	ip -n "${P}h$i" link set lo up
	ip -n "${P}h$i" addr add "$(addr "$i")/24" dev "${P}h$i"
	ip -n "${P}h$i" link set "${P}h$i" up
done

# run TRANSPORT PATTERN: one driver per host, all starting at once.
run() {
	local t=$1 pat=$2 start peers out=$WORK/$1.$2
	start=$(($(date +%s%N) + 2000000000 + N * 50000000))
	: >"$out"
	PIDS=()
	for ((i = 0; i < N; i++)); do
		peers=""
		for ((j = 0; j < N; j++)); do
			((i == j)) && continue
			[ "$pat" = incast ] && ((j != 0 || i == 0)) && continue
			peers+="${peers:+,}$(addr "$j"):18515"
		done
		ip netns exec "${P}h$i" "$BIN" -transport "$t" -listen "$(addr "$i"):18515" -peers "$peers" \
			-start "$start" -duration "$DUR" -size "$SIZE" >"$out.$i" 2>&1 &
		PIDS+=($!)
	done
	local rc=0
	for p in "${PIDS[@]}"; do wait "$p" || rc=1; done
	PIDS=()
	cat "$out".* >"$out"
	awk -v t="$t" -v pat="$pat" -v n="$N" -v rc="$rc" '
		/"err"/ || !/^\{/ { errs++; if (errs <= 3) print "  error: " $0 > "/dev/stderr"; next }
		{
			match($0, /"bytes":[0-9]+/); b = substr($0, RSTART + 8, RLENGTH - 8)
			match($0, /"seconds":[0-9.e+-]+/); s = substr($0, RSTART + 10, RLENGTH - 10)
			x = b / s / 1e6; c++; sum += x; sq += x * x
			if (c == 1 || x < mn) mn = x; if (x > mx) mx = x
			if (s > el) el = s
		}
		END {
			j = (c > 0 && sq > 0) ? sum * sum / (c * sq) : 0
			printf "%-6s %-7s hosts=%d conns=%d aggregate=%.0f MB/s per-conn min/mean/max=%.1f/%.1f/%.1f MB/s jain=%.3f errors=%d\n",
				t, pat, n, c, sum, mn, (c ? sum / c : 0), mx, j, errs + (rc != 0)
			exit (errs > 0 || rc != 0)
		}' "$out"
}

status=0
for t in $TRANSPORTS; do
	for pat in all incast; do
		[ "$PATTERN" = both ] || [ "$PATTERN" = "$pat" ] || continue
		run "$t" "$pat" || status=1
	done
done
exit $status
