#!/bin/bash
# scripts/interop.sh - goverbs against the Linux kernel's own RDMA (issue 8).
#
# Builds goverbs statically (CGO_ENABLED=0), boots the RDMA lab
# (../shared/lab: a qemu guest with the kernel's siw0 and rxe0, rdma-core and
# perftest), runs the interop matrix inside it (scripts/interop/guest.sh)
# and prints one table row per entry: peer pair, direction, operation, size,
# iterations, result. The captures taken in the guest are decoded here with
# tshark; the same-guest benchmark phase is summarised as a comparison table.
# Exits nonzero when any entry, or a capture check, fails.
#
# Usage: scripts/interop.sh [--quick] [--phases "rping pingpong ..."]
#                           [--out DIR] [--timeout S] [--lab DIR]
#   --quick        fewer iterations and sizes (env QUICK=1)
#   --phases P     a subset of: rping pingpong ud perftest-siw perftest-rxe perftest-rxe-cm bench
#                  capture rstream rocecm rdmacm xstack verbs-bench rdmacore fabric-verbs (env PHASES; default
#                  all). ud: ibv_ud_pingpong; perftest-rxe-cm: perftest -R
#                  over rxe (IB CM); rstream: rsockets' rstream against
#                  goverbs rstream over siw and rxe (IB CM); rdmacm: ucmatose and
#                  rdma_server/rdma_client over the IB CM; xstack: goverbs'
#                  rdma-core backend on rxe0/siw0 against pure-Go roce/iwarp
#                  (a cgo build of goverbs, -tags rdmacore). rdmacore runs
#                  the conformance suite over rxe0 and siw0 through the
#                  rdma-core backend (a cgo test binary, -tags rdmacore; its
#                  own boot of the lab). verbs-bench: goverbs bench
#                  --perftest over verbs:rxe0 and verbs:siw0 (the cgo
#                  build) beside perftest on the same device, interleaved
#                  rounds, a table of medians and ratios
#   --out DIR      keep the logs, captures and benchmark outputs there
#                  (default: a temporary directory, kept on failure)
#   --timeout S    bound of the whole lab run, boot included (default 2400,
#                  1200 with --quick)
#   --lab DIR      the lab (default ../shared/lab next to the repository,
#                  or $GOVERBS_LAB)
# Environment passed to the guest: ENTRY_TIMEOUT (seconds per side of one
# entry; 120, 60 with --quick), BENCH_GOVERBS_FLAGS (goverbs' extra flags in
# the bench phase; default --poll=false), BENCH_GOMAXPROCS (default 1);
# in the verbs-bench phase VBENCH_ROUNDS (rxe0; default 3, 1 with --quick),
# VBENCH_SIW_ROUNDS (siw0; default 1),
# VBENCH_GOVERBS_FLAGS (default none: goverbs spins, as perftest does) and
# VBENCH_GOMAXPROCS (default 1).
# The lab image must be built once per machine: ../shared/lab/build-image.sh.
set -u
ENTRY_TIMEOUT=${ENTRY_TIMEOUT:-}
BENCH_GOMAXPROCS=${BENCH_GOMAXPROCS:-}
cd "$(dirname "$0")/.."
ROOT=$PWD

QUICK=${QUICK:-0}
PHASES=${PHASES:-rping pingpong ud perftest-siw perftest-rxe perftest-rxe-cm bench capture rstream rocecm rdmacm xstack verbs-bench rdmacore fabric-verbs}
OUT=
TIMEOUT=
LAB=${GOVERBS_LAB:-$ROOT/../shared/lab}
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1 ;;
        --phases) PHASES=$2; shift ;;
        --phases=*) PHASES=${1#*=} ;;
        --out) OUT=$2; shift ;;
        --out=*) OUT=${1#*=} ;;
        --timeout) TIMEOUT=$2; shift ;;
        --timeout=*) TIMEOUT=${1#*=} ;;
        --lab) LAB=$2; shift ;;
        --lab=*) LAB=${1#*=} ;;
        -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "interop.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$TIMEOUT" ] || { if [ "$QUICK" = 1 ]; then TIMEOUT=1200; else TIMEOUT=2400; fi; }
if [ ! -x "$LAB/run-in-guest.sh" ]; then
    echo "interop.sh: no lab at $LAB (set --lab or GOVERBS_LAB)" >&2
    exit 2
