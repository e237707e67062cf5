// Package linkcut holds the link-cut test of issue 17: two network
// namespaces joined by a veth pair, a goverbs server in one and a client
// streaming WRITEs in the other, and the link taken down under them. It
// has no API; its test is the product:
//
//	sudo go test -v ./internal/linkcut/   # roce and iwarp, a few seconds
//
// What it holds: every WR outstanding when the link went down completes
// exactly once, the first with RETRY_EXC_ERR and the rest flushed, within
// the QP's ACK timeout × (retry count + 1) (4.096 µs × 2^Timeout per try,
// as the IBA defines it; 537 ms for the connection managers' Timeout 14
// and 7 retries): roce's requester retransmits and gives up itself;
// iwarp's QPs leave retransmission to TCP and set the socket's
// TCP_USER_TIMEOUT to that time, but to no less than the RNR budget and
// 400 ms (1.4 s with the default budget; the "iwarp-rnr100ms" case, with
// a 100 ms budget, shows the QP's 537 ms); and once the link is back, a
// new connection between the same two hosts works and moves the right
// bytes. The test allows twice the bound and a second.
// It needs root and iproute2; without them it skips, saying why.
package linkcut
