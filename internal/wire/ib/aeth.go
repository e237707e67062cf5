package ib

import (
	"encoding/binary"
	"strconv"
	"time"
)

// AETHLen is the size of the ACK Extended Transport Header.
const AETHLen = 4

// AETH is a view of an ACK Extended Transport Header, carried by
// ACKNOWLEDGE, ATOMIC ACKNOWLEDGE and the first, last and only RDMA READ
// responses (IBA Vol 1 §9.3, AETH). Accessors require [AETH.IsValid].
type AETH []byte

// AETHFields holds the values [AETH.Encode] writes.
type AETHFields struct {
	Syndrome Syndrome // ACK, RNR NAK or NAK, see [ACKSyndrome] and friends
	MSN      uint32   // message sequence number, 24 bits
}

// IsValid reports whether a is long enough to hold an AETH.
func (a AETH) IsValid() bool { return len(a) >= AETHLen }

// Syndrome returns the syndrome byte (IBA Vol 1 §9.3, AETH Syndrome; the
// encoding is in IBA Vol 1 §9.7 and rxe_hdr.h enum aeth_syndrome).
func (a AETH) Syndrome() Syndrome { return Syndrome(a[0]) }

// SetSyndrome sets the syndrome byte.
func (a AETH) SetSyndrome(s Syndrome) { a[0] = byte(s) }

// MSN returns the 24-bit message sequence number: the number of messages
// the responder has completed (IBA Vol 1 §9.3, AETH MSN).
func (a AETH) MSN() uint32 { return get24(a[1:]) }

// SetMSN sets the message sequence number (low 24 bits of n).
func (a AETH) SetMSN(n uint32) { put24(a[1:], n) }

// Encode writes f into a.
func (a AETH) Encode(f *AETHFields) {
	binary.BigEndian.PutUint32(a, uint32(f.Syndrome)<<24|f.MSN&mask24)
}

// Fields returns the fields of a.
func (a AETH) Fields() AETHFields { return AETHFields{Syndrome: a.Syndrome(), MSN: a.MSN()} }

// Syndrome is the AETH syndrome byte: bit 7 reserved, bits 6-5 the kind
// ([SyndromeKind]), bits 4-0 a credit count, RNR timer code or NAK code
// (IBA Vol 1 §9.7, reliable service; rxe_hdr.h AETH_TYPE_MASK).
type Syndrome uint8

// SyndromeKind is bits 6-5 of a [Syndrome].
type SyndromeKind uint8

// Syndrome kinds (rxe_hdr.h AETH_ACK, AETH_RNR_NAK, AETH_NAK).
const (
	KindACK      SyndromeKind = 0
	KindRNRNAK   SyndromeKind = 1
	KindReserved SyndromeKind = 2
	KindNAK      SyndromeKind = 3
)

const (
	syndromeKindShift = 5
	syndromeValueMask = 0x1F
)

// CreditInvalid is the ACK credit count that means "no credit information":
// the responder does not do end-to-end flow control. rxe sends it in every
// ACK (rxe_hdr.h AETH_ACK_UNLIMITED).
const CreditInvalid = 0x1F

// SyndromeACK is the syndrome of an ACK with [CreditInvalid], the one rxe
// sends.
const SyndromeACK Syndrome = CreditInvalid

// NAKCode is the low five bits of a NAK syndrome (IBA Vol 1 §9.7; rxe_hdr.h
// AETH_NAK_*).
type NAKCode uint8

// NAK codes. Codes 5-31 are reserved.
const (
	NAKPSNSeqErr         NAKCode = 0 // PSN sequence error: resend from the PSN in the BTH
	NAKInvalidRequest    NAKCode = 1 // malformed or unsupported request, fatal to the QP
	NAKRemoteAccess      NAKCode = 2 // R_Key, bounds or rights check failed
	NAKRemoteOperational NAKCode = 3 // responder could not complete the request
	NAKInvalidRDRequest  NAKCode = 4 // RD only
)