fi
keep_out=1
if [ -z "$OUT" ]; then OUT=$(mktemp -d /tmp/goverbs-interop.XXXXXX); keep_out=0; fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
start=$(date +%s)

# 1. The static binary.
work=$(mktemp -d /tmp/goverbs-interop-bin.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "== build: CGO_ENABLED=0 go build ./cmd/goverbs"
if ! CGO_ENABLED=0 go build -trimpath -o "$work/goverbs" ./cmd/goverbs; then
    echo "interop.sh: build failed" >&2
    exit 1
fi
cp scripts/interop/guest.sh "$work/guest.sh"
# The cross-stack rows need goverbs on rdma-core: cgo, -tags rdmacore
# (libibverbs-dev, librdmacm-dev; the guest has the same Debian libraries).
extra=()
case " $PHASES " in *" xstack "* | *" verbs-bench "*)
    echo "== build: go build -tags rdmacore ./cmd/goverbs (cgo)"
    if CGO_ENABLED=1 go build -trimpath -tags rdmacore -o "$work/goverbs-rdmacore" ./cmd/goverbs > "$OUT/xstack-build.log" 2>&1; then
        extra=("$work/goverbs-rdmacore")
    else
        echo "interop.sh: the rdmacore build failed (see $OUT/xstack-build.log): the xstack rows will fail" >&2
        tail -5 "$OUT/xstack-build.log" >&2
    fi
    ;;
esac
# The verbs-bench phase's cost rows: the rdmacore package's benchmarks.
case " $PHASES " in *" verbs-bench "*)
    echo "== build: go test -c -tags rdmacore ./rdmacore/ (verbs-bench)"
    if go test -c -tags rdmacore -o "$work/rdmacore.test" ./rdmacore/ > "$OUT/verbs-bench-build.log" 2>&1; then
        extra+=("$work/rdmacore.test")
    else
        echo "interop.sh: the rdmacore test build failed (see $OUT/verbs-bench-build.log): its cost row will fail" >&2
    fi
    ;;
esac
# run-in-guest.sh passes no environment: a wrapper carries ours in.
cat > "$work/interop-run.sh" <<EOF
#!/bin/bash
export QUICK='$QUICK' PHASES='$PHASES'
${ENTRY_TIMEOUT:+export ENTRY_TIMEOUT='$ENTRY_TIMEOUT'}
${BENCH_GOVERBS_FLAGS+export BENCH_GOVERBS_FLAGS='${BENCH_GOVERBS_FLAGS-}'}
${BENCH_GOMAXPROCS:+export BENCH_GOMAXPROCS='$BENCH_GOMAXPROCS'}
${VBENCH_GOVERBS_FLAGS:+export VBENCH_GOVERBS_FLAGS='$VBENCH_GOVERBS_FLAGS'}
${VBENCH_GOMAXPROCS:+export VBENCH_GOMAXPROCS='$VBENCH_GOMAXPROCS'}
${VBENCH_ROUNDS:+export VBENCH_ROUNDS='$VBENCH_ROUNDS'}
${VBENCH_SIW_ROUNDS:+export VBENCH_SIW_ROUNDS='$VBENCH_SIW_ROUNDS'}
exec /bin/bash /lab/guest.sh
EOF

# 2. The matrix, in the lab.
echo "== lab: QUICK=$QUICK PHASES=\"$PHASES\" timeout ${TIMEOUT}s"
"$LAB/run-in-guest.sh" --timeout "$TIMEOUT" --out "$OUT/guest" \
    "$work/interop-run.sh" "$work/goverbs" "$work/guest.sh" "${extra[@]}" > "$OUT/guest.log" 2>&1 &
lab=$!
# Progress, one line per entry as it ends.
tail -n +1 -f "$OUT/guest.log" --pid=$lab 2>/dev/null |
    while IFS=$'\t' read -r tag pair dir op size iters res secs _; do
        [ "$tag" = ROW ] && printf '   %-11s %-40s %-20.20s %6s %5s  %s (%ss)\n' "$pair" "$dir" "$op" "$size" "$iters" "$res" "$secs"
    done
wait $lab
labrc=$?

