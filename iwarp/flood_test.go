//go:build linux

package iwarp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// Listener floods (ReDMArk's resource exhaustion at connection set-up,
// issue 11 item 10): attackers on 127.0.0.0/8 keep many TCP connections
// to the victim's listener open that send nothing, or half an MPA
// Request, reconnecting as soon as the victim drops one; meanwhile honest
// goverbs clients dial, READ once and hang up. At least 99% of them must
// succeed, and their set-up p99 is reported. The CI version is small
// (a few hundred attackers, a second or two); GOVERBS_FLOOD=1 runs the
// figure of the issue at the defaults (1,500 attackers alive at once, more
// than the listener holds, 100,000 attempts or 60 s, 1,000 honest dials).

// floodPlan is one flood.
type floodPlan struct {
	attackers int           // attacker connections alive at once
	attempts  int64         // stop the attackers after this many connections
	maxTime   time.Duration // or after this long
	honest    int           // honest dials during the flood
	parallel  int           // of them at once
	half      bool          // attackers send half an MPA Request header
	oneSource bool          // every attacker dials from 127.0.0.2 (else spread over 127/8)
}

// floodResult is what a flood did.
type floodResult struct {
	attempts  int64
	maxAlive  int64
	evictions int64
	ok, fail  int
	setup     []time.Duration // of the honest dials that succeeded, sorted
	firstErr  error
	// The first refusal the victim reported for an honest client.
	honestRefused error
}

func (r *floodResult) quantile(q float64) time.Duration {
	if len(r.setup) == 0 {
		return 0
	}
	return r.setup[min(len(r.setup)-1, int(q*float64(len(r.setup))))]
}

func (r *floodResult) String() string {
	return fmt.Sprintf("%d attacker connections (%d alive at most), %d evictions; honest: %d ok, %d failed; set-up p50 %v p99 %v max %v",
		r.attempts, r.maxAlive, r.evictions, r.ok, r.fail, r.quantile(0.5), r.quantile(0.99), r.quantile(1))
}

// halfRequest is the first half of a well-formed MPA Request header.
var halfRequest = iw.AppendMPAFrame(nil, &iw.MPAFrameFields{Flags: iw.MPAEnhanced, Rev: 2,
	PrivateData: make([]byte, iw.IRDORDSize)})[:iw.MPAHeaderSize/2]

// needFiles skips the test when RLIMIT_NOFILE (which the Go runtime raises
// to its hard limit) cannot hold n more descriptors.
func needFiles(t *testing.T, n int) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < uint64(n) {
		t.Skipf("RLIMIT_NOFILE is %d; the flood needs about %d descriptors", rl.Cur, n)
	}
}

