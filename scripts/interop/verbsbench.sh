#!/bin/bash
# scripts/interop/verbsbench.sh DIR - the table of the verbs-bench phase
# (scripts/interop/guest.sh): goverbs bench --perftest over verbs:rxe0 and
# verbs:siw0 (rdma-core) beside perftest against perftest on the same
# device, from the TAG.client.log files the phase kept in DIR, one per
# entry and round.
#
# Each cell is the median over the rounds of the client's own figure:
# perftest's t_typical or goverbs' p50 in µs (RTT/2 for write and send,
# the whole READ), or MB/s = 10^6 B/s (perftest's 2^20 B/s converted).
# Ratio = goverbs / kernel; the targets (issue 15) are latency <= 1.10 and
# bandwidth >= 0.90, reported, never enforced: the guest is emulated (TCG)
# and shared. Exits nonzero only when a passed entry left no figure.
set -u
dir=${1:?usage: verbsbench.sh DIR}
[ -d "$dir" ] || { echo "verbsbench: no $dir" >&2; exit 1; }

. "$(dirname "$0")/figure.sh" # figure FILE KIND

# median KIND FILES...: the median of the figures that are numbers, how
# many rounds gave one, and how many printed "inf" (perftest's cycle
# counter under TCG, now and then), as "MEDIAN N INF".
median() {
    local kind=$1 f; shift
    for f in "$@"; do figure "$f" $kind; done | sort -g |
        awk '$1 ~ /^[0-9.]+$/ { v[++n] = $1; next } $1 == "inf" { inf++ } END {
            if (n == 0) { printf "%s 0 %d\n", inf ? "inf" : "-", inf; exit }
            m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            printf "%.2f %d %d\n", m, n, inf }'
}

echo "| test | size | device | perftest ↔ perftest | goverbs verbs:DEV → perftest | ratio | target |"
echo "|---|---|---|---:|---:|---:|---|"
fail=0 inf=0
for t in write_lat read_lat send_lat write_bw; do
    case $t in *_lat) size=8 kind=lat unit=µs ;; *) size=65536 kind=bw unit=MB/s ;; esac
    for dev in rxe0 siw0; do
        shopt -s nullglob
        kf=("$dir"/kernel-$dev.ib_${t}_-__ib_${t}_r*.ib_$t.$size.client.log)
        gf=("$dir"/rdmacore-$dev.goverbs_verbs_${dev}_-__ib_${t}_r*.ib_$t.$size.client.log)
        shopt -u nullglob
        read -r k kn ki <<< "$(median $kind "${kf[@]}")"
        read -r g gn gi <<< "$(median $kind "${gf[@]}")"
        [ "${#kf[@]}" -gt 0 ] && [ "$kn" = 0 ] && [ "$ki" = 0 ] && fail=1
        [ "${#gf[@]}" -gt 0 ] && [ "$gn" = 0 ] && [ "$gi" = 0 ] && fail=1
        [ "$ki$gi" != 00 ] && inf=1
        ratio=- verdict=-
        if [ "$kn" != 0 ] && [ "$gn" != 0 ]; then
            ratio=$(awk -v g="$g" -v k="$k" 'BEGIN { if (k > 0) printf "%.2f", g / k; else print "-" }')
            verdict=$(awk -v r="$ratio" -v kind=$kind 'BEGIN {
                if (r == "-") print "-"
                else if (kind == "lat") print (r <= 1.10) ? "≤ 1.10: met" : "≤ 1.10: MISSED"
                else print (r >= 0.90) ? "≥ 0.90: met" : "≥ 0.90: MISSED" }')
        fi
        echo "| ib_$t | $size B | $dev | $k $unit (n=$kn) | $g $unit (n=$gn) | $ratio | $verdict |"
    done
done
[ $fail = 0 ] || echo "(a cell with n=0 had logs but no figure: see $dir)"
[ $inf = 0 ] || echo "(\"inf\": perftest printed inf for a round, as it now and then does under TCG; the median is of the others)"
# The backend's cost per WR in the guest (rdmacore's benchmarks: the stub
# device, one cgo crossing, rxe0), TCG-emulated: compare rows with each
# other, not with figures from outside the guest.
for f in "$dir"/rdmacore-rxe0.go_test*.client.log; do
    [ -s "$f" ] || continue
    echo
    echo "post+poll per WR in the guest (go test -bench, TCG):"
    grep -E '^(Benchmark|--- SKIP|    cost_test)' "$f" | sed 's/^/    /'
done
exit $fail