# cgo_phase NAME TAGS PKG SCRIPT TIMEOUT: a backend's rows from a cgo test
# binary (go test -c -tags TAGS PKG, named after PKG's directory, as SCRIPT
# expects it in /lab) that SCRIPT runs in a lab boot of its own; its ROW
# lines join the matrix, and a build or boot that failed becomes a FAIL
# row.
cgo_phase() {
    local name=$1 tags=$2 pkg=$3 script=$4 timeout=$5 rc bin
    bin=$work/$(basename "$pkg").test
    echo "== $name: go test -c -tags $tags $pkg"
    if ! go test -c -tags "$tags" -o "$bin" "$pkg" > "$OUT/$name-build.log" 2>&1; then
        printf 'ROW\t%s\t-\tbuild\t-\t-\tFAIL\t-\tsee %s-build.log\n' "$name" "$name" >> "$OUT/guest.log"
        tail -20 "$OUT/$name-build.log"
        return
    fi
    "$LAB/run-in-guest.sh" --timeout "$timeout" --out "$OUT/guest-$name" \
        "$script" "$bin" > "$OUT/$name.log" 2>&1
    rc=$?
    grep '^ROW' "$OUT/$name.log" >> "$OUT/guest.log"
    if [ $rc != 0 ] && ! grep -q '^ROW' "$OUT/$name.log"; then
        printf 'ROW\t%s\t-\tconformance\t-\t-\tFAIL\t-\tlab run failed (exit %s)\n' "$name" "$rc" >> "$OUT/guest.log"
        tail -20 "$OUT/$name.log"
    fi
}

# 2b. The rdma-core backend's rows: the conformance suite over rxe0 and
# siw0 (libibverbs-dev, librdmacm-dev).
case " $PHASES " in *" rdmacore "*)
    cgo_phase rdmacore rdmacore ./rdmacore/ scripts/interop/rdmacore.sh 400 ;;
esac

# 2c. The fabric backend over libfabric's verbs provider on rxe0 and siw0
# (libfabric-dev; about 150 s of guest time).
case " $PHASES " in *" fabric-verbs "*)
    cgo_phase fabric-verbs libfabric ./fabric/ scripts/interop/fabricverbs.sh 420 ;;
esac
elapsed_lab=$(($(date +%s) - start))

# 3. The table.
fails=0
rows=$(grep -c '^ROW' "$OUT/guest.log")
bad=$(grep '^ROW' "$OUT/guest.log" | awk -F'\t' '$7 !~ /^PASS/' | wc -l)
echo
echo "== interop matrix (QUICK=$QUICK)"
{
    printf 'pair\tdirection\toperation\tsize\titerations\tresult\tseconds\tdata checked\n'
    grep '^ROW' "$OUT/guest.log" | cut -f2-
} | column -t -s "$(printf '\t')"
echo "entries: $rows, failed: $bad"
[ "$bad" = 0 ] || fails=$((fails + bad))
if [ "$labrc" != 0 ] && [ "$bad" = 0 ]; then
    echo "lab run failed (exit $labrc): see $OUT/guest.log"
    tail -20 "$OUT/guest.log"
    fails=$((fails + 1))
fi
[ -d "$OUT/guest/logs" ] && ls "$OUT/guest/logs" | grep -q . && echo "logs of failed entries: $OUT/guest/logs"

