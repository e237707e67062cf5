#!/bin/bash
# setup-cost.sh: connection setup in the lab guest (issue 14): the
# kernel's rdma_cm (cmtime, kernel to kernel over rxe0) beside goverbs'
# IB CM and side channel (goverbs bench, two processes in the peer
# namespace over its veth). Not a pass/fail row: figures for
# BENCHMARKS.md §16. From the host:
#   CGO_ENABLED=0 go build -o /tmp/lab/goverbs ./cmd/goverbs
#   ../shared/lab/run-in-guest.sh --timeout 300 scripts/interop/setup-cost.sh /tmp/lab/goverbs
set -u
X=$LAB_RXE_IP XP=$LAB_RXE_PEER_IP
NS="$(type -P ip) netns exec ${LAB_PEER_NS:-peer}"
export GOMAXPROCS=2
N=${N:-200}
echo "== cmtime, kernel rdma_cm over rxe0, $N connections"
cmtime -b $X -c $N > /tmp/cmtime_srv.txt 2>&1 &
sp=$!
sleep 3
timeout 200 cmtime -s $X -c $N 2>&1 | tail -20
kill $sp 2>/dev/null; wait 2>/dev/null
for tr in roce roce-ibcm; do
  for th in 1; do
    echo "== goverbs bench --transport $tr --test setup,tcp-setup --threads $th --iters $N (two processes, peer ns)"
    $NS timeout 100 /lab/goverbs bench --listen $XP:18600 > /tmp/srv.txt 2>&1 &
    sleep 2
    $NS timeout 100 /lab/goverbs bench --connect $XP:18600 --transport $tr --test setup,tcp-setup --threads $th --iters $N 2>&1 | grep -E "setup|per second|fail" | head -20
    wait 2>/dev/null
  done
done
