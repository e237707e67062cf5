package linkcut_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// roleEnv makes the test binary a server or a client: "server TRANSPORT IP"
// or "client TRANSPORT IP ADDR".
const roleEnv = "GOVERBS_LINKCUT_ROLE"

const (
	region = 1 << 20 // the server's buffer the client WRITEs into
	size   = 64 << 10
	depth  = 8
)

func TestMain(m *testing.M) {
	testkit.ServeChild(roleEnv, func(v string) error {
		f := strings.Fields(v)
		switch {
		case len(f) == 3 && f[0] == "server":
			return server(f[1], f[2])
		case len(f) == 4 && f[0] == "client":
			return client(f[1], f[2], f[3])
		}
		return fmt.Errorf("bad role %q", v)
	})
	os.Exit(m.Run())
}

// shortRNR is the RNR budget of the "iwarp-rnr100ms" case: short enough
// that the QP's timeout × tries alone sets TCP_USER_TIMEOUT (see package
// iwarp: at least the budget and 400 ms more).
const shortRNR = 100 * time.Millisecond

func open(transport, ip string) (*verbs.Device, error) {
	switch transport {
	case "roce":
		return verbs.Open(roce.New(roce.Options{Addr: ip + ":0"}))
	case "iwarp":
		return verbs.Open(iwarp.New())
	case "iwarp-rnr100ms":
		return verbs.Open(iwarp.New(iwarp.RNRBudget(shortRNR)))
	}
	return nil, fmt.Errorf("unknown transport %q", transport)
}

// TestLinkCut takes the link between a client and a server down while the
// client streams WRITEs, then brings it back and connects again.
func TestLinkCut(t *testing.T) {
	if testing.Short() {
		t.Skip("link cut: not in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("link cut: needs root for network namespaces")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("link cut: needs iproute2 (ip)")
	}
	for i, tr := range []string{"roce", "iwarp", "iwarp-rnr100ms"} {
		t.Run(tr, func(t *testing.T) { linkCut(t, ip, tr, i) })
	}
}

// netns is a pair of namespaces joined by a veth link.
type netns struct {
	ip         string
	srv, cli   string // namespace names
	srvIP, cIP string
	cliDev     string // the client's end of the link
}

func newNetns(t *testing.T, ip string, n int) *netns {
	p := fmt.Sprintf("gvlc%d_%d", os.Getpid()%100000, n)
	ns := &netns{ip: ip, srv: p + "s", cli: p + "c",
		srvIP: fmt.Sprintf("10.202.%d.1", n), cIP: fmt.Sprintf("10.202.%d.2", n), cliDev: "lcc"}
	t.Cleanup(func() {
		exec.Command(ip, "netns", "del", ns.srv).Run()
		exec.Command(ip, "netns", "del", ns.cli).Run()
	})
	for _, args := range [][]string{
		{"netns", "add", ns.srv},
		{"netns", "add", ns.cli},
		// Made inside the namespaces: nothing is added to the caller's.
		{"-n", ns.srv, "link", "add", "lcs", "type", "veth", "peer", "name", ns.cliDev, "netns", ns.cli},
		{"-n", ns.srv, "addr", "add", ns.srvIP + "/24", "dev", "lcs"},
		{"-n", ns.cli, "addr", "add", ns.cIP + "/24", "dev", ns.cliDev},
		{"-n", ns.srv, "link", "set", "lcs", "up"},
		{"-n", ns.cli, "link", "set", ns.cliDev, "up"},
		{"-n", ns.srv, "link", "set", "lo", "up"},
		{"-n", ns.cli, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Skipf("link cut: cannot build namespaces (ip %s: %v: %s)", strings.Join(args, " "), err, out)
		}
	}
	return ns
}

// child starts the test binary in namespace ns.
func (n *netns) child(t *testing.T, ns, role string) *testkit.Child {
	cmd := testkit.ChildCommand(context.Background(), roleEnv, role)
	cmd.Args = append([]string{n.ip, "netns", "exec", ns}, cmd.Args...)
	cmd.Path = n.ip
	return testkit.StartChild(t, cmd, true)
}

func (n *netns) link(t *testing.T, state string) {
	if out, err := exec.Command(n.ip, "-n", n.cli, "link", "set", n.cliDev, state).CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s %s: %v: %s", n.cliDev, state, err, out)
	}
}