// ACKSyndrome returns the syndrome of a positive ACK carrying the given
// 5-bit credit code; most callers want [SyndromeACK].
func ACKSyndrome(credits uint8) Syndrome { return Syndrome(credits & syndromeValueMask) }

// RNRNAKSyndrome returns the syndrome of a Receiver Not Ready NAK asking the
// requester to wait t before retrying.
func RNRNAKSyndrome(t RNRTimer) Syndrome {
	return Syndrome(KindRNRNAK)<<syndromeKindShift | Syndrome(t&syndromeValueMask)
}

// NAKSyndrome returns the syndrome of a NAK with code c.
func NAKSyndrome(c NAKCode) Syndrome {
	return Syndrome(KindNAK)<<syndromeKindShift | Syndrome(c&syndromeValueMask)
}

// Kind returns bits 6-5 of s, ignoring the reserved bit 7. rxe instead
// masks with 0xE0 (AETH_TYPE_MASK), so to rxe a syndrome with bit 7 set is of
// no known kind; senders must keep the bit clear.
func (s Syndrome) Kind() SyndromeKind { return SyndromeKind(s>>syndromeKindShift) & 3 }

// Credits returns the credit code of an ACK syndrome.
func (s Syndrome) Credits() uint8 { return uint8(s & syndromeValueMask) }

// RNRTimer returns the timer code of an RNR NAK syndrome.
func (s Syndrome) RNRTimer() RNRTimer { return RNRTimer(s & syndromeValueMask) }

// NAKCode returns the code of a NAK syndrome.
func (s Syndrome) NAKCode() NAKCode { return NAKCode(s & syndromeValueMask) }

// String describes s for logs, e.g. "ACK credits=31" or "NAK invalid request".
func (s Syndrome) String() string {
	switch s.Kind() {
	case KindACK:
		return "ACK credits=" + strconv.Itoa(int(s.Credits()))
	case KindRNRNAK:
		return "RNR NAK timer=" + s.RNRTimer().Duration().String()
	case KindNAK:
		return "NAK " + s.NAKCode().String()
	}
	return "reserved syndrome 0x" + strconv.FormatUint(uint64(s), 16)
}

var nakNames = [...]string{
	NAKPSNSeqErr:         "PSN sequence error",
	NAKInvalidRequest:    "invalid request",
	NAKRemoteAccess:      "remote access error",
	NAKRemoteOperational: "remote operational error",
	NAKInvalidRDRequest:  "invalid RD request",
}

// String returns the IBA name of c.
func (c NAKCode) String() string {
	if int(c) < len(nakNames) {
		return nakNames[c]
	}
	return "reserved code " + strconv.Itoa(int(c))
}

// RNRTimer is the 5-bit code for how long a requester waits after an RNR
// NAK; the same code is the QP attribute min_rnr_timer (IBA Vol 1 §9.7, RNR
// NAK timer table; rxe_comp.c rnrnak_usec).
type RNRTimer uint8

// rnrMicros maps an RNR timer code to microseconds. Code 0 is the longest,
// not the shortest: the table is IBA's, not a formula.
var rnrMicros = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120,
	160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}

// Duration returns the wait t encodes; only the low five bits count.
func (t RNRTimer) Duration() time.Duration {
	return time.Duration(rnrMicros[t&syndromeValueMask]) * time.Microsecond
}

// LocalACKTimeout returns how long a requester waits for an acknowledgement
// before retrying: 4.096 µs × 2^exp, exp being the QP attribute timeout (IBA
// Vol 1 §9.7, requester timeouts; rxe_qp.c rxe_qp_from_attr). Only the low
// five bits of exp count, and 0 disables the timer, for which it returns 0.
func LocalACKTimeout(exp uint8) time.Duration {
	exp &= 0x1F
	if exp == 0 {
		return 0
	}
	return 4096 * time.Nanosecond << exp
}
