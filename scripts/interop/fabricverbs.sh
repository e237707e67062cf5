#!/bin/bash
# scripts/interop/fabricverbs.sh - the fabric backend's rows on real verbs
# devices, run inside the RDMA lab guest: the conformance suite over
# libfabric's verbs provider (FI_EP_MSG) on the kernel's rxe0 and siw0
# (package fabric, TestConformanceSelected), every skip named with its
# reason in fabric/conformance_test.go (providerGaps, "verbs/rxe" and
# "verbs/siw") or by the suite from the device's caps.
#
# Run from the host (the test binary is built with cgo and -tags libfabric):
#   go test -c -tags libfabric -o /tmp/fabric.test ./fabric/
#   ../shared/lab/run-in-guest.sh --timeout 400 scripts/interop/fabricverbs.sh /tmp/fabric.test
# Output: one ROW line per device, then the failures, if any.
# DeliveredThenClosed, a race the suite runs 20 times, runs 10 times per
# device here (GOVERBS_CONFORMANCE_TRIES): the TCG guest is slow, and the
# phase stays near 100 s of guest time for both devices.
set -u
cd /lab
# Registered memory counts against RLIMIT_MEMLOCK (siw and rxe pin pages).
ulimit -l unlimited
fails=0
for d in "rxe0 ${LAB_RXE_IP:-10.77.2.1}" "siw0 ${LAB_SIW_IP:-10.77.1.1}"; do
    set -- $d
    log=${LAB_OUT:-/lab/out}/fabricverbs-$1.log
    mkdir -p "$(dirname "$log")"
    t0=$(cut -d' ' -f1 /proc/uptime)
    GOVERBS_CONFORMANCE_TRIES=10 GOVERBS_REQUIRE_LIBFABRIC=1 GOVERBS_FABRIC_PROVIDER=verbs GOVERBS_FABRIC_DOMAIN=$1 GOVERBS_FABRIC_ADDR=$2 \
        timeout 175 ./fabric.test -test.run TestConformanceSelected -test.v -test.timeout 170s >"$log" 2>&1
    rc=$?
    t1=$(cut -d' ' -f1 /proc/uptime)
    pass=$(grep -c -- '--- PASS' "$log") skip=$(grep -c -- '--- SKIP' "$log")
    res=PASS
    [ $rc = 0 ] || { res=FAIL; fails=$((fails + 1)); grep -- '--- FAIL' "$log"; tail -5 "$log"; }
    printf 'ROW\tfabric-verbs\tfabric:verbs?domain=%s\tconformance\t-\t-\t%s\t%s\tpass=%s skip=%s\n' "$1" "$res" \
        "$(echo "$t1 - $t0" | bc 2>/dev/null || echo ?)" "$pass" "$skip"
done
exit $fails
