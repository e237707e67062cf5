#!/bin/bash
# scripts/interop/rdmacore.sh - the rdma-core backend's rows, run inside the
# RDMA lab guest: the conformance suite over the kernel's rxe0 and siw0
# through libibverbs/librdmacm (package rdmacore), every skip named with
# its reason in rdmacore/conformance_test.go.
#
# Run from the host (the test binary is built with cgo and -tags rdmacore):
#   go test -c -tags rdmacore -o /tmp/rdmacore.test ./rdmacore/
#   ../shared/lab/run-in-guest.sh --timeout 400 scripts/interop/rdmacore.sh /tmp/rdmacore.test
# Output: one ROW line per device, then the failures, if any.
set -u
cd /lab
# Registered memory counts against RLIMIT_MEMLOCK (siw and rxe pin pages).
ulimit -l unlimited
fails=0
for d in rxe0 siw0; do
    log=${LAB_OUT:-/lab/out}/rdmacore-$d.log
    mkdir -p "$(dirname "$log")"
    t0=$(cut -d' ' -f1 /proc/uptime)
    GOVERBS_REQUIRE_RDMACORE=1 timeout 170 ./rdmacore.test -test.run "TestConformance/$d\$|TestConformance/$d/" \
        -test.v -test.timeout 165s >"$log" 2>&1
    rc=$?
    t1=$(cut -d' ' -f1 /proc/uptime)
    pass=$(grep -c -- '--- PASS' "$log") skip=$(grep -c -- '--- SKIP' "$log")
    res=PASS
    [ $rc = 0 ] || { res=FAIL; fails=$((fails + 1)); grep -- '--- FAIL' "$log"; }
    printf 'ROW\trdmacore\tverbs:%s\tconformance\t-\t-\t%s\t%s\tpass=%s skip=%s\n' "$d" "$res" \
        "$(echo "$t1 - $t0" | bc 2>/dev/null || echo ?)" "$pass" "$skip"
done
exit $fails
