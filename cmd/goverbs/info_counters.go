package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/verbs"
)

// counterProbe is what goverbs info --counters reports for one transport:
// the counters of both QPs of a short exchange in this process, and those
// the devices keep for packets no QP claimed.
type counterProbe struct {
	Workload string          `json:"workload"`
	Client   []verbs.Counter `json:"client_qp,omitempty"`
	Server   []verbs.Counter `json:"server_qp,omitempty"`
	Device   []verbs.Counter `json:"device,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// The exchange: probeWrites WRITEs of probeSize bytes, then one READ of the
// same size back, each signalled.
const (
	probeWrites = 16
	probeSize   = 4096
)

// deviceCounters is implemented by providers that keep device-wide
// counters (roce: packets for no QP, bad ICRC, socket errors).
type deviceCounters interface {
	Counters() ([]provider.Counter, error)
}

// probeCounters connects two devices of t in this process, runs the
// exchange and reads the counters. Transports that cannot connect two
// devices in one process report why.
func probeCounters(t bench.Transport) *counterProbe {
	pr := &counterProbe{Workload: fmt.Sprintf("%d WRITEs and 1 READ of %d B between two devices in this process",
		probeWrites, probeSize)}
	if err := pr.run(t); err != nil {
		pr.Error = err.Error()
	}
	return pr
}

func (pr *counterProbe) run(t bench.Transport) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps, err := t.New(2, "127.0.0.1", bench.Open{})
	if err != nil {
		return err
	}
	var sides [2]*probeSide
	for i, p := range ps {
		dev, err := verbs.Open(p)
		if err != nil {
			return err
		}
		defer dev.Close()
		if sides[i], err = newProbeSide(dev); err != nil {
			return err
		}
	}
	client, server := sides[0], sides[1]
	if err := connectProbe(ctx, t, client, server); err != nil {
		return err
	}
	remote := server.mr.Remote()
	wrs := make([]verbs.SendWR, 0, probeWrites+1)
	for range probeWrites {
		wrs = append(wrs, verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{client.mr.SGE(0, probeSize)}, Remote: remote.At(0)})
	}
	wrs = append(wrs, verbs.SendWR{Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{client.mr.SGE(probeSize, probeSize)}, Remote: remote.At(0)})
	if err := client.qp.PostSend(wrs); err != nil {
		return err
	}
	if err := client.await(ctx, len(wrs)); err != nil {
		return err
	}
	pr.Client, pr.Server = client.qp.Counters(), server.qp.Counters()
	if dc, ok := ps[0].(deviceCounters); ok {
		pr.Device, _ = dc.Counters()
	}
	return nil
}

// probeSide is one device's PD, CQ, QP and 2 × probeSize registered bytes.
type probeSide struct {
	dev *verbs.Device
	cq  *verbs.CQ
	qp  *verbs.QP
	mr  *verbs.MR
}

func newProbeSide(dev *verbs.Device) (*probeSide, error) {
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, err
	}
	s := &probeSide{dev: dev}
	if s.cq, err = dev.CreateCQ(2 * (probeWrites + 1)); err != nil {
		return nil, err
	}
	s.qp, err = pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbs.QPCap{MaxSendWR: probeWrites + 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	s.mr, err = pd.RegisterMR(make([]byte, 2*probeSize),
		verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	return s, err
}

// connectProbe connects the client's QP to the server's through the
// transport's connection manager.
func connectProbe(ctx context.Context, t bench.Transport, client, server *probeSide) error {
	ln, err := server.dev.Listen(t.ListenAddr("127.0.0.1", "info-counters"))
	if err != nil {
		return err
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err == nil {
			_, err = req.Accept(ctx, server.qp, verbs.ConnParam{})
		}
		accepted <- err
	}()
	_, err = client.dev.Dial(ctx, ln.Addr(), client.qp, verbs.ConnParam{})
	return errors.Join(err, <-accepted)
}

// await waits for n successful completions.
func (s *probeSide) await(ctx context.Context, n int) error {
	wc := make([]verbs.WorkCompletion, n)
	for n > 0 {
		got, err := s.cq.Poll(wc[:n])
		if err != nil {
			return err
		}
		for _, c := range wc[:got] {
			if err := c.Err(); err != nil {
				return err
			}
		}
		if n -= got; n > 0 && got == 0 {
			if err := s.cq.Wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeCounters prints the probe under a transport's information: the
// counters that moved (JSON has them all).
func writeCounters(w io.Writer, pr *counterProbe) {
	if pr.Error != "" {
		fmt.Fprintf(w, "  counters          not probed: %s\n", pr.Error)
		return
	}
	if pr.Client == nil && pr.Server == nil && pr.Device == nil {
		fmt.Fprintln(w, "  counters          none kept by this transport")
		return
	}
	fmt.Fprintf(w, "  counters after %s:\n", pr.Workload)
	for _, g := range []struct {
		name string
		cs   []verbs.Counter
	}{{"client QP", pr.Client}, {"server QP", pr.Server}, {"device", pr.Device}} {
		if g.cs == nil {
			continue
		}
		fmt.Fprintf(w, "    %-10s", g.name)
		zero := 0
		for _, c := range g.cs {
			if c.Value == 0 {
				zero++
				continue
			}
			fmt.Fprintf(w, " %s=%d", c.Name, c.Value)
		}
		if zero > 0 {
			fmt.Fprintf(w, " (%d more at 0)", zero)
		}
		fmt.Fprintln(w)
	}
}