# 4. The captures, decoded here.
case " $PHASES " in *" capture "* | *" rocecm "*)
    echo
    echo "== captures (tshark $(tshark --version 2>/dev/null | head -1 | awk '{print $3}'))"
    if ! command -v tshark > /dev/null; then
        echo "tshark not installed: captures not decoded"
        fails=$((fails + 1))
    else
        caps=
        case " $PHASES " in *" capture "*) caps="siw rxe" ;; esac
        case " $PHASES " in *" rocecm "*) caps="$caps rocecm" ;; esac
        for p in $caps; do
            f=$OUT/guest/capture-$p.pcap
            if [ ! -s "$f" ]; then echo "capture-$p: missing"; fails=$((fails + 1)); continue; fi
            # tshark checks no CRC here: MPA CRCs are not negotiated with siw
            # (zero on the wire) and it does not verify RoCE ICRCs (see below).
            # MPA is found by tshark's heuristic on any TCP port. RPC-over-RDMA's
            # heuristic would claim perftest's 4-byte SENDs and call them
            # malformed: it is off, as are SMB Direct's.
            if [ $p = siw ]; then
                proto=iwarp_ddp_rdmap
                da=(--disable-protocol rpcordma --disable-protocol smb_direct)
                opf=iwarp_rdma.opcode
            else
                proto=infiniband
                da=(--disable-protocol rpcordma)
                opf=infiniband.bth.opcode
            fi
            ts() { tshark -r "$f" "${da[@]}" "$@" 2>/dev/null; }
            total=$(ts | wc -l)
            rdma=$(ts -Y "$proto" | wc -l)
            malformed=$(ts -Y '_ws.malformed' | wc -l)
            experr=$(ts -Y '_ws.expert.severity == error' | wc -l)
            rst=$(ts -Y 'tcp.flags.reset == 1' | wc -l)
            ops=$(ts -Y "$proto" -T fields -E occurrence=a -e $opf | tr ',' '\n' | grep . |
                sort | uniq -c | sort -rn | awk '{printf "%s%s×%s", s, $2, $1; s=" "}')
            res=clean
            if [ "$rdma" = 0 ] || [ "$malformed" != 0 ] || [ "$experr" != 0 ]; then
                res=NOT-CLEAN; fails=$((fails + 1))
            fi
            if [ $p = rocecm ]; then
                # The IB CM's MADs: REQ 0x10, REJ 0x12, REP 0x13, RTU 0x14,
                # DREQ 0x15, DREP 0x16, each decoded as a CM MAD.
                mads=$(ts -Y 'infiniband.mad' -T fields -e infiniband.mad.attributeid | sort | uniq -c |
                    awk '{printf "%s%s×%s", s, $2, $1; s=" "}')
                for a in 0x0010 0x0012 0x0013 0x0014 0x0015 0x0016; do
                    case " $mads" in *" $a×"*) ;; *) res=NOT-CLEAN; fails=$((fails + 1)); echo "capture-rocecm: no CM attribute $a" ;; esac
                done
                echo "  CM MADs (attribute×count): $mads"
            fi
            echo "capture-$p: $total frames, $rdma decoded as $proto, malformed $malformed, expert errors $experr: $res"
            echo "  TCP resets: $rst (the kernel tools': perftest -R's data-port retries, perftest closing with \"done\" unread)"
            echo "  opcodes (count): $ops"
            if [ $p = rxe ] || [ $p = rocecm ]; then
                # tshark does not check the ICRC; scapy does, for both sides
                # (tools/verify/verify_roce_icrc.py, as the roce tests use it).
                senders=$(ts -Y 'udp.dstport == 4791' -T fields -e ip.src | sort | uniq -c |
                    awk '{printf "%s%s from %s", s, $1, $2; s=", "}')
                if /usr/bin/python3 tools/verify/verify_roce_icrc.py "$f" > "$OUT/icrc.log" 2>&1; then
                    echo "  ICRC (scapy): $(grep -c ' OK$' "$OUT/icrc.log") of $(grep -c '^frame' "$OUT/icrc.log") good ($senders)"
                else
                    grep -v ' OK$' "$OUT/icrc.log" | head -5 | sed 's/^/  /'
                    echo "  ICRC (scapy): NOT-CLEAN ($senders)"; fails=$((fails + 1))
                fi
            fi
        done
    fi
    ;;
esac

# 5. The benchmark phase: kernel-kernel vs goverbs-kernel, same guest.
case " $PHASES " in *" bench "*)
    echo
    echo "== same guest, same run (t_typical µs for 8 B latency; MB/s for 64 KiB bandwidth)"
    "$ROOT/scripts/interop/benchtable.sh" "$OUT/guest/bench" || fails=$((fails + 1))
    ;;
esac

# 5b. goverbs on rdma-core beside perftest on the same device.
case " $PHASES " in *" verbs-bench "*)
    echo
    echo "== verbs-bench: goverbs verbs:DEV beside perftest on the same device, same guest (medians of interleaved rounds)"
    "$ROOT/scripts/interop/verbsbench.sh" "$OUT/guest/verbs-bench" || fails=$((fails + 1))
    ;;
esac

total=$(($(date +%s) - start))
echo
echo "interop.sh: ${total}s in all (lab ${elapsed_lab}s), QUICK=$QUICK"
if [ $fails != 0 ]; then
    echo "interop.sh: FAILED ($fails); logs, captures and outputs in $OUT"
    exit 1
fi
if [ $keep_out = 1 ]; then echo "interop.sh: logs, captures and outputs in $OUT"; else rm -rf "$OUT"; fi
echo "interop.sh: PASS"
