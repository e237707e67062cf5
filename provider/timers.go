package provider

import "time"

// rnrTimerMicros is the IBA table of RNR NAK timer codes (IBA 1.4 table 45),
// in microseconds: code 0 is the longest wait, 655.36 ms.
var rnrTimerMicros = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
}

// RNRTimer returns how long a sender waits after an RNR NAK that carries the
// timer code (QPAttr.MinRNRTimer), as the IBA table defines it.
func RNRTimer(code uint8) time.Duration {
	return time.Duration(rnrTimerMicros[code&31]) * time.Microsecond
}

// AckTimeout returns the local ACK timeout for a QP's Timeout exponent:
// 4.096 µs × 2^exp (IBA 1.4 §9.7.6.1.3); zero means wait forever.
func AckTimeout(exp uint8) time.Duration {
	if exp == 0 {
		return 0
	}
	return time.Duration(4096<<min(exp, 31)) * time.Nanosecond
}
