#!/bin/bash
# scripts/interop/benchtable.sh DIR - the same-guest comparison table of
# scripts/interop.sh, from the outputs the guest's bench phase kept in DIR
# (one TAG.client.log and TAG.server.log per entry; see guest.sh).
#
# Each figure is the client's own measurement (perftest's and goverbs' bw
# and read_lat servers do not measure): latency is perftest's t_typical
# (its median) or goverbs' p50, in µs (RTT/2 for write and send, the whole
# READ); bandwidth is MB/s = 10^6 B/s (perftest's MB/sec are 2^20 B/s and
# are converted). Ratio = goverbs / kernel: below 1 is better for latency,
# above 1 for bandwidth. Prints a Markdown table; "-" where an entry failed.
set -u
dir=${1:?usage: benchtable.sh DIR}
[ -d "$dir" ] || { echo "benchtable: no $dir" >&2; exit 1; }

. "$(dirname "$0")/figure.sh" # figure FILE KIND

ratio() {
    case "$1 $2" in *-* | *inf*) echo -; return ;; esac
    awk -v g="$1" -v k="$2" 'BEGIN { if (k > 0) printf "%.2f\n", g / k; else print "-" }'
}

echo "| test | size | pair | kernel ↔ kernel | goverbs client → kernel | kernel client → goverbs | ratio (goverbs/kernel, each direction) |"
echo "|---|---|---|---:|---:|---:|---|"
fail=0 inf=0
for t in write_lat read_lat send_lat write_bw read_bw send_bw; do
    case $t in *_lat) size=8 kind=lat unit=µs ;; *) size=65536 kind=bw unit=MB/s ;; esac
    for dev in siw rxe; do
        k=$(figure "$dir/$dev-$dev.ib_${t}_-__ib_$t.ib_$t.$size.client.log" $kind)
        g1=$(figure "$dir/goverbs-$dev.goverbs_-__ib_$t.ib_$t.$size.client.log" $kind)
        g2=$(figure "$dir/goverbs-$dev.ib_${t}_-__goverbs.ib_$t.$size.client.log" $kind)
        for v in "$k" "$g1" "$g2"; do
            [ "$v" = - ] && fail=1
            [ "$v" = inf ] && inf=1
        done
        tr=iwarp; [ $dev = rxe ] && tr=roce
        echo "| ib_$t | $size B | goverbs-$tr vs $dev | $k $unit | $g1 $unit | $g2 $unit | $(ratio "$g1" "$k") / $(ratio "$g2" "$k") |"
    done
done
[ $fail = 0 ] || echo "(\"-\": that entry failed or printed no figure; see its logs in $dir)"
[ $inf = 0 ] || echo "(\"inf\": perftest printed inf for that run, as it now and then does under TCG)"
exit $fail
