//go:build linux

package shm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// Where the user decides, shm says whether a region is direct: the MR
// answers, Caps names the rule, a region over Go memory with a remote right
// logs one line per device (or is refused, or allowed silently).
func TestOwnerServedIsVisible(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logf := func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	s := newSide(t, shm.Options{Logf: logf})
	if got := s.dev.Caps().DirectAccess; got != verbs.DirectShareable {
		t.Errorf("Caps.DirectAccess = %v", got)
	}
	for range 2 {
		mr := must(s.pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteRead))(t)
		if mr.DirectRemoteAccess() {
			t.Error("a region over Go memory reported direct")
		}
	}
	local := must(s.pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite))(t) // no remote right: no notice
	_ = local
	m := must(mem.Alloc(1 << 16))(t)
	t.Cleanup(func() { m.Close() })
	direct := must(s.pd.RegisterMemory(m, verbs.AccessLocalWrite|verbs.AccessRemoteWrite))(t)
	if !direct.DirectRemoteAccess() {
		t.Error("a region over mem.Alloc memory reported owner-served")
	}
	if err := direct.Deregister(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 || !strings.Contains(lines[0], "mem.Alloc") || !strings.Contains(lines[0], "OwnerServedAllow") {
		t.Errorf("notices %q: want one that says what to do", lines)
	}

	quiet := newSide(t, shm.Options{OwnerServed: shm.OwnerServedAllow, Logf: func(string, ...any) { t.Error("a notice with OwnerServedAllow") }})
	must(quiet.pd.RegisterMR(make([]byte, 4096), verbs.AccessRemoteRead))(t)

	strict := newSide(t, shm.Options{OwnerServed: shm.OwnerServedRefuse})
	if _, err := strict.pd.RegisterMR(make([]byte, 4096), verbs.AccessRemoteRead); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("OwnerServedRefuse: %v, want ErrNotSupported", err)
	}
	if _, err := strict.pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite); err != nil {
		t.Errorf("a local-only region refused: %v", err)
	}
}

// shm takes the host:port addresses the network transports take, as the
// name of a socket on this host, so a program written for them runs
// unchanged; port 0 picks a free name that Addr reports.
func TestHostPortAddress(t *testing.T) {
	a, b := newSide(t, shm.Options{}), newSide(t, shm.Options{})
	ln := must(b.dev.Listen("127.0.0.1:0"))(t)
	defer ln.Close()
	addr := ln.Addr()
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("Addr() = %q, want 127.0.0.1 with the port picked", addr)
	}
	if _, err := a.dev.Listen(addr); !errors.Is(err, verbs.ErrBusy) {
		t.Errorf("a second Listen on %s: %v, want ErrBusy", addr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		if req, err := ln.Accept(ctx); err == nil {
			req.Accept(ctx, b.qp, verbs.ConnParam{})
		}
	}()
	if _, err := a.dev.Dial(ctx, addr, a.qp, verbs.ConnParam{}); err != nil {
		t.Fatalf("Dial %s: %v", addr, err)
	}
	if _, err := a.dev.Dial(ctx, "127.0.0.1:1", must(a.pd.CreateQP(verbs.QPInitAttr{SendCQ: a.cq, RecvCQ: a.cq, Cap: testCap}))(t),
		verbs.ConnParam{}); !errors.Is(err, verbs.ErrRejected) {
		t.Errorf("Dial where nobody listens: %v, want ErrRejected", err)
	}
}
