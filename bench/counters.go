package bench

// counterSource is a session whose QPs keep transport counters.
type counterSource interface {
	counters() map[string]uint64
}

// countersOf sums the counters of s's QPs by name; nil if s keeps none.
func countersOf(s session) map[string]uint64 {
	if cs, ok := s.(counterSource); ok {
		return cs.counters()
	}
	return nil
}

// counters sums the transport counters of every QP of the session.
func (s *rdmaSession) counters() map[string]uint64 {
	sum := map[string]uint64{}
	for _, d := range s.devs {
		for _, c := range d.conns {
			for _, k := range c.qp.Counters() {
				sum[k.Name] += k.Value
			}
		}
	}
	return sum
}

// counterDelta returns the counters that moved from before to after, or
// nil if none did. Counters that are settings rather than counts (an IRD,
// a flag) do not move and so do not appear.
func counterDelta(before, after map[string]uint64) map[string]uint64 {
	var d map[string]uint64
	for name, v := range after {
		if v != before[name] {
			if d == nil {
				d = make(map[string]uint64, len(after))
			}
			d[name] = v - before[name]
		}
	}
	return d
}
