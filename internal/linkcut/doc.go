// Package linkcut holds the link-cut test of issue 17: two network
// namespaces joined by a veth pair, a goverbs server in one and a client
// streaming WRITEs in the other, and the link taken down under them. It
// has no API; its test is the product:
//
//	sudo go test -v ./internal/linkcut/                          # roce
//	sudo GOVERBS_LINKCUT_IWARP=1 go test -v ./internal/linkcut/  # and iwarp (about 40 s)
//
// What it holds: every WR outstanding when the link went down completes
// exactly once, the first with RETRY_EXC_ERR and the rest flushed, within
// the QP's ACK timeout × (retry count + 1) on roce (4.096 µs × 2^Timeout
// per try, as the IBA defines it) and within TCP_USER_TIMEOUT on iwarp,
// whose QPs leave retransmission to TCP; and once the link is back, a new
// connection between the same two hosts works and moves the right bytes.
// It needs root and iproute2; without them it skips, saying why.
package linkcut
