package roce

import (
	"sync/atomic"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
)

// counter names one transport counter. The turn's holder increments them;
// any goroutine reads them.
type counter uint8

// Per-QP counters (and, with the same names, per-device sums of the
// packets no QP claimed). Names follow rxe's hw counters where one exists
// (rdma statistic show): rcvd_pkts, sent_pkts, duplicate_request,
// out_of_seq_request, rcvd_rnr_err, send_rnr_err, completer_retry_err,
// retry_exceeded_err, ack_deferred...
const (
	ctrTxPackets      counter = iota // packets sent (requests and responses)
	ctrTxBytes                       // payload bytes sent
	ctrRxPackets                     // packets accepted
	ctrRxBytes                       // payload bytes accepted
	ctrRetransmits                   // request packets sent again (go-back-N)
	ctrTimeouts                      // local ACK timeouts
	ctrAckProbes                     // unsignalled tails sent again to ask for their ACK
	ctrRetryExceeded                 // WRs failed with RETRY_EXC_ERR
	ctrRNRWaits                      // RNR NAKs received (each one a wait)
	ctrRNRExceeded                   // WRs failed with RNR_RETRY_EXC_ERR
	ctrSeqNAKsRcvd                   // PSN sequence error NAKs received
	ctrInvReqNAKsRcvd                // invalid request NAKs received
	ctrAccessNAKsRcvd                // remote access error NAKs received
	ctrOpNAKsRcvd                    // remote operational error NAKs received
	ctrSeqNAKsSent                   // PSN sequence error NAKs sent
	ctrRNRNAKsSent                   // RNR NAKs sent
	ctrInvReqNAKsSent                // invalid request NAKs sent
	ctrAccessNAKsSent                // remote access error NAKs sent
	ctrOpNAKsSent                    // remote operational error NAKs sent
	ctrAcksSent                      // ACKNOWLEDGE packets sent
	ctrAcksRcvd                      // ACKNOWLEDGE packets received
	ctrDupRequests                   // duplicate requests (re-ACKed or replayed)
	ctrDupResponses                  // stale or duplicate responses ignored
	ctrDropForeign                   // packets from an address that is not the peer's
	ctrDropUnknownQP                 // packets for no QP of the device
	ctrDropICRC                      // packets whose ICRC did not match
	ctrDropMalformed                 // packets that do not parse (or break the MTU rules)
	ctrDropState                     // packets for a QP that cannot take them now
	ctrTxErrors                      // datagrams the socket refused
	ctrTxDatagrams                   // datagrams handed to the socket (device only)
	ctrRxDatagrams                   // datagrams read from the socket (device only)
	ctrTxGSO                         // UDP GSO super-datagrams sent (device only)
	ctrRxGRO                         // UDP GRO runs received (device only)
	ctrRxPolled                      // datagrams a CQ's poller read (device only; drive.go)
	ctrRxWaited                      // datagrams a CQ's waiter read (device only; drive_wait.go)
	ctrReaderIdle                    // the parked reader came back because nobody polled for a readerPark (device only; drive.go)
	ctrAcksHeld                      // poll turns that left their ACKs for the application's next post (device only; ackhold.go)
	numCounters
)

var counterNames = [numCounters]string{
	ctrTxPackets:      "tx_packets",
	ctrTxBytes:        "tx_bytes",
	ctrRxPackets:      "rx_packets",
	ctrRxBytes:        "rx_bytes",
	ctrRetransmits:    "retransmitted_packets",
	ctrTimeouts:       "ack_timeouts",
	ctrAckProbes:      "ack_probes",
	ctrRetryExceeded:  "retry_exceeded_err",
	ctrRNRWaits:       "rnr_waits",
	ctrRNRExceeded:    "rnr_retry_exceeded_err",
	ctrSeqNAKsRcvd:    "rcvd_seq_naks",
	ctrInvReqNAKsRcvd: "rcvd_inv_req_naks",
	ctrAccessNAKsRcvd: "rcvd_rem_access_naks",
	ctrOpNAKsRcvd:     "rcvd_rem_op_naks",
	ctrSeqNAKsSent:    "sent_seq_naks",
	ctrRNRNAKsSent:    "sent_rnr_naks",
	ctrInvReqNAKsSent: "sent_inv_req_naks",
	ctrAccessNAKsSent: "sent_rem_access_naks",
	ctrOpNAKsSent:     "sent_rem_op_naks",
	ctrAcksSent:       "sent_acks",
	ctrAcksRcvd:       "rcvd_acks",
	ctrDupRequests:    "duplicate_requests",
	ctrDupResponses:   "duplicate_responses",
	ctrDropForeign:    "dropped_foreign",
	ctrDropUnknownQP:  "dropped_unknown_qp",
	ctrDropICRC:       "dropped_icrc",
	ctrDropMalformed:  "dropped_malformed",
	ctrDropState:      "dropped_wrong_state",
	ctrTxErrors:       "tx_errors",
	ctrTxDatagrams:    "tx_datagrams",
	ctrRxDatagrams:    "rx_datagrams",
	ctrTxGSO:          "tx_gso_datagrams",
	ctrRxGRO:          "rx_gro_datagrams",
	ctrRxPolled:       "rx_polled_datagrams",
	ctrRxWaited:       "rx_waited_datagrams",
	ctrReaderIdle:     "reader_park_timeouts",
	ctrAcksHeld:       "poll_acks_held",
}

// String returns the counter's name.
func (c counter) String() string {
	if c < numCounters {
		return counterNames[c]
	}
	return "unknown"
}

// counters is a set of transport counters.
type counters [numCounters]atomic.Uint64

func (cs *counters) inc(c counter)           { cs[c].Add(1) }
func (cs *counters) add(c counter, n uint64) { cs[c].Add(n) }
func (cs *counters) get(c counter) uint64    { return cs[c].Load() }

// list returns every counter, for the device.
func (cs *counters) list() []provider.Counter { return cs.appendTo(nil, numCounters) }

// listQP returns the counters that a QP keeps.
func (cs *counters) listQP() []provider.Counter { return cs.appendTo(nil, ctrTxDatagrams) }

func (cs *counters) appendTo(out []provider.Counter, end counter) []provider.Counter {
	for i := counter(0); i < end; i++ {
		out = append(out, provider.Counter{Name: counterNames[i], Value: cs[i].Load()})
	}
	return out
}

// nakCounters maps a NAK code to its counters of NAKs sent and received;
// a code of no other kind counts as a remote operational error.
func nakCounters(c ib.NAKCode) (sent, rcvd counter) {
	switch c {
	case ib.NAKPSNSeqErr:
		return ctrSeqNAKsSent, ctrSeqNAKsRcvd
	case ib.NAKInvalidRequest:
		return ctrInvReqNAKsSent, ctrInvReqNAKsRcvd
	case ib.NAKRemoteAccess:
		return ctrAccessNAKsSent, ctrAccessNAKsRcvd
	}
	return ctrOpNAKsSent, ctrOpNAKsRcvd
}
