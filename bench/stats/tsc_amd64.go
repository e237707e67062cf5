package stats

// haveTSC says rdtsc reads a time-stamp counter.
const haveTSC = true

// rdtsc returns the CPU's time-stamp counter (RDTSC).
func rdtsc() uint64