func linkCut(t *testing.T, ip, tr string, n int) {
	ns := newNetns(t, ip, n)
	srv := ns.child(t, ns.srv, "server "+tr+" "+ns.srvIP)
	addr := srv.Expect(t, "listening")
	cli := ns.child(t, ns.cli, "client "+tr+" "+ns.cIP+" "+addr)
	bound, err := time.ParseDuration(cli.Expect(t, "bound"))
	if err != nil {
		t.Fatal(err)
	}
	cli.Expect(t, "streaming")
	cut := time.Now()
	ns.link(t, "down")
	line := expectWithin(t, cli, "failed", bound+5*time.Second)
	took := time.Since(cut)
	t.Logf("%s: link down -> first failed WR after %v (bound %v): %s", tr, took.Round(time.Millisecond), bound, line)
	if !strings.HasPrefix(line, verbs.StatusRetryExcErr.String()) {
		t.Errorf("the first WR after the cut completed %q, want %v", line, verbs.StatusRetryExcErr)
	}
	// The bound is nominal: each try's timer starts when its packets
	// leave and fires on a goroutine the scheduler may run late on a
	// loaded machine (IBA's own HCAs wait up to a few times the nominal
	// value). Twice it, and a second, is the limit of a sound test; the
	// log line is the figure.
	if took > 2*bound+time.Second {
		t.Errorf("the cut surfaced after %v, beyond twice the QP's bound %v", took, bound)
	}
	t.Logf("%s: %s", tr, cli.Expect(t, "drained"))
	ns.link(t, "up")
	cli.Say(t, "up")
	t.Logf("%s: %s", tr, expectWithin(t, cli, "reconnected", 20*time.Second))
	cli.CloseStdin()
	if err := cli.Wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, cli.Output())
	}
}

// expectWithin is Child.Expect with a longer wait: it looks for a line
// starting with prefix in everything the child printed.
func expectWithin(t *testing.T, c *testkit.Child, prefix string, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		exited := false
		select {
		case <-c.Done():
			exited = true // its last lines are in Output now
		case <-deadline:
			t.Fatalf("child did not say %q within %v:\n%s", prefix, d, c.Output())
		case <-time.After(20 * time.Millisecond):
		}
		for _, l := range strings.Split(c.Output(), "\n") {
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return strings.TrimSpace(strings.TrimPrefix(rest, ":"))
			}
		}
		if exited {
			t.Fatalf("child exited before %q:\n%s", prefix, c.Output())
		}
	}
}

// server accepts connections, each to a QP and a region the client may
// WRITE and READ, until its standard input ends.
func server(transport, ip string) error {
	dev, err := open(transport, ip)
	if err != nil {
		return err
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	mr, err := pd.RegisterMR(make([]byte, region), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		return err
	}
	desc, _ := mr.Remote().MarshalBinary()
	ln, err := dev.Listen(ip + ":0")
	if err != nil {
		return err
	}
	fmt.Println("listening", ln.Addr())
	go func() {
		for {
			req, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			cq, err := dev.CreateCQ(16)
			if err != nil {
				req.Reject(nil)
				continue
			}
			qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, ForCM: true,
				Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				req.Reject(nil)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			req.Accept(ctx, qp, verbs.ConnParam{PrivateData: desc})
			cancel()
		}
	}()
	bufio.NewReader(os.Stdin).ReadString('\n') // EOF: stop
	ln.Close()
	return nil
}

// client streams WRITEs until one fails, checks that every outstanding WR
// completes once, then waits for "up" and connects again.
func client(transport, ip, addr string) error {
	dev, err := open(transport, ip)
	if err != nil {
		return err
	}
	defer dev.Close()
	c, err := connect(dev, addr, 10*time.Second)
	if err != nil {
		return err
	}
	attr, err := c.qp.Query()
	if err != nil {
		return err
	}
	// The QP's ACK timeout per try, and RetryCnt retries after the first:
	// roce's requester gives up then; iwarp has TCP give up as long after
	// (TCP_USER_TIMEOUT), but no sooner than the RNR budget and 400 ms
	// (see package iwarp).
	bound := (4096 * time.Nanosecond << attr.Timeout) * time.Duration(attr.RetryCnt+1)
	switch transport {
	case "iwarp":
		bound = max(bound, iwarp.DefaultRNRBudget+400*time.Millisecond)
	case "iwarp-rnr100ms":
		bound = max(bound, shortRNR+400*time.Millisecond)
	}
	fmt.Println("bound", bound)
	posted, done := uint64(0), map[uint64]int{}
	post := func() error {
		posted++
		off := (posted % (region / size)) * size
		return c.qp.PostSend([]verbs.SendWR{{ID: posted, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{c.mr.SGE(0, size)}, Remote: c.remote.At(off)}})
	}
	for range depth {
		if err := post(); err != nil {
			return err
		}
	}
	wc := make([]verbs.WorkCompletion, depth)
	ok, failed := 0, false
	ctx, cancel := context.WithTimeout(context.Background(), bound+20*time.Second)
	defer cancel()
	for len(done) < int(posted) {
		n, err := c.cq.PollWait(ctx, wc)
		if err != nil {
			return fmt.Errorf("after %d completions of %d: %w", len(done), posted, err)
		}
		for _, w := range wc[:n] {
			done[w.ID]++
			if done[w.ID] > 1 {
				return fmt.Errorf("WR %d completed twice", w.ID)
			}
			switch {
			case w.Status == verbs.StatusSuccess && !failed:
				if ok++; ok == 16 {
					fmt.Println("streaming")
				}
				if err := post(); err != nil {
					return err
				}
			case w.Status == verbs.StatusSuccess:
				return fmt.Errorf("WR %d succeeded after an earlier one failed", w.ID)
			case !failed:
				failed = true
				fmt.Println("failed", w.Status)
			case w.Status != verbs.StatusWRFlushErr:
				return fmt.Errorf("WR %d after the failure completed %v, want flushed", w.ID, w.Status)
			}
		}
	}
	fmt.Printf("drained %d WRs, %d succeeded before the cut, every one completed once\n", posted, ok)
	c.close()
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return errors.New("the test went away before the link came back")
	}
	start := time.Now()
	c, err = connect(dev, addr, 15*time.Second)
	if err != nil {
		return fmt.Errorf("after the link came back: %w", err)
	}
	defer c.close()
	if err := c.verify(); err != nil {
		return err
	}
	fmt.Printf("reconnected after %v; WRITE and READ back correct\n", time.Since(start).Round(time.Millisecond))
	return nil
}

