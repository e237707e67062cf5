package verbs

import "fmt"

// Dmabuf names memory another driver exported as a dma-buf file
// descriptor: a GPU's memory, for example, obtained through CUDA's or
// ROCm's dma-buf export. The caller keeps FD open and the memory
// allocated for as long as a region is registered over it; the region
// does not own either.
type Dmabuf struct {
	FD     int    // the dma-buf file descriptor
	Offset uint64 // where the region starts within the dma-buf
	Length uint64 // the region's length in bytes
	// IOVA is the virtual address work requests and peers name the
	// region's first byte by (SGE.Addr, RemoteBuf.Addr). It need not be
	// a CPU address: the CPU cannot reach the memory through the region.
	IOVA uint64
}

// ProviderDmabufRegisterer is implemented by the PDs of providers that
// register dma-buf memory (ibv_reg_dmabuf_mr). The device reaches the
// memory through the exporting driver; the provider never maps it.
type ProviderDmabufRegisterer interface {
	RegisterDmabuf(fd int, offset, length, iova uint64, access Access) (ProviderMR, error)
}

// RegisterDmabuf registers memory exported as a dma-buf (ibv_reg_dmabuf_mr),
// so that an RDMA device moves it without the CPU copying it: the seam
// through which GPU memory reaches RDMA. Access rules are RegisterMR's.
//
// Only a device whose hardware reaches the exporter's memory can do this:
// the software transports (iwarp, roce, shm, loopback) and the kernel's
// rxe and siw refuse it with ErrNotSupported rather than copy behind the
// user's back. The region's Bytes is nil (the CPU has no mapping of it);
// its SGEs and Remote use d.IOVA as the address of its first byte.
func (pd *PD) RegisterDmabuf(d Dmabuf, access Access) (*MR, error) {
	if d.FD < 0 {
		return nil, fmt.Errorf("%w: dma-buf file descriptor %d", ErrInvalidArgument, d.FD)
	}
	if d.Length == 0 {
		return nil, fmt.Errorf("%w: a region of 0 bytes", ErrInvalidArgument)
	}
	if d.Offset+d.Length < d.Offset || d.IOVA+d.Length < d.IOVA {
		return nil, fmt.Errorf("%w: dma-buf range %#x+%#x at IOVA %#x wraps", ErrInvalidArgument, d.Offset, d.Length, d.IOVA)
	}
	if !access.Valid() {
		return nil, fmt.Errorf("%w: access %v", ErrInvalidArgument, access)
	}
	r, ok := pd.p.(ProviderDmabufRegisterer)
	if !ok {
		return nil, fmt.Errorf("%w: dma-buf registration on %s (a software transport has no device to reach the exporter's memory)", ErrNotSupported, pd.dev.caps.Name)
	}
	if err := pd.life.acquire(); err != nil {
		return nil, err
	}
	p, err := r.RegisterDmabuf(d.FD, d.Offset, d.Length, d.IOVA, access)
	if err != nil {
		pd.life.release()
		return nil, err
	}
	return &MR{pd: pd, p: p}, nil
}
