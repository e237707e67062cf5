package provider

// Length returns the total length of an SGE list.
func Length(sgl []SGE) uint64 {
	var n uint64
	for _, s := range sgl {
		n += uint64(s.Length)
	}
	return n
}