type conn struct {
	cq     *verbs.CQ
	qp     *verbs.QP
	mr     *verbs.MR
	pd     *verbs.PD
	remote verbs.RemoteBuf
}

// connect dials until it succeeds or d passes: right after the link comes
// back, neighbour discovery may still lose the first packets.
func connect(dev *verbs.Device, addr string, d time.Duration) (*conn, error) {
	deadline := time.Now().Add(d)
	for {
		c, err := dial(dev, addr)
		if err == nil || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func dial(dev *verbs.Device, addr string) (*conn, error) {
	c := &conn{}
	var err error
	if c.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if c.cq, err = dev.CreateCQ(2 * depth); err != nil {
		return nil, err
	}
	if c.qp, err = c.pd.CreateQP(verbs.QPInitAttr{SendCQ: c.cq, RecvCQ: c.cq, ForCM: true,
		Cap: verbs.QPCap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		c.close()
		return nil, err
	}
	if c.mr, err = c.pd.RegisterMR(make([]byte, 2*size), verbs.AccessLocalWrite); err != nil {
		c.close()
		return nil, err
	}
	for i := range c.mr.Bytes()[:size] {
		c.mr.Bytes()[i] = byte(i*7 + 3)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	info, err := dev.Dial(ctx, addr, c.qp, verbs.ConnParam{})
	if err == nil && len(info.PrivateData) >= verbs.RemoteBufSize {
		err = c.remote.UnmarshalBinary(info.PrivateData[:verbs.RemoteBufSize])
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// verify WRITEs the pattern and READs it back.
func (c *conn) verify() error {
	wrs := []verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{c.mr.SGE(0, size)}, Remote: c.remote.At(0)},
		{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{c.mr.SGE(size, size)}, Remote: c.remote.At(0)},
	}
	if err := c.qp.PostSend(wrs); err != nil {
		return err
	}
	wc := make([]verbs.WorkCompletion, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.cq.PollWait(ctx, wc); err != nil {
		return err
	}
	if err := wc[0].Err(); err != nil {
		return err
	}
	b := c.mr.Bytes()
	if !bytes.Equal(b[:size], b[size:]) {
		return errors.New("READ after the reconnect returned other bytes than the WRITE placed")
	}
	return nil
}

func (c *conn) close() {
	if c.qp != nil {
		c.qp.Close()
	}
	if c.mr != nil {
		c.mr.Deregister()
	}
	if c.cq != nil {
		c.cq.Close()
	}
	if c.pd != nil {
		c.pd.Close()
	}
}
