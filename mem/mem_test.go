package mem

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

func TestMain(m *testing.M) {
	before := openFds()
	code := m.Run()
	if leak := leaks(before); code == 0 && leak != "" {
		println("mem: leak:", leak)
		code = 1
	}
	os.Exit(code)
}

func mustAlloc(t testing.TB, size int, opts ...Option) *Region {
	t.Helper()
	r, err := Alloc(size, opts...)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", size, err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func TestAllocAlignmentAndRounding(t *testing.T) {
	page := os.Getpagesize()
	for _, size := range []int{1, page - 1, page, page + 1, 3*page + 7, 1 << 20} {
		r := mustAlloc(t, size)
		want := (size + page - 1) / page * page
		b := r.Bytes()
		if r.Len() != want || len(b) != want || cap(b) != want {
			t.Errorf("Alloc(%d): Len %d, len %d, cap %d; want %d", size, r.Len(), len(b), cap(b), want)
		}
		if r.PageSize() != page {
			t.Errorf("Alloc(%d): PageSize %d, want %d", size, r.PageSize(), page)
		}
		if a := addr(b); a%uintptr(page) != 0 {
			t.Errorf("Alloc(%d): address %#x not aligned to %d", size, a, page)
		}
		if i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 }); i >= 0 {
			t.Errorf("Alloc(%d): byte %d not zero", size, i)
		}
	}
}

func TestAllocInvalidSize(t *testing.T) {
	for _, size := range []int{0, -1, math.MinInt, math.MaxInt} {
		if r, err := Alloc(size); err == nil {
			r.Close()
			t.Errorf("Alloc(%d) succeeded", size)
		}
	}
}

func TestWriteRead(t *testing.T) {
	r := mustAlloc(t, 5*os.Getpagesize())
	b := r.Bytes()
	for i := range b {
		b[i] = byte(i * 7)
	}
	c := r.Bytes()
	for i := range c {
		if c[i] != byte(i*7) {
			t.Fatalf("byte %d = %d, want %d", i, c[i], byte(i*7))
		}
	}
}

func TestCloseSemantics(t *testing.T) {
	r, err := Alloc(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := r.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	if b := r.Bytes(); b != nil {
		t.Errorf("Bytes after Close: len %d, want nil", len(b))
	}
	if n := r.Len(); n != 0 {
		t.Errorf("Len after Close: %d, want 0", n)
	}
	if _, err := r.Fd(); !errors.Is(err, ErrClosed) {
		t.Errorf("Fd after Close: %v, want ErrClosed", err)
	}
	if err := r.Persist(0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Persist after Close: %v, want ErrClosed", err)
	}
	if err := r.Acquire(); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
	if s := r.String(); s != "mem.Region("+r.kind.String()+", closed)" {
		t.Errorf("String after Close: %q", s)
	}
}

func TestBusyWhileAcquired(t *testing.T) {
	r := mustAlloc(t, 1)
	for range 2 {
		if err := r.Acquire(); err != nil {
			t.Fatal(err)
		}
	}
	for held := 2; held > 0; held-- {
		if err := r.Close(); !errors.Is(err, ErrBusy) {
			t.Fatalf("Close with %d holds: %v, want ErrBusy", held, err)
		}
		// A refused Close changes nothing.
		r.Bytes()[0] = byte(held)
		if r.Bytes()[0] != byte(held) || r.Len() == 0 {
			t.Fatal("region changed by a refused Close")
		}
		r.Release()
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close after Release: %v", err)
	}
}

func TestReleaseWithoutAcquirePanics(t *testing.T) {
	r := mustAlloc(t, 1)
	defer func() {
		if recover() == nil {
			t.Error("unbalanced Release did not panic")
		}
	}()
	r.Release()
}

// TestCloseRacesAcquire checks that Close never unmaps memory that a
// successful Acquire holds: each holder reads the memory while holding it,
// which would fault if Close had unmapped it.
func TestCloseRacesAcquire(t *testing.T) {
	for range 50 {
		r, err := Alloc(1)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					if err := r.Acquire(); err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("Acquire: %v", err)
						}
						return
					}
					b := r.Bytes()
					if b == nil {
						t.Error("Bytes nil while held")
					} else {
						_ = b[0]
					}
					r.Release()
				}
			})
		}
		for {
			err := r.Close()
			if err == nil {
				break
			}
			if !errors.Is(err, ErrBusy) {
				t.Fatalf("Close: %v", err)
			}
			runtime.Gosched()
		}
		wg.Wait()
	}
}

func TestAnonymousNotPersistent(t *testing.T) {
	r := mustAlloc(t, 1)
	if r.Persistent() {
		t.Error("Alloc region claims to be persistent")
	}
	if err := r.Persist(0, 1); !errors.Is(err, ErrNotPersistent) {
		t.Errorf("Persist: %v, want ErrNotPersistent", err)
	}
}

