package perftest

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"github.com/goverbs/goverbs/verbs"
)

// sysInfo is what the version step (V) settled: perftest's
// exchange_versions, check_sys_data and check_mtu.
type sysInfo struct {
	peerVersion string
	cycle       int // max of both sides' cycle_buffer
	cacheLine   int
	mtu         verbs.MTU // min of both sides' port MTUs
}

// versions runs V: the 16-byte version, cycle buffer, cache line size and
// MTU, each exchanged in turn.
func versions(ctx context.Context, ch channel, mtu verbs.MTU) (sysInfo, error) {
	var s sysInfo
	v := make([]byte, 16)
	copy(v, Version)
	rem, err := ch.exchange(ctx, v)
	if err != nil {
		return s, &ExchangeError{Step: "version", Err: err}
	}
	s.peerVersion, _, _ = strings.Cut(string(rem), "\x00")
	if f, err := strconv.ParseFloat(leadingFloat(s.peerVersion), 64); err != nil || f < 5.70 {
		return s, &VersionError{Peer: s.peerVersion}
	}
	s.cycle, err = exchangeInt(ctx, ch, CycleBuffer, "cycle buffer")
	if err == nil {
		s.cacheLine, err = exchangeInt(ctx, ch, CacheLine, "cache line size")
	}
	if err != nil {
		return s, err
	}
	s.mtu, err = exchangeMTU(ctx, ch, mtu)
	return s, err
}

// leadingFloat is the prefix of s that atof would read.
func leadingFloat(s string) string {
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.') {
		end++
	}
	return s[:end]
}

// exchangeInt exchanges one htonl'd int and keeps the larger.
func exchangeInt(ctx context.Context, ch channel, mine int, step string) (int, error) {
	rem, err := ch.exchange(ctx, binary.BigEndian.AppendUint32(nil, uint32(mine)))
	if err != nil {
		return 0, &ExchangeError{Step: step, Err: err}
	}
	return max(mine, int(int32(binary.BigEndian.Uint32(rem)))), nil
}

// mtuEnums are the ibv_mtu values perftest prints for each MTU.
var mtuEnums = map[verbs.MTU]int{256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}

// exchangeMTU exchanges the MTU as perftest does from version 5.31: the
// ibv_mtu enum in ASCII with its NUL, 2 bytes; the smaller one wins when
// the peer's is valid.
func exchangeMTU(ctx context.Context, ch channel, mtu verbs.MTU) (verbs.MTU, error) {
	e, ok := mtuEnums[mtu]
	if !ok {
		mtu, e = 1024, 3
	}
	rem, err := ch.exchange(ctx, []byte{byte('0' + e), 0})
	if err != nil {
		return 0, &ExchangeError{Step: "MTU", Err: err}
	}
	if r := int(rem[0] - '0'); r >= 1 && r <= 5 && r < e {
		return verbs.MTU(128 << r), nil
	}
	return mtu, nil
}

// Report is perftest's bandwidth report (struct bw_report_data), as the
// client sends it to the server after a bandwidth test.
type Report struct {
	Size, Iters              uint64
	PeakMBps, AvgMBps, MMsgs float64 // MB/s (2^20 B/s, as perftest prints), millions of messages/s
}

// exchangeReport runs B: size and iterations (be64), then the peak and
// average bandwidth and the message rate (byte-swapped doubles), one
// exchange each (xchg_bw_reports).
func exchangeReport(ctx context.Context, ch channel, my Report) (Report, error) {
	var r Report
	vals := []uint64{my.Size, my.Iters, math.Float64bits(my.PeakMBps), math.Float64bits(my.AvgMBps), math.Float64bits(my.MMsgs)}
	got := make([]uint64, len(vals))
	for i, v := range vals {
		rem, err := ch.exchange(ctx, binary.BigEndian.AppendUint64(nil, v))
		if err != nil {
			return r, &ExchangeError{Step: "bandwidth report", Err: err}
		}
		got[i] = binary.BigEndian.Uint64(rem)
	}
	r.Size, r.Iters = got[0], got[1]
	r.PeakMBps, r.AvgMBps, r.MMsgs = math.Float64frombits(got[2]), math.Float64frombits(got[3]), math.Float64frombits(got[4])
	return r, nil
}
