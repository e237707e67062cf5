# scripts/interop/figure.sh - sourced by benchtable.sh and verbsbench.sh:
# figure FILE KIND prints the client's own figure in FILE (KIND lat or
# bw), "inf" when perftest printed inf (its cycle counter under TCG, now
# and then), or "-" when there is none. Latency is perftest's t_typical or
# goverbs' p50 in µs; bandwidth is MB/s = 10^6 B/s (perftest's MB/sec,
# 2^20 B/s, are converted).
figure() {
    [ -s "$1" ] || { echo -; return; }
    awk -v kind="$2" '
        # goverbs bench table rows: "write-lat iwarp 8 B 2000 min p50 ...",
        # "write-bw verbs:rxe0 64 KiB 300 MB/s ...".
        $1 ~ /^(write|read|send)-(lat|bw)$/ && $2 ~ /^(roce|iwarp|verbs:.*)$/ {
            v = (kind == "lat") ? $7 : $6; found = 1; exit
        }
        # perftest result rows: lat "8 2000 t_min t_max t_typical ...",
        # bw "65536 1000 peak average msgrate".
        $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 5 && $3 ~ /^([0-9.]+|inf|-?nan)$/ {
            raw = (kind == "lat") ? $5 : $4
            if (raw !~ /^[0-9.]+$/) { v = raw; bad = 1 } else v = (kind == "lat") ? raw : raw * 1.048576
            found = 1; exit
        }
        END { if (!found) print "-"; else if (bad) print "inf"; else printf "%.2f\n", v }' "$1"
}
