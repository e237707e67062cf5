package report

import "strings"

// units maps each metric kind's accepted units to the factor that converts
// a value in that unit to the metric's canonical unit ([Metric.Unit]).
// Lookups are case-sensitive where case carries meaning (B bytes, b bits).
var units = map[kind]map[string]float64{
	kindLatency: {"ns": 1e-3, "us": 1, "µs": 1, "μs": 1, "ms": 1e3, "s": 1e6},
	kindCPU:     {"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9},
	kindBandwidth: {
		"B/s": 1e-6, "KB/s": 1e-3, "kB/s": 1e-3, "MB/s": 1, "GB/s": 1e3, "TB/s": 1e6,
		"KiB/s": 1024 / 1e6, "MiB/s": (1 << 20) / 1e6, "GiB/s": (1 << 30) / 1e6,
		"b/s": 1 / 8e6, "Kb/s": 1 / 8e3, "kb/s": 1 / 8e3, "Mb/s": 1 / 8.0, "Gb/s": 1e3 / 8, "Tb/s": 1e6 / 8,
		"bps": 1 / 8e6, "Kbps": 1 / 8e3, "kbps": 1 / 8e3, "Mbps": 1 / 8.0, "Gbps": 1e3 / 8, "Tbps": 1e6 / 8,
	},
	kindRate: {
		"/s": 1e-6, "K/s": 1e-3, "k/s": 1e-3, "M/s": 1, "G/s": 1e3,
		"pps": 1e-6, "Kpps": 1e-3, "kpps": 1e-3, "Mpps": 1, "Gpps": 1e3,
	},
}

// unitNames lists the units of each kind for error messages.
var unitNames = map[kind]string{
	kindLatency:   "ns, us, µs, ms or s",
	kindCPU:       "ns, us, µs, ms or s (per operation)",
	kindBandwidth: "B/s, KB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s, Mb/s or Gb/s",
	kindRate:      "/s, K/s, M/s, pps, Kpps or Mpps",
}

// unitFactor returns the factor for unit u of kind k, accepting "ops/s",
// "msg/s" and "msgs/s" spellings of rates.
func unitFactor(k kind, u string) (float64, bool) {
	if k == kindRate {
		for _, word := range []string{"ops/s", "msgs/s", "msg/s"} {
			if strings.HasSuffix(u, word) {
				u = strings.TrimSuffix(u, word) + "/s"
			}
		}
	}
	f, ok := units[k][u]
	return f, ok
}
