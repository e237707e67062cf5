#!/bin/bash
# scripts/compare.sh - goverbs' wire and shared-memory transports beside the
# sockets under them and beside the C stacks that do the same job (issue 18).
#
# Builds goverbs once, then runs ROUNDS interleaved rounds of, all on
# 127.0.0.1:
#   Go TCP       goverbs bench's own tcp-lat / tcp-bw (the baseline)
#   iwarp, roce, shm
#                goverbs bench: 8 B write-lat, send-lat, read-lat and
#                64 KiB / 1 MiB write-bw, read-bw, in one process and in two
#                (--listen / --connect); in two processes also 1 MiB
#                send-lat, the ping-pong fi_pingpong measures
#   fi_pingpong  libfabric's tcp provider (-p tcp -e msg), two processes, 8 B
#                and 1 MiB
#   ucx_perftest UCX over tcp (tag_lat 8 B, tag_bw 1 MiB) and over posix
#                shared memory (ucp_put_lat, tag_lat 8 B, ucp_put_bw 64 KiB and
#                1 MiB), two processes, when ucx-utils can be installed
# and prints one table of medians over the rounds, each with its ratio to Go
# TCP in the same placement (the layout of BENCHMARKS.md). Each round runs
# the jobs in a rotated order, so that slow minutes of a shared machine do not
# always land on the same job. Default wait mode everywhere (goverbs bench
# chooses waiting or polling for the placement it finds); the C tools poll.
#
# Usage: scripts/compare.sh [--quick] [--rounds N] [--duration D] [--out DIR]
#   --quick        3 rounds of 250 ms measurements, fewer C-tool iterations
#                  (about 1.5 minutes; env QUICK=1)
#   --rounds N     rounds (default 3; env ROUNDS)
#   --duration D   goverbs measurement per test and size (default 700ms; the
#                  default run takes about 4-5 minutes on 2 vCPUs)
#   --out DIR      keep the raw outputs there (default a temporary directory)
# Environment: GOVERBS_REF=<commit> builds that commit (git archive) instead of
# the working tree, so that others' uncommitted edits stay out of a
# measurement; PORT base control port (default 18700).
set -u -o pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

quick=${QUICK:-0}
rounds=${ROUNDS:-}
dur=
out=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--rounds) rounds=$2; shift ;;
	--duration) dur=$2; shift ;;
	--out) out=$2; shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
rounds=${rounds:-3}
if [ "$quick" = 1 ]; then
	dur=${dur:-250ms}
	fi_iters_small=3000 fi_iters_big=100
	ucx_lat=5000 ucx_shm_lat=50000 ucx_bw=300
else
	dur=${dur:-700ms}
	fi_iters_small=10000 fi_iters_big=300
	ucx_lat=20000 ucx_shm_lat=200000 ucx_bw=1000
fi
out=${out:-$(mktemp -d /tmp/goverbs-compare.XXXXXX)}
mkdir -p "$out"
raw=$out/results.tsv
: >"$raw"
port=${PORT:-18700}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Tools. A package that is not in the archive is skipped, and the table says
# why, rather than failing the comparison.
have_fi=1 have_ucx=1 ucx_why=
pkgs=()
command -v jq >/dev/null 2>&1 || pkgs+=(jq)
command -v fi_pingpong >/dev/null 2>&1 || pkgs+=(libfabric-bin)
if ! command -v ucx_perftest >/dev/null 2>&1; then
	if apt-cache policy ucx-utils 2>/dev/null | grep -q 'Candidate: [0-9]'; then
		pkgs+=(ucx-utils)
	else
		have_ucx=0 ucx_why="ucx-utils has no installation candidate in this machine's apt sources"
	fi
