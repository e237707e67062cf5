package bench

import (
	"fmt"

	"github.com/goverbs/goverbs/verbs"
)

// params are the settings of one test session after defaults and device
// limits: both sides compute them from the same Config, so both agree on
// every depth and on the layout of each connection's buffer.
type params struct {
	Test    string `json:"test"`
	MaxSize int64  `json:"max_size"`
	TxDepth int    `json:"tx_depth"`
	RxDepth int    `json:"rx_depth"`
	CQMod   int    `json:"cq_mod"`
	Inline  int    `json:"inline"`
	// TxSlots and RxSlots are the distinct message buffers per
	// connection: one each unless validating, where every message in
	// flight needs its own so it can be checked.
	TxSlots int `json:"tx_slots"`
	RxSlots int `json:"rx_slots"`
	// Credits turns on flow control for SEND tests on transports without
	// RNR retry (iWARP): a SEND that found no receive would end the
	// connection there.
	Credits bool `json:"credits"`
	// PollWrite detects a peer's WRITE by polling the last byte of the
	// buffer (perftest's method) rather than by a WRITE with immediate.
	PollWrite bool `json:"poll_write"`
	// Fence ends a WRITE or SEND stream with a zero-length READ, whose
	// response proves every earlier WRITE placed, on devices whose WRITE
	// completion does not.
	Fence bool `json:"fence"`
}

// Receives and sends beyond the data window: control messages (credits,
// window and end markers) travel in reserved receives, and fences and
// markers occupy send slots.
const (
	reserveRecv = 8
	reserveSend = 4
	// slotBudget bounds the message buffers of one connection when
	// validation needs one per message in flight.
	slotBudget = 64 << 20
	// defaultInline is perftest's usual inline size for latency tests.
	defaultInline = 220
)

// newParams derives a session's settings for test t on a device with caps.
func newParams(cfg *Config, t Test, caps verbs.Caps) (params, error) {
	p := params{Test: t.Name, TxDepth: cfg.TxDepth, RxDepth: cfg.RxDepth, CQMod: cfg.CQMod, Inline: cfg.Inline}
	for _, s := range cfg.sizes(t) {
		p.MaxSize = max(p.MaxSize, s)
	}
	lat := t.Kind == Latency
	// Defaults fit the device's queues (libfabric's tcp provider queues
	// 256 WRs); depths the user asked for are checked against them below.
	limit := int(caps.MaxQPWR)
	if p.TxDepth == 0 {
		p.TxDepth = min(pick(lat, 1, 128), limit-reserveSend)
	}
	if p.RxDepth == 0 {
		p.RxDepth = min(pick(lat, 16, 512), limit-reserveRecv)
	}
	if p.CQMod == 0 {
		p.CQMod = pick(lat, 1, 100)
	}
	switch {
	case cfg.NoInline:
		p.Inline = 0
	case p.Inline == 0:
		p.Inline = pick(lat, min(defaultInline, int(caps.MaxInlineData)), 0)
	}
	if p.Inline > int(caps.MaxInlineData) {
		return p, &ConfigError{Field: "inline", Msg: fmt.Sprintf("%d bytes: %s sends at most %d bytes inline", p.Inline, caps.Name, caps.MaxInlineData)}
	}
	if t.Op == verbs.OpRead || t.Op == verbs.OpFetchAdd {
		p.Inline = 0 // only SEND and WRITE carry inline payloads
	}
	if uint64(p.MaxSize) > caps.MaxMsgSize {
		return p, &ConfigError{Field: "size", Msg: fmt.Sprintf("%d bytes: %s carries messages of at most %d bytes", p.MaxSize, caps.Name, caps.MaxMsgSize)}
	}
	p.TxSlots, p.RxSlots = 1, 1
	if cfg.Validate {
		slots := max(int(slotBudget/max(p.MaxSize, 1)), 1)
		p.TxSlots, p.RxSlots = patternSafe(min(p.TxDepth, slots)), patternSafe(min(p.RxDepth, slots))
		p.TxDepth = p.TxSlots // every message in flight keeps its own buffer
		if t.Op == verbs.OpRead || t.Op == verbs.OpFetchAdd {
			p.CQMod = 1 // each result is checked when its completion arrives
		}
	}
	p.CQMod = min(p.CQMod, p.TxDepth)
	if p.TxDepth+reserveSend > limit || p.RxDepth+reserveRecv > limit {
		return p, &ConfigError{Field: "tx-depth", Msg: fmt.Sprintf("%s queues at most %d work requests per QP", caps.Name, limit)}
	}
	p.Credits = t.Op == verbs.OpSend && !caps.RNRRetry
	p.PollWrite = t.Name == "write-lat" && !raceEnabled && !cfg.Events
	p.Fence = caps.WriteCompletion != verbs.CompletionPlaced
	return p, needOps(t, &p, cfg, caps)
}

// patternSafe avoids slot counts that are multiples of the pattern period
// (255 seeds): a slot would then hold, from an earlier message, exactly the
// pattern of the next one, and a missing WRITE would pass validation.
func patternSafe(slots int) int {
	if slots%255 == 0 {
		return slots - 1
	}
	return slots
}

// needOps checks that the device executes every opcode the session posts.
func needOps(t Test, p *params, cfg *Config, caps verbs.Caps) error {
	ops := []verbs.Opcode{verbs.OpRead} // fences and the READ tests
	switch {
	case t.Op == verbs.OpFetchAdd:
		ops = append(ops, atomicOp(cfg))
	case t.Kind == Bandwidth || t.Kind == Latency:
		ops = append(ops, t.Op)
	}
	if t.Op == verbs.OpWrite && t.Kind == Latency && !p.PollWrite {
		ops = append(ops, verbs.OpWriteWithImm)
	}
	if t.Kind == Bandwidth && (t.Op == verbs.OpSend || cfg.Validate) {
		ops = append(ops, verbs.OpSendWithImm) // end markers, credits, windows
	}
	for _, op := range ops {
		if !caps.Opcodes.Has(op) {
			return &UnsupportedError{Test: t.Name, Transport: caps.Transport, Op: op}
		}
	}
	return nil
}

// UnsupportedError reports a test the transport cannot run.
type UnsupportedError struct {
	Test, Transport string
	Op              verbs.Opcode
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("bench: %s needs %v, which %s does not execute", e.Test, e.Op, e.Transport)
}

// atomicOp returns the atomic operation of the run.
func atomicOp(cfg *Config) verbs.Opcode {
	if cfg.Atomic == "cas" {
		return verbs.OpCompareSwap
	}
	return verbs.OpFetchAdd
}

func pick(cond bool, a, b int) int {
	if cond {
		return a
	}
	return b
}

// Buffer layout of one connection, identical on both sides: the atomic
// target word, then one 8-byte result per send slot, then the send slots,
// then the receive slots. Every part starts on a cache line.
const (
	lineSize   = 64
	atomicOff  = 0
	resultsOff = lineSize
)

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// slotLen is the length of one message buffer.
func (p *params) slotLen() int64 { return roundUp(max(p.MaxSize, 1), lineSize) }

// txOff is the offset of the first send slot.
func (p *params) txOff() int64 { return resultsOff + roundUp(int64(p.TxSlots)*8, lineSize) }

// rxOff is the offset of the first receive slot.
func (p *params) rxOff() int64 { return p.txOff() + int64(p.TxSlots)*p.slotLen() }

// bufLen is the length of a connection's buffer.
func (p *params) bufLen() int64 { return p.rxOff() + int64(p.RxSlots)*p.slotLen() }
