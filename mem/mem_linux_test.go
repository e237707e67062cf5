package mem

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openFds maps this process's open descriptors to what they name.
func openFds() map[string]string {
	ents, _ := os.ReadDir("/proc/self/fd")
	fds := make(map[string]string)
	for _, e := range ents {
		fds[e.Name()], _ = os.Readlink("/proc/self/fd/" + e.Name())
	}
	return fds
}

// leaks describes descriptors opened since before, other than the ones the
// runtime keeps for itself (netpoller, pidfds), and memfd mappings still in
// place.
func leaks(before map[string]string) string {
	var out []string
	for fd, name := range openFds() {
		if before[fd] == name || strings.HasPrefix(name, "anon_inode:") {
			continue
		}
		out = append(out, "fd "+fd+" -> "+name)
	}
	maps, _ := os.ReadFile("/proc/self/maps")
	for line := range strings.Lines(string(maps)) {
		if strings.Contains(line, "/memfd:goverbs") {
			out = append(out, "mapping "+strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "; ")
}

func mustMap(t *testing.T, fd, size int, writable bool) *Region {
	t.Helper()
	r, err := Map(fd, size, writable)
	if err != nil {
		t.Fatalf("Map(writable=%v): %v", writable, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func mustFd(t *testing.T, r *Region) int {
	t.Helper()
	fd, err := r.Fd()
	if err != nil {
		t.Fatalf("Fd: %v", err)
	}
	return fd
}

func TestMemfdShared(t *testing.T) {
	r := mustAlloc(t, 3*os.Getpagesize())
	fd := mustFd(t, r)
	if link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err != nil || !strings.HasPrefix(link, "/memfd:goverbs") {
		t.Errorf("Fd is %q (%v), want a memfd", link, err)
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
		t.Errorf("memfd flags %#x (%v), want FD_CLOEXEC", fl, err)
	}
	w := mustMap(t, fd, r.Len(), true)
	ro := mustMap(t, fd, r.Len(), false)
	if addr(w.Bytes()) == addr(r.Bytes()) || addr(ro.Bytes()) == addr(r.Bytes()) {
		t.Fatal("Map returned the same mapping, not a second one")
	}
	last := r.Len() - 1
	r.Bytes()[last] = 0xa5
	if w.Bytes()[last] != 0xa5 || ro.Bytes()[last] != 0xa5 {
		t.Errorf("write through the original not seen: %#x %#x", w.Bytes()[last], ro.Bytes()[last])
	}
	w.Bytes()[0] = 0x5a
	if r.Bytes()[0] != 0x5a || ro.Bytes()[0] != 0x5a {
		t.Errorf("write through the peer mapping not seen: %#x %#x", r.Bytes()[0], ro.Bytes()[0])
	}
	if w.Persistent() || w.Persist(0, 1) == nil {
		t.Error("a Map region claims persistence")
	}
	if _, err := w.Fd(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Fd of a Map region: %v, want ErrNotSupported", err)
	}
	// The peer mappings outlive the region that made the memfd.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	w.Bytes()[1] = 1
	if ro.Bytes()[1] != 1 || ro.Bytes()[last] != 0xa5 {
		t.Error("peer mappings lost the memory when the owner closed")
	}
}

func TestMemfdSealed(t *testing.T) {
	r := mustAlloc(t, 1)
	fd := mustFd(t, r)
	for _, size := range []int64{0, int64(r.Len()) * 2} {
		if err := unix.Ftruncate(fd, size); !errors.Is(err, unix.EPERM) {
			t.Errorf("ftruncate(%d) of the memfd: %v, want EPERM (sealed)", size, err)
		}
	}
}

func TestMapChecks(t *testing.T) {
	page := os.Getpagesize()
	r := mustAlloc(t, 2*page)
	fd := mustFd(t, r)
	for _, size := range []int{0, -1, r.Len() + 1} {
		if m, err := Map(fd, size, true); err == nil {
			m.Close()
			t.Errorf("Map(size %d) of a %d-byte memfd succeeded", size, r.Len())
		}
	}
	if _, err := Map(fd, page, true, HugePages); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Map with HugePages: %v, want ErrNotSupported", err)
	}
	if _, err := Map(-1, page, true); err == nil {
		t.Error("Map(-1) succeeded")
	}
	// A smaller mapping than the memfd is fine, and rounds to the page.
	m := mustMap(t, fd, 1, false)
	if m.Len() != page {
		t.Errorf("Map(1): Len %d, want %d", m.Len(), page)
	}

	// A read-only descriptor can be mapped read-only, not writable.
	rofd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("reopen memfd read-only: %v", err)
	}
	defer unix.Close(rofd)
	if _, err := Map(rofd, page, true); !errors.Is(err, unix.EACCES) {
		t.Errorf("writable Map of a read-only descriptor: %v, want EACCES", err)
	}
	mustMap(t, rofd, page, false)
}

const childEnv = "GOVERBS_MEM_TEST_CHILD"

// TestReadOnlyMappingFaults writes through a read-only Map in a child
// process and checks that the write faulted. The Go runtime catches the
// SIGSEGV itself, prints "unexpected fault address" and the signal, and
// exits with status 2, so the child is not reported as killed by a signal:
// the test reads the signal from the runtime's report and checks that the
// line after the write never ran.
func TestReadOnlyMappingFaults(t *testing.T) {
	if os.Getenv(childEnv) == "write-read-only" {
		writeReadOnlyChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadOnlyMappingFaults$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=write-read-only", "GOTRACEBACK=single")
	out, err := cmd.CombinedOutput()
	text := string(out)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child did not fail (err %v):\n%s", err, text)
	}
	if strings.Contains(text, "WRITE SUCCEEDED") {
		t.Fatalf("write through a read-only mapping succeeded:\n%s", text)
	}
	var faultAddr string
	for line := range strings.Lines(text) {
		if a, ok := strings.CutPrefix(line, "CHILD ADDR "); ok {
			faultAddr = strings.TrimSpace(a)
		}
	}
	if faultAddr == "" || !strings.Contains(text, "CHILD READ 1") {
		t.Fatalf("child did not reach the write:\n%s", text)
	}
	if !strings.Contains(text, "unexpected fault address "+faultAddr) ||
		!(strings.Contains(text, "[signal SIGSEGV") || strings.Contains(text, "[signal SIGBUS")) {
		t.Fatalf("child did not die of a fault at %s:\n%s", faultAddr, text)
	}
	t.Logf("child exit: %v; runtime report: %s", ee, firstLine(text, "[signal"))
}

func firstLine(text, prefix string) string {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// writeReadOnlyChild runs in the child: it must die at the marked write.
func writeReadOnlyChild() {
	r, err := Alloc(1)
	if err != nil {
		panic(err)
	}
	fd, err := r.Fd()
	if err != nil {
		panic(err)
	}
	ro, err := Map(fd, r.Len(), false)
	if err != nil {
		panic(err)
	}
	r.Bytes()[0] = 1
	fmt.Printf("CHILD READ %d\n", ro.Bytes()[0])
	fmt.Printf("CHILD ADDR %#x\n", addr(ro.Bytes()))
	ro.Bytes()[0] = 2 // must fault
	fmt.Println("WRITE SUCCEEDED")
	os.Exit(0)
}

// residentPages counts the pages of b that are in memory (mincore).
func residentPages(t *testing.T, b []byte) int {
	page := os.Getpagesize()
	vec := make([]byte, (len(b)+page-1)/page)
	_, _, e := unix.Syscall(unix.SYS_MINCORE, addr(b), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

func TestPrefaultPopulates(t *testing.T) {
	const size = 1 << 20
	pages := size / os.Getpagesize()
	lazy := mustAlloc(t, size)
	if n := residentPages(t, lazy.Bytes()); n != 0 {
		t.Errorf("without Prefault: %d of %d pages resident, want 0", n, pages)
	}
	eager := mustAlloc(t, size, Prefault)
	if n := residentPages(t, eager.Bytes()); n != pages {
		t.Errorf("with Prefault: %d of %d pages resident, want all", n, pages)
	}
}

// meminfo returns a field of /proc/meminfo (in kB for sizes), or -1.
func meminfo(field string) int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err == nil {
				return n
			}
		}
	}
	return -1
}

func TestHugePages(t *testing.T) {
	r, err := Alloc(1, HugePages, Prefault)
	if err != nil {
		// The usual outcome on machines with no reserved huge pages: the
		// error must say so in a way callers can test.
		if !errors.Is(err, ErrNoHugePages) {
			t.Fatalf("Alloc(HugePages): %v, want an error wrapping ErrNoHugePages", err)
		}
		t.Skipf("no explicit huge pages (HugePages_Total %d, HugePages_Free %d): %v",
			meminfo("HugePages_Total"), meminfo("HugePages_Free"), err)
	}
	defer r.Close()
	huge := meminfo("Hugepagesize") * 1024
	if r.PageSize() != huge || r.Len() != huge || addr(r.Bytes())%uintptr(huge) != 0 {
		t.Fatalf("PageSize %d, Len %d, address %#x; want %d-byte aligned huge page", r.PageSize(), r.Len(), addr(r.Bytes()), huge)
	}
	r.Bytes()[huge-1] = 9
	// A peer mapping the hugetlbfs memfd gets its page size from it.
	m := mustMap(t, mustFd(t, r), 1, false)
	if m.PageSize() != huge || m.Len() != huge || m.Bytes()[huge-1] != 9 {
		t.Errorf("Map of a hugetlb memfd: PageSize %d, Len %d, last byte %d", m.PageSize(), m.Len(), m.Bytes()[huge-1])
	}
}

// smapsField returns a field (kB) of the /proc/self/smaps entry that starts
// at start, or -1.
func smapsField(start uintptr, field string) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	in := false
	head := fmt.Sprintf("%x-", start)
	for s.Scan() {
		line := s.Text()
		if strings.Contains(strings.Fields(line)[0], "-") {
			in = strings.HasPrefix(line, head)
			continue
		}
		if v, ok := strings.CutPrefix(line, field+":"); in && ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}

func TestTransparentHugePages(t *testing.T) {
	size := thpSize()
	r, err := Alloc(1, TransparentHugePages, Prefault)
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("no transparent huge pages: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != size || r.PageSize() != os.Getpagesize() {
		t.Fatalf("Len %d, PageSize %d; want %d, %d", r.Len(), r.PageSize(), size, os.Getpagesize())
	}
	mode, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
	kb := smapsField(addr(r.Bytes()), "ShmemPmdMapped")
	if kb > 0 {
		t.Logf("%d kB mapped with huge pages; shmem_enabled: %s", kb, strings.TrimSpace(string(mode)))
		return
	}
	t.Skipf("madvise(MADV_HUGEPAGE) accepted, but the kernel mapped no huge page (ShmemPmdMapped %d kB; address %#x; shmem_enabled: %s)",
		kb, addr(r.Bytes()), strings.TrimSpace(string(mode)))
}