fi
if [ ${#pkgs[@]} -gt 0 ]; then
	echo "installing ${pkgs[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get update -qq >/dev/null 2>&1
	as_root apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null 2>&1 ||
		echo "apt-get install ${pkgs[*]} failed; going on with what is there" >&2
fi
command -v jq >/dev/null 2>&1 || { echo "compare.sh: needs jq" >&2; exit 1; }
command -v fi_pingpong >/dev/null 2>&1 || have_fi=0
if [ "$have_ucx" = 1 ] && ! command -v ucx_perftest >/dev/null 2>&1; then
	have_ucx=0 ucx_why="ucx_perftest missing after apt-get install ucx-utils"
fi

# One build, used by every job (and by both processes of a two-process job).
bin=$out/goverbs
if [ -n "${GOVERBS_REF:-}" ]; then
	src=$out/src
	rm -rf "$src" && mkdir -p "$src"
	git archive "$GOVERBS_REF" | tar -x -C "$src" || exit 1
	(cd "$src" && go build -o "$bin" ./cmd/goverbs) || exit 1
	built="$(git rev-parse --short "$GOVERBS_REF") (git archive)"
else
	go build -o "$bin" ./cmd/goverbs || exit 1
	built="$(git rev-parse --short HEAD) + working tree"
	[ -n "$(git status --porcelain -- '*.go')" ] && built="$built (uncommitted .go changes)"
fi

# Processes this script started, ended by id when it is interrupted.
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

next_port() { port=$((port + 7)); }

wait_listen() { # port: until something listens on 127.0.0.1:port (5 s)
	for _ in $(seq 250); do
		ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		sleep 0.02
	done
	return 1
}

# rec ROUND PLACEMENT IMPL TEST SIZE METRIC VALUE
rec() { [ -n "$7" ] && [ "$7" != null ] && printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$raw"; }

# bench_json ROUND PLACEMENT FILE: every result line of goverbs bench --json.
bench_json() {
	jq -r --arg r "$1" --arg p "$2" '
		[$r, $p, .transport, .test, (.size|tostring)] as $k |
		if .latency_us then
			($k + ["p50", (.latency_us.p50|tostring)]),
			($k + ["p99", (.latency_us.p99|tostring)]),
			($k + ["mean", (.latency_us.mean|tostring)]),
			($k + ["cpu_us", (((.cpu.local_ns_per_op // 0) + (.cpu.remote_ns_per_op // 0)) / 1000 | tostring)])
		elif .bandwidth_MBps then
			($k + ["MBps", (.bandwidth_MBps|tostring)])
		else empty end | @tsv' "$3" >>"$raw" 2>/dev/null
}

# gv ROUND PLACEMENT NAME ARGS...: one goverbs bench run, in one process or
# as a --listen server and a --connect client.
gv() {
	local r=$1 pl=$2 name=$3; shift 3
	local f=$out/r$r-$pl-$name
	if [ "$pl" = 1p ]; then
		timeout 180 "$bin" bench "$@" --json --no-progress --no-baseline >"$f.json" 2>"$f.err" ||
			echo "round $r $pl $name: goverbs bench failed ($(tail -1 "$f.err"))" >&2
	else
		next_port
		timeout 180 "$bin" bench --listen "127.0.0.1:$port" >"$f.srv" 2>&1 &
		local srv=$!
		pids+=("$srv")
		wait_listen "$port"
		timeout 180 "$bin" bench --connect "127.0.0.1:$port" "$@" --json --no-progress --no-baseline >"$f.json" 2>"$f.err" ||
			echo "round $r $pl $name: goverbs bench failed ($(tail -1 "$f.err"))" >&2
		wait "$srv" 2>/dev/null
	fi
	bench_json "$r" "$pl" "$f.json"
}

lat="--test write-lat,send-lat,read-lat --duration $dur"
bw="--test write-bw,read-bw --size 64K,1M --duration $dur"
job_tcp_1p() { gv "$1" 1p tcp-lat --test tcp-lat --size 8 --duration "$dur"; gv "$1" 1p tcp-bw --test tcp-bw --size 64K,1M --duration "$dur"; }
job_tcp_2p() { gv "$1" 2p tcp-lat --test tcp-lat --size 8,1M --duration "$dur"; gv "$1" 2p tcp-bw --test tcp-bw --size 64K,1M --duration "$dur"; }
for t in iwarp roce shm; do
	eval "job_${t}_1p() { gv \"\$1\" 1p $t-lat --transport $t $lat --size 8; gv \"\$1\" 1p $t-bw --transport $t $bw; }"
	eval "job_${t}_2p() { gv \"\$1\" 2p $t-lat --transport $t $lat --size 8; gv \"\$1\" 2p $t-pp1M --transport $t --test send-lat --size 1M --duration $dur; gv \"\$1\" 2p $t-bw --transport $t $bw; }"
done

# fi_pingpong: usec/xfer is one-way (RTT/2), the mean of the run; MB/sec is
# size / one-way time.
job_fi() {
	local r=$1 size iters
	for size in 8 1048576; do
		iters=$fi_iters_small; [ "$size" = 8 ] || iters=$fi_iters_big
		next_port
		local f=$out/r$r-fi-$size
		timeout 60 fi_pingpong -p tcp -e msg -I "$iters" -S "$size" -B "$port" >"$f.srv" 2>&1 &
		local srv=$!
		pids+=("$srv")
		wait_listen "$port"
		timeout 60 fi_pingpong -p tcp -e msg -I "$iters" -S "$size" -P "$port" 127.0.0.1 >"$f.out" 2>&1 ||
			echo "round $r fi_pingpong $size failed ($(tail -1 "$f.out"))" >&2
		wait "$srv" 2>/dev/null
		awk -v r="$r" -v s="$size" 'NF >= 8 && $1 != "bytes" {
			printf "%s\t2p\tfi_pingpong\tpingpong\t%s\tmean\t%s\n", r, s, $7
			printf "%s\t2p\tfi_pingpong\tpingpong\t%s\tMBps\t%s\n", r, s, $6 }' "$f.out" >>"$raw"
	done
}

# ucx_perftest: the Final line holds iterations, then latency p50, average,
# overall (µs, one-way for the ping-pong tests), then bandwidth average and
# overall in MiB/s (converted to 10^6 B/s here).
ucx1() { # ROUND TLS TEST SIZE ITERS LABEL
	local r=$1 tls=$2 test=$3 size=$4 iters=$5 label=$6
	next_port
	local f=$out/r$r-ucx-$label-$test-$size
	UCX_TLS=$tls timeout 60 ucx_perftest -p "$port" >"$f.srv" 2>&1 &
	local srv=$!
	pids+=("$srv")
	wait_listen "$port"
	UCX_TLS=$tls timeout 60 ucx_perftest 127.0.0.1 -p "$port" -t "$test" -s "$size" -n "$iters" -w $((iters / 10 + 10)) >"$f.out" 2>&1 ||
		echo "round $r ucx_perftest $tls $test $size failed ($(tail -1 "$f.out"))" >&2
	wait "$srv" 2>/dev/null
	awk -v r="$r" -v s="$size" -v t="$test" -v l="$label" '$1 == "Final:" {
		printf "%s\t2p\tucx-%s\t%s\t%s\tp50\t%s\n", r, l, t, s, $3
		printf "%s\t2p\tucx-%s\t%s\t%s\tmean\t%s\n", r, l, t, s, $4
		printf "%s\t2p\tucx-%s\t%s\t%s\tMBps\t%.1f\n", r, l, t, s, $6 * 1.048576 }' "$f.out" >>"$raw"
}
job_ucx() {
	local r=$1
	ucx1 "$r" tcp tag_lat 8 "$ucx_lat" tcp
	ucx1 "$r" tcp tag_bw 1048576 "$ucx_bw" tcp
	ucx1 "$r" posix,self ucp_put_lat 8 "$ucx_shm_lat" posix
	ucx1 "$r" posix,self tag_lat 8 "$ucx_shm_lat" posix
	ucx1 "$r" posix,self ucp_put_bw 65536 "$ucx_bw" posix
	ucx1 "$r" posix,self ucp_put_bw 1048576 "$ucx_bw" posix
}

jobs=(job_tcp_1p job_iwarp_1p job_roce_1p job_shm_1p job_tcp_2p job_iwarp_2p job_roce_2p job_shm_2p)
[ "$have_fi" = 1 ] && jobs+=(job_fi)
[ "$have_ucx" = 1 ] && jobs+=(job_ucx)

start=$(date +%s)
echo "goverbs $built; $rounds rounds of ${#jobs[@]} jobs, $dur per goverbs measurement; raw outputs in $out" >&2
for r in $(seq "$rounds"); do
	echo "round $r/$rounds (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	n=${#jobs[@]}
	for i in $(seq 0 $((n - 1))); do
		j=${jobs[$(((i + (r - 1) * 3) % n))]}
		"$j" "$r"
	done
done
elapsed=$(($(date +%s) - start))

# The table: medians over the rounds, each beside Go TCP's median in the same
# placement.
python3 - "$raw" "$rounds" "$elapsed" "$built" "$have_fi" "$have_ucx" "$ucx_why" "$dur" <<'EOF'
import sys, statistics, collections
raw, rounds, elapsed, built, have_fi, have_ucx, ucx_why, dur = sys.argv[1:]
v = collections.defaultdict(list)  # (placement, impl, test, size, metric) -> [values]
for line in open(raw):
    r, pl, impl, test, size, metric, val = line.rstrip("\n").split("\t")
    try:
        v[(pl, impl, test, int(size), metric)].append(float(val))
    except ValueError:
        pass

def med(pl, impl, test, size, metric):
    xs = v.get((pl, impl, test, size, metric))
    return (statistics.median(xs), len(xs)) if xs else (None, 0)

def fmt(x):
    if x is None: return "–"
    if x >= 100: return f"{x:,.0f}"
    if x >= 10: return f"{x:.1f}"
    if x >= 1: return f"{x:.2f}"
    return f"{x:.3f}"

def cell(x, n, base):
    if x is None: return "–"
    s = fmt(x)
    if base:
        s += f" ({x / base:.2f}×)"
    if n < int(rounds): s += f" [{n}/{rounds}]"
    return s

size_name = {8: "8 B", 65536: "64 KiB", 1048576: "1 MiB"}
trs = ["iwarp", "roce", "shm"]
print(f"\ngoverbs {built}; medians of {rounds} interleaved rounds ({dur} per goverbs measurement, {elapsed} s in all);")
print("ratio to Go TCP in the same placement in parentheses (latency and CPU: < 1 is better; bandwidth: > 1 is better);")
print("[k/N]: only k of N rounds produced the figure. 127.0.0.1, default wait mode.\n")
print("| placement | measurement | Go TCP | iwarp | roce | shm |")
print("|---|---|---|---|---|---|")
for pl, pname in (("1p", "one process"), ("2p", "two processes")):
    for metric, mname in (("p50", "p50 µs"), ("p99", "p99 µs"), ("cpu_us", "CPU µs/op, both sides")):
        base, _ = med(pl, "tcp", "tcp-lat", 8, metric)
        for test in ("write-lat", "send-lat", "read-lat"):
            row = [cell(*med(pl, t, test, 8, metric), base) for t in trs]
            print(f"| {pname} | 8 B {test} {mname} | {fmt(base)} | " + " | ".join(row) + " |")
    if pl == "2p":
        base, _ = med(pl, "tcp", "tcp-lat", 1048576, "p50")
        row = [cell(*med(pl, t, "send-lat", 1048576, "p50"), base) for t in trs]
        print(f"| {pname} | 1 MiB send-lat p50 µs (tcp-lat 1 MiB) | {fmt(base)} | " + " | ".join(row) + " |")
    for size in (65536, 1048576):
        base, _ = med(pl, "tcp", "tcp-bw", size, "MBps")
        for test in ("write-bw", "read-bw"):
            row = [cell(*med(pl, t, test, size, "MBps"), base) for t in trs]
            print(f"| {pname} | {size_name[size]} {test} MB/s | {fmt(base)} | " + " | ".join(row) + " |")

print("\nAgainst the C stacks, two processes, same rounds (ratio = goverbs / C; latency < 1 and bandwidth > 1 mean goverbs is faster):\n")
print("| C tool | measurement | C tool | Go TCP | iwarp | roce | shm |")
print("|---|---|---|---|---|---|---|")
def ext(label, ext_key, ours, metric_ours):
    c, n = med(*ext_key)
    if c is None:
        return
    cells = []
    for impl in ("tcp", "iwarp", "roce", "shm"):
        if impl not in ours:
            cells.append("–"); continue
        test, size = ours[impl]
        x, k = med("2p", impl, test, size, metric_ours)
        cells.append(cell(x, k, c))
    print(f"| {label[0]} | {label[1]} | {fmt(c)} | " + " | ".join(cells) + " |")
if have_fi == "1":
    ext(("fi_pingpong -p tcp", "8 B ping-pong, mean µs one-way"), ("2p", "fi_pingpong", "pingpong", 8, "mean"),
        {"tcp": ("tcp-lat", 8), "iwarp": ("send-lat", 8), "roce": ("send-lat", 8)}, "mean")
    ext(("fi_pingpong -p tcp", "1 MiB ping-pong, mean µs one-way"), ("2p", "fi_pingpong", "pingpong", 1048576, "mean"),
        {"tcp": ("tcp-lat", 1048576), "iwarp": ("send-lat", 1048576), "roce": ("send-lat", 1048576)}, "mean")
else:
    print("| fi_pingpong | – | not installed (libfabric-bin) | | | | |")
if have_ucx == "1":
    ext(("ucx_perftest tcp", "8 B tag_lat vs send-lat, p50 µs"), ("2p", "ucx-tcp", "tag_lat", 8, "p50"),
        {"tcp": ("tcp-lat", 8), "iwarp": ("send-lat", 8), "roce": ("send-lat", 8)}, "p50")
    ext(("ucx_perftest tcp", "1 MiB tag_bw vs write-bw, MB/s"), ("2p", "ucx-tcp", "tag_bw", 1048576, "MBps"),
        {"tcp": ("tcp-bw", 1048576), "iwarp": ("write-bw", 1048576), "roce": ("write-bw", 1048576)}, "MBps")
    ext(("ucx_perftest posix", "8 B ucp_put_lat vs write-lat, p50 µs"), ("2p", "ucx-posix", "ucp_put_lat", 8, "p50"),
        {"shm": ("write-lat", 8)}, "p50")
    ext(("ucx_perftest posix", "8 B tag_lat vs send-lat, p50 µs"), ("2p", "ucx-posix", "tag_lat", 8, "p50"),
        {"shm": ("send-lat", 8)}, "p50")
    for s in (65536, 1048576):
        ext(("ucx_perftest posix", f"{size_name[s]} ucp_put_bw vs write-bw, MB/s"), ("2p", "ucx-posix", "ucp_put_bw", s, "MBps"),
            {"shm": ("write-bw", s)}, "MBps")
else:
    print(f"| ucx_perftest | – | skipped: {ucx_why} | | | | |")
EOF
