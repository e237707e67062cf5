package iwarp

import "github.com/goverbs/goverbs/soft"

// RFC 7306 atomics carry masks that verbs' compare-and-swap and
// fetch-and-add leave at their plain values (all ones, and zero). The
// responder honours any mask with a compare-and-swap loop on the target
// word; the plain cases take soft's single atomic instruction. Either way
// the update is atomic with respect to every other atomic on the word.

// fetchAddMasked adds add to the word at b in fields whose most
// significant bits are the bits set in mask: a carry out of such a bit is
// dropped (RFC 7306, Fetch and Add). It returns the original value.
func fetchAddMasked(b []byte, add, mask uint64) uint64 {
	if mask == 0 {
		return soft.FetchAdd(b, add)
	}
	for {
		old := soft.AtomicLoad(b)
		if soft.CompareSwap(b, old, maskedAdd(old, add, mask)) == old {
			return old
		}
	}
}

// maskedAdd adds a and b bit by bit, dropping the carry out of every bit
// set in mask.
func maskedAdd(a, b, mask uint64) uint64 {
	var sum, carry uint64
	for i := range 64 {
		x, y := a>>i&1, b>>i&1
		sum |= (x ^ y ^ carry) << i
		carry = (x&y | x&carry | y&carry) &^ (mask >> i & 1)
	}
	return sum
}

// cmpSwapMasked replaces, in the word at b, the bits of swapMask with
// those of swap when the bits of cmpMask equal those of cmp (RFC 7306,
// Compare and Swap). It returns the original value.
func cmpSwapMasked(b []byte, cmp, cmpMask, swap, swapMask uint64) uint64 {
	if cmpMask == ^uint64(0) && swapMask == ^uint64(0) {
		return soft.CompareSwap(b, cmp, swap)
	}
	for {
		old := soft.AtomicLoad(b)
		if (old^cmp)&cmpMask != 0 {
			return old
		}
		if soft.CompareSwap(b, old, old&^swapMask|swap&swapMask) == old {
			return old
		}
	}
}