func TestErrNotSupportedMatchesStdlib(t *testing.T) {
	if !errors.Is(ErrNotSupported, errors.ErrUnsupported) {
		t.Error("ErrNotSupported does not match errors.ErrUnsupported")
	}
	_, err := MapFile(filepath.Join(t.TempDir(), "f"), 1, HugePages)
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("MapFile with HugePages: %v, want ErrNotSupported", err)
	}
}

func TestPrefaultKeepsZeroes(t *testing.T) {
	r := mustAlloc(t, 3*os.Getpagesize()+1, Prefault)
	if i := bytes.IndexFunc(r.Bytes(), func(r rune) bool { return r != 0 }); i >= 0 {
		t.Errorf("byte %d not zero after Prefault", i)
	}
}

func mustMapFile(t *testing.T, path string, size int, opts ...Option) *Region {
	t.Helper()
	r, err := MapFile(path, size, opts...)
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("MapFile: %v", err)
	}
	if err != nil {
		t.Fatalf("MapFile(%d): %v", size, err)
	}
	return r
}

func TestMapFilePersist(t *testing.T) {
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "region")
	r := mustMapFile(t, path, 2*page+100)
	if r.Len() != 3*page || !r.Persistent() || r.PageSize() != page {
		t.Fatalf("MapFile: Len %d, Persistent %v, PageSize %d", r.Len(), r.Persistent(), r.PageSize())
	}
	msg := []byte("bytes that must survive a power cut")
	off := page - 10 // straddles a page boundary
	copy(r.Bytes()[off:], msg)
	if err := r.Persist(off, len(msg)); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if err := r.Persist(0, r.Len()); err != nil {
		t.Fatalf("Persist whole region: %v", err)
	}
	if err := r.Persist(r.Len(), 0); err != nil {
		t.Errorf("Persist of an empty range at the end: %v", err)
	}
	for _, bad := range [][2]int{{-1, 1}, {0, -1}, {0, r.Len() + 1}, {r.Len(), 1}, {1, math.MaxInt}, {math.MaxInt, 1}} {
		if err := r.Persist(bad[0], bad[1]); err == nil {
			t.Errorf("Persist(%d, %d) succeeded", bad[0], bad[1])
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3*page || !bytes.Equal(got[off:off+len(msg)], msg) {
		t.Fatalf("file after Close: %d bytes, %q at %d", len(got), got[off:off+len(msg)], off)
	}

	// Size 0 maps the whole existing file.
	r = mustMapFile(t, path, 0)
	defer r.Close()
	if r.Len() != 3*page || !bytes.Equal(r.Bytes()[off:off+len(msg)], msg) {
		t.Fatalf("reopened: Len %d, %q", r.Len(), r.Bytes()[off:off+len(msg)])
	}
}

func TestMapFileNeverShrinks(t *testing.T) {
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, bytes.Repeat([]byte{7}, 3*page+5), 0o600); err != nil {
		t.Fatal(err)
	}
	r := mustMapFile(t, path, 1, Prefault)
	if r.Len() != page || r.Bytes()[page-1] != 7 {
		t.Errorf("Len %d, last byte %d", r.Len(), r.Bytes()[page-1])
	}
	r.Close()
	if st, err := os.Stat(path); err != nil || st.Size() != int64(3*page+5) {
		t.Errorf("file size after MapFile(1): %v, %v", st.Size(), err)
	}
	// Size 0 of a file that is not a multiple of the page grows it to one.
	r = mustMapFile(t, path, 0)
	r.Close()
	if st, err := os.Stat(path); err != nil || st.Size() != int64(4*page) {
		t.Errorf("file size after MapFile(0): %v, %v", st.Size(), err)
	}
}

func TestMapFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := MapFile(filepath.Join(dir, "f"), 0); errors.Is(err, ErrNotSupported) {
		t.Skip(err)
	}
	for name, f := range map[string]func() (*Region, error){
		"negative size":  func() (*Region, error) { return MapFile(filepath.Join(dir, "neg"), -1) },
		"missing dir":    func() (*Region, error) { return MapFile(filepath.Join(dir, "no", "f"), 1) },
		"directory":      func() (*Region, error) { return MapFile(dir, 1) },
		"size 0 of new":  func() (*Region, error) { return MapFile(filepath.Join(dir, "new"), 0) },
		"too large size": func() (*Region, error) { return MapFile(filepath.Join(dir, "huge"), math.MaxInt) },
	} {
		if r, err := f(); err == nil {
			r.Close()
			t.Errorf("%s: MapFile succeeded", name)
		}
	}
	// A file MapFile created and then failed to map is removed again.
	for _, name := range []string{"neg", "new", "huge"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: left behind: %v", name, err)
		}
	}
}