func runFlood(t *testing.T, p floodPlan, opts ...iwarp.Option) *floodResult {
	needFiles(t, 2*p.attackers+4*p.parallel+200)
	res := &floodResult{}
	var evictions atomic.Int64
	var honestRefusedMu sync.Mutex
	v := newVictim(t, append([]iwarp.Option{iwarp.OnRefused(func(remote string, err error) {
		if errors.Is(err, verbs.ErrLimit) {
			evictions.Add(1)
		}
		if host, _, _ := net.SplitHostPort(remote); host == "127.0.0.1" { // an honest client's
			honestRefusedMu.Lock()
			if res.honestRefused == nil {
				res.honestRefused = err
			}
			honestRefusedMu.Unlock()
		}
	})}, opts...)...)
	addr := v.ln.Addr()

	// The attackers.
	flood, halt := context.WithTimeout(context.Background(), p.maxTime)
	defer halt()
	var attempts, alive, maxAlive atomic.Int64
	var wg sync.WaitGroup
	dial := func() (net.Conn, error) {
		if p.oneSource {
			return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).Dial("tcp", addr)
		}
		return dialSpread(addr)
	}
	for range p.attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for {
				if flood.Err() != nil {
					return
				}
				if attempts.Add(1) > p.attempts {
					halt()
					return
				}
				c, err := dial()
				if err != nil {
					time.Sleep(time.Millisecond) // out of ports or descriptors for a moment
					continue
				}
				if n := alive.Add(1); n > maxAlive.Load() {
					maxAlive.Store(n) // approximate: a report, not a check
				}
				if p.half {
					c.Write(halfRequest)
				}
				// Hold it until the victim drops it, or the flood ends.
				done := context.AfterFunc(flood, func() { c.SetReadDeadline(time.Unix(1, 0)) })
				for {
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				done()
				c.Close()
				alive.Add(-1)
			}
		}()
	}
	// Let the flood fill the listener before the honest clients come.
	waitUntil := time.Now().Add(5 * time.Second)
	for attempts.Load() < int64(2*p.attackers) && time.Now().Before(waitUntil) {
		time.Sleep(time.Millisecond)
	}

	// The honest clients: dial, READ 64 bytes, hang up.
	cli := openDev(t)
	pd := must(cli.AllocPD())
	buf := must(pd.RegisterMR(make([]byte, 64*p.parallel), verbs.AccessLocalWrite))
	var mu sync.Mutex
	next := make(chan int)
	var hw sync.WaitGroup
	for w := range p.parallel {
		hw.Add(1)
		go func() {
			defer hw.Done()
			for range next {
				d, err := honestOnce(cli, pd, buf, w, addr)
				mu.Lock()
				if err == nil {
					res.ok++
					res.setup = append(res.setup, d)
				} else {
					res.fail++
					if res.firstErr == nil {
						res.firstErr = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := range p.honest {
		if i%16 == 0 {
			v.reap()
		}
		next <- i
	}
	close(next)
	hw.Wait()
	underFlood := flood.Err() == nil
	halt()
	wg.Wait()
	v.reap()
	slices.Sort(res.setup)
	res.attempts = min(attempts.Load(), p.attempts)
	res.maxAlive = maxAlive.Load()
	res.evictions = evictions.Load()
	if !underFlood {
		t.Logf("the flood ended before the honest clients did (%v or %d attempts)", p.maxTime, p.attempts)
	}
	return res
}

// honestOnce is one honest client: Dial (timed), a READ of the victim's
// region, and Close.
func honestOnce(cli *verbs.Device, pd *verbs.PD, buf *verbs.MR, slot int, addr string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cq, err := cli.CreateCQ(16)
	if err != nil {
		return 0, err
	}
	defer cq.Close()
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return 0, err
	}
	defer qp.Close()
	start := time.Now()
	info, err := cli.Dial(ctx, addr, qp, verbs.ConnParam{})
	setup := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("dial: %w", err)
	}
	var remote verbs.RemoteBuf
	if err := remote.UnmarshalBinary(info.PrivateData); err != nil {
		return 0, err
	}
	if err := qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{buf.SGE(64*slot, 64)}, Remote: remote.At(64)}}); err != nil {
		return 0, err
	}
	wc := make([]verbs.WorkCompletion, 1)
	for {
		n, err := cq.Poll(wc)
		if err != nil {
			return 0, err
		}
		if n == 1 {
			break
		}
		if err := cq.Wait(ctx); err != nil {
			return 0, fmt.Errorf("waiting for the READ: %w", err)
		}
	}
	if wc[0].Status != verbs.StatusSuccess {
		return 0, fmt.Errorf("READ: %v", wc[0].Status)
	}
	if !bytes.Equal(buf.Bytes()[64*slot:64*slot+64], pattern(regionSize, 3)[64:128]) {
		return 0, fmt.Errorf("READ returned other bytes")
	}
	return setup, nil
}

// TestListenerFloodHonestPeers: the listener keeps serving honest peers
// while silent or half-MPA connections flood it, from many sources or
// from one.
func TestListenerFloodHonestPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("flood skipped in -short mode")
	}
	big := os.Getenv("GOVERBS_FLOOD") != ""
	for _, kind := range []struct {
		name            string
		half, oneSource bool
	}{{"silent", false, false}, {"half MPA", true, false}, {"one source", true, true}} {
		t.Run(kind.name, func(t *testing.T) {
			// More attackers than the listener holds half-open (256 in
			// all here, 32 per source once 128 are held), so that every
			// newcomer evicts one.
			p := floodPlan{attackers: 300, attempts: 20_000, maxTime: 10 * time.Second, honest: 40, parallel: 4,
				half: kind.half, oneSource: kind.oneSource}
			if kind.oneSource {
				p.attackers = 200
			}
			if raceEnabled {
				p.honest = 20
			}
			if big {
				// More than DefaultMaxHalfOpen alive, so that the flood
				// evicts (1,000, the figure, fits and evicts none).
				p = floodPlan{attackers: 1500, attempts: 100_000, maxTime: 60 * time.Second, honest: 1000, parallel: 4,
					half: kind.half, oneSource: kind.oneSource}
			}
			var limits []iwarp.Option
			if !big { // the defaults would absorb a flood this small
				limits = append(limits, iwarp.HalfOpenLimit(256, iwarp.DefaultMaxHalfOpenPerSource))
			}
			res := runFlood(t, p, limits...)
			t.Log(res)
			// At most 1 %; under the race detector, with 20 honest
			// dialers, one: there a dialer can be descheduled between its
			// TCP connect and its MPA Request for longer than the flood
			// takes to cycle the 256 slots (about 1,500 connections a
			// second), and then it is the oldest silent connection the
			// eviction finds (CI failed that way once: 1 of 20, set-up
			// p99 35 ms). The defaults (1,024 slots) are not under test.
			allowed := (res.ok + res.fail) / 100
			if raceEnabled {
				allowed = max(allowed, 1)
			}
			if res.fail > allowed {
				t.Errorf("%d of %d honest connections failed during the flood (first: %v; the victim said %v)",
					res.fail, res.ok+res.fail, res.firstErr, res.honestRefused)
			}
			if res.evictions == 0 {
				t.Errorf("the flood never filled the listener: no connection was evicted")
			}
		})
	}
}
