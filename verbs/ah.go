package verbs

import "fmt"

// CreateAH makes an address handle for UD sends to av (ibv_create_ah). The
// provider checks and resolves the address now, so a bad one fails here
// rather than in a completion.
func (pd *PD) CreateAH(av AddressVector) (*AddressHandle, error) {
	c, ok := pd.p.(ProviderAHCreator)
	if !ok {
		return nil, fmt.Errorf("%w: the device has no UD queue pairs", ErrNotSupported)
	}
	r, err := c.CreateAH(av)
	if err != nil {
		return nil, err
	}
	return &AddressHandle{av: av, resolved: r}, nil
}

// checkUDSends applies the rules of a UD send queue that need no device:
// SENDs only (with or without immediate), each with an address handle.
func checkUDSends(wrs []SendWR) error {
	for i := range wrs {
		wr := &wrs[i]
		switch {
		case wr.Opcode != OpSend && wr.Opcode != OpSendWithImm:
			return &PostError{Op: "post send", Index: i, ID: wr.ID, Err: fmt.Errorf("%w: a UD QP sends SEND and SEND_WITH_IMM only, not %v", ErrNotSupported, wr.Opcode)}
		case wr.AH == nil:
			return &PostError{Op: "post send", Index: i, ID: wr.ID, Err: fmt.Errorf("%w: a UD SEND needs an address handle", ErrInvalidArgument)}
		}
	}
	return nil
}

// GobEncode lets a SendWR cross a process boundary in encoding/gob (the
// conformance suite's remote peer): a handle travels as its address; the
// receiving process resolves it again with CreateAH.
func (ah *AddressHandle) GobEncode() ([]byte, error) {
	b := make([]byte, 0, 16+2+len(ah.av.Addr))
	b = append(b, ah.av.GID[:]...)
	b = append(b, ah.av.TrafficClass, ah.av.HopLimit)
	return append(b, ah.av.Addr...), nil
}

// GobDecode is GobEncode's inverse; the handle is unresolved.
func (ah *AddressHandle) GobDecode(b []byte) error {
	if len(b) < 18 {
		return fmt.Errorf("%w: address handle encoding of %d bytes", ErrInvalidArgument, len(b))
	}
	*ah = AddressHandle{}
	copy(ah.av.GID[:], b[:16])
	ah.av.TrafficClass, ah.av.HopLimit = b[16], b[17]
	ah.av.Addr = string(b[18:])
	return nil
}
