//go:build linux

package shm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/verbs"
)

const sockEnv = "GOVERBS_SHM_SOCK"

// targetChild listens and accepts connections forever, each with private
// data naming a 1 MiB memfd region (the direct path) and a 1 MiB Go
// region (served by this process), until it is killed.
func targetChild() {
	_, d := childDevice("target")
	pd, _, _ := childQP(d)
	r, err := mem.Alloc(1 << 20)
	childCheck(err)
	rw := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
	direct, err := pd.RegisterMemory(r, rw)
	childCheck(err)
	owned, err := pd.RegisterMR(make([]byte, 1<<20), rw)
	childCheck(err)
	pdata, _ := direct.Remote().MarshalBinary()
	pdata, _ = owned.Remote().AppendBinary(pdata)
	ln, err := d.Listen(os.Getenv(sockEnv))
	childCheck(err)
	fmt.Println("READY")
	for {
		childAccept(d, pd, ln, 1024, pdata)
	}
}

// hammerChild WRITEs to the region the test names in its private data, as
// fast as it can, through one connection after another: when a connection
// fails (the region was revoked) it dials again and tries the old key
// again, until its standard input closes.
func hammerChild() {
	p, d := childDevice("hammer")
	ctx := untilStdinCloses()
	pd, cq, _ := childQP(d)
	src, err := pd.RegisterMR(make([]byte, 64<<10), verbs.AccessLocalWrite)
	childCheck(err)
	said := false
	for v := byte(1); ctx.Err() == nil; {
		qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: testCap})
		childCheck(err)
		info, err := d.Dial(ctx, os.Getenv(sockEnv), qp, verbs.ConnParam{})
		if err != nil {
			qp.Close()
			time.Sleep(time.Millisecond)
			continue
		}
		var tgt verbs.RemoteBuf
		childCheck(tgt.UnmarshalBinary(info.PrivateData))
		for counter(qp, "regions_imported") == 0 && qp.State() == verbs.StateRTS && ctx.Err() == nil {
			time.Sleep(100 * time.Microsecond)
		}
		v = hammer(ctx, qp, cq, src, tgt, v, &said)
		qp.Close()
		_ = p
	}
}

// hammer WRITEs until the QP fails; it returns the next fill byte.
func hammer(ctx context.Context, qp *verbs.QP, cq *verbs.CQ, src *verbs.MR, tgt verbs.RemoteBuf, v byte, said *bool) byte {
	n := min(int(tgt.Len), len(src.Bytes()))
	for ctx.Err() == nil {
		wrs := make([]verbs.SendWR, 16)
		for i := range wrs {
			wrs[i] = verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, n)}, Remote: tgt.At(0)}
		}
		wrs[15].Flags = verbs.SendSignaled
		for i := range src.Bytes() {
			src.Bytes()[i] = v
		}
		v++
		if qp.PostSend(wrs) != nil {
			return v
		}
		wcs, _ := conformance.PollN(cq, 1, time.Second) // the last, or the first failure
		for _, wc := range wcs {
			if wc.Status != verbs.StatusSuccess {
				fmt.Println("FAILED", wc.Status)
				conformance.PollN(cq, 256, 10*time.Millisecond) // the rest is flushed
				return v
			}
		}
		if !*said {
			fmt.Println("WRITING")
			*said = true
		}
	}
	return v
}

// roWriterChild plays a hostile peer: once the test's read-only region is
// mapped here, it tries to get write access to it around shm's checks, then
// writes through its mapping, which must kill it.
func roWriterChild() {
	p, d := childDevice("ro-writer")
	_, _, qp := childQP(d)
	size, _ := strconv.Atoi(os.Getenv("GOVERBS_SHM_RO_SIZE"))
	_, err := d.Dial(context.Background(), os.Getenv(sockEnv), qp, verbs.ConnParam{})
	childCheck(err)
	for counter(qp, "regions_imported") == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	var m []byte
	for _, b := range p.ImportMappings() {
		if len(b) == size {
			m = b
		}
	}
	if m == nil {
		childCheck(errors.New("no mapping of the read-only region"))
	}
	fmt.Println("MPROTECT", errString(unix.Mprotect(m, unix.PROT_READ|unix.PROT_WRITE)))
	reopenParentMemfds(size)
	fmt.Printf("READ %q\n", m[:9])
	fmt.Printf("ADDR %#x\n", uintptr(unsafe.Pointer(&m[0])))
	m[0] = 'X' // must fault
	fmt.Println("WRITE SUCCEEDED")
}

// reopenParentMemfds opens the test process's memfds of the read-only
// region's size through /proc (as any process of the same user may) and
// tries to map them writable and to write them.
func reopenParentMemfds(size int) {
	dir := fmt.Sprintf("/proc/%d/fd", os.Getppid())
	ents, err := os.ReadDir(dir)
	childCheck(err)
	for _, e := range ents {
		link, err := os.Readlink(dir + "/" + e.Name())
		if err != nil || !strings.HasPrefix(link, "/memfd:goverbs") {
			continue
		}
		fd, err := unix.Open(dir+"/"+e.Name(), unix.O_RDWR, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Size == int64(size) {
			b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			fmt.Println("REOPEN MMAP", errString(err))
			if err == nil {
				unix.Munmap(b)
			}
			_, err = unix.Pwrite(fd, []byte("X"), 0)
			fmt.Println("REOPEN WRITE", errString(err))
		}
		unix.Close(fd)
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
